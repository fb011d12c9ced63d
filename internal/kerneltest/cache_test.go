package kerneltest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// The agent's private cache (DESIGN.md section 7, "Usable by default"):
// caches/<agent> in the launcher's state directory, shown in the session's
// view at cacheView.

const cacheView = "/var/tmp/agent-launcher-cache"

// cachePolicy grants what the embedded default policy grants, and defines
// two agents.
const cachePolicy = "write_paths = [\"<workspace>/**\", \"/tmp/**\", \"/var/tmp/**\"]\n\n[agents.alpha]\n[agents.beta]\n"

// stateDir is the launcher's state directory for the sandbox's home.
func (s *sandbox) stateDir() string {
	return filepath.Join(s.home, ".local", "state", "agent-launcher")
}

// launchAs runs argv confined as agent name ("" for the global policy).
func (s *sandbox) launchAs(name string, argv ...string) result {
	s.t.Helper()
	args := []string{"run", "--config", s.config, "--workspace", s.ws}
	if name != "" {
		args = append(args, "--agent", name)
	}
	return s.exec(launcher, append(append(args, "--"), argv...)...)
}

// TestAgentCacheEnvironment: the usual variables point into the cache, and
// the start-up line says so; an operator's own value is replaced, unless
// the policy passes it by name.
func TestAgentCacheEnvironment(t *testing.T) {
	s := newSandbox(t, cachePolicy)
	s.extraEnv = []string{"GOCACHE=" + s.home + "/.cache/go-build"}
	want := map[string]string{
		"GOCACHE":          cacheView + "/go-build",
		"GOMODCACHE":       cacheView + "/go-mod",
		"npm_config_cache": cacheView + "/npm",
		"PIP_CACHE_DIR":    cacheView + "/pip",
		"XDG_CACHE_HOME":   cacheView + "/xdg",
	}
	for name, value := range want {
		r := s.launchAs("alpha", agent, "getenv", name)
		if r.line() != "ok "+value {
			t.Errorf("%s inside: %s; want %s", name, r, value)
		}
		if !strings.Contains(r.stderr, "private cache "+cacheView+" (kept in "+s.stateDir()+"/caches/alpha)") ||
			!strings.Contains(r.stderr, "replacing your GOCACHE") {
			t.Errorf("the start-up line does not name the cache: %s", r.stderr)
		}
	}
	p := newSandbox(t, cachePolicy+"\n[env]\npass = [\"GOCACHE\"]\n")
	p.extraEnv = s.extraEnv
	if r := p.launchAs("alpha", agent, "getenv", "GOCACHE"); r.line() != "ok "+s.home+"/.cache/go-build" {
		t.Errorf("GOCACHE passed by the policy: %s", r)
	}
	// Without a policy grant at the cache's place there is no cache, and
	// no variable points at one.
	n := newSandbox(t, standard)
	r := n.agent("getenv", "GOCACHE")
	wantErr(t, "GOCACHE without a writable /var/tmp", r, "ENOENT")
	if !strings.Contains(r.stderr, "no private cache (the policy does not let the agent write "+cacheView+")") {
		t.Errorf("the start-up line does not say why there is no cache: %s", r.stderr)
	}
}

// TestAgentCachePersists: what an agent leaves in its cache is there in
// its next session, and in no other agent's.
func TestAgentCachePersists(t *testing.T) {
	s := newSandbox(t, cachePolicy)
	wantOK(t, "alpha writes its cache", s.launchAs("alpha", agent, "write", cacheView+"/marker", "alpha-was-here"))
	if r := s.launchAs("alpha", agent, "read", cacheView+"/marker"); !strings.Contains(r.stdout, "alpha-was-here") {
		t.Errorf("alpha's next session does not find its file: %s", r)
	}
	if b, err := os.ReadFile(filepath.Join(s.stateDir(), "caches", "alpha", "marker")); err != nil || string(b) != "alpha-was-here" {
		t.Errorf("the file in the state directory: %q, %v", b, err)
	}
	wantErr(t, "beta reads alpha's file", s.launchAs("beta", agent, "read", cacheView+"/marker"), "ENOENT")
	wantErr(t, "the global policy reads alpha's file", s.launchAs("", agent, "read", cacheView+"/marker"), "ENOENT")
	wantOK(t, "beta writes its own", s.launchAs("beta", agent, "write", cacheView+"/marker", "beta"))
	if r := s.launchAs("alpha", agent, "read", cacheView+"/marker"); !strings.Contains(r.stdout, "alpha-was-here") {
		t.Errorf("beta's file replaced alpha's: %s", r)
	}
}

// TestAgentCacheConfined: the cache opens nothing else of the state
// directory: not the state directory itself, the canary, the review
// report, another agent's cache, nor the agent's own cache at its place
// there; not through a symlink or a hard link made in the cache either.
// Control: each read works without the launcher.
func TestAgentCacheConfined(t *testing.T) {
	s := newSandbox(t, cachePolicy)
	wantOK(t, "alpha's first session", s.launchAs("alpha", agent, "write", cacheView+"/own", "own"))
	state := s.stateDir()
	betaSecret := s.write(strings.TrimPrefix(state, s.dir+"/")+"/caches/beta/secret", sshKey)
	review := s.write(strings.TrimPrefix(state, s.dir+"/")+"/last-review.json", sshKey)
	rows := []struct {
		name string
		args []string
	}{
		{"read the canary", []string{"read", state + "/canary"}},
		{"list the state directory", []string{"list", state}},
		{"list the caches", []string{"list", state + "/caches"}},
		{"read a file of the state directory", []string{"read", review}},
		{"read another agent's cache", []string{"read", betaSecret}},
		{"list another agent's cache", []string{"list", state + "/caches/beta"}},
		{"read its own cache at its place in the state directory", []string{"read", state + "/caches/alpha/own"}},
	}
	for _, row := range rows {
		if r := s.bare(row.args...); r.code != 0 || !strings.HasPrefix(r.line(), "ok") {
			t.Fatalf("control: %s without the launcher: %s", row.name, r)
		}
		wantErr(t, row.name, s.launchAs("alpha", append([]string{agent}, row.args...)...), "EACCES", "ENOENT")
	}
	// A policy that grants the cache's view path itself puts a rule on the
	// bound directory's inode, which its place in the state directory
	// shares: the view's seal keeps that place out of reach (without it,
	// this read worked).
	l := newSandbox(t, "write_paths = [\"<workspace>/**\", \""+cacheView+"/**\"]\n")
	wantOK(t, "a literal grant's cache", l.agent("write", cacheView+"/own", "own"))
	own := filepath.Join(l.stateDir(), "caches", "_global", "own")
	if r := l.bare("read", own); !strings.HasPrefix(r.line(), "ok") {
		t.Fatalf("control: %s", r)
	}
	wantErr(t, "read its own cache at its place, under a literal grant", l.agent("read", own), "EACCES", "ENOENT")

	// Made in the cache, a symlink or a hard link to another agent's file
	// reaches nothing.
	wantOK(t, "a symlink in the cache", s.launchAs("alpha", agent, "symlink", betaSecret, cacheView+"/link"))
	wantErr(t, "read through the symlink", s.launchAs("alpha", agent, "read", cacheView+"/link"), "EACCES", "ENOENT")
	wantErr(t, "hard link into the cache", s.launchAs("alpha", agent, "link", betaSecret, cacheView+"/hard"), "EACCES", "ENOENT", "EXDEV")
	if r := s.bare("read", filepath.Join(state, "caches", "alpha", "hard")); r.code == 0 && strings.HasPrefix(r.line(), "ok") {
		t.Errorf("a hard link to another agent's file was made in the cache: %s", r)
	}

	// Nor can a session give a file of its cache a second name in the
	// workspace (the cache is a mount: link(2) does not cross it), which
	// is why the hard-link check does not list the caches at every start.
	s.write("home/proj/mine", "mine")
	wantOK(t, "control: a hard link within the workspace", s.launchAs("alpha", agent, "link", s.ws+"/mine", s.ws+"/mine2"))
	wantErr(t, "hard link from the cache into the workspace", s.launchAs("alpha", agent, "link", cacheView+"/own", s.ws+"/own-link"), "EXDEV")
	wantErr(t, "hard link from the workspace into the cache", s.launchAs("alpha", agent, "link", s.ws+"/mine", cacheView+"/mine-link"), "EXDEV")
	wantOK(t, "control: without the launcher, the cache's file links into the workspace", s.bare("link", filepath.Join(state, "caches", "alpha", "own"), s.ws+"/own-bare"))
}

// TestAgentCacheGoBuild: go build in a session uses the cache: the first
// session compiles and leaves the build cache behind, the next session of
// the same agent compiles nothing, another agent's compiles again.
func TestAgentCacheGoBuild(t *testing.T) {
	goBin := "/usr/local/go/bin/go"
	if p, err := exec.LookPath("go"); err == nil {
		goBin, _ = filepath.EvalSymlinks(p)
	}
	s := newSandbox(t, cachePolicy)
	if _, err := os.Stat(goBin); err != nil {
		// The VM guests have no Go toolchain; a host that runs `make test`
		// has one. The cache's kernel side is TestAgentCachePersists.
		if os.Getenv("AGENT_LAUNCHER_VM_GUEST") == "" {
			t.Fatalf("no go command to build with: %v", err)
		}
		t.Logf("no go command here (%v): the build part did not run", err)
		return
	}
	s.write("home/proj/go.mod", "module example.com/m\n\ngo 1.21\n")
	s.write("home/proj/m.go", "package m\n\nfunc F() int { return 42 }\n")
	build := func(name string) result {
		t.Helper()
		// The test binaries' directory may lie in /tmp, which its read
		// rule then carves: go's work directory goes to /var/tmp.
		r := s.launchAs(name, "/bin/sh", "-c", "export TMPDIR=/var/tmp; "+shq(goBin)+" env GOCACHE && "+shq(goBin)+" build -x . 2>&1")
		if r.code != 0 {
			t.Fatalf("go build as %s: %s", name, r)
		}
		return r
	}
	compiled := func(r result) bool { return strings.Contains(r.stdout, "/compile ") }
	r := build("alpha")
	if !strings.HasPrefix(r.stdout, cacheView+"/go-build\n") || !compiled(r) {
		t.Fatalf("alpha's first build: %s", r)
	}
	ents, err := os.ReadDir(filepath.Join(s.stateDir(), "caches", "alpha", "go-build"))
	if err != nil || len(ents) < 2 {
		t.Fatalf("the build cache after the first session: %d entries, %v", len(ents), err)
	}
	if r := build("alpha"); compiled(r) {
		t.Errorf("alpha's second build compiled again; want a cache hit: %s", r)
	}
	if r := build("beta"); !compiled(r) {
		t.Errorf("beta's build found alpha's cache: %s", r)
	}
}

// TestAgentCacheTools: npm and pip, where present, take the cache.
func TestAgentCacheTools(t *testing.T) {
	s := newSandbox(t, cachePolicy)
	ran := 0
	for _, tool := range []struct{ bin, script, want string }{
		{"npm", "npm config get cache && npm cache verify >/dev/null && ls " + cacheView + "/npm", cacheView + "/npm\n_cacache"},
		{"pip3", "pip3 cache dir", cacheView + "/pip"},
	} {
		if s.lookPath(tool.bin) == "" {
			t.Logf("%s is not in %s: not tried", tool.bin, sandboxPATH)
			continue
		}
		ran++
		if r := s.launchAs("alpha", "/bin/sh", "-c", tool.script); r.code != 0 || !strings.HasPrefix(strings.TrimSpace(r.stdout), tool.want) {
			t.Errorf("%s inside: %s; want %q", tool.bin, r, tool.want)
		}
	}
	t.Logf("%d of 2 tools tried", ran)
}

// TestGitconfigDefaultPolicy: under the embedded default policy the agent
// reads ~/.gitconfig (git knows who commits) and cannot change it
// (DESIGN.md section 3, built-in write protection). Control: outside, the
// same change works.
func TestGitconfigDefaultPolicy(t *testing.T) {
	s := newSandbox(t, standard)
	gc := s.write("home/.gitconfig", "[user]\n\tname = Test Operator\n\temail = op@example.com\n")
	def := func(script string) result {
		t.Helper()
		return s.exec(launcher, "run", "--workspace", s.ws, "--", "/bin/sh", "-c", script)
	}
	r := def("git config --global --get user.name")
	if strings.TrimSpace(r.stdout) != "Test Operator" || r.code != 0 {
		t.Errorf("git reads ~/.gitconfig inside: %s", r)
	}
	if !strings.Contains(r.stderr, "(embedded default policy)") || !strings.Contains(r.stderr, "private cache "+cacheView) {
		t.Errorf("not the embedded default policy, or no cache: %s", r.stderr)
	}
	r = def("git config --global user.name Mallory; echo rc=$?; echo '[core]' >> ~/.gitconfig; echo rc=$?")
	if strings.Count(r.stdout, "rc=0") != 0 {
		t.Errorf("the agent changed ~/.gitconfig: %s", r)
	}
	if b, _ := os.ReadFile(gc); !strings.Contains(string(b), "Test Operator") || strings.Contains(string(b), "Mallory") || strings.Contains(string(b), "[core]") {
		t.Errorf("~/.gitconfig changed: %q", b)
	}
	// The cache works under the default policy too.
	if r := def("echo $GOCACHE"); strings.TrimSpace(r.stdout) != cacheView+"/go-build" {
		t.Errorf("GOCACHE under the default policy: %s", r)
	}
	if r := def("touch $GOCACHE-probe && echo ok"); strings.TrimSpace(r.stdout) != "ok" {
		t.Errorf("the cache is not writable under the default policy: %s", r)
	}
	// Control: outside, the same change works.
	cmd := exec.Command("git", "config", "--global", "user.name", "Control")
	cmd.Env = s.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("control: git config outside: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(gc); !strings.Contains(string(b), "Control") {
		t.Errorf("control: the change outside did not land: %q", b)
	}
}

// TestAgentCacheNoView: without the private view (user namespaces refused,
// as in TestNoViewFallback) there is no cache: no variable points at one,
// and the start-up line says so.
func TestAgentCacheNoView(t *testing.T) {
	s := newSandbox(t, cachePolicy)
	bin, args := s.noViewCmd("", false, []string{"--agent", "alpha"}, agent, "getenv", "GOCACHE")
	r := s.exec(bin, args...)
	if !strings.Contains(r.stderr, "NO private view") || !strings.Contains(r.stderr, "no private cache (no private view)") {
		t.Fatalf("the start-up line does not say there is no view and no cache: %s", r)
	}
	wantErr(t, "GOCACHE without the view", r, "ENOENT")
}

// TestStalePlanPlannedAgain: a path of the plan replaced between the plan
// and the init stage's Landlock rules (here: a kept plan whose rule for a
// directory names another inode, as a replacement between the kept plan's
// check and the rules would leave it) is found by the init stage, which
// runs nothing; run then plans again and the agent runs under the new
// plan, rather than run ending with "start again"; it says so, since the
// start-up line of the plan that failed may be out. The control: the kept
// plan as it was kept runs without planning again.
func TestStalePlanPlannedAgain(t *testing.T) {
	s := newSandbox(t, standard)
	s.write("home/proj/data/a.txt", "A")
	// A pattern that matches names anywhere, and a granted tree outside
	// the home directory and the workspace: every plan warns that such
	// names are not looked for there, which the run must print once, not
	// once per plan.
	other := s.mkdir("other")
	s.writeAbs(s.config, "[file_policy]\ndefault = \"deny\"\npresets = [\"system\"]\n"+standard+fmt.Sprintf("read_paths = [%q, %q]\ndeny_paths = [\"**/secret.txt\"]\n", binDir+"/**", other+"/**"))
	s.extraEnv = []string{"AGENT_LAUNCHER_TRACE=1"}
	// The first run's review report changes the state directory it
	// planned: the second plans again and keeps that plan.
	for range 2 {
		wantOK(t, "a run that keeps its plan", s.agent("read", s.ws+"/data/a.txt"))
	}
	r := s.agent("read", s.ws+"/data/a.txt")
	wantOK(t, "control: the kept plan", r)
	if !strings.Contains(r.stderr, "floor: the kept plan holds") || strings.Contains(r.stderr, "floor: planned (") {
		t.Fatalf("control: the second run did not use the kept plan:\n%s", r.stderr)
	}

	// The kept entry: the format line, then four fields, each its length
	// (uvarint) and bytes; the third is the plan.
	dir := filepath.Join(s.stateDir(), "plans")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var entry string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".walk") {
			if entry != "" {
				t.Fatalf("more than one kept plan in %s", dir)
			}
			entry = filepath.Join(dir, e.Name())
		}
	}
	b, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		t.Fatalf("%s: no format line", entry)
	}
	var fields [4][]byte
	for i := range fields {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			t.Fatalf("%s: field %d malformed", entry, i)
		}
		fields[i], rest = rest[k:k+int(n)], rest[k+int(n):]
	}
	pl, err := landlock.DecodePlan(fields[2])
	if err != nil {
		t.Fatal(err)
	}
	changed := false
	for i := range pl.Rules {
		if pl.Rules[i].Path == s.ws {
			pl.Rules[i].Ino++
			changed = true
		}
	}
	if !changed {
		t.Fatalf("the kept plan has no rule for the workspace %s", s.ws)
	}
	if fields[2], err = landlock.EncodePlan(pl); err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte(nil), head...), '\n')
	for _, f := range fields {
		out = binary.AppendUvarint(out, uint64(len(f)))
		out = append(out, f...)
	}
	if err := os.WriteFile(entry, out, 0o600); err != nil {
		t.Fatal(err)
	}

	r = s.agent("read", s.ws+"/data/a.txt")
	wantOK(t, "a kept plan whose workspace rule names another inode", r)
	if !strings.Contains(r.stderr, s.ws+": changed since planning (replaced or renamed); planning again") || !strings.Contains(r.stderr, "floor: planned (") {
		t.Errorf("the run did not find the stale rule, say so and plan again:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "nothing was run") {
		t.Errorf("the run reported a failure:\n%s", r.stderr)
	}
	notes := 0
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "warning: the policy's patterns that match names anywhere") {
			notes++
		}
	}
	if notes != 1 {
		t.Errorf("the plan's warning on names matched anywhere was printed %d times, want once:\n%s", notes, r.stderr)
	}
}
