package launch

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

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

// InitMain runs the init stage (steps 2-7 of the sync protocol) and returns
// its exit status; on success it does not return: the process becomes the
// agent. It must be called only in a process the supervisor started with
// the socket at fd 3.
func InitMain() int {
	runtime.LockOSThread() // never unlocked: Landlock and no_new_privs are per thread
	sock := fdStream(syncFD)
	var st unix.Stat_t
	if err := unix.Fstat(syncFD, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		fmt.Fprintln(os.Stderr, "agent-launcher: "+InitArg+" is the launcher's internal init stage; use `agent-launcher run`")
		return 125
	}
	fail := func(format string, args ...any) int {
		_ = writeFrame(sock, report{Type: msgError, Msg: fmt.Sprintf(format, args...)})
		return 125
	}
	var cfg initConfig
	if err := readFrame(sock, &cfg); err != nil {
		return fail("init stage: reading the configuration: %v", err)
	}
	if cfg.Type != msgConfig {
		return fail("init stage: expected %q, got %q", msgConfig, cfg.Type)
	}
	// Stray fds: everything beyond stdio closes at execve, including the
	// socket and whatever the supervisor inherited and passed on.
	if err := cloexecFrom(syncFD); err != nil {
		return fail("init stage: %v", err)
	}
	rules := 0
	if cfg.Confined {
		pl := cfg.plan()
		if err := landlock.Apply(pl); err != nil {
			return fail("%v", err)
		}
		if err := canary(pl.Canary); err != nil {
			return fail("%v", err)
		}
		rules = len(pl.Rules)
	} else if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	if err := writeFrame(sock, report{Type: msgReady, Rules: rules}); err != nil {
		return 125
	}
	var goMsg report
	if err := readFrame(sock, &goMsg); err != nil || goMsg.Type != msgGo {
		return 125 // the supervisor gave up; it reports why
	}
	err := unix.Exec(string(cfg.Path), toStrings(cfg.Argv), toStrings(cfg.Env))
	var errno unix.Errno
	errors.As(err, &errno)
	_ = writeFrame(sock, report{Type: msgExecError, Errno: int(errno), Msg: err.Error()})
	if errors.Is(err, unix.ENOENT) {
		return 127
	}
	return 126
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
