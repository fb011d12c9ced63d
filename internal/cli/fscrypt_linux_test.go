package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// fscryptVar names a directory on an ext4 filesystem made with the
// encrypt feature, writable by the test's user: scripts/test-unprivileged
// makes one for its run; as root the test makes its own.
const fscryptVar = "AGENT_LAUNCHER_TEST_FSCRYPT_DIR"

// fscryptDir returns a directory where fscrypt policies can be set.
func fscryptDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv(fscryptVar); d != "" {
		dir, err := os.MkdirTemp(d, "t")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	if os.Geteuid() != 0 {
		t.Fatalf("this test needs an ext4 filesystem with the encrypt feature: run it as root, which makes one, or set %s (scripts/test-unprivileged does)", fscryptVar)
	}
	tmp := t.TempDir()
	img, mnt := filepath.Join(tmp, "enc.img"), filepath.Join(tmp, "mnt")
	for _, c := range [][]string{
		{"truncate", "-s", "64M", img},
		{"mkfs.ext4", "-q", "-O", "encrypt", "-b", "4096", img},
		{"mkdir", mnt},
		{"mount", "-o", "loop", img, mnt},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%q: %v: %s", c, err, out)
		}
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	return mnt
}

func fscryptIoctl(t *testing.T, dir string, req uintptr, arg unsafe.Pointer) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		t.Fatalf("ioctl %#x on %s: %v", req, dir, e)
	}
}

// fscryptAddKey adds a v2 key on dir's filesystem and returns its
// identifier.
func fscryptAddKey(t *testing.T, dir string, raw []byte) [16]byte {
	t.Helper()
	size := unsafe.Sizeof(unix.FscryptAddKeyArg{})
	buf := make([]byte, int(size)+len(raw))
	arg := (*unix.FscryptAddKeyArg)(unsafe.Pointer(&buf[0]))
	arg.Key_spec.Type = unix.FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER
	arg.Raw_size = uint32(len(raw))
	copy(buf[size:], raw)
	fscryptIoctl(t, dir, unix.FS_IOC_ADD_ENCRYPTION_KEY, unsafe.Pointer(&buf[0]))
	var id [16]byte
	copy(id[:], arg.Key_spec.U[:16])
	return id
}

func fscryptRemoveKey(t *testing.T, dir string, id [16]byte) {
	t.Helper()
	var arg unix.FscryptRemoveKeyArg
	arg.Key_spec.Type = unix.FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER
	copy(arg.Key_spec.U[:], id[:])
	fscryptIoctl(t, dir, unix.FS_IOC_REMOVE_ENCRYPTION_KEY, unsafe.Pointer(&arg))
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestStampsEncryptedDir: unlocking an fscrypt directory changes its
// listing (no-key names become the real ones) and not its stamp, so a
// directory stamp cannot stand for the listing of an encrypted directory
// (found by a review: a kept plan held and the agent read a .env that
// appeared by an unlock; the review missed a .envrc the same way).
func TestStampsEncryptedDir(t *testing.T) {
	base := fscryptDir(t)
	plain, enc := filepath.Join(base, "plain"), filepath.Join(base, "enc")
	for _, d := range []string{plain, enc} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	raw := make([]byte, 64)
	for i := range raw {
		raw[i] = byte(i*7 + 3)
	}
	id := fscryptAddKey(t, base, raw)
	policy := unix.FscryptPolicyV2{Version: unix.FSCRYPT_POLICY_V2, Contents_encryption_mode: unix.FSCRYPT_MODE_AES_256_XTS,
		Filenames_encryption_mode: unix.FSCRYPT_MODE_AES_256_CTS, Flags: unix.FSCRYPT_POLICY_FLAGS_PAD_32, Master_key_identifier: id}
	fscryptIoctl(t, enc, unix.FS_IOC_SET_ENCRYPTION_POLICY, unsafe.Pointer(&policy))
	// enc's own name is plain (its parent is not encrypted); the names in
	// it are encrypted, and read as no-key names while it is locked.
	if err := os.WriteFile(filepath.Join(enc, ".env"), []byte("SECRET=1"), 0o600); err != nil {
		t.Fatal(err)
	}
	fscryptRemoveKey(t, base, id)
	if got := names(t, enc); slices.Contains(got, ".env") || len(got) != 1 {
		t.Fatalf("control: the locked directory lists %q, not one no-key name", got)
	}
	time.Sleep(2100 * time.Millisecond) // landlock's stampSettle: at rest

	if _, ok := landlock.StampDir(plain); !ok {
		t.Fatalf("control: a plain directory on this ext4 has no stamp")
	}
	if _, ok := landlock.StampDir(enc); ok {
		t.Errorf("an encrypted directory has a stamp")
	}
	rec := landlock.NewRecorder(landlock.OS())
	if _, err := rec.ReadDir(enc); err != nil {
		t.Fatal(err)
	}
	obs, _ := rec.Observations()
	fscryptAddKey(t, base, raw) // unlock
	if got := names(t, enc); !slices.Equal(got, []string{".env"}) {
		t.Fatalf("control: the unlocked directory lists %q", got)
	}
	if obs.Hold(landlock.OS()) {
		t.Errorf("a .env appeared by an unlock, and the kept answers hold")
	}
}
