//go:build linux

// Testagent is the program that kernel integration tests run inside the
// sandbox as the "agent". Each invocation performs exactly one operation, an
// attack or an ordinary file, process or socket operation, and reports what
// the kernel answered. It never interprets or fakes a result: an error line
// always carries the errno of the system call that failed.
//
// Usage:
//
//	testagent OP [ARG...]
//
// # Output contract
//
// Stdout receives exactly one line:
//
//	ok <detail>              exit status 0
//	err <ERRNO> <message>    exit status 1
//
// The detail is omitted, together with the space before it, when it is empty
// (list of an empty directory). ERRNO is the symbolic errno name returned by
// unix.ErrnoName (EACCES, EPERM, EXDEV, ENOENT, ...) of the failing system
// call; it is EOTHER when the failure is not an errno (for example a
// malformed /proc file) or when the errno has no name. The message names the
// step that failed first, then the kernel's text, for example
//
//	err EACCES open /ws/secrets/key: permission denied
//	err EPERM mount: tmpfs on /ws/secrets: operation not permitted
//
// Newlines and carriage returns inside a detail or message are written as \n
// and \r so that the output stays one line.
//
// A usage error (unknown operation, wrong number of arguments, a number that
// does not parse) writes a message to stderr, nothing to stdout, and exits 2.
//
// The exec and memfd-exec operations replace the agent on success, so the
// executed program's own output and exit status are the result; only their
// failure produces an err line.
//
// # Operations
//
// Files (paths are used as given, relative to the working directory):
//
//	read PATH               open O_RDONLY, read up to 64 KiB; detail: the content, Go-quoted (%q)
//	write PATH CONTENT      open O_WRONLY|O_CREAT|O_TRUNC 0644 and write; detail: "wrote N bytes"
//	append PATH CONTENT     open O_WRONLY|O_APPEND (no O_CREAT: the file must exist) and write
//	create PATH             open O_WRONLY|O_CREAT|O_EXCL 0644
//	open-trunc PATH         open O_RDONLY|O_TRUNC; detail: the size after the open
//	truncate PATH SIZE      truncate(2)
//	mkdir PATH              mkdir 0755
//	rmdir PATH, unlink PATH
//	rename SRC DST          rename(2)
//	exchange A B            renameat2(RENAME_EXCHANGE)
//	link SRC DST            link(2) (does not follow a symlink SRC)
//	symlink TARGET LINKPATH
//	mkfifo PATH             mkfifo 0644
//	list PATH               directory entry names without . and ..; detail: sorted, comma separated
//	stat PATH               lstat(2); detail: "type=file size=N mode=0644"
//	                        (type is file, dir, symlink, fifo, socket, char, block)
//	opath-reopen PATH       open O_PATH, then open /proc/self/fd/N O_RDONLY and read
//	opath-openat DIR NAME   open DIR O_PATH|O_DIRECTORY, then openat(dirfd, NAME, O_RDONLY) and read
//	chdir-read DIR NAME     chdir(DIR), then open NAME relative to it and read
//
// Programs:
//
//	exec PATH [ARG...]        execve(PATH, [PATH ARG...], environ)
//	memfd-exec SRC [ARG...]   copy SRC into a memfd_create(2) file (no MFD_CLOEXEC, so
//	                          scripts work too) and execveat(fd, "", [SRC ARG...], environ, AT_EMPTY_PATH)
//
// Other processes:
//
//	ptrace PID              PTRACE_ATTACH; if that works, wait for the stop and PTRACE_DETACH
//	vm-read PID             process_vm_readv of 16 bytes at the start of the first readable
//	                        mapping in /proc/PID/maps (an error reading maps is reported as is)
//	proc-mem PID            open /proc/PID/mem O_RDONLY
//	pidfd-getfd PID FD      pidfd_open(PID) and pidfd_getfd(FD); detail: "fd=N target=T"
//	kill PID SIG            kill(2); SIG is a number or a name (STOP, SIGSTOP, KILL, TERM, 0)
//
// Sockets and terminals:
//
//	connect-abstract NAME   AF_UNIX SOCK_STREAM connect to the abstract address "\0NAME"
//	connect-unix PATH       AF_UNIX SOCK_STREAM connect to a pathname socket (PATH must not
//	                        begin with @, which golang.org/x/sys/unix reads as abstract)
//	tiocsti FD TEXT         ioctl(FD, TIOCSTI) once per byte of TEXT
//	write-ctty TEXT         open /dev/tty and write TEXT
//
// Namespaces (run in a forked child, see nsProbe in ops.go; the namespaces
// die with it and the caller's mounts never change):
//
//	unshare-ns              unshare(CLONE_NEWUSER|CLONE_NEWNS)
//	mount-tmpfs PATH        unshare(CLONE_NEWUSER|CLONE_NEWNS), write "deny" to
//	                        /proc/self/setgroups, map the caller's gid and uid 1:1,
//	                        then mount tmpfs on PATH; the message names the first
//	                        failing step: unshare, setgroups, gid_map, uid_map or mount
//
// Process state and helpers:
//
//	pid                     detail: "pid=N ppid=N sid=N pgid=N"
//	status                  detail: the NoNewPrivs, Seccomp and CapEff lines of
//	                        /proc/self/status as "NoNewPrivs:1;Seccomp:2;CapEff:0000000000000000"
//	sleep MS                detail: "slept MSms"
//	timerslack              the calling thread's timer slack (PR_GET_TIMERSLACK), then
//	                        reset with PR_SET_TIMERSLACK 0 to its default and read again;
//	                        detail: "current=N default=N" (nanoseconds)
//	wait-file PATH TIMEOUT_MS
//	                        poll every 10 ms until PATH exists and is not empty; detail:
//	                        its content (up to 64 KiB), Go-quoted, including any trailing
//	                        newline; ETIMEDOUT after TIMEOUT_MS
//	daemon OUTFILE OP [ARG...]
//	                        start OP as a daemon; detail: "started". See below.
//	cgroup-spawn DIR OUTFILE OP [ARG...]
//	                        open the cgroup v2 directory DIR O_PATH|O_DIRECTORY and start
//	                        daemon's grandchild stage (OUTFILE OP ARG...) directly in it,
//	                        with clone3(CLONE_INTO_CGROUP), as a child that is not waited
//	                        for; detail: "pid=N"
//
// # daemon
//
// A process cannot fork safely in Go, so daemon re-executes /proc/self/exe
// twice to get the shape of a classic double fork:
//
//	stage       started by  setsid  does
//	top         the test    -       starts middle, waits for it (10 s limit), prints "ok started"
//	middle      top         yes     starts the grandchild and exits at once without waiting
//	grandchild  middle      no      sleeps 300 ms (its parent is long gone by then), runs
//	                                OP ARG... exactly as a top-level invocation would, and
//	                                writes the one result line to OUTFILE (create/truncate)
//
// If the middle stage cannot start the grandchild, daemon reports that
// failure's errno in its own err line.
//
// The top stage returns without waiting for the grandchild. The grandchild
// inherits stdin and every descriptor without close-on-exec, but its stdout
// and stderr are /dev/null until it writes OUTFILE, so a test reading the
// agent's output through a pipe never waits for it. For exec and memfd-exec,
// OUTFILE becomes the executed program's stdout. If OUTFILE cannot be
// written the grandchild exits with status 3; a usage error in OP (checked
// only for the operation name and argument count before the daemon starts)
// makes it exit 2 without writing OUTFILE. Tests collect the result with
// wait-file.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Exit statuses of the agent.
const (
	exitOK        = 0
	exitErr       = 1
	exitUsage     = 2
	exitNoOutfile = 3 // the daemon grandchild could not write OUTFILE
)

// Hidden operations: the later stages of daemon.
const (
	stageMiddle     = "__daemon-middle"
	stageGrandchild = "__daemon-grandchild"
)

const (
	// daemonDelay is how long the daemon grandchild sleeps before running
	// its operation.
	daemonDelay = 300 * time.Millisecond
	// middleTimeout bounds the top stage's wait for the middle stage.
	middleTimeout = 10 * time.Second
)

// variadic as op.maxArgs means no upper limit.
const variadic = -1

// An op is one operation of the agent.
type op struct {
	args    string // argument synopsis for usage messages
	minArgs int
	maxArgs int // variadic for no limit
	run     func(e *env, args []string) (detail string, err error)
}

// An env is what an operation may need from the stage that runs it.
type env struct {
	// beforeExec, if not nil, is called by exec and memfd-exec just before
	// the execve; the daemon grandchild uses it to point stdout at OUTFILE.
	beforeExec func() error
}

// A usageError is a mistake in the invocation rather than an outcome of the
// operation; it is reported on stderr with exit status 2.
type usageError struct {
	msg     string
	listOps bool // the operation itself is missing or unknown
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// A relayedError is an err line produced by another stage of the agent and
// passed on unchanged.
type relayedError struct{ name, msg string }

func (e *relayedError) Error() string { return e.msg }

// commands returns the operation table. It is a function rather than a
// package variable because daemon consults the table it belongs to.
func commands() map[string]op {
	return map[string]op{
		"read":             {"PATH", 1, 1, opRead},
		"write":            {"PATH CONTENT", 2, 2, opWrite},
		"append":           {"PATH CONTENT", 2, 2, opAppend},
		"create":           {"PATH", 1, 1, opCreate},
		"open-trunc":       {"PATH", 1, 1, opOpenTrunc},
		"truncate":         {"PATH SIZE", 2, 2, opTruncate},
		"mkdir":            {"PATH", 1, 1, opMkdir},
		"rmdir":            {"PATH", 1, 1, opRmdir},
		"unlink":           {"PATH", 1, 1, opUnlink},
		"rename":           {"SRC DST", 2, 2, opRename},
		"exchange":         {"A B", 2, 2, opExchange},
		"link":             {"SRC DST", 2, 2, opLink},
		"symlink":          {"TARGET LINKPATH", 2, 2, opSymlink},
		"mkfifo":           {"PATH", 1, 1, opMkfifo},
		"list":             {"PATH", 1, 1, opList},
		"stat":             {"PATH", 1, 1, opStat},
		"opath-reopen":     {"PATH", 1, 1, opOpathReopen},
		"opath-openat":     {"DIR NAME", 2, 2, opOpathOpenat},
		"chdir-read":       {"DIR NAME", 2, 2, opChdirRead},
		"exec":             {"PATH [ARG...]", 1, variadic, opExec},
		"exec-blocked":     {"SIGNUMS PATH [ARG...]", 2, variadic, opExecBlocked},
		"memfd-exec":       {"SRC [ARG...]", 1, variadic, opMemfdExec},
		"ptrace":           {"PID", 1, 1, opPtrace},
		"vm-read":          {"PID", 1, 1, opVMRead},
		"proc-mem":         {"PID", 1, 1, opProcMem},
		"pidfd-getfd":      {"PID FD", 2, 2, opPidfdGetfd},
		"kill":             {"PID SIG", 2, 2, opKill},
		"connect-abstract": {"NAME", 1, 1, opConnectAbstract},
		"connect-unix":     {"PATH", 1, 1, opConnectUnix},
		"tiocsti":          {"FD TEXT", 2, 2, opTIOCSTI},
		"write-ctty":       {"TEXT", 1, 1, opWriteCtty},
		"unshare-ns":       {"", 0, 0, opUnshareNS},
		"mount-tmpfs":      {"PATH", 1, 1, opMountTmpfs},
		"pid":              {"", 0, 0, opPid},
		"status":           {"", 0, 0, opStatus},
		"getenv":           {"NAME", 1, 1, opGetenv},
		"keyring-read":     {"NAME", 1, 1, opKeyringRead},
		"keyring-fill":     {"", 0, 0, opKeyringFill},
		"shm-read":         {"ID", 1, 1, opShmRead},
		"sleep":            {"MS", 1, 1, opSleep},
		"timerslack":       {"", 0, 0, opTimerSlack},
		"wait-file":        {"PATH TIMEOUT_MS", 2, 2, opWaitFile},
		"daemon":           {"OUTFILE OP [ARG...]", 2, variadic, opDaemon},
		"cgroup-spawn":     {"DIR OUTFILE OP [ARG...]", 3, variadic, opCgroupSpawn},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the invocation args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case stageMiddle:
			return daemonMiddle(args[1:], stdout, stderr)
		case stageGrandchild:
			return daemonGrandchild(args[1:])
		}
	}
	return invoke(args, &env{}, stdout, stderr)
}

// invoke runs the operation args[0] with its arguments and writes the result
// line to out.
func invoke(args []string, e *env, out, stderr io.Writer) int {
	o, err := lookup(args)
	if err != nil {
		return usage(stderr, err)
	}
	detail, err := o.run(e, args[1:])
	if ue := (*usageError)(nil); errors.As(err, &ue) {
		return usage(stderr, fmt.Errorf("%s: %w", args[0], err))
	}
	fmt.Fprintln(out, resultLine(detail, err))
	if err != nil {
		return exitErr
	}
	return exitOK
}

// lookup finds the operation named by args[0] and checks the argument count.
func lookup(args []string) (op, error) {
	if len(args) == 0 {
		return op{}, &usageError{msg: "no operation given", listOps: true}
	}
	o, ok := commands()[args[0]]
	if !ok {
		return op{}, &usageError{msg: fmt.Sprintf("unknown operation %q", args[0]), listOps: true}
	}
	n := len(args) - 1
	if n < o.minArgs || (o.maxArgs != variadic && n > o.maxArgs) {
		return op{}, usagef("usage: testagent %s %s", args[0], o.args)
	}
	return o, nil
}

func usage(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "testagent: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) && ue.listOps {
		names := make([]string, 0, len(commands()))
		for name, o := range commands() {
			names = append(names, strings.TrimSpace(name+" "+o.args))
		}
		sort.Strings(names)
		fmt.Fprintf(stderr, "operations:\n  %s\n", strings.Join(names, "\n  "))
	}
	return exitUsage
}

// resultLine formats the one line of output for an operation's result,
// without the trailing newline.
func resultLine(detail string, err error) string {
	if err != nil {
		return "err " + errnoName(err) + " " + oneLine(err.Error())
	}
	if detail == "" {
		return "ok"
	}
	return "ok " + oneLine(detail)
}

// errnoName returns the symbolic name of the errno in err's chain, or EOTHER.
func errnoName(err error) string {
	if re := (*relayedError)(nil); errors.As(err, &re) {
		return re.name
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return "EOTHER"
}

var lineEscaper = strings.NewReplacer("\n", `\n`, "\r", `\r`)

func oneLine(s string) string { return lineEscaper.Replace(s) }

// opDaemon is the top stage of daemon: it starts the middle stage in a new
// session and waits for it, not for the grandchild.
func opDaemon(_ *env, args []string) (string, error) {
	if _, err := lookup(args[1:]); err != nil {
		return "", err
	}
	out, err := runMiddle(append([]string{stageMiddle}, args...))
	line := strings.TrimSuffix(string(out), "\n")
	if f := strings.SplitN(line, " ", 3); len(f) == 3 && f[0] == "err" {
		// The middle stage could not start the grandchild; relay its errno.
		return "", &relayedError{name: f[1], msg: "daemon: middle stage: " + f[2]}
	}
	if err != nil {
		return "", fmt.Errorf("daemon: middle stage: %w", err)
	}
	if !strings.HasPrefix(line, "ok ") {
		return "", fmt.Errorf("daemon: middle stage printed %q", line)
	}
	return "started", nil
}

// opCgroupSpawn starts daemon's grandchild stage in the cgroup args[0].
func opCgroupSpawn(_ *env, args []string) (string, error) {
	if _, err := lookup(args[2:]); err != nil {
		return "", err
	}
	fd, err := unix.Open(args[0], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: args[0], Err: err}
	}
	defer unix.Close(fd)
	cmd := exec.Command("/proc/self/exe", append([]string{stageGrandchild}, args[1:]...)...)
	cmd.Stdin = os.Stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	pid := cmd.Process.Pid
	return fmt.Sprintf("pid=%d", pid), cmd.Process.Release()
}

// daemonMiddle is the middle stage of daemon, running in its own session. It
// starts the grandchild, reports on stdout, and returns without waiting.
func daemonMiddle(args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 {
		return usage(stderr, usagef("usage: testagent %s OUTFILE OP [ARG...]", stageMiddle))
	}
	pid, err := startSelf(append([]string{stageGrandchild}, args...))
	fmt.Fprintln(stdout, resultLine(fmt.Sprint(pid), err))
	if err != nil {
		return exitErr
	}
	return exitOK
}

// daemonGrandchild is the last stage of daemon: args are OUTFILE OP [ARG...].
func daemonGrandchild(args []string) int {
	if len(args) < 2 {
		return exitUsage
	}
	outfile := args[0]
	time.Sleep(daemonDelay)
	e := &env{beforeExec: func() error {
		f, err := openOutfile(outfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := unix.Dup3(int(f.Fd()), 1, 0); err != nil {
			return os.NewSyscallError("dup3", err)
		}
		return nil
	}}
	var out bytes.Buffer
	code := invoke(args[1:], e, &out, io.Discard)
	if code == exitUsage {
		return code
	}
	// The line is written with one write(2) so that wait-file, which waits
	// for a non-empty file, never sees part of it.
	f, err := openOutfile(outfile)
	if err != nil {
		return exitNoOutfile
	}
	if _, err := f.Write(out.Bytes()); err != nil {
		return exitNoOutfile
	}
	if err := f.Close(); err != nil {
		return exitNoOutfile
	}
	return code
}

func openOutfile(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
}

// runMiddle runs /proc/self/exe with args in a new session to completion,
// within middleTimeout, and returns its stdout. Stdin is inherited and stderr
// is ours.
func runMiddle(args []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), middleTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe", args...)
	cmd.Stdin = os.Stdin
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd.Output()
}

// startSelf starts /proc/self/exe with args and does not wait for it. Stdin
// is inherited; stdout and stderr are /dev/null.
func startSelf(args []string) (pid int, err error) {
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Stdin = os.Stdin
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid = cmd.Process.Pid
	return pid, cmd.Process.Release()
}
