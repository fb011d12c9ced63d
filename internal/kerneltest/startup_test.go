package kerneltest

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startRaw runs the launcher's binary with exactly argv (argv[0] included,
// none at all when empty, which os/exec cannot do) and returns its stderr
// and exit status.
func startRaw(t *testing.T, argv []string) (string, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	p, err := os.StartProcess(launcher, argv, &os.ProcAttr{
		Env:   []string{"PATH=/usr/bin:/bin"},
		Files: []*os.File{null, null, w},
	})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(runTimeout, func() { p.Kill() })
	defer timer.Stop()
	var out bytes.Buffer
	out.ReadFrom(r)
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), st.ExitCode()
}

// TestArgumentsFoundAtStart: the constructor that decides, before the Go
// runtime starts, whether this process is the init stage finds its
// arguments itself (musl passes a constructor none): with no arguments at
// all, with many, and with the init argument, each reaches the side it
// names. The init stage's refusal without its socket is C's message, the
// command line's are Go's, so each run shows which side took it.
func TestArgumentsFoundAtStart(t *testing.T) {
	const lost = "cannot find this process's arguments"
	many := []string{"agent-launcher", "version"}
	for i := range 20000 {
		many = append(many, strings.Repeat("x", i%7))
	}
	for _, c := range []struct {
		name string
		argv []string
		code int
		want string
	}{
		{"no arguments, not even argv[0]", nil, 125, "Usage:"},
		{"an empty argv[0]", []string{"", "version", "extra"}, 125, "version: takes no arguments"},
		{"20,000 arguments", many, 125, "version: takes no arguments"},
		{"the init argument, no sync socket", []string{"agent-launcher", "__agent-launcher-init"}, 125,
			"is the launcher's internal init stage; use `agent-launcher run`"},
		{"the init argument second to last", []string{"agent-launcher", "version", "__agent-launcher-init"}, 125,
			"version: takes no arguments"},
	} {
		out, code := startRaw(t, c.argv)
		if code != c.code || !strings.Contains(out, c.want) || strings.Contains(out, lost) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, code, out, c.code, c.want)
		}
	}
	// The control: the same binary, started as usual.
	if out, code := startRaw(t, []string{"agent-launcher", "version"}); code != 0 || strings.Contains(out, lost) {
		t.Errorf("version: exit %d, stderr %q", code, out)
	}
}

// TestStartLineBeforeAgentOutput: the start-up line reaches the operator
// before anything the agent writes, with stdout and stderr on one pipe
// and no pty (found by review: "go" written before "ready" let the agent
// run while the line was still to be printed). Pinned to one CPU that a
// spinning thread keeps busy, where the race showed in 26 of 30 runs; 20
// runs here.
func TestStartLineBeforeAgentOutput(t *testing.T) {
	needKernel(t)
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Fatalf("taskset (util-linux) is needed: %v", err)
	}
	s := newSandbox(t, standard)
	var stop atomic.Bool
	defer stop.Store(true)
	go func() { // spins on CPU 0 (the loop is the point)
		runtime.LockOSThread()
		var one unix.CPUSet
		one.Set(0)
		unix.SchedSetaffinity(0, &one)
		for !stop.Load() {
		}
	}()
	const out = "AGENT-OUTPUT"
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		cmd := exec.CommandContext(ctx, taskset, "-c", "0", launcher, "run", "--config", s.config, "--workspace", s.ws, "--", "/bin/echo", out)
		cmd.Env = s.env()
		cmd.Dir = s.ws
		var both bytes.Buffer
		cmd.Stdout, cmd.Stderr = &both, &both
		err := cmd.Run()
		cancel()
		text := both.String()
		line, agent := strings.Index(text, "agent-launcher: confining"), strings.Index(text, out)
		if err != nil || line < 0 || agent < 0 {
			t.Fatalf("run %d: %v, output %q; want the start-up line and the agent's output", i, err, text)
		}
		if agent < line {
			t.Fatalf("run %d: the agent's output came before the start-up line:\n%s", i, text)
		}
	}
}

// buildSetting returns the build setting key that the go command recorded
// in bin (what go version -m prints; the VM guests have no go command), or
// "".
func buildSetting(t *testing.T, bin, key string) string {
	t.Helper()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("reading the build information of %s: %v", bin, err)
	}
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// TestLauncherNamesNoMappings: the launcher is built with the Go runtime's
// naming of its mappings off (decoratemappings=0, a //go:debug setting of
// cmd/agent-launcher). Where the kernel names anonymous mappings
// (CONFIG_ANON_VMA_NAME), the runtime names each small mapping it makes,
// and every name makes its own mapping region: the runtime's small mappings,
// carved from one huge-page arena (internal/launch/heapthp.c), would split it
// into regions no 2 MiB page fits in. Control: the test agent, built without
// the setting, does not show it.
func TestLauncherNamesNoMappings(t *testing.T) {
	godebug := func(bin string) string { return buildSetting(t, bin, "DefaultGODEBUG") }
	if got := godebug(launcher); !slices.Contains(strings.Split(got, ","), "decoratemappings=0") {
		t.Errorf("the launcher was built with DefaultGODEBUG=%q, without decoratemappings=0", got)
	}
	if got := godebug(agent); slices.Contains(strings.Split(got, ","), "decoratemappings=0") {
		t.Errorf("control: the test agent shows DefaultGODEBUG=%q, so the check cannot tell the builds apart", got)
	}
}

// TestLauncherHeapBaseFixed: the launcher is built with the Go heap at a
// fixed base (scripts/build-launcher). Go 1.26's random base pads the first
// heap chunk with up to 4 MiB of unused pages, and the supervisor's heap then
// spills into a second chunk (3.3 ms of run's start-up here when only the
// first had huge pages; internal/launch/heapthp.c now advises two, at most
// 4 MiB of each). Control: the test agent, built without the setting, does
// not show it.
func TestLauncherHeapBaseFixed(t *testing.T) {
	experiments := func(bin string) string { return buildSetting(t, bin, "GOEXPERIMENT") }
	if got := experiments(launcher); !strings.Contains(got, "norandomizedheapbase64") {
		t.Errorf("the launcher was built with GOEXPERIMENT=%q, without norandomizedheapbase64", got)
	}
	if got := experiments(agent); strings.Contains(got, "norandomizedheapbase64") {
		t.Errorf("control: the test agent shows GOEXPERIMENT=%q, so the check cannot tell the builds apart", got)
	}
}

// TestTimerSlack: the supervisor runs with a timer slack of at least 1 ms,
// set before the Go runtime starts (initstage.c), so that the runtime's
// sysmon thread wakes a fifth as often through the start-up; everything
// of the session keeps the slack run was started with: the agent's
// current slack and its default (what a reset to 0 gives) are the
// operator's, with a private view and without one. Controls: the
// operator's slack (123457 ns) is neither the supervisor's nor the
// kernel's default, and the test agent run bare reports it too.
func TestTimerSlack(t *testing.T) {
	s := newSandbox(t, standard)
	const operator = 123457
	want := fmt.Sprintf("ok current=%d default=%d", operator, operator)
	// A child gets the slack of the thread that forks it, as its current
	// and as its default.
	startWithSlack := func(cmd *exec.Cmd) {
		t.Helper()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, operator, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	bare := exec.Command(agent, "timerslack")
	var bareOut bytes.Buffer
	bare.Stdout = &bareOut
	startWithSlack(bare)
	if err := bare.Wait(); err != nil || strings.TrimSpace(bareOut.String()) != want {
		t.Errorf("control: the test agent run bare reports %q (%v); want %q", bareOut.String(), err, want)
	}
	for _, view := range []bool{true, false} {
		out := fmt.Sprintf("%s/slack-%v", s.ws, view)
		argv := []string{"/bin/sh", "-c", agent + " timerslack > " + out + ".tmp; mv " + out + ".tmp " + out + "; sleep 2"}
		bin, args := launcher, append([]string{"run", "--config", s.config, "--workspace", s.ws, "--"}, argv...)
		if !view {
			bin, args = s.noViewArgs("", false, argv...) // unshare and sh exec: the launcher's pid
		}
		cmd := exec.Command(bin, args...)
		// The trace says the supervisor's slack: /proc/PID/timerslack_ns
		// is another process's to read only with CAP_SYS_NICE.
		cmd.Env, cmd.Dir = append(s.env(), "AGENT_LAUNCHER_TRACE=1"), s.ws
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		startWithSlack(cmd)
		if !endsWithin(cmd, runTimeout) || !cmd.ProcessState.Success() {
			t.Fatalf("view %v: the session did not end well: %v: %s", view, cmd.ProcessState, stderr.String())
		}
		got, _ := os.ReadFile(out)
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("view %v: the agent reports %q; want %q, the operator's slack", view, got, want)
		}
		m := regexp.MustCompile(`supervisor: main \(timer slack (\d+) ns\)`).FindStringSubmatch(stderr.String())
		if m == nil {
			t.Errorf("view %v: the trace does not give the supervisor's timer slack: %s", view, stderr.String())
		} else if n, _ := strconv.Atoi(m[1]); n < 1000000 {
			t.Errorf("view %v: the supervisor's timer slack is %d ns; want at least 1 ms", view, n)
		}
		if (!view) != strings.Contains(stderr.String(), "no private view") {
			t.Errorf("view %v: the start-up line does not say so: %s", view, stderr.String())
		}
	}
}
