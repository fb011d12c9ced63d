package launch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// Session is one agent to run.
type Session struct {
	// Plan is the Landlock floor; nil runs the agent unconfined (only for
	// --allow-unconfined on a kernel without Landlock).
	Plan *landlock.Plan
	// Path is the program to execute, already resolved; Argv its argument
	// vector (Argv[0] the name it sees) and Env its environment.
	Path string
	Argv []string
	Env  []string
	// Stdin, Stdout and Stderr are passed to the agent as fds 0-2.
	Stdin, Stdout, Stderr *os.File
	// Notice receives one-line messages for the operator while the agent
	// runs (an entry of a carved directory replaced from outside).
	Notice func(string)
	// View is the private view the plan was made for; nil: none. With a
	// view the init stage starts in new user, mount, PID and IPC namespaces
	// and stays the session's PID 1. Cwd is the agent's working
	// directory, entered again inside the view.
	View *landlock.View
	Cwd  string
	// BeforeStart, if set, is called once the init stage has its
	// configuration, and the agent waits until it returns (run: the check
	// that a kept plan still holds, the session review's first snapshot).
	// An error ends the init stage without starting the agent, and Run
	// returns it.
	BeforeStart func() error
	// Ready, if set, is called after BeforeStart, just before the agent
	// may start (the start-up line), with how the session's processes
	// will end (the zero Ending with a view). The init stage may still
	// fail to apply the floor then, and no agent starts: "go" is sent
	// without waiting for "ready", which the init stage sends once the
	// floor is in force.
	Ready func(Ending)
	// KeepCatching: the caller ends the process soon after Run returns
	// (run, after its session-end review). Once the agent has started,
	// the signals Run forwards stay caught, and go nowhere, after it
	// returns: an interrupt after the agent's end does not cut the review
	// short or leave the terminal raw, and nothing is spent undoing them.
	KeepCatching bool
}

// SetupError is a failure before the agent ran: the launcher exits 125.
// Started: the init stage had been told to start the agent when it
// failed to report, and was killed with whatever it had started.
type SetupError struct {
	Msg     string
	Started bool
}

func (e *SetupError) Error() string { return e.Msg }

// ExecError is a failure of execve(2) of the agent itself: exit 126, or 127
// when the program does not exist.
type ExecError struct {
	Path string
	Err  error
}

func (e *ExecError) Error() string { return fmt.Sprintf("cannot execute %s: %v", e.Path, e.Err) }
func (e *ExecError) Unwrap() error { return e.Err }

// ExitCode returns the launcher's exit status for e.
func (e *ExecError) ExitCode() int {
	if errors.Is(e.Err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// Forwarded lists the signals the supervisor passes to the agent. The ones
// a terminal generates go to the agent's process group, as the terminal
// would send them; the others to the agent process.
var Forwarded = []os.Signal{unix.SIGINT, unix.SIGQUIT, unix.SIGHUP, unix.SIGWINCH, unix.SIGTERM, unix.SIGUSR1, unix.SIGUSR2}

// IgnoreInherited ignores again the forwarded signals this process was
// started with ignored, and returns them; main calls it before anything
// asks to be notified of a signal. The Go runtime handles every signal
// but SIGHUP and SIGINT from its start, so without it a nohup-ed run
// would lose its agent to a hangup: the supervisor would catch SIGHUP and
// forward it, and the agent would get it at its default. So run neither
// catches nor forwards these, and the agent inherits them ignored, as it
// would without the launcher (nohup's SIGHUP, the SIGINT and SIGQUIT a
// shell ignores for a background job).
func IgnoreInherited() []os.Signal {
	ign := ignoredAtStart()
	var set uint64
	for _, s := range ign {
		set |= 1 << (s.(syscall.Signal) - 1)
	}
	inheritedIgnored.Store(set)
	if len(ign) > 0 {
		signal.Ignore(ign...)
	}
	return ign
}

// inheritedIgnored holds the signals IgnoreInherited ignored again, bit
// N-1 for signal N: the ones Run does not catch. Its own record, not
// os/signal's (signal.Ignored), which a later Notify changes and a Reset
// does not.
var inheritedIgnored atomic.Uint64

// ignoredInherited reports whether IgnoreInherited ignored sig again.
func ignoredInherited(sig os.Signal) bool {
	n := sig.(syscall.Signal)
	return n >= 1 && n <= 64 && inheritedIgnored.Load()&(1<<(n-1)) != 0
}

func toGroup(s os.Signal) bool {
	return s == unix.SIGINT || s == unix.SIGQUIT || s == unix.SIGHUP || s == unix.SIGWINCH
}

// Run starts the init stage, which confines itself with s.Plan and execs
// the agent, forwards signals to the agent until it exits, and returns the
// agent's exit status (128+N when a signal N killed it). An error is a
// *SetupError or an *ExecError; the agent did not run.
func Run(ctx context.Context, s Session) (int, error) {
	p, err := Start(s)
	if err != nil {
		return 0, err
	}
	return p.Run(ctx, s)
}

// Pending is an init stage started ahead of its configuration (step 1 of
// the sync protocol), waiting for it: its own start-up (a vfork, an
// execve, its namespaces) runs beside the caller's work. Exactly one of
// Run and Abort ends it.
type Pending struct {
	view   bool
	notice func(string, ...any)
	conn   *os.File
	// pid is the init stage's; pidfd, with a view, a pidfd of it (-1
	// without), through which it is killed.
	pid, pidfd int
	// exited receives the launcher's exit status for the init stage's
	// (exitCode) once it has exited and been reaped.
	exited    <-chan int
	pty       *sessionPTY
	relaying  bool
	cg        *sessionCgroup
	end       Ending
	subreaper bool
	ended     bool
	done      bool
	// starting is closed once the init stage has started, or startErr
	// says why it did not.
	starting chan struct{}
	startErr error
}

// Start runs step 1 of the sync protocol for s: it reads only s's stdio,
// whether s has a view (s.View != nil; the view itself comes with the
// configuration) and s.Notice. The session's Run must have the same.
func Start(s Session) (*Pending, error) {
	if !hasInitStage {
		return nil, &SetupError{Msg: "this build of agent-launcher has no init stage (built with CGO_ENABLED=0); build it with `make build`"}
	}
	p := &Pending{view: s.View != nil, pidfd: -1}
	p.notice = func(format string, args ...any) {
		if s.Notice != nil {
			s.Notice(fmt.Sprintf(format, args...))
		}
	}
	ok := false
	defer func() {
		if !ok {
			p.cleanup()
		}
	}()
	if !p.view {
		// No PID namespace to end the session: the agent's orphans (a
		// double-forked daemon) become the supervisor's, which kills
		// them when the agent exits (killDescendants). That is the
		// second net where the session also gets a cgroup, which
		// cgroup.kill ends at once however fast its processes fork; a
		// process of the agent's uid can leave the cgroup, but not the
		// supervisor's tree (endNoView).
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, &SetupError{Msg: fmt.Sprintf("prctl(PR_SET_CHILD_SUBREAPER): %v", err)}
		}
		p.subreaper = true
		var err error
		if p.cg, err = newSessionCgroup(cgroupPrefix + strconv.Itoa(os.Getpid())); err != nil {
			p.end.NoCgroup = err.Error()
		} else {
			p.end.Cgroup = p.cg.path
		}
	}

	conn, child, err := syncPair()
	if err != nil {
		return nil, &SetupError{Msg: err.Error()}
	}
	p.conn = conn
	if p.pty, err = newSessionPTY(s.Stdin, s.Stdout, s.Stderr); err != nil {
		child.Close()
		return nil, &SetupError{Msg: err.Error()}
	}
	// The fork and execve of the init stage take milliseconds, which the
	// caller spends on its own work (loading the policy, planning) until
	// Run or Abort waits for them.
	p.starting = make(chan struct{})
	if p.view {
		p.startView(s, child)
	} else {
		go func() {
			defer close(p.starting)
			defer child.Close()
			p.startErr = p.start(s, child)
		}()
	}
	ok = true
	return p, nil
}

// start starts the init stage of a session without a view, with child as
// its end of the sync socket: os/exec's vfork and execve, from a locked
// thread (startLocked).
func (p *Pending) start(s Session, child *os.File) error {
	newCmd := func() *exec.Cmd { return initCmd(s, child, p.pty) }
	cmd := newCmd()
	if p.cg != nil {
		// clone3(CLONE_INTO_CGROUP), Linux 5.7: the init stage is in
		// the session's cgroup from its first instruction.
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, p.cg.fd()
	}
	var err error
	p.exited, err = startLocked(cmd)
	if err != nil && p.cg != nil {
		// Fail closed to the subreaper alone, and say so.
		p.notice("the session's cgroup %s: starting in it failed (%v); the supervisor, as subreaper, alone ends the session's processes", p.cg.path, err)
		p.end = Ending{NoCgroup: fmt.Sprintf("starting in %s: %v", p.cg.path, err)}
		if rerr := p.cg.remove(); rerr != nil {
			p.notice("the session's cgroup: %v", rerr)
		}
		p.cg = nil
		cmd = newCmd()
		p.exited, err = startLocked(cmd)
	}
	if p.cg != nil {
		p.cg.close() // the init stage is in it
	}
	if err != nil {
		p.exited = nil
		return &SetupError{Msg: fmt.Sprintf("starting the init stage: %v", err)}
	}
	p.pid = cmd.Process.Pid
	Trace("init stage started")
	return nil
}

// startView starts the init stage of a session with a view as PID 1 of
// its own namespaces, with child as its end of the sync socket, from a
// thread of its own (spawnViewThread), which is PID 1's parent for its
// parent-death signal and waits for it; a goroutine takes the thread's
// reports: it closes p.starting once PID 1 started or failed to, and
// sends PID 1's exit status on p.exited. The caller goes on at once: a
// goroutine that started PID 1 itself ran only once the Go scheduler gave
// it a processor, which it then held through the vfork (up to 1.8 ms of
// run's start-up here; docs/design-amendments.md, the sixteenth pass).
func (p *Pending) startView(s Session, child *os.File) {
	fds, ctty, closeNull, err := p.viewFDs(s, child)
	var t *spawnThread
	if err == nil {
		t, err = spawnViewThread(initEnv(), fds, ctty)
	}
	if err != nil {
		closeNull()
		child.Close()
		p.startErr = err
		close(p.starting)
		return
	}
	go func() {
		pid, pidfd, err := t.started()
		closeNull() // the init stage has its own copies now
		child.Close()
		if err != nil {
			p.startErr = err
			close(p.starting)
			return
		}
		exited := make(chan int, 1)
		p.pid, p.pidfd, p.exited = pid, pidfd, exited
		Trace("init stage started")
		close(p.starting)
		code, err := t.exited()
		if err != nil {
			// No exit status (the spawner's report lost, its waitid
			// refused): not reported as the agent's success.
			p.notice("waiting for the session's PID 1: %v", err)
			code = 125 // the launcher's own failure (SetupError's status)
		}
		exited <- code
	}()
}

// viewFDs gives the init stage s's stdio, or the pty's side of it, and
// child, as fds 0-3, with the fd of its controlling terminal (-1 for
// none); closeNull closes the null device opened for a nil stdio.
func (p *Pending) viewFDs(s Session, child *os.File) (fds [4]int, ctty int, closeNull func(), err error) {
	files := [3]*os.File{s.Stdin, s.Stdout, s.Stderr}
	ctty = -1
	if p.pty != nil {
		files, ctty = p.pty.stdio(s.Stdin, s.Stdout, s.Stderr)
	}
	var null *os.File
	closeNull = func() {
		if null != nil {
			null.Close()
		}
	}
	for i, f := range files {
		if f == nil {
			// As os/exec gives a nil stdio: the null device.
			if null == nil {
				if null, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
					return fds, ctty, closeNull, &SetupError{Msg: fmt.Sprintf("starting the init stage: %v", err)}
				}
			}
			f = null
		}
		fds[i] = int(f.Fd())
	}
	fds[3] = int(child.Fd())
	return fds, ctty, closeNull, nil
}

// wait waits until the init stage has started, or failed to.
func (p *Pending) wait() error {
	<-p.starting
	return p.startErr
}

// kill ends the init stage, if it was started, and reaps it.
func (p *Pending) kill() {
	if p.exited != nil {
		if p.pidfd >= 0 {
			unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0)
		} else {
			unix.Kill(p.pid, unix.SIGKILL)
		}
		<-p.exited
		p.exited = nil
	}
}

// endSession ends what a session without a view left running, once.
func (p *Pending) endSession() {
	if !p.view && !p.ended {
		p.ended = true
		endNoView(p.cg, p.notice)
	}
}

// cleanup releases what Start set up; the init stage must have ended.
func (p *Pending) cleanup() {
	if p.done {
		return
	}
	p.done = true
	p.endSession()
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
	if p.subreaper {
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	}
	if p.conn != nil {
		p.conn.Close()
	}
	if p.pty != nil {
		if p.relaying {
			p.pty.finish()
		} else {
			p.pty.discard()
		}
	}
}

// Abort ends an init stage that is not to run a session (the policy or a
// start-up check refused it). After Run, it does nothing.
func (p *Pending) Abort() {
	if p == nil || p.done {
		return
	}
	p.wait()
	p.kill()
	p.cleanup()
}

// Run runs steps 2-8 of the sync protocol for s, which must match what
// Start was given, as Run (the function) describes.
func (p *Pending) Run(ctx context.Context, s Session) (code int, err error) {
	if p.done {
		return 0, &SetupError{Msg: "init stage: already used"}
	}
	// The carved directories' watch (below) ends after cleanup, which
	// gives the operator's terminal back from the pty relay: the lines of
	// its last look are plain ones, after the agent's last output. It
	// looks once more only if the agent started.
	stopWatch := func(bool) {}
	started := false
	defer func() { stopWatch(started) }()
	defer p.cleanup()
	if err := p.wait(); err != nil {
		return 0, err
	}
	if (s.View != nil) != p.view {
		p.kill()
		return 0, &SetupError{Msg: "init stage: started for another kind of session (with or without a view)"}
	}
	conn, pty, pid := p.conn, p.pty, p.pid
	// Every notice from here on, when the relay may hold the operator's
	// terminal raw, carries its own carriage return.
	s.Notice = pty.rawNotices(s.Stderr, s.Notice)

	cfg := newConfig(s.Plan, s.Path, s.Argv, s.Env)
	if s.View != nil {
		// The init stage builds what it is given; what it is given is
		// checked here.
		if err := s.View.Check(); err != nil {
			p.kill()
			return 0, &SetupError{Msg: err.Error()}
		}
		cfg.View, cfg.Cwd = s.View, s.Cwd
	}
	if err := conn.SetDeadline(time.Now().Add(ReadyTimeout)); err != nil {
		p.kill()
		return 0, &SetupError{Msg: fmt.Sprintf("sync socket: %v", err)}
	}
	if err := writeRawFrame(conn, cfg.encode()); err != nil {
		p.kill()
		return 0, &SetupError{Msg: fmt.Sprintf("sending the plan to the init stage: %v", err)}
	}
	// The signals run forwards are caught from here on, before "go": one
	// that comes from then until the agent starts is the agent's as it
	// starts (the loop below), so a Ctrl-C during set-up stops it; one
	// before ends the launcher, and the init stage with it, before any of
	// the agent runs (cmd/agent-launcher). Not with os/signal, whose
	// signal thread cost start-up more than the rest of the catching
	// (catchSignals).
	sigs := make(chan os.Signal, 16)
	var catch []os.Signal
	for _, sig := range Forwarded {
		// Not what the operator's shell ignored (IgnoreInherited); but
		// a terminal's SIGWINCH still resizes the agent's pty, which
		// forwards nothing (the kernel signals the pty's foreground
		// group, with whatever disposition the agent has).
		if !ignoredInherited(sig) || sig == unix.SIGWINCH && p.pty != nil {
			catch = append(catch, sig)
		}
	}
	stopCatching, err := catchSignals(sigs, catch...)
	if err != nil {
		p.kill()
		return 0, &SetupError{Msg: err.Error()}
	}
	defer func() {
		if started && s.KeepCatching {
			return
		}
		stopCatching()
		if started {
			return
		}
		// A terminating signal caught while no agent started is not
		// dropped with the channel: Run reports it, whatever else ended
		// it, and the caller stops (an attempt with a plan made afresh
		// would start the agent).
		for {
			select {
			case sig := <-sigs:
				if sig := sig.(unix.Signal); sig == unix.SIGINT || sig == unix.SIGTERM || sig == unix.SIGHUP || sig == unix.SIGQUIT {
					p.kill()
					code, err = 0, &InterruptedError{Signal: sig}
					return
				}
			default:
				return
			}
		}
	}()
	// An init stage that failed already (a configuration it refused, a
	// mount of the view) said so: the start without a view, or the error,
	// follows at once, not after BeforeStart.
	var rep report
	answered := false
	if waiting(conn) {
		answered = true
		if err := readFrame(conn, &rep); err != nil || rep.Type != msgReady {
			p.kill()
			return 0, notReady(rep, err, false)
		}
	}
	// "go" follows at once, once what must precede the agent is done and
	// the start-up line is out: the init stage finds it when it is ready,
	// without a round trip through this process (a wake-up of each, 1-2
	// ms here). An init stage that fails never reads it; its "error" is
	// read below even when it had exited before "go" was written.
	if s.BeforeStart != nil {
		if err := s.BeforeStart(); err != nil {
			p.kill()
			return 0, err
		}
	}
	if s.Ready != nil {
		s.Ready(p.end)
	}
	stopWatch = watchCarved(s.Plan, s.Notice)
	// The init stage's own deadline starts now: BeforeStart's time (a
	// review walk of a large tree) is not its.
	if err := conn.SetDeadline(time.Now().Add(ReadyTimeout)); err != nil {
		p.kill()
		return 0, &SetupError{Msg: fmt.Sprintf("sync socket: %v", err)}
	}
	goErr := writeFrame(conn, report{Type: msgGo})
	if !answered {
		if err := readFrame(conn, &rep); err != nil || rep.Type != msgReady {
			p.kill()
			// With "go" in the socket and no "error", the agent may have
			// started: the kill ends it too (the session's processes end
			// with their PID 1; without a view, endSession ends them).
			return 0, notReady(rep, err, goErr == nil && (err != nil || rep.Type != msgError))
		}
	}
	Trace("init stage ready")
	if goErr != nil {
		p.kill()
		return 0, &SetupError{Msg: fmt.Sprintf("starting the agent: %v", goErr)}
	}
	// EOF: execve succeeded and closed the socket (close-on-exec).
	conn.SetDeadline(time.Time{})
	if err := readFrame(conn, &rep); err == nil && rep.Type == msgExecError {
		<-p.exited
		p.exited = nil
		return 0, &ExecError{Path: s.Path, Err: unix.Errno(rep.Errno)}
	}
	Trace("agent started")
	started = true
	if pty != nil {
		if err := pty.start(); err != nil {
			p.kill()
			return 0, &SetupError{Msg: err.Error()}
		}
		p.relaying = true
	}

	for {
		select {
		case sig := <-sigs:
			if pty != nil && sig == unix.SIGWINCH {
				pty.resize() // the kernel signals the pty's foreground group
				continue
			}
			switch {
			case toGroup(sig):
				unix.Kill(-pid, sig.(unix.Signal)) // setsid made the init stage a process group leader
			case p.pidfd >= 0:
				// Through the pidfd: once the init stage has exited and
				// been reaped, its pid may be another process's.
				unix.PidfdSendSignal(p.pidfd, sig.(unix.Signal), nil, 0)
			default:
				unix.Kill(pid, sig.(unix.Signal))
			}
		case code := <-p.exited:
			p.exited = nil
			p.endSession()
			return code, nil
		}
	}
}

// notReady is the error for an init stage that answered rep, or err,
// where "ready" was due; started: "go" had been sent, so the agent may
// have started before the init stage was killed with it.
func notReady(rep report, err error, started bool) error {
	switch {
	case err == nil && rep.Type == msgError && rep.View:
		return &ViewError{rep.Msg}
	case err == nil && rep.Type == msgError && rep.Stale:
		return &StaleError{rep.Msg}
	case err == nil && rep.Type == msgError:
		return &SetupError{Msg: rep.Msg}
	case err == nil:
		return &SetupError{Msg: fmt.Sprintf("init stage: unexpected %q", rep.Type), Started: started}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &SetupError{Msg: fmt.Sprintf("the init stage did not get ready within %s", ReadyTimeout), Started: started}
	}
	return &SetupError{Msg: fmt.Sprintf("the init stage failed before it was ready: %v", err), Started: started}
}

// waiting reports whether the init stage has written to conn already,
// without waiting for it.
func waiting(conn *os.File) bool {
	rc, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, _ = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return true
	})
	return n > 0
}

// syncPair makes the sync socket: the supervisor's end, non-blocking in
// the runtime's poller so that its deadlines hold, and the init stage's
// end, blocking; both close-on-exec (os/exec moves the child's to fd 3).
func syncPair() (conn, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %v", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("sync socket: %v", err)
	}
	return os.NewFile(uintptr(fds[0]), "supervisor-sync"), os.NewFile(uintptr(fds[1]), "init-sync"), nil
}

// initCmd is the command that starts the init stage of s, a session
// without a view, with child, the init stage's end of the sync socket, at
// fd 3, and pty, if not nil, as its stdio and controlling terminal.
func initCmd(s Session, child *os.File, pty *sessionPTY) *exec.Cmd {
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"agent-launcher", InitArg},
		Env:        initEnv(),
		Stdin:      s.Stdin,
		Stdout:     s.Stdout,
		Stderr:     s.Stderr,
		ExtraFiles: []*os.File{child},
		SysProcAttr: &syscall.SysProcAttr{
			// A new session: the operator's terminal is not the agent's
			// controlling terminal, so it cannot inject keystrokes into it
			// (TIOCSTI); where the operator has a terminal, the agent gets
			// a pty of its own as its controlling terminal.
			Setsid:    true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	if pty != nil {
		files, ctty := pty.stdio(s.Stdin, s.Stdout, s.Stderr)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[1], files[2]
		cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, ctty
	}
	return cmd
}

// startLocked starts cmd and waits for it on one locked OS thread:
// Pdeathsig fires when the thread that started the child exits, not the
// process (golang/go#27505). The channel receives cmd's state once it has
// exited and been reaped.
func startLocked(cmd *exec.Cmd) (<-chan int, error) {
	started := make(chan error, 1)
	exited := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the child
		restore, err := childSlack()
		if err != nil {
			started <- err
			return
		}
		err = cmd.Start() // returns once the child has exec'd, its slack set
		restore()
		if err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		exited <- exitCode(unix.WaitStatus(ws))
	}()
	return exited, <-started
}

// endNoView ends what a session without a private view left running once
// the agent has exited: cgroup.kill on the session's cgroup, if it has one,
// then every descendant of the supervisor, the subreaper, which also
// catches a process of the agent's uid that left the cgroup (clone3 with
// CLONE_INTO_CGROUP into the cgroup's parent is checked against the file
// modes alone, which Landlock does not mediate); last, the cgroup is
// removed. notice reports what failed.
func endNoView(cg *sessionCgroup, notice func(string, ...any)) {
	if cg != nil {
		if err := cg.kill(); err != nil {
			notice("the session's cgroup: %v; the supervisor, as subreaper, kills what is left", err)
		}
	}
	killDescendants()
	if cg != nil {
		if err := cg.remove(); err != nil {
			notice("the session's cgroup is left behind: %v", err)
		}
	}
}

// killDescendants kills and reaps every process below the supervisor
// once the agent has exited: without a PID namespace, what the agent left
// running (a double-forked daemon holding its files or the terminal) was
// reparented to the supervisor, a child subreaper. It repeats until none
// is left, so that a process forking while it is killed ends too, and
// gives up after a few seconds.
func killDescendants() {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		pids := descendants(os.Getpid())
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			unix.Kill(p, unix.SIGKILL)
		}
		for {
			p, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
			if p <= 0 || err != nil {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// descendants lists the processes below pid, from /proc/PID/task/*/children
// (Linux 3.5 and later with CONFIG_PROC_CHILDREN, which Debian has).
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	seen := map[int]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, task := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, task.Name()))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				c, err := strconv.Atoi(f)
				if err == nil && !seen[c] {
					seen[c] = true
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

// exitCode maps a wait status to the launcher's exit status: the
// process's, or 128+N when signal N killed it.
func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// InterruptedError is a terminating signal (INT, TERM, HUP, QUIT) that the
// session caught before its agent started, in a Run that then ended
// without starting it: the caller must not start it again.
type InterruptedError struct{ Signal unix.Signal }

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("%s before the agent started", unix.SignalName(e.Signal))
}

// ExitCode is the launcher's exit status: 128+N, as for an agent that
// signal N ended.
func (e *InterruptedError) ExitCode() int { return 128 + int(e.Signal) }
