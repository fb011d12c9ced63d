package tiers

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/agent-launcher/agent-launcher/rules"
)

// Matcher is a compiled policy. It is immutable and safe for concurrent use
// by any number of goroutines.
//
// The rules compile into up to three automata, because running a union of
// independent pattern groups costs nothing per byte but multiplies their
// states: tier rules (with exceptions) decide every call; the write
// protection runs only for paths whose tier is write; exec_paths only for
// OpExec when the policy has them.
type Matcher struct {
	pol  *rules.Policy
	alts []alt
	tier part
	wp   part
	exec part

	// tierRes holds, per tier accept set, the decision of every op, and in
	// slot numOps the OpExec decision when exec_paths matches nothing.
	tierRes [][numOps + 1]Decision
	tierOut []outcome
	// wpRes holds, per write-protection accept set, the capped decisions,
	// or nil where no write protection applies.
	wpRes []*[numOps]Decision
	wpOut []int32
	// execOK says, per exec accept set, whether an exec rule matched.
	execOK         []bool
	execRestricted bool

	invalid [numOps]Decision
	dflt    *rules.Rule
	unused  []Unused
}

// part is one automaton and the global ids of its alternatives.
type part struct {
	a   *automaton
	ids []int32 // local alternative -> index into Matcher.alts
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

// alt is one glob alternative of one rule.
type alt struct {
	rule *rules.Rule
	glob *rules.Glob
	rank int // lower wins; only meaningful among KindTier alternatives
}

// outcome is what a tier accept set resolves to.
type outcome struct {
	tier   int32 // winning KindTier alternative, or -1 for the default
	except bool  // an exception lifted the built-in lists here
}

// Compile compiles p into a Matcher. It fails only when the patterns are too
// complex for the automaton's size limits (ErrTooComplex); the error names
// the rule.
func Compile(p *rules.Policy) (*Matcher, error) {
	m := &Matcher{pol: p, execRestricted: p.ExecRestricted()}
	m.dflt = &rules.Rule{Pattern: "(default)", Expanded: "(default)", Kind: rules.KindTier, Tier: p.Default, Source: p.DefaultSource}
	var tierG, wpG, execG []rules.Glob
	for _, r := range p.Rules {
		for i := range r.Globs {
			id := int32(len(m.alts))
			m.alts = append(m.alts, alt{rule: r, glob: &r.Globs[i]})
			g := r.Globs[i]
			switch r.Kind {
			case rules.KindTier:
				m.tier.ids, tierG = append(m.tier.ids, id), append(tierG, g)
			case rules.KindWriteProtect:
				m.wp.ids, wpG = append(m.wp.ids, id), append(wpG, g)
			case rules.KindExec:
				m.exec.ids, execG = append(m.exec.ids, id), append(execG, g)
			case rules.KindException:
				m.tier.ids, tierG = append(m.tier.ids, id), append(tierG, g)
				m.wp.ids, wpG = append(m.wp.ids, id), append(wpG, g)
			}
		}
	}
	m.rank(p.Precedence)
	var err error
	for _, c := range []struct {
		p *part
		g []rules.Glob
	}{{&m.tier, tierG}, {&m.wp, wpG}, {&m.exec, execG}} {
		if c.p.a, err = compileAutomaton(c.g); err != nil {
			if culprit := m.complexRule(); culprit != nil {
				return nil, fmt.Errorf("%w: %s: %q", err, culprit.Source, culprit.Pattern)
			}
			return nil, err
		}
	}
	m.tierRes = make([][numOps + 1]Decision, len(m.tier.a.sets))
	m.tierOut = make([]outcome, len(m.tier.a.sets))
	for i := range m.tier.a.sets {
		o := m.resolveTier(m.tier.set(uint32(i)))
		m.tierOut[i] = o
		m.tierRes[i] = m.tierDecisions(o)
	}
	m.wpRes = make([]*[numOps]Decision, len(m.wp.a.sets))
	m.wpOut = make([]int32, len(m.wp.a.sets))
	for i := range m.wp.a.sets {
		m.wpOut[i] = m.resolveWP(m.wp.set(uint32(i)))
		if m.wpOut[i] >= 0 {
			d := m.cappedDecisions(m.alts[m.wpOut[i]].rule)
			m.wpRes[i] = &d
		}
	}
	m.execOK = make([]bool, len(m.exec.a.sets))
	for i, set := range m.exec.a.sets {
		m.execOK[i] = len(set) > 0
	}
	for op := range numOps {
		m.invalid[op] = Decision{Op: op, Verdict: Denied, Tier: Deny, Rule: m.dflt,
			Why: "not a canonical absolute path (it must start with \"/\" and have no \".\", \"..\" or empty segments): denied"}
	}
	m.findUnused()
	return m, nil
}

// complexRule finds the rule whose patterns alone exceed the automaton
// limits, to name it in the error.
func (m *Matcher) complexRule() *rules.Rule {
	for _, r := range m.pol.Rules {
		if _, err := compileAutomaton(r.Globs); err != nil {
			return r
		}
	}
	return nil
}

// Policy returns the policy m was compiled from.
func (m *Matcher) Policy() *rules.Policy { return m.pol }

// Stats describes the compiled automaton.
type Stats struct {
	Rules        int // rules of every kind
	Alternatives int // glob alternatives after brace expansion
	NFANodes     int
	States       int // DFA states
	Classes      int // rune classes
	AcceptSets   int // distinct outcomes
	TableBytes   int
}

// Stats returns the size of the compiled automata, summed.
func (m *Matcher) Stats() Stats {
	s := Stats{Rules: len(m.pol.Rules), Alternatives: len(m.alts)}
	for _, p := range []*part{&m.tier, &m.wp, &m.exec} {
		s.NFANodes += p.a.nfaNodes
		s.States += p.a.nstates
		s.Classes += p.a.ncls
		s.AcceptSets += len(p.a.sets)
		s.TableBytes += len(p.a.trans) * 4
	}
	return s
}

// rank orders the KindTier alternatives: lower rank wins.
func (m *Matcher) rank(prec rules.Precedence) {
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
	for r, i := range order {
		m.alts[i].rank = r
	}
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

// resolveTier picks the winning tier rule of one accept set.
func (m *Matcher) resolveTier(set []int32) outcome {
	o := outcome{tier: -1}
	for _, id := range set {
		if m.alts[id].rule.Kind == rules.KindException {
			o.except = true
		}
	}
	for _, id := range set {
		a := m.alts[id]
		if a.rule.Kind != rules.KindTier || o.except && a.rule.Exceptable() {
			continue
		}
		if o.tier < 0 || a.rank < m.alts[o.tier].rank {
			o.tier = id
		}
	}
	return o
}

// resolveWP picks the most specific write-protection rule of one accept set,
// or -1.
func (m *Matcher) resolveWP(set []int32) int32 {
	except := false
	for _, id := range set {
		if m.alts[id].rule.Kind == rules.KindException {
			except = true
		}
	}
	best := int32(-1)
	for _, id := range set {
		a := m.alts[id]
		if a.rule.Kind != rules.KindWriteProtect || except && a.rule.Exceptable() {
			continue
		}
		if best < 0 || moreSpecific(a, m.alts[best]) {
			best = id
		}
	}
	return best
}

func moreSpecific(x, y alt) bool {
	if x.glob.LiteralSegments != y.glob.LiteralSegments {
		return x.glob.LiteralSegments > y.glob.LiteralSegments
	}
	return len(x.glob.Text) > len(y.glob.Text)
}

// tierDecisions precomputes the answer of every operation for one tier
// outcome, and in slot numOps the OpExec answer when exec_paths is set and
// matches nothing.
func (m *Matcher) tierDecisions(o outcome) [numOps + 1]Decision {
	rule := m.dflt
	if o.tier >= 0 {
		rule = m.alts[o.tier].rule
	}
	why := tierWhy(rule, o.tier < 0)
	var out [numOps + 1]Decision
	for op := range numOps {
		out[op] = decision(op, rule.Tier, rule, why)
	}
	out[numOps] = decision(OpExec, Deny, rule, why+"; exec_paths is set and none of its rules matches")
	return out
}

// cappedDecisions precomputes the answers for a write-tier path that the
// write protection rule wp makes read-only.
func (m *Matcher) cappedDecisions(wp *rules.Rule) [numOps]Decision {
	why := fmt.Sprintf("write tier capped at read by %s", ruleRef(wp))
	var out [numOps]Decision
	for op := range numOps {
		out[op] = decision(op, Read, wp, why)
	}
	return out
}

func decision(op Op, tier Tier, rule *rules.Rule, why string) Decision {
	v := verdicts[tier][op]
	if op == OpExec && tier == Deny {
		v = Denied
	}
	return Decision{Op: op, Verdict: v, Tier: tier, Rule: rule, Why: fmt.Sprintf("%s: %s %s", why, op, verdictWords[v])}
}

var verdictWords = [...]string{Denied: "denied", NeedsApproval: "needs approval", Allowed: "allowed"}

func tierWhy(r *rules.Rule, isDefault bool) string {
	if isDefault {
		return fmt.Sprintf("no rule matches; default tier %s (%s)", r.Tier, r.Source)
	}
	return fmt.Sprintf("%s tier by %s", r.Tier, ruleRef(r))
}

// ruleRef names a rule for messages: its pattern and where it was written.
func ruleRef(r *rules.Rule) string {
	s := fmt.Sprintf("%q (%s", r.Pattern, r.Source)
	if r.Note != "" {
		s += ": " + r.Note
	}
	return s + ")"
}

// Decide returns the decision for op on path. path must be canonical and
// absolute (symlinks resolved, no ".", ".." or empty segments, no trailing
// "/"); any other path is denied. Decide does no I/O and does not allocate.
func (m *Matcher) Decide(path string, op Op) Decision {
	if op >= numOps || !canonical(path) {
		return m.invalid[op%numOps]
	}
	res := &m.tierRes[m.tier.a.acceptSet(m.tier.a.run(path))]
	d := &res[op]
	if d.Tier == Write && len(m.wp.ids) > 0 {
		if c := m.wpRes[m.wp.a.acceptSet(m.wp.a.run(path))]; c != nil {
			d = &c[op]
		}
	}
	if op == OpExec && m.execRestricted && d.Verdict != Denied && !m.execOK[m.exec.a.acceptSet(m.exec.a.run(path))] {
		d = &res[numOps]
	}
	return *d
}

// DecideRename returns the decision for renaming src to dst: OpDelete at src
// and OpCreate at dst, the more restrictive of the two. When both are
// allowed it returns the destination's decision.
func (m *Matcher) DecideRename(src, dst string) Decision {
	s, d := m.Decide(src, OpDelete), m.Decide(dst, OpCreate)
	if s.Verdict < d.Verdict {
		return s
	}
	return d
}

// canonical reports whether p is a canonical absolute path.
func canonical(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return false
	}
	if len(p) == 1 {
		return true
	}
	if p[len(p)-1] == '/' {
		return false
	}
	seg := 0 // length of the current segment
	dots := 0
	for i := 1; i < len(p); i++ {
		switch p[i] {
		case '/':
			if seg == 0 || seg == dots && dots <= 2 {
				return false
			}
			seg, dots = 0, 0
		case '.':
			seg++
			dots++
		case 0:
			return false
		default:
			seg++
		}
	}
	return !(seg == dots && dots <= 2)
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

// Explain is Decide with the evidence: every matching rule, in precedence
// order. It allocates; use Decide on hot paths.
func (m *Matcher) Explain(path string, op Op) Explanation {
	e := Explanation{Path: path, Decision: m.Decide(path, op)}
	if op >= numOps || !canonical(path) {
		return e
	}
	ti := m.tier.a.acceptSet(m.tier.a.run(path))
	o := m.tierOut[ti]
	set := m.tier.set(ti)
	lifted := o.except
	set = append(set, m.wp.set(m.wp.a.acceptSet(m.wp.a.run(path)))...)
	set = append(set, m.exec.set(m.exec.a.acceptSet(m.exec.a.run(path)))...)
	slices.SortStableFunc(set, func(i, j int32) int {
		x, y := m.alts[i], m.alts[j]
		return cmp.Or(cmp.Compare(x.rule.Kind, y.rule.Kind), cmp.Compare(x.rank, y.rank))
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
func (m *Matcher) Unused() []Unused { return m.unused }

func (m *Matcher) findUnused() {
	effective := map[*rules.Rule]bool{}
	shadow := map[*rules.Rule]*rules.Rule{}
	for i := range m.tier.a.sets {
		o := m.tierOut[i]
		if o.tier < 0 {
			continue
		}
		winner := m.alts[o.tier].rule
		effective[winner] = true
		for _, id := range m.tier.set(uint32(i)) {
			if r := m.alts[id].rule; r.Kind == rules.KindTier && r != winner && shadow[r] == nil {
				shadow[r] = winner
			}
		}
	}
	for i := range m.exec.a.sets {
		for _, id := range m.exec.set(uint32(i)) {
			effective[m.alts[id].rule] = true
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

// String renders d for people: "read /x: allow (why)".
func (d Decision) String() string {
	return fmt.Sprintf("%s: %s", d.Verdict, strings.TrimSpace(d.Why))
}
