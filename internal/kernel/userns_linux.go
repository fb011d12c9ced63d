package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The sysctls that decide whether an unprivileged user may create a user
// namespace.
const (
	// Upstream, per user namespace (kernel/ucount.c); 0 disables creation.
	sysctlMaxUserNS = "/proc/sys/user/max_user_namespaces"
	// Debian and linux-hardened patch; 0 allows only CAP_SYS_ADMIN.
	sysctlUnprivClone = "/proc/sys/kernel/unprivileged_userns_clone"
	// Ubuntu 23.10 and later; 1 confines or refuses unprivileged creation.
	sysctlAppArmorUserNS = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
)

// ProbeUserNS reports whether this process's user can create a user
// namespace, by starting a re-executed child (see RunProbeChild) in a new
// user namespace whose only uid and gid map to the caller's effective uid
// and gid, as an unprivileged user may do (user_namespaces(7)). The child
// runs under ctx and at most 5 seconds.
//
// If the kernel refuses, ProbeUserNS reports Available false with a Reason
// built from the errno and the sysctls that govern user namespaces; it
// returns an error only when the probe itself could not be run.
//
// Available does not promise capabilities inside the namespace: under
// Ubuntu's AppArmor restriction an unconfined program may still create the
// namespace, but is confined there without capabilities.
func ProbeUserNS(ctx context.Context) (UserNS, error) {
	uid, gid := os.Geteuid(), os.Getegid()
	attr := &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		// An unprivileged user may write gid_map only after setgroups is
		// denied (user_namespaces(7), "The /proc/[pid]/setgroups file").
		GidMappingsEnableSetgroups: false,
	}
	c, err := startProbeChild(ctx, probeEnv+"="+probeUserNS, attr)
	if err != nil {
		if ctx.Err() != nil || !isErrno(err) {
			return UserNS{}, fmt.Errorf("kernel: user namespace probe: %w", err)
		}
		// clone(CLONE_NEWUSER) or writing the id maps failed: os/exec
		// reports either as the errno from starting the child.
		priv, perr := CurrentPrivileges()
		if perr != nil {
			return UserNS{}, fmt.Errorf("kernel: user namespace probe: %w", perr)
		}
		_, nsErr := os.Stat("/proc/self/ns/user")
		return UserNS{Reason: usernsReason(usernsFacts{
			err:              err,
			sysAdmin:         priv.HasCap(unix.CAP_SYS_ADMIN),
			maxUserNS:        readSysctl(sysctlMaxUserNS),
			unprivClone:      readSysctl(sysctlUnprivClone),
			apparmorRestrict: readSysctl(sysctlAppArmorUserNS),
			noUserNS:         errors.Is(nsErr, os.ErrNotExist),
		})}, nil
	}
	var r usernsReport
	if err := c.wait(&r); err != nil {
		return UserNS{}, fmt.Errorf("kernel: user namespace probe: %w", err)
	}
	if r.UID != uid || r.GID != gid {
		return UserNS{}, fmt.Errorf("kernel: user namespace probe: child runs as uid %d gid %d, want %d and %d from the 1:1 mapping", r.UID, r.GID, uid, gid)
	}
	return UserNS{Available: true}, nil
}

// usernsReport is what the user namespace probe child prints: its ids as
// seen inside the new namespace.
type usernsReport struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// usernsChild is the user namespace probe child. Having been started is the
// result; it reports its ids so the parent can check the mapping.
func usernsChild() usernsReport {
	return usernsReport{UID: os.Getuid(), GID: os.Getgid()}
}

// usernsFacts is what ProbeUserNS knows when it could not start a child in
// a new user namespace. A sysctl that does not exist is "".
type usernsFacts struct {
	err              error  // from starting the child
	sysAdmin         bool   // CAP_SYS_ADMIN in the effective set
	maxUserNS        string // user.max_user_namespaces
	unprivClone      string // kernel.unprivileged_userns_clone
	apparmorRestrict string // kernel.apparmor_restrict_unprivileged_userns
	noUserNS         bool   // /proc/self/ns/user does not exist
}

// usernsReason returns one sentence saying what prevents creating a user
// namespace and how to change it.
//
// The errnos come from clone(2): ENOSPC when a user.max_user_namespaces limit
// is reached (0 being a limit always reached) or namespaces nest 32 deep
// (EUSERS before 4.9), EINVAL without CONFIG_USER_NS, EPERM from Debian's
// unprivileged_userns_clone, and EPERM or EACCES from a security module
// (AppArmor's userns_create hook), a seccomp filter or a chroot. Writing
// uid_map or gid_map can also fail with EPERM.
func usernsReason(f usernsFacts) string {
	errno := errnoText(f.err)
	switch {
	case f.maxUserNS == "0":
		return "user namespaces are disabled: the sysctl user.max_user_namespaces is 0; set it to a positive number, for example sysctl -w user.max_user_namespaces=10000"
	case errors.Is(f.err, unix.ENOSPC), errors.Is(f.err, unix.EUSERS):
		limit := f.maxUserNS
		if limit == "" {
			limit = "unknown"
		}
		return fmt.Sprintf("creating a user namespace failed with %s: this user has reached user.max_user_namespaces (%s) or user namespaces are nested 32 deep", errno, limit)
	case errors.Is(f.err, unix.EINVAL) && f.noUserNS:
		return "the kernel was built without user namespaces (CONFIG_USER_NS is not set)"
	case errors.Is(f.err, unix.EPERM) || errors.Is(f.err, unix.EACCES):
		switch {
		case f.unprivClone == "0" && !f.sysAdmin:
			return "unprivileged user namespaces are disabled: the sysctl kernel.unprivileged_userns_clone is 0; set it to 1"
		case f.apparmorRestrict == "1":
			return "AppArmor restricts unprivileged user namespaces (the sysctl kernel.apparmor_restrict_unprivileged_userns is 1); give this program an AppArmor profile that allows userns, or set the sysctl to 0"
		}
		return fmt.Sprintf("creating a user namespace was refused with %s; a seccomp filter (such as a container runtime's default profile), a Linux security module or a chroot can cause this", errno)
	}
	return fmt.Sprintf("creating a user namespace failed with %s", errno)
}

// readSysctl returns the trimmed contents of a /proc/sys file, or "" if it
// cannot be read.
func readSysctl(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// isErrno reports whether err carries an errno, as it does when the kernel
// refused to create the child.
func isErrno(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno)
}
