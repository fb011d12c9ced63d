package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/internal/testbin"
	"github.com/agent-launcher/agent-launcher/landlock"
)

// The ready timeout holds on the supervisor's end of the sync socket: a
// read with no frame coming ends at the deadline, and a frame written on
// the init stage's end, which stays blocking, arrives.
func TestSyncPairDeadline(t *testing.T) {
	conn, child, err := syncPair()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	defer child.Close()
	if fl, err := unix.FcntlInt(child.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Fatalf("the init stage's end: flags %#x (%v), want blocking", fl, err)
	}
	if err := conn.SetDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatalf("SetDeadline: %v", err)
	}
	var rep report
	if err := readFrame(conn, &rep); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read with nothing sent: %v, want the deadline", err)
	}
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := writeFrame(child, report{Type: msgReady}); err != nil {
		t.Fatal(err)
	}
	if err := readFrame(conn, &rep); err != nil || rep.Type != msgReady {
		t.Fatalf("read: %+v, %v; want %q", rep, err, msgReady)
	}
}

// startInitStage starts this test binary as the init stage (its
// constructor runs initstage.c before the Go runtime) with the sync
// socket's other end at fd 3, as the supervisor does, and returns the
// supervisor's end and the process, whose stderr goes to stderr (a file:
// a pipe's copier would make Wait wait for every process that holds it);
// view: started for a session with a private view, as PID 1 of its
// namespaces (spawnView), from a thread that stays until it has exited.
func startInitStage(t *testing.T, stderr *os.File, view bool, env ...string) (*os.File, *initProc) {
	t.Helper()
	conn, child, err := syncPair()
	if err != nil {
		t.Fatal(err)
	}
	p := &initProc{pidfd: -1}
	if view {
		p.done = make(chan int, 1)
		started := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			var err error
			p.pid, p.pidfd, err = spawnView(env, [4]int{0, 1, int(stderr.Fd()), int(child.Fd())}, -1)
			started <- err
			if err != nil {
				return
			}
			code, _ := reap(p.pid)
			p.done <- code
		}()
		if err := <-started; err != nil {
			t.Fatal(err)
		}
	} else {
		p.cmd = exec.Command("/proc/self/exe", InitArg)
		p.cmd.ExtraFiles = []*os.File{child}
		p.cmd.Env = append([]string{}, env...)
		p.cmd.Stderr = stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p.pid = p.cmd.Process.Pid
	}
	child.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); p.Kill(); p.Wait() })
	return conn, p
}

// initProc is an init stage a test started (startInitStage).
type initProc struct {
	pid, pidfd int
	cmd        *exec.Cmd // without a view
	done       chan int  // with one: its exit status, once
	code       int
	waited     bool
}

// Kill kills the init stage, if it has not been reaped yet.
func (p *initProc) Kill() {
	if p.cmd != nil {
		p.cmd.Process.Kill()
	} else if !p.waited {
		unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0)
	}
}

// Wait waits for the init stage to exit, once; then ExitCode is its
// status.
func (p *initProc) Wait() {
	if p.waited {
		return
	}
	p.waited = true
	if p.cmd != nil {
		p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		return
	}
	p.code = <-p.done
	unix.Close(p.pidfd)
}

func (p *initProc) ExitCode() int { return p.code }

// TestInitStageRefusesMalformedConfig: initstage.c's decoder takes a
// configuration cut short anywhere, with a byte too many or with a NUL in
// a path for none: it reports the configuration unreadable and exits 125
// before it acts on any of it. The whole configuration is read (the
// control): the init stage goes on to say it is ready.
func TestInitStageRefusesMalformedConfig(t *testing.T) {
	cfg := newConfig(nil, "/bin/true", []string{"true"}, []string{"A=1"}) // unconfined, no view: it acts on nothing before "ready"
	good := cfg.encode()
	withNUL := newConfig(nil, "/bin/\x00true", nil, nil)
	full := testConfig() // a view, rules, binds, caches: every truncation is refused before any of it is acted on
	fullB := full.encode()
	overflow := append([]byte(configMagic), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02)             // past 64 bits
	long := slices.Concat([]byte(configMagic), []byte{good[len(configMagic)] | 0x80, 0}, good[len(configMagic)+1:]) // its first number written long
	if good[len(configMagic)] >= 0x80 {
		t.Fatal("the first number is not one byte")
	}
	cases := map[string][]byte{"a byte too many": append(slices.Clone(good), 0), "a NUL in the path": withNUL.encode(), "a number written long": long,
		"the full one with a byte too many": append(slices.Clone(fullB), 0), "a number past 64 bits": overflow}
	for n := range len(good) {
		cases[fmt.Sprintf("cut at %d", n)] = good[:n]
	}
	for n := range len(fullB) {
		cases[fmt.Sprintf("the full one cut at %d", n)] = fullB[:n]
	}
	for name, b := range cases {
		if _, err := decodeConfig(b); err == nil {
			t.Fatalf("%s: the reference decoder takes it", name)
		}
	}
	// Started for a view, PID 1 reads the configuration, in the session's
	// namespaces; without, the init stage's first process does.
	for _, view := range []bool{false, true} {
		for name, payload := range cases {
			stderr := tempFile(t)
			conn, cmd := startInitStage(t, stderr, view)
			if err := writeRawFrame(conn, payload); err != nil {
				t.Fatal(err)
			}
			var rep report
			err := readFrame(conn, &rep)
			if err != nil || rep.Type != msgError || !strings.Contains(rep.Msg, "reading the configuration") {
				t.Errorf("%s (view %v): %+v, %v (stderr %q)", name, view, rep, err, contents(stderr))
				cmd.Kill() // taken: it would wait for "go"
			}
			if cmd.Wait(); cmd.ExitCode() != 125 {
				t.Errorf("%s (view %v): exit %d", name, view, cmd.ExitCode())
			}
		}
	}
	stderr := tempFile(t)
	conn, cmd := startInitStage(t, stderr, false)
	if err := writeRawFrame(conn, good); err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := readFrame(conn, &rep); err != nil || rep.Type != msgReady {
		t.Fatalf("the whole configuration: %+v, %v (stderr %q)", rep, err, contents(stderr))
	}
	conn.Close() // no "go": it exits without running the agent
	if cmd.Wait(); cmd.ExitCode() != 125 {
		t.Errorf("no go: exit %d", cmd.ExitCode())
	}
}

// TestInitStageRefusesReplacedBind: a protected path that names another
// inode than the one the floor was planned for (replaced from outside in
// between, as an editor's atomic save does), or that is now a symlink
// (even one with the planned inode number: numbers of freed inodes are
// reused), is refused before anything is mounted over it, and not as a
// view error, which would start again without the view. The control: the
// same path unchanged passes the view and reaches Landlock (whose
// ruleset, handling nothing here, the kernel then refuses).
func TestInitStageRefusesReplacedBind(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(b landlock.Bind) error {
		t.Helper()
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer devnull.Close()
		s := Session{Path: "/bin/true", Argv: []string{"true"}, Stdin: devnull, Stdout: devnull, Stderr: devnull,
			Plan: &landlock.Plan{Canary: "/nonexistent", Binds: []landlock.Bind{b}}, View: &landlock.View{}}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = Run(ctx, s)
		return err
	}
	planned := func() landlock.Bind {
		var st syscall.Stat_t
		if err := syscall.Lstat(config, &st); err != nil {
			t.Fatal(err)
		}
		return landlock.Bind{Path: config, ReadOnly: true, Dev: st.Dev, Ino: st.Ino}
	}
	b := planned()
	if err := run(b); err == nil || !strings.Contains(err.Error(), "landlock_create_ruleset") {
		t.Fatalf("control, the path unchanged: %v; want the view built and Landlock reached", err)
	}
	if err := os.WriteFile(config+".new", []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(config+".new", config); err != nil {
		t.Fatal(err)
	}
	err := run(b)
	var ve *ViewError
	var se *StaleError
	if err == nil || !strings.Contains(err.Error(), "replaced after the floor was planned") || errors.As(err, &ve) || !errors.As(err, &se) {
		t.Errorf("a replaced path: %v; want a refusal as a stale plan (run plans again), not a view error", err)
	}
	if err := os.Remove(config); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", config); err != nil {
		t.Fatal(err)
	}
	if err := run(planned()); err == nil || !strings.Contains(err.Error(), "replaced after the floor was planned") || !errors.As(err, &se) {
		t.Errorf("a symlink at the protected name: %v; want a refusal as a stale plan", err)
	}
	// Removed since it was planned: a stale plan too (planned again, it
	// has no bind there).
	if err := os.Remove(config); err != nil {
		t.Fatal(err)
	}
	if err := run(b); err == nil || !errors.As(err, &se) {
		t.Errorf("a protected path removed: %v; want a refusal as a stale plan", err)
	}
}

// TestInitStageRefusesReplacedRule: a Landlock rule whose path names
// another inode than the planned one (replaced after planning) is refused
// as a stale plan, which run answers by planning again, in a session with
// a view and without. The control: the same rule as planned runs the
// agent.
func TestInitStageRefusesReplacedRule(t *testing.T) {
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	writeCanary(t, canary)
	granted := filepath.Join(dir, "granted")
	if err := os.Mkdir(granted, 0o755); err != nil {
		t.Fatal(err)
	}
	null := devNull(t)
	for _, view := range []bool{true, false} {
		run := func(r landlock.Rule) (int, error) {
			t.Helper()
			pl := &landlock.Plan{Handled: readExec, Canary: canary,
				Rules: []landlock.Rule{dirRule(t, "/usr", readExec), dirRule(t, "/etc", readExec), r}}
			s := Session{Plan: pl, Path: "/usr/bin/true", Argv: []string{"true"}, Stdin: null, Stdout: null, Stderr: null, Cwd: "/"}
			if view {
				s.View = &landlock.View{}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return Run(ctx, s)
		}
		r := dirRule(t, granted, readExec)
		if code, err := run(r); err != nil || code != 0 {
			t.Fatalf("view %v, control: the rule as planned: exit %d, %v; want 0", view, code, err)
		}
		r.Ino++
		_, err := run(r)
		var se *StaleError
		if err == nil || !strings.Contains(err.Error(), "changed since planning") || !errors.As(err, &se) {
			t.Errorf("view %v, a rule for another inode: %v; want a stale plan", view, err)
		}
		r.Ino--
		// The directory replaced by a file, then by a symlink to a
		// directory: the rule's open (O_DIRECTORY|O_NOFOLLOW) fails with
		// ENOTDIR, which is a stale plan too.
		moved := granted + ".moved"
		if err := os.Rename(granted, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(granted, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := run(r); !errors.As(err, &se) {
			t.Errorf("view %v, the rule's directory replaced by a file: %v; want a stale plan", view, err)
		}
		if err := os.Remove(granted); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(moved, granted); err != nil {
			t.Fatal(err)
		}
		if _, err := run(r); !errors.As(err, &se) {
			t.Errorf("view %v, the rule's directory replaced by a symlink to it: %v; want a stale plan", view, err)
		}
		if err := os.Remove(granted); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(moved, granted); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInitStageViewArgMatchesConfig: the init stage started for a session
// with a private view (ViewArg: as PID 1 of its own namespaces) refuses a
// configuration without one, and started without refuses one with a
// view: either would run the agent in a session other than the one the
// supervisor planned. Started with ViewArg but not as PID 1 of a PID
// namespace of its own, or with a malformed signal mask, it refuses
// before it reads anything; an argument it does not know is refused too.
// Controls: each start with its own kind gets ready.
func TestInitStageViewArgMatchesConfig(t *testing.T) {
	pl := &landlock.Plan{Handled: landlock.ReadFile, Canary: "/etc/passwd"} // a floor that holds: ready
	plain := newConfig(pl, "/bin/true", []string{"true"}, nil)
	withView := newConfig(pl, "/bin/true", []string{"true"}, nil)
	withView.View = &landlock.View{}
	for _, c := range []struct {
		name string
		args []string // nil: spawnView's (ViewArg and the mask)
		cfg  initConfig
		want string // "" for ready
	}{
		{"a view, started for one", nil, withView, ""},
		{"no view, started for none", []string{}, plain, ""},
		{"no view, started for one", nil, plain, "started for a session with a private view, configured for one without"},
		{"a view, started for none", []string{}, withView, "configured for a session with a private view, started for one without"},
		{"a view, not PID 1", []string{ViewArg, "0"}, withView, "not as PID 1"},
		{"a view, a malformed mask", []string{ViewArg, "-1"}, withView, "malformed signal mask"},
		{"a view, no mask", []string{ViewArg}, withView, "unexpected arguments"},
		{"an unknown argument", []string{"views"}, withView, "unexpected arguments"},
		{"one argument too many", []string{ViewArg, "0", ViewArg}, withView, "unexpected arguments"},
	} {
		stderr := tempFile(t)
		var conn *os.File
		var p *initProc
		if c.args == nil {
			conn, p = startInitStage(t, stderr, true)
		} else {
			var child *os.File
			var err error
			conn, child, err = syncPair()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/proc/self/exe", append([]string{InitArg}, c.args...)...)
			cmd.ExtraFiles = []*os.File{child}
			cmd.Env = []string{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			child.Close()
			p = &initProc{cmd: cmd, pid: cmd.Process.Pid, pidfd: -1}
			conn.SetDeadline(time.Now().Add(10 * time.Second))
		}
		// Refused before the configuration is read: the write may find
		// the socket closed already.
		writeRawFrame(conn, c.cfg.encode())
		var rep report
		err := readFrame(conn, &rep)
		switch {
		case c.want == "" && (err != nil || rep.Type != msgReady):
			t.Errorf("%s: %+v, %v; want ready (stderr %q)", c.name, rep, err, contents(stderr))
		case c.want != "" && (err != nil || rep.Type != msgError || !strings.Contains(rep.Msg, c.want)):
			t.Errorf("%s: %+v, %v; want an error saying %q (stderr %q)", c.name, rep, err, c.want, contents(stderr))
		}
		conn.Close() // no "go": nothing runs
		p.Wait()
		if code := p.ExitCode(); code != 125 {
			t.Errorf("%s: exit %d, want 125", c.name, code)
		}
	}
}

// TestInitStageDiesWithItsThread: the session's PID 1 does not outlive
// the supervisor's thread that started it (its parent-death signal, set
// before its execve): the thread exits, still locked, and PID 1 is
// killed. Control: while the thread lives, PID 1 gets ready and stays.
func TestInitStageDiesWithItsThread(t *testing.T) {
	pl := &landlock.Plan{Handled: landlock.ReadFile, Canary: "/etc/passwd"} // a floor that holds: ready, then it waits for "go"
	cfg := newConfig(pl, "/bin/true", []string{"true"}, nil)
	cfg.View = &landlock.View{}
	conn, child, err := syncPair()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stderr := tempFile(t)
	type started struct {
		pid, pidfd int
		err        error
	}
	start, end := make(chan started, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits when this returns
		pid, pidfd, err := spawnView(nil, [4]int{0, 1, int(stderr.Fd()), int(child.Fd())}, -1)
		start <- started{pid, pidfd, err}
		<-end
	}()
	r := <-start
	child.Close()
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer unix.Close(r.pidfd)
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := writeRawFrame(conn, cfg.encode()); err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := readFrame(conn, &rep); err != nil || rep.Type != msgReady {
		t.Fatalf("control: %+v, %v (stderr %q)", rep, err, contents(stderr))
	}
	var ws unix.WaitStatus
	if pid, err := unix.Wait4(r.pid, &ws, unix.WNOHANG, nil); pid != 0 || err != nil {
		t.Fatalf("control: PID 1 (%d) ended while its thread lived: %d, %v, %v", r.pid, pid, err, ws)
	}
	close(end)
	deadline := time.Now().Add(5 * time.Second)
	for {
		pid, err := unix.Wait4(r.pid, &ws, unix.WNOHANG, nil)
		if pid == r.pid {
			if !ws.Signaled() || ws.Signal() != unix.SIGKILL {
				t.Errorf("PID 1 ended with %v; want killed by SIGKILL, its parent-death signal", ws)
			}
			return
		}
		if err != nil || time.Now().After(deadline) {
			unix.PidfdSendSignal(r.pidfd, unix.SIGKILL, nil, 0)
			unix.Wait4(r.pid, &ws, 0, nil)
			t.Fatalf("PID 1 (%d) outlived the thread that started it (%v)", r.pid, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readExec is the access of a rule that lets the agent read and run.
const readExec = landlock.ReadFile | landlock.ReadDir | landlock.Execute

// dirRule is a rule granting access beneath the directory p, with the
// device and inode the planner would have recorded.
func dirRule(t *testing.T, p string, access landlock.Access) landlock.Rule {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		t.Fatalf("%s: %v, mode %o; want a directory", p, err, st.Mode)
	}
	return landlock.Rule{Path: p, Dir: true, Access: access, Dev: st.Dev, Ino: st.Ino}
}

// writeCanary makes the file a test plan names as its canary.
func writeCanary(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sharedDir makes the directory p writable by every user (umask aside),
// for an agent whose uid may not be the test's.
func sharedDir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o777)
}

// devNull opens /dev/null for a session's stdio, closed when the test ends.
func devNull(t *testing.T) *os.File {
	t.Helper()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close() })
	return null
}

func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func contents(f *os.File) string {
	b, _ := os.ReadFile(f.Name())
	return string(b)
}

// TestInitStageGoIsStrict: after "ready", only the exact "go" frame the
// supervisor writes starts the agent; a frame with a byte more, another
// type, a message or a number set, or an empty one, ends the init stage
// (125) without running it. The control: the exact frame runs the agent
// (sh -c "exit 7", confined to reading /usr and /etc), whose status passes.
func TestInitStageGoIsStrict(t *testing.T) {
	canary := filepath.Join(t.TempDir(), "canary")
	writeCanary(t, canary)
	pl := &landlock.Plan{Handled: landlock.ReadFile | landlock.ReadDir | landlock.Execute, Canary: canary,
		Rules: []landlock.Rule{dirRule(t, "/usr", readExec), dirRule(t, "/etc", readExec)}}
	cfg := newConfig(pl, "/usr/bin/sh", []string{"sh", "-c", "exit 7"}, nil)
	goFrame := report{Type: msgGo}.encode()
	cases := map[string][]byte{
		"a byte more":       append(slices.Clone(goFrame), 0),
		"another type":      report{Type: msgReady}.encode(),
		"a longer type":     report{Type: "gox"}.encode(),
		"a message":         report{Type: msgGo, Msg: "x"}.encode(),
		"a number":          report{Type: msgGo, Pid: 1}.encode(),
		"the view flag":     report{Type: msgGo, View: true}.encode(),
		"an errno":          report{Type: msgGo, Errno: 1}.encode(),
		"a rule count":      report{Type: msgGo, Rules: 1}.encode(),
		"a NUL in the type": report{Type: "go\x00"}.encode(),
		"a length overlong": append([]byte{0x82, 0x00}, goFrame[1:]...),
		"an empty frame":    {},
		"a frame cut short": goFrame[:len(goFrame)-1],
	}
	start := func() (*os.File, *initProc, *os.File) {
		stderr := tempFile(t)
		conn, cmd := startInitStage(t, stderr, false)
		if err := writeRawFrame(conn, cfg.encode()); err != nil {
			t.Fatal(err)
		}
		var rep report
		if err := readFrame(conn, &rep); err != nil || rep.Type != msgReady {
			t.Fatalf("%+v, %v; want ready (stderr %q)", rep, err, contents(stderr))
		}
		return conn, cmd, stderr
	}
	conn, cmd, stderr := start()
	if err := writeRawFrame(conn, goFrame); err != nil {
		t.Fatal(err)
	}
	if cmd.Wait(); cmd.ExitCode() != 7 {
		t.Fatalf("control, the exact go: exit %d, want the agent's 7 (stderr %q)", cmd.ExitCode(), contents(stderr))
	}
	for name, payload := range cases {
		conn, cmd, stderr := start()
		if err := writeRawFrame(conn, payload); err != nil {
			t.Fatal(err)
		}
		if cmd.Wait(); cmd.ExitCode() != 125 {
			t.Errorf("%s: exit %d, want 125 and the agent not run (stderr %q)", name, cmd.ExitCode(), contents(stderr))
		}
	}
}

// unprivilegedSelf returns this test binary, a uid and the credential to
// run it with as an unprivileged user: itself, as is, when the test runs
// as one; else a copy that uid 4242 may execute, and that uid.
func unprivilegedSelf(t *testing.T) (bin string, uid int, cred *syscall.Credential) {
	t.Helper()
	bin, uid = "/proc/self/exe", os.Geteuid()
	if uid != 0 {
		return bin, uid, nil
	}
	uid = 4242
	cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	return testbin.CopySelf(t, t.TempDir(), "launch.test"), uid, cred
}

// TestInitStageUndumpable: PID 1, which holds every capability in the
// session's user namespace, is undumpable, so its /proc files are root's
// and the agent cannot read its memory, environment or file descriptors
// (an unconfined process of the operator's on the host, which owns the
// session's user namespace, still may: docs/design-amendments.md, the
// eleventh pass); the agent, which execs after it, is
// dumpable again and its files are the operator's (the control). The
// stage runs as an unprivileged user, where the difference shows: started
// by this test binary run again as uid 4242 when the test runs as root (a
// copy of it that user may execute), which spawns it (spawnView), prints
// its pid and waits for it.
func TestInitStageUndumpable(t *testing.T) {
	if os.Getenv("AL_TEST_SPAWN_VIEW") == "1" {
		runtime.LockOSThread()
		pid, _, err := spawnView(nil, [4]int{0, 2, 2, 3}, -1) // fd 1 is this process's answer
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(pid)
		code, _ := reap(pid)
		os.Exit(code)
	}
	bin, uid, cred := unprivilegedSelf(t)
	canary := filepath.Join(t.TempDir(), "canary") // outside /usr and /etc: Landlock denies it
	writeCanary(t, canary)
	if err := os.Chmod(filepath.Dir(canary), 0o755); err != nil {
		t.Fatal(err)
	}
	pl := &landlock.Plan{Handled: landlock.ReadFile | landlock.ReadDir | landlock.Execute, Canary: canary,
		Rules: []landlock.Rule{dirRule(t, "/usr", readExec), dirRule(t, "/etc", readExec)}}
	cfg := newConfig(pl, "/usr/bin/sleep", []string{"sleep", "20"}, nil)
	cfg.View = &landlock.View{}

	conn, child, err := syncPair()
	if err != nil {
		t.Fatal(err)
	}
	stderr := tempFile(t)
	cmd := exec.Command(bin, "-test.run=^TestInitStageUndumpable$")
	cmd.ExtraFiles = []*os.File{child}
	cmd.Env = []string{"AL_TEST_SPAWN_VIEW=1"}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	t.Cleanup(func() { conn.Close(); cmd.Process.Kill(); cmd.Wait() })
	var pid1 int
	if _, err := fmt.Fscan(out, &pid1); err != nil {
		t.Fatalf("PID 1's pid: %v (stderr %q)", err, contents(stderr))
	}
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := writeRawFrame(conn, cfg.encode()); err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := readFrame(conn, &rep); err != nil || rep.Type != msgReady {
		t.Fatalf("%+v, %v; want ready (stderr %q)", rep, err, contents(stderr))
	}
	if err := writeFrame(conn, report{Type: msgGo}); err != nil {
		t.Fatal(err)
	}
	childOf := func(pid int) int {
		t.Helper()
		for range 500 {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
			if f := strings.Fields(string(b)); len(f) == 1 {
				return mustAtoi(t, f[0])
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("process %d: no single child", pid)
		return 0
	}
	agent := childOf(pid1)
	for range 500 { // until the agent's execve
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", agent)); strings.TrimSpace(string(b)) == "sleep" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	owner := func(pid int) (files, real int) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%d/environ", pid), &st); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
				return int(st.Uid), mustAtoi(t, f[1])
			}
		}
		t.Fatalf("process %d: no Uid line", pid)
		return 0, 0
	}
	if files, real := owner(agent); files != uid || real != uid {
		t.Errorf("control: the agent (%d), uid %d: its /proc files are uid %d's, want %d's", agent, real, files, uid)
	}
	if files, real := owner(pid1); files != 0 || real != uid {
		t.Errorf("PID 1 (%d), uid %d: its /proc files are uid %d's, want root's (undumpable)", pid1, real, files)
	}
}

// TestIgnoredAtStartMatchesForwarded: initstage.c records, before the Go
// runtime starts, exactly the signals Forwarded lists (its own list is a
// second copy): this test binary, started again with every signal in
// Forwarded ignored and two others besides, must report Forwarded, no
// more; started with nothing ignored (the control), nothing.
func TestIgnoredAtStartMatchesForwarded(t *testing.T) {
	if os.Getenv("AL_TEST_PRINT_IGNORED") == "1" {
		for _, s := range ignoredAtStart() {
			fmt.Println(int(s.(syscall.Signal)))
		}
		os.Exit(0)
	}
	start := func() []string {
		t.Helper()
		cmd := exec.Command("/proc/self/exe", "-test.run=^TestIgnoredAtStartMatchesForwarded$")
		cmd.Env = append(os.Environ(), "AL_TEST_PRINT_IGNORED=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return strings.Fields(string(out))
	}
	// The control: nothing ignored, whatever the shell that started the
	// suite ignored (a handler here is a default after exec).
	signal.Notify(make(chan os.Signal, 1), Forwarded...)
	got := start()
	signal.Reset(Forwarded...)
	if len(got) != 0 {
		t.Fatalf("control: nothing ignored, yet it reports %q", got)
	}
	others := []os.Signal{syscall.SIGPIPE, syscall.SIGALRM}
	signal.Ignore(append(slices.Clone(Forwarded), others...)...)
	got = start()
	signal.Reset(append(slices.Clone(Forwarded), others...)...)
	var want []string
	for _, s := range Forwarded {
		want = append(want, strconv.Itoa(int(s.(syscall.Signal))))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("with Forwarded and %v ignored at start, the constructor recorded %q; want Forwarded, %q", others, got, want)
	}
}

// reap waits for the child pid to exit and reaps it: its exit status for
// the launcher (exitCode).
func reap(pid int) (int, error) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return exitCode(ws), nil
	}
}
