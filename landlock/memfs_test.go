package landlock

import (
	"errors"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// memFS is an in-memory snapshot for planner tests. Paths ending in "/" are
// directories, "@" marks a symlink, "*N" a file with N hard links; every
// parent is created. Directories under /proc lie on a pseudo filesystem.
type memFS struct {
	entries map[string]Info
	kids    map[string]map[string]FileType
	targets map[string]string // symlink -> canonical target
	// ctime is each directory's change time: every change to its entries
	// moves it to clock, which each change advances (stampFS).
	ctime map[string]int64
	clock int64
}

func newMemFS(paths ...string) *memFS {
	m := &memFS{entries: map[string]Info{}, kids: map[string]map[string]FileType{}, ctime: map[string]int64{}, clock: 1e15}
	m.add("/", TypeDir, 1)
	for _, p := range paths {
		m.addPath(p)
	}
	return m
}

func (m *memFS) addPath(p string) {
	t, nlink := TypeFile, uint64(1)
	switch {
	case strings.HasSuffix(p, "/"):
		t, p = TypeDir, strings.TrimSuffix(p, "/")
	case strings.HasSuffix(p, "@"):
		t, p = TypeSymlink, strings.TrimSuffix(p, "@")
	case strings.Contains(p, "*"):
		i := strings.LastIndexByte(p, '*')
		nlink = uint64(p[i+1] - '0')
		p = p[:i]
	}
	for d := path.Dir(p); ; d = path.Dir(d) {
		if _, ok := m.entries[d]; !ok {
			m.add(d, TypeDir, 1)
		}
		if d == "/" {
			break
		}
	}
	m.add(p, t, nlink)
}

func (m *memFS) add(p string, t FileType, nlink uint64) {
	if t == TypeDir {
		nlink = 0 // as the OS's Lstat answers (infoOf)
	}
	dev := uint64(1)
	if p == "/proc" || strings.HasPrefix(p, "/proc/") {
		dev = 2
	}
	m.entries[p] = Info{Type: t, Dev: dev, Ino: uint64(len(m.entries) + 1), Nlink: nlink}
	m.touch(p)
	if p != "/" {
		m.touch(path.Dir(p))
		d := path.Dir(p)
		if m.kids[d] == nil {
			m.kids[d] = map[string]FileType{}
		}
		m.kids[d][path.Base(p)] = t
		// Re-add parents created later in order.
		for d != "/" {
			pd := path.Dir(d)
			if m.kids[pd] == nil {
				m.kids[pd] = map[string]FileType{}
			}
			m.kids[pd][path.Base(d)] = TypeDir
			d = pd
		}
	}
}

// touch moves p's change time to a new instant, well after the last.
func (m *memFS) touch(p string) {
	m.clock += 10 * stampSettle
	m.ctime[p] = m.clock
}

// stampFS is m with directory stamps, as the OS gives them on a trusted
// filesystem: a recording begins lag after the last change.
type stampFS struct {
	*memFS
	lag int64
}

func (s stampFS) stampNow() int64 { return s.clock + s.lag }

func (s stampFS) dirStamp(p string) (Stamp, bool) {
	i, ok := s.entries[p]
	if !ok || i.Type != TypeDir || i.Dev != 1 {
		return Stamp{}, false
	}
	c := s.ctime[p]
	return Stamp{Dev: i.Dev, Ino: i.Ino, Sec: c / 1e9, Nsec: c % 1e9}, true
}

// stampAbsent is the OS's absentStamper on the snapshot.
func (s stampFS) stampAbsent(dir, name string) (Stamp, bool, bool) {
	st, stamped := s.dirStamp(dir)
	_, err := s.Lstat(path.Join(dir, name))
	return st, stamped, errors.Is(err, fs.ErrNotExist)
}

func (m *memFS) Lstat(p string) (Info, error) {
	if i, ok := m.entries[p]; ok {
		return i, nil
	}
	return Info{}, &fs.PathError{Op: "lstat", Path: p, Err: fs.ErrNotExist}
}

func (m *memFS) ReadDir(p string) ([]DirEntry, error) {
	if i, ok := m.entries[p]; !ok || i.Type != TypeDir {
		return nil, &fs.PathError{Op: "readdir", Path: p, Err: fs.ErrNotExist}
	}
	var out []DirEntry
	for n, t := range m.kids[p] {
		out = append(out, DirEntry{Name: n, Type: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *memFS) Pseudo(p string) bool { return p == "/proc" }

func (m *memFS) Resolve(p string) (string, error) {
	if t, ok := m.targets[p]; ok {
		return t, nil
	}
	return "", &fs.PathError{Op: "resolve", Path: p, Err: fs.ErrNotExist}
}

// all returns every path of the snapshot.
func (m *memFS) all() []string {
	var out []string
	for p := range m.entries {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
