package kernel

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ProbeSeccomp reports which seccomp features the running kernel supports.
//
// Filter flags and actions are probed in the calling process with calls that
// cannot install anything. The listener ioctls are probed in a re-executed
// child (see RunProbeChild), which is run only when NEW_LISTENER is
// supported, under ctx and at most 5 seconds. ProbeSeccomp never installs a
// filter in the calling process, so the launcher may call it before it
// supervises anything. A feature the kernel rejects in the documented way is
// reported as false; any other failure is an error that names the step.
func ProbeSeccomp(ctx context.Context) (Seccomp, error) {
	var s Seccomp
	var err error
	wrap := func(err error) (Seccomp, error) {
		return Seccomp{}, fmt.Errorf("kernel: seccomp probe: %w", err)
	}

	if s.Filter, err = seccompFlagsKnown(0); err != nil {
		return wrap(err)
	}
	if !s.Filter {
		return s, nil
	}
	if s.UserNotif, err = seccompActionAvail(unix.SECCOMP_RET_USER_NOTIF); err != nil {
		return wrap(err)
	}
	if s.NewListener, err = seccompFlagsKnown(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER); err != nil {
		return wrap(err)
	}
	// TSYNC_ESRCH is probed in the combination the launcher loads: the
	// kernel refuses TSYNC|NEW_LISTENER unless TSYNC_ESRCH is also set
	// (seccomp_set_mode_filter), and on kernels before 5.7 the flag mask
	// rejects TSYNC_ESRCH itself.
	const tsync = unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH | unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
	if s.TsyncESRCH, err = seccompFlagsKnown(tsync); err != nil {
		return wrap(err)
	}
	// WAIT_KILLABLE_RECV alone is always EINVAL: it is only valid together
	// with NEW_LISTENER.
	const killable = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
	if s.WaitKillableRecv, err = seccompFlagsKnown(killable); err != nil {
		return wrap(err)
	}
	if !s.NewListener {
		// No listener, so no listener ioctls.
		return s, nil
	}

	c, err := startProbeChild(ctx, probeEnv+"="+probeSeccomp, nil)
	if err != nil {
		return wrap(err)
	}
	var r seccompReport
	if err := c.wait(&r); err != nil {
		return wrap(err)
	}
	if r.Step != "" {
		return wrap(fmt.Errorf("child: %s: %w", r.Step, r.err()))
	}
	s.AddFD, s.AddFDSend, s.SyncWakeUp = r.AddFD, r.AddFDSend, r.SyncWakeUp
	return s, nil
}

// seccompFlagsKnown reports whether seccomp(SECCOMP_SET_MODE_FILTER) accepts
// flags, without installing a filter.
//
// The kernel validates the flags (including the combinations it forbids)
// before it copies the sock_fprog from user memory, so with a NULL program
// the call fails with EFAULT when the flags are accepted and EINVAL when they
// are not (kernel/seccomp.c: seccomp_set_mode_filter, then
// seccomp_prepare_user_filter). The no_new_privs check comes after the copy,
// so the probe needs no privileges. This is libseccomp's
// sys_chk_seccomp_flag. flags == 0 probes filter mode itself: without
// CONFIG_SECCOMP_FILTER it is EINVAL, and before 3.17 seccomp(2) is ENOSYS.
func seccompFlagsKnown(flags uintptr) (bool, error) {
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, 0)
	switch errno {
	case unix.EFAULT:
		return true, nil
	case unix.EINVAL, unix.ENOSYS:
		return false, nil
	case 0:
		// Unreachable: a NULL program cannot be loaded.
		return false, fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, %#x, NULL) succeeded", flags)
	}
	return false, fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, %#x, NULL): %w (want EFAULT or EINVAL)", flags, errno)
}

// seccompActionAvail reports whether the kernel knows the filter return
// action, using SECCOMP_GET_ACTION_AVAIL (4.14): 0 if it does, EOPNOTSUPP if
// it does not (seccomp_get_action_avail). Kernels before 4.14 answer EINVAL
// for the unknown operation, and have no user notification either.
func seccompActionAvail(action uint32) (bool, error) {
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	switch errno {
	case 0:
		return true, nil
	case unix.EOPNOTSUPP, unix.EINVAL:
		return false, nil
	}
	return false, fmt.Errorf("seccomp(SECCOMP_GET_ACTION_AVAIL, %#x): %w", action, errno)
}

// seccompReport is what the seccomp probe child prints. Step is set when
// the child could not complete the probe; Errno and Detail say why.
type seccompReport struct {
	AddFD      bool   `json:"addfd"`
	AddFDSend  bool   `json:"addfd_send"`
	SyncWakeUp bool   `json:"sync_wake_up"`
	Step       string `json:"step,omitempty"`
	Errno      uint   `json:"errno,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// err returns the failure of a report whose Step is set, as a
// syscall.Errno when there is one, so callers can use errors.Is.
func (r seccompReport) err() error {
	if r.Errno != 0 {
		return syscall.Errno(r.Errno)
	}
	return errors.New(r.Detail)
}

// seccompNotifAddfd is struct seccomp_notif_addfd from
// include/uapi/linux/seccomp.h; x/sys/unix has the ioctl number but no type.
type seccompNotifAddfd struct {
	ID         uint64 // notification cookie
	Flags      uint32 // SECCOMP_ADDFD_FLAG_*
	Srcfd      uint32 // fd in the supervisor to install in the target
	Newfd      uint32 // target fd number, with SECCOMP_ADDFD_FLAG_SETFD
	NewfdFlags uint32 // O_CLOEXEC or 0
}

// seccompChild is the seccomp probe child. It loads a filter that allows
// every syscall with a listener attached, and asks the listener which
// ioctls it knows. It runs in a process that exits right after.
func seccompChild() seccompReport {
	fail := func(step string, err error) seccompReport {
		var errno syscall.Errno
		errors.As(err, &errno)
		return seccompReport{Step: step, Errno: uint(errno), Detail: err.Error()}
	}

	listener, step, err := loadListener()
	if err != nil {
		return fail(step, err)
	}

	var rep seccompReport
	// The ADDFD checks run in this order (seccomp_notify_addfd): argument
	// size, newfd_flags, unknown flags (EINVAL), newfd without SETFD,
	// fget(srcfd) (EBADF), then the notification lookup, which fails with
	// ENOENT because this filter never produces one. So ENOENT proves the
	// ioctl and every flag passed are known. srcfd must be an open fd: the
	// listener itself will do. Before 5.9 the ioctl number is unknown and
	// seccomp_notify_ioctl answers EINVAL.
	addfd := seccompNotifAddfd{Srcfd: uint32(listener)}
	if rep.AddFD, err = addfdKnown(listener, &addfd); err != nil {
		return fail("ioctl(SECCOMP_IOCTL_NOTIF_ADDFD)", err)
	}
	if rep.AddFD {
		// On 5.9 to 5.13 the flag check rejects SEND with EINVAL before
		// the lookup.
		addfd.Flags = unix.SECCOMP_ADDFD_FLAG_SEND
		if rep.AddFDSend, err = addfdKnown(listener, &addfd); err != nil {
			return fail("ioctl(SECCOMP_IOCTL_NOTIF_ADDFD, SECCOMP_ADDFD_FLAG_SEND)", err)
		}
	}

	// SECCOMP_IOCTL_NOTIF_SET_FLAGS takes the flags by value in the ioctl
	// argument, not through a pointer, despite its SECCOMP_IOW(4, __u64)
	// number (seccomp_notify_set_flags(filter, arg)); a pointer would be
	// rejected as unknown flags. Before 6.6 the number falls through to the
	// extensible-ioctl switch, which answers EINVAL.
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(listener),
		unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	switch errno {
	case 0:
		rep.SyncWakeUp = true
	case unix.EINVAL, unix.ENOTTY:
	default:
		return fail("ioctl(SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)", errno)
	}
	return rep
}

// loadListener installs on the calling thread a filter that allows every
// syscall, with a listener, and returns the listener fd. On failure it names
// the step that failed. It is only for probe children: the filter stays
// until the process exits.
func loadListener() (listener int, step string, err error) {
	// Filters and no_new_privs belong to a thread, not to the process: keep
	// every step, and every later use of the listener, on this one. The
	// thread is never unlocked; the process exits after the probe.
	runtime.LockOSThread()

	// Without CAP_SYS_ADMIN the kernel loads a filter only under
	// no_new_privs (seccomp_prepare_filter).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, "prctl(PR_SET_NO_NEW_PRIVS)", err
	}
	// Only this thread gets the filter (no TSYNC), and it allows
	// everything: it exists to own a listener, which the kernel creates
	// without looking at the program (seccomp_set_mode_filter,
	// init_listener). Since the filter never returns USER_NOTIF, nothing
	// ever waits on the listener, so no syscall here can block on it.
	prog := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		// EBUSY here means an inherited filter already has a listener
		// (has_duplicate_listener): the program runs under a supervisor.
		return -1, "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER)", errno
	}
	return int(r), "", nil
}

// addfdKnown issues SECCOMP_IOCTL_NOTIF_ADDFD for a notification that does
// not exist: ENOENT means the ioctl and its flags are known, EINVAL that they
// are not.
func addfdKnown(listener int, a *seccompNotifAddfd) (bool, error) {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(listener),
		unix.SECCOMP_IOCTL_NOTIF_ADDFD, uintptr(unsafe.Pointer(a)))
	switch errno {
	case unix.ENOENT:
		return true, nil
	case unix.EINVAL, unix.ENOTTY:
		return false, nil
	case 0:
		return false, errors.New("succeeded for a notification that cannot exist")
	}
	return false, errno
}
