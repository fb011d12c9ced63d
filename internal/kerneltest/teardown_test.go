package kerneltest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTeardownHelper: run's exit leaves the teardown of its address space
// to a helper that shares it (launch.DeferTeardown). While the session
// runs, the helper holds nothing but a pidfd (no pipe, terminal or socket
// of the session stays open through it) and blocks every signal but the
// two no process can; once run has exited, the helper exits too. Run's
// stdout, a pipe, reaches its end when run exits.
func TestTeardownHelper(t *testing.T) {
	s := newSandbox(t, standard)
	started := s.ws + "/started"
	cmd := exec.Command(launcher, "run", "--config", s.config, "--workspace", s.ws, "--",
		"/bin/sh", "-c", "touch "+started+"; sleep 1; echo done")
	cmd.Env = s.env()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitFile(started) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("control: the agent never started")
	}
	launcherPID := cmd.Process.Pid
	var helpers []int
	for _, c := range children(launcherPID) {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", c))
		if err != nil {
			t.Fatalf("the launcher's child %d: %v", c, err)
		}
		var targets []string
		for _, fd := range fds {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", c, fd.Name()))
			targets = append(targets, l)
		}
		if len(targets) == 1 && targets[0] == "anon_inode:[pidfd]" {
			helpers = append(helpers, c)
			// Every signal blocked but SIGKILL and SIGSTOP.
			if blk := statusField(t, c, "SigBlk"); blk != "fffffffffffbfeff" {
				t.Errorf("the helper's blocked signals: %s", blk)
			}
			continue
		}
		// The session's PID 1: it has the session's stdio.
		if len(targets) < 3 {
			t.Errorf("the launcher's child %d holds %v: neither the session's PID 1 nor the teardown helper", c, targets)
		}
	}
	if len(helpers) != 1 {
		t.Fatalf("want one teardown helper among the launcher's children, found %v", helpers)
	}
	// The pipe ends when the launcher exits, the agent's output in it.
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(stdout)
		out <- string(b)
	}()
	select {
	case o := <-out:
		if o != "done\n" {
			t.Errorf("the agent's output: %q", o)
		}
	case <-time.After(runTimeout):
		cmd.Process.Kill()
		t.Fatal("run's stdout did not end")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := procState(helpers[0])
		if st == 0 || st == 'Z' || st == 'X' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the teardown helper %d still runs (state %c) 10 s after the launcher exited", helpers[0], st)
		}
	}
}

// children lists the children of pid.
func children(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// statusField is the value of a field of /proc/PID/status.
func statusField(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
