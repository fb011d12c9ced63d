package launch

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
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
	rule := func(p string) landlock.Rule {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			t.Fatalf("%s: %v, mode %o; want a directory", p, err, st.Mode)
		}
		return landlock.Rule{Path: p, Dir: true, Access: landlock.ReadFile | landlock.ReadDir | landlock.Execute, Dev: st.Dev, Ino: st.Ino}
	}
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	if err := os.WriteFile(canary, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	run := func(marker string, before func()) int {
		pl := &landlock.Plan{Handled: landlock.ReadFile | landlock.ReadDir | landlock.Execute, Canary: canary,
			Rules: []landlock.Rule{rule("/usr"), rule("/etc")}}
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
	code := run(marker, func() {
		time.Sleep(300 * time.Millisecond) // the agent would have started long before
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			t.Error(err)
		}
	})
	if code != 0 {
		t.Errorf("the agent started before BeforeStart returned: exit %d, want 0", code)
	}
	late := filepath.Join(dir, "late")
	code = run(late, func() {
		go func() {
			time.Sleep(300 * time.Millisecond)
			os.WriteFile(late, nil, 0o644)
		}()
	})
	if code != 3 {
		t.Errorf("control, the marker made after BeforeStart returned: exit %d, want 3", code)
	}
}
