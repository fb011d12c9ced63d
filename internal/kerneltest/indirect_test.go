package kerneltest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Persistence files that the built-in write protection names by their
// usual place, found at another: where the operator's environment moves
// them (XDG_CONFIG_HOME, XDG_DATA_HOME), and where the operator's git
// configuration points (include.path, includeIf.*.path, core.hooksPath).
// Each is a file that programs outside the session run or obey; a
// dotfiles repository as the workspace is the usual way they end up in a
// write tree.

// TestXDGRelocatedPersistence: with XDG_CONFIG_HOME and XDG_DATA_HOME in a
// write tree, the systemd user units, git configuration, autostart and
// desktop entries there are write-protected as they are under ~/.config
// and ~/.local/share, and the credentials there denied; an ordinary file
// beside them stays writable. A review found them writable.
func TestXDGRelocatedPersistence(t *testing.T) {
	s := newSandbox(t, standard)
	cfg, data := s.ws+"/dot/config", s.ws+"/dot/share"
	s.extraEnv = append(s.extraEnv, "XDG_CONFIG_HOME="+cfg, "XDG_DATA_HOME="+data)
	for _, d := range []string{"dot/config/systemd/user", "dot/config/git", "dot/config/autostart", "dot/config/gh", "dot/config/other", "dot/share/applications"} {
		s.mkdir("home/proj/" + d)
	}
	s.write("home/proj/dot/config/gh/hosts.yml", "oauth_token: "+sshKey+"\n")
	for _, f := range []string{
		cfg + "/systemd/user/evil.service",
		cfg + "/git/config",
		cfg + "/autostart/evil.desktop",
		data + "/applications/evil.desktop",
	} {
		wantErr(t, "the agent writes "+f, s.agent("write", f, "[Service]\nExecStart=/bin/evil\n"), "EROFS", "EACCES")
		wantOK(t, "control: bare writes "+f, s.bare("write", f, "# operator\n"))
	}
	wantErr(t, "the agent reads the relocated gh token", s.agent("read", cfg+"/gh/hosts.yml"), "EACCES")
	wantOK(t, "control: bare reads it", s.bare("read", cfg+"/gh/hosts.yml"))
	wantOK(t, "control: an ordinary file under the relocated config", s.agent("write", cfg+"/other/settings", "x"))
	r := s.launch("/bin/sh", "-c", "exit 0")
	if r.code != 0 {
		t.Fatalf("a session: %s", r)
	}
	// check names where the rule came from.
	c := s.exec(launcher, "check", "--config", s.config, "--workspace", s.ws)
	if !strings.Contains(c.stdout, "${XDG_CONFIG_HOME}/systemd/user/**") {
		t.Errorf("check does not show the relocated rule: %s", c)
	}
}

// TestGitIncludedConfigProtected: a git configuration that the policy
// write-protects extends its protection to the files it includes
// (include.path, includeIf.*.path, absolute, "~/" or relative to the file,
// and chained) and to the hooks directories core.hooksPath names: git
// runs what they say at the operator's next command. Writing a file beside
// them stays allowed. A review found them writable.
func TestGitIncludedConfigProtected(t *testing.T) {
	s := newSandbox(t, standard)
	gitRepo(t, s)
	inc, chained, cond, rel := s.ws+"/dot/gitconfig", s.ws+"/dot/more/chained", s.ws+"/dot/work.gitconfig", s.ws+"/shared.gitconfig"
	s.write("home/proj/dot/gitconfig", "[include]\n\tpath = more/chained\n")
	s.write("home/proj/dot/more/chained", "[user]\n\tname = op\n")
	s.write("home/proj/dot/work.gitconfig", "[user]\n\temail = op@work\n")
	s.write("home/proj/shared.gitconfig", "[core]\n\tautocrlf = false\n")
	s.mkdir("home/proj/hooks")
	s.write("home/.gitconfig", "[include]\n\tpath = ~/proj/dot/gitconfig\n"+
		"[includeIf \"gitdir:~/proj/\"]\n\tpath = \"proj/dot/work.gitconfig\"\n"+
		"[core]\n\thooksPath = ~/proj/hooks\n")
	gitConfigAppend(t, s, s.ws+"/.git/config", "[include]\n\tpath = ../shared.gitconfig\n")
	evil := "[core]\n\tfsmonitor = /bin/evil\n"
	targets := []string{inc, chained, cond, rel, s.ws + "/hooks/pre-commit"}
	for _, f := range targets {
		wantErr(t, "the agent writes "+f, s.agent("write", f, evil), "EROFS", "EACCES")
	}
	// After every attempt: a control that rewrites the first include
	// ends the chain to the second.
	for _, f := range targets {
		wantOK(t, "control: bare writes "+f, s.bare("write", f, "# operator\n"))
	}
	wantOK(t, "control: a file beside the included ones", s.agent("write", s.ws+"/dot/notes", "x"))
	wantOK(t, "control: a file beside the hooks directory", s.agent("write", s.ws+"/hooks.md", "x"))
	c := s.exec(launcher, "explain", "--config", s.config, "--workspace", s.ws, "--op", "write", inc)
	if c.code != 1 || !strings.Contains(c.stdout, "included from "+s.home+"/.gitconfig") {
		t.Errorf("explain does not say the include protects %s: %s", inc, c)
	}
}

// gitConfigAppend appends text to the git config file f, as the operator.
func gitConfigAppend(t *testing.T, s *sandbox, f, text string) {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, append(b, text...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOverlaySymlinkProtected: an agent overlay that is a symlink into the
// workspace (agents/coder.toml -> <workspace>/coder.toml, as GNU stow
// links dotfiles), beside a policy in a directory the session's view
// replaces (/var/tmp), is the launcher's policy: the agent can neither
// rewrite its own overlay nor another agent's, whose next session would
// run under it. A review rewrote its overlay to default = "write" and
// read the home directory in the next session.
func TestOverlaySymlinkProtected(t *testing.T) {
	s := newSandbox(t, standard)
	dir := hostTempDir(t, "/var/tmp", "agent-launcher-policy-")
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	s.config = dir + "/config.toml"
	s.writeAbs(s.config, string(b))
	if err := os.Mkdir(dir+"/agents", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"coder", "reviewer"} {
		if err := os.Symlink(s.write("home/proj/"+name+".toml", "[file_policy]\n"), dir+"/agents/"+name+".toml"); err != nil {
			t.Fatal(err)
		}
	}
	loosen := "[file_policy]\ndefault = \"write\"\n"
	for _, name := range []string{"coder", "reviewer"} {
		f := s.ws + "/" + name + ".toml"
		wantErr(t, "the agent rewrites "+f, s.launchAs("coder", agent, "write", f, loosen), "EACCES", "EROFS")
		wantOK(t, "control: bare rewrites "+f, s.bare("write", f, "[file_policy]\n"))
	}
	wantOK(t, "control: the session writes the workspace", s.launchAs("coder", agent, "write", s.write("home/proj/coder.txt", ""), "x"))
}

// TestMoreHomeCredentials: credential files and start-up files a review
// read or wrote under a policy that grants the whole home directory
// (upload tokens, rclone's remotes, a PuTTY key in the workspace; gdb,
// IPython and Gradle start-up scripts) are denied and write-protected as
// the built-in lists' others are; a file beside them is not.
func TestMoreHomeCredentials(t *testing.T) {
	s := newSandbox(t, "write_paths = [\"<workspace>/**\", \"~/**\"]\n")
	for _, f := range []string{"home/.pypirc", "home/.cargo/credentials.toml", "home/.config/rclone/rclone.conf", "home/.vault-token", "home/proj/deploy.ppk", "home/proj/app/release.jks"} {
		p := s.write(f, "token = "+sshKey+"\n")
		wantErr(t, "the agent reads "+f, s.agent("read", p), "EACCES")
		wantOK(t, "control: bare reads "+f, s.bare("read", p))
	}
	for _, f := range []string{"home/.gdbinit", "home/.ipython/profile_default/startup/00-x.py", "home/.gradle/init.d/x.gradle", "home/.config/i3/config"} {
		p := s.write(f, "# operator\n")
		wantErr(t, "the agent writes "+f, s.agent("write", p, "shell evil\n"), "EROFS", "EACCES")
		wantOK(t, "control: bare writes "+f, s.bare("write", p, "# operator\n"))
	}
	wantOK(t, "control: a file beside them", s.agent("write", s.write("home/.gradle/notes", ""), "x"))
	wantOK(t, "control: a file beside them", s.agent("read", s.write("home/.cargo/config-notes", "x")))
}

// TestDenyDirectoryWithoutStars: a deny or prompt path that names a
// directory without "/**" keeps what is below it too, as the operator
// means it; a review read <workspace>/vault/k.txt under deny_paths =
// ["<workspace>/vault"], which denied only the directory's own entry.
func TestDenyDirectoryWithoutStars(t *testing.T) {
	s := newSandbox(t, standard+"deny_paths = [\"<workspace>/vault\"]\nprompt_paths = [\"<workspace>/secrets\"]\n")
	for _, f := range []string{"vault/k.txt", "vault/deep/k.txt", "secrets/db.txt"} {
		p := s.write("home/proj/"+f, sshKey)
		wantErr(t, "the agent reads "+f, s.agent("read", p), "EACCES")
		wantOK(t, "control: bare reads "+f, s.bare("read", p))
	}
	wantOK(t, "control: a sibling file", s.agent("read", s.write("home/proj/vaultnotes.txt", "x")))
}

// TestRunShowsPolicyWarnings: run names the policy's warnings at start,
// as check does (a review found a loosening only check mentioned); a
// policy without any prints none.
func TestRunShowsPolicyWarnings(t *testing.T) {
	s := newSandbox(t, standard+"deny_paths = [\"<workspace>/vault*/**\"]\n")
	r := s.agent("pid")
	if r.code != 0 || !strings.Contains(r.stderr, "agent-launcher: policy warning: "+s.config+":") ||
		!strings.Contains(r.stderr, `does not match`) {
		t.Errorf("run does not show the policy's warning: %s", r)
	}
	s = newSandbox(t, standard)
	if r := s.agent("pid"); r.code != 0 || strings.Contains(r.stderr, "policy warning") {
		t.Errorf("control: a policy without warnings: %s", r)
	}
}

// TestReviewPlantedHooksPathRemovesNothingElse: a bare repository the
// agent plants with a core.hooksPath that names the workspace (or above)
// makes neither the workspace nor what was in it "created", and
// `review --remove` removes only what the session made. A review had
// `review --remove` delete the whole workspace, .git and secrets included.
func TestReviewPlantedHooksPathRemovesNothingElse(t *testing.T) {
	s := newSandbox(t, standard)
	gitRepo(t, s)
	s.write("home/proj/src/main.go", "package main\n")
	r := s.sh("mkdir -p src/vendor/evil/objects src/vendor/evil/refs && cd src/vendor/evil && echo 'ref: refs/heads/main' > HEAD && " +
		"printf '[core]\\n\\tbare = true\\n\\thooksPath = ../../..\\n' > config")
	if r.code != 0 {
		t.Fatalf("the agent plants a repository: %s", r)
	}
	if !strings.Contains(r.stderr, "created "+s.ws+"/src/vendor/evil/config") {
		t.Errorf("control: the planted config is not reported: %s", r.stderr)
	}
	for _, p := range []string{s.ws + " (", s.ws + "/README (", s.ws + "/src/main.go ("} {
		if strings.Contains(r.stderr, "created "+p) {
			t.Errorf("the session's end reports %q as created: %s", p, r.stderr)
		}
	}
	rm := s.exec(launcher, "review", "--remove")
	if rm.code != 0 {
		t.Fatalf("review --remove: %s", rm)
	}
	for _, f := range []string{s.ws + "/README", s.ws + "/src/main.go", s.ws + "/.git/config"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("review --remove removed %s: %v (%s)", f, err, rm)
		}
	}
	if _, err := os.Stat(s.ws + "/src/vendor/evil/config"); err == nil {
		t.Errorf("control: review --remove left the planted config: %s", rm)
	}
}

// TestSessionKeyringNotInherited: the agent starts with a session keyring
// of its own, not the operator's, whose keys it could read, change and
// plant (a login session's also links the operator's user keyring). A
// review read and replaced the operator's key. Control: the bare agent,
// started the same way, reads it.
func TestSessionKeyringNotInherited(t *testing.T) {
	s := newSandbox(t, standard)
	done := make(chan [3]result, 1)
	go func() {
		// The session keyring is the thread's: this one's is never
		// given back (the thread ends with the goroutine, locked).
		runtime.LockOSThread()
		if _, err := unix.KeyctlJoinSessionKeyring("agent-launcher-test"); err != nil {
			t.Errorf("joining a session keyring: %v", err)
			done <- [3]result{}
			return
		}
		if _, err := unix.AddKey("user", "op_token", []byte("OPERATOR-KEY-"+sshKey), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
			t.Errorf("adding a key: %v", err)
			done <- [3]result{}
			return
		}
		bin, args := s.noViewArgs("", false, agent, "keyring-read", "op_token")
		done <- [3]result{s.agent("keyring-read", "op_token"), s.exec(bin, args...), s.bare("keyring-read", "op_token")}
	}()
	r := <-done
	wantErr(t, "the agent reads the operator's session key", r[0], "ENOKEY", "EACCES")
	wantErr(t, "without the view, the agent reads the operator's session key", r[1], "ENOKEY", "EACCES")
	if !strings.Contains(r[1].stderr, "NO private view") {
		t.Errorf("control: the session without a view had one: %s", r[1].stderr)
	}
	wantOK(t, "control: bare reads it", r[2])
}

// TestNoSharedIPC: the session has an IPC namespace of its own, so the
// operator's System V shared memory (and message queues, semaphores) are
// out of its reach, and what it makes there ends with it. A review read
// and overwrote an operator's 0600 segment. Control: the bare agent reads
// it.
func TestNoSharedIPC(t *testing.T) {
	s := newSandbox(t, standard)
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	b, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	copy(b, "OPERATOR-SHM-"+sshKey)
	unix.SysvShmDetach(b)
	ids := strconv.Itoa(id)
	wantErr(t, "the agent reads the operator's segment", s.agent("shm-read", ids), "EINVAL", "EACCES", "EIDRM")
	wantOK(t, "control: bare reads it", s.bare("shm-read", ids))
}

// TestScreenSocketsHidden: GNU screen's socket directory ($SCREENDIR, and
// Debian's /run/screen, as root) is out of the view, as tmux's under /tmp
// is: a review attached to the operator's screen session and ran commands
// outside. Control: the bare agent connects.
func TestScreenSocketsHidden(t *testing.T) {
	s := newSandbox(t, standard)
	dir := s.mkdir("screens/S-op")
	sock := dir + "/123.work"
	serveUnix(t, sock)
	s.extraEnv = []string{"SCREENDIR=" + s.path("screens")}
	wantOK(t, "control: bare connects to the screen session", s.bare("connect-unix", sock))
	wantErr(t, "connect to the screen session inside", s.agent("connect-unix", sock), "ENOENT", "ECONNREFUSED", "EACCES")
	if os.Getuid() != 0 {
		return // /run/screen is root's to make; SCREENDIR held the claim above
	}
	if _, err := os.Lstat("/run/screen"); err != nil {
		if err := os.Mkdir("/run/screen", 0o775); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll("/run/screen") })
	}
	d := hostTempDir(t, "/run/screen", "S-test-")
	rs := d + "/1.work"
	serveUnix(t, rs)
	s.extraEnv = nil
	wantOK(t, "control: bare connects under /run/screen", s.bare("connect-unix", rs))
	wantErr(t, "connect under /run/screen inside", s.agent("connect-unix", rs), "ENOENT", "ECONNREFUSED", "EACCES")
}

// TestExhaustedNamespacesRefused: where user namespaces are allowed but
// this user's are used up (an agent of another session can hold them
// all), run refuses to start instead of running without the view, which
// a review used to reach the operator's tmux from a second session. Made
// in a child user namespace whose user.max_user_namespaces is 1, with one
// held. Control: with 0 there (namespaces refused), the session runs
// without the view and says so.
func TestExhaustedNamespacesRefused(t *testing.T) {
	s := newSandbox(t, standard)
	unshare := s.lookPath("unshare")
	if unshare == "" {
		t.Fatalf("this test needs util-linux's unshare in %s", sandboxPATH)
	}
	held := `echo 1 > /proc/sys/user/max_user_namespaces && { ` + shq(unshare) + ` -U sleep 5 & } && sleep 0.3 && exec "$@"`
	r := s.exec(unshare, "-Ur", "/bin/sh", "-c", held, "sh", launcher, "run", "--config", s.config, "--workspace", s.ws, "--", agent, "pid")
	if r.code != 125 || !strings.Contains(r.stderr, "exhausted") || strings.Contains(r.stdout, "ok") {
		t.Errorf("with this user's namespaces used up, run: %s; want a refusal", r)
	}
	bin, args := s.noViewArgs("", false, agent, "pid")
	if r := s.exec(bin, args...); r.code != 0 || !strings.Contains(r.stderr, "NO private view") {
		t.Errorf("control: with namespaces refused, run: %s; want a session without the view", r)
	}
}

// TestNoEscapesOnStderr: names the agent chose (a directory holding a
// .env, carved in the next session's floor; a planted .envrc the review
// reports) reach the operator's terminal with their control characters
// made visible, on the start-up line, the session-end review and
// `review`. A review hid a warning and rewrote the start-up line with
// escape sequences.
func TestNoEscapesOnStderr(t *testing.T) {
	s := newSandbox(t, standard)
	// Without the system preset, so that root's floor carves no /etc and
	// the directory is among the carved ones the start-up line names.
	s.writeAbs(s.config, fmt.Sprintf("[file_policy]\ndefault = \"deny\"\nread_paths = [%q]\nwrite_paths = [\"<workspace>/**\"]\n", binDir+"/**"))
	evil := "a\r\x1b[2Kno change\x1b[8m"
	if r := s.agent("mkdir", s.ws+"/"+evil); r.code != 0 {
		t.Fatalf("the agent's directory: %s", r)
	}
	r := s.agent("write", s.ws+"/"+evil+"/.envrc", "x")
	if r.code != 0 || !strings.Contains(r.stderr, `.envrc`) {
		t.Fatalf("the agent's .envrc (control: reported): %s", r)
	}
	// A .env there makes the next session's floor carve the directory.
	s.writeAbs(s.ws+"/"+evil+"/.env.local", "y")
	rv := s.exec(launcher, "review")
	next := s.agent("pid")
	for what, out := range map[string]string{"the session-end review": r.stderr, "the next start-up line": next.stderr, "review": rv.stdout + rv.stderr} {
		if strings.ContainsAny(out, "\x1b\r") {
			t.Errorf("%s prints a raw escape: %q", what, out)
		}
	}
	if next.code != 0 {
		t.Errorf("the next session: %s", next)
	}
	for what, out := range map[string]string{"the session-end review": r.stderr, "review": rv.stdout, "the next start-up line": next.stderr} {
		if !strings.Contains(out, `\x1b[2Kno change`) {
			t.Errorf("control: %s does not name the .envrc, escaped: %q", what, out)
		}
	}
}

// TestStateAndWorkspaceModes: the modes of the workspace, the home
// directory and the launcher's state directories are recorded: a session
// that opens them to other users is reported at its end; the next run
// closes the state directories again; and `review` refuses a report that
// others could have written. A review made the workspace 0777 unreported,
// and had another user forge the report that `review --remove` obeyed.
func TestStateAndWorkspaceModes(t *testing.T) {
	s := newSandbox(t, standard)
	state := s.stateDir()
	if r := s.agent("pid"); r.code != 0 { // makes the state directories
		t.Fatalf("a first session: %s", r)
	}
	t.Cleanup(func() {
		for _, d := range []string{s.ws, state, state + "/review"} {
			os.Chmod(d, 0o755)
		}
	})
	r := s.sh("chmod 0777 " + shq(s.ws) + " " + shq(state) + " " + shq(state+"/review"))
	if r.code != 0 {
		t.Fatalf("the agent's chmod: %s", r)
	}
	for _, d := range []string{s.ws, state, state + "/review"} {
		if !strings.Contains(r.stderr, "mode changed "+d+" (") {
			t.Errorf("the session's end does not report the mode of %s: %s", d, r.stderr)
		}
	}
	if rv := s.exec(launcher, "review"); rv.code == 0 || !strings.Contains(rv.stderr, "others can write") {
		t.Errorf("review trusts a report in a directory others can write: %s", rv)
	}
	if r := s.agent("pid"); r.code != 0 {
		t.Fatalf("the next session: %s", r)
	}
	for _, d := range []string{state, state + "/review", state + "/plans"} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("the next run left %s as %v (%v); want 0700", d, st.Mode(), err)
		}
	}
	if rv := s.exec(launcher, "review"); rv.code != 0 {
		t.Errorf("control: review of a report only its owner writes: %s", rv)
	}
}

// TestKeyQuotaFull: with this user's kernel key quota full (an agent can
// fill it), a start from a process that has a session keyring (a login's:
// pam_keyinit) is refused, naming why, rather than run the agent with the
// operator's keyring: the kernel charges a new session keyring to the
// quota then (it lets one overrun the quota only for a process that had
// none, whose start goes on). The twentieth pass's README said so, with
// no test; this pass had first read the overrun as the rule. As root the
// quota filled is al-test's (root's is a million keys), and run runs as
// al-test. Controls: the filler reached the quota, the kernel counts the
// uid's keys at its limit, and once they are freed the same start runs
// the agent, in an empty keyring of its own.
func TestKeyQuotaFull(t *testing.T) {
	needKernel(t)
	home, ws, config, cred, uid := userWorld(t, "kerneltest-keyquota")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	command := func(argv ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		cmd.Dir = ws
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
		return cmd
	}
	// run starts run from a thread with a session keyring of its own,
	// which the launcher inherits; the thread joins it before the quota
	// is filled (as al-test, the keyring counts against it too).
	requests, results := make(chan struct{}), make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with its keyring
		_, err := unix.KeyctlJoinSessionKeyring("agent-launcher-test-quota")
		for range requests {
			if err != nil {
				t.Errorf("joining a session keyring: %v", err)
				results <- result{code: -1}
				continue
			}
			cmd := command(launcher, "run", "--config", config, "--workspace", ws, "--", agent, "keyring-read", "fill-0")
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			r := result{stdout: stdout.String(), stderr: stderr.String()}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				r.code = ee.ExitCode()
			} else if err != nil {
				t.Errorf("run: %v", err)
				r.code = -1
			}
			results <- r
		}
	}()
	t.Cleanup(func() { close(requests) })
	run := func() result {
		requests <- struct{}{}
		return <-results
	}

	// Keys of earlier tests, unreferenced, are freed by the kernel's
	// collector a moment later: what it frees while the quota is full
	// would make room for the session keyring. Wait until the count rests.
	last, still := -1, 0
	for deadline := time.Now().Add(10 * time.Second); still < 5 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n, _ := keysOf(t, uid); n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	filler := command(agent, "keyring-fill")
	in, err := filler.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := filler.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := filler.Start(); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		in.Close()
		filler.Wait()
		// The keys are freed by the kernel's key collector, a moment
		// after their keyring: wait for the quota, so that no test after
		// this one finds it full.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if n, limit := keysOf(t, uid); n < limit/2 {
				return
			}
		}
		t.Errorf("the filler's keys still count against uid %d's quota 10 s after it ended", uid)
	}
	t.Cleanup(release)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "filled ") {
		t.Fatalf("the filler did not fill the quota: %q, %v", line, err)
	}
	if n, limit := keysOf(t, uid); n < limit {
		t.Fatalf("control: uid %d holds %d keys of its quota of %d after the filler said %q", uid, n, limit, strings.TrimSpace(line))
	}

	r := run()
	if r.code != 125 || !strings.Contains(r.stderr, "cannot give the agent a session keyring of its own") || r.stdout != "" {
		t.Errorf("with the key quota full, want the start refused (exit 125, the keyring named, no agent output), got %s", r)
	}
	release()
	wantErr(t, "control: with the quota free, the agent reads a key of the filler's", run(), "ENOKEY", "EACCES")
}

// keysOf returns how many keys uid holds and its quota's limit, from
// /proc/key-users ("UID: USAGE NKEYS/NIKEYS QNKEYS/MAXKEYS QNBYTES/MAXBYTES").
func keysOf(t *testing.T, uid int) (n, limit int) {
	t.Helper()
	b, err := os.ReadFile("/proc/key-users")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != strconv.Itoa(uid)+":" {
			continue
		}
		q := strings.SplitN(f[3], "/", 2)
		if len(q) == 2 {
			n, _ = strconv.Atoi(q[0])
			limit, _ = strconv.Atoi(q[1])
			return n, limit
		}
	}
	return 0, 1 << 30 // no keys at all
}
