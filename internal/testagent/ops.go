//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxRead is how much of a file read, opath-reopen, opath-openat, chdir-read
// and wait-file return.
const maxRead = 64 << 10

// Files.

func opRead(_ *env, args []string) (string, error) {
	return readPath(unix.AT_FDCWD, args[0])
}

func opWrite(_ *env, args []string) (string, error) {
	return writePath(args[0], unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, args[1])
}

func opAppend(_ *env, args []string) (string, error) {
	return writePath(args[0], unix.O_WRONLY|unix.O_APPEND, args[1])
}

func opCreate(_ *env, args []string) (string, error) {
	fd, err := open(unix.AT_FDCWD, args[0], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	unix.Close(fd)
	return "created", nil
}

func opOpenTrunc(_ *env, args []string) (string, error) {
	fd, err := open(unix.AT_FDCWD, args[0], unix.O_RDONLY|unix.O_TRUNC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", &os.PathError{Op: "fstat", Path: args[0], Err: err}
	}
	return fmt.Sprintf("opened, size=%d", st.Size), nil
}

func opTruncate(_ *env, args []string) (string, error) {
	size, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return "", usagef("bad SIZE %q", args[1])
	}
	if err := unix.Truncate(args[0], size); err != nil {
		return "", &os.PathError{Op: "truncate", Path: args[0], Err: err}
	}
	return fmt.Sprintf("truncated to %d", size), nil
}

func opMkdir(_ *env, args []string) (string, error) {
	if err := unix.Mkdir(args[0], 0o755); err != nil {
		return "", &os.PathError{Op: "mkdir", Path: args[0], Err: err}
	}
	return "created", nil
}

func opRmdir(_ *env, args []string) (string, error) {
	if err := unix.Rmdir(args[0]); err != nil {
		return "", &os.PathError{Op: "rmdir", Path: args[0], Err: err}
	}
	return "removed", nil
}

func opUnlink(_ *env, args []string) (string, error) {
	if err := unix.Unlink(args[0]); err != nil {
		return "", &os.PathError{Op: "unlink", Path: args[0], Err: err}
	}
	return "removed", nil
}

func opRename(_ *env, args []string) (string, error) {
	if err := unix.Rename(args[0], args[1]); err != nil {
		return "", &os.LinkError{Op: "rename", Old: args[0], New: args[1], Err: err}
	}
	return "renamed", nil
}

func opExchange(_ *env, args []string) (string, error) {
	err := unix.Renameat2(unix.AT_FDCWD, args[0], unix.AT_FDCWD, args[1], unix.RENAME_EXCHANGE)
	if err != nil {
		return "", &os.LinkError{Op: "renameat2 RENAME_EXCHANGE", Old: args[0], New: args[1], Err: err}
	}
	return "exchanged", nil
}

func opLink(_ *env, args []string) (string, error) {
	if err := unix.Linkat(unix.AT_FDCWD, args[0], unix.AT_FDCWD, args[1], 0); err != nil {
		return "", &os.LinkError{Op: "link", Old: args[0], New: args[1], Err: err}
	}
	return "linked", nil
}

func opSymlink(_ *env, args []string) (string, error) {
	if err := unix.Symlink(args[0], args[1]); err != nil {
		return "", &os.LinkError{Op: "symlink", Old: args[0], New: args[1], Err: err}
	}
	return "linked", nil
}

func opMkfifo(_ *env, args []string) (string, error) {
	if err := unix.Mkfifo(args[0], 0o644); err != nil {
		return "", &os.PathError{Op: "mkfifo", Path: args[0], Err: err}
	}
	return "created", nil
}

func opList(_ *env, args []string) (string, error) {
	fd, err := open(unix.AT_FDCWD, args[0], unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), args[0])
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return "", err
	}
	slices.Sort(names)
	return strings.Join(names, ","), nil
}

func opStat(_ *env, args []string) (string, error) {
	var st unix.Stat_t
	if err := unix.Lstat(args[0], &st); err != nil {
		return "", &os.PathError{Op: "lstat", Path: args[0], Err: err}
	}
	types := map[uint32]string{
		unix.S_IFREG: "file", unix.S_IFDIR: "dir", unix.S_IFLNK: "symlink",
		unix.S_IFIFO: "fifo", unix.S_IFSOCK: "socket", unix.S_IFCHR: "char", unix.S_IFBLK: "block",
	}
	typ, ok := types[st.Mode&unix.S_IFMT]
	if !ok {
		typ = fmt.Sprintf("0%o", st.Mode&unix.S_IFMT)
	}
	return fmt.Sprintf("type=%s size=%d mode=%04o", typ, st.Size, st.Mode&0o7777), nil
}

func opOpathReopen(_ *env, args []string) (string, error) {
	fd, err := open(unix.AT_FDCWD, args[0], unix.O_PATH, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	return readPath(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd))
}

func opOpathOpenat(_ *env, args []string) (string, error) {
	dirfd, err := open(unix.AT_FDCWD, args[0], unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(dirfd)
	return readPath(dirfd, args[1])
}

func opChdirRead(_ *env, args []string) (string, error) {
	if err := unix.Chdir(args[0]); err != nil {
		return "", &os.PathError{Op: "chdir", Path: args[0], Err: err}
	}
	return readPath(unix.AT_FDCWD, args[1])
}

// open is openat(2) with O_CLOEXEC added; the caller owns the returned fd.
// The error names the path and, for a dirfd other than AT_FDCWD, the dirfd.
func open(dirfd int, path string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, path, flags|unix.O_CLOEXEC, mode)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			op := "open"
			if dirfd != unix.AT_FDCWD {
				op = fmt.Sprintf("openat dirfd %d", dirfd)
			}
			return -1, &os.PathError{Op: op, Path: path, Err: err}
		}
		return fd, nil
	}
}

// readPath opens path O_RDONLY relative to dirfd and returns up to maxRead
// bytes of it, Go-quoted.
func readPath(dirfd int, path string) (string, error) {
	data, err := readRaw(dirfd, path)
	if err != nil {
		return "", err
	}
	return strconv.Quote(string(data)), nil
}

func readRaw(dirfd int, path string) ([]byte, error) {
	fd, err := open(dirfd, path, unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, maxRead)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], nil
}

func writePath(path string, flags int, content string) (string, error) {
	fd, err := open(unix.AT_FDCWD, path, flags, 0o644)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	if err := writeAll(fd, []byte(content)); err != nil {
		return "", &os.PathError{Op: "write", Path: path, Err: err}
	}
	return fmt.Sprintf("wrote %d bytes", len(content)), nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// Programs.

func opExec(e *env, args []string) (string, error) {
	if e.beforeExec != nil {
		if err := e.beforeExec(); err != nil {
			return "", err
		}
	}
	err := unix.Exec(args[0], args, os.Environ())
	return "", &os.PathError{Op: "execve", Path: args[0], Err: err}
}

// opExecBlocked execs PATH with the signals SIGNUMS (numbers, comma
// separated) blocked: the mask a program starts with, as a shell's
// caller may have left it.
func opExecBlocked(e *env, args []string) (string, error) {
	var set unix.Sigset_t
	for _, f := range strings.Split(args[0], ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 64 {
			return "", usagef("exec-blocked: %q is no signal number", f)
		}
		set.Val[(n-1)/64] |= 1 << ((n - 1) % 64)
	}
	// The execve inherits the mask of the thread that makes it.
	runtime.LockOSThread()
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
		return "", os.NewSyscallError("pthread_sigmask", err)
	}
	return opExec(e, args[1:])
}

func opMemfdExec(e *env, args []string) (string, error) {
	src := args[0]
	data, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	// No MFD_CLOEXEC: an interpreter started for a #! script must be able
	// to open /dev/fd/N. No MFD_EXEC either: kernels before 6.3 reject it,
	// and later ones treat its absence as MFD_EXEC unless
	// vm.memfd_noexec says otherwise, in which case the errno is the result.
	fd, err := unix.MemfdCreate("testagent", 0)
	if err != nil {
		return "", os.NewSyscallError("memfd_create", err)
	}
	defer unix.Close(fd)
	if err := writeAll(fd, data); err != nil {
		return "", os.NewSyscallError("write memfd", err)
	}
	if e.beforeExec != nil {
		if err := e.beforeExec(); err != nil {
			return "", err
		}
	}
	argv, err := syscall.SlicePtrFromStrings(args)
	if err != nil {
		return "", err
	}
	envv, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return "", err
	}
	empty, err := unix.BytePtrFromString("")
	if err != nil {
		return "", err
	}
	// x/sys/unix has no Execveat wrapper.
	_, _, errno := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])), unix.AT_EMPTY_PATH, 0)
	runtime.KeepAlive(argv)
	runtime.KeepAlive(envv)
	runtime.KeepAlive(empty)
	return "", fmt.Errorf("execveat memfd copy of %s: %w", src, errno)
}

// Other processes.

func opPtrace(_ *env, args []string) (string, error) {
	pid, err := parseInt("PID", args[0])
	if err != nil {
		return "", err
	}
	// The tracer is a thread, not a process: attach, wait and detach must
	// all come from the same OS thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceAttach(pid); err != nil {
		return "", fmt.Errorf("ptrace PTRACE_ATTACH %d: %w", pid, err)
	}
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("attached to %d, then wait4: %w", pid, err)
		}
		break
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return "", fmt.Errorf("attached to %d, then ptrace PTRACE_DETACH: %w", pid, err)
	}
	return fmt.Sprintf("attached to %d and detached", pid), nil
}

func opVMRead(_ *env, args []string) (string, error) {
	pid, err := parseInt("PID", args[0])
	if err != nil {
		return "", err
	}
	mapsPath := fmt.Sprintf("/proc/%d/maps", pid)
	maps, err := os.ReadFile(mapsPath)
	if err != nil {
		return "", err
	}
	addr, err := firstReadableMapping(maps)
	if err != nil {
		return "", fmt.Errorf("%s: %w", mapsPath, err)
	}
	buf := make([]byte, 16)
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := []unix.RemoteIovec{{Base: addr, Len: len(buf)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err != nil {
		return "", fmt.Errorf("process_vm_readv pid %d at %#x: %w", pid, addr, err)
	}
	return fmt.Sprintf("read %d bytes at %#x: %x", n, addr, buf[:n]), nil
}

// firstReadableMapping returns the start address of the first mapping in a
// /proc/PID/maps listing that is readable, skipping the vvar pages, which
// process_vm_readv cannot read.
func firstReadableMapping(maps []byte) (uintptr, error) {
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "r") {
			continue
		}
		if len(f) >= 6 && strings.HasPrefix(f[5], "[vvar") {
			continue
		}
		start, _, ok := strings.Cut(f[0], "-")
		if !ok {
			return 0, fmt.Errorf("malformed line %q", sc.Text())
		}
		addr, err := strconv.ParseUint(start, 16, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed line %q", sc.Text())
		}
		return uintptr(addr), nil
	}
	return 0, errors.New("no readable mapping")
}

func opProcMem(_ *env, args []string) (string, error) {
	pid, err := parseInt("PID", args[0])
	if err != nil {
		return "", err
	}
	path := fmt.Sprintf("/proc/%d/mem", pid)
	fd, err := open(unix.AT_FDCWD, path, unix.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	unix.Close(fd)
	return "opened " + path, nil
}

func opPidfdGetfd(_ *env, args []string) (string, error) {
	pid, err := parseInt("PID", args[0])
	if err != nil {
		return "", err
	}
	targetfd, err := parseInt("FD", args[1])
	if err != nil {
		return "", err
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return "", fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, targetfd, 0)
	if err != nil {
		return "", fmt.Errorf("pidfd_getfd pid %d fd %d: %w", pid, targetfd, err)
	}
	defer unix.Close(fd)
	target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		// The fd was stolen; what it refers to is secondary.
		target = "?"
	}
	return fmt.Sprintf("fd=%d target=%s", fd, target), nil
}

func opKill(_ *env, args []string) (string, error) {
	pid, err := parseInt("PID", args[0])
	if err != nil {
		return "", err
	}
	sig, err := parseSignal(args[1])
	if err != nil {
		return "", err
	}
	if err := unix.Kill(pid, sig); err != nil {
		return "", fmt.Errorf("kill %d signal %d: %w", pid, sig, err)
	}
	return fmt.Sprintf("sent signal %d to %d", sig, pid), nil
}

// parseSignal accepts a number or a name with or without the SIG prefix.
func parseSignal(s string) (unix.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return unix.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, usagef("bad SIG %q", s)
}

func parseInt(what, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, usagef("bad %s %q", what, s)
	}
	return n, nil
}

// Sockets and terminals.

func opConnectAbstract(_ *env, args []string) (string, error) {
	// x/sys/unix turns a leading @ into the NUL of an abstract address.
	return connectUnix("@" + args[0])
}

func opConnectUnix(_ *env, args []string) (string, error) {
	if strings.HasPrefix(args[0], "@") {
		return "", usagef("PATH %q begins with @, which would name an abstract socket; use ./%s", args[0], args[0])
	}
	return connectUnix(args[0])
}

func connectUnix(addr string) (string, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: addr}); err != nil {
		return "", fmt.Errorf("connect %s: %w", addr, err)
	}
	return "connected to " + addr, nil
}

func opTIOCSTI(_ *env, args []string) (string, error) {
	fd, err := parseInt("FD", args[0])
	if err != nil {
		return "", err
	}
	text := []byte(args[1])
	for i := range text {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&text[i])))
		if errno != 0 {
			return "", fmt.Errorf("ioctl TIOCSTI fd %d after %d of %d bytes: %w", fd, i, len(text), errno)
		}
	}
	return fmt.Sprintf("injected %d bytes", len(text)), nil
}

func opWriteCtty(_ *env, args []string) (string, error) {
	fd, err := open(unix.AT_FDCWD, "/dev/tty", unix.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	if err := writeAll(fd, []byte(args[0])); err != nil {
		return "", &os.PathError{Op: "write", Path: "/dev/tty", Err: err}
	}
	return fmt.Sprintf("wrote %d bytes", len(args[0])), nil
}

// Process state and helpers.

func opPid(_ *env, _ []string) (string, error) {
	sid, err := unix.Getsid(0)
	if err != nil {
		return "", os.NewSyscallError("getsid", err)
	}
	return fmt.Sprintf("pid=%d ppid=%d sid=%d pgid=%d", os.Getpid(), os.Getppid(), sid, unix.Getpgrp()), nil
}

// opGetenv prints the variable's value; an unset variable is ENOENT.
func opGetenv(_ *env, args []string) (string, error) {
	v, ok := os.LookupEnv(args[0])
	if !ok {
		return "", os.NewSyscallError("getenv", unix.ENOENT)
	}
	return v, nil
}

// opKeyringRead reads the "user" key NAME found in the process's session
// keyring (and what it links: the user keyring of a login session).
func opKeyringRead(_ *env, args []string) (string, error) {
	id, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", args[0], 0)
	if err != nil {
		return "", os.NewSyscallError("keyctl search", err)
	}
	buf := make([]byte, 4096)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
	if err != nil {
		return "", os.NewSyscallError("keyctl read", err)
	}
	return strconv.Quote(string(buf[:min(n, len(buf))])), nil
}

// opKeyringFill joins a session keyring of its own and adds "user" keys
// to it until the kernel refuses one for this user's key quota (EDQUOT);
// it then says "filled N" on stdout and holds the keys until stdin
// closes.
func opKeyringFill(_ *env, _ []string) (string, error) {
	runtime.LockOSThread() // a thread's session keyring is its credentials'
	if _, err := unix.KeyctlJoinSessionKeyring("agent-launcher-fill"); err != nil {
		return "", os.NewSyscallError("keyctl join", err)
	}
	n := 0
	for ; ; n++ {
		_, err := unix.AddKey("user", fmt.Sprintf("fill-%d", n), []byte("x"), unix.KEY_SPEC_SESSION_KEYRING)
		if err == unix.EDQUOT {
			break
		}
		if err != nil {
			return "", os.NewSyscallError("add_key", err)
		}
		if n > 100_000 {
			return "", errors.New("keyring-fill: no quota met after 100,000 keys (root's is a million)")
		}
	}
	fmt.Printf("filled %d\n", n)
	io.Copy(io.Discard, os.Stdin)
	return strconv.Itoa(n), nil
}

// opShmRead reads the System V shared memory segment ID up to its first
// NUL byte.
func opShmRead(_ *env, args []string) (string, error) {
	id, err := strconv.Atoi(args[0])
	if err != nil {
		return "", usagef("shm-read: %q is not a segment id", args[0])
	}
	b, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
	if err != nil {
		return "", os.NewSyscallError("shmat", err)
	}
	defer unix.SysvShmDetach(b)
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strconv.Quote(string(b)), nil
}

func opStatus(_ *env, _ []string) (string, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", err
	}
	keys := []string{"NoNewPrivs", "Seccomp", "CapEff"}
	got := make(map[string]string)
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if ok && slices.Contains(keys, k) {
			got[k] = strings.TrimSpace(v)
		}
	}
	var parts []string
	for _, k := range keys {
		v, ok := got[k]
		if !ok {
			return "", fmt.Errorf("/proc/self/status has no %s line", k)
		}
		parts = append(parts, k+":"+v)
	}
	return strings.Join(parts, ";"), nil
}

// opTimerSlack reports the calling thread's timer slack and its default,
// which PR_SET_TIMERSLACK 0 restores (the slack the thread's creator had
// when it was created). The thread stays locked: its slack is changed.
func opTimerSlack(_ *env, _ []string) (string, error) {
	runtime.LockOSThread()
	cur, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return "", fmt.Errorf("prctl PR_GET_TIMERSLACK: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0); err != nil {
		return "", fmt.Errorf("prctl PR_SET_TIMERSLACK 0: %w", err)
	}
	def, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return "", fmt.Errorf("prctl PR_GET_TIMERSLACK: %w", err)
	}
	return fmt.Sprintf("current=%d default=%d", cur, def), nil
}

func opSleep(_ *env, args []string) (string, error) {
	ms, err := parseInt("MS", args[0])
	if err != nil {
		return "", err
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	return fmt.Sprintf("slept %dms", ms), nil
}

func opWaitFile(_ *env, args []string) (string, error) {
	path := args[0]
	ms, err := parseInt("TIMEOUT_MS", args[1])
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(time.Duration(ms) * time.Millisecond)
	for {
		data, err := readRaw(unix.AT_FDCWD, path)
		switch {
		case err == nil && len(data) > 0:
			return strconv.Quote(string(data)), nil
		case err != nil && !errors.Is(err, unix.ENOENT):
			return "", err
		}
		if time.Now().After(deadline) {
			state := "empty"
			if err != nil {
				state = "missing"
			}
			return "", &timeoutError{fmt.Sprintf("wait-file %s: still %s after %dms", path, state, ms)}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A timeoutError reports ETIMEDOUT without the errno's text, "connection
// timed out", which would be misleading for a file.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string { return e.msg }
func (e *timeoutError) Unwrap() error { return unix.ETIMEDOUT }

// Namespaces.

func opUnshareNS(_ *env, _ []string) (string, error) {
	if err := nsProbe(""); err != nil {
		return "", err
	}
	return "unshared user and mount namespaces", nil
}

func opMountTmpfs(_ *env, args []string) (string, error) {
	if err := nsProbe(args[0]); err != nil {
		return "", err
	}
	return "mounted tmpfs on " + args[0] + " in a new user and mount namespace", nil
}

// Steps of nsProbe, in order; the forked child reports the one that failed.
const (
	nsStepUnshare = iota + 1
	nsStepSetgroups
	nsStepGidMap
	nsStepUidMap
	nsStepMount
	nsStepDone
)

// An nsPlan is everything the forked child of nsProbe needs, prepared before
// the fork as addresses of NUL-terminated strings, so that the child neither
// allocates nor indexes (a bounds check could call into the runtime).
type nsPlan struct {
	atFDCWD                               uintptr
	unshareFlags                          uintptr
	mount                                 bool
	setgroupsPath, gidMapPath, uidMapPath uintptr
	deny, gidMap, uidMap                  uintptr
	denyLen, gidMapLen, uidMapLen         uintptr
	tmpfs, target                         uintptr
}

// nsProbe forks a child that calls unshare(CLONE_NEWUSER|CLONE_NEWNS) and,
// if target is not empty, writes "deny" to /proc/self/setgroups, maps the
// caller's gid and uid 1:1 and mounts a tmpfs on target. It returns nil if
// every step worked, and otherwise an error naming the first step that
// failed and wrapping its errno. The namespaces and the mount die with the
// child.
//
// The child is a raw fork rather than a re-exec because unshare(2) refuses
// CLONE_NEWUSER in a multithreaded process (EINVAL), every Go process is
// multithreaded, and SysProcAttr.Unshareflags would do the map writes and an
// extra MS_PRIVATE remount of / inside os/exec's child, reporting every
// failure as one errno of an unknown step, while the tests need to tell a
// refused unshare (seccomp) from a refused mount (Landlock). Because no
// exec happens, the child keeps the full capability set that unshare gives
// it in the new user namespace, as the mapped, non-root uid it runs as.
// The fork follows what syscall.forkAndExecInChild does: signals are
// blocked around the clone, and the child runs only nosplit code that makes
// raw system calls and exits.
func nsProbe(target string) error {
	var keep [][]byte
	cstr := func(s string) uintptr {
		b := append([]byte(s), 0)
		keep = append(keep, b)
		return uintptr(unsafe.Pointer(&b[0]))
	}
	deny := "deny"
	gidMap := fmt.Sprintf("%d %d 1\n", os.Getegid(), os.Getegid())
	uidMap := fmt.Sprintf("%d %d 1\n", os.Geteuid(), os.Geteuid())
	atFDCWD := unix.AT_FDCWD
	p := &nsPlan{
		atFDCWD:       uintptr(atFDCWD),
		unshareFlags:  unix.CLONE_NEWUSER | unix.CLONE_NEWNS,
		mount:         target != "",
		setgroupsPath: cstr("/proc/self/setgroups"),
		gidMapPath:    cstr("/proc/self/gid_map"),
		uidMapPath:    cstr("/proc/self/uid_map"),
		deny:          cstr(deny),
		denyLen:       uintptr(len(deny)),
		gidMap:        cstr(gidMap),
		gidMapLen:     uintptr(len(gidMap)),
		uidMap:        cstr(uidMap),
		uidMapLen:     uintptr(len(uidMap)),
		tmpfs:         cstr("tmpfs"),
		target:        cstr(target),
	}

	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	wfd := w.Fd()

	runtime.LockOSThread()
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^uint64(0)
	}
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &all, &old); err != nil {
		runtime.UnlockOSThread()
		w.Close()
		return os.NewSyscallError("rt_sigprocmask", err)
	}
	pid, errno := nsFork(p, wfd)
	unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	runtime.UnlockOSThread()
	w.Close()
	runtime.KeepAlive(keep)
	runtime.KeepAlive(p)
	if errno != 0 {
		return os.NewSyscallError("fork", errno)
	}

	var res [8]byte
	_, readErr := io.ReadFull(r, res[:])
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(int(pid), &ws, 0, nil)
		if err != unix.EINTR {
			break
		}
	}
	if readErr != nil {
		return fmt.Errorf("namespace child died without a result (wait status %#x): %w", uint32(ws), readErr)
	}
	v := *(*uint64)(unsafe.Pointer(&res[0]))
	step, errno := int(v>>32), unix.Errno(uint32(v))
	switch step {
	case nsStepDone:
		return nil
	case nsStepUnshare:
		return fmt.Errorf("unshare: CLONE_NEWUSER|CLONE_NEWNS: %w", errno)
	case nsStepSetgroups:
		return fmt.Errorf("setgroups: write deny to /proc/self/setgroups: %w", errno)
	case nsStepGidMap:
		return fmt.Errorf("gid_map: write %q to /proc/self/gid_map: %w", gidMap, errno)
	case nsStepUidMap:
		return fmt.Errorf("uid_map: write %q to /proc/self/uid_map: %w", uidMap, errno)
	case nsStepMount:
		return fmt.Errorf("mount: tmpfs on %s: %w", target, errno)
	}
	return fmt.Errorf("namespace child reported unknown step %d", step)
}

// nsFork forks. In the parent it returns the child's pid or the errno of
// clone. The child runs the plan, writes (step<<32 | errno) as 8 bytes to
// resultFD and exits; it never returns.
//
//go:nosplit
//go:norace
func nsFork(p *nsPlan, resultFD uintptr) (pid uintptr, errno unix.Errno) {
	if runtime.GOARCH == "s390x" {
		// On Linux/s390 the first two arguments of clone are swapped.
		pid, _, errno = unix.RawSyscall6(unix.SYS_CLONE, 0, uintptr(unix.SIGCHLD), 0, 0, 0, 0)
	} else {
		pid, _, errno = unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	}
	if errno != 0 || pid != 0 {
		return pid, errno
	}
	step, e := nsChild(p)
	res := uint64(step)<<32 | uint64(e)
	unix.RawSyscall(unix.SYS_WRITE, resultFD, uintptr(unsafe.Pointer(&res)), 8)
	for {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
}

// nsChild runs in the forked child of nsFork.
//
//go:nosplit
//go:norace
func nsChild(p *nsPlan) (step uintptr, errno unix.Errno) {
	if _, _, e := unix.RawSyscall(unix.SYS_UNSHARE, p.unshareFlags, 0, 0); e != 0 {
		return nsStepUnshare, e
	}
	if !p.mount {
		return nsStepDone, 0
	}
	if e := rawWriteFile(p.atFDCWD, p.setgroupsPath, p.deny, p.denyLen); e != 0 {
		return nsStepSetgroups, e
	}
	if e := rawWriteFile(p.atFDCWD, p.gidMapPath, p.gidMap, p.gidMapLen); e != 0 {
		return nsStepGidMap, e
	}
	if e := rawWriteFile(p.atFDCWD, p.uidMapPath, p.uidMap, p.uidMapLen); e != 0 {
		return nsStepUidMap, e
	}
	if _, _, e := unix.RawSyscall6(unix.SYS_MOUNT, p.tmpfs, p.target, p.tmpfs, 0, 0, 0); e != 0 {
		return nsStepMount, e
	}
	return nsStepDone, 0
}

// rawWriteFile writes n bytes at buf to the file at path in one write(2).
// The kernel accepts a map or setgroups write whole or not at all.
//
//go:nosplit
//go:norace
func rawWriteFile(atFDCWD, path, buf, n uintptr) unix.Errno {
	fd, _, e := unix.RawSyscall6(unix.SYS_OPENAT, atFDCWD, path, unix.O_WRONLY|unix.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return e
	}
	_, _, e = unix.RawSyscall(unix.SYS_WRITE, fd, buf, n)
	unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
	return e
}
