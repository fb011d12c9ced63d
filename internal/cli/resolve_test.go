package cli

import (
	"fmt"
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
	// A directory this user may list but not search (for root, an
	// ordinary one): a listing would see the link in it, lstat may not.
	mk("home/u/shut")
	ln("../.config", "home/u/shut/link")
	if err := os.Chmod(filepath.Join(d, "home/u/shut"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(d, "home/u/shut"), 0o755) })
	paths := []string{
		"home/u/.ssh/id_ed25519", "home/u/.ssh", "home/u/cfg/git/config", "home/u/cfg2/git",
		"home/u/dangling", "home/u/dangling/deeper", "home/u/loop1/x", "ab/..", "ab/c/../c",
		"a/file", "a/file/x", "a/missing/../b", "a/missing/new", "home/u/.config/git/config",
		"home/u", "", "ab/./c", "home/u/shut/link/git", "home/u/shut/link", "home/u/shut/x", "home/u/shut/y", "home/u/shut/z",
		"home/u/absent1", "home/u/absent2/x", "home/u/.config/absent3",
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
	full := make([]string, 0, len(paths))
	for _, p := range paths {
		if p != "" {
			full = append(full, d+"/"+p)
		}
	}
	for _, order := range [][]string{paths, reversed(paths)} {
		for _, listing := range []bool{false, true} {
			r := newResolver()
			if listing {
				// Every directory with a few names asked of it is listed
				// (expect), and answers from the listing must be lstat's.
				r.expect(full)
			}
			for _, p := range order {
				if got := ask(r, p); got != alone[p] {
					t.Errorf("%q: with a shared resolver (listing %v) %+v, alone %+v", p, listing, got, alone[p])
				}
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

// TestResolverListsWhereExpected is the control that expect changes what
// the resolver asks: the absent names of a directory it listed cost no
// lstat each, and an lstat it still makes for what a listing cannot type.
func TestResolverListsWhereExpected(t *testing.T) {
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range 10 {
		paths = append(paths, fmt.Sprintf("%s/absent%d", d, i))
	}
	paths = append(paths, d+"/file")
	count := func(listing bool) int {
		r := newResolver()
		if listing {
			r.expect(paths)
		}
		for _, p := range paths {
			if _, err := r.canonical(p); err != nil {
				t.Fatal(err)
			}
		}
		return r.lstats
	}
	plain, listed := count(false), count(true)
	if listed >= plain || listed > plain-10 {
		t.Errorf("lstat calls: %d with the listing, %d without; want 10 fewer", listed, plain)
	}
}

// TestResolverListsOnlyLocal: a directory on another kind of filesystem
// than the local ones the kernel keeps (here procfs) is not listed, and
// its names are asked one by one (listNames).
func TestResolverListsOnlyLocal(t *testing.T) {
	var paths []string
	for _, n := range []string{"ostype", "osrelease", "hostname", "domainname", "absent1", "absent2"} {
		paths = append(paths, "/proc/sys/kernel/"+n)
	}
	if listNames("/proc/sys/kernel") != nil {
		t.Fatal("/proc/sys/kernel was listed")
	}
	count := func(listing bool) int {
		r := newResolver()
		if listing {
			r.expect(paths)
		}
		for _, p := range paths {
			r.canonical(p)
		}
		return r.lstats
	}
	if with, without := count(true), count(false); with != without {
		t.Errorf("lstat calls under procfs: %d with expect, %d without; want the same", with, without)
	}
	if listNames(t.TempDir()) == nil {
		t.Error("control: a test directory was not listed")
	}
}
