package landlock

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// CacheBind is a directory of the host that the session's view shows at another
// place: an agent's private cache, which lives in the launcher's state
// directory (on the built-in denylist) and appears inside a private
// temporary directory the policy lets the agent write. A bind mount
// shows the same inodes, so the plan's rules for Target name Source's
// inodes, and Landlock's walk up from a file in the cache passes Target's
// ancestors in the view, whose grants apply; it never passes the state
// directory.
type CacheBind struct {
	// Source is the directory bound, a clean absolute path.
	Source string `json:"source"`
	// Target is where the view shows it: strictly inside a Private or
	// Hidden directory, made by the init stage.
	Target string `json:"target"`
	// Seal is Source or an ancestor of it that the init stage covers
	// with an empty, read-only tmpfs once Source is bound, so that in
	// the view Source is reachable only at Target (and, for the planner,
	// what Seal holds on the host is not there to list).
	Seal string `json:"seal"`
}

// checkCaches validates v.Caches: clean absolute paths below /, each Target
// strictly inside a Private or Hidden directory and apart from the kept
// paths and the other targets, each Source at or below its Seal, and no
// kept path or Target inside a Seal.
func (v *View) checkCaches() error {
	for _, b := range v.Caches {
		for _, p := range []string{b.Source, b.Target, b.Seal} {
			if !cleanAbs(p) {
				return fmt.Errorf("landlock: view: bind %q is not a clean absolute path below /", p)
			}
		}
		if r := v.covered(b.Target); r == "" || r == b.Target {
			return fmt.Errorf("landlock: view: bind target %s is not inside a private or hidden directory", b.Target)
		}
		if !within(b.Source, b.Seal) {
			return fmt.Errorf("landlock: view: bind source %s is not at or below its seal %s", b.Source, b.Seal)
		}
		for _, k := range v.Keep {
			if within(k, b.Target) || within(b.Target, k) {
				return fmt.Errorf("landlock: view: bind target %s overlaps the kept path %s", b.Target, k)
			}
		}
		for _, o := range v.Caches {
			if o != b && (within(o.Target, b.Target) || within(b.Target, o.Target)) {
				return fmt.Errorf("landlock: view: bind targets %s and %s overlap", b.Target, o.Target)
			}
			if within(o.Target, b.Seal) {
				return fmt.Errorf("landlock: view: bind target %s lies inside the seal %s", o.Target, b.Seal)
			}
		}
		for _, k := range slices.Concat(v.Keep, v.Private, v.Hidden) {
			if within(k, b.Seal) {
				return fmt.Errorf("landlock: view: %s lies inside the seal %s", k, b.Seal)
			}
		}
	}
	return nil
}

func cleanAbs(p string) bool {
	return p != "" && p[0] == '/' && p != "/" && path.Clean(p) == p
}

// bound returns the host path that path, at or below a bind's Target,
// shows in the view.
func (v *View) bound(path string) (string, bool) {
	for _, b := range v.Caches {
		if rest, ok := strings.CutPrefix(path, b.Target); ok && (rest == "" || rest[0] == '/') {
			return b.Source + rest, true
		}
	}
	return "", false
}

// unbound maps a host path below a bind's Source back to the view, for
// the targets of symlinks in a bound directory.
func (v *View) unbound(path string) string {
	for _, b := range v.Caches {
		if rest, ok := strings.CutPrefix(path, b.Source); ok && (rest == "" || rest[0] == '/') {
			return b.Target + rest
		}
	}
	return path
}

// sealed returns the Seal that path is or lies below, or "".
func (v *View) sealed(path string) string {
	for _, b := range v.Caches {
		if within(path, b.Seal) {
			return b.Seal
		}
	}
	return ""
}

// onTheWayToCache reports whether path is a proper ancestor of a bind's
// Target.
func (v *View) onTheWayToCache(path string) bool {
	for _, b := range v.Caches {
		if hasDirPrefix(b.Target, path) {
			return true
		}
	}
	return false
}

// targets returns the bind targets.
func (v *View) targets() []string {
	var out []string
	for _, b := range v.Caches {
		out = append(out, b.Target)
	}
	return out
}
