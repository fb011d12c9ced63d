package tiers

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agent-launcher/agent-launcher/rules"
)

// anchorHomes and anchorWorkspaces are the directories the anchored
// differential test loads policies with: runes that the patterns also use
// ("/home/u"), runes no pattern names (they share one class with every
// other such rune until the anchor's split it), non-ASCII runes, a rune a
// pattern's class holds ("k"), runes that glob syntax escapes, repeated
// runes, a workspace outside the home directory and one inside.
var (
	anchorHomes      = []string{"/home/u", "/home/zq", "/h/é😀", "/home/[k]*?", "/u/u/u", "/root"}
	anchorWorkspaces = []string{"/home/u/proj", "/w/zzz", "/home/zq/é/x", "/srv/{a,b}", "/home/u/.env", "/u/u/u/u"}
)

// loadAnchored loads doc with home and workspace, and compiles it twice:
// as the launcher does (its "**/" patterns grouped by anchor, anchor.go),
// and with no anchors (every "**/" pattern in one automaton, as before
// anchoring).
func loadAnchored(t testing.TB, doc, home, ws string) (anchored, plain *Matcher) {
	t.Helper()
	anchored = compileTOML(t, doc, func(o *rules.Options) {
		o.Home, o.Workspace = home, ws
		if strings.Contains(doc, "[agents.a.file_policy]") {
			o.Agent = "a"
		}
	})
	q := *anchored.Policy()
	q.Home, q.Workspace = "", ""
	plain, err := Compile(&q)
	if err != nil {
		t.Fatalf("compile without anchors: %v", err)
	}
	return anchored, plain
}

// anchorPaths returns the paths and directories to compare for anchors:
// each anchor, its proper prefixes, names that leave it in its last
// segment, and vocabulary paths below each.
func anchorPaths(anchors []string, spec []byte) []string {
	tail := fuzzPath(spec)
	out := []string{"/", tail, "/usr/bin/x"}
	for _, a := range anchors {
		out = append(out, a, a+"x", a+"é", a+"\xff", a+"\uFFFD", a+tail, a+"/.env", a+"/a/.env", a+"/.ssh/id_rsa", a+"/x/.git/hooks/pre-commit")
		for i := 1; i < len(a); i++ {
			if utf8.RuneStart(a[i]) {
				out = append(out, strings.TrimSuffix(a[:i], "/"), a[:i]+"\xff")
			}
		}
		if i := strings.LastIndexByte(a, '/'); i > 0 {
			out = append(out, a[:i]+"/other"+tail)
		}
	}
	return out
}

// checkAnchored is the anchoring property: a matcher whose "**/" patterns
// are grouped by anchor and relocated decides, explains, bounds subtrees
// and lists the rules below exactly as one compiled without anchors.
func checkAnchored(t *testing.T, policySpec, anchorSpec, pathSpec []byte) {
	home, ws := anchorHomes[0], anchorWorkspaces[0]
	if len(anchorSpec) > 0 {
		home = anchorHomes[int(anchorSpec[0])%len(anchorHomes)]
	}
	if len(anchorSpec) > 1 {
		ws = anchorWorkspaces[int(anchorSpec[1])%len(anchorWorkspaces)]
	}
	doc := fuzzPolicy(policySpec)
	a, p := loadAnchored(t, doc, home, ws)
	anchoredParts := 0
	for _, pt := range a.parts {
		if pt.anchor != "" {
			anchoredParts++
		}
	}
	for _, path := range anchorPaths([]string{home, ws}, pathSpec) {
		for op := range numOps {
			x, y := a.Decide(path, op), p.Decide(path, op)
			if x.Verdict != y.Verdict || x.Tier != y.Tier || !sameRule(x.Rule, y.Rule) || x.Why != y.Why {
				t.Fatalf("home %q, workspace %q, policy:\n%s\nDecide(%q, %s): anchored %v (%s), plain %v (%s)", home, ws, doc, path, op, x, x.Rule.Pattern, y, y.Rule.Pattern)
			}
		}
		if x, y := a.Explain(path, OpRead), p.Explain(path, OpRead); !reflect.DeepEqual(x.Matches, y.Matches) {
			t.Fatalf("home %q, workspace %q, policy:\n%s\nExplain(%q): anchored %+v, plain %+v", home, ws, doc, path, x.Matches, y.Matches)
		}
		if x, y := a.Subtree(path), p.Subtree(path); x != y {
			t.Fatalf("home %q, workspace %q, policy:\n%s\nSubtree(%q): anchored %+v, plain %+v", home, ws, doc, path, x, y)
		}
		if x, y := a.RulesBelow(path), p.RulesBelow(path); !slices.Equal(x, y) {
			t.Fatalf("home %q, workspace %q, policy:\n%s\nRulesBelow(%q): anchored %d rules, plain %d", home, ws, doc, path, len(x), len(y))
		}
	}
	if anchoredParts == 0 {
		t.Fatalf("home %q, workspace %q: no part is anchored (the built-in lists anchor some at both)", home, ws)
	}
	// check's warnings: the rules that never decide, and the prompts a
	// grant outranks.
	if x, y := a.Unused(), p.Unused(); !reflect.DeepEqual(x, y) {
		t.Fatalf("home %q, workspace %q, policy:\n%s\nUnused: anchored %s, plain %s", home, ws, doc, describeUnused(x), describeUnused(y))
	}
	if x, y := a.Overrides(), p.Overrides(); !reflect.DeepEqual(x, y) {
		t.Fatalf("home %q, workspace %q, policy:\n%s\nOverrides: anchored %d, plain %d", home, ws, doc, len(x), len(y))
	}
}

func describeUnused(us []Unused) string {
	var out []string
	for _, u := range us {
		by := "-"
		if u.By != nil {
			by = u.By.Pattern
		}
		out = append(out, u.Rule.Pattern+" by "+by)
	}
	return fmt.Sprint(out)
}

// sameRule: the same rule of the policy, or each matcher's default (each
// makes its own).
func sameRule(x, y *rules.Rule) bool {
	return x == y || x.Pattern == "(default)" && y.Pattern == "(default)" && x.Source == y.Source && x.Tier == y.Tier
}

var anchorCorpus = []struct{ policy, anchors, path []byte }{
	{nil, []byte{0, 0}, []byte{0, 1}},
	{[]byte{0, 4, 0, 3, 1}, []byte{1, 1}, []byte{5, 6}},
	{[]byte{4, 4, 19, 0, 21, 0xff, 0}, []byte{2, 2}, []byte{12, 5}},
	{[]byte{3, 4, 10, 4, 12, 0xff, 0}, []byte{3, 3}, []byte{13, 12, 20, 5}},
	{[]byte{0x84, 0, 4, 4, 3, 2, 14, 1, 15}, []byte{4, 4}, []byte{7, 8, 9}},
	{[]byte{1, 5, 19, 3, 0, 4, 11, 0, 18}, []byte{5, 5}, []byte{13, 14, 11, 15}},
	{[]byte{2, 4, 13, 3, 16, 2, 17}, []byte{0, 4}, []byte{0, 2, 3}},
	{[]byte{0, 0x84, 0, 1, 0}, []byte{2, 1}, []byte{18, 19}},
}

// TestAnchoredUnused: check's warnings are those of the patterns compiled
// together. "<workspace>/**/x" never decides where "**/x" denies, though
// the two now sit in different automata (the review's case, a workspace
// outside the home directory, and one inside); a rule anchored at the
// home directory is outranked by one at the workspace's names only there.
func TestAnchoredUnused(t *testing.T) {
	for _, c := range []struct{ doc, home, ws, want string }{
		{"[file_policy]\ndeny_paths = [\"**/x\"]\nread_paths = [\"<workspace>/**/x\"]\n", "/home/u", "/w", "[<workspace>/**/x by **/x]"},
		{"[file_policy]\ndeny_paths = [\"**/x\"]\nread_paths = [\"<workspace>/**/x\"]\n", "/home/u", "/home/u/p", "[<workspace>/**/x by **/x]"},
		{"[file_policy]\ndeny_paths = [\"~/**/x\"]\nread_paths = [\"<workspace>/**/x\"]\n", "/home/u", "/home/u/p", "[<workspace>/**/x by ~/**/x]"},
		{"[file_policy]\ndeny_paths = [\"~/**/x\"]\nread_paths = [\"<workspace>/**/x\"]\n", "/home/u", "/w", "[]"},
	} {
		a, p := loadAnchored(t, c.doc, c.home, c.ws)
		if got, plain := describeUnused(a.Unused()), describeUnused(p.Unused()); got != c.want || plain != c.want {
			t.Errorf("home %s, workspace %s, policy:\n%s\nUnused: anchored %s, unanchored %s; want %s", c.home, c.ws, c.doc, got, plain, c.want)
		}
	}
}

func TestAnchoredMatchesUnanchored(t *testing.T) {
	for i, c := range anchorCorpus {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkAnchored(t, c.policy, c.anchors, c.path) })
	}
	// Every home and workspace of the vocabulary, with the built-in rules
	// and a policy of "**/" patterns.
	for h := range anchorHomes {
		for w := range anchorWorkspaces {
			t.Run(fmt.Sprintf("h%d-w%d", h, w), func(t *testing.T) {
				checkAnchored(t, []byte{0, 0, 3, 4, 5, 1, 15}, []byte{byte(h), byte(w)}, []byte{0, 4, 6})
			})
		}
	}
}

func FuzzAnchored(f *testing.F) {
	for _, c := range anchorCorpus {
		f.Add(c.policy, c.anchors, c.path)
	}
	f.Fuzz(checkAnchored)
}

// TestAnchoredGroupsShared: the "**/" automata of the built-in lists are
// compiled once and taken from the cache for another workspace and
// another home directory: there only the matcher's own entry is new. The built-in lists protect the same names under the
// home directory and the workspace, so their two groups share one entry.
func TestAnchoredGroupsShared(t *testing.T) {
	doc := "[file_policy]\npresets = [\"system\"]\nwrite_paths = [\"<workspace>/**\"]\n"
	cache := &mapCache{m: map[string][]byte{}}
	compileIn := func(home, ws string) (*Matcher, *Matcher) {
		a, plain := loadAnchored(t, doc, home, ws)
		m, err := CompileCached(a.Policy(), cache)
		if err != nil {
			t.Fatal(err)
		}
		return m, plain
	}
	first, _ := compileIn("/home/u", "/home/u/proj")
	deepKeys := map[string]bool{}
	for _, g := range first.groups() {
		if g.deep {
			if g.anchor == "" {
				t.Errorf("the built-in \"**/\" patterns left unanchored: %d of them", len(g.ids))
			}
			deepKeys[groupKey(&g)] = true
		}
	}
	if len(deepKeys) != 1 {
		t.Fatalf("the home directory's and the workspace's \"**/\" groups have %d keys; want one shared", len(deepKeys))
	}
	if cache.puts != 2 {
		t.Fatalf("first compile: %d puts; want the matcher's entry and one deep group's", cache.puts)
	}
	for _, c := range []struct{ home, ws string }{{"/home/u", "/home/u/other"}, {"/home/v", "/srv/ws"}, {"/h/é😀", "/h/é😀/p"}} {
		puts := cache.puts
		m, plain := compileIn(c.home, c.ws)
		if cache.puts-puts != 1 {
			t.Errorf("home %q, workspace %q: %d puts; want 1 (the matcher's entry)", c.home, c.ws, cache.puts-puts)
		}
		for _, path := range anchorPaths([]string{c.home, c.ws}, []byte{0, 15, 14}) {
			for op := range numOps {
				if x, y := m.Decide(path, op), plain.Decide(path, op); x.Verdict != y.Verdict || !sameRule(x.Rule, y.Rule) {
					t.Fatalf("home %q, workspace %q: Decide(%q, %s) = %v from the shared entry, %v compiled without anchors", c.home, c.ws, path, op, x, y)
				}
			}
			if x, y := m.Subtree(path), plain.Subtree(path); x != y {
				t.Fatalf("home %q, workspace %q: Subtree(%q) = %+v from the shared entry, %+v without anchors", c.home, c.ws, path, x, y)
			}
		}
	}
}

// TestRelocateClasses: relocation splits a rune class only where the
// anchor's rune shares it, keeps every class non-empty, and leaves the
// automaton matching exactly anchor + what it matched.
func TestRelocateClasses(t *testing.T) {
	g, err := rules.ParsePattern("/**/k[a-z]*")
	if err != nil {
		t.Fatal(err)
	}
	rel := g[0]
	base, err := compileAutomaton([]rules.Glob{rel})
	if err != nil {
		t.Fatal(err)
	}
	for _, anchor := range []string{"/a", "/k", "/é", "/aé😀", "/kkk", "/😀/😀"} {
		a, err := base.relocate(anchor)
		if err != nil {
			t.Fatalf("%q: %v", anchor, err)
		}
		// Classes in use: every class holds some rune.
		used := make([]bool, a.ncls)
		for _, c := range a.ascii {
			used[c] = true
		}
		for _, c := range a.hiCls {
			used[c] = true
		}
		for c, u := range used {
			if !u {
				t.Errorf("%q: class %d holds no rune", anchor, c)
			}
		}
		for _, r := range anchor {
			c := a.classOf(r)
			for _, s := range []rune{'a', 'k', 'z', 'Z', '0', 'é', '😀', 'è', 0x10FFFF, utf8.RuneError} {
				if s != r && a.classOf(s) == c {
					t.Errorf("%q: anchor rune %q shares class %d with %q", anchor, r, c, s)
				}
			}
		}
		for _, tc := range []struct {
			rest string
			want bool
		}{{"/kx", true}, {"/a/b/kab", true}, {"/k", false}, {"/x", false}, {"", false}, {"/a/kA", false}, {"/é/kz", true}} {
			if got := len(a.matches(anchor+tc.rest)) > 0; got != tc.want {
				t.Errorf("%q: matches(%q) = %v, want %v", anchor, anchor+tc.rest, got, tc.want)
			}
			if got := len(base.matches(tc.rest)) > 0; tc.rest != "" && got != tc.want {
				t.Errorf("unanchored: matches(%q) = %v, want %v", tc.rest, got, tc.want)
			}
		}
		for _, p := range []string{anchor[:1], strings.TrimSuffix(anchor, string([]rune(anchor)[len([]rune(anchor))-1:])), "/b/k", "/kx"} {
			if len(a.matches(p)) > 0 && p != anchor {
				t.Errorf("%q: %q matches, but does not start with the anchor", anchor, p)
			}
		}
	}
}

// TestRelocateWithoutSinkRange: relocate finds no dead state among the
// sinks sinkFrom names when that range is empty (as a compiled automaton
// came in the VM matrix under TCG, once), and relocates all the same: the
// range only lets run stop early.
func TestRelocateWithoutSinkRange(t *testing.T) {
	g, err := rules.ParsePattern("/**/id_rsa")
	if err != nil {
		t.Fatal(err)
	}
	a, err := compileAutomaton([]rules.Glob{g[0]})
	if err != nil {
		t.Fatal(err)
	}
	width := uint32(a.ncls + 1)
	a.sinkFrom = uint32(a.nstates)*width + 1 // no sinks named
	r, err := a.relocate("/home/u")
	if err != nil {
		t.Fatalf("relocate with no sink range: %v", err)
	}
	for _, c := range []struct {
		path string
		want bool
	}{{"/home/u/x/id_rsa", true}, {"/home/u/id_rsa", true}, {"/home/v/id_rsa", false}, {"/home/u/id_rsa.pub", false}} {
		if got := len(r.matches(c.path)) > 0; got != c.want {
			t.Errorf("matches(%q) = %v, want %v", c.path, got, c.want)
		}
	}
}
