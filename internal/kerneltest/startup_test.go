package kerneltest

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
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
