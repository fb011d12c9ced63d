package landlock

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of /proc/self/mountinfo (proc(5)).
type Mount struct {
	ID         int
	Device     string // "major:minor"
	Root       string // the mount's root within its filesystem
	MountPoint string
	FSType     string // the filesystem type, after the " - " separator ("" if absent)
}

// ParseMountinfo parses the text of /proc/PID/mountinfo.
func ParseMountinfo(text string) ([]Mount, error) {
	var out []Mount
	for i, line := range strings.Split(text, "\n") {
		if line == "" {
			continue
		}
		// The kernel escapes a space, tab, newline and backslash in the
		// paths and separates fields with one space: split there alone
		// (strings.Fields would split a path at \r, \v, \f or U+00A0).
		f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' })
		if len(f) < 5 {
			return nil, fmt.Errorf("mountinfo line %d: too few fields", i+1)
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: mount id %q", i+1, f[0])
		}
		m := Mount{ID: id, Device: f[2], Root: unescapeMount(f[3]), MountPoint: unescapeMount(f[4])}
		if i := slices.Index(f[5:], "-"); i >= 0 && 5+i+1 < len(f) {
			m.FSType = f[5+i+1]
		}
		out = append(out, m)
	}
	return out, nil
}

// unescapeMount undoes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func rel(p, dir string) string {
	if p == dir {
		return ""
	}
	if dir == "/" {
		return p[1:]
	}
	return p[len(dir)+1:]
}

func joinRel(dir, r string) string {
	if r == "" {
		return dir
	}
	return join(dir, r)
}

// AliasError reports a protected path that another mount of the same
// filesystem exposes inside a granted tree.
type AliasError struct {
	Protected, Alias string
	Rule             string
}

func (e *AliasError) Error() string {
	return fmt.Sprintf("%s is protected, but the same files are mounted again at %s, which the rule for %s grants: Landlock rules follow the files, so the agent would reach them there; unmount it or narrow the policy", e.Protected, e.Alias, e.Rule)
}

// CheckMounts refuses a plan under which a protected entry is reachable
// through another mount of its filesystem (a bind mount) that a granted
// tree reaches. It reads only the mount table, never the trees.
func CheckMounts(pl *Plan, mounts []Mount) error {
	for _, p := range pl.Protected {
		var home *Mount
		for i := range mounts {
			m := &mounts[i]
			if within(p.Path, m.MountPoint) && (home == nil || len(m.MountPoint) >= len(home.MountPoint)) {
				home = m
			}
		}
		if home == nil {
			continue
		}
		fsPath := joinRel(home.Root, rel(p.Path, home.MountPoint))
		for i := range mounts {
			m := &mounts[i]
			if m.ID == home.ID || m.Device != home.Device {
				continue
			}
			var alias string
			switch {
			case within(fsPath, m.Root):
				alias = joinRel(m.MountPoint, rel(fsPath, m.Root))
			case within(m.Root, fsPath):
				alias = m.MountPoint // the mount shows part of the protected tree
			default:
				continue
			}
			if alias == p.Path {
				continue
			}
			for _, r := range pl.Rules {
				if within(alias, r.Path) && (r.Dir || r.Path == alias) || within(r.Path, alias) {
					return &AliasError{Protected: p.Path, Alias: alias, Rule: r.Path}
				}
			}
		}
	}
	return nil
}
