package launch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// TestBeforeStartPrecedesAgent: "go" is written without waiting for
// "ready", but only once Session.BeforeStart has returned (run takes the
// session review's first snapshot there, which an agent that started
// first could race). BeforeStart takes its time and then makes a marker;
// the agent, confined and in its view, exits 3 if the marker is not
// there. Control: a marker made only after BeforeStart returned is not
// there when the agent looks, so the check can fail.
func TestBeforeStartPrecedesAgent(t *testing.T) {
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	writeCanary(t, canary)
	null := devNull(t)
	run := func(marker string, before func() error) int {
		pl := &landlock.Plan{Handled: landlock.ReadFile | landlock.ReadDir | landlock.Execute, Canary: canary,
			Rules: []landlock.Rule{dirRule(t, "/usr", readExec), dirRule(t, "/etc", readExec)}}
		s := Session{Plan: pl, Path: "/usr/bin/sh", Argv: []string{"sh", "-c", `test -e "$1" || exit 3`, "sh", marker},
			Stdin: null, Stdout: null, Stderr: null, View: &landlock.View{}, Cwd: "/", BeforeStart: before}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		code, err := Run(ctx, s)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		return code
	}
	marker := filepath.Join(dir, "taken")
	code := run(marker, func() error {
		time.Sleep(300 * time.Millisecond) // the agent would have started long before
		return os.WriteFile(marker, nil, 0o644)
	})
	if code != 0 {
		t.Errorf("the agent started before BeforeStart returned: exit %d, want 0", code)
	}
	late := filepath.Join(dir, "late")
	code = run(late, func() error {
		go func() {
			time.Sleep(300 * time.Millisecond)
			os.WriteFile(late, nil, 0o644)
		}()
		return nil
	})
	if code != 3 {
		t.Errorf("control, the marker made after BeforeStart returned: exit %d, want 3", code)
	}
}

// TestBeforeStartErrorStopsAgent: an error from Session.BeforeStart (run:
// a kept plan that no longer holds) ends the init stage, which has its
// configuration and may be ready, without starting the agent, and Run
// returns the error. The agent would make a file; control: with no error
// it does.
func TestBeforeStartErrorStopsAgent(t *testing.T) {
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	writeCanary(t, canary)
	out := filepath.Join(dir, "out")
	sharedDir(t, out)
	null := devNull(t)
	stale := errors.New("the kept plan no longer holds")
	for _, c := range []struct {
		name   string
		before error
	}{{"the control, no error", nil}, {"an error", stale}} {
		ran := filepath.Join(out, strings.ReplaceAll(c.name, " ", "-"))
		pl := &landlock.Plan{Handled: readExec | landlock.WriteFile | landlock.MakeReg, Canary: canary,
			Rules: []landlock.Rule{dirRule(t, "/usr", readExec), dirRule(t, "/etc", readExec), dirRule(t, out, landlock.WriteFile|landlock.MakeReg)}}
		s := Session{Plan: pl, Path: "/usr/bin/sh", Argv: []string{"sh", "-c", `: > "$1"`, "sh", ran},
			Stdin: null, Stdout: null, Stderr: null, View: &landlock.View{}, Cwd: "/",
			BeforeStart: func() error { time.Sleep(100 * time.Millisecond); return c.before }}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		code, err := Run(ctx, s)
		cancel()
		_, statErr := os.Stat(ran)
		switch {
		case c.before == nil && (err != nil || code != 0 || statErr != nil):
			t.Errorf("%s: exit %d, %v; the agent's file: %v", c.name, code, err, statErr)
		case c.before != nil && (!errors.Is(err, stale) || statErr == nil):
			t.Errorf("%s: %v, want the error; the agent's file: %v, want none", c.name, err, statErr)
		}
	}
}

// TestInitStageReportsRefusedNamespacesAtOnce: started for a view where
// user namespaces are refused (a child user namespace whose
// user.max_user_namespaces is 0, which leaves the host untouched), the
// init stage reports the refusal, with the view flag, before any
// configuration comes: the supervisor, which looks for it as it sends
// the configuration, starts again without a view at once (found by
// review: it waited for the session review's first walk). It then reads
// the configuration and exits 125. Control: where namespaces work,
// nothing comes before the configuration.
func TestInitStageReportsRefusedNamespacesAtOnce(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("util-linux's unshare is needed: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := newConfig(&landlock.Plan{Handled: landlock.ReadFile, Canary: "/etc/passwd"}, "/bin/true", []string{"true"}, nil)
	cfg.View = &landlock.View{}
	for _, refused := range []bool{true, false} {
		conn, child, err := syncPair()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, InitArg, ViewArg)
		if refused {
			cmd = exec.Command(unshare, "-Ur", "/bin/sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`,
				"sh", self, InitArg, ViewArg)
		}
		cmd.ExtraFiles = []*os.File{child}
		cmd.Env = []string{}
		stderr := tempFile(t)
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		child.Close()
		wait := 300 * time.Millisecond
		if refused {
			wait = 10 * time.Second
		}
		conn.SetDeadline(time.Now().Add(wait))
		var rep report
		err = readFrame(conn, &rep)
		switch {
		case refused && (err != nil || rep.Type != msgError || !rep.View || !strings.Contains(rep.Msg, "creating the session's namespaces")):
			t.Errorf("refused: before the configuration: %+v, %v; want an error with the view flag (stderr %q)", rep, err, contents(stderr))
		case !refused && !errors.Is(err, os.ErrDeadlineExceeded):
			t.Errorf("control: before the configuration: %+v, %v; want nothing", rep, err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if err := writeRawFrame(conn, cfg.encode()); err != nil {
			t.Errorf("refused %v: sending the configuration: %v", refused, err)
		}
		if !refused {
			if err := readFrame(conn, &rep); err != nil || rep.Type != msgReady {
				t.Errorf("control: %+v, %v; want ready (stderr %q)", rep, err, contents(stderr))
			}
		}
		conn.Close() // no "go"
		cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != 125 {
			t.Errorf("refused %v: exit %d, want 125", refused, code)
		}
	}
}

// TestFailedCanaryStartsNoAgent: "go" is in the socket before the init
// stage has applied the floor, so only the init stage's own check stands
// between a floor not in force and the agent. A plan whose canary the
// rules grant (the floor does not deny it) is refused after Landlock: Run
// reports the floor not in force, and the agent, which would make a file,
// never runs. Control: the canary outside the rules, the same agent runs.
func TestFailedCanaryStartsNoAgent(t *testing.T) {
	dir := t.TempDir()
	granted := filepath.Join(dir, "granted")
	out := filepath.Join(dir, "out")
	sharedDir(t, granted)
	sharedDir(t, out)
	null := devNull(t)
	for _, c := range []struct {
		name      string
		canaryDir string
		want      string // "" for the agent to run
	}{{"control, the canary denied", dir, ""}, {"the canary granted", granted, "not in force"}} {
		canary := filepath.Join(c.canaryDir, "canary")
		writeCanary(t, canary)
		ran := filepath.Join(out, strings.ReplaceAll(c.name, " ", "-"))
		pl := &landlock.Plan{Handled: readExec | landlock.WriteFile | landlock.MakeReg, Canary: canary,
			Rules: []landlock.Rule{dirRule(t, "/usr", readExec), dirRule(t, "/etc", readExec), dirRule(t, granted, readExec),
				dirRule(t, out, landlock.WriteFile|landlock.MakeReg)}}
		s := Session{Plan: pl, Path: "/usr/bin/sh", Argv: []string{"sh", "-c", `: > "$1"`, "sh", ran},
			Stdin: null, Stdout: null, Stderr: null, View: &landlock.View{}, Cwd: "/"}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		code, err := Run(ctx, s)
		cancel()
		_, statErr := os.Stat(ran)
		switch {
		case c.want == "" && (err != nil || code != 0 || statErr != nil):
			t.Errorf("%s: exit %d, %v; the agent's file: %v", c.name, code, err, statErr)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || statErr == nil):
			t.Errorf("%s: %v, want an error saying %q; the agent's file: %v, want none", c.name, err, c.want, statErr)
		}
	}
}
