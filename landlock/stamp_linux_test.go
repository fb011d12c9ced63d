package landlock

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stampedTempDir is a test directory on a filesystem stamps trust: the
// test's own, else one in /dev/shm (a VM's initramfs is neither).
func stampedTempDir(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	var sfs unix.Statfs_t
	if err := unix.Statfs(root, &sfs); err != nil || !trustedStampFS[int64(sfs.Type)] {
		shm, err := os.MkdirTemp("/dev/shm", "stamp")
		if err != nil {
			t.Fatalf("the test directory %s is on filesystem %#x, which stamps do not trust, and /dev/shm: %v", root, sfs.Type, err)
		}
		t.Cleanup(func() { os.RemoveAll(shm) })
		root = shm
	}
	if err := unix.Statfs(root, &sfs); err != nil || !trustedStampFS[int64(sfs.Type)] {
		t.Fatalf("the test directory %s is on filesystem %#x, which stamps do not trust (%v): the test needs ext4, xfs, btrfs or tmpfs", root, sfs.Type, err)
	}
	return root
}

// TestDirStampOS: on this machine's filesystems, a kept listing is asked
// again exactly when the directory changed, by its ctime, which putting
// its mtime back does not hide.
func TestDirStampOS(t *testing.T) {
	t.Parallel()
	root := stampedTempDir(t)
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "f"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Duration(stampSettle) + 100*time.Millisecond)
	if err := os.WriteFile(filepath.Join(root, "c", "g"), nil, 0o644); err != nil {
		t.Fatal(err) // c changes just before the recording: racy
	}
	var lists atomic.Int32
	fsys := listCounter{osFS{}, &lists}
	dirs := []string{root, root + "/a", root + "/a/b", root + "/c", "/proc/sys"}
	rec := NewRecorder(fsys)
	for _, d := range dirs {
		if _, err := rec.ReadDir(d); err != nil {
			t.Fatal(err)
		}
	}
	obs, ok := rec.Observations()
	if !ok {
		t.Fatal("the tree changed while recording")
	}
	for _, o := range obs {
		want := o.Path != root+"/c" && o.Path != "/proc/sys"
		if (o.Stamp != Stamp{}) != want {
			t.Errorf("%s: stamp %+v; want one: %v (not for a directory changed just now, nor on proc)", o.Path, o.Stamp, want)
		}
	}
	lists.Store(0)
	if !obs.Hold(fsys) || lists.Load() != 2 {
		t.Fatalf("unchanged: Hold listed %d directories; want 2 (the racy one and /proc/sys)", lists.Load())
	}

	// A secret appears in a/b, and a/b's times are put back as they were:
	// the ctime moved all the same.
	b := filepath.Join(root, "a", "b")
	var st unix.Stat_t
	if err := unix.Lstat(b, &st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, ".env"), []byte("SECRET=1"), 0o600); err != nil {
		t.Fatal(err)
	}
	times := []unix.Timespec{st.Atim, st.Mtim}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, b, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
	var after unix.Stat_t
	if err := unix.Lstat(b, &after); err != nil {
		t.Fatal(err)
	}
	if after.Mtim != st.Mtim {
		t.Fatalf("control: the mtime was not put back")
	}
	if obs.Hold(fsys) {
		t.Errorf("a new entry in a directory whose mtime was put back: the answers hold")
	}
	// Gone again: the stamp differs, the listing is asked and is the same.
	if err := os.Remove(filepath.Join(b, ".env")); err != nil {
		t.Fatal(err)
	}
	if !obs.Hold(fsys) {
		t.Errorf("the listing is what it was, but the answers do not hold")
	}
}

// TestPseudoKernelNamed: only filesystems whose names the kernel makes
// are exempt from the search for patterns that match names anywhere.
func TestPseudoKernelNamed(t *testing.T) {
	for _, magic := range []int64{0x19800202 /* mqueue */, unix.HUGETLBFS_MAGIC, unix.BPF_FS_MAGIC, 0x62656570 /* configfs */, unix.EFIVARFS_MAGIC, unix.TMPFS_MAGIC, unix.EXT4_SUPER_MAGIC} {
		if name, ok := pseudoMagic[magic]; ok {
			t.Errorf("%s (%#x), whose files a process names, is exempt from the search", name, magic)
		}
	}
	if !OS().Pseudo("/proc") {
		t.Errorf("control: /proc is not exempt")
	}
}

// TestStampSwapRace: a stamp stands for the listing recorded with it only
// if both are of one directory. Another process swapping two directories
// (renameat2 RENAME_EXCHANGE) between a stamp by path and the listing
// pairs one's stamp with the other's names; the recording takes both from
// one descriptor. Each directory holds a file naming it, so a pair is
// checked by the inode its names belong to.
func TestStampSwapRace(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	ino := map[string]uint64{}
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		name := "is-" + filepath.Base(d)
		if err := os.WriteFile(filepath.Join(d, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			t.Fatal(err)
		}
		ino[name] = st.Ino
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
		}
	}()
	mismatches := func(list func() ([]DirEntry, Stamp, bool)) int {
		n := 0
		for range 5000 {
			ents, st, ok := list()
			if ok && len(ents) == 1 && ino[ents[0].Name] != st.Ino {
				n++
			}
		}
		return n
	}
	byPath := mismatches(func() ([]DirEntry, Stamp, bool) {
		st, ok := StampDir(a)
		ents, _ := OS().ReadDir(a)
		return ents, st, ok
	})
	recorded := mismatches(func() ([]DirEntry, Stamp, bool) {
		ents, st, ok, _ := listStamped(OS(), a)
		return ents, st, ok
	})
	stop.Store(true)
	<-done
	if recorded != 0 {
		t.Errorf("the recording paired a stamp with another directory's listing %d times in 5000", recorded)
	}
	// The control needs the swapper to run beside the lister: on one CPU
	// (the VM rows) the two rarely interleave between two system calls.
	if byPath == 0 && runtime.NumCPU() >= 2 {
		t.Errorf("control: a stamp by path and a listing never raced in 5000 swaps; the test proves nothing")
	}
	t.Logf("by path: %d mismatches in 5000; one descriptor: %d", byPath, recorded)
}

// A directory's link count (2 plus its subdirectories; /proc's, one more
// per process) is no answer the planner uses: a kept plan that looked at
// /proc must hold while processes come and go (BenchmarkHold failed under
// a busy machine), and one that looked at a directory must hold when a
// subdirectory is made in it. Another inode there is still another answer.
func TestLstatDirLinkCount(t *testing.T) {
	d := t.TempDir()
	rec := NewRecorder(OS())
	if _, err := rec.Lstat(d); err != nil {
		t.Fatal(err)
	}
	obs, ok := rec.Observations()
	if !ok || len(obs) != 1 {
		t.Fatalf("observations %v, %v", obs, ok)
	}
	if err := os.Mkdir(filepath.Join(d, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !obs.Hold(OS()) {
		t.Fatalf("a subdirectory made in %s changed the answer to its Lstat", d)
	}
	if err := os.Rename(d, d+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if obs.Hold(OS()) {
		t.Fatalf("control: %s replaced by another directory gives the same answer", d)
	}
}

// TestDirInodes: DirInodes gives every entry of a directory with the
// inode number lstat gives it, the directory's own stamp (as lstat and
// StampDir give it) and birth time, and refuses a symlink to a directory rather than
// list the directory it points to.
func TestDirInodes(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	l, err := DirInodes(dir)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		t.Fatal(err)
	}
	if l.Stamp.Dev != st.Dev || l.Stamp.Ino != st.Ino || l.Stamp.Sec != st.Ctim.Sec || l.Stamp.Nsec != st.Ctim.Nsec {
		t.Errorf("stamp %+v, lstat gives %d:%d changed %d.%09d", l.Stamp, st.Dev, st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
	}
	if s, ok := StampDir(dir); !ok || s != l.Stamp {
		t.Errorf("stamp %+v, StampDir gives %+v %v", l.Stamp, s, ok)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		t.Fatal(err)
	}
	if sfs.Type == unix.EXT4_SUPER_MAGIC && (l.Born == 0 || !l.Trusted) {
		t.Errorf("a directory on ext4 (%s): birth time %d, trusted %v; want one, and trusted", dir, l.Born, l.Trusted)
	}
	if len(l.Inodes) != 4 {
		t.Errorf("entries %v, want a, b, link and sub", l.Inodes)
	}
	for _, name := range []string{"a", "b", "link", "sub"} {
		if err := unix.Lstat(filepath.Join(dir, name), &st); err != nil {
			t.Fatal(err)
		}
		if ino, ok := l.Inodes[name]; !ok || ino != st.Ino {
			t.Errorf("%s: inode %d (listed: %v), lstat gives %d", name, ino, ok, st.Ino)
		}
	}
	linked := filepath.Join(t.TempDir(), "to-dir")
	if err := os.Symlink(dir, linked); err != nil {
		t.Fatal(err)
	}
	if l, err := DirInodes(linked); err == nil {
		t.Errorf("DirInodes followed a symlink: %v", l.Inodes)
	}
}

// TestAbsentStampOS: on the OS, an absent path's answer rests on the stamp
// of the nearest directory above it that exists, taken from its change
// time: unchanged, the path is not asked again; made, or the directory
// otherwise changed, it is.
func TestAbsentStampOS(t *testing.T) {
	t.Parallel()
	root := stampedTempDir(t)
	home := root + "/home"
	if err := os.MkdirAll(home+"/.config", 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(stampSettle) + 100*time.Millisecond)
	absent := []string{home + "/.aws", home + "/.cargo/credentials", home + "/.config/gh/hosts.yml"}
	var stats atomic.Int32
	fsys := statCounter{osFS{}, &stats}
	rec := NewRecorder(osFS{}) // stamps and absences through one descriptor (stampAbsent)
	for _, p := range absent {
		if _, err := rec.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v", p, err)
		}
	}
	obs, ok := rec.Observations()
	if !ok {
		t.Fatal("the tree changed while recording")
	}
	for _, o := range obs {
		want := home
		if strings.HasPrefix(o.Path, home+"/.config/") {
			want = home + "/.config"
		}
		if o.Via != want || o.Stamp == (Stamp{}) {
			t.Errorf("%s: stamped via %q (%+v); want via %s", o.Path, o.Via, o.Stamp, want)
		}
	}
	stats.Store(0)
	if !obs.Hold(fsys) || stats.Load() != 0 {
		t.Errorf("unchanged: Hold asked %d lstats; want none", stats.Load())
	}
	if err := os.MkdirAll(home+"/.cargo", 0o755); err != nil {
		t.Fatal(err)
	}
	stats.Store(0)
	if !obs.Hold(fsys) || stats.Load() != 2 {
		t.Errorf("%s changed: Hold asked %d lstats and held? want 2 asked (those via it), holding", home, stats.Load())
	}
	if err := os.WriteFile(home+"/.cargo/credentials", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if obs.Hold(fsys) {
		t.Errorf("%s/.cargo/credentials made: the answers hold", home)
	}
}

// TestStampAbsentOS: the OS stamps a directory and tells a missing name
// from a present one through one descriptor, and the stamp is the one
// dirStamp gives the directory by path.
func TestStampAbsentOS(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "there"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	want, trusted := osFS{}.dirStamp(root)
	for name, absent := range map[string]bool{"there": false, "missing": true} {
		st, stamped, gone := osFS{}.stampAbsent(root, name)
		if gone != absent || stamped != trusted || st != want {
			t.Errorf("%s: stamp %+v (%v), absent %v; want %+v (%v), absent %v", name, st, stamped, gone, want, trusted, absent)
		}
	}
	// A symlink to the directory is not it: no descriptor, nothing absent.
	link := root + ".link"
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(link)
	if _, stamped, gone := (osFS{}).stampAbsent(link, "missing"); stamped || gone {
		t.Errorf("through a symlink: stamped %v, absent %v; want neither", stamped, gone)
	}
}
