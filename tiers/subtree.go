package tiers

import (
	"github.com/agent-launcher/agent-launcher/rules"
)

// NumOps is the number of operations; Op values are 0 to NumOps-1.
const NumOps = int(numOps)

// Subtree describes what the policy decides strictly below a directory, for
// a Landlock planner: a right granted on a directory reaches everything
// below it, so the planner needs the least any path below may have, and
// whether some path below may have more.
//
// Patterns split in two kinds here. Names of paths that do not exist yet are
// decided by the "flat" patterns (literal trees, "*" within a segment, a
// trailing "/**") and by the "**/" patterns that match everything below the
// directory (such as ".../.git/hooks/**" below an existing hooks directory).
// The other "**/" patterns ("~/**/.env") match names anywhere: they are
// resolved against the files that exist (Anywhere), and a name they match
// that appears later under a directory the planner granted is not covered,
// as DESIGN.md section 7 says.
type Subtree struct {
	// Weakest is, per op, the least permissive verdict of any name below the
	// directory; Strongest the most permissive. They are bounds: every
	// verdict below lies between them, though a bound may be reached by no
	// real path.
	Weakest, Strongest [numOps]Verdict
	// Anywhere is set when a "**/" pattern matches some names below the
	// directory but not all: the planner must decide each entry that exists
	// there with Decide.
	Anywhere bool
	// AnywhereGrant is set when such a pattern can also make an entry more
	// permissive (a read, write or prompt-write rule, an exception, an
	// exec_paths entry): entries below may then have more than Strongest.
	AnywhereGrant bool
	// Exact is false when the analysis gave up on a combination too large to
	// enumerate; Weakest is then all Denied and Strongest all Allowed.
	Exact bool
}

// Uniform reports whether every name below the directory gets the same
// verdicts, and no anywhere-pattern applies there.
func (s Subtree) Uniform() bool {
	return s.Weakest == s.Strongest && !s.Anywhere
}

// maxSubtreeCombos bounds the combinations of accept sets Subtree
// enumerates across automata.
const maxSubtreeCombos = 1 << 16

// Subtree returns what the policy decides strictly below dir (dir + "/" +
// anything). dir must be canonical; for any other dir the answer is the
// inexact one (all Denied to all Allowed). It walks the automata and
// allocates; results are cached per automaton state, so the calls of one
// planning pass share their work. It is safe for concurrent use.
func (m *Matcher) Subtree(dir string) Subtree {
	if !canonical(dir) {
		return inexact()
	}
	var key subtreeKey
	for k := range m.parts {
		a := m.parts[k].a
		st := a.run("/")
		if dir != "/" {
			st = a.trans[a.run(dir)+uint32(a.slash)]
		}
		key[k] = st
	}
	m.subtreeMu.Lock()
	defer m.subtreeMu.Unlock()
	if s, ok := m.subtreeCache[key]; ok {
		return s
	}
	s := m.subtree(key)
	if m.subtreeCache == nil {
		m.subtreeCache = map[subtreeKey]Subtree{}
	}
	m.subtreeCache[key] = s
	return s
}

type subtreeKey [maxParts]uint32

func inexact() Subtree {
	var s Subtree
	for op := range numOps {
		s.Weakest[op], s.Strongest[op] = Denied, Allowed
	}
	return s
}

// subtree computes Subtree from the states after dir + "/".
func (m *Matcher) subtree(key subtreeKey) Subtree {
	out := Subtree{Exact: true}
	cands := make([][]*summary, len(m.parts))
	combos := 1
	for k := range m.parts {
		pc := m.partCandidates(k, key[k])
		cands[k] = pc.cands
		out.Anywhere = out.Anywhere || pc.anywhere
		out.AnywhereGrant = out.AnywhereGrant || pc.anywhereGrant
		if len(cands[k]) == 0 {
			// No canonical name continues below dir in this automaton;
			// cannot happen (every state has a successor), but be safe.
			return inexact()
		}
		combos *= len(cands[k])
		if combos > maxSubtreeCombos {
			return inexact()
		}
	}
	for op := range numOps {
		out.Weakest[op], out.Strongest[op] = Allowed, Denied
	}
	idx := make([]int, len(cands))
	sums := make([]*summary, len(cands))
	for {
		for k := range cands {
			sums[k] = cands[k][idx[k]]
		}
		for op := range numOps {
			v := m.combine(sums, op).Verdict
			out.Weakest[op] = min(out.Weakest[op], v)
			out.Strongest[op] = max(out.Strongest[op], v)
		}
		k := 0
		for ; k < len(idx); k++ {
			if idx[k]++; idx[k] < len(cands[k]) {
				break
			}
			idx[k] = 0
		}
		if k == len(idx) {
			break
		}
	}
	return out
}

// combine is Decide over summaries instead of a path. Decide keeps its own
// copy of this loop: it is the supervisor's hot path, and calling through
// a slice of summaries cost it about 8 ns (BenchmarkDecide, issue 4).
func (m *Matcher) combine(sums []*summary, op Op) Decision {
	t, g, w := int32(-1), int32(-1), int32(-1)
	var except, execG, execO bool
	for _, s := range sums {
		t, g, w = m.better(t, s.tier), m.better(g, s.glob), m.moreSpecific(w, s.wp)
		except, execG, execO = except || s.except, execG || s.execG, execO || s.execO
	}
	if except {
		t, g, w = -1, -1, -1
		for _, s := range sums {
			t, g, w = m.better(t, s.tierNX), m.better(g, s.globNX), m.moreSpecific(w, s.wpNX)
		}
	}
	return m.finish(op, t, g, w, execG, execO)
}

// grants reports whether a rule can make a path more permissive than the
// rules beside it would.
func grants(r *rules.Rule) bool {
	switch r.Kind {
	case rules.KindTier:
		return r.Tier >= PromptWrite
	case rules.KindWriteProtect:
		return false
	}
	return true // exceptions, exec_paths
}

// ends returns the states the automaton can end in after reading, from
// state st (just after a "/"), one or more further segments of a canonical
// path: no empty segment, no trailing "/". It over-approximates (it does
// not exclude "." and ".." segments).
func (a *automaton) ends(st uint32) []uint32 {
	width := uint32(a.ncls + 1)
	type item struct {
		st        uint32
		lastSlash bool
	}
	// seen[2*state+lastSlash]
	seen := make([]bool, 2*a.nstates)
	mark := func(it item) bool {
		i := 2 * ((it.st - 1) / width)
		if it.lastSlash {
			i++
		}
		if seen[i] {
			return false
		}
		seen[i] = true
		return true
	}
	var out []uint32
	queue := []item{{st, true}}
	mark(queue[0])
	for len(queue) > 0 {
		it := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if !it.lastSlash {
			out = append(out, it.st)
		}
		for c := uint32(0); c < uint32(a.ncls); c++ {
			slash := c == uint32(a.slash)
			if slash && it.lastSlash {
				continue
			}
			next := item{a.trans[it.st+c], slash}
			if mark(next) {
				queue = append(queue, next)
			}
		}
	}
	return out
}

func intersect(a, b []int32) []int32 {
	out := a[:0]
	for _, x := range a {
		if contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func contains(s []int32, x int32) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// partCand is what one automaton contributes below a directory, from the
// state after the directory's "/".
type partCand struct {
	cands                   []*summary
	anywhere, anywhereGrant bool
}

// partCandidates computes, and caches per automaton and state, the
// candidate summaries of the names below: for a flat automaton every
// reachable accept set, for a deep one the alternatives every name
// matches (the others are anywhere-patterns). Many directories share an
// automaton's state (every plain directory of a workspace is in the same
// state of the deep automaton), so the cache saves most walks. The caller
// holds subtreeMu.
func (m *Matcher) partCandidates(k int, st uint32) partCand {
	ck := [2]uint32{uint32(k), st}
	if pc, ok := m.partCache[ck]; ok {
		return pc
	}
	var pc partCand
	pt := &m.parts[k]
	ends := pt.a.ends(st)
	if k < m.nflat {
		seen := map[uint32]bool{}
		for _, e := range ends {
			if i := pt.a.acceptSet(e); !seen[i] {
				seen[i] = true
				pc.cands = append(pc.cands, &pt.sums[i])
			}
		}
	} else {
		var all []int32
		for n, e := range ends {
			set := pt.a.sets[pt.a.acceptSet(e)]
			if n == 0 {
				all = append([]int32(nil), set...)
			} else {
				all = intersect(all, set)
			}
		}
		for _, e := range ends {
			for _, l := range pt.a.sets[pt.a.acceptSet(e)] {
				if !contains(all, l) {
					pc.anywhere = true
					if grants(m.alts[pt.ids[l]].rule) {
						pc.anywhereGrant = true
					}
				}
			}
		}
		global := make([]int32, len(all))
		for i, l := range all {
			global[i] = pt.ids[l]
		}
		sum := m.summarize(global)
		pc.cands = []*summary{&sum}
	}
	if m.partCache == nil {
		m.partCache = map[[2]uint32]partCand{}
	}
	m.partCache[ck] = pc
	return pc
}
