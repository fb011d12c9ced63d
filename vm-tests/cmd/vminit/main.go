//go:build linux && amd64

// Command vminit is /init of the VM test initramfs: PID 1 of a guest booted
// by vm-tests/run.sh. It mounts the kernel file systems, reports the kernel
// and its Landlock ABI, runs the test binaries listed in its configuration
// file as root and again as an unprivileged user, writes a summary to the
// second serial port and ends the VM with a status qemu returns as its exit
// code.
//
// Kernel command line (read from /proc/cmdline; dotted names are not
// passed to init, so they cannot collide with the kernel's own):
//
//	al.row=NAME          the matrix row, echoed in the summary
//	al.expect_abi=N      the Landlock ABI the kernel must report (0: none);
//	                     exported to the tests as
//	                     AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI
//	al.expect_errno=E    with al.expect_abi=0: ENOSYS (not built in) or
//	                     EOPNOTSUPP (disabled at boot)
//	al.tests=PATH        the configuration file (default /vm-tests/tests.conf)
//	al.users=root,4242   whom to run the tests as (default both)
//	al.timeout=SECONDS   hard limit per test binary and user (default 1200)
//
// The configuration file has one test binary per line, "#" comments allowed:
//
//	NAME DIR BINARY [ARG...]
//
// BINARY runs in DIR (its package directory, for testdata) with ARGs, once
// per user, with PATH, LANG=C, HOME and TMPDIR (a fresh directory under /home the user
// owns), AGENT_LAUNCHER_TEST_BIN_DIR (/vm-tests/bin: the prebuilt
// agent-launcher and testagent), AGENT_LAUNCHER_VM_GUEST=1 (for the parts
// of a test that need a tool the guest lacks, such as go) and, when
// al.expect_abi is given,
// AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI. Its output goes to the console
// (/dev/console, the first serial port) between "=== VMTEST BEGIN" and
// "=== VMTEST END" lines.
//
// The summary on /dev/ttyS1 is line-oriented, space-separated key=value
// pairs, first word the record type:
//
//	kernel row=abi-6 release=6.12.117+deb12-cloud-amd64 abi=6 errno=- lsm=landlock,... expect=6 ok=1
//	test row=abi-6 name=landlock user=root exit=0 pass=40 fail=0 skip=0 seconds=3.21
//	done row=abi-6 code=0 seconds=63.10
//
// Exit: the guest code is 0 when every binary exited 0 and the ABI matched,
// 1 when a test failed or a test skipped on a kernel whose expected ABI is
// at least landlock.MinABI (where run works, so nothing may skip), 2 when the ABI differs from al.expect_abi or the VM
// could not be set up. It leaves through qemu's isa-debug-exit device
// (-device isa-debug-exit,iobase=0xf4,iosize=4), which makes qemu exit with
// (code<<1)|1; without that device it powers the VM off (qemu exits 0, which
// the host must read as a failure).
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

const (
	unprivUID   = 4242
	binDir      = "/vm-tests/bin"
	debugExit   = 0xf4
	defaultConf = "/vm-tests/tests.conf"
	sandboxPATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
)

// Guest codes (qemu exit status (code<<1)|1).
const (
	codeOK      = 0
	codeFailed  = 1
	codeBroken  = 2
	codeNoSetup = 3
)

func main() {
	start := time.Now()
	console := os.Stdout
	code := run(console, start)
	shutdown(code)
}

// params is the al.* part of the kernel command line.
type params map[string]string

func (p params) get(k, def string) string {
	if v, ok := p[k]; ok {
		return v
	}
	return def
}

func readParams() (params, string, error) {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return nil, "", err
	}
	p := params{}
	for _, f := range strings.Fields(string(b)) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.HasPrefix(k, "al.") {
			p[strings.TrimPrefix(k, "al.")] = v
		}
	}
	return p, strings.TrimSpace(string(b)), nil
}

func run(console *os.File, start time.Time) int {
	logf := func(format string, a ...any) { fmt.Fprintf(console, "vminit: "+format+"\n", a...) }
	if err := mountAll(); err != nil {
		logf("%v", err)
		return codeNoSetup
	}
	rawTTY(console)
	summary, err := os.OpenFile("/dev/ttyS1", os.O_WRONLY|unix.O_NOCTTY, 0)
	if err != nil {
		logf("no second serial port for the summary (%v); writing it to the console", err)
		summary = console
	} else {
		rawTTY(summary)
		defer drain(summary)
	}
	defer drain(console)
	sumf := func(format string, a ...any) {
		fmt.Fprintf(summary, format+"\n", a...)
		fmt.Fprintf(console, "SUMMARY "+format+"\n", a...)
	}

	p, cmdline, err := readParams()
	if err != nil {
		logf("%v", err)
		return codeNoSetup
	}
	if err := loopbackUp(); err != nil {
		logf("bringing lo up: %v", err)
	}
	if err := addUser(); err != nil {
		logf("adding the unprivileged user: %v", err)
	}
	row := p.get("row", "-")
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	release := unix.ByteSliceToString(uts.Release[:])
	lsm, _ := os.ReadFile("/sys/kernel/security/lsm")
	abi, errno := landlockABI()
	logf("kernel %s %s", release, unix.ByteSliceToString(uts.Version[:]))
	logf("cmdline %s", cmdline)
	logf("lsm %s", lsm)
	logf("landlock abi=%d errno=%s", abi, errno)

	ok := true
	expect, hasExpect := p["expect_abi"]
	expectN, err := strconv.Atoi(expect)
	if hasExpect && err != nil {
		logf("al.expect_abi=%q is not a number", expect)
		return codeNoSetup
	}
	if hasExpect {
		ok = expect == strconv.Itoa(abi)
		if e, has := p["expect_errno"]; has && abi == 0 && e != errno {
			ok = false
		}
	}
	sumf("kernel row=%s release=%s abi=%d errno=%s lsm=%s expect=%s ok=%d",
		row, release, abi, errno, orDash(strings.TrimSpace(string(lsm))), p.get("expect_abi", "-"), b2i(ok))
	code := codeOK
	if !ok {
		logf("the kernel reports Landlock ABI %d (%s), the row expects %s %s", abi, errno, expect, p.get("expect_errno", ""))
		code = codeBroken
	}

	tests, err := readConf(p.get("tests", defaultConf))
	if err != nil {
		logf("%v", err)
		sumf("done row=%s code=%d seconds=%.2f", row, codeNoSetup, time.Since(start).Seconds())
		return codeNoSetup
	}
	timeout := 1200 * time.Second
	if s, err := strconv.Atoi(p.get("timeout", "")); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	for _, u := range strings.Split(p.get("users", "root,4242"), ",") {
		uid := 0
		if u != "root" {
			if uid, err = strconv.Atoi(u); err != nil {
				logf("al.users: %q is neither root nor a uid", u)
				return codeNoSetup
			}
		}
		for _, t := range tests {
			r := t.run(console, uid, expect, hasExpect, timeout)
			sumf("test row=%s name=%s user=%s exit=%d pass=%d fail=%d skip=%d seconds=%.2f",
				row, t.name, u, r.exit, r.pass, r.fail, r.skip, r.seconds)
			if r.exit != 0 && code == codeOK {
				code = codeFailed
			}
			// A skip is a failure where the kernel has what the suites
			// need: only below the ladder's minimum do tests of a
			// confined session skip, because run refuses there.
			if r.skip > 0 && hasExpect && expectN >= landlock.MinABI {
				logf("%s as %s: %d skipped tests on a kernel with Landlock ABI %s, where nothing may skip", t.name, u, r.skip, expect)
				if code == codeOK {
					code = codeFailed
				}
			}
		}
	}
	sumf("done row=%s code=%d seconds=%.2f", row, code, time.Since(start).Seconds())
	return code
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mountAll mounts what the tests need; the initramfs root is the writable
// root file system.
func mountAll() error {
	const nosuid, noexec = unix.MS_NOSUID, unix.MS_NOEXEC
	for _, m := range []struct {
		fstype, target, data string
		flags                uintptr
		perm                 os.FileMode
	}{
		{"proc", "/proc", "", nosuid | noexec, 0o555},
		{"sysfs", "/sys", "", nosuid | noexec, 0o555},
		{"devtmpfs", "/dev", "mode=0755", nosuid, 0o755},
		{"securityfs", "/sys/kernel/security", "", nosuid | noexec, 0o755},
		{"devpts", "/dev/pts", "ptmxmode=0666,mode=0620", nosuid | noexec, 0o755},
		{"tmpfs", "/dev/shm", "mode=1777", nosuid | noexec, 0o1777},
		{"tmpfs", "/tmp", "mode=1777", nosuid, 0o1777},
		{"tmpfs", "/run", "mode=0755", nosuid, 0o755},
		// The no-view tests end a session through its own cgroup.
		{"cgroup2", "/sys/fs/cgroup", "", nosuid | noexec | unix.MS_NODEV, 0o555},
	} {
		if err := os.MkdirAll(m.target, m.perm); err != nil {
			return err
		}
		err := unix.Mount(m.fstype, m.target, m.fstype, m.flags, m.data)
		if err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	return nil
}

// rawTTY turns off output post-processing (LF to CRLF) on a serial port,
// so that the host reads the lines as written. Errors are ignored: a
// console that is not a tty needs no change.
func rawTTY(f *os.File) {
	t, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		return
	}
	t.Oflag &^= unix.OPOST
	_ = unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, t)
}

// drain waits until the port has sent everything written to it (tcdrain),
// so that nothing is lost when the VM ends right after.
func drain(f *os.File) {
	_ = unix.IoctlSetInt(int(f.Fd()), unix.TCSBRK, 1)
}

// landlockABI asks landlock_create_ruleset(NULL, 0,
// LANDLOCK_CREATE_RULESET_VERSION) for the ABI; 0 with the errno name when
// there is none (ENOSYS: not built in; EOPNOTSUPP: disabled by lsm=).
func landlockABI() (int, string) {
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case e == unix.EOPNOTSUPP:
		// x/sys names 95 ENOTSUP, its other name; the rows say EOPNOTSUPP.
		return 0, "EOPNOTSUPP"
	case e != 0:
		return 0, unix.ErrnoName(e)
	}
	return int(r), "-"
}

// loopbackUp brings up lo, which no one else configures in the guest.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// delegatedCgroup makes /sys/fs/cgroup/al-test-UID owned by uid, with the
// files a delegation hands over (cgroup-v2.rst, "Delegation"), and returns
// an fd of it to start the user's tests in.
func delegatedCgroup(uid int) (int, error) {
	dir := fmt.Sprintf("/sys/fs/cgroup/al-test-%d", uid)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return -1, err
	}
	for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
		if err := os.Chown(filepath.Join(dir, f), uid, uid); err != nil {
			return -1, err
		}
	}
	return unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// addUser gives uid 4242 a name (al-test, as scripts/test-user does on
// hosts), for programs that look their user up.
func addUser() error {
	if err := os.MkdirAll("/etc", 0o755); err != nil {
		return err
	}
	for _, f := range []struct{ path, line string }{
		{"/etc/passwd", fmt.Sprintf("al-test:x:%d:%d::/nonexistent:/usr/sbin/nologin\n", unprivUID, unprivUID)},
		{"/etc/group", fmt.Sprintf("al-test:x:%d:\n", unprivUID)},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if strings.Contains(string(b), "\nal-test:") || strings.HasPrefix(string(b), "al-test:") {
			continue
		}
		fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		_, err = fh.WriteString(f.line)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// test is one line of the configuration file.
type test struct {
	name, dir string
	argv      []string
}

func readConf(path string) ([]test, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var tests []test
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		w := strings.Fields(line)
		if len(w) < 3 {
			return nil, fmt.Errorf("%s:%d: want NAME DIR BINARY [ARG...]", path, n)
		}
		tests = append(tests, test{name: w[0], dir: w[1], argv: w[2:]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(tests) == 0 {
		return nil, fmt.Errorf("%s: no test binaries", path)
	}
	return tests, nil
}

// outcome is one test binary's run as one user.
type outcome struct {
	exit             int // -1: did not start or was killed
	pass, fail, skip int
	seconds          float64
}

// verdict matches go test -v result lines, of tests and subtests alike.
var verdict = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): `)

// run runs t as uid with a home of its own, copying its output to the
// console and counting the verdicts.
func (t test) run(console io.Writer, uid int, expect string, hasExpect bool, timeout time.Duration) (out outcome) {
	start := time.Now()
	out.exit = -1
	user := "root"
	if uid != 0 {
		user = strconv.Itoa(uid)
	}
	fmt.Fprintf(console, "=== VMTEST BEGIN %s %s\n", t.name, user)
	defer func() {
		out.seconds = time.Since(start).Seconds()
		fmt.Fprintf(console, "=== VMTEST END %s %s exit=%d\n", t.name, user, out.exit)
	}()
	// 0755, as a home on a host: tests that drop to al-test themselves
	// (as root) run it in directories below this one.
	// Under /home, not /tmp: a session's private view replaces /tmp, and
	// the tests' worlds live in their temporary directory.
	err := os.MkdirAll("/home", 0o755)
	var home string
	if err == nil {
		home, err = os.MkdirTemp("/home", "vmtest-"+t.name+"-"+user+"-")
	}
	if err == nil {
		err = os.Chmod(home, 0o755)
	}
	if err == nil {
		err = os.Chown(home, uid, uid)
	}
	if err != nil {
		fmt.Fprintf(console, "vminit: %v\n", err)
		return out
	}
	defer os.RemoveAll(home)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.argv[0], t.argv[1:]...)
	cmd.Dir = t.dir
	cmd.Env = []string{
		"PATH=" + sandboxPATH, "LANG=C", "HOME=" + home, "TMPDIR=" + home,
		"AGENT_LAUNCHER_TEST_BIN_DIR=" + binDir, "AGENT_LAUNCHER_VM_GUEST=1",
	}
	if hasExpect {
		cmd.Env = append(cmd.Env, "AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI="+expect)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
		// A cgroup delegated to the user, as a systemd user session has
		// (scripts/test-unprivileged makes the same on hosts).
		fd, err := delegatedCgroup(uid)
		if err != nil {
			fmt.Fprintf(console, "vminit: a cgroup for uid %d: %v\n", uid, err)
			out.exit = codeNoSetup
			return out
		}
		defer unix.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	// The whole process group goes on timeout: test binaries start
	// launchers that start agents.
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(console, line)
			if m := verdict.FindStringSubmatch(line); m != nil {
				switch m[1] {
				case "PASS":
					out.pass++
				case "FAIL":
					out.fail++
				case "SKIP":
					out.skip++
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err = cmd.Run()
	pw.Close()
	<-done
	reap()
	var ee *exec.ExitError
	switch {
	case err == nil:
		out.exit = 0
	case errors.As(err, &ee) && ee.Exited():
		out.exit = ee.ExitCode()
	default:
		fmt.Fprintf(console, "vminit: %s as %s: %v\n", t.name, user, err)
	}
	if ctx.Err() != nil {
		fmt.Fprintf(console, "vminit: %s as %s: killed after %v\n", t.name, user, timeout)
		out.exit = -1
	}
	return out
}

// reap collects the orphans the finished test left to PID 1. It runs only
// between tests, when vminit has no child of its own that exec.Cmd waits for.
func reap() {
	for {
		pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// outl writes val to an I/O port (outl_amd64.s); the calling thread needs
// iopl(3).
func outl(port uint16, val uint32)

// shutdown ends the VM with code: through isa-debug-exit when qemu has one,
// else by powering off. PID 1 must not return.
func shutdown(code int) {
	unix.Sync()
	// iopl is per thread: the OUT must run on the thread that raised it.
	runtime.LockOSThread()
	if err := unix.Iopl(3); err == nil {
		outl(debugExit, uint32(code))
	}
	// No debug-exit device (the write went nowhere) or no iopl.
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	for {
		time.Sleep(time.Hour)
	}
}
