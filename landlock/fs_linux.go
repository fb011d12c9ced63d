package landlock

import (
	"encoding/binary"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// OS returns the running system's filesystem as the planner's FS.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) Lstat(path string) (Info, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return Info{}, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	return infoOf(&st), nil
}

// infoOf is the planner's Info of a stat result. A directory's link count
// (2 plus its subdirectories; /proc's, one more per process) is no answer
// the planner uses, and it changes with every process on the machine: it
// is left out (0), so that the planner cannot depend on it and a kept
// plan's recorded Lstat of /proc holds while processes come and go.
func infoOf(st *unix.Stat_t) Info {
	info := Info{Type: modeType(st.Mode), Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink}
	if info.Type == TypeDir {
		info.Nlink = 0
	}
	return info
}

func modeType(mode uint32) FileType {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return TypeDir
	case unix.S_IFREG:
		return TypeFile
	case unix.S_IFLNK:
		return TypeSymlink
	}
	return TypeOther
}

// ReadDir lists path with getdents64 into a reused buffer, the names of
// one batch sharing one allocation, sorted by name as os.ReadDir sorts:
// the planner lists every directory of the workspace (and the plan cache
// lists them again to see that nothing changed), where os.ReadDir's two
// allocations per entry cost more than the system calls. A type the
// filesystem does not report (DT_UNKNOWN) is asked of lstat, as os.ReadDir
// does.
func (osFS) ReadDir(path string) ([]DirEntry, error) {
	entries, _, _, err := readDir(path, false)
	return entries, err
}

// readDirStamped is ReadDir with the stamp of the directory it lists,
// taken from the open descriptor before the listing: the stamp is of the
// very directory listed, whatever a rename does to the path meanwhile.
func (osFS) readDirStamped(path string) ([]DirEntry, Stamp, bool, error) {
	return readDir(path, true)
}

func readDir(path string, stamp bool) ([]DirEntry, Stamp, bool, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, Stamp{}, false, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st Stamp
	stamped := false
	if stamp {
		st, stamped = stampAt(fd, "", unix.AT_EMPTY_PATH)
	}
	entries, err := readDirFD(fd, path)
	return entries, st, stamped, err
}

// ReadDirFD lists the directory open at fd (path names it in errors) as
// the OS FS's ReadDir does.
func ReadDirFD(fd int, path string) ([]DirEntry, error) { return readDirFD(fd, path) }

func readDirFD(fd int, path string) ([]DirEntry, error) {
	var out []DirEntry
	partial, err := direntsFD(fd, path, func(batch int, name string, _ uint64, typ byte) error {
		t := TypeOther
		switch typ {
		case unix.DT_DIR:
			t = TypeDir
		case unix.DT_REG:
			t = TypeFile
		case unix.DT_LNK:
			t = TypeSymlink
		case unix.DT_UNKNOWN:
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if err == unix.ENOENT {
					return nil // removed since it was listed, as os.ReadDir skips it
				}
				return &fs.PathError{Op: "lstat", Path: path + "/" + name, Err: err}
			}
			t = modeType(st.Mode)
		}
		if out == nil {
			// Room for the batch at once (a record takes at least 24
			// bytes); an empty directory allocates nothing.
			out = make([]DirEntry, 0, batch/24)
		}
		out = append(out, DirEntry{Name: name, Type: t})
		return nil
	})
	if err != nil && !partial {
		return nil, err
	}
	// With a failed getdents64, what was listed before it, as os.ReadDir
	// returns it.
	sortEntries(out)
	return out, err
}

// direntsFD calls fn with each entry of the directory open at fd but "."
// and "..": the size of its getdents64 batch, its name, inode number and
// type (DT_*), in the order the kernel gives them. The names of one batch
// share one allocation. fn's error ends the listing and is returned, as is
// a malformed record's (EIO); partial says that a getdents64 call failed,
// after the entries fn was given.
func direntsFD(fd int, path string, fn func(batch int, name string, ino uint64, typ byte) error) (partial bool, err error) {
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return true, &fs.PathError{Op: "readdirent", Path: path, Err: err}
		}
		if n <= 0 {
			return false, nil
		}
		batch := string(buf[:n]) // one allocation for the batch's names
		for off := 0; off+19 <= n; {
			reclen := int(buf[off+16]) | int(buf[off+17])<<8
			if reclen < 19 || off+reclen > n {
				return false, &fs.PathError{Op: "readdirent", Path: path, Err: unix.EIO}
			}
			ino := binary.NativeEndian.Uint64(buf[off:])
			typ := buf[off+18]
			end := off + 19
			for end < off+reclen && buf[end] != 0 {
				end++
			}
			name := batch[off+19 : end]
			off += reclen
			if ino == 0 || name == "." || name == ".." {
				continue
			}
			if err := fn(n, name, ino, typ); err != nil {
				return false, err
			}
		}
	}
}

// sortEntries sorts a listing by name, as os.ReadDir returns it.
func sortEntries(out []DirEntry) {
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
}

// direntBufs are ReadDir's getdents64 buffers.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pseudoMagic lists the filesystems whose names the kernel makes: no
// policy name pattern can match a file a user put there. Not mqueue,
// hugetlbfs, bpf, configfs or efivarfs, where a process names the files
// and puts what it likes in them (a review read a .env from an mqueue
// mounted in a workspace): they are searched like any other.
var pseudoMagic = map[int64]string{
	unix.PROC_SUPER_MAGIC:     "proc",
	unix.SYSFS_MAGIC:          "sysfs",
	unix.CGROUP_SUPER_MAGIC:   "cgroup",
	unix.CGROUP2_SUPER_MAGIC:  "cgroup2",
	unix.SECURITYFS_MAGIC:     "securityfs",
	unix.DEBUGFS_MAGIC:        "debugfs",
	unix.TRACEFS_MAGIC:        "tracefs",
	unix.DEVPTS_SUPER_MAGIC:   "devpts",
	unix.PSTOREFS_MAGIC:       "pstore",
	0x65735543 /* fusectl */ : "fusectl",
	unix.BINFMTFS_MAGIC:       "binfmt_misc",
	unix.SELINUX_MAGIC:        "selinuxfs",
	unix.SMACK_MAGIC:          "smackfs",
	unix.NSFS_MAGIC:           "nsfs",
}

func (osFS) Pseudo(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	_, ok := pseudoMagic[int64(st.Type)]
	return ok
}

func (osFS) Resolve(path string) (string, error) { return filepath.EvalSymlinks(path) }

// trustedStampFS are the filesystems whose directory ctimes the plan cache
// trusts (stamp.go).
var trustedStampFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:  true, // ext2, ext3 and ext4 share it
	unix.XFS_SUPER_MAGIC:   true,
	unix.BTRFS_SUPER_MAGIC: true,
	unix.TMPFS_MAGIC:       true,
	unix.F2FS_SUPER_MAGIC:  true,
}

// TrustedFS reports whether a filesystem of type fstype (statfs's f_type)
// keeps its directories' change times and listings itself, as stamps
// need: ext2-4, xfs, btrfs, tmpfs, f2fs.
func TrustedFS(fstype int64) bool { return trustedStampFS[fstype] }

// stampDevs caches, per device, whether its filesystem is trusted.
var stampDevs sync.Map // uint64 -> bool

func (osFS) stampNow() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME, &ts) != nil {
		return 0 // no stamp is settled before the epoch
	}
	return ts.Nano()
}

func (osFS) dirStamp(path string) (Stamp, bool) {
	return stampAt(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW)
}

// stampAt stamps the directory statx(dirfd, path, flags) names.
func stampAt(dirfd int, path string, flags int) (Stamp, bool) {
	var stx unix.Statx_t
	if err := unix.Statx(dirfd, path, flags, unix.STATX_BASIC_STATS, &stx); err != nil ||
		uint32(stx.Mode)&unix.S_IFMT != unix.S_IFDIR || stx.Mask&unix.STATX_CTIME == 0 {
		return Stamp{}, false
	}
	// An encrypted directory's listing changes when its key is added or
	// removed (no-key names for the real ones), and its stamp does not.
	if stx.Attributes_mask&unix.STATX_ATTR_ENCRYPTED != 0 && stx.Attributes&unix.STATX_ATTR_ENCRYPTED != 0 {
		return Stamp{}, false
	}
	dev := unix.Mkdev(stx.Dev_major, stx.Dev_minor)
	trusted, ok := stampDevs.Load(dev)
	if !ok {
		trusted = trustedDev(dirfd, path, flags, dev)
		stampDevs.Store(dev, trusted)
	}
	if !trusted.(bool) {
		return Stamp{}, false
	}
	return Stamp{Dev: dev, Ino: stx.Ino, Sec: stx.Ctime.Sec, Nsec: int64(stx.Ctime.Nsec)}, true
}

// trustedDev reports whether the filesystem of dev, which the directory
// that stampAt was given is on, is one of trustedStampFS. The type and the
// device are read from one open descriptor (dirfd itself, with
// AT_EMPTY_PATH): a mount that appears on path meanwhile is a device the
// answer is not about, and no.
func trustedDev(dirfd int, path string, flags int, dev uint64) bool {
	fd := dirfd
	if flags&unix.AT_EMPTY_PATH == 0 {
		var err error
		if fd, err = unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
			return false
		}
		defer unix.Close(fd)
	}
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if unix.Fstat(fd, &st) != nil || st.Dev != dev || unix.Fstatfs(fd, &sfs) != nil {
		return false
	}
	return trustedStampFS[int64(sfs.Type)]
}

// stampAbsent stamps dir, then asks whether name is missing from it, both
// through one descriptor of dir: the stamp is of the very directory the
// name was missing from, whatever is renamed or relinked above it
// meanwhile (Recorder.absentStamp).
func (osFS) stampAbsent(dir, name string) (st Stamp, stamped, absent bool) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stamp{}, false, false
	}
	defer unix.Close(fd)
	st, stamped = stampAt(fd, "", unix.AT_EMPTY_PATH)
	var s unix.Stat_t
	err = unix.Fstatat(fd, name, &s, unix.AT_SYMLINK_NOFOLLOW)
	return st, stamped, err == unix.ENOENT
}

// StampDir returns the stamp of the directory path on the running system
// (stamp.go), false when it is no directory or its filesystem's change
// times are not trusted. Take it before listing the directory.
func StampDir(path string) (Stamp, bool) { return osFS{}.dirStamp(path) }

// DirListing is a directory's entries by inode number (DirInodes).
type DirListing struct {
	// Stamp is the directory's device, inode and change time, taken
	// before the listing, on any file system (where StampDir trusts only
	// some); Born is its birth time (ns since the epoch), 0 where the file
	// system keeps none.
	Stamp Stamp
	Born  int64
	// Trusted: the directory's file system is one whose change times the
	// plan cache trusts (stamp.go: ext2-4, xfs, btrfs, tmpfs, f2fs), whose
	// birth times are also fixed for an inode's life. Elsewhere a change
	// time may come late from a cache or a daemon, and overlayfs gives a
	// file a new birth time when it copies it up to be written.
	Trusted bool
	// Inodes is each entry's inode number as the listing gives it (d_ino:
	// under a mount point, the covered directory's), by name.
	Inodes map[string]uint64
}

// DirInodes lists the directory at path on the running system, a symlink
// there not followed, with its stamp and birth time from the listing's own
// descriptor: what a rename does to path meanwhile does not mix two
// directories.
func DirInodes(path string) (DirListing, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return DirListing{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &stx); err != nil {
		return DirListing{}, &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	var sfs unix.Statfs_t
	trusted := unix.Fstatfs(fd, &sfs) == nil && trustedStampFS[int64(sfs.Type)]
	l := DirListing{Stamp: ChangeStamp(&stx), Born: bornOf(&stx), Trusted: trusted, Inodes: map[string]uint64{}}
	if _, err := direntsFD(fd, path, func(_ int, name string, ino uint64, _ byte) error {
		l.Inodes[name] = ino
		return nil
	}); err != nil {
		return DirListing{}, err
	}
	return l, nil
}

// ChangeStamp is the stamp of what statx described in stx (its device,
// inode and change time), whatever its file system.
func ChangeStamp(stx *unix.Statx_t) Stamp {
	return Stamp{Dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), Ino: stx.Ino, Sec: stx.Ctime.Sec, Nsec: int64(stx.Ctime.Nsec)}
}

// Born returns the birth time of path on the running system, a symlink
// there not followed, in ns since the epoch: 0 where its file system keeps
// none, or path cannot be asked.
func Born(path string) int64 {
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx) != nil {
		return 0
	}
	return bornOf(&stx)
}

// bornOf is the birth time statx gave in stx, as Born returns it.
func bornOf(stx *unix.Statx_t) int64 {
	if stx.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
}

// StampNow is the current time on the clock of the stamps, for Settled.
func StampNow() int64 { return osFS{}.stampNow() }

// ReadDirStamped lists path on fsys, the running system's filesystem or
// one that stands for it (a test's wrapper of OS()), with the stamp of the
// directory listed (StampDir), taken before the listing: from the listing's
// own descriptor where fsys is OS(), else by path.
func ReadDirStamped(fsys FS, path string) ([]DirEntry, Stamp, bool, error) {
	switch fsys.(type) {
	case stampedLister, dirStamper:
		return listStamped(fsys, path)
	}
	st, ok := StampDir(path)
	entries, err := fsys.ReadDir(path)
	return entries, st, ok, err
}
