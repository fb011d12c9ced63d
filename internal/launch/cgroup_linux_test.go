package launch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestCgroupDir: the session's cgroup is made under the supervisor's own
// cgroup v2 directory, found from /proc/self/cgroup and the cgroup2 mounts
// of /proc/self/mountinfo (hybrid layout, pure v2, a cgroup namespace's
// mount of a subtree, a later mount over an earlier one, none).
func TestCgroupDir(t *testing.T) {
	const hybrid = "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
		"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	const pure = "25 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	tests := []struct {
		name, cgroup, mountinfo string
		want, wantErr           string
	}{
		{name: "hybrid, root cgroup", cgroup: "9:name=systemd:/\n1:cpu:/\n0::/\n", mountinfo: hybrid, want: "/sys/fs/cgroup/unified"},
		{name: "hybrid, nested", cgroup: "1:cpu:/x\n0::/a/b\n", mountinfo: hybrid, want: "/sys/fs/cgroup/unified/a/b"},
		{name: "pure v2, optional fields", cgroup: "0::/user.slice/user-1000.slice/session-2.scope\n", mountinfo: pure, want: "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope"},
		{name: "mount of a subtree", cgroup: "0::/lxc/c1/app\n", mountinfo: "50 1 0:40 /lxc/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", want: "/sys/fs/cgroup/app"},
		{name: "subtree that is only a name prefix", cgroup: "0::/lxc/c10\n", mountinfo: "50 1 0:40 /lxc/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", wantErr: "no cgroup2 mount"},
		{name: "later mount wins", cgroup: "0::/s\n", mountinfo: pure + "60 1 0:23 / /mnt/cg\\040two rw - cgroup2 cgroup2 rw\n", want: "/mnt/cg two/s"},
		{name: "no cgroup2 mount", cgroup: "0::/\n", mountinfo: "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", wantErr: "no cgroup2 mount"},
		{name: "v1 only membership", cgroup: "1:cpu:/\n", mountinfo: hybrid, wantErr: "no cgroup v2 membership"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := cgroupDir(tt.cgroup, tt.mountinfo)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("cgroupDir = %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("cgroupDir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestSessionCgroup makes, kills and removes a session cgroup in the test
// process's own cgroup, which must be writable: as root, or in a delegated
// cgroup (scripts/test-unprivileged makes one for al-test). A process
// started in it with clone3(CLONE_INTO_CGROUP) is there, and is gone after
// kill; remove also removes a cgroup made below it.
func TestSessionCgroup(t *testing.T) {
	cg, err := newSessionCgroup(cgroupPrefix + "unittest-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatalf("this test needs a cgroup v2 directory it may write (root, or a delegated cgroup as scripts/test-unprivileged makes): %v", err)
	}
	defer cg.remove()
	if err := os.Mkdir(filepath.Join(cg.path, "below"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", "60"}, &os.ProcAttr{Sys: sysProcAttrInto(t, filepath.Join(cg.path, "below"))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	b, _ := os.ReadFile(filepath.Join(cg.path, "below", "cgroup.procs"))
	if strings.TrimSpace(string(b)) != strconv.Itoa(p.Pid) {
		t.Errorf("the process is not in the cgroup below: cgroup.procs %q, pid %d", b, p.Pid)
	}
	if err := cg.kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	<-done
	if err := cg.remove(); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := os.Stat(cg.path); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", cg.path, err)
	}
}

// sysProcAttrInto starts a process in the cgroup dir; the fd is closed at
// the end of the test.
func sysProcAttrInto(t *testing.T, dir string) *syscall.SysProcAttr {
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
}

// TestSessionCgroupLeftover: an empty cgroup of the same name, left by a
// launcher that had the same PID and was killed before it could remove it,
// does not cost the session its cgroup; one that still holds a process
// (what an earlier session left running) is not touched, and the session
// goes without (it says so: Ending.NoCgroup).
func TestSessionCgroupLeftover(t *testing.T) {
	parent, err := ownCgroupDir()
	if err != nil {
		t.Fatalf("this test needs a cgroup v2 directory it may write: %v", err)
	}
	name := cgroupPrefix + "leftover-" + strconv.Itoa(os.Getpid())
	path := filepath.Join(parent, name)
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatalf("this test needs a cgroup v2 directory it may write: %v", err)
	}
	defer os.Remove(path)
	cg, err := newSessionCgroup(name)
	if err != nil {
		t.Fatalf("an empty leftover of the same name: %v", err)
	}
	// The control: a leftover that holds a process stays, and the session
	// has no cgroup.
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", "60"}, &os.ProcAttr{Sys: sysProcAttrInto(t, cg.path)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Kill()
		p.Wait()
		os.Remove(path)
	}()
	cg.close()
	if again, err := newSessionCgroup(name); err == nil {
		again.close()
		t.Fatalf("a leftover that holds a process was taken over")
	}
	b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
	if strings.TrimSpace(string(b)) != strconv.Itoa(p.Pid) {
		t.Errorf("the leftover's process: cgroup.procs %q, want %d", b, p.Pid)
	}
}
