package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// expectEnv is set by CI runs that declare the kernel they run on; a kernel
// feature test that would skip fails instead.
const expectEnv = "AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI"

// runTestHelper runs the helper process h for a test and returns the exit
// code. Helpers print a JSON report on stdout.
func runTestHelper(h string) int {
	switch h {
	case "hang":
		// A probe child that never answers.
		time.Sleep(time.Minute)
		return 0
	case "listener-errnos":
		json.NewEncoder(os.Stdout).Encode(listenerErrnos())
		return 0
	case "userns-limited":
		// Runs as root of its own user namespace, where
		// user.max_user_namespaces belongs to this namespace and
		// CAP_SYS_RESOURCE over it lets us set it.
		var rep helperUserNSReport
		if err := os.WriteFile(sysctlMaxUserNS, []byte("0\n"), 0); err != nil {
			rep.Err = "write " + sysctlMaxUserNS + ": " + err.Error()
		} else {
			u, err := ProbeUserNS(context.Background())
			rep.UserNS = u
			if err != nil {
				rep.Err = err.Error()
			}
		}
		json.NewEncoder(os.Stdout).Encode(rep)
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown %s=%q\n", helperEnv, h)
	return 2
}

// listenerErrnos loads a listener in this (helper) process and returns the
// errno of each ioctl TestListenerErrnos checks, by name; 0 is success.
func listenerErrnos() map[string]uint {
	listener, step, err := loadListener()
	if err != nil {
		return map[string]uint{step: uint(err.(syscall.Errno))}
	}
	ioctl := func(req, arg uintptr) uint {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), req, arg)
		return uint(errno)
	}
	addfd := func(a seccompNotifAddfd) uint {
		return ioctl(unix.SECCOMP_IOCTL_NOTIF_ADDFD, uintptr(unsafe.Pointer(&a)))
	}
	flags := uint64(unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	src := uint32(listener)
	return map[string]uint{
		"addfd":                  addfd(seccompNotifAddfd{Srcfd: src}),
		"addfd send":             addfd(seccompNotifAddfd{Srcfd: src, Flags: unix.SECCOMP_ADDFD_FLAG_SEND}),
		"addfd unknown flag":     addfd(seccompNotifAddfd{Srcfd: src, Flags: 1 << 2}),
		"addfd closed srcfd":     addfd(seccompNotifAddfd{Srcfd: 1 << 30}),
		"set_flags by value":     ioctl(unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP),
		"set_flags by pointer":   ioctl(unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, uintptr(unsafe.Pointer(&flags))),
		"set_flags unknown flag": ioctl(unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, 1<<1),
		// The next ioctl number, as unknown to this kernel as SET_FLAGS
		// is to kernels before 6.6.
		"unknown ioctl": ioctl(unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS+1, 0),
	}
}

type helperUserNSReport struct {
	UserNS UserNS
	Err    string
}

func runningVersion(t *testing.T) (string, version) {
	t.Helper()
	rel, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	v, err := parseRelease(rel)
	if err != nil {
		t.Fatal(err)
	}
	return rel, v
}

func TestRelease(t *testing.T) {
	got, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	if got != strings.TrimSpace(string(want)) {
		t.Errorf("Release() = %q, want %q", got, want)
	}
}

// TestProbeSeccomp checks each feature against the release that introduced
// it upstream: a kernel that new must have it, so a probe that reports false
// there fails. An older kernel may still have a feature (distributions
// backport), so true is accepted on any release.
func TestProbeSeccomp(t *testing.T) {
	rel, v := runningVersion(t)
	statusBefore := seccompStatus(t)

	s, err := ProbeSeccomp(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s: %+v", rel, s)

	tests := []struct {
		name string
		got  bool
		min  version
	}{
		{"Filter", s.Filter, version{3, 17}},
		{"UserNotif", s.UserNotif, version{5, 0}},
		{"NewListener", s.NewListener, version{5, 0}},
		{"TsyncESRCH", s.TsyncESRCH, version{5, 7}},
		{"AddFD", s.AddFD, version{5, 9}},
		{"AddFDSend", s.AddFDSend, version{5, 14}},
		{"WaitKillableRecv", s.WaitKillableRecv, version{5, 19}},
		{"SyncWakeUp", s.SyncWakeUp, version{6, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch {
			case tt.got:
			case v.atLeast(tt.min):
				t.Errorf("%s not detected on kernel %s (upstream since %v)", tt.name, rel, tt.min)
			case os.Getenv(expectEnv) != "":
				t.Errorf("%s not detected on kernel %s (upstream since %v), and %s is set", tt.name, rel, tt.min, expectEnv)
			default:
				t.Skipf("kernel %s predates %s (%v)", rel, tt.name, tt.min)
			}
		})
	}

	// The probe must not have touched this process.
	if after := seccompStatus(t); after != statusBefore {
		t.Errorf("ProbeSeccomp changed this process: /proc/self/status went from %q to %q", statusBefore, after)
	}
}

// seccompStatus returns the NoNewPrivs, Seccomp and Seccomp_filters lines of
// /proc/self/status (the main thread) and /proc/thread-self/status (the
// thread running the caller just now).
func seccompStatus(t *testing.T) string {
	t.Helper()
	var lines []string
	for _, path := range []string{"/proc/self/status", "/proc/thread-self/status"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "NoNewPrivs:") || strings.HasPrefix(l, "Seccomp") {
				lines = append(lines, l)
			}
		}
	}
	return strings.Join(lines, "; ")
}

// TestSeccompFlagCombinations checks the raw flag probe against the rules in
// seccomp_set_mode_filter, on the features the running kernel has.
func TestSeccompFlagCombinations(t *testing.T) {
	rel, v := runningVersion(t)
	if !v.atLeast(version{5, 19}) {
		if os.Getenv(expectEnv) != "" {
			t.Fatalf("kernel %s predates WAIT_KILLABLE_RECV (5.19), and %s is set", rel, expectEnv)
		}
		t.Skipf("kernel %s predates WAIT_KILLABLE_RECV (5.19)", rel)
	}
	const (
		tsync    = unix.SECCOMP_FILTER_FLAG_TSYNC
		esrch    = unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH
		listener = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
		killable = unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
	)
	tests := []struct {
		name  string
		flags uintptr
		want  bool
	}{
		{"none", 0, true},
		{"TSYNC", tsync, true},
		{"TSYNC_ESRCH alone", esrch, true},
		{"NEW_LISTENER", listener, true},
		{"TSYNC|NEW_LISTENER", tsync | listener, false},
		{"TSYNC|TSYNC_ESRCH|NEW_LISTENER", tsync | esrch | listener, true},
		{"WAIT_KILLABLE_RECV alone", killable, false},
		{"NEW_LISTENER|WAIT_KILLABLE_RECV", listener | killable, true},
		{"all four", tsync | esrch | listener | killable, true},
		{"unknown bit 31", 1 << 31, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := seccompFlagsKnown(tt.flags)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("seccompFlagsKnown(%#x) = %v, want %v", tt.flags, got, tt.want)
			}
		})
	}
}

func TestSeccompActionAvail(t *testing.T) {
	tests := []struct {
		name   string
		action uint32
		want   bool
	}{
		{"ALLOW", unix.SECCOMP_RET_ALLOW, true},
		{"KILL_PROCESS", unix.SECCOMP_RET_KILL_PROCESS, true},
		{"unknown", 0x7ffe0000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := seccompActionAvail(tt.action)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("seccompActionAvail(%#x) = %v, want %v", tt.action, got, tt.want)
			}
		})
	}
}

// TestSeccompABI checks the struct and ioctl numbers the probe child uses
// against include/uapi/linux/seccomp.h and asm-generic/ioctl.h.
func TestSeccompABI(t *testing.T) {
	if got := unsafe.Sizeof(seccompNotifAddfd{}); got != 24 {
		t.Errorf("sizeof(seccomp_notif_addfd) = %d, want 24 (SECCOMP_NOTIFY_ADDFD_SIZE_VER0)", got)
	}
	// _IOW(type, nr, size): write direction, size in bits 16 up, type in
	// bits 8-15, nr in bits 0-7. Most architectures put _IOC_WRITE=1 at
	// bit 30; mips, powerpc and sparc put _IOC_WRITE=4 at bit 29.
	iow := func(nr, size uint) uint {
		switch runtime.GOARCH {
		case "mips", "mipsle", "mips64", "mips64le", "ppc", "ppc64", "ppc64le", "sparc64":
			return 4<<29 | size<<16 | '!'<<8 | nr
		}
		return 1<<30 | size<<16 | '!'<<8 | nr
	}
	if want := iow(3, 24); unix.SECCOMP_IOCTL_NOTIF_ADDFD != want {
		t.Errorf("SECCOMP_IOCTL_NOTIF_ADDFD = %#x, want SECCOMP_IOW(3, struct seccomp_notif_addfd) = %#x", unix.SECCOMP_IOCTL_NOTIF_ADDFD, want)
	}
	if want := iow(4, 8); unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS != want {
		t.Errorf("SECCOMP_IOCTL_NOTIF_SET_FLAGS = %#x, want SECCOMP_IOW(4, __u64) = %#x", unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, want)
	}
}

// TestListenerErrnos pins down the kernel behaviour the seccomp probe
// child relies on, including the answers an older kernel gives, by making
// this kernel give them: an unknown ADDFD flag is EINVAL before the
// notification lookup (as SEND is on 5.9 to 5.13), an unknown ioctl number is
// EINVAL (as ADDFD is before 5.9 and SET_FLAGS before 6.6), srcfd must be
// open, and SET_FLAGS takes its flags by value.
func TestListenerErrnos(t *testing.T) {
	rel, v := runningVersion(t)
	if !v.atLeast(version{6, 6}) {
		if os.Getenv(expectEnv) != "" {
			t.Fatalf("kernel %s predates SECCOMP_IOCTL_NOTIF_SET_FLAGS (6.6), and %s is set", rel, expectEnv)
		}
		t.Skipf("kernel %s predates SECCOMP_IOCTL_NOTIF_SET_FLAGS (6.6)", rel)
	}
	c, err := startProbeChild(context.Background(), helperEnv+"=listener-errnos", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]uint
	if err := c.wait(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string]syscall.Errno{
		"addfd":                  unix.ENOENT,
		"addfd send":             unix.ENOENT,
		"addfd unknown flag":     unix.EINVAL,
		"addfd closed srcfd":     unix.EBADF,
		"set_flags by value":     0,
		"set_flags by pointer":   unix.EINVAL,
		"set_flags unknown flag": unix.EINVAL,
		"unknown ioctl":          unix.EINVAL,
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: no answer; child reported %v", name, got)
			continue
		}
		if syscall.Errno(g) != w {
			t.Errorf("%s: errno %s, want %s", name, unix.ErrnoName(syscall.Errno(g)), unix.ErrnoName(w))
		}
	}
}

// TestProbeChildTimeout checks that a probe child that never answers is
// killed and reported within seconds, not waited for.
func TestProbeChildTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	c, err := startProbeChild(ctx, helperEnv+"=hang", nil)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	err = c.wait(&v)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait() = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("hung child took %v to be reported", d)
	}
}

func TestProbeCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ProbeSeccomp(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ProbeSeccomp(canceled) = %v, want an error wrapping context.Canceled", err)
	}
	if _, err := ProbeUserNS(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ProbeUserNS(canceled) = %v, want an error wrapping context.Canceled", err)
	}
}

// TestProbeWithoutRunProbeChild checks that a process that is itself a probe
// child, because its main forgot RunProbeChild, refuses to probe again.
func TestProbeWithoutRunProbeChild(t *testing.T) {
	t.Setenv(probeEnv, probeSeccomp)
	_, err := ProbeSeccomp(context.Background())
	if err == nil || !strings.Contains(err.Error(), "RunProbeChild") {
		t.Errorf("ProbeSeccomp = %v, want an error naming RunProbeChild", err)
	}
}

func TestCurrentPrivileges(t *testing.T) {
	p, err := CurrentPrivileges()
	if err != nil {
		t.Fatal(err)
	}
	if want := os.Geteuid() == 0; p.Root != want {
		t.Errorf("Root = %v, want %v (euid %d)", p.Root, want, os.Geteuid())
	}
	// capget(2) is the independent answer.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		t.Fatal(err)
	}
	if want := uint64(data[1].Effective)<<32 | uint64(data[0].Effective); p.CapEff != want {
		t.Errorf("CapEff = %#x, want %#x from capget", p.CapEff, want)
	}
	t.Logf("%+v", p)
}

// TestProbeUserNS checks the probe against what the sysctls and this
// process's seccomp state say: where nothing is known to block user
// namespaces, the probe must find them available.
func TestProbeUserNS(t *testing.T) {
	u, err := ProbeUserNS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", u)
	if u.Available {
		if u.Reason != "" {
			t.Errorf("Reason = %q with Available", u.Reason)
		}
		return
	}
	if u.Reason == "" {
		t.Error("not Available, and no Reason")
	}
	max, clone, aa := readSysctl(sysctlMaxUserNS), readSysctl(sysctlUnprivClone), readSysctl(sysctlAppArmorUserNS)
	blocked := max == "0" || clone == "0" || aa == "1" || !strings.Contains(seccompStatus(t), "Seccomp:\t0")
	if !blocked || os.Getenv(expectEnv) != "" {
		t.Errorf("user namespaces not available (%s), but max_user_namespaces=%q unprivileged_userns_clone=%q apparmor_restrict_unprivileged_userns=%q and no seccomp filter", u.Reason, max, clone, aa)
		return
	}
	t.Skipf("user namespaces are blocked here: %s", u.Reason)
}

// TestProbeUserNSReason runs ProbeUserNS in a user namespace whose
// user.max_user_namespaces is 0, and checks that it reports that sysctl.
func TestProbeUserNSReason(t *testing.T) {
	if u, err := ProbeUserNS(context.Background()); err != nil || !u.Available {
		if os.Getenv(expectEnv) != "" {
			t.Fatalf("user namespaces unavailable (%+v, %v), and %s is set", u, err, expectEnv)
		}
		t.Skipf("needs a user namespace to set user.max_user_namespaces in: %+v, %v", u, err)
	}
	uid, gid := os.Geteuid(), os.Getegid()
	// Root of the new namespace, so the helper may write its sysctl.
	attr := &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
	}
	c, err := startProbeChild(context.Background(), helperEnv+"=userns-limited", attr)
	if err != nil {
		t.Fatal(err)
	}
	var rep helperUserNSReport
	if err := c.wait(&rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	if rep.Err != "" {
		t.Fatal(rep.Err)
	}
	if rep.UserNS.Available {
		t.Fatal("Available with user.max_user_namespaces=0")
	}
	if !strings.Contains(rep.UserNS.Reason, "user.max_user_namespaces is 0") {
		t.Errorf("Reason = %q, want it to name user.max_user_namespaces", rep.UserNS.Reason)
	}
}

func TestUserNSReason(t *testing.T) {
	startErr := func(errno syscall.Errno) error {
		return &os.PathError{Op: "fork/exec", Path: "/proc/self/exe", Err: errno}
	}
	tests := []struct {
		name  string
		facts usernsFacts
		want  string // substring of the reason
	}{
		{
			name:  "max_user_namespaces 0",
			facts: usernsFacts{err: startErr(unix.ENOSPC), maxUserNS: "0"},
			want:  "user.max_user_namespaces is 0",
		},
		{
			name:  "limit reached",
			facts: usernsFacts{err: startErr(unix.ENOSPC), maxUserNS: "15"},
			want:  "reached user.max_user_namespaces (15)",
		},
		{
			name:  "depth, old kernel",
			facts: usernsFacts{err: startErr(unix.EUSERS), maxUserNS: "15"},
			want:  "nested 32 deep",
		},
		{
			name:  "no CONFIG_USER_NS",
			facts: usernsFacts{err: startErr(unix.EINVAL), noUserNS: true},
			want:  "CONFIG_USER_NS",
		},
		{
			name:  "Debian sysctl",
			facts: usernsFacts{err: startErr(unix.EPERM), maxUserNS: "100", unprivClone: "0"},
			want:  "kernel.unprivileged_userns_clone is 0",
		},
		{
			name:  "Debian sysctl does not apply to CAP_SYS_ADMIN",
			facts: usernsFacts{err: startErr(unix.EPERM), maxUserNS: "100", unprivClone: "0", sysAdmin: true},
			want:  "refused with operation not permitted (EPERM); a seccomp filter",
		},
		{
			name:  "AppArmor EACCES",
			facts: usernsFacts{err: startErr(unix.EACCES), maxUserNS: "100", unprivClone: "1", apparmorRestrict: "1"},
			want:  "AppArmor",
		},
		{
			name:  "AppArmor EPERM",
			facts: usernsFacts{err: startErr(unix.EPERM), maxUserNS: "100", apparmorRestrict: "1"},
			want:  "kernel.apparmor_restrict_unprivileged_userns is 1",
		},
		{
			name:  "unknown EPERM",
			facts: usernsFacts{err: startErr(unix.EPERM), maxUserNS: "100", apparmorRestrict: "0"},
			want:  "container runtime's default profile",
		},
		{
			name:  "other errno",
			facts: usernsFacts{err: startErr(unix.ENOMEM), maxUserNS: "100"},
			want:  "failed with cannot allocate memory (ENOMEM)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := usernsReason(tt.facts)
			if !strings.Contains(got, tt.want) {
				t.Errorf("usernsReason = %q, want it to contain %q", got, tt.want)
			}
			if strings.Contains(got, "\n") {
				t.Errorf("usernsReason = %q, want one line", got)
			}
		})
	}
}
