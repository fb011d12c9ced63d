package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

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
	out, session := markerSessions(t)
	stale := errors.New("the kept plan no longer holds")
	for _, c := range []struct {
		name   string
		before error
	}{{"the control, no error", nil}, {"an error", stale}} {
		ran := filepath.Join(out, strings.ReplaceAll(c.name, " ", "-"))
		s := session(ran, func() error { time.Sleep(100 * time.Millisecond); return c.before })
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

// markerSessions makes out, a directory the agent may write, and returns
// it with session, which gives a session with a view whose agent makes the
// file ran and whose BeforeStart is before.
func markerSessions(t *testing.T) (out string, session func(ran string, before func() error) Session) {
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	writeCanary(t, canary)
	out = filepath.Join(dir, "out")
	sharedDir(t, out)
	null := devNull(t)
	return out, func(ran string, before func() error) Session {
		pl := &landlock.Plan{Handled: readExec | landlock.WriteFile | landlock.MakeReg, Canary: canary,
			Rules: []landlock.Rule{dirRule(t, "/usr", readExec), dirRule(t, "/etc", readExec), dirRule(t, out, landlock.WriteFile|landlock.MakeReg)}}
		return Session{Plan: pl, Path: "/usr/bin/sh", Argv: []string{"sh", "-c", `: > "$1"`, "sh", ran},
			Stdin: null, Stdout: null, Stderr: null, View: &landlock.View{}, Cwd: "/", BeforeStart: before}
	}
}

// TestSignalBeforeAgentNotLost: a SIGINT the session caught before its
// agent started, in a Run that then ends without starting it (BeforeStart
// found the kept plan stale, and the caller would start again), is not
// lost: Run reports it (InterruptedError), whatever else ended it, so that
// run stops rather than starting the agent on a second attempt. The
// control is TestBeforeStartErrorStopsAgent's: the same error, no signal.
// The test catches SIGINT itself too, as Run does (catchSignals: while
// Run catches it, os/signal would not see it), so that no timing can let
// it end the test binary.
func TestSignalBeforeAgentNotLost(t *testing.T) {
	out, session := markerSessions(t)
	stale := errors.New("the kept plan no longer holds")
	mine := make(chan os.Signal, 1)
	stop, err := catchSignals(mine, unix.SIGINT)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ran := filepath.Join(out, "ran")
	s := session(ran, func() error {
		time.Sleep(100 * time.Millisecond) // the session's signals caught by now
		unix.Kill(os.Getpid(), unix.SIGINT)
		<-mine
		time.Sleep(20 * time.Millisecond)
		return stale
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = Run(ctx, s)
	var ie *InterruptedError
	if !errors.As(err, &ie) || ie.Signal != unix.SIGINT || ie.ExitCode() != 130 {
		t.Errorf("Run: %v; want the SIGINT reported (exit 130)", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the agent ran")
	}
}

// spawnAndSay is a helper process's part in the spawn tests: it starts an
// init stage for a view from a locked thread, with /dev/null as its fds
// 0-3, prints what spawnView gave ("view ...", "setup ..." or "started",
// the init stage then killed) and exits.
func spawnAndSay() {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fmt.Println("setup", err)
		os.Exit(0)
	}
	fd := int(devnull.Fd())
	// run's way: from the spawner's thread.
	th, err := spawnViewThread(nil, [4]int{fd, fd, fd, fd}, -1)
	pidfd := -1
	if err == nil {
		_, pidfd, err = th.started()
	}
	var ve *ViewError
	switch {
	case errors.As(err, &ve):
		fmt.Println("view", err)
	case err != nil:
		fmt.Println("setup", err)
	default:
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		fmt.Println("started")
	}
	os.Exit(0)
}

// TestRefusedNamespacesAreViewErrors: where user namespaces are refused (a
// child user namespace whose user.max_user_namespaces is 0, which leaves
// the host untouched), starting the init stage for a view fails at once in
// the supervisor with a *ViewError, which makes run start again without a
// view, and starts nothing. Control: where namespaces work, the same
// start succeeds. The starts are this test binary's, run again under
// util-linux's unshare, which prints what spawnView gave.
func TestRefusedNamespacesAreViewErrors(t *testing.T) {
	if os.Getenv("AL_TEST_SPAWN_REFUSED") == "1" {
		spawnAndSay()
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("util-linux's unshare is needed: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, refused := range []bool{true, false} {
		pre := ""
		if refused {
			pre = "echo 0 > /proc/sys/user/max_user_namespaces && "
		}
		cmd := exec.Command(unshare, "-Ur", "/bin/sh", "-c", pre+`exec "$@"`, "sh", self, "-test.run=^TestRefusedNamespacesAreViewErrors$")
		cmd.Env = []string{"AL_TEST_SPAWN_REFUSED=1"}
		out, err := cmd.CombinedOutput()
		got := strings.TrimSpace(string(out))
		switch {
		case err != nil:
			t.Errorf("refused %v: %v: %s", refused, err, got)
		case refused && (!strings.HasPrefix(got, "view creating the session's namespaces: clone") || !strings.Contains(got, "no space left on device")):
			t.Errorf("refused: %q; want a view error from the clone (ENOSPC)", got)
		case !refused && got != "started":
			t.Errorf("control: %q; want the init stage started", got)
		}
	}
}

// TestRefusedCapabilitiesAreViewErrors: where the process that becomes
// PID 1 cannot keep its capabilities across its execve (capset refused: a
// seccomp filter here, a security module elsewhere), the view cannot be
// built, and starting it fails with a *ViewError, which makes run start
// without a view (still under Landlock), not a *SetupError, which would
// make it fail. Only an unprivileged operator's PID 1 takes that step: the
// start runs as one (this test binary run again, as uid 4242 when the
// test runs as root). Control: without the filter, the same start
// succeeds.
func TestRefusedCapabilitiesAreViewErrors(t *testing.T) {
	if mode := os.Getenv("AL_TEST_SPAWN_CAPSET"); mode != "" {
		if mode == "refused" {
			if err := refuseCapset(); err != nil {
				fmt.Println("filter", err)
				os.Exit(0)
			}
		}
		spawnAndSay()
	}
	bin, _, cred := unprivilegedSelf(t)
	for _, mode := range []string{"refused", "allowed"} {
		cmd := exec.Command(bin, "-test.run=^TestRefusedCapabilitiesAreViewErrors$")
		cmd.Env = []string{"AL_TEST_SPAWN_CAPSET=" + mode}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		got := strings.TrimSpace(string(out))
		switch {
		case err != nil:
			t.Errorf("%s: %v: %s", mode, err, got)
		case mode == "refused" && !strings.HasPrefix(got, "view ") || mode == "refused" && !strings.Contains(got, "capabilities"):
			t.Errorf("capset refused: %q; want a view error naming the capabilities step", got)
		case mode == "allowed" && got != "started":
			t.Errorf("control: %q; want the init stage started", got)
		}
	}
}

// refuseCapset installs a seccomp filter (no_new_privs first) under which
// capset fails with EPERM and every other system call is allowed.
func refuseCapset() error {
	const (
		auditArchX8664 = 0xc000003e
		retAllow       = 0x7fff0000
		retErrno       = 0x00050000
	)
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("the filter is written for amd64, not %s", runtime.GOARCH)
	}
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4}, // arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: auditArchX8664, Jt: 1, Jf: 0},
		{Code: unix.BPF_RET | unix.BPF_K, K: retAllow},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_CAPSET, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrno | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: retAllow},
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// SECCOMP_FILTER_FLAG_TSYNC: every thread of this Go process.
	if _, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 1, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return errno
	}
	return nil
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

// TestSpawnerPidfdFailure: where the spawner thread cannot make the
// supervisor a pidfd of PID 1 (a dup refused, as with EMFILE), the start
// fails with a *SetupError that says so, and PID 1 is killed and reaped by
// the thread: no init stage runs that the supervisor cannot signal but by
// a pid. In a process of its own (this test binary run again), whose
// children the test can count. Control: without the failure, the same
// start succeeds.
func TestSpawnerPidfdFailure(t *testing.T) {
	if mode := os.Getenv("AL_TEST_SPAWNER_DUP"); mode != "" {
		failSpawnerDup(mode == "fail")
		spawnHeldAndSay()
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, fail := range []bool{true, false} {
		mode := map[bool]string{true: "fail", false: "control"}[fail]
		cmd := exec.Command(self, "-test.run=^TestSpawnerPidfdFailure$")
		cmd.Env = []string{"AL_TEST_SPAWNER_DUP=" + mode}
		out, err := cmd.CombinedOutput()
		got := strings.TrimSpace(string(out))
		switch {
		case err != nil:
			t.Errorf("%s: %v: %s", mode, err, got)
		case fail && (!strings.HasPrefix(got, "setup starting the init stage: a pidfd of PID 1 for the supervisor") || !strings.Contains(got, "too many open files") || !strings.HasSuffix(got, "children left: 0")):
			t.Errorf("fail: %q; want a setup error for the pidfd, and PID 1 reaped", got)
		case !fail && got != "started":
			t.Errorf("control: %q; want the init stage started", got)
		}
	}
}

// spawnHeldAndSay starts an init stage from the spawner thread with a
// sync socket whose other end stays open, so that PID 1 waits for its
// configuration until killed, and prints what happened; on a failed
// start, how many children are left once the spawner had 10 s to kill
// and reap PID 1 (this process has no others). It never returns.
func spawnHeldAndSay() {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fmt.Println("setup", err)
		os.Exit(0)
	}
	conn, child, err := syncPair()
	if err != nil {
		fmt.Println("setup", err)
		os.Exit(0)
	}
	defer conn.Close()
	fd := int(devnull.Fd())
	th, err := spawnViewThread(nil, [4]int{fd, fd, fd, int(child.Fd())}, -1)
	pidfd := -1
	if err == nil {
		_, pidfd, err = th.started()
	}
	child.Close()
	if err != nil {
		left := 1
		for deadline := time.Now().Add(10 * time.Second); left > 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			var ws unix.WaitStatus
			if _, werr := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil); werr == unix.ECHILD {
				left = 0
			}
		}
		fmt.Printf("setup %v; children left: %d\n", err, left)
		os.Exit(0)
	}
	unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
	fmt.Println("started")
	os.Exit(0)
}
