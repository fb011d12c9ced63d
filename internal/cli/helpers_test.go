package cli_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/agent-launcher/agent-launcher/internal/cli"
	"github.com/agent-launcher/agent-launcher/rules"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// sandbox is a fresh environment for one run of the CLI: a home directory, a
// workspace (the current directory) and XDG directories, all under one
// temporary directory, with every variable the CLI reads set to point there.
type sandbox struct {
	tmp   string // the temporary directory, symlinks resolved; "$TMP" in golden files
	home  string // $HOME
	ws    string // the workspace and current directory
	cfg   string // $XDG_CONFIG_HOME
	state string // $XDG_STATE_HOME
	run   string // $XDG_RUNTIME_DIR
}

// newSandbox creates a sandbox, points HOME, XDG_CONFIG_HOME, XDG_STATE_HOME
// and XDG_RUNTIME_DIR at it, unsets AGENT_LAUNCHER_CONFIG and changes to the
// workspace, $TMP/ws: outside the home directory, so that the built-in
// file-name rules appear under both "~/**/" and "<workspace>/**/". Tests
// that use it cannot run in parallel (t.Setenv, t.Chdir).
func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	return newSandboxAt(t, "ws")
}

// newProjectSandbox is newSandbox with the workspace at $TMP/home/project,
// the usual layout. The built-in file-name rules then appear under "~/**/"
// only, which halves the automaton and the cost of each run.
func newProjectSandbox(t *testing.T) *sandbox {
	t.Helper()
	return newSandboxAt(t, filepath.Join("home", "project"))
}

// newSandboxAt creates a sandbox whose workspace is ws, relative to $TMP.
func newSandboxAt(t *testing.T, ws string) *sandbox {
	t.Helper()
	// The CLI resolves symlinks in every path it prints; so must we, or the
	// replacement of the temporary directory misses on systems where it is
	// reached through a symlink (/tmp -> /private/tmp).
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sb := &sandbox{
		tmp:   tmp,
		home:  filepath.Join(tmp, "home"),
		ws:    filepath.Join(tmp, ws),
		cfg:   filepath.Join(tmp, "xdg", "config"),
		state: filepath.Join(tmp, "xdg", "state"),
		run:   filepath.Join(tmp, "xdg", "run"),
	}
	for _, d := range []string{sb.home, sb.ws, sb.cfg, sb.state, sb.run} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", sb.home)
	t.Setenv("XDG_CONFIG_HOME", sb.cfg)
	t.Setenv("XDG_STATE_HOME", sb.state)
	t.Setenv("XDG_RUNTIME_DIR", sb.run)
	unsetenv(t, "AGENT_LAUNCHER_CONFIG")
	t.Chdir(sb.ws)
	return sb
}

// unsetenv unsets key for the test; t.Setenv restores the old value after.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "")
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes content to path, creating its directory, and returns path.
func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// copyFile copies the file src to dst, creating dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dst, string(b))
}

// result is what one run of the CLI produced.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the CLI in-process.
func run(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), args, &stdout, &stderr)
	return result{stdout.String(), stderr.String(), code}
}

// executable returns the test binary's path as the CLI sees it: the launcher
// write-protects its own executable.
func executable(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		t.Fatal(err)
	}
	return exe
}

// normalize replaces the test binary's path with $EXE and the sandbox's
// temporary directory with $TMP, in the form the CLI prints them and in the
// escaped form a glob pattern holds them.
func (sb *sandbox) normalize(t *testing.T, s string) string {
	t.Helper()
	exe := executable(t)
	for _, r := range []struct{ from, to string }{
		{rules.EscapeLiteral(exe), "$EXE"},
		{exe, "$EXE"},
		{rules.EscapeLiteral(sb.tmp), "$TMP"},
		{sb.tmp, "$TMP"},
	} {
		s = strings.ReplaceAll(s, r.from, r.to)
	}
	return s
}

// tableHeaders start the sections of check's human output that are aligned
// with text/tabwriter; the table is the indented lines that follow.
var tableHeaders = []string{"tier rules (", "write protection (", "env drop:"}

var cellSep = regexp.MustCompile(` {2,}`)

// realign re-runs the alignment of check's tables after normalize: the
// temporary directory and the executable have a different length in every
// run, and a table's columns are as wide as its widest cell. It uses the
// tabwriter settings of check.go, so the golden file holds what check would
// print if the paths were literally $TMP and $EXE.
func realign(s string) string {
	lines := strings.SplitAfter(s, "\n")
	var out strings.Builder
	for i := 0; i < len(lines); {
		line := lines[i]
		out.WriteString(line)
		i++
		isHeader := false
		for _, h := range tableHeaders {
			isHeader = isHeader || strings.HasPrefix(line, h)
		}
		if !isHeader {
			continue
		}
		tw := tabwriter.NewWriter(&out, 2, 8, 2, ' ', 0)
		for ; i < len(lines) && strings.HasPrefix(lines[i], "  "); i++ {
			cells := cellSep.Split(strings.TrimSuffix(lines[i][2:], "\n"), -1)
			tw.Write([]byte("  " + strings.Join(cells, "\t") + "\n"))
		}
		tw.Flush()
	}
	return out.String()
}

// volatileStats are the automaton sizes in check --json. They depend on the
// length of the temporary directory's name (every literal byte of a pattern
// is an automaton node) and on the engine's internals, not on the policy.
var volatileStats = regexp.MustCompile(`("(?:nfa_nodes|states|classes|accept_sets|table_bytes)": )\d+`)

func normalizeStats(s string) string {
	return volatileStats.ReplaceAllString(s, `${1}"(varies)"`)
}

// golden compares got with testdata/golden/name, or rewrites the file with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		writeFile(t, path, got)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/cli -run Golden -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update to accept it):\n%s", path, lineDiff(string(want), got))
	}
}

// goldenDir is absolute so that tests that change directory still find it.
var goldenDir = func() string {
	d, err := filepath.Abs(filepath.Join("testdata", "golden"))
	if err != nil {
		panic(err)
	}
	return d
}()

// testdataDir is the absolute path of testdata/.
var testdataDir = filepath.Dir(goldenDir)

// lineDiff describes the first differences between want and got, line by
// line.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
			shown++
		}
	}
	if len(w) != len(g) {
		b.WriteString("want " + strconv.Itoa(len(w)) + " lines, got " + strconv.Itoa(len(g)) + "\n")
	}
	return b.String()
}

// leaks are what a user must never see from the launcher: a Go panic or
// stack, or a Go type name from the decoder.
var leaks = regexp.MustCompile(`panic|goroutine|\[\]string|\*string|map\[|\b(main|rules|tiers|cli|toml|unstable)\.[A-Za-z]`)

// checkNoLeaks fails when stderr shows Go internals, or has a line that is
// not one of the launcher's own messages.
func checkNoLeaks(t *testing.T, stderr string) {
	t.Helper()
	if m := leaks.FindString(stderr); m != "" {
		t.Errorf("stderr shows Go internals (%q):\n%s", m, stderr)
	}
	for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if !strings.HasPrefix(line, "agent-launcher: ") {
			t.Errorf("stderr line %q does not start with \"agent-launcher: \"", line)
		}
	}
}
