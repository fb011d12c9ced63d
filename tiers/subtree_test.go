package tiers

import (
	"fmt"
	"testing"
)

// checkSubtree is Subtree's property, which the Landlock planner's soundness
// rests on: for a path below dir, without anywhere-patterns every verdict
// lies between Weakest and Strongest; with them, an allowed op is allowed
// in Strongest unless an anywhere-pattern can grant.
func checkSubtree(t *testing.T, policySpec, dirSpec, restSpec []byte) {
	doc := fuzzPolicy(policySpec)
	m := cachedMatcher(t, doc)
	for _, dir := range []string{fuzzPath(dirSpec), "/home/u/proj" + fuzzPath(dirSpec), "/home/u" + fuzzPath(dirSpec)} {
		if !refCanonical(dir) {
			continue
		}
		s := m.Subtree(dir)
		if !s.Exact {
			continue
		}
		path := trimSlash(dir) + fuzzPath(restSpec)
		if path == dir || !refCanonical(path) {
			continue
		}
		for op := range numOps {
			v := m.Decide(path, op).Verdict
			if !s.Anywhere && (v < s.Weakest[op] || v > s.Strongest[op]) {
				t.Fatalf("policy:\n%s\nDecide(%q, %s) = %s, outside Subtree(%q) = [%s, %s]", doc, path, op, v, dir, s.Weakest[op], s.Strongest[op])
			}
			if !s.AnywhereGrant && v == Allowed && s.Strongest[op] != Allowed {
				t.Fatalf("policy:\n%s\nDecide(%q, %s) allowed, but Subtree(%q) says at most %s", doc, path, op, dir, s.Strongest[op])
			}
		}
	}
}

func trimSlash(s string) string {
	if s == "/" {
		return ""
	}
	return s
}

func TestSubtreeProperty(t *testing.T) {
	for i, c := range decideCorpus {
		for j, rest := range [][]byte{{0}, {1, 2}, {5}, {13, 12, 20}, {7, 8, 9}, {4, 4, 4, 4}, {2, 3}, {9, 9}} {
			t.Run(fmt.Sprint(i, "/", j), func(t *testing.T) { checkSubtree(t, c.policy, c.path, rest) })
		}
	}
}

func FuzzSubtree(f *testing.F) {
	for _, c := range decideCorpus {
		f.Add(c.policy, c.path, []byte{1, 2})
	}
	f.Fuzz(func(t *testing.T, policy, dir, rest []byte) {
		checkSubtree(t, policy, dir, rest)
	})
}

// TestSubtreeCases pins the answers a planner relies on.
func TestSubtreeCases(t *testing.T) {
	m := compileTOML(t, `[file_policy]
presets = ["system"]
write_paths = ["<workspace>/**"]
deny_paths = ["<workspace>/secret/**"]
prompt_write_paths = ["<workspace>/ci/**"]
`)
	A, D, P := Allowed, Denied, NeedsApproval
	for _, c := range []struct {
		dir                 string
		weakRead, weakWrite Verdict
		strongWrite         Verdict
		uniform, anywhere   bool
		anywhereGrant       bool
	}{
		// /usr: read everywhere below, nothing else applies.
		{"/usr", A, D, D, true, false, false},
		// A tree no name pattern reaches.
		{"/etc/ssl", A, D, D, true, false, false},
		// The workspace: write, with a deny and a prompt-write tree and the
		// built-in name patterns (anywhere).
		{testWS, D, D, A, false, true, false},
		// Inside the deny tree: nothing (the name patterns still reach in).
		{testWS + "/secret", D, D, D, false, true, false},
		// Inside the prompt-write tree: reads free, writes ask; a .env in
		// it is denied.
		{testWS + "/ci", A, P, P, false, true, false},
		// A plain subdirectory: write below, but names like .env anywhere.
		{testWS + "/src", A, A, A, false, true, false},
		// Below an existing .git/hooks directory every name is protected:
		// the built-in pattern ends in "/**" and applies to new names too.
		{testWS + "/.git/hooks", A, D, D, false, true, false},
		// The home directory: credentials (flat), name patterns (anywhere).
		{testHome, D, D, A, false, true, false},
		// The root: everything.
		{"/", D, D, A, false, true, false},
	} {
		s := m.Subtree(c.dir)
		if !s.Exact || s.Weakest[OpRead] != c.weakRead || s.Weakest[OpWrite] != c.weakWrite ||
			s.Strongest[OpWrite] != c.strongWrite || s.Uniform() != c.uniform || s.Anywhere != c.anywhere || s.AnywhereGrant != c.anywhereGrant {
			t.Errorf("Subtree(%q) = %+v (uniform %v), want weakest read %s write %s, strongest write %s, uniform %v, anywhere %v/%v",
				c.dir, s, s.Uniform(), c.weakRead, c.weakWrite, c.strongWrite, c.uniform, c.anywhere, c.anywhereGrant)
		}
	}
	if s := m.Subtree("/usr/../etc"); s.Exact {
		t.Errorf("Subtree of a non-canonical dir is exact: %+v", s)
	}
}
