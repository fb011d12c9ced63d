package landlock

import "time"

// Directory stamps let the plan cache skip listing a directory that has not
// changed. A directory's stamp is its device, inode and change time
// (ctime). Creating, removing or renaming an entry sets the directory's
// ctime to the time of the change, and no call an unprivileged process can
// make sets a ctime to anything else: utimensat, which can put a mtime
// back, moves the ctime to now. So while a directory's stamp stays what it
// was when it was listed, so does its listing, with two caveats that the
// stamps are only trusted around:
//
//   - Time stamps have a granularity: a clock tick (milliseconds), or a
//     second on filesystems with second timestamps. A change in the same
//     tick as the listing could leave the ctime as it was. A stamp is only
//     kept when the directory last changed stampSettle or more before the
//     planning pass began (a "racy" one, as git calls it, is not kept and
//     the directory is listed every time).
//   - Only the filesystems that keep ctime themselves are trusted
//     (trustedStampFS: ext2-4, xfs, btrfs, tmpfs, f2fs). On a network
//     filesystem the ctime is the server's, and may come from a cache;
//     on FUSE it is whatever the daemon says; on overlayfs a change to a
//     lower layer shows in no stamp. Directories there are always listed.
//
// What is left is the system clock itself: root can set it back, and a
// change made then could get an old ctime back, to the nanosecond. The
// plan cache is the operator's, and root can change the plan directly.

// Stamp identifies a directory's state as described above; the zero Stamp
// is none.
type Stamp struct {
	Dev, Ino  uint64
	Sec, Nsec int64
}

// stampSettle is how long before a planning pass a directory must have
// last changed for its stamp to be kept: more than any timestamp
// granularity of a trusted filesystem (a second at worst) and any clock
// tick.
const stampSettle = 2 * int64(time.Second)

// settled reports whether s was last changed stampSettle before now (both
// in nanoseconds of the clock that ctimes are taken from).
func (s Stamp) settled(now int64) bool {
	limit := now - stampSettle
	sec, nsec := limit/int64(time.Second), limit%int64(time.Second)
	return s != Stamp{} && (s.Sec < sec || s.Sec == sec && s.Nsec < nsec)
}

// Settled reports whether s was taken of a directory that last changed
// stampSettle or more before now (StampNow, taken before the directory was
// stamped): only such a stamp may stand for the listing that follows it.
func (s Stamp) Settled(now int64) bool { return s.settled(now) }

// stampedLister is an FS that lists a directory with the stamp of the
// directory it listed (the OS: both from one descriptor).
type stampedLister interface {
	readDirStamped(path string) ([]DirEntry, Stamp, bool, error)
}

// listStamped lists path on fsys with the stamp of the directory listed,
// taken before the listing, where fsys gives one: from the listing's own
// descriptor (stampedLister), else by path (dirStamper).
func listStamped(fsys FS, path string) ([]DirEntry, Stamp, bool, error) {
	if sl, ok := fsys.(stampedLister); ok {
		return sl.readDirStamped(path)
	}
	var st Stamp
	stamped := false
	if ds, ok := fsys.(dirStamper); ok {
		st, stamped = ds.dirStamp(path)
	}
	entries, err := fsys.ReadDir(path)
	return entries, st, stamped, err
}

// dirStamper is an FS that stamps directories (the OS, a memFS in tests).
type dirStamper interface {
	// stampNow is the current time on the clock of the stamps.
	stampNow() int64
	// dirStamp returns path's stamp, false when path is no directory or
	// its filesystem's change times are not trusted.
	dirStamp(path string) (Stamp, bool)
}
