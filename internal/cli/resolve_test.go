package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolverMatchesCanonical checks that a resolver, which reads each
// component once for many paths, resolves every path of a tree of
// symlinks exactly as canonical does alone, in either order of asking,
// errors included; and that what exists resolves as filepath.EvalSymlinks
// says (the positive control that canonical itself follows the links).
func TestResolverMatchesCanonical(t *testing.T) {
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(d, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	mk("home/u/.config/git")
	mk("dotfiles/ssh")
	mk("a/b/c")
	if err := os.WriteFile(filepath.Join(d, "a/file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ln("../../dotfiles/ssh", "home/u/.ssh") // relative, up
	ln(d+"/home/u/.config", "home/u/cfg")   // absolute
	ln("cfg", "home/u/cfg2")                // a chain
	ln("missing/x", "home/u/dangling")      // dangling
	ln("loop2", "home/u/loop1")             // a loop
	ln("loop1", "home/u/loop2")             //
	ln("a/b", "ab")                         // ab/.. is a, not d
	paths := []string{
		"home/u/.ssh/id_ed25519", "home/u/.ssh", "home/u/cfg/git/config", "home/u/cfg2/git",
		"home/u/dangling", "home/u/dangling/deeper", "home/u/loop1/x", "ab/..", "ab/c/../c",
		"a/file", "a/file/x", "a/missing/../b", "a/missing/new", "home/u/.config/git/config",
		"home/u", "", "ab/./c",
	}
	type answer struct{ path, err string }
	ask := func(r *resolver, p string) answer {
		full := p
		if p != "" {
			full = d + "/" + p
		}
		c, err := r.canonical(full)
		a := answer{path: c}
		if err != nil {
			a.err = err.Error()
		}
		return a
	}
	alone := map[string]answer{}
	for _, p := range paths {
		alone[p] = ask(nil, p)
	}
	for _, order := range [][]string{paths, reversed(paths)} {
		r := newResolver()
		for _, p := range order {
			if got := ask(r, p); got != alone[p] {
				t.Errorf("%q: with a shared resolver %+v, alone %+v", p, got, alone[p])
			}
		}
	}
	// The controls: links followed, the loop and the file refused.
	for p, want := range map[string]string{
		"home/u/.ssh/id_ed25519": d + "/dotfiles/ssh/id_ed25519",
		"home/u/cfg2/git":        d + "/home/u/.config/git",
		"home/u/dangling":        d + "/home/u/missing/x",
		"ab/..":                  d + "/a",
	} {
		if got := alone[p]; got.err != "" || got.path != want {
			t.Errorf("%q resolved to %+v, want %s", p, got, want)
		}
		if ev, err := filepath.EvalSymlinks(d + "/" + p); err == nil && ev != want {
			t.Errorf("%q: EvalSymlinks says %s, canonical %s", p, ev, want)
		}
	}
	for p, want := range map[string]string{"home/u/loop1/x": "too many levels", "a/file/x": "not a directory", "a/missing/../b": "does not exist", "": "empty path"} {
		if got := alone[p]; !strings.Contains(got.err, want) {
			t.Errorf("%q: %+v, want an error saying %q", p, got, want)
		}
	}
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}
