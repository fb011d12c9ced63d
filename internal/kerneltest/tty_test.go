package kerneltest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns a new pseudo-terminal's master and slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// TestNoTerminalInjection: the agent runs in its own session, so it has no
// controlling terminal and TIOCSTI on the terminal it inherited fails
// (dev.tty.legacy_tiocsti=1 here). The control: the same agent, run bare
// with that terminal as its controlling terminal, injects. Root holds
// CAP_SYS_ADMIN, which TIOCSTI honours whatever the session, so both run
// as the unprivileged test user; the filter of a later release blocks it
// for root agents too (DESIGN.md section 5).
func TestNoTerminalInjection(t *testing.T) {
	needKernel(t)
	var cred *syscall.Credential
	dir, err := os.MkdirTemp("", "kerneltest-tty")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	ws := filepath.Join(home, "proj")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("al-test")
		if err != nil {
			t.Fatalf("running as root, this test needs the user al-test (scripts/test-user creates it): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		for _, p := range []string{home, ws} {
			os.Chown(p, uid, gid)
		}
	}
	config := filepath.Join(dir, "config.toml")
	os.WriteFile(config, []byte(fmt.Sprintf("[file_policy]\npresets = [\"system\"]\nread_paths = [%q]\nwrite_paths = [\"<workspace>/**\"]\n", binDir+"/**")), 0o644)

	run := func(argv ...string) result {
		t.Helper()
		_, slave := openPTY(t)
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		cmd.Dir = ws
		var out, errb strings.Builder
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &errb
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Credential: cred}
		err := cmd.Run()
		r := result{stdout: out.String(), stderr: errb.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return r
	}
	confined := run(launcher, "run", "--config", config, "--workspace", ws, "--", agent, "tiocsti", "0", "x")
	if b, err := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti"); err == nil && strings.TrimSpace(string(b)) == "0" {
		// This kernel has TIOCSTI off for everyone without CAP_SYS_ADMIN
		// (Debian's 6.12 and 7.x cloud kernels): nothing can inject, the
		// control included, whatever the session.
		wantErr(t, "control: TIOCSTI is off on this kernel", run(agent, "tiocsti", "0", "x"), "EIO")
		wantErr(t, "TIOCSTI from the confined agent", confined, "EIO", "EPERM")
	} else {
		wantOK(t, "control: an agent whose controlling terminal it is injects", run(agent, "tiocsti", "0", "x"))
		wantErr(t, "TIOCSTI from the confined agent", confined, "EPERM")
	}
	// The agent's session is a new one: its own, or, with a private view,
	// that of the init stage, its parent and the session's PID 1; either
	// way not the operator's, and without a controlling terminal.
	r := run(launcher, "run", "--config", config, "--workspace", ws, "--", agent, "pid")
	f := strings.Fields(r.line())
	if r.code != 0 || len(f) < 5 {
		t.Fatalf("pid inside: %s", r)
	}
	pid, ppid, sid := strings.TrimPrefix(f[1], "pid="), strings.TrimPrefix(f[2], "ppid="), strings.TrimPrefix(f[3], "sid=")
	if sid != pid && !(ppid == "1" && sid == "1") {
		t.Errorf("the agent is in neither its own session nor the init stage's: %s", r)
	}
	wantErr(t, "open /dev/tty: no controlling terminal", run(launcher, "run", "--config", config, "--workspace", ws, "--", agent, "read", "/dev/tty"), "ENXIO")
}
