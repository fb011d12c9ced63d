package tiers

import (
	"errors"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/agent-launcher/agent-launcher/rules"
)

// globMatch compiles one pattern alone and matches name with it.
func globMatch(t testing.TB, pattern, name string) (bool, error) {
	globs, err := rules.ParsePattern(pattern)
	if err != nil {
		return false, err
	}
	a, err := compileAutomaton(globs)
	if errors.Is(err, ErrTooComplex) {
		return false, err // refused at compile time, with a clear error
	}
	if err != nil {
		t.Fatalf("compile %q: %v", pattern, err)
	}
	return len(a.matches(name)) > 0, nil
}

// checkAgainstDoublestar is the differential property: for every pattern the
// parser accepts, the automaton and doublestar.Match agree on name.
func checkAgainstDoublestar(t testing.TB, pattern, name string) {
	got, err := globMatch(t, pattern, name)
	if err != nil {
		return // outside the accepted syntax
	}
	if !doublestar.ValidatePattern(pattern) {
		t.Fatalf("accepted %q, which doublestar refuses", pattern)
	}
	want, derr := doublestar.Match(pattern, name)
	if derr != nil {
		t.Fatalf("accepted %q, doublestar.Match: %v", pattern, derr)
	}
	if got != want {
		t.Fatalf("pattern %q name %q: automaton %v, doublestar %v", pattern, name, got, want)
	}
}

var globCorpus = []struct{ pattern, name string }{
	{"/", "/"}, {"/", "/a"}, {"/", ""},
	{"/**", "/"}, {"/**", "/a/b"}, {"/**", ""},
	{"/a/**", "/a"}, {"/a/**", "/a/"}, {"/a/**", "/a/b/c"}, {"/a/**", "/ab"}, {"/a/**", "/b"},
	{"/a/**/b", "/a/b"}, {"/a/**/b", "/a/x/y/b"}, {"/a/**/b", "/a//b"}, {"/a/**/b", "/a/xb"}, {"/a/**/b", "/ab"},
	{"**/.env", "/.env"}, {"**/.env", "/home/u/.env"}, {"**/.env", "/home/u/x.env"}, {"**/.env", ".env"}, {"**/.env", "/home/.env/x"},
	{"**/.env/**", "/home/.env/x"}, {"**/.env/**", "/home/.env"},
	{"/home/*/x", "/home/u/x"}, {"/home/*/x", "/home/u/v/x"}, {"/home/*/x", "/home//x"},
	{"/a/*.pem", "/a/k.pem"}, {"/a/*.pem", "/a/.pem"}, {"/a/*.pem", "/a/b/k.pem"},
	{"/a/?", "/a/é"}, {"/a/?", "/a/\xff"}, {"/a/??", "/a/é"}, {"/a/?b", "/a/\xc3b"},
	{"/a/[a-c]x", "/a/bx"}, {"/a/[a-c]x", "/a/dx"}, {"/a/[-a]", "/a/-"}, {"/a/[a-]", "/a/-"}, {"/a/[\\]]", "/a/]"},
	{"/a/{b,c}/d", "/a/c/d"}, {"/a/{b,c/e}/d", "/a/c/e/d"}, {"/a/{b,{c,d}}", "/a/d"}, {"/a/{,b}c", "/a/c"},
	{"/a/\\*", "/a/*"}, {"/a/\\*", "/a/b"}, {"/a,b", "/a,b"},
	{"/a/�", "/a/\xff"}, {"/a/*x*y*", "/a/zxqyq"}, {"/a/*x*y", "/a/xyxy"},
	{"**/a/**/b/*", "/q/a/r/b/s"}, {"**/a/**/b/*", "/q/a/b/s"}, {"**/a/**/b/*", "/q/a/b/s/t"},
	{"/a/b*/**/c", "/a/bx/c"}, {"/a/b*/**/c", "/a/b/y/c"},
}

func TestGlobMatchesDoublestar(t *testing.T) {
	for _, c := range globCorpus {
		checkAgainstDoublestar(t, c.pattern, c.name)
	}
}

func FuzzGlobDifferential(f *testing.F) {
	for _, c := range globCorpus {
		f.Add(c.pattern, c.name)
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		// Keep each case small: the property is about semantics, and a few
		// braces over stars already make thousands of automaton states.
		if len(pattern) > 48 || len(name) > 96 || strings.Count(pattern, "{") > 3 || strings.Count(pattern, "*") > 6 {
			return
		}
		checkAgainstDoublestar(t, pattern, name)
	})
}
