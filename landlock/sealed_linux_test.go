package landlock

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/internal/testbin"
)

// sealedCases are osFS.sealed's answers for an ordinary user (uid 4242,
// gid 4242) on the files TestSealedOS makes as root in dir (a directory
// of root's, mode 0755): only what the mode bits keep from the user is
// sealed.
var sealedCases = []struct {
	name string
	want bool
}{
	{"root-0600", true},
	{"root-dir-0700", true},
	{"absent", true},                   // its parent is root's 0755
	{"root-dir-0755/absent", true},     // so is this one's
	{"root-0604", false},               // others may read
	{"root-0640-group", false},         // its group is the user's
	{"root-0601", false},               // others may execute
	{"user-0000", false},               // the user's own: it may chmod it
	{"root-0600-acl", false},           // an ACL lets the user read
	{"root-dir-1777/absent", false},    // the user could make it
	{"root-dir-1777/root-0600", false}, // or rename it away
	{"root-dir-defacl/absent", false},  // a default ACL would give it an ACL
	{"root-dir-defacl/root-0600", false},
	{"root-dir-sgid/absent", false},             // made later, it would be the user's group's
	{"user-dir/root-dir-0755/absent", false},    // the user may replace the directory above
	{"user-dir/root-dir-0755/root-0600", false}, // or move it away
	{"/proc/kcore", false},                      // root's 0400, but procfs: no mode-bit check of the kernel's to rely on
	{"link-to-root-0600", false},                // a symlink
	{"root-dir-0755", false},                    // a directory it may list
}

// TestSealedOS checks osFS.sealed on the real kernel: as root nothing is
// sealed; as an ordinary user (this test binary run again as uid 4242,
// from a copy that user may execute) exactly what the mode bits keep from
// it, a POSIX ACL and a writable parent counted. Run as an ordinary user
// directly, it checks what it can make or find: its own files are not
// sealed, a name nobody lets it make under /etc is.
func TestSealedOS(t *testing.T) {
	if dir := os.Getenv("AL_TEST_SEALED_DIR"); dir != "" {
		none := os.Getenv("AL_TEST_SEALED_NONE") != ""
		for _, c := range sealedCases {
			p := c.name
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			if got := (osFS{}).sealed(p); got != (c.want && !none) {
				t.Errorf("uid %d (%s): sealed(%s) = %v, want %v", os.Geteuid(), os.Getenv("AL_TEST_SEALED_NONE"), c.name, got, c.want && !none)
			}
		}
		return
	}
	if os.Geteuid() != 0 {
		own := t.TempDir()
		if err := os.WriteFile(filepath.Join(own, "f"), nil, 0o000); err != nil {
			t.Fatal(err)
		}
		// /etc is root's 0755 here and in the VM guests (whose / is a
		// world-writable, sticky tmpfs).
		for path, want := range map[string]bool{"/etc/agent-launcher-absent": true, own + "/f": false, own + "/absent": false, "/": false} {
			if got := (osFS{}).sealed(path); got != want {
				t.Errorf("uid %d: sealed(%s) = %v, want %v", os.Geteuid(), path, got, want)
			}
		}
		return
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := func(name string, mode os.FileMode, uid, gid int) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("secret"), 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(name string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	file("root-0600", 0o600, 0, 0)
	mkdir("root-dir-0700", 0o700)
	mkdir("root-dir-0755", 0o755)
	file("root-0604", 0o604, 0, 0)
	file("root-0640-group", 0o640, 0, 4242)
	file("root-0601", 0o601, 0, 0)
	file("user-0000", 0, 4242, 4242)
	file("root-0600-acl", 0o600, 0, 0)
	mkdir("root-dir-1777", 0o777|os.ModeSticky)
	file("root-dir-1777/root-0600", 0o600, 0, 0)
	if err := os.Symlink("root-0600", filepath.Join(dir, "link-to-root-0600")); err != nil {
		t.Fatal(err)
	}
	// user::rw- user:4242:r-- group::--- mask::r-- other::---
	acl := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range [][3]uint32{{0x01, 6, 0xffffffff}, {0x02, 4, 4242}, {0x04, 0, 0xffffffff}, {0x10, 4, 0xffffffff}, {0x20, 0, 0xffffffff}} {
		acl = binary.LittleEndian.AppendUint16(acl, uint16(e[0]))
		acl = binary.LittleEndian.AppendUint16(acl, uint16(e[1]))
		acl = binary.LittleEndian.AppendUint32(acl, e[2])
	}
	if err := unix.Setxattr(filepath.Join(dir, "root-0600-acl"), "system.posix_acl_access", acl, 0); err != nil {
		t.Fatalf("setting an ACL: %v", err)
	}
	mkdir("root-dir-sgid", 0o755|os.ModeSetgid)
	if err := os.Chown(filepath.Join(dir, "root-dir-sgid"), 0, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "root-dir-sgid"), 0o755|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	mkdir("user-dir", 0o755)
	if err := os.Chown(filepath.Join(dir, "user-dir"), 4242, 4242); err != nil {
		t.Fatal(err)
	}
	mkdir("user-dir/root-dir-0755", 0o755)
	file("user-dir/root-dir-0755/root-0600", 0o600, 0, 0)
	mkdir("root-dir-defacl", 0o755)
	file("root-dir-defacl/root-0600", 0o600, 0, 0)
	if err := unix.Setxattr(filepath.Join(dir, "root-dir-defacl"), "system.posix_acl_default", acl, 0); err != nil {
		t.Fatalf("setting a default ACL: %v", err)
	}
	// Root: nothing is sealed, not even what no ordinary user may open.
	for _, c := range sealedCases {
		if (osFS{}).sealed(filepath.Join(dir, c.name)) || filepath.IsAbs(c.name) && (osFS{}).sealed(c.name) {
			t.Errorf("root: sealed(%s)", c.name)
		}
	}
	// The ordinary user: a copy of this binary it may execute, run as it.
	bin := testbin.CopySelf(t, dir, "landlock.test")
	// A copy with a file capability (CAP_DAC_READ_SEARCH permitted, not
	// effective): the process could raise it, and nothing is sealed.
	capBin := testbin.CopySelf(t, dir, "landlock-cap.test")
	// vfs_cap_data, revision 2: magic, then permitted and inheritable
	// for capabilities 0-31 and 32-63.
	capData := binary.LittleEndian.AppendUint32(nil, 0x02000000)
	for _, v := range []uint32{1 << unix.CAP_DAC_READ_SEARCH, 0, 0, 0} {
		capData = binary.LittleEndian.AppendUint32(capData, v)
	}
	if err := unix.Setxattr(capBin, "security.capability", capData, 0); err != nil {
		t.Fatalf("setting a file capability: %v", err)
	}
	user := &syscall.Credential{Uid: 4242, Gid: 4242}
	for _, run := range []struct {
		how  string
		bin  string
		attr *syscall.SysProcAttr
	}{
		{"", bin, &syscall.SysProcAttr{Credential: user}},
		// In a user namespace of its own, the groups it does not map all
		// look alike (the overflow gid): nothing is sealed.
		{"userns", bin, &syscall.SysProcAttr{Credential: user, Cloneflags: syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 4242, HostID: 4242, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 4242, HostID: 4242, Size: 1}}}},
		{"file capability", capBin, &syscall.SysProcAttr{Credential: user}},
	} {
		if run.bin == capBin && nosuid(dir) {
			// The kernel ignores file capabilities there: the copy would
			// run with none, and the case would test nothing.
			t.Logf("%s is on a nosuid mount: the file capability case does not run", dir)
			continue
		}
		cmd := exec.Command(run.bin, "-test.run=^TestSealedOS$", "-test.v")
		cmd.Env = append(os.Environ(), "AL_TEST_SEALED_DIR="+dir, "AL_TEST_SEALED_NONE="+run.how)
		cmd.SysProcAttr = run.attr
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestSealedOS") {
			t.Errorf("as uid 4242 %s: %v\n%s", run.how, err, out)
		}
	}
}

// nosuid reports whether dir lies on a mount with nosuid.
func nosuid(dir string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(dir, &fs) == nil && fs.Flags&unix.ST_NOSUID != 0
}
