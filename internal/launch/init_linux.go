package launch

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// syncFD is the init stage's end of the socketpair.
const syncFD = 3

// fdStream reads and writes a raw fd with blocking syscalls, so that the
// init stage needs no poller and no os.File finalizer.
type fdStream int

func (f fdStream) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return 0, errEOF
		}
		return n, nil
	}
}

func (f fdStream) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Write(int(f), p[done:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return done, err
		}
		done += n
	}
	return done, nil
}

// The init stage's main goroutine runs on the main thread, the one outside
// processes name by the process id: with a private view, the agent is
// forked from another thread (initPID1), and the main thread must stay
// out of the agent's Landlock domain. Only a lock taken during package
// initialization pins the main goroutine to the main thread.
func init() {
	if len(os.Args) > 1 && os.Args[1] == InitArg {
		runtime.LockOSThread()
	}
}

// fail reports a failure before the agent started ("error"; view: the
// private view caused it) and returns the init stage's exit status.
func (f fdStream) fail(view bool, format string, args ...any) int {
	_ = writeFrame(f, report{Type: msgError, Msg: fmt.Sprintf(format, args...), View: view})
	return 125
}

// InitMain runs the init stage (steps 2-7 of the sync protocol) and returns
// its exit status; on success it does not return: the process becomes the
// agent. It must be called only in a process the supervisor started with
// the socket at fd 3.
func InitMain() int {
	runtime.LockOSThread() // never unlocked: Landlock and no_new_privs are per thread
	StartTrace()
	Trace("init stage: running")
	sock := fdStream(syncFD)
	var st unix.Stat_t
	if err := unix.Fstat(syncFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		fmt.Fprintln(os.Stderr, "agent-launcher: "+InitArg+" is the launcher's internal init stage; use `agent-launcher run`")
		return 125
	}
	fail := func(format string, args ...any) int { return sock.fail(false, format, args...) }
	payload, err := readRawFrame(sock)
	if err != nil {
		return fail("init stage: reading the configuration: %v", err)
	}
	cfg, err := decodeConfig(payload)
	if err != nil {
		return fail("init stage: reading the configuration: %v", err)
	}
	// Stray fds: everything beyond stdio closes at execve, including the
	// socket and whatever the supervisor inherited and passed on.
	if err := cloexecFrom(syncFD); err != nil {
		return fail("init stage: %v", err)
	}
	if cfg.View != nil {
		return initPID1(sock, cfg)
	}
	if code := confineThread(sock, cfg, nil, false); code != 0 {
		return code
	}
	return execFailed(sock, unix.Exec(cfg.Path, cfg.Argv, cfg.Env))
}

// confineThread runs steps 4-7 of the sync protocol on the calling
// thread: Landlock (the view's devices for its rules), no_new_privs, and,
// with a view, no capability left; the assertions and the canary; then
// "ready", and the supervisor's "go". It returns 0 when the agent may
// start, else the init stage's exit status (the failure reported).
func confineThread(sock fdStream, cfg *initConfig, devs []uint64, dropCaps bool) int {
	fail := func(format string, args ...any) int { return sock.fail(false, format, args...) }
	rules := 0
	if cfg.Confined {
		pl := cfg.plan()
		if err := landlock.Apply(pl, devs...); err != nil {
			return fail("%v", err)
		}
		rules = len(pl.Rules)
	} else if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	if dropCaps {
		// Capabilities in the session's user namespace built the view;
		// the agent gets none.
		if err := dropPrivileges(); err != nil {
			return fail("init stage: %v", err)
		}
		if err := checkPrivileges(); err != nil {
			return fail("init stage: %v", err)
		}
	}
	Trace("init stage: Landlock in force")
	if cfg.Confined {
		if err := canary(cfg.Canary); err != nil {
			return fail("%v", err)
		}
	}
	if err := writeFrame(sock, report{Type: msgReady, Rules: rules}); err != nil {
		return 125
	}
	var goMsg report
	if err := readFrame(sock, &goMsg); err != nil || goMsg.Type != msgGo {
		return 125 // the supervisor gave up; it reports why
	}
	return 0
}

// execFailed reports a failed execve (or fork and exec) of the agent and
// returns the init stage's exit status: 127 when the program does not
// exist, else 126.
func execFailed(sock fdStream, err error) int {
	var errno unix.Errno
	errors.As(err, &errno)
	_ = writeFrame(sock, report{Type: msgExecError, Errno: int(errno), Msg: err.Error()})
	if errors.Is(err, unix.ENOENT) {
		return 127
	}
	return 126
}

// initPID1 is the init stage with a private view (steps 3-7 of the sync
// protocol): it builds the view, then confines one dedicated thread
// (Landlock, no capabilities) and forks the agent from it, so that the
// agent inherits exactly that thread's credentials. The main thread, the
// one outside processes name as PID 1, stays outside the agent's Landlock
// domain: the scopes and the ptrace rules then keep the agent from
// signalling, tracing or reading PID 1 (and the process is undumpable
// besides). PID 1 reaps, passes signals on and exits with the agent's
// status, which ends every process of the session.
func initPID1(sock fdStream, cfg *initConfig) int {
	fail := sock.fail
	// PID 1 never execs: what it holds beyond stdio and the socket it
	// closes now, not at an execve.
	if err := unix.CloseRange(syncFD+1, ^uint(0), 0); err != nil {
		return fail(false, "init stage: close_range: %v", err)
	}
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&[]byte("agent-launcher\x00")[0])), 0, 0, 0)
	Trace("init stage: configuration read")
	type started struct {
		pid  int
		code int // the init stage's exit status when pid is 0
	}
	res := make(chan started, 1)
	// The thread that confines itself and forks the agent starts while
	// the view is built (the runtime takes up to a millisecond to give a
	// goroutine a thread of its own here); it shares the process's mount
	// namespace and working directory, so it sees the view once built.
	// Closed: the view failed, and the thread ends unconfined, unused.
	built := make(chan []uint64, 1)
	go func() {
		// A thread of its own, never unlocked: it ends confined.
		runtime.LockOSThread()
		devs, ok := <-built
		if !ok {
			return
		}
		if code := confineThread(sock, cfg, devs, true); code != 0 {
			res <- started{code: code}
			return
		}
		// From this thread, whose credentials the child copies.
		pid, err := syscall.ForkExec(cfg.Path, cfg.Argv, &syscall.ProcAttr{Env: cfg.Env, Files: []uintptr{0, 1, 2}})
		if err != nil {
			res <- started{code: execFailed(sock, err)}
			return
		}
		_ = writeFrame(sock, report{Type: msgStarted, Pid: pid})
		res <- started{pid: pid}
	}()
	devs, err := buildView(cfg.View, cfg.Binds, cfg.Cwd)
	Trace("init stage: private view built")
	if err != nil {
		close(built)
		var ve *ViewError
		return fail(errors.As(err, &ve), "init stage: private view: %v", err)
	}
	// From here the supervisor's signals are PID 1's to handle.
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, append(slices.Clone(Forwarded), unix.SIGCHLD)...)
	built <- devs
	r := <-res
	unix.Close(syncFD)
	if r.pid == 0 {
		return r.code
	}
	return reapUntil(r.pid, sigs)
}

// reapUntil is PID 1's loop: it reaps every process that ends in the
// namespace, passes TERM, USR1 and USR2 on to the agent (the supervisor
// sends the terminal's signals to the whole process group, which reaches
// the agent directly), and returns the agent's status, 128+N when signal
// N killed it.
func reapUntil(pid int, sigs chan os.Signal) int {
	for sig := range sigs {
		switch sig {
		case unix.SIGCHLD:
			for {
				var ws unix.WaitStatus
				p, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
				if p <= 0 || err != nil {
					break
				}
				if p != pid {
					continue // an orphan the namespace gave to PID 1
				}
				if ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ws.ExitStatus()
			}
		case unix.SIGTERM, unix.SIGUSR1, unix.SIGUSR2:
			unix.Kill(pid, sig.(unix.Signal))
		}
	}
	return 125
}

// canary checks that the floor is in force: opening a path the policy
// denies and no rule reaches must fail with EACCES.
func canary(path string) error {
	if path == "" {
		return errors.New("the plan names no canary; refusing to run without checking the floor")
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err == nil {
		unix.Close(fd)
		return fmt.Errorf("the Landlock floor is not in force: the canary %s, which the policy denies, opened after restriction; refusing to run", path)
	}
	if !errors.Is(err, unix.EACCES) {
		return fmt.Errorf("the canary %s could not be checked (%v, not EACCES); refusing to run", path, err)
	}
	return nil
}

// cloexecFrom marks every fd from min on close-on-exec:
// close_range(CLOSE_RANGE_CLOEXEC) where the kernel has it (5.11), else
// each fd listed in /proc/self/fd (Linux 5.10 answers EINVAL; found by the
// VM matrix).
func cloexecFrom(min int) error {
	err := unix.CloseRange(uint(min), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("close_range(CLOEXEC): %w", err)
	}
	return cloexecByList(min)
}

// cloexecByList marks the fds from min on that /proc/self/fd lists.
func cloexecByList(min int) error {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing the open fds: %w", err)
	}
	names, err := dir.Readdirnames(-1)
	dirFD := int(dir.Fd())
	if err != nil {
		dir.Close()
		return fmt.Errorf("listing the open fds: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < min || fd == dirFD {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			continue // closed since the listing
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
			dir.Close()
			return fmt.Errorf("fcntl(%d, F_SETFD, FD_CLOEXEC): %w", fd, err)
		}
	}
	return dir.Close() // opened close-on-exec by Go anyway
}
