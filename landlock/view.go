package landlock

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// View is the session's private mount view (DESIGN.md section 7, "The
// session's private view") as the planner must see it: the init stage
// builds it in its own mount namespace before Landlock, so the floor is
// planned against the view, not against the host's tree.
type View struct {
	// Private directories get a fresh, empty tmpfs (/tmp, /var/tmp,
	// /dev/shm): the agent's temporary files are its own and the host's
	// (other sessions' files, sockets under /tmp) are out of sight.
	Private []string `json:"private"`
	// Hidden directories get an empty tmpfs too, to take the operator's
	// sockets out of the view ($XDG_RUNTIME_DIR, /run/dbus).
	Hidden []string `json:"hidden"`
	// Masked files (a socket such as /run/docker.sock) get /dev/null bound
	// over them.
	Masked []string `json:"masked"`
	// Fresh directories get a new instance of their filesystem: /proc.
	Fresh []string `json:"fresh"`
	// Keep lists paths inside Private or Hidden directories that the init
	// stage binds back at the same place (the workspace, the home
	// directory, paths the policy grants, sockets connect_paths names):
	// the same inodes, so the plan's rules for them hold.
	Keep []string `json:"keep"`
	// Caches are agents' caches, host directories shown at another
	// place (cachebind.go).
	Caches []CacheBind `json:"caches,omitempty"`
}

// covered returns the Private or Hidden directory that covers path (path
// itself or an ancestor), or "". The planner asks for every entry it
// looks at: no allocation.
func (v *View) covered(path string) string {
	for _, list := range [2][]string{v.Private, v.Hidden} {
		for _, r := range list {
			if within(path, r) {
				return r
			}
		}
	}
	return ""
}

// Covered returns the Private or Hidden directory that covers path
// (path itself or an ancestor), or "": a path the session's view replaces
// unless a Keep path brings it back (Kept).
func (v *View) Covered(path string) string { return v.covered(path) }

// Kept returns the Keep path that path is or lies below, or "".
func (v *View) Kept(path string) string { return v.kept(path) }

// takesFrom reports whether the view may take an entry away from the
// host's listing of path: a masked file or a covered directory directly in
// it. (An entry below a covered directory is listed here only inside a
// kept path, which keeps the entry too.)
func (v *View) takesFrom(path string) bool {
	for _, list := range [3][]string{v.Masked, v.Private, v.Hidden} {
		for _, x := range list {
			i := strings.LastIndexByte(x, '/')
			if i > 0 && x[:i] == path || i == 0 && path == "/" && x != "/" {
				return true
			}
		}
	}
	return false
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	return path == dir || dir == "/" || hasDirPrefix(path, dir)
}

// hasDirPrefix is strings.HasPrefix(s, dir+"/") without building the
// prefix: the planner asks it for every entry it lists.
func hasDirPrefix(s, dir string) bool {
	return len(s) > len(dir) && s[len(dir)] == '/' && s[:len(dir)] == dir
}

// kept returns the Keep path that path is or lies below, or "".
func (v *View) kept(path string) string {
	for _, k := range v.Keep {
		if within(path, k) {
			return k
		}
	}
	return ""
}

// Check validates the view: absolute clean paths, Keep paths strictly
// inside a Private or Hidden directory.
func (v *View) Check() error {
	for _, list := range [][]string{v.Private, v.Hidden, v.Masked, v.Fresh, v.Keep} {
		for _, p := range list {
			if p == "" || p[0] != '/' || p == "/" || path.Clean(p) != p {
				return fmt.Errorf("landlock: view: %q is not a clean absolute path below /", p)
			}
		}
	}
	for _, k := range v.Keep {
		if r := v.covered(k); r == "" || r == k {
			return fmt.Errorf("landlock: view: kept path %s is not inside a private or hidden directory", k)
		}
	}
	return v.checkCaches()
}

// FS returns base as the agent will see it in the view: a covered
// directory holds only the way to the kept paths, made of directories the
// init stage creates (Info.View: their inodes do not exist yet), and the
// kept paths themselves; masked files are gone; a fresh filesystem's root
// is a view inode with no entries the planner may rely on.
func (v *View) FS(base FS) FS { return viewFS{base: base, v: v} }

type viewFS struct {
	base FS
	v    *View
}

// viewDir is the Info of a directory the init stage makes.
var viewDir = Info{Type: TypeDir, View: true} // no link count: see infoOf

func (f viewFS) Lstat(path string) (Info, error) {
	src, info, base, err := f.lstatRoute(path)
	if base {
		return f.base.Lstat(src)
	}
	return info, err
}

// linkStat forwards the hard-link check's question to the base where
// Lstat would (a Recorder keeps less of its answer than of an Lstat).
func (f viewFS) linkStat(path string) (Info, bool) {
	src, info, base, err := f.lstatRoute(path)
	if base {
		return linkStat(f.base, src)
	}
	if err != nil || info.Nlink < 2 {
		return Info{}, false
	}
	return info, true
}

// lstatRoute says how the view answers Lstat of path: by the base's Lstat
// of src (base set), or with info and err.
func (f viewFS) lstatRoute(path string) (src string, info Info, base bool, err error) {
	if slices.Contains(f.v.Masked, path) {
		return "", Info{}, false, fs.ErrNotExist
	}
	if src, ok := f.v.bound(path); ok {
		return src, Info{}, true, nil
	}
	if s := f.v.sealed(path); s != "" {
		if s == path {
			return "", viewDir, false, nil
		}
		return "", Info{}, false, fs.ErrNotExist
	}
	if slices.Contains(f.v.Fresh, path) {
		return "", viewDir, false, nil
	}
	for _, fr := range f.v.Fresh {
		if within(path, fr) {
			return "", Info{}, false, fs.ErrNotExist // the planner must not rely on what a fresh instance holds
		}
	}
	if f.v.covered(path) == "" || f.v.kept(path) != "" {
		return path, Info{}, true, nil
	}
	if f.onTheWay(path) {
		return "", viewDir, false, nil
	}
	return "", Info{}, false, fs.ErrNotExist
}

// onTheWay reports whether path, inside a covered directory, is that
// directory or an ancestor of a kept path.
func (f viewFS) onTheWay(path string) bool {
	if slices.Contains(f.v.Private, path) || slices.Contains(f.v.Hidden, path) || f.v.onTheWayToCache(path) {
		return true
	}
	for _, k := range f.v.Keep {
		if hasDirPrefix(k, path) {
			return true
		}
	}
	return false
}

func (f viewFS) ReadDir(path string) ([]DirEntry, error) {
	if src, ok := f.v.bound(path); ok {
		return f.base.ReadDir(src)
	}
	if s := f.v.sealed(path); s != "" {
		if s == path {
			return nil, nil
		}
		return nil, fs.ErrNotExist
	}
	if slices.Contains(f.v.Fresh, path) {
		return nil, nil
	}
	for _, fr := range f.v.Fresh {
		if within(path, fr) {
			return nil, fs.ErrNotExist // as Lstat answers
		}
	}
	if f.v.covered(path) == "" || f.v.kept(path) != "" {
		ents, err := f.base.ReadDir(path)
		if err != nil {
			return nil, err
		}
		if !f.v.takesFrom(path) {
			return ents, nil
		}
		return slices.DeleteFunc(ents, func(e DirEntry) bool {
			child := join(path, e.Name)
			return slices.Contains(f.v.Masked, child) ||
				f.v.covered(child) != "" && !f.onTheWay(child) && f.v.kept(child) == ""
		}), nil
	}
	if !f.onTheWay(path) {
		return nil, fs.ErrNotExist
	}
	// The next component of each kept path and bind target below path.
	seen := map[string]bool{}
	var out []DirEntry
	for _, k := range slices.Concat(f.v.Keep, f.v.targets()) {
		rest, ok := strings.CutPrefix(k, strings.TrimSuffix(path, "/")+"/")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, "/")
		if seen[name] {
			continue
		}
		seen[name] = true
		t := TypeDir
		if child := join(path, name); child == k {
			info, err := f.Lstat(k)
			if err != nil {
				continue // a kept path that vanished is not bound
			}
			t = info.Type
		}
		out = append(out, DirEntry{Name: name, Type: t})
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (f viewFS) Pseudo(path string) bool {
	if src, ok := f.v.bound(path); ok {
		return f.base.Pseudo(src)
	}
	if slices.Contains(f.v.Fresh, path) {
		return true
	}
	if f.v.sealed(path) != "" {
		return false
	}
	if f.v.covered(path) != "" && f.v.kept(path) == "" {
		return false
	}
	return f.base.Pseudo(path)
}

func (f viewFS) Resolve(path string) (string, error) {
	if src, ok := f.v.bound(path); ok {
		r, err := f.base.Resolve(src)
		return f.v.unbound(r), err
	}
	return f.base.Resolve(path)
}
