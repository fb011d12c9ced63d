package tiers

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/agent-launcher/agent-launcher/rules"
)

// referenceDecide is the specification of Decide written the slow, obvious
// way from DESIGN.md section 3, sharing nothing with the matcher but the
// loaded policy: every glob through doublestar.Match, the winner found by
// comparing candidates directly.
type refResult struct {
	verdict Verdict
	tier    Tier
}

func referenceDecide(p *rules.Policy, path string, op Op) refResult {
	if !refCanonical(path) || op >= numOps {
		return refResult{Denied, Deny}
	}
	type cand struct {
		r *rules.Rule
		g rules.Glob
	}
	var tiers, wps []cand
	except, execG, execO, restrictG, restrictO := false, false, false, false, false
	for _, r := range p.Rules {
		for _, g := range r.Globs {
			ok, err := doublestar.Match(g.Text, path)
			if err != nil {
				panic(fmt.Sprintf("doublestar refused %q: %v", g.Text, err))
			}
			if !ok {
				continue
			}
			switch r.Kind {
			case rules.KindTier:
				tiers = append(tiers, cand{r, g})
			case rules.KindWriteProtect:
				wps = append(wps, cand{r, g})
			case rules.KindException:
				except = true
			case rules.KindExec:
				if r.Source.Origin == rules.OriginAgent {
					execO = true
				} else {
					execG = true
				}
			}
		}
		if r.Kind == rules.KindExec {
			if r.Source.Origin == rules.OriginAgent {
				restrictO = true
			} else {
				restrictG = true
			}
		}
	}
	lifted := func(c cand) bool { return except && c.r.Exceptable() }
	// beats reports whether a wins over b.
	beats := func(a, b cand) bool {
		ad, bd := a.r.Tier == Deny, b.r.Tier == Deny
		if ad != bd {
			return ad // deny_paths and the built-in denylist always win
		}
		specific := func() int { // >0: a more specific
			if a.g.LiteralSegments != b.g.LiteralSegments {
				return a.g.LiteralSegments - b.g.LiteralSegments
			}
			if a.g.DoubleStar != b.g.DoubleStar {
				if b.g.DoubleStar {
					return 1
				}
				return -1
			}
			return len(a.g.Text) - len(b.g.Text)
		}
		if p.Precedence == rules.Restrictive {
			if a.r.Tier != b.r.Tier {
				return a.r.Tier < b.r.Tier
			}
			return specific() > 0
		}
		if s := specific(); s != 0 {
			return s > 0
		}
		return a.r.Tier < b.r.Tier
	}
	tier := p.Default
	var best, global *cand
	for i := range tiers {
		if lifted(tiers[i]) {
			continue
		}
		if best == nil || beats(tiers[i], *best) {
			best = &tiers[i]
		}
		if tiers[i].r.Source.Origin != rules.OriginAgent && (global == nil || beats(tiers[i], *global)) {
			global = &tiers[i]
		}
	}
	// Layering: an overlay's rule never answers any op more permissively
	// than a prompt the global file decides on its own (protections only
	// accumulate).
	if global != nil && best != global && (global.r.Tier == Prompt || global.r.Tier == PromptWrite) {
		for op := range numOps {
			if refVerdict(best.r.Tier, op) > refVerdict(global.r.Tier, op) {
				best = global
				break
			}
		}
	}
	// Where no global rule matches, the global default stands for it.
	if best != nil && global == nil && best.r.Source.Origin == rules.OriginAgent &&
		(p.GlobalDefault == Prompt || p.GlobalDefault == PromptWrite) {
		for op := range numOps {
			if refVerdict(best.r.Tier, op) > refVerdict(p.GlobalDefault, op) {
				best = nil
				tier = p.GlobalDefault
				break
			}
		}
	}
	if best != nil {
		tier = best.r.Tier
	}
	if tier == Write {
		for _, w := range wps {
			if !lifted(w) {
				tier = Read
			}
		}
	}
	v := refVerdict(tier, op)
	// Both the global file's and the overlay's exec_paths restrict.
	if op == OpExec && v != Denied && (restrictG && !execG || restrictO && !execO) {
		v = Denied
	}
	return refResult{v, tier}
}

// refVerdict is the table of DESIGN.md section 3 ("tiers to rights").
func refVerdict(tier Tier, op Op) Verdict {
	var v Verdict
	switch tier {
	case Deny:
		v = Denied
	case Prompt:
		v = NeedsApproval
	case PromptWrite:
		v = NeedsApproval
		if op == OpRead || op == OpExec {
			v = Allowed
		}
	case Read:
		v = Denied
		if op == OpRead || op == OpExec {
			v = Allowed
		}
	case Write:
		v = Allowed
	}
	return v
}

func refCanonical(p string) bool {
	if p == "/" {
		return true
	}
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// Vocabulary for generated policies and paths: enough overlap between
// patterns that precedence, write protection and exceptions all come into
// play.
var (
	fuzzPatterns = []string{
		"/a/**", "/a/b/**", "/a/*/c", "/a/b/c", "**/c", "**/c/**", "/a/{b,c}/**", "/a/*.x", "/a/b/*.x",
		"~/**", "~/w/**", "~/.ssh/config", "<workspace>/**", "<workspace>/.git/**", "<workspace>/s/**",
		"/a/?", "/a/[bc]/d", "**/.git/hooks/**", "/**", "/a/b/c/**", "~/w/.env", "~/*/b",
	}
	fuzzTiers    = []string{"deny_paths", "prompt_paths", "prompt_write_paths", "read_paths", "write_paths", "exec_paths"}
	fuzzSegments = []string{"a", "b", "c", "d", "x.x", ".env", ".env.x", ".git", "hooks", "config", "home", "u", "w",
		"s", ".ssh", "id_rsa", "k.pem", ".bashrc", "é", "\xff", ".", "..", ""}
	fuzzExceptions = []string{"~/w/.env", "<workspace>/.env", "~/.bashrc", "~/.ssh/config"}
)

// fuzzPolicy turns bytes into a policy file: each byte pair picks a list and
// a pattern; the first byte picks the default tier and precedence.
func fuzzPolicy(spec []byte) string {
	var b strings.Builder
	lists := map[string][]string{}
	def, prec := "deny", "specific"
	if len(spec) > 0 {
		def = []string{"deny", "prompt", "prompt-write", "read", "write"}[int(spec[0])%5]
		if spec[0]&0x80 != 0 {
			prec = "restrictive"
		}
		spec = spec[1:]
	}
	var exceptions []string
	overlay := map[string][]string{}
	for i := 0; i+1 < len(spec) && i < 40; i += 2 {
		if spec[i] == 0xff {
			exceptions = append(exceptions, fmt.Sprintf("%q", fuzzExceptions[int(spec[i+1])%len(fuzzExceptions)]))
			continue
		}
		l := fuzzTiers[int(spec[i]&0x7f)%len(fuzzTiers)]
		pat := fmt.Sprintf("%q", fuzzPatterns[int(spec[i+1])%len(fuzzPatterns)])
		if spec[i]&0x80 != 0 { // the agent overlay's
			overlay[l] = append(overlay[l], pat)
			continue
		}
		lists[l] = append(lists[l], pat)
	}
	fmt.Fprintf(&b, "[file_policy]\ndefault = %q\nprecedence = %q\n", def, prec)
	for _, l := range fuzzTiers {
		if len(lists[l]) > 0 {
			fmt.Fprintf(&b, "%s = [%s]\n", l, strings.Join(lists[l], ", "))
		}
	}
	if len(exceptions) > 0 {
		fmt.Fprintf(&b, "builtin_exceptions = [%s]\n", strings.Join(exceptions, ", "))
	}
	if len(overlay) > 0 {
		fmt.Fprintf(&b, "[agents.a.file_policy]\n")
		for _, l := range fuzzTiers {
			if len(overlay[l]) > 0 {
				fmt.Fprintf(&b, "%s = [%s]\n", l, strings.Join(overlay[l], ", "))
			}
		}
	}
	return b.String()
}

// fuzzPath turns bytes into an absolute path of vocabulary segments.
func fuzzPath(spec []byte) string {
	if len(spec) == 0 {
		return "/"
	}
	var segs []string
	for i, c := range spec {
		if i >= 8 {
			break
		}
		segs = append(segs, fuzzSegments[int(c)%len(fuzzSegments)])
	}
	return "/" + strings.Join(segs, "/")
}

// checkDecide is the Decide property: for every op, Decide agrees with the
// reference on verdict and tier, and DecideAll with Decide.
func checkDecide(t *testing.T, policySpec, pathSpec []byte) {
	doc := fuzzPolicy(policySpec)
	m := cachedMatcher(t, doc)
	paths := []string{fuzzPath(pathSpec), "/home/u/proj" + fuzzPath(pathSpec), "/home/u" + fuzzPath(pathSpec)}
	for _, path := range paths {
		all := m.DecideAll(path)
		for op := range numOps {
			d := m.Decide(path, op)
			if all[op] != d {
				t.Fatalf("policy:\n%s\nDecideAll(%q)[%s] = %+v, Decide %+v", doc, path, op, all[op], d)
			}
			ref := referenceDecide(m.Policy(), path, op)
			if d.Verdict != ref.verdict || d.Tier != ref.tier {
				t.Fatalf("policy:\n%s\nDecide(%q, %s) = %s/%s (%s), reference %s/%s", doc, path, op, d.Verdict, d.Tier, d.Why, ref.verdict, ref.tier)
			}
			if d.Rule == nil || d.Why == "" {
				t.Fatalf("Decide(%q, %s) has no rule or reason: %+v", path, op, d)
			}
		}
	}
}

// cachedMatcher compiles doc once per fuzz process: the built-in rules make
// a compile cost milliseconds, and mutations often change only the path.
func cachedMatcher(t *testing.T, doc string) *Matcher {
	matcherCacheMu.Lock()
	m, ok := matcherCache[doc]
	matcherCacheMu.Unlock()
	if ok {
		return m
	}
	m = compileTOML(t, doc, func(o *rules.Options) {
		if strings.Contains(doc, "[agents.a.file_policy]") {
			o.Agent = "a"
		}
	})
	matcherCacheMu.Lock()
	if len(matcherCache) > 512 {
		clear(matcherCache)
	}
	matcherCache[doc] = m
	matcherCacheMu.Unlock()
	return m
}

var (
	matcherCacheMu sync.Mutex
	matcherCache   = map[string]*Matcher{}
)

var decideCorpus = []struct{ policy, path []byte }{
	{[]byte{0, 0x84, 0, 1, 0}, []byte{0, 1, 2}},       // an overlay write beside a global prompt
	{[]byte{0x80, 0x84, 1, 2, 0}, []byte{0, 1, 2}},    // the same under restrictive
	{[]byte{4, 0x81, 1, 0x84, 2, 4, 0}, []byte{0, 1}}, // overlay prompt, overlay write
	{[]byte{0, 4, 0, 3, 1}, []byte{0, 1, 2}},
	{[]byte{0x83, 4, 0, 3, 1, 2, 5}, []byte{0, 1}},
	{[]byte{3, 4, 10, 4, 12, 0xff, 0}, []byte{13, 12, 20, 5}},
	{[]byte{4, 4, 19, 0xff, 2, 0xff, 1}, []byte{17}},
	{[]byte{1, 5, 19, 3, 0, 4, 11, 0, 18}, []byte{13, 14, 11, 15}},
	{[]byte{0x84, 0, 4, 4, 3, 2, 14, 1, 15}, []byte{7, 8, 9}},
	{[]byte{2, 4, 13, 3, 16, 2, 17}, []byte{0, 2, 3}},
	{[]byte{4, 4, 19, 0, 21, 0xff, 0}, []byte{12, 5}},
	{[]byte{0, 4, 0, 3, 15}, []byte{0, 18, 19}},
	{[]byte{0, 4, 0}, []byte{0, 20, 1}},
}

func TestDecideMatchesReference(t *testing.T) {
	for i, c := range decideCorpus {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkDecide(t, c.policy, c.path) })
	}
}

func FuzzDecide(f *testing.F) {
	for _, c := range decideCorpus {
		f.Add(c.policy, c.path)
	}
	f.Fuzz(func(t *testing.T, policy, path []byte) {
		checkDecide(t, policy, path)
	})
}

// checkRulesBelow is RulesBelow's property: every rule that matches a path
// below dir is in RulesBelow(dir).
func checkRulesBelow(t *testing.T, policySpec, dirSpec, restSpec []byte) {
	doc := fuzzPolicy(policySpec)
	m := cachedMatcher(t, doc)
	for _, dir := range []string{fuzzPath(dirSpec), "/home/u/proj" + fuzzPath(dirSpec), "/home/u" + fuzzPath(dirSpec)} {
		if !refCanonical(dir) {
			if m.RulesBelow(dir) != nil {
				t.Fatalf("RulesBelow(%q) of a non-canonical dir is not nil", dir)
			}
			continue
		}
		below := map[*rules.Rule]bool{}
		for _, r := range m.RulesBelow(dir) {
			below[r] = true
		}
		path := strings.TrimSuffix(dir, "/") + fuzzPath(restSpec)
		if path == dir || !refCanonical(path) {
			continue
		}
		for _, r := range m.Policy().Rules {
			for _, g := range r.Globs {
				if ok, _ := doublestar.Match(g.Text, path); ok && !below[r] {
					t.Fatalf("policy:\n%s\n%q matches %q below %q, but RulesBelow misses it", doc, r.Pattern, path, dir)
				}
			}
		}
	}
}

func TestRulesBelow(t *testing.T) {
	for i, c := range decideCorpus {
		for j, rest := range [][]byte{{0}, {1, 2}, {5}, {13, 12, 20}, {7, 8, 9}, {4, 4, 4, 4}} {
			t.Run(fmt.Sprint(i, "/", j), func(t *testing.T) { checkRulesBelow(t, c.policy, c.path, rest) })
		}
	}
	// Precision where it is cheap to state.
	m := compileTOML(t, "[file_policy]\npresets = [\"system\"]\nwrite_paths = [\"<workspace>/**\"]\ndeny_paths = [\"<workspace>/secret/**\"]\n")
	has := func(dir, pattern string) bool {
		return slices.ContainsFunc(m.RulesBelow(dir), func(r *rules.Rule) bool { return r.Pattern == pattern })
	}
	for _, c := range []struct {
		dir, pattern string
		want         bool
	}{
		{"/usr", "/usr/**", true},
		{"/usr", "~/.ssh/**", false},
		{"/usr", "<workspace>/**", false},
		{testWS, "<workspace>/secret/**", true},
		{testWS, "~/**/.env", true},
		{testWS + "/src", "<workspace>/secret/**", false},
		{testHome, "~/.ssh/**", true},
		{"/", "/etc/shadow", true},
	} {
		if got := has(c.dir, c.pattern); got != c.want {
			t.Errorf("%q in RulesBelow(%q) = %v, want %v", c.pattern, c.dir, got, c.want)
		}
	}
}

func FuzzRulesBelow(f *testing.F) {
	for _, c := range decideCorpus {
		f.Add(c.policy, c.path, []byte{1, 2})
	}
	f.Fuzz(func(t *testing.T, policy, dir, rest []byte) {
		checkRulesBelow(t, policy, dir, rest)
	})
}
