package tiers

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agent-launcher/agent-launcher/rules"
)

// Matcher is a compiled policy. It is immutable and safe for concurrent use
// by any number of goroutines.
//
// The glob alternatives compile into two automata. Running a union of
// patterns costs nothing per byte but multiplies the states of patterns
// that stay active side by side, and "**/" keeps a pattern active for the
// rest of the path: ten thousand project trees under the home directory
// times the built-in "~/**/.env"-style names would not fit. So patterns
// with a "**/" (deep: the built-in names, "**/x") go into one automaton
// and the rest (flat: literal trees, "*" within segments, trailing "/**")
// into the other, whose states grow like a trie. Decide runs both, each
// stopping early once its answer cannot change, and takes the winner by
// precedence rank.
type Matcher struct {
	pol   *rules.Policy
	alts  []alt
	parts []part // flat groups, then deep groups; at most maxParts
	nflat int    // the first nflat parts are the flat groups

	subtreeMu    sync.Mutex
	subtreeCache map[subtreeKey]Subtree
	partCache    map[[2]uint32]partCand

	// res holds, per rule (at the id of its first alternative, first),
	// the decision of every op, and in slot numOps the OpExec decision
	// when exec_paths matches nothing: for a KindTier rule under its
	// tier, for a KindWriteProtect rule of a write-tier path it makes
	// read-only. Each is made at the first decision that needs it (a load
	// used to spend a millisecond on the messages of rules no decision of
	// its run named). dfltRes is the same for the default tier.
	res     []atomic.Pointer[[numOps + 1]Decision]
	first   []int32
	overlay []bool // per alternative: the rule is the agent overlay's
	dfltRes [numOps + 1]Decision
	// gDefaultRes holds the decisions of the global file's default tier,
	// for the clamp where no global rule matches.
	gDefaultRes [numOps + 1]Decision

	// execG and execO say whether the global file and the overlay have
	// exec_paths; both restrictions apply.
	execG, execO   bool
	execRestricted bool
	invalid        [numOps]Decision
	dflt           *rules.Rule
	// unused is found at the first call of Unused or Overrides (check's),
	// not by every Compile: a run never asks, and the walk over every
	// accept set cost about 0.3 ms of its start-up.
	unusedOnce sync.Once
	unused     []Unused
	// cache is CompileCached's (nil for Compile), for unusedParts.
	cache Cache
}

// part is one automaton, the global ids of its alternatives and what each
// of its accept sets resolves to.
type part struct {
	a    *automaton
	ids  []int32 // local alternative -> index into Matcher.alts
	sums []summary
	// anchor is the directory every alternative of the part starts with
	// ("" for none: anchor.go); from is the state after it, and none the
	// summary of a path that does not start with it (it matches nothing).
	anchor string
	from   uint32
	none   *summary
}

// summary is what one accept set contributes to a decision.
type summary struct {
	tier, tierNX int32 // best KindTier alternative; best one an exception cannot lift; -1 for none
	glob, globNX int32 // the same among rules not from the agent overlay
	wp, wpNX     int32 // most specific KindWriteProtect alternative, likewise
	execG, execO bool  // a KindExec alternative of the global file, of the overlay, matched
	except       bool  // a KindException alternative matched: the path is excepted
}

// set returns the global alternative ids of accept set i.
func (p *part) set(i uint32) []int32 {
	local := p.a.sets[i]
	out := make([]int32, len(local))
	for j, l := range local {
		out[j] = p.ids[l]
	}
	return out
}

// lookup returns the summary of path's accept set.
func (p *part) lookup(path string) *summary {
	if p.anchor == "" {
		return &p.sums[p.a.acceptSet(p.a.run(path))]
	}
	if !strings.HasPrefix(path, p.anchor) {
		return p.none
	}
	return &p.sums[p.a.acceptSet(p.a.runFrom(p.from, path[len(p.anchor):]))]
}

// alt is one glob alternative of one rule.
type alt struct {
	rule *rules.Rule
	glob *rules.Glob
}

// deep reports whether a glob goes to the deep automaton.
func deep(g *rules.Glob) bool {
	return slices.ContainsFunc(g.Tokens, func(t rules.Token) bool { return t.Kind == rules.TokDirs })
}

// Compile compiles p into a Matcher. It fails only when the patterns are too
// complex for the automaton's size limits (ErrTooComplex); the error names
// the rule.
func Compile(p *rules.Policy) (*Matcher, error) {
	return compile(p, nil)
}

func compile(p *rules.Policy, cache Cache) (*Matcher, error) {
	m := &Matcher{pol: p, execRestricted: p.ExecRestricted(), cache: cache}
	for _, r := range p.Rules {
		if r.Kind == rules.KindExec {
			if r.Source.Origin == rules.OriginAgent {
				m.execO = true
			} else {
				m.execG = true
			}
		}
	}
	m.dflt = &rules.Rule{Pattern: "(default)", Expanded: "(default)", Kind: rules.KindTier, Tier: p.Default, Source: p.DefaultSource}
	for _, r := range p.Rules {
		for i := range r.Globs {
			m.alts = append(m.alts, alt{rule: r, glob: &r.Globs[i]})
		}
	}
	if len(m.alts) > maxAlternatives {
		return nil, fmt.Errorf("%w: %d glob alternatives after brace expansion, more than %d; use fewer or smaller {a,b} groups", ErrTooComplex, len(m.alts), maxAlternatives)
	}
	m.ranks(p.Precedence)
	groups := m.groups()
	var key string
	if cache != nil {
		key = cacheKey(m, groups)
		fromCache(cache, key, func(data []byte, vouched bool) bool {
			parts, nflat, err := decodeParts(data, groups, vouched)
			if err != nil {
				return false
			}
			m.parts, m.nflat = parts, nflat
			return true
		})
	}
	if m.parts == nil {
		if err := m.compileGroups(groups, cache); err != nil {
			return nil, err
		}
		if cache != nil {
			if data := encodeParts(m.parts, m.nflat); data != nil {
				cache.Put(key, data)
			}
		}
	}
	for k := range m.parts {
		pt := &m.parts[k]
		m.summarizePart(pt)
		if pt.anchor != "" {
			// The chain's first state accepts nothing, as every state a
			// path that leaves the chain ends in.
			pt.from = pt.a.run(pt.anchor)
			pt.none = &pt.sums[pt.a.acceptSet(pt.a.start)]
		}
	}
	m.dfltRes = tierDecisions(m.dflt, tierWhy(m.dflt, true))
	gd := &rules.Rule{Pattern: "(default)", Expanded: "(default)", Kind: rules.KindTier, Tier: p.GlobalDefault, Source: p.GlobalDefaultSource}
	m.gDefaultRes = tierDecisions(gd, tierWhy(gd, true)+", which the agent overlay cannot loosen")
	m.overlay = make([]bool, len(m.alts))
	m.res = make([]atomic.Pointer[[numOps + 1]Decision], len(m.alts))
	m.first = make([]int32, len(m.alts))
	byRule := make(map[*rules.Rule]int32, len(p.Rules)) // alternatives of one rule share their decisions
	for id, a := range m.alts {
		m.overlay[id] = a.rule.Source.Origin == rules.OriginAgent
		first, ok := byRule[a.rule]
		if !ok {
			first = int32(id)
			byRule[a.rule] = first
		}
		m.first[id] = first
	}
	for op := range numOps {
		m.invalid[op] = Decision{Op: op, Verdict: Denied, Tier: Deny, Rule: m.dflt,
			Why: "not a canonical absolute path (it must start with \"/\" and have no \".\", \"..\" or empty segments): denied"}
	}
	return m, nil
}

// compileGroups compiles the groups into m.parts: each group's automata
// taken from cache when an entry for exactly its globs (without their
// anchor) exists, compiled and stored there otherwise, and prefixed with
// the group's anchor (anchor.go).
func (m *Matcher) compileGroups(groups []group, cache Cache) error {
	for i := range groups {
		g := &groups[i]
		// The flat group names the workspace in nearly every policy
		// ("<workspace>/**"): an entry of its own would be of use only
		// where the matcher's is.
		gc := cache
		if !g.deep {
			gc = nil
		}
		// A cached entry whose automata do not relocate (relocate reads
		// every cell), or that would pass maxParts, is a miss, compiled
		// again and replaced.
		parts, cached, err := m.groupParts(g, gc, func(ps []part) bool {
			return len(m.parts)+len(ps) <= maxParts && relocateParts(ps, g.anchor) == nil
		})
		if err != nil {
			return err
		}
		if !cached {
			if err := relocateParts(parts, g.anchor); err != nil {
				return err
			}
		}
		m.parts = append(m.parts, parts...)
		if i == 0 {
			m.nflat = len(m.parts)
		}
		if len(m.parts) > maxParts {
			return fmt.Errorf("%w: the patterns need more than %d automata; use fewer patterns with \"**/\" in them", ErrTooComplex, maxParts)
		}
	}
	return nil
}

// groupParts returns g's automata, without its anchor: from cache (nil
// for none) when an entry for g's globs decodes and take accepts it
// (cached), else compiled, and stored in cache.
func (m *Matcher) groupParts(g *group, cache Cache, take func([]part) bool) (parts []part, cached bool, err error) {
	key := groupKey(g)
	if cache != nil && fromCache(cache, key, func(data []byte, vouched bool) bool {
		ps, err := decodeGroup(data, g.ids, vouched)
		if err != nil || take != nil && !take(ps) {
			return false
		}
		parts = ps
		return true
	}) {
		return parts, true, nil
	}
	if parts, err = m.compileGroup(g.ids, g.rel, g.budget()); err != nil {
		return nil, false, err
	}
	if cache != nil {
		if data := encodeGroup(parts, g.ids); data != nil {
			cache.Put(key, data)
		}
	}
	return parts, false, nil
}

// fromCache reports whether decode took the entry cache holds for key:
// decode gets it with whether the cache vouches for it (Voucher), and an
// entry taken that was not vouched for is reported validated.
func fromCache(cache Cache, key string, decode func(data []byte, vouched bool) bool) bool {
	data, ok := cache.Get(key)
	if !ok {
		return false
	}
	v, _ := cache.(Voucher)
	vouched := v != nil && v.Vouched(key)
	if !decode(data, vouched) {
		return false
	}
	if v != nil && !vouched {
		v.Validated(key)
	}
	return true
}

// relocateParts prefixes anchor to the automata of parts (none when anchor
// is ""); a panic (an automaton decoded from a damaged cache entry) is an
// error.
func relocateParts(parts []part, anchor string) (err error) {
	if anchor == "" {
		return nil
	}
	defer func() {
		if recover() != nil {
			err = errBadCache
		}
	}()
	for k := range parts {
		a, err := parts[k].a.relocate(anchor)
		if err != nil {
			return err
		}
		parts[k].a, parts[k].anchor = a, anchor
	}
	return nil
}

// Each automaton may grow to flatStates or deepStates states; a group of patterns that
// would grow past it (patterns that stay active side by side, such as
// several "**/x/**", multiply each other's states) is split in two by rules,
// and Decide runs one more automaton. maxParts bounds the splitting.
const (
	flatStates = 1 << 16 // trie-like: grows with the rule count, rarely splits
	deepStates = 1 << 14 // "**/" patterns: products; split early, fail fast
	maxParts   = 16
)

// compileGroup compiles the alternatives ids, whose globs are globs (the
// alternatives' own, or without their anchor), into as few automata as the
// state budget allows.
func (m *Matcher) compileGroup(ids []int32, globs []rules.Glob, budget int) ([]part, error) {
	a, err := compileAutomatonLimit(globs, budget)
	if err == nil {
		return []part{{a: a, ids: ids}}, nil
	}
	if !errors.Is(err, ErrTooComplex) || len(ids) == 0 {
		return nil, err
	}
	// Split in two; a group of one rule's alternatives that is still too
	// complex names the rule.
	if !slices.ContainsFunc(ids, func(id int32) bool { return m.alts[id].rule != m.alts[ids[0]].rule }) {
		r := m.alts[ids[0]].rule
		return nil, fmt.Errorf("%w: %s: %q alone is too complex; simplify it", ErrTooComplex, r.Source, r.Pattern)
	}
	mid := len(ids) / 2
	left, err := m.compileGroup(ids[:mid], globs[:mid], budget)
	if err != nil {
		return nil, err
	}
	if len(left) > maxParts {
		return nil, fmt.Errorf("%w: the patterns need more than %d automata", ErrTooComplex, maxParts)
	}
	right, err := m.compileGroup(ids[mid:], globs[mid:], budget)
	if err != nil {
		return nil, err
	}
	return append(left, right...), nil
}

// Policy returns the policy m was compiled from.
func (m *Matcher) Policy() *rules.Policy { return m.pol }

// Stats describes the compiled automata.
type Stats struct {
	Rules        int `json:"rules"`        // rules of every kind
	Alternatives int `json:"alternatives"` // glob alternatives after brace expansion
	NFANodes     int `json:"nfa_nodes"`
	States       int `json:"states"`      // DFA states
	Classes      int `json:"classes"`     // rune classes
	AcceptSets   int `json:"accept_sets"` // distinct sets of matching alternatives
	TableBytes   int `json:"table_bytes"`
}

// Stats returns the size of the compiled automata, summed.
func (m *Matcher) Stats() Stats {
	s := Stats{Rules: len(m.pol.Rules), Alternatives: len(m.alts)}
	for i := range m.parts {
		a := m.parts[i].a
		s.NFANodes += a.nfaNodes
		s.States += a.nstates
		s.Classes += a.ncls
		s.AcceptSets += len(a.sets)
		s.TableBytes += len(a.trans) * 4
	}
	return s
}

// ranks orders the alternatives by precedence and renumbers them in that
// order: a lower id wins among KindTier alternatives, and is the more
// specific among KindWriteProtect ones.
func (m *Matcher) ranks(prec rules.Precedence) {
	order := make([]int, len(m.alts))
	for i := range order {
		order[i] = i
	}
	specific := func(x, y alt) int {
		return cmp.Or(
			-cmp.Compare(x.glob.LiteralSegments, y.glob.LiteralSegments),
			boolCmp(x.glob.DoubleStar, y.glob.DoubleStar),
			-cmp.Compare(len(x.glob.Text), len(y.glob.Text)),
		)
	}
	slices.SortStableFunc(order, func(i, j int) int {
		x, y := m.alts[i], m.alts[j]
		// deny_paths and the built-in denylist win whatever the mode.
		if c := boolCmp(x.rule.Tier != Deny, y.rule.Tier != Deny); c != 0 {
			return c
		}
		if prec == rules.Restrictive {
			return cmp.Or(cmp.Compare(x.rule.Tier, y.rule.Tier), specific(x, y))
		}
		return cmp.Or(specific(x, y), cmp.Compare(x.rule.Tier, y.rule.Tier))
	})
	// Renumber the alternatives in rank order, so that comparing two ids
	// compares their ranks: Decide then picks winners without a load.
	sorted := make([]alt, len(m.alts))
	for r, i := range order {
		sorted[r] = m.alts[i]
	}
	m.alts = sorted
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// summarizePart resolves every accept set of pt (pt.sums).
func (m *Matcher) summarizePart(pt *part) {
	pt.sums = make([]summary, len(pt.a.sets))
	for i := range pt.a.sets {
		pt.sums[i] = m.summarize(pt.set(uint32(i)))
	}
}

// summarize resolves one accept set.
func (m *Matcher) summarize(set []int32) summary {
	s := summary{tier: -1, tierNX: -1, glob: -1, globNX: -1, wp: -1, wpNX: -1}
	for _, id := range set {
		a := m.alts[id]
		switch a.rule.Kind {
		case rules.KindException:
			s.except = true
		case rules.KindExec:
			if a.rule.Source.Origin == rules.OriginAgent {
				s.execO = true
			} else {
				s.execG = true
			}
		case rules.KindTier:
			s.tier = m.better(s.tier, id)
			if !a.rule.Exceptable() {
				s.tierNX = m.better(s.tierNX, id)
			}
			if a.rule.Source.Origin != rules.OriginAgent {
				s.glob = m.better(s.glob, id)
				if !a.rule.Exceptable() {
					s.globNX = m.better(s.globNX, id)
				}
			}
		case rules.KindWriteProtect:
			s.wp = m.moreSpecific(s.wp, id)
			if !a.rule.Exceptable() {
				s.wpNX = m.moreSpecific(s.wpNX, id)
			}
		}
	}
	return s
}

// clamp keeps protections from only accumulating across layers: where the
// rules outside the agent overlay alone decide prompt or prompt-write, a
// grant of the overlay (read, write) cannot win. t is the winner of all
// rules, g the winner of the rules outside the overlay.
func (m *Matcher) clamp(t, g int32) int32 {
	if g < 0 || t == g {
		return t
	}
	if gt := m.alts[g].rule.Tier; asks(gt) && weaker(m.alts[t].rule.Tier, gt) {
		return g
	}
	return t
}

// resolve returns the decisions for the winner t of all rules (-1: the
// default) given the winner g of the rules outside the overlay. Where the
// global file alone asks (g, or the global default when no rule of it
// matches), an overlay's rule that answers more permissively does not win.
func (m *Matcher) resolve(t, g int32) *[numOps + 1]Decision {
	if t < 0 {
		return &m.dfltRes
	}
	if !m.overlay[t] || t == g {
		return m.ruleRes(t)
	}
	if g >= 0 {
		if gt := m.alts[g].rule.Tier; asks(gt) && weaker(m.alts[t].rule.Tier, gt) {
			return m.ruleRes(g)
		}
		return m.ruleRes(t)
	}
	if gd := m.pol.GlobalDefault; asks(gd) && weaker(m.alts[t].rule.Tier, gd) {
		return &m.gDefaultRes
	}
	return m.ruleRes(t)
}

// ruleRes returns the decisions of alternative id's rule (m.res), made
// now if no decision needed them before: under its tier for a KindTier
// rule, capped at read for a KindWriteProtect rule.
func (m *Matcher) ruleRes(id int32) *[numOps + 1]Decision {
	slot := &m.res[m.first[id]]
	if d := slot.Load(); d != nil {
		return d
	}
	var d [numOps + 1]Decision
	if r := m.alts[id].rule; r.Kind == rules.KindWriteProtect {
		d = cappedDecisions(r)
	} else {
		d = tierDecisions(r, tierWhy(r, false))
	}
	if slot.CompareAndSwap(nil, &d) {
		return &d
	}
	return slot.Load() // made meanwhile by another decision: the same
}

// asks reports whether tier t makes someone approve some operation.
func asks(t Tier) bool { return t == Prompt || t == PromptWrite }

// weaker reports whether tier t answers some operation more permissively
// than tier u. The tiers are not ordered op by op: read denies the writes
// that prompt-write asks about, but lets through the reads prompt asks about.
func weaker(t, u Tier) bool {
	for op := range numOps {
		if verdicts[t][op] > verdicts[u][op] {
			return true
		}
	}
	return false
}

// better returns the KindTier alternative of lower rank; -1 is none.
// Ids are ranks (see ranks), and -1 as an unsigned number is the largest.
func (m *Matcher) better(x, y int32) int32 {
	if uint32(y) < uint32(x) {
		return y
	}
	return x
}

// moreSpecific returns the more specific KindWriteProtect alternative; the
// rank order is also the specificity order among them.
func (m *Matcher) moreSpecific(x, y int32) int32 { return m.better(x, y) }

// tierDecisions precomputes the answer of every operation under a tier
// rule, and in slot numOps the OpExec answer when exec_paths is set and
// matches nothing.
func tierDecisions(rule *rules.Rule, why string) [numOps + 1]Decision {
	var out [numOps + 1]Decision
	for op := range numOps {
		out[op] = decision(op, rule.Tier, rule, why)
	}
	out[numOps] = execDenied(rule.Tier, rule, why)
	return out
}

// execDenied is the OpExec decision when exec_paths is set and none of its
// rules matches: denied, whatever the tier.
func execDenied(tier Tier, rule *rules.Rule, why string) Decision {
	return Decision{Op: OpExec, Verdict: Denied, Tier: tier, Rule: rule,
		Why: why + "; exec_paths does not list it (when the global file and the agent overlay both set exec_paths, both must): exec denied"}
}

// cappedDecisions precomputes the answers for a write-tier path that the
// write protection rule wp makes read-only.
func cappedDecisions(wp *rules.Rule) [numOps + 1]Decision {
	why := "write tier capped at read by " + ruleRef(wp)
	var out [numOps + 1]Decision
	for op := range numOps {
		out[op] = decision(op, Read, wp, why)
	}
	out[numOps] = execDenied(Read, wp, why)
	return out
}

func decision(op Op, tier Tier, rule *rules.Rule, why string) Decision {
	v := verdicts[tier][op]
	if op == OpExec && tier == Deny {
		v = Denied
	}
	// Concatenated, not formatted: every load precomputes these for
	// every rule and operation.
	return Decision{Op: op, Verdict: v, Tier: tier, Rule: rule, Why: why + ": " + op.String() + " " + verdictWords[v]}
}

var verdictWords = [...]string{Denied: "denied", NeedsApproval: "needs approval", Allowed: "allowed"}

func tierWhy(r *rules.Rule, isDefault bool) string {
	if isDefault {
		return "no rule matches; default tier " + r.Tier.String() + " (" + r.Source.String() + ")"
	}
	return r.Tier.String() + " tier by " + ruleRef(r)
}

// ruleRef names a rule for messages: its pattern and where it was written.
func ruleRef(r *rules.Rule) string {
	s := strconv.Quote(r.Pattern) + " (" + r.Source.String()
	if r.Note != "" {
		s += ": " + r.Note
	}
	return s + ")"
}

// Decide returns the decision for op on path. path must be canonical and
// absolute (symlinks resolved, no ".", ".." or empty segments, no trailing
// "/"); any other path is denied. Decide does no I/O and does not allocate
// (but for the messages of a rule the first time a decision names it).
func (m *Matcher) Decide(path string, op Op) Decision {
	if op >= numOps || !canonical(path) {
		return m.invalid[op%numOps]
	}
	t, g, w, execG, execO := m.winners(path)
	return m.finish(op, t, g, w, execG, execO)
}

// DecideAll returns the decision for every operation on path, indexed by
// Op: the same as Decide(path, op) for each op, with the automata run once
// instead of once per operation.
func (m *Matcher) DecideAll(path string) [NumOps]Decision {
	if !canonical(path) {
		return m.invalid
	}
	t, g, w, execG, execO := m.winners(path)
	var all [NumOps]Decision
	for op := range numOps {
		all[op] = m.finish(op, t, g, w, execG, execO)
	}
	return all
}

// winners runs every automaton on path, a canonical path, and returns
// what finish combines: the winning rules (t of all, g of those outside
// the overlay, w of the write protection; -1 for none) and whether an
// exec_paths rule of either layer matched.
func (m *Matcher) winners(path string) (t, g, w int32, execG, execO bool) {
	// Most paths carry no exception: combine the plain winners, and only
	// when some automaton reports one, combine again without the rules it
	// lifts.
	s := m.parts[0].lookup(path)
	t, g, w = s.tier, s.glob, s.wp
	except := s.except
	execG, execO = s.execG, s.execO
	for i := 1; i < len(m.parts); i++ {
		s := m.parts[i].lookup(path)
		t, g, w = m.better(t, s.tier), m.better(g, s.glob), m.moreSpecific(w, s.wp)
		except, execG, execO = except || s.except, execG || s.execG, execO || s.execO
	}
	if except {
		t, g, w = -1, -1, -1
		for i := range m.parts {
			s := m.parts[i].lookup(path)
			t, g, w = m.better(t, s.tierNX), m.better(g, s.globNX), m.moreSpecific(w, s.wpNX)
		}
	}
	return t, g, w, execG, execO
}

// finish turns the winners of one path's rules (t of all, g of those
// outside the overlay, w of the write protection; -1 for none) and whether
// an exec_paths rule of either layer matched into the decision for op.
func (m *Matcher) finish(op Op, t, g, w int32, execG, execO bool) Decision {
	res := m.resolve(t, g)
	if res[op].Tier == Write && w >= 0 {
		res = m.ruleRes(w)
	}
	if op == OpExec && m.execRestricted && res[op].Verdict != Denied && (m.execG && !execG || m.execO && !execO) {
		return res[numOps]
	}
	return res[op]
}

// DecideRename returns the decision for renaming src to dst: OpDelete at src
// and OpCreate at dst, the more restrictive of the two. When both are
// allowed it returns the destination's decision.
//
// It decides on the two names only. Renaming a directory moves everything
// below it to new names, and what lies below is not something a name-based
// engine can see: a caller that performs renames itself (the launcher's
// supervisor does, for the kernels that cannot) must also decide on the
// entries under src and dst (RulesBelow says which rules can apply there).
// The kernel floor is not affected: Landlock binds its rules to inodes,
// which a rename does not change.
func (m *Matcher) DecideRename(src, dst string) Decision {
	s, d := m.Decide(src, OpDelete), m.Decide(dst, OpCreate)
	if s.Verdict < d.Verdict {
		return s
	}
	return d
}

// canonical reports whether p is a canonical absolute path: it starts with
// "/", has no empty, "." or ".." segment, no trailing "/" (unless it is "/")
// and no NUL byte. The substring searches are vectorized.
func canonical(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	if len(p) == 1 {
		return true
	}
	if p[len(p)-1] == '/' || strings.Contains(p, "//") || strings.IndexByte(p, 0) >= 0 {
		return false
	}
	// "." and ".." segments: look only where a segment starts with a dot.
	for i := strings.Index(p, "/."); i >= 0; {
		rest := p[i+2:]
		if rest == "" || rest[0] == '/' || rest[0] == '.' && (len(rest) == 1 || rest[1] == '/') {
			return false
		}
		j := strings.Index(rest, "/.")
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return true
}

// RulesBelow returns the rules, of every kind, that match some path strictly
// below dir (dir + "/" + anything), in policy order. It over-approximates:
// a rule in the answer may match no canonical path below dir, but no rule
// that matches one is missing. dir must be canonical; RulesBelow of a
// non-canonical dir is nil.
//
// Deciding on names, Decide cannot see what a directory holds; RulesBelow
// says which rules can apply inside it: a Landlock planner granting a
// directory must carve out what they protect, and a caller that renames a
// directory must decide on what lies below it (see DecideRename). It walks
// the automata and allocates; it is meant for set-up, not hot paths.
func (m *Matcher) RulesBelow(dir string) []*rules.Rule {
	if !canonical(dir) {
		return nil
	}
	found := map[*rules.Rule]bool{}
	for k := range m.parts {
		pt := &m.parts[k]
		a := pt.a
		width := uint32(a.ncls + 1)
		// The state after dir + "/" (for "/" itself, after "/").
		st := a.run("/")
		if dir != "/" {
			st = a.trans[a.run(dir)+uint32(a.slash)]
		}
		seen := make([]bool, a.nstates)
		queue := []uint32{st}
		seen[(st-1)/width] = true
		for len(queue) > 0 {
			st, queue = queue[len(queue)-1], queue[:len(queue)-1]
			for _, l := range a.sets[a.acceptSet(st)] {
				found[m.alts[pt.ids[l]].rule] = true
			}
			for c := uint32(0); c < uint32(a.ncls); c++ {
				next := a.trans[st+c]
				if i := (next - 1) / width; !seen[i] {
					seen[i] = true
					queue = append(queue, next)
				}
			}
		}
	}
	var out []*rules.Rule
	for _, r := range m.pol.Rules {
		if found[r] {
			out = append(out, r)
		}
	}
	return out
}

// Match is one rule that matches a path, for Explain.
type Match struct {
	Rule *rules.Rule `json:"rule"`
	// Glob is the brace alternative that matched.
	Glob string `json:"glob"`
	// Won is set for the rule that decided.
	Won bool `json:"won"`
	// Lifted is set for a built-in rule an exception lifted at this path.
	Lifted bool `json:"lifted,omitempty"`
}

// Explanation is Decide's answer with every rule that matched.
type Explanation struct {
	Path     string   `json:"path"`
	Decision Decision `json:"decision"`
	Matches  []Match  `json:"matches"`
}

// Explain is Decide with the evidence: every matching rule, tier rules in
// precedence order first. It allocates; use Decide on hot paths.
func (m *Matcher) Explain(path string, op Op) Explanation {
	e := Explanation{Path: path, Decision: m.Decide(path, op)}
	if op >= numOps || !canonical(path) {
		return e
	}
	var set []int32
	lifted := false
	for i := range m.parts {
		pt := &m.parts[i]
		idx := pt.a.acceptSet(pt.a.run(path))
		set = append(set, pt.set(idx)...)
		lifted = lifted || pt.sums[idx].except
	}
	slices.SortStableFunc(set, func(i, j int32) int {
		x, y := m.alts[i], m.alts[j]
		return cmp.Or(cmp.Compare(x.rule.Kind, y.rule.Kind), cmp.Compare(i, j))
	})
	seen := map[*rules.Rule]bool{}
	for _, id := range set {
		a := m.alts[id]
		if seen[a.rule] {
			continue
		}
		seen[a.rule] = true
		e.Matches = append(e.Matches, Match{Rule: a.rule, Glob: a.glob.Text, Won: a.rule == e.Decision.Rule,
			Lifted: lifted && a.rule.Exceptable()})
	}
	return e
}

// AllowedPatterns returns the expanded patterns of the rules under which op
// is allowed without approval, for the "allowed_paths" of a denial. A path
// they match may still be carved out by a deny rule or the write protection.
func (m *Matcher) AllowedPatterns(op Op) []string {
	out := []string{}
	if op == OpExec && m.execRestricted {
		// Only exec_paths may be executed (where the tier lets read).
		for _, r := range m.pol.Rules {
			if r.Kind == rules.KindExec {
				out = append(out, r.Expanded)
			}
		}
		return out
	}
	seen := map[string]bool{}
	for _, r := range m.pol.Rules {
		if r.Kind != rules.KindTier || verdicts[r.Tier][op] != Allowed || seen[r.Expanded] {
			continue
		}
		seen[r.Expanded] = true
		out = append(out, r.Expanded)
	}
	return out
}

// Unused is a rule of the policy files that never decides any path.
type Unused struct {
	Rule *rules.Rule
	// By is a rule that wins wherever Rule matches, or nil when Rule
	// matches no path any other rule leaves to it.
	By *rules.Rule
}

// Unused returns the rules of the policy files (not built-ins or presets)
// that can never take effect: under every path they match, another rule
// wins.
func (m *Matcher) Unused() []Unused {
	m.unusedOnce.Do(m.findUnused)
	return m.unused
}

// unusedParts returns the automata findUnused reads: m's, but for the
// "**/" patterns grouped by directory (anchor.go), which it compiles
// together again, as Decide's automata were before they were grouped. A
// rule outranked only by one of another automaton is a warning missed
// (findUnused), and "<workspace>/**/x" under "**/x" would be one.
func (m *Matcher) unusedParts() []*part {
	var out []*part
	var ids []int32
	var globs []rules.Glob
	for k := range m.parts {
		if k < m.nflat {
			out = append(out, &m.parts[k])
			continue
		}
		ids = append(ids, m.parts[k].ids...)
	}
	if len(m.parts)-m.nflat <= 1 || !slices.ContainsFunc(m.parts[m.nflat:], func(pt part) bool { return pt.anchor != "" }) {
		for k := m.nflat; k < len(m.parts); k++ {
			out = append(out, &m.parts[k])
		}
		return out
	}
	slices.Sort(ids)
	for _, id := range ids {
		globs = append(globs, *m.alts[id].glob)
	}
	// Kept in the cache as a group of the patterns as written (a key of
	// its own, for this workspace and home directory): check runs this
	// analysis every time, and compiling costs tens of milliseconds.
	deepParts, _, err := m.groupParts(&group{deep: true, ids: ids, rel: globs}, m.cache, nil)
	if err != nil || len(out)+len(deepParts) > maxParts {
		// Too complex together: each automaton by itself, as Decide
		// reads them (warnings missed, none made up).
		for k := m.nflat; k < len(m.parts); k++ {
			out = append(out, &m.parts[k])
		}
		return out
	}
	for k := range deepParts {
		pt := &deepParts[k]
		m.summarizePart(pt)
		out = append(out, pt)
	}
	return out
}

func (m *Matcher) findUnused() {
	// A rule that is never the best of its own automaton's accept sets can
	// never win overall, since Decide takes the best of the two.
	effective := map[*rules.Rule]bool{}
	shadow := map[*rules.Rule]*rules.Rule{}
	hasExceptions := slices.ContainsFunc(m.pol.Rules, func(r *rules.Rule) bool { return r.Kind == rules.KindException })
	for _, pt := range m.unusedParts() {
		for i, sum := range pt.sums {
			// The winner as Decide would clamp it, as far as this
			// automaton can tell (a global rule in another one may clamp
			// more: then a warning is missed, never made up).
			if w := m.clamp(sum.tier, sum.glob); w >= 0 {
				effective[m.alts[w].rule] = true
			}
			// Where an exception applies, the best rule it cannot lift
			// decides; an exception may sit in another automaton.
			if w := m.clamp(sum.tierNX, sum.globNX); w >= 0 && (sum.except || hasExceptions) {
				effective[m.alts[w].rule] = true
			}
			for _, id := range pt.set(uint32(i)) {
				r := m.alts[id].rule
				switch {
				case r.Kind == rules.KindExec:
					effective[r] = true
				case r.Kind == rules.KindTier && sum.tier >= 0 && r != m.alts[sum.tier].rule && shadow[r] == nil:
					shadow[r] = m.alts[sum.tier].rule
				}
			}
		}
	}
	for _, r := range m.pol.Rules {
		if r.Source.Origin != rules.OriginGlobal && r.Source.Origin != rules.OriginAgent {
			continue
		}
		if r.Kind != rules.KindTier && r.Kind != rules.KindExec || effective[r] {
			continue
		}
		m.unused = append(m.unused, Unused{Rule: r, By: shadow[r]})
	}
}

// Override is a prompt or prompt-write rule of the policy files that a grant
// (a read or write rule) outranks on the paths both match, by the policy's
// precedence: there the grant decides and nobody is asked.
type Override struct {
	Rule *rules.Rule
	// By is one grant that outranks Rule: one of the policy files' own
	// where there is one, else a preset's; Also are the others.
	By   *rules.Rule
	Also []*rules.Rule
}

// Overrides returns the prompt and prompt-write rules of the policy files
// that a read or write rule (of the files or a preset) outranks somewhere,
// for example "**/secrets/**" under "<workspace>/**" with precedence =
// "specific", each with one such grant. Rules that never take effect at all
// are in Unused instead. It compiles those rules apart from the built-ins,
// so it costs about a Compile; nil when they are too complex.
func (m *Matcher) Overrides() []Override {
	var ids []int32
	var globs []rules.Glob
	for id, a := range m.alts {
		r := a.rule
		if r.Kind == rules.KindTier && r.Tier != Deny && r.Source.Origin != rules.OriginBuiltin {
			ids = append(ids, int32(id))
			globs = append(globs, *a.glob)
		}
	}
	a, err := compileAutomaton(globs)
	if err != nil {
		return nil
	}
	unused := map[*rules.Rule]bool{}
	for _, u := range m.Unused() {
		unused[u.Rule] = true
	}
	var out []Override
	at := map[*rules.Rule]int{} // Rule -> its index in out
	for _, set := range a.sets {
		// The winner as Decide picks it among these rules.
		t, g := int32(-1), int32(-1)
		for _, l := range set {
			id := ids[l]
			t = m.better(t, id)
			if m.alts[id].rule.Source.Origin != rules.OriginAgent {
				g = m.better(g, id)
			}
		}
		w := m.clamp(t, g)
		if w < 0 || m.alts[w].rule.Tier < Read {
			continue
		}
		for _, l := range set {
			r := m.alts[ids[l]].rule
			// Only where the grant answers some op more permissively: a
			// read rule under prompt-write tightens, it does not override.
			if !asks(r.Tier) || !weaker(m.alts[w].rule.Tier, r.Tier) || r.Source.Origin < rules.OriginGlobal || unused[r] {
				continue
			}
			by := m.alts[w].rule
			i, ok := at[r]
			if !ok {
				at[r] = len(out)
				out = append(out, Override{Rule: r, By: by})
				continue
			}
			o := &out[i]
			if o.By == by || slices.Contains(o.Also, by) {
				continue
			}
			// The operator's own grant names the cause better than a
			// preset's ("<workspace>/**" rather than "/bin/**").
			if o.By.Source.Origin == rules.OriginPreset && by.Source.Origin != rules.OriginPreset {
				o.By, by = by, o.By
			}
			o.Also = append(o.Also, by)
		}
	}
	slices.SortFunc(out, func(x, y Override) int {
		return cmp.Compare(slices.Index(m.pol.Rules, x.Rule), slices.Index(m.pol.Rules, y.Rule))
	})
	return out
}

// String renders d for people: "read /x: allow (why)".
func (d Decision) String() string {
	return fmt.Sprintf("%s: %s", d.Verdict, strings.TrimSpace(d.Why))
}
