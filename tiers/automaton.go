package tiers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/agent-launcher/agent-launcher/rules"
)

// The automaton is a DFA over rune classes, built by subset construction
// from an epsilon-free NFA of every glob alternative of the policy. Running
// it costs one table lookup per byte of an ASCII path, whatever the number
// of rules; each final state carries the set of alternatives that match.
//
// Runes are decoded as doublestar decodes them (utf8.DecodeRuneInString, so
// an invalid byte is U+FFFD), which keeps "?" and classes rune-exact.

// Limits that keep a pathological policy from exhausting memory. The table
// holds states*classes cells of 4 bytes.
const (
	maxDFAStates    = 1 << 18
	maxDFACells     = 16 << 20
	maxAlternatives = 1 << 17 // glob alternatives in one policy, after brace expansion
	maxNFANodes     = 1 << 22 // tokens of all alternatives of one automaton, roughly
)

// ErrTooComplex is returned when a policy's patterns would compile into an
// automaton above the size limits.
var ErrTooComplex = errors.New("tiers: policy too complex to compile")

type edgeKind uint8

const (
	edgeClasses  edgeKind = iota // one of a set of classes
	edgeNotSlash                 // any class but '/'
	edgeAll                      // any class
)

type nfaEdge struct {
	kind    edgeKind
	classes []uint16 // edgeClasses, sorted
	to      int32
}

type nfaNode struct {
	edges  []nfaEdge
	accept []int32 // alternative ids accepted here
}

// automaton is immutable after compile and safe for concurrent use.
type automaton struct {
	ncls  int
	slash uint16
	ascii [utf8.RuneSelf]uint16
	hiLo  []rune   // sorted starts of the non-ASCII intervals
	hiCls []uint16 // class of each interval
	// trans holds one row of ncls+1 cells per state: the index of the
	// state's accept set in sets, then the next state of every class. A
	// state is named by the offset of its second cell (state*(ncls+1)+1),
	// so a step is one lookup: trans[st+class], and the accept set of st
	// is trans[st-1].
	trans    []uint32
	start    uint32   // offset of the start state
	sinkFrom uint32   // offsets from here on are sinks: every class loops back
	accepts  []uint32 // state number -> index into sets
	sets     [][]int32
	nstates  int
	nfaNodes int
}

// classOf returns the class of rune r.
func (a *automaton) classOf(r rune) uint16 {
	if r < utf8.RuneSelf && r >= 0 {
		return a.ascii[r]
	}
	i := sort.Search(len(a.hiLo), func(i int) bool { return a.hiLo[i] > r }) - 1
	return a.hiCls[i]
}

// run returns the final state (a row offset) after consuming s.
func (a *automaton) run(s string) uint32 { return a.runFrom(a.start, s) }

// runFrom returns the final state after consuming s from state st.
func (a *automaton) runFrom(st uint32, s string) uint32 {
	trans := a.trans
	sink := a.sinkFrom
	for i := 0; i < len(s) && st < sink; {
		c := s[i]
		var cls uint16
		if c < utf8.RuneSelf {
			cls = a.ascii[c]
			i++
		} else {
			r, n := utf8.DecodeRuneInString(s[i:])
			cls = a.classOf(r)
			i += n
		}
		st = trans[st+uint32(cls)]
	}
	return st
}

// acceptSet returns the index into sets of state st's accept set.
func (a *automaton) acceptSet(st uint32) uint32 { return a.trans[st-1] }

// matches returns the sorted ids of the alternatives that match s. The
// caller must not modify the slice.
func (a *automaton) matches(s string) []int32 {
	return a.sets[a.acceptSet(a.run(s))]
}

// alphabet partitions the runes into classes that every token treats alike.
type alphabet struct {
	bounds []rune   // interval starts, bounds[0] == 0
	cls    []uint16 // class of each interval
	n      int
	slash  uint16
}

func (al *alphabet) classOf(r rune) uint16 {
	i := sort.Search(len(al.bounds), func(i int) bool { return al.bounds[i] > r }) - 1
	return al.cls[i]
}

// classesIn returns the sorted classes of the runes within ranges.
func (al *alphabet) classesIn(ranges []rules.RuneRange) []uint16 {
	var out []uint16
	for _, rg := range ranges {
		i := sort.Search(len(al.bounds), func(i int) bool { return al.bounds[i] > rg.Lo }) - 1
		for ; i < len(al.bounds) && al.bounds[i] <= rg.Hi; i++ {
			out = append(out, al.cls[i])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func buildAlphabet(globs []rules.Glob) *alphabet {
	// Atoms: '/', every literal rune, every class.
	var atoms [][]rules.RuneRange
	atoms = append(atoms, []rules.RuneRange{{Lo: '/', Hi: '/'}})
	seenLit := map[rune]bool{'/': true}
	for _, g := range globs {
		for _, t := range g.Tokens {
			switch t.Kind {
			case rules.TokLit:
				if !seenLit[t.Rune] {
					seenLit[t.Rune] = true
					atoms = append(atoms, []rules.RuneRange{{Lo: t.Rune, Hi: t.Rune}})
				}
			case rules.TokClass:
				atoms = append(atoms, t.Ranges)
			}
		}
	}
	pts := map[rune]bool{0: true}
	for _, a := range atoms {
		for _, rg := range a {
			pts[rg.Lo] = true
			if rg.Hi < utf8.MaxRune {
				pts[rg.Hi+1] = true
			}
		}
	}
	bounds := make([]rune, 0, len(pts))
	for p := range pts {
		bounds = append(bounds, p)
	}
	slices.Sort(bounds)
	// Signature of each interval: the atoms that contain it.
	sig := make(map[string]uint16)
	al := &alphabet{bounds: bounds, cls: make([]uint16, len(bounds))}
	var key []byte
	for i, lo := range bounds {
		key = key[:0]
		for ai, a := range atoms {
			for _, rg := range a {
				if rg.Lo <= lo && lo <= rg.Hi {
					key = binary.AppendUvarint(key, uint64(ai))
					break
				}
			}
		}
		c, ok := sig[string(key)]
		if !ok {
			c = uint16(len(sig))
			sig[string(key)] = c
		}
		al.cls[i] = c
	}
	al.n = len(sig)
	al.slash = al.classOf('/')
	return al
}

// compileAutomaton builds the DFA of globs; alternative i of the result is
// globs[i].
func compileAutomaton(globs []rules.Glob) (*automaton, error) {
	return compileAutomatonLimit(globs, maxDFAStates)
}

// compileAutomatonLimit is compileAutomaton with at most maxStates states.
func compileAutomatonLimit(globs []rules.Glob, maxStates int) (*automaton, error) {
	tokens := 0
	for _, g := range globs {
		tokens += len(g.Tokens) + 2
	}
	if tokens > maxNFANodes {
		return nil, fmt.Errorf("%w: the patterns hold %d elements, more than %d; shorten them or use fewer {a,b} groups", ErrTooComplex, tokens, maxNFANodes)
	}
	al := buildAlphabet(globs)
	if al.n > 1<<16-1 {
		return nil, fmt.Errorf("%w: %d rune classes", ErrTooComplex, al.n)
	}
	slash := []uint16{al.slash}

	// Epsilon-free NFA, one chain of nodes per alternative. frontier holds
	// the nodes that stand for "everything so far has matched": an optional
	// element (a star, "**/", a trailing "/**") adds a node to it instead of
	// an epsilon edge.
	//
	// Acceptance follows doublestar exactly, which is not quite the regular
	// reading of the pattern: when the name ends, doublestar accepts only if
	// the pattern it has not yet processed is "", "*" or "/**" (or the "**"
	// of a trailing "/**"). It processes an optional element only while name
	// runes remain, so "/a*/**" matches "/ab" and "/a/x" but not "/a". Every
	// node therefore records the token index doublestar would stand at when
	// the name ends there (pos), and accepts when the rest qualifies.
	var nodes []nfaNode
	var pos []int
	newNode := func(p int) int32 {
		nodes = append(nodes, nfaNode{})
		pos = append(pos, p)
		return int32(len(nodes) - 1)
	}
	edge := func(from int32, kind edgeKind, classes []uint16, to int32) {
		nodes[from].edges = append(nodes[from].edges, nfaEdge{kind: kind, classes: classes, to: to})
	}
	starts := make([]int32, 0, len(globs))
	var frontier []int32
	for id, g := range globs {
		first := int32(len(nodes))
		s0 := newNode(0)
		starts = append(starts, s0)
		frontier = append(frontier[:0], s0)
		for k, t := range g.Tokens {
			step := func(kind edgeKind, classes []uint16) {
				n := newNode(k + 1)
				for _, f := range frontier {
					edge(f, kind, classes, n)
				}
				frontier = append(frontier[:0], n)
			}
			switch t.Kind {
			case rules.TokSep:
				step(edgeClasses, slash)
			case rules.TokLit:
				step(edgeClasses, []uint16{al.classOf(t.Rune)})
			case rules.TokClass:
				step(edgeClasses, al.classesIn(t.Ranges))
			case rules.TokAny:
				step(edgeNotSlash, nil)
			case rules.TokStar:
				s := newNode(k + 1)
				for _, f := range frontier {
					edge(f, edgeNotSlash, nil, s)
				}
				edge(s, edgeNotSlash, nil, s)
				frontier = append(frontier, s)
			case rules.TokDirs:
				// Nothing, or any string that ends in '/'.
				n, d := newNode(k+1), newNode(-1)
				for _, f := range frontier {
					edge(f, edgeClasses, slash, n)
					edge(f, edgeAll, nil, d)
				}
				edge(d, edgeAll, nil, d)
				edge(d, edgeClasses, slash, n)
				frontier = append(frontier, n)
			case rules.TokTail:
				// Nothing, or '/' followed by anything.
				t := newNode(len(g.Tokens))
				for _, f := range frontier {
					edge(f, edgeClasses, slash, t)
				}
				edge(t, edgeAll, nil, t)
				frontier = append(frontier, t)
			}
		}
		n := len(g.Tokens)
		for i := first; i < int32(len(nodes)); i++ {
			p := pos[i]
			if p == n || (p == n-1 && (g.Tokens[p].Kind == rules.TokStar || g.Tokens[p].Kind == rules.TokTail)) {
				nodes[i].accept = append(nodes[i].accept, int32(id))
			}
		}
	}
	return subsetConstruct(nodes, starts, al, maxStates)
}

// subsetConstruct turns the NFA into a DFA over al's classes. State 0 is the
// dead state (no NFA node left).
func subsetConstruct(nodes []nfaNode, starts []int32, al *alphabet, maxStates int) (*automaton, error) {
	ncls := al.n
	a := &automaton{ncls: ncls, slash: al.slash, nfaNodes: len(nodes)}
	for r := rune(0); r < utf8.RuneSelf; r++ {
		a.ascii[r] = al.classOf(r)
	}
	for i, lo := range al.bounds {
		hi := rune(utf8.MaxRune + 1)
		if i+1 < len(al.bounds) {
			hi = al.bounds[i+1]
		}
		if hi <= utf8.RuneSelf {
			continue
		}
		lo = max(lo, utf8.RuneSelf)
		if n := len(a.hiCls); n > 0 && a.hiCls[n-1] == al.cls[i] {
			continue
		}
		a.hiLo = append(a.hiLo, lo)
		a.hiCls = append(a.hiCls, al.cls[i])
	}

	index := map[string]uint32{}
	var sets [][]int32 // NFA node set of each DFA state
	setIndex := map[string]uint32{}
	var key []byte
	var acceptKey []byte
	intern := func(set []int32) (uint32, error) {
		key = key[:0]
		for _, n := range set {
			key = binary.LittleEndian.AppendUint32(key, uint32(n))
		}
		if st, ok := index[string(key)]; ok { // no allocation for the lookup
			return st, nil
		}
		k := string(key)
		st := uint32(len(sets))
		if len(sets) >= maxStates || (len(sets)+1)*(ncls+1) > maxDFACells {
			return 0, fmt.Errorf("%w: more than %d automaton states", ErrTooComplex, len(sets))
		}
		index[k] = st
		sets = append(sets, slices.Clone(set))
		// The accept set of the state.
		var acc []int32
		for _, n := range set {
			acc = append(acc, nodes[n].accept...)
		}
		slices.Sort(acc)
		acc = slices.Compact(acc)
		acceptKey = acceptKey[:0]
		for _, x := range acc {
			acceptKey = binary.LittleEndian.AppendUint32(acceptKey, uint32(x))
		}
		ai, ok := setIndex[string(acceptKey)]
		if !ok {
			ai = uint32(len(a.sets))
			setIndex[string(acceptKey)] = ai
			a.sets = append(a.sets, acc)
		}
		a.accepts = append(a.accepts, ai)
		return st, nil
	}
	if _, err := intern(nil); err != nil { // the dead state
		return nil, err
	}
	start := slices.Clone(starts)
	slices.Sort(start)
	startState, err := intern(start)
	if err != nil {
		return nil, err
	}
	width := uint32(ncls + 1)
	buckets := make([][]int32, ncls)
	var wild, all, base, bucket, next []int32
	for st := 0; st < len(sets); st++ {
		if len(a.trans)+int(width) > cap(a.trans) {
			// Grow by doubling: append's growth of large slices copies the
			// table too often.
			a.trans = slices.Grow(a.trans, max(cap(a.trans), 1024*int(width)))
		}
		a.trans = append(a.trans, a.accepts[st])
		for c := range buckets {
			buckets[c] = buckets[c][:0]
		}
		wild, all = wild[:0], all[:0]
		for _, n := range sets[st] {
			for _, e := range nodes[n].edges {
				switch e.kind {
				case edgeClasses:
					for _, c := range e.classes {
						buckets[c] = append(buckets[c], e.to)
					}
				case edgeNotSlash:
					wild = append(wild, e.to)
				case edgeAll:
					all = append(all, e.to)
				}
			}
		}
		// Most classes reach only the wildcard edges: intern that set once.
		// The edges every class but '/' takes are sorted once per state,
		// each class's own merged in.
		base = append(append(base[:0], all...), wild...)
		slices.Sort(base)
		base = slices.Compact(base)
		slices.Sort(all)
		all = slices.Compact(all)
		baseTo := uint32(1<<32 - 1)
		for c := 0; c < ncls; c++ {
			if len(buckets[c]) == 0 && uint16(c) != al.slash && baseTo != 1<<32-1 {
				a.trans = append(a.trans, baseTo)
				continue
			}
			bucket = append(bucket[:0], buckets[c]...)
			slices.Sort(bucket)
			common := base
			if uint16(c) == al.slash {
				common = all
			}
			next = mergeSorted(next[:0], bucket, common)
			to, err := intern(next)
			if err != nil {
				return nil, err
			}
			a.trans = append(a.trans, to*width+1)
			if len(buckets[c]) == 0 && uint16(c) != al.slash {
				baseTo = to*width + 1
			}
		}
	}
	a.start = startState*width + 1
	a.nstates = len(sets)
	a.sinksLast(width)
	return a, nil
}

// mergeSorted appends the union of the sorted sets a and b to dst, sorted
// and without duplicates.
func mergeSorted(dst, a, b []int32) []int32 {
	i, j := 0, 0
	last := int32(-1)
	push := func(x int32) {
		if len(dst) == 0 || x != last {
			dst = append(dst, x)
			last = x
		}
	}
	for i < len(a) && j < len(b) {
		if a[i] <= b[j] {
			push(a[i])
			i++
		} else {
			push(b[j])
			j++
		}
	}
	for ; i < len(a); i++ {
		push(a[i])
	}
	for ; j < len(b); j++ {
		push(b[j])
	}
	return dst
}

// sinksLast renumbers the states so that sinks (states every class leads
// back to: the dead state, the inside of a "/**" that nothing deeper
// refines) come last, and run can stop as soon as it reaches one.
func (a *automaton) sinksLast(width uint32) {
	n := uint32(a.nstates)
	isSink := make([]bool, n)
	var order []uint32
	for st := range n {
		row := a.trans[st*width+1 : (st+1)*width]
		self := st*width + 1
		isSink[st] = !slices.ContainsFunc(row, func(to uint32) bool { return to != self })
		if !isSink[st] {
			order = append(order, st)
		}
	}
	firstSink := uint32(len(order))
	for st := range n {
		if isSink[st] {
			order = append(order, st)
		}
	}
	newOf := make([]uint32, n) // old state -> new state
	for nw, old := range order {
		newOf[old] = uint32(nw)
	}
	off := func(old uint32) uint32 { return newOf[old]*width + 1 }
	trans := make([]uint32, len(a.trans))
	accepts := make([]uint32, n)
	for nw, old := range order {
		src := a.trans[uint32(old)*width : (uint32(old)+1)*width]
		dst := trans[uint32(nw)*width : (uint32(nw)+1)*width]
		dst[0] = src[0]
		for c := 1; c < len(src); c++ {
			dst[c] = off((src[c] - 1) / width)
		}
		accepts[nw] = a.accepts[old]
	}
	a.trans, a.accepts = trans, accepts
	a.start = off((a.start - 1) / width)
	a.sinkFrom = firstSink*width + 1
}
