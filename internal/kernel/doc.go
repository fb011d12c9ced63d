// Package kernel detects the kernel features that agent-launcher depends on
// and that "agent-launcher doctor" reports: the kernel release, seccomp
// user notification and its later additions, whether this user may create
// user namespaces, and the privileges of the current process. Landlock ABI
// detection lives elsewhere.
//
// # Probing without side effects
//
// Installing a seccomp filter cannot be undone, so nothing in this package
// installs one in the calling process. Filter flags are probed the way
// libseccomp's sys_chk_seccomp_flag does it: seccomp(SECCOMP_SET_MODE_FILTER,
// flags, NULL) validates the flags before it reads the program, so the call
// fails with EFAULT when the kernel knows the flags and with EINVAL when it
// does not (kernel/seccomp.c, seccomp_set_mode_filter). Actions are probed
// with SECCOMP_GET_ACTION_AVAIL.
//
// The listener ioctls (SECCOMP_IOCTL_NOTIF_ADDFD and its
// SECCOMP_ADDFD_FLAG_SEND flag, SECCOMP_IOCTL_NOTIF_SET_FLAGS) need a real
// listener, and a listener needs an installed filter. ProbeSeccomp therefore
// re-executes the current program (/proc/self/exe) as a probe child that
// loads an allow-everything filter on one locked thread and tries the
// ioctls there. User namespaces are probed the same way, by starting the
// probe child in a new user namespace.
//
// # The probe child
//
// A program that calls ProbeSeccomp or ProbeUserNS must call RunProbeChild
// first thing in main (test binaries: first thing in TestMain). The parent
// selects the probe with an environment variable and reads one JSON object
// from the child's standard output:
//
//	AGENT_LAUNCHER_KERNEL_PROBE  child does                              child prints
//	seccomp                      lock thread, PR_SET_NO_NEW_PRIVS,        {"addfd":…,"addfd_send":…,
//	                             load ALLOW filter with NEW_LISTENER,      "sync_wake_up":…}, or
//	                             ADDFD, ADDFD|SEND, SET_FLAGS ioctls       {"step":…,"errno":…,"detail":…}
//	userns                       nothing; it runs in the new namespace     {"uid":…,"gid":…}
//
// The child always exits 0 after printing its report; any other exit, no
// report, or a report naming a failed step is an error in the parent. Each
// child runs under the caller's context and at most 5 seconds, and is
// killed when either expires. If the variable is already set in a process
// that calls a probe, its main did not call RunProbeChild, and the probe
// fails instead of re-executing itself again.
package kernel
