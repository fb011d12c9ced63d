package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/tiers"
)

// TestGitPointers: the includes of a git configuration are followed as git
// follows them (absolute, "~/", relative to the including file, chained,
// includeIf whatever its condition, each once, to git's depth of 10), and
// the core.hooksPath of each is taken from the work tree; "~user/", a
// cycle and a FIFO stop nothing and read nothing.
func TestGitPointers(t *testing.T) {
	dir := t.TempDir()
	home, ws := filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	write := func(rel, text string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	root := write("home/.gitconfig", "[include]\n\tpath = ~/a\n\tpath = ~other/x\n"+
		"[includeIf \"gitdir:~/w/\"]\n\tpath = \""+filepath.Join(dir, "abs")+"\"\n"+
		"[includeIf.old]\n\tpath = sub/rel ; a comment\n[include \"x\"]\n\tpath = not-an-include\n[core]\n\thooksPath = hooks\n")
	write("home/a", "[include]\n\tpath = ../abs\n[core]\n\thooksPath = ~/h2\n")
	write("abs", "[include]\n\tpath = home/.gitconfig\n") // a cycle
	write("home/sub/rel", "")
	if err := unix.Mkfifo(filepath.Join(home, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("home/sub/rel", "[include]\n\tpath = ../fifo\n")
	got := gitPointers(root, ws, home)
	var lines []string
	for _, p := range got {
		lines = append(lines, fmt.Sprintf("%s -> %s hooks=%v", strings.TrimPrefix(p.file, dir), strings.TrimPrefix(p.target, dir), p.hooks))
	}
	want := []string{
		"/home/.gitconfig -> /ws/hooks hooks=true",
		"/home/.gitconfig -> /home/a hooks=false",
		"/home/a -> /home/h2 hooks=true",
		"/home/a -> /abs hooks=false",
		"/home/.gitconfig -> /abs hooks=false",
		"/home/.gitconfig -> /home/sub/rel hooks=false",
		"/home/sub/rel -> /home/fifo hooks=false",
	}
	// "/home/.gitconfig -> /abs" is seen once: the second naming of a file
	// already followed adds nothing.
	want = slices.DeleteFunc(want, func(s string) bool { return s == "/home/.gitconfig -> /abs hooks=false" })
	if !slices.Equal(lines, want) {
		t.Errorf("pointers:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// Depth: a chain of 12 includes stops at git's 10.
	chain := filepath.Join(dir, "chain")
	for i := range 12 {
		write(fmt.Sprintf("chain/%d", i), fmt.Sprintf("[include]\n\tpath = %d\n", i+1))
	}
	if n := len(gitPointers(filepath.Join(chain, "0"), ws, home)); n != maxIncludeDepth {
		t.Errorf("a chain of 12 includes gave %d pointers, want %d", n, maxIncludeDepth)
	}
}

// TestProtectGitPointers: a protected configuration's includes and hooks
// directory get a write protection (a hooks directory above the workspace
// only its hook names); an unprotected one's nothing.
func TestProtectGitPointers(t *testing.T) {
	tmp := t.TempDir()
	e, p := loadedEnv(t, tmp, &policyFlags{workspace: tmp})
	ws := e.workspace
	ptrs := []gitPointer{
		{root: filepath.Join(e.home, ".gitconfig"), file: filepath.Join(e.home, ".gitconfig"), target: filepath.Join(ws, "inc")},
		{root: filepath.Join(e.home, ".gitconfig"), file: filepath.Join(e.home, ".gitconfig"), target: filepath.Join(ws, "hooks"), hooks: true},
		{root: filepath.Join(e.home, ".gitconfig"), file: filepath.Join(e.home, ".gitconfig"), target: filepath.Dir(ws), hooks: true},
		{root: filepath.Join(e.home, ".gitconfig"), file: filepath.Join(e.home, ".gitconfig"), target: ws},
		{root: filepath.Join(ws, "plain.gitconfig"), file: filepath.Join(ws, "plain.gitconfig"), target: filepath.Join(ws, "free")},
	}
	n, err := protectGitPointers(p.pol, p.m, ptrs, e.home, ws)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("%d rules added, want 4 (the include, the hooks directory and what is below it, the hook names above the workspace)", n)
	}
	m, err := tiers.Compile(p.pol)
	if err != nil {
		t.Fatal(err)
	}
	for path, allowed := range map[string]bool{
		filepath.Join(ws, "inc"):                    false,
		filepath.Join(ws, "hooks"):                  false,
		filepath.Join(ws, "hooks/pre-commit"):       false,
		filepath.Join(ws, "hooks/helper.sh"):        false,
		filepath.Join(filepath.Dir(ws), "pre-push"): false, // /tmp/** grants it without the protection
		filepath.Join(ws, "pre-push"):               true,  // the hooks directory is the workspace's parent
		filepath.Join(ws, "free"):                   true,  // named by a configuration the agent may write
		filepath.Join(ws, "other"):                  true,
	} {
		if got := m.Decide(path, tiers.OpWrite).Verdict == tiers.Allowed; got != allowed {
			t.Errorf("write %s: allowed %v, want %v", path, got, allowed)
		}
	}
}

// TestReviewRemoveKeepsRoots: `review --remove` never removes a directory
// the review walks, or one above it, whatever the report says (a report
// an agent shaped named the workspace "created"); a file the session made
// it removes.
func TestReviewRemoveKeepsRoots(t *testing.T) {
	tmp := t.TempDir()
	home, ws := filepath.Join(tmp, "home"), filepath.Join(tmp, "home", "ws")
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "state"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "config"))
	planted := filepath.Join(ws, "sub", ".envrc")
	if err := os.MkdirAll(filepath.Dir(planted), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planted, []byte("evil"), 0o644); err != nil {
		t.Fatal(err)
	}
	var changes []reviewChange
	for _, p := range []string{ws, home, planted} {
		ent, ok := describe(p)
		if !ok {
			t.Fatalf("describe %s", p)
		}
		changes = append(changes, reviewChange{Kind: "created", Path: p, Entry: ent})
	}
	// A name that was not UTF-8, as the JSON report holds it.
	changes = append(changes, reviewChange{Kind: "created", Path: filepath.Join(ws, "cfg\ufffd", ".envrc"), Entry: changes[2].Entry})
	r := &reviewReport{Schema: 1, Workspace: ws, Roots: []string{ws}, Changes: changes}
	if err := saveReview(launcherPaths("", "").StateDir, r); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	c := &command{ctx: t.Context(), stdout: &stdout, stderr: &stderr}
	if code := c.review([]string{"--remove"}); code != ExitOK {
		t.Fatalf("review --remove: %d: %s", code, stderr.String())
	}
	for _, d := range []string{ws, home} {
		if _, err := os.Stat(d); err != nil || !strings.Contains(stdout.String(), "kept (the review walks it, or what is inside it): "+d+"\n") {
			t.Errorf("%s: %v; output %q", d, err, stdout.String())
		}
	}
	if !strings.Contains(stdout.String(), "kept (its name is not UTF-8") {
		t.Errorf("a name that is not UTF-8 is not said to be kept: %q", stdout.String())
	}
	if _, err := os.Stat(planted); err == nil || !strings.Contains(stdout.String(), "removed: "+planted) {
		t.Errorf("control: the planted .envrc is not removed: %q", stdout.String())
	}
}

// TestFileHashBounded: the review reads a file to hash it only up to
// hashMax, and a walk only up to hashBudget in all; past either a file is
// recorded by identity and times, which a write still changes. A review
// had every later session hash thousands of 16 MiB files for minutes.
func TestFileHashBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, hashMax+1), 0o644); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hook"), 0o644); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32<<10)
	budget := int64(hashBudget)
	b1, _ := describeBuf(big, buf, &budget)
	s1, _ := describeBuf(small, buf, &budget)
	if !strings.HasPrefix(b1.Hash, statHashPrefix) || strings.HasPrefix(s1.Hash, statHashPrefix) || budget != hashBudget-4 {
		t.Errorf("big %q, small %q, budget left %d: want the big file by identity, the small one read", b1.Hash, s1.Hash, budget)
	}
	var none int64
	s2, _ := describeBuf(small, buf, &none)
	if !strings.HasPrefix(s2.Hash, statHashPrefix) {
		t.Errorf("past the budget, a small file is read: %q", s2.Hash)
	}
	if err := os.WriteFile(big, make([]byte, hashMax+1), 0o644); err != nil { // same size, same bytes
		t.Fatal(err)
	}
	if b2, _ := describeBuf(big, buf, &budget); b2.Hash == b1.Hash {
		t.Errorf("a rewrite of the big file left its record as it was")
	}
}

// TestPlainLine: what a terminal acts on is made visible; text, tabs and
// printable UTF-8 stay as they are.
func TestPlainLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\twith a tab":      "plain text\twith a tab",
		"caf\u00e9 \u65e5\u672c":      "caf\u00e9 \u65e5\u672c",
		"a\rb\nc\x1b[2Kd\x7f":         `a\x0db\x0ac\x1b[2Kd\x7f`,
		"\u202eevil\u2066":            `\u202eevil\u2066`,
		"c1 \u009b and bad \xff byte": `c1 \x9b and bad \xff byte`,
	} {
		if got := plainLine(in); got != want {
			t.Errorf("plainLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWritableByOthers: a review report is trusted only when it and each
// directory up to the state directory are the operator's and writable by
// no one else; one owned by another user, or in a directory others can
// write, is named.
func TestWritableByOthers(t *testing.T) {
	state := t.TempDir()
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(state, "review")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "last.json")
	if err := os.WriteFile(report, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if why := writableByOthers(report, state); why != "" {
		t.Errorf("the operator's own report: %s", why)
	}
	if why := writableByOthers(filepath.Join(dir, "missing.json"), state); why != "" {
		t.Errorf("no report: %s", why)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if why := writableByOthers(report, state); !strings.Contains(why, "others can write "+dir) {
		t.Errorf("a review directory of mode 0777: %q", why)
	}
	os.Chmod(dir, 0o700)
	// Another user's file: as root, one given to nobody; as a user, root's.
	other, otherState := filepath.Join(dir, "other.json"), state
	if os.Geteuid() == 0 {
		if err := os.WriteFile(other, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	} else {
		other, otherState = "/", "/" // root's
	}
	if why := writableByOthers(other, otherState); !strings.Contains(why, "is owned by uid ") {
		t.Errorf("another user's report: %q", why)
	}
}
