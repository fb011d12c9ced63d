package landlock

import (
	"sync"

	"errors"
	"fmt"
	"github.com/agent-launcher/agent-launcher/tiers"
	"slices"
	"strings"
	"testing"
)

var (
	fuzzLists    = []string{"deny_paths", "prompt_paths", "prompt_write_paths", "read_paths", "write_paths", "exec_paths"}
	fuzzPatterns = []string{
		"<workspace>/**", "<workspace>/a/**", "<workspace>/a/b", "<workspace>/*.txt", "<workspace>/**/x",
		"<workspace>/c/**", "<workspace>/a/*/y", "~/**", "~/d/**", "/usr/**", "/etc/**", "/**", "/tmp/**",
		"<workspace>/a/b/**", "**/y", "<workspace>/{a,c}/b", "~/.cache/**", "<workspace>/c",
	}
	fuzzNames = []string{"a", "b", "c", "x", "y", ".env", "k.pem", "z.txt", ".git", "hooks", "config", "d"}
)

// fuzzDoc turns bytes into a policy file.
func fuzzDoc(spec []byte) string {
	var b strings.Builder
	def, prec := "deny", "specific"
	if len(spec) > 0 {
		def = []string{"deny", "prompt", "prompt-write", "read", "write"}[int(spec[0])%5]
		if spec[0]&0x80 != 0 {
			prec = "restrictive"
		}
		spec = spec[1:]
	}
	lists := map[string][]string{}
	for i := 0; i+1 < len(spec) && i < 24; i += 2 {
		l := fuzzLists[int(spec[i])%len(fuzzLists)]
		lists[l] = append(lists[l], fmt.Sprintf("%q", fuzzPatterns[int(spec[i+1])%len(fuzzPatterns)]))
	}
	fmt.Fprintf(&b, "[file_policy]\ndefault = %q\nprecedence = %q\n", def, prec)
	for _, l := range fuzzLists {
		if len(lists[l]) > 0 {
			fmt.Fprintf(&b, "%s = [%s]\n", l, strings.Join(lists[l], ", "))
		}
	}
	return b.String()
}

// fuzzTree turns bytes into a snapshot: each byte pair adds a path of up
// to four names under the workspace, the home or /usr, a file, a directory
// or a symlink.
func fuzzTree(spec []byte) *memFS {
	paths := []string{"/home/u/.local/state/agent-launcher/", "/usr/bin/sh", "/etc/passwd", "/tmp/"}
	for i := 0; i+1 < len(spec) && i < 64; i += 2 {
		root := []string{testWS, testHome, "/usr", testWS + "/a"}[spec[i]%4]
		depth := int(spec[i]>>2)%4 + 1
		segs := []string{root}
		x := spec[i+1]
		for d := 0; d < depth; d++ {
			segs = append(segs, fuzzNames[int(x+byte(d*7))%len(fuzzNames)])
		}
		p := strings.Join(segs, "/")
		switch spec[i] >> 6 {
		case 1:
			p += "/"
		case 2:
			p += "@"
		}
		paths = append(paths, p)
	}
	fsys := newMemFS()
	for _, p := range paths {
		// A path whose parent is a file or symlink cannot exist.
		ok := true
		for d := p; d != "/"; {
			d = d[:max(strings.LastIndexByte(strings.TrimRight(d, "/@"), '/'), 1)]
			if i, found := fsys.entries[d]; found && i.Type != TypeDir {
				ok = false
				break
			}
			if d == "/" {
				break
			}
		}
		if name := strings.TrimRight(p, "/@"); ok {
			if _, found := fsys.entries[name]; !found {
				fsys.addPath(p)
			}
		}
	}
	return fsys
}

// matchers caches compiled policies across fuzz inputs: compiling the
// built-in rules dominates an input's cost, and mutations often keep the
// policy.
var (
	matchersMu sync.Mutex
	matchers   = map[string]*tiers.Matcher{}
)

func checkPlanProperty(t *testing.T, policy, tree []byte) {
	doc := fuzzDoc(policy)
	m := fuzzMatcher(t, doc)
	fsys := fuzzTree(tree)
	for _, abi := range []int{1, 3, 7} {
		pl, err := NewPlan(m, abi, fsys, Options{Canaries: []string{"/home/u/.local/state/agent-launcher"}})
		if errors.Is(err, ErrNoCanary) {
			continue
		}
		if err != nil {
			t.Fatalf("policy:\n%s\nNewPlan: %v", doc, err)
		}
		if pl.Handled != HandledFS(abi) {
			t.Fatalf("ABI %d: handled %s", abi, pl.Handled)
		}
		for _, r := range pl.Rules {
			if r.Access&^pl.Handled != 0 || r.Access == 0 || !r.Dir && r.Access&^FileRights != 0 {
				t.Fatalf("policy:\n%s\nbad rule %+v", doc, r)
			}
		}
		t.Run(fmt.Sprint(abi), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("policy:\n%s\nsnapshot: %q\n%s", doc, fsys.all(), pl.Format())
				}
			}()
			checkPlanSound(t, m, fsys, pl)
		})
		// With a scan root, as run plans: patterns that match names
		// anywhere are searched only in the roots (the home directory and
		// the workspace), and outside them the floor grants what the other
		// rules say. Inside a root every existing path must still get no
		// more than the policy allows, whatever is granted above it (here
		// the workspace, granted whole when a rule grants it, is no root),
		// or the plan must be refused (ErrExposed).
		roots := []string{testWS + "/a"}
		rpl, err := NewPlan(m, abi, fsys, Options{Canaries: []string{"/home/u/.local/state/agent-launcher"}, ScanRoots: roots})
		switch {
		case errors.Is(err, ErrExposed):
		case err != nil:
			t.Fatalf("policy:\n%s\nNewPlan with scan roots: %v", doc, err)
		default:
			for _, p := range fsys.all() {
				if !slices.ContainsFunc(roots, func(r string) bool { return within(p, r) }) {
					continue
				}
				info, _ := fsys.Lstat(p)
				if got, allowed := rpl.Grants(p, info.Type), rightsFor(planVerdicts(m, p), info.Type, false); got&^allowed != 0 {
					t.Fatalf("policy:\n%s\nsnapshot: %q\nscan roots: %s (%s) gets %s, the policy allows only %s\n%s", doc, fsys.all(), p, info.Type, got, allowed, rpl.Format())
				}
			}
		}
		// The same policy with the private view's mounts enforcing the
		// write protection.
		bpl := planWithBinds(t, m, abi, fsys)
		t.Run(fmt.Sprint(abi, "-binds"), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("policy:\n%s\nsnapshot: %q\n%s\nbinds: %+v\nunbound: %+v", doc, fsys.all(), bpl.Format(), bpl.Binds, bpl.Unbound)
				}
			}()
			checkPlanSound(t, m, fsys, bpl)
		})
	}
}

// planWithBinds plans as run does with a private view: on FloorPolicy,
// again with sibling rules for what a mount cannot protect, until nothing
// new is found.
func planWithBinds(t *testing.T, whole *tiers.Matcher, abi int, fsys FS) *Plan {
	t.Helper()
	pl, err := planBinds(whole, abi, fsys, Options{Canaries: []string{"/home/u/.local/state/agent-launcher"}})
	if err != nil {
		t.Fatalf("planning with binds: %v", err)
	}
	return pl
}

// planBinds plans fsys on FloorPolicy with opts and Integrity set, again
// with the paths no mount can protect kept by rules, until none is new.
func planBinds(whole *tiers.Matcher, abi int, fsys FS, opts Options) (*Plan, error) {
	opts.Integrity = whole
	var unbound []Unbound
	for range 4 {
		q, _, err := FloorPolicy(whole, fsys, true, unbound)
		if err != nil {
			return nil, err
		}
		floor, err := compileFloorMemo(q)
		if err != nil {
			return nil, err
		}
		pl, err := NewPlan(floor, abi, fsys, opts)
		if err != nil {
			return nil, err
		}
		if len(pl.Unbound) == 0 {
			pl.Unbound = unbound
			return pl, nil
		}
		unbound = append(unbound, pl.Unbound...)
	}
	return nil, fmt.Errorf("unbindable paths keep changing the plan: %+v", unbound)
}

var planCorpus = []struct{ policy, tree []byte }{
	{[]byte{0, 4, 0, 0, 12}, []byte{0, 5, 1, 4, 64, 2, 3, 9}},
	{[]byte{0, 4, 0, 1, 1, 2, 2}, []byte{0, 1, 0, 2, 3, 0, 67, 4}},
	{[]byte{3, 4, 0, 0, 4, 2, 13}, []byte{3, 1, 7, 7, 11, 3, 64, 64}},
	{[]byte{0x80, 4, 0, 0, 1, 3, 0, 1, 2}, []byte{0, 0, 4, 8, 12, 16, 20, 24}},
	{[]byte{4, 0, 14, 1, 17, 5, 4}, []byte{0, 6, 0, 9, 128, 1, 2, 5}},
	{[]byte{1, 4, 7, 3, 8, 0, 16}, []byte{1, 10, 5, 11, 9, 3, 0, 4}},
	{[]byte{0, 4, 0, 0, 2, 1, 15}, []byte{4, 0, 8, 1, 12, 2, 16, 3}},
	{[]byte{2, 4, 5, 2, 10, 5, 11}, []byte{2, 4, 6, 8, 10, 12, 14, 16}},
}

func TestPlanProperty(t *testing.T) {
	for i, c := range planCorpus {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkPlanProperty(t, c.policy, c.tree) })
	}
}

func FuzzPlan(f *testing.F) {
	for _, c := range planCorpus {
		f.Add(c.policy, c.tree)
	}
	f.Fuzz(func(t *testing.T, policy, tree []byte) {
		checkPlanProperty(t, policy, tree)
	})
}
