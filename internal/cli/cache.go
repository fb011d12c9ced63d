package cli

import (
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"sort"
)

// fileCache is the compiled-automata cache (tiers.Cache) in the launcher's
// state directory, which the built-in denylist keeps from agents. Failures
// are silent: a miss only costs a compile.
type fileCache struct{ dir string }

// maxCacheEntries bounds the cache; the least recently written go first.
const maxCacheEntries = 16

// maxCacheEntry bounds one entry read back.
const maxCacheEntry = 64 << 20

func (c fileCache) Get(key string) ([]byte, bool) {
	f, err := os.Open(filepath.Join(c.dir, key))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxCacheEntry {
		return nil, false
	}
	if st.Size() == 0 {
		return nil, false
	}
	// Mapped, not read: the entry's tables are used in place (tiers.Cache).
	// The mapping lives as long as the process.
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return nil, false
	}
	return b, true
}

func (c fileCache) Put(key string, value []byte) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(value)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil || os.Rename(tmp.Name(), filepath.Join(c.dir, key)) != nil {
		os.Remove(tmp.Name())
		return
	}
	c.prune()
}

func (c fileCache) prune() {
	entries, err := os.ReadDir(c.dir)
	if err != nil || len(entries) <= maxCacheEntries {
		return
	}
	type aged struct {
		name string
		mod  int64
	}
	var all []aged
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			all = append(all, aged{e.Name(), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod < all[j].mod })
	for _, e := range all[:len(all)-maxCacheEntries] {
		os.Remove(filepath.Join(c.dir, e.name))
	}
}
