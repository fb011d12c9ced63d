package kernel

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrNotSupported is returned, wrapped, by every probe on a system that is
// not Linux.
var ErrNotSupported = errors.New("kernel: not supported on this operating system")

// Seccomp describes seccomp filter and user-notification support. The zero
// value means nothing is supported. Each field names the kernel release that
// introduced the feature upstream; distribution kernels may have it earlier.
type Seccomp struct {
	// Filter reports whether seccomp(2) filter mode works (3.17).
	Filter bool `json:"filter"`
	// UserNotif reports whether the SECCOMP_RET_USER_NOTIF action is
	// available, as answered by SECCOMP_GET_ACTION_AVAIL (5.0).
	UserNotif bool `json:"user_notif"`
	// NewListener reports whether SECCOMP_FILTER_FLAG_NEW_LISTENER is
	// accepted (5.0).
	NewListener bool `json:"new_listener"`
	// TsyncESRCH reports whether SECCOMP_FILTER_FLAG_TSYNC_ESRCH is
	// accepted, which is what makes TSYNC usable together with
	// NEW_LISTENER (5.7).
	TsyncESRCH bool `json:"tsync_esrch"`
	// WaitKillableRecv reports whether
	// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV is accepted (5.19).
	WaitKillableRecv bool `json:"wait_killable_recv"`
	// AddFD reports whether the listener supports SECCOMP_IOCTL_NOTIF_ADDFD
	// (5.9).
	AddFD bool `json:"addfd"`
	// AddFDSend reports whether SECCOMP_IOCTL_NOTIF_ADDFD accepts
	// SECCOMP_ADDFD_FLAG_SEND, which installs the fd and answers the
	// notification atomically (5.14).
	AddFDSend bool `json:"addfd_send"`
	// SyncWakeUp reports whether SECCOMP_IOCTL_NOTIF_SET_FLAGS accepts
	// SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (6.6). It only lowers latency.
	SyncWakeUp bool `json:"sync_wake_up"`
}

// UserNS describes whether this process's user can create user namespaces.
type UserNS struct {
	// Available reports whether a child could be started in a new user
	// namespace with its uid and gid mapped to themselves.
	Available bool `json:"available"`
	// Reason is one sentence saying what prevents it, naming the sysctl or
	// security module when one is identified. It is empty when Available
	// is true.
	Reason string `json:"reason"`
}

// Privileges describes the credentials of the current process.
type Privileges struct {
	// Root reports whether the effective uid is 0.
	Root bool
	// CapEff is the effective capability set, bit n being capability n
	// (see capabilities(7)), as shown by CapEff in /proc/self/status.
	CapEff uint64
}

// HasCap reports whether capability c (for example unix.CAP_SYS_ADMIN) is in
// the effective set.
func (p Privileges) HasCap(c uint) bool {
	return c < 64 && p.CapEff&(1<<c) != 0
}

// parseCapEff returns the CapEff field of a /proc/<pid>/status file.
func parseCapEff(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("CapEff: %w", err)
		}
		return caps, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no CapEff line")
}

// version is the major and minor number of a kernel release.
type version struct{ major, minor int }

func (v version) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

// atLeast reports whether v is the same as or newer than w.
func (v version) atLeast(w version) bool {
	return v.major > w.major || v.major == w.major && v.minor >= w.minor
}

// parseRelease returns the version at the start of a kernel release string
// such as "6.18.44-fc-v769" or "6.1-rc1".
func parseRelease(release string) (version, error) {
	majorStr, rest, ok := strings.Cut(release, ".")
	if !ok {
		return version{}, fmt.Errorf("kernel release %q: want MAJOR.MINOR", release)
	}
	minorStr := rest[:len(rest)-len(strings.TrimLeft(rest, "0123456789"))]
	major, err1 := strconv.Atoi(majorStr)
	minor, err2 := strconv.Atoi(minorStr)
	if err1 != nil || err2 != nil {
		return version{}, fmt.Errorf("kernel release %q: want MAJOR.MINOR", release)
	}
	return version{major, minor}, nil
}
