package cli

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agent-launcher/agent-launcher/tiers"
)

// The launcher keeps two caches in its state directory, which the
// built-in denylist keeps from every agent: compiled automata (cache/,
// fileCache) and plans (plans/, planCache). What is read back from either
// decides what a later session may do, so an entry is read only from a
// real directory and a real file, both this user's and no one else's to
// write, and a file with a single link: a symlink or a second hard link
// is a name through which something else (another session's cache, a
// workspace) could write the entry. Failures are silent: a miss only
// costs the work the entry saves.

// entryDir is an open directory of cached entries.
type entryDir struct{ f *os.File }

// openEntryDir opens dir without following a symlink at its last
// component, and checks it; with create, it makes dir first (mode 0700).
func openEntryDir(dir string, create bool) (entryDir, error) {
	if create {
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return entryDir{}, err
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return entryDir{}, err
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return entryDir{}, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), dir)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || !ownedPrivate(&st, unix.S_IFDIR) {
		f.Close()
		return entryDir{}, fmt.Errorf("%s: not a directory of this user's that only it may write", dir)
	}
	return entryDir{f}, nil
}

// ownedPrivate: of type typ, this user's, writable by no one else.
func ownedPrivate(st *unix.Stat_t, typ uint32) bool {
	return st.Mode&unix.S_IFMT == typ && int(st.Uid) == os.Geteuid() && st.Mode&0o022 == 0
}

func (d entryDir) close() { d.f.Close() }

// open opens the entry name for reading: a regular file with one link,
// this user's, no one else's to write, of at most max bytes; and returns
// its status.
func (d entryDir) open(name string, max int64) (*os.File, unix.Stat_t, bool) {
	var st unix.Stat_t
	if !validEntryName(name) {
		return nil, st, false
	}
	fd, err := unix.Openat(int(d.f.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, false
	}
	if err := unix.Fstat(fd, &st); err != nil || !ownedPrivate(&st, unix.S_IFREG) || st.Nlink != 1 || st.Size > max || st.Size == 0 {
		unix.Close(fd)
		return nil, st, false
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.f.Name(), name)), st, true
}

// read returns the content of the entry name (open's checks).
func (d entryDir) read(name string, max int64) ([]byte, bool) {
	f, st, ok := d.open(name, max)
	if !ok {
		return nil, false
	}
	defer f.Close()
	b := make([]byte, st.Size)
	n, err := f.ReadAt(b, 0)
	if err != nil || int64(n) != st.Size {
		return nil, false
	}
	return b, true
}

// write replaces the entry name with b: a new file, made exclusively,
// renamed over the old name.
func (d entryDir) write(name string, b []byte) error {
	if !validEntryName(name) {
		return fmt.Errorf("cache entry %q: not a plain name", name)
	}
	dfd := int(d.f.Fd())
	for range 8 {
		tmp := fmt.Sprintf(".tmp-%016x", rand.Uint64())
		fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), tmp)
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = unix.Renameat(dfd, tmp, dfd, name)
		}
		if err != nil {
			unix.Unlinkat(dfd, tmp, 0)
		}
		return err
	}
	return errors.New("cache entry: no free temporary name")
}

// prune removes the least recently written entries beyond keep among
// those whose names begin with tiers.SharedKeyPrefix as like's does or
// does not: the automata that every workspace shares are kept apart from
// the entries of each workspace's matcher (tiers.Cache).
func (d entryDir) prune(keep int, like string) {
	names, err := d.f.Readdirnames(-1)
	if _, serr := d.f.Seek(0, 0); err != nil || serr != nil {
		return
	}
	shared := strings.HasPrefix(like, tiers.SharedKeyPrefix)
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(n, tiers.SharedKeyPrefix) != shared })
	if len(names) <= keep {
		return
	}
	type aged struct {
		name string
		mod  int64
	}
	var all []aged
	dfd := int(d.f.Fd())
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			all = append(all, aged{n, st.Mtim.Nano()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod < all[j].mod })
	for _, e := range all[:max(len(all)-keep, 0)] {
		unix.Unlinkat(dfd, e.name, 0)
	}
}

// storeEntry writes the entry name in dir (made if missing) and keeps at
// most keep entries there. Failures are silent.
func storeEntry(dir, name string, b []byte, keep int) {
	d, err := openEntryDir(dir, true)
	if err != nil {
		return
	}
	defer d.close()
	if d.write(name, b) == nil {
		d.prune(keep, name)
	}
}

// validEntryName: a single path component, not "." or "..".
func validEntryName(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name && name[0] != '/'
}

// fileCache is the compiled-automata cache (tiers.Cache) in the launcher's
// state directory. It vouches (tiers.Voucher) for an entry that validated
// before and has not changed since: the validation marks the file itself
// (vouchXattr) with its device, inode, size and modification time, once
// that time lies vouchSettle in the past. Writing the file changes its
// modification time, and replacing it (as Put does) its inode; the mark is
// set only on a settled time, so a write in the same tick of the clock as
// the one before it cannot leave the time as the mark has it. Only a
// process that can set a file's times back (the operator's; the built-in
// denylist keeps agents out of the state directory) could keep a changed
// entry vouched for, and it could as well change the policy.
//
// What no stamp shows is damage where the file is stored (a bad sector, a
// torn page): the cells the validation would have refused can then make
// Decide panic, or decide wrongly (as cells that validate can). So a load
// takes the mark off as it takes the entry as vouched for, and the process
// puts it back only once its command has ended without a panic
// (reaffirmVouches, from Main): an entry that made a launcher panic is
// validated in full by the next one, refused, and compiled anew, rather
// than taken again at every launch. Where the file system keeps no user
// extended attributes, every load validates, as before.
type fileCache struct {
	dir string
	mu  sync.Mutex
	got map[string]entryStamp // per key, the entry Get returned
}

func newFileCache(dir string) *fileCache {
	return &fileCache{dir: dir, got: map[string]entryStamp{}}
}

// entryStamp identifies the content of an entry as Get read it, and says
// whether its mark vouched for it.
type entryStamp struct {
	dev, ino    uint64
	size, mtime int64
	vouched     bool
}

// vouchXattr is the mark of an entry that validated; vouchSettle how long
// before the validation the entry must have last been written.
const (
	vouchXattr  = "user.agent-launcher.vouched"
	vouchFormat = "v1"
)

var vouchSettle = 2 * time.Second

func stampOf(st *unix.Stat_t) entryStamp {
	return entryStamp{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano()}
}

// mark is the mark's value for an entry of stamp s.
func (s entryStamp) mark() string {
	return fmt.Sprintf("%s %d %d %d %d", vouchFormat, s.dev, s.ino, s.size, s.mtime)
}

// same reports whether s and t stamp the same content.
func (s entryStamp) same(t entryStamp) bool {
	return s.dev == t.dev && s.ino == t.ino && s.size == t.size && s.mtime == t.mtime
}

// taken lists the entries this process took as vouched for, their marks
// off until reaffirmVouches puts them back.
var taken struct {
	sync.Mutex
	entries []takenEntry
}

type takenEntry struct {
	dir, key string
	stamp    entryStamp
}

// reaffirmVouches puts back the marks this process took off, on each entry
// that is still the file it took (Main calls it once the command ended
// without a panic). Failures are silent: the next load validates again.
func reaffirmVouches() {
	taken.Lock()
	entries := taken.entries
	taken.entries = nil
	taken.Unlock()
	for _, t := range entries {
		markEntry(t.dir, t.key, t.stamp)
	}
}

// markEntry marks the entry key in dir with stamp s when it is still that
// file.
func markEntry(dir, key string, s entryStamp) {
	d, err := openEntryDir(dir, false)
	if err != nil {
		return
	}
	defer d.close()
	f, st, ok := d.open(key, maxCacheEntry)
	if !ok {
		return
	}
	defer f.Close()
	if stampOf(&st).same(s) {
		unix.Fsetxattr(int(f.Fd()), vouchXattr, []byte(s.mark()), 0)
	}
}

// marked reports whether f, an entry of stamp s, carries the mark of s.
func marked(f *os.File, s entryStamp) bool {
	want := s.mark()
	buf := make([]byte, len(want)+1)
	n, err := unix.Fgetxattr(int(f.Fd()), vouchXattr, buf)
	return err == nil && string(buf[:n]) == want
}

// maxCacheEntries bounds the cache, the entries many matchers share apart
// from the others (prune); the least recently written go first.
const maxCacheEntries = 16

// maxCacheEntry bounds one entry read back.
const maxCacheEntry = 64 << 20

func (c *fileCache) Get(key string) ([]byte, bool) {
	d, err := openEntryDir(c.dir, false)
	if err != nil {
		return nil, false
	}
	defer d.close()
	f, st, ok := d.open(key, maxCacheEntry)
	if !ok {
		return nil, false
	}
	defer f.Close()
	size := st.Size
	// Mapped, not read: the entry's tables are used in place (tiers.Cache).
	// The mapping lives as long as the process. Populated at once: a load
	// that validates reads every byte, and one mmap that maps every page
	// costs less than a fault per 64 KiB (fault-around) while the init
	// stage starts beside it; the load took 6.7-7.8 ms without, 4.2-4.7
	// with (docs/design-amendments.md, the ninth pass). A vouched-for
	// entry is read only where matching goes; populating it anyway
	// measured the same (the fourteenth pass).
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return nil, false
	}
	s := stampOf(&st)
	if marked(f, s) {
		// Taken off until the command ends (reaffirmVouches), and vouched
		// for only if the file did not change while it was mapped.
		unix.Fremovexattr(int(f.Fd()), vouchXattr)
		var now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &now) == nil && stampOf(&now).same(s) {
			s.vouched = true
			taken.Lock()
			taken.entries = append(taken.entries, takenEntry{c.dir, key, s})
			taken.Unlock()
		}
	}
	c.mu.Lock()
	c.got[key] = s
	c.mu.Unlock()
	return b, true
}

func (c *fileCache) Put(key string, value []byte) { storeEntry(c.dir, key, value, maxCacheEntries) }

// Vouched reports whether the entry Get returned for key carried the mark
// of its device, inode, size and modification time, unchanged while Get
// took the mark off.
func (c *fileCache) Vouched(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[key].vouched
}

// Validated marks the entry Get returned for key, if it is still that file
// and was last written vouchSettle or more ago. Failures are silent: the
// next load validates again.
func (c *fileCache) Validated(key string) {
	c.mu.Lock()
	s, ok := c.got[key]
	c.mu.Unlock()
	if ok && s.mtime <= time.Now().Add(-vouchSettle).UnixNano() {
		markEntry(c.dir, key, s)
	}
}
