package kerneltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Regression tests for the holes an adversarial review of the floor found
// (issue 4). Each has its control beside it.

// wantRefused asserts that run refused to start, naming what.
func wantRefused(t *testing.T, what string, r result, names ...string) {
	t.Helper()
	if r.code != 125 || r.stdout != "" {
		t.Errorf("%s: run did not refuse: %s", what, r)
		return
	}
	for _, n := range names {
		if !strings.Contains(r.stderr, n) {
			t.Errorf("%s: the refusal does not name %q: %s", what, n, r.stderr)
		}
	}
}

// TestHardLinkedWriteProtection: a write-protected file (a git hook, the
// repository's config, ~/.bashrc) with a second name in the workspace
// would be writable through it: run refuses.
func TestHardLinkedWriteProtection(t *testing.T) {
	s := newSandbox(t, standard)
	hook := s.write("home/proj/.git/hooks/pre-commit", "#!/bin/sh\n")
	s.write("home/proj/.git/config", "[core]\n")
	bashrc := s.write("home/.bashrc", "# rc\n")
	s.write("home/proj/sub/x", "")
	if r := s.agent("write", s.ws+"/sub/x", "1"); r.code != 0 {
		t.Fatalf("control: %s", r)
	}
	for _, c := range []struct{ name, target, link string }{
		{"hook", hook, s.ws + "/hooklink"},
		{"git config", s.ws + "/.git/config", s.ws + "/sub/cfglink"},
		{"bashrc", bashrc, s.ws + "/dotbashrc"},
		{"a deep credential", s.write("home/.ssh/keys/id_work", sshKey), s.ws + "/keylink"},
		{"a deep aws token", s.write("home/.aws/sso/cache/tok.json", sshKey), s.ws + "/toklink"},
	} {
		os.MkdirAll(filepath.Dir(c.link), 0o755)
		if err := os.Link(c.target, c.link); err != nil {
			t.Fatal(err)
		}
		wantOK(t, "control: the link writes bare", s.bare("append", c.link, ""))
		wantRefused(t, c.name, s.agent("append", c.link, "PWNED"), c.target, "2 hard links")
		os.Remove(c.link)
	}
	if b, _ := os.ReadFile(hook); string(b) != "#!/bin/sh\n" {
		t.Errorf("the hook changed: %q", b)
	}
}

// TestBindMountedWriteProtection: ~/.bashrc bind-mounted into the
// workspace: run refuses. The mount is made in a mount namespace the
// launcher then runs in (withBind), so the host never sees it.
func TestBindMountedWriteProtection(t *testing.T) {
	s := newSandbox(t, standard)
	bashrc := s.write("home/.bashrc", "# rc\n")
	target := s.write("home/proj/m/bashrc", "")
	run := []string{"run", "--config", s.config, "--workspace", s.ws, "--", agent, "append", target}
	r := s.withBind(bashrc, target, launcher, append(run, "PWNED")...)
	wantRefused(t, "bind-mounted ~/.bashrc", r, bashrc, "mounted again")
	if b, _ := os.ReadFile(bashrc); string(b) != "# rc\n" {
		t.Errorf("~/.bashrc changed: %q", b)
	}
	// Control: the same world with a harmless bind (another workspace
	// file on the target) runs.
	other := s.write("home/proj/m/other", "")
	wantOK(t, "control: a harmless bind mount", s.withBind(other, target, launcher, append(run, "ok")...))
}

// TestGrantedFileMovedOverProtectedName: the operator renames a file that
// was granted at launch over a name the policy protects, during the
// session. Landlock rules follow the file, so the agent can still reach it
// (a documented limit of inode rules); the launcher must say so loudly,
// never that the agent cannot reach it.
func TestGrantedFileMovedOverProtectedName(t *testing.T) {
	s := newSandbox(t, standard)
	s.write("home/proj/.env", envSec) // carves the workspace, which is then watched
	s.write("home/proj/sample.json", "{}")
	s.mkdir("home/proj/sub")
	marker, goOn := s.ws+"/sub/started", s.path("go")
	cmd := exec.Command(launcher, "run", "--config", s.config, "--workspace", s.ws, "--",
		"/bin/sh", "-c", "echo > sub/started || exit 9; while [ ! -e "+goOn+" ]; do sleep 0.05; done; sleep 0.3")
	cmd.Env = s.env()
	cmd.Dir = s.ws
	var errb strings.Builder
	cmd.Stderr = &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, marker)
	os.Rename(s.ws+"/sample.json", s.ws+"/credentials.json")
	time.Sleep(200 * time.Millisecond)
	os.WriteFile(goOn, nil, 0o644)
	cmd.Wait()
	out := errb.String()
	if !strings.Contains(out, "WARNING") || !strings.Contains(out, s.ws+"/credentials.json") || strings.Contains(out, "cannot reach it") {
		t.Errorf("no warning for a granted file moved over a protected name:\n%s", out)
	}
}

func waitFor(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSymlinkedHomeConfig: with $HOME a symlink (Fedora Silverblue's /home
// -> /var/home) and XDG_CONFIG_HOME elsewhere, the default config location
// (which a later session without the variable reads) stays protected, even
// under a policy that grants ~/.config.
func TestSymlinkedHomeConfig(t *testing.T) {
	s := newSandbox(t, standard+"read_paths = []\n")
	real := s.mkdir("var/home")
	if err := os.Rename(s.home, real+"/u"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("var/home", s.path("homelink")); err != nil {
		t.Fatal(err)
	}
	home := s.path("homelink/u")
	s.home, s.ws = home, home+"/proj"
	cfgDir := home + "/.dotconfig/agent-launcher"
	os.MkdirAll(cfgDir, 0o755)
	os.WriteFile(cfgDir+"/config.toml", []byte(s.policyHeader()+"write_paths = [\"<workspace>/**\", \"~/.config/**\"]\n"), 0o644)
	def := home + "/.config/agent-launcher/config.toml"
	os.MkdirAll(filepath.Dir(def), 0o755)
	os.WriteFile(def, []byte("# the operator's\n"), 0o644)
	os.WriteFile(home+"/.config/other.txt", nil, 0o644)
	s.extraEnv = []string{"XDG_CONFIG_HOME=" + home + "/.dotconfig"}
	r := s.exec(launcher, "run", "--workspace", s.ws, "--", agent, "append", def, "\n[file_policy]\ndefault = \"write\"\n")
	wantErr(t, "write the default-location config through a symlinked HOME", r, "EACCES")
	r = s.exec(launcher, "run", "--workspace", s.ws, "--", agent, "write", home+"/.config/other.txt", "x")
	wantOK(t, "control: the rest of ~/.config is writable", r)
}

// TestNonUTF8 passes arguments, environment and paths that are not UTF-8
// through unchanged.
func TestNonUTF8(t *testing.T) {
	s := newSandbox(t, standard)
	s.write("home/proj/.env", envSec) // carves the workspace: its entries get their own rules
	bad := "d\xffir"
	s.write("home/proj/"+bad+"/f", "x")
	arg := "a\xffb"
	s.mkdir("home/proj/o")
	r := s.launch("/bin/sh", "-c", `printf %s "$1" > o/out`, "sh", arg)
	if r.code != 0 {
		t.Fatalf("a non-UTF-8 name or argument broke the launch: %s", r)
	}
	if b, _ := os.ReadFile(s.ws + "/o/out"); string(b) != arg {
		t.Errorf("argument %q arrived as %q", arg, b)
	}
	wantOK(t, "write inside a directory with a non-UTF-8 name", s.agent("write", s.ws+"/"+bad+"/g", "y"))
	s.extraEnv = []string{"LATIN=caf\xe9"}
	s.launch("/bin/sh", "-c", `printf %s "$LATIN" > o/env2`)
	if b, _ := os.ReadFile(s.ws + "/o/env2"); string(b) != "caf\xe9" {
		t.Errorf("environment arrived as %q", b)
	}
}

// TestCanaryWithoutDAC: the agent can chmod its denied state directory
// (metadata is not Landlock's), which would make the next canary fail by
// permission bits instead of Landlock. The launcher restores the mode and
// probes a file it has just made readable, so the canary tests Landlock;
// likewise for the canary itself.
func TestCanaryWithoutDAC(t *testing.T) {
	s := newSandbox(t, standard)
	wantOK(t, "first session", s.agent("write", s.ws+"/x", "1"))
	state := s.home + "/.local/state/agent-launcher"
	if err := os.Chmod(state, 0); err != nil {
		t.Fatal(err)
	}
	r := s.agent("write", s.ws+"/x", "2")
	wantOK(t, "a session after the state directory was chmod 000", r)
	st, err := os.Stat(state)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode %v, %v; want 0700", st.Mode(), err)
	}
	if st, err := os.Stat(state + "/canary"); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("canary: %v %v", st, err)
	}
	// The canary itself chmod 000 (an agent can: its metadata is not
	// Landlock's either): the next session restores it too. Root reads and
	// writes a file of mode 000 anyway: the suite's run as an ordinary user
	// (scripts/test-unprivileged) is the one this step can fail in.
	if err := os.Chmod(state+"/canary", 0); err != nil {
		t.Fatal(err)
	}
	wantOK(t, "a session after the canary was chmod 000", s.agent("write", s.ws+"/x", "3"))
	if st, err := os.Stat(state + "/canary"); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("canary after chmod 000: %v %v", st, err)
	}
	_ = strconv.Itoa
}

// Regression tests for the second review.

// TestSymlinkedProtectedParent: ~/.config as a whole is a symlink into the
// workspace (a dotfiles layout). What the built-in lists protect below it
// (gh's token, git's config) stays protected at the place it leads to.
func TestSymlinkedProtectedParent(t *testing.T) {
	s := newSandbox(t, standard)
	token := s.write("home/proj/dotconfig/gh/hosts.yml", "oauth_token: "+sshKey)
	gitcfg := s.write("home/proj/dotconfig/git/config", "[user]\n")
	other := s.write("home/proj/dotconfig/other.conf", "x")
	if err := os.Symlink(s.ws+"/dotconfig", s.home+"/.config"); err != nil {
		t.Fatal(err)
	}
	wantOK(t, "control: bare reads the token", s.bare("read", s.home+"/.config/gh/hosts.yml"))
	wantErr(t, "read the token through ~/.config", s.agent("read", s.home+"/.config/gh/hosts.yml"), "EACCES")
	wantErr(t, "read the token where it lives", s.agent("read", token), "EACCES")
	wantErr(t, "write git's config where it lives", s.agent("append", gitcfg, "[core]\n\tfsmonitor = evil\n"), "EACCES")
	wantOK(t, "control: the rest of the linked directory is writable", s.agent("append", other, "y"))
	r := s.exec(launcher, "explain", "--config", s.config, "--workspace", s.ws, token)
	if r.code != 1 || !strings.Contains(r.stdout, "through the symlink") {
		t.Errorf("explain does not say the token is protected through the symlink: %s", r)
	}
}

// TestSymlinkedDotfileDefaultPolicy: ~/.bashrc as a symlink into the
// workspace under a policy that denies the rest of the home directory
// starts, and the target is write-protected.
func TestSymlinkedDotfileDefaultPolicy(t *testing.T) {
	s := newSandbox(t, standard)
	rc := s.write("home/proj/dotfiles/bashrc", "# rc\n")
	readme := s.write("home/proj/dotfiles/README", "")
	if err := os.Symlink(rc, s.home+"/.bashrc"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "write the rc file through the workspace", s.agent("append", rc, "evil\n"), "EACCES", "EROFS")
	wantOK(t, "control: the rest of the workspace", s.agent("append", readme, "x"))
}

// TestPlantedLinksNextSession: symlinks the agent plants in its workspace
// in one session must not make the next session grant more, and must not
// turn the workspace read-only or deny the system through a derived rule.
func TestPlantedLinksNextSession(t *testing.T) {
	s := newSandbox(t, standard)
	s.write("home/proj/src/a.go", "package a\n")
	r := s.sh("ln -s .. src/.envrc && ln -s /usr src/x.pem && ln -s " + s.home + "/.ssh src/keys.pem && ln -s " + s.ws + "/src src/sub.key")
	if r.code != 0 {
		t.Fatalf("planting: %s", r)
	}
	r = s.agent("append", s.ws+"/src/a.go", "// next session\n")
	wantOK(t, "the next session still writes the workspace", r)
	wantOK(t, "the next session still reads /usr", s.agent("read", "/usr/bin/env"))
	wantErr(t, "the key stays denied", s.agent("read", s.home+"/.ssh/id_ed25519"), "EACCES")
	if !strings.Contains(r.stderr, "src/.envrc") {
		t.Errorf("the start-up lines do not name the planted link: %s", r.stderr)
	}
}

// Regression tests for the third review.

// TestSymlinksInsideProtectedDirs: a dotfile manager (GNU stow) keeps
// ~/.ssh, ~/.aws and ~/.config/systemd/user as real directories of
// symlinks into a repository, here in the workspace. What the links lead
// to keeps the protection of their names, and explain says what run does.
func TestSymlinksInsideProtectedDirs(t *testing.T) {
	s := newSandbox(t, standard)
	sshcfg := s.write("home/proj/dotfiles/ssh/config", "Host *\n")
	creds := s.write("home/proj/dotfiles/aws/credentials", "aws_secret_access_key = "+sshKey)
	unit := s.write("home/proj/dotfiles/systemd/a.service", "[Service]\n")
	for name, target := range map[string]string{"home/.ssh/config": sshcfg, "home/.aws/credentials": creds, "home/.config/systemd/user/a.service": unit} {
		s.mkdir(filepath.Dir(name))
		if err := os.Symlink(target, s.path(name)); err != nil {
			t.Fatal(err)
		}
	}
	wantOK(t, "control: bare reads the credentials", s.bare("read", creds))
	wantErr(t, "read the aws credentials where they live", s.agent("read", creds), "EACCES")
	wantErr(t, "read the ssh config where it lives", s.agent("read", sshcfg), "EACCES")
	wantErr(t, "append a ProxyCommand to the ssh config", s.agent("append", sshcfg, "ProxyCommand evil\n"), "EACCES")
	wantErr(t, "rewrite the systemd unit", s.agent("append", unit, "ExecStart=evil\n"), "EACCES", "EROFS")
	wantOK(t, "the systemd unit stays readable (write protection)", s.agent("read", unit))
	for _, c := range []struct {
		op, path string
		want     int
	}{{"read", creds, 1}, {"write", sshcfg, 1}, {"write", unit, 1}, {"read", unit, 0}} {
		if r := s.exec(launcher, "explain", "--config", s.config, "--workspace", s.ws, "--op", c.op, c.path); r.code != c.want {
			t.Errorf("explain --op %s %s: exit %d, want %d: %s", c.op, c.path, r.code, c.want, r.stdout)
		}
	}
}

// TestKnownLimitLinkFromUngrantedTree pins a documented limit: a symlink
// with a protected name in a part of the home directory no rule grants
// (another repository's .git/hooks) that leads into the workspace is not
// found (the launcher lists only granted and literally protected trees),
// so the agent can write what it leads to; explain says so too.
func TestKnownLimitLinkFromUngrantedTree(t *testing.T) {
	s := newSandbox(t, standard)
	hooks := s.mkdir("home/proj/sharedhooks")
	hook := s.write("home/proj/sharedhooks/pre-commit", "#!/bin/sh\n")
	s.mkdir("home/other/.git")
	if err := os.Symlink(hooks, s.path("home/other/.git/hooks")); err != nil {
		t.Fatal(err)
	}
	r := s.agent("append", hook, "evil\n")
	if r.code != 0 {
		t.Errorf("the documented limit changed: the hook is now %s; update the README and this test", r)
	}
	if e := s.exec(launcher, "explain", "--config", s.config, "--workspace", s.ws, "--op", "write", hook); e.code != 0 {
		t.Errorf("explain disagrees with run: exit %d: %s", e.code, e.stdout)
	}
}

// TestDerivedRulesNeverLoosen: a link the agent plants with a prompt name
// leading to a read-only tree makes the next session protect that tree,
// never turn its denied writes into approvals.
func TestDerivedRulesNeverLoosen(t *testing.T) {
	s := newSandbox(t, standard+"read_paths = [\"~/notes/**\"]\nprompt_paths = [\"<workspace>/**/.github/workflows/**\"]\n")
	todo := s.write("home/notes/todo", "x")
	s.mkdir("home/proj/src/.github")
	if r := s.sh("ln -s " + s.home + "/notes src/.github/workflows"); r.code != 0 {
		t.Fatalf("planting: %s", r)
	}
	r := s.exec(launcher, "explain", "--config", s.config, "--workspace", s.ws, "--op", "write", todo)
	if r.code != 1 {
		t.Errorf("explain --op write %s: exit %d, want 1 (denied, never needs approval): %s", todo, r.code, r.stdout)
	}
	wantErr(t, "write the read-only tree", s.agent("append", todo, "y"), "EACCES")
}
