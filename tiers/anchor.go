package tiers

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agent-launcher/agent-launcher/rules"
)

// Anchored automata.
//
// Most of a policy's "**/" patterns are written under the workspace or the
// home directory: the built-in lists protect the same credential names
// under both ("~/**/id_rsa", "<workspace>/**/id_rsa"). Compiled as written,
// their automaton spells the directory out, so a new workspace (or home)
// compiles it again: most of a cold start, 30 to 50 ms for the built-in
// rules. The deep alternatives are therefore grouped by the directory they
// start with (their anchor), and each group compiled without it: from the
// anchor's last rune on. The cache keeps such an automaton under what it was
// compiled from (groupKey), which names no directory, so that one compile
// serves every workspace and, as the built-in lists mirror each other, the
// home directory too. relocate then prefixes the anchor: a chain of one
// state per rune of the anchor, each leading on to the next on its rune
// and to the dead state on any other. The result is exactly the automaton
// of the patterns as written (anchor followed by the rest): the first
// tokens of each are the anchor's runes, one mandatory step each, so every
// run of the written patterns passes through the state the rest starts in.
//
// Decide takes the chain's shortcut: a path that does not start with the
// anchor ends in a state that accepts nothing (in the chain or dead), and
// one that does continues from the state after the chain.

// anchorsOf returns the directories the policy's patterns may start with
// that change between runs of one policy: the workspace, then the home
// directory. An anchor must be valid UTF-8 without U+FFFD, the rune an
// invalid byte of a path decodes to: then a path starts with the anchor's
// bytes exactly when its first runes are the anchor's.
func anchorsOf(p *rules.Policy) []string {
	var out []string
	for _, a := range []string{p.Workspace, p.Home} {
		if a == "" || a == "/" || a[0] != '/' || !utf8.ValidString(a) || strings.ContainsRune(a, utf8.RuneError) || slices.Contains(out, a) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// anchorTokens returns how many leading tokens of g spell anchor, rune by
// rune ('/' as a separator), or 0 when g does not start with it.
func anchorTokens(g *rules.Glob, anchor string) int {
	i := 0
	for _, r := range anchor {
		if i >= len(g.Tokens) {
			return 0
		}
		switch t := g.Tokens[i]; {
		case r == '/' && t.Kind == rules.TokSep:
		case r != '/' && t.Kind == rules.TokLit && t.Rune == r:
		default:
			return 0
		}
		i++
	}
	return i
}

// group is a set of alternatives compiled together (into one automaton or,
// past the state budget, several): the flat ones, or the deep ones that
// start with one anchor ("" for those that start with none).
type group struct {
	deep   bool
	anchor string
	ids    []int32      // ascending
	rel    []rules.Glob // per id, the glob without the anchor's tokens
}

func (g *group) budget() int {
	if g.deep {
		return deepStates
	}
	return flatStates
}

// groups partitions the alternatives: the flat group first (always there,
// possibly empty), then one deep group per anchor that some deep
// alternative starts with, the unanchored one first, then in anchorsOf's
// order. A deep alternative goes to the longest anchor it starts with.
func (m *Matcher) groups() []group {
	anchors := anchorsOf(m.pol)
	flat := group{}
	deepBy := make([]group, len(anchors)+1) // [0]: no anchor
	for i, a := range anchors {
		deepBy[i+1].anchor = a
	}
	for id, a := range m.alts {
		g := a.glob
		if !deep(g) {
			flat.ids = append(flat.ids, int32(id))
			flat.rel = append(flat.rel, *g)
			continue
		}
		best, skip := 0, 0
		for i, an := range anchors {
			if n := anchorTokens(g, an); n > 0 && len(an) > len(deepBy[best].anchor) {
				best, skip = i+1, n
			}
		}
		rel := *g
		rel.Tokens = g.Tokens[skip:]
		deepBy[best].ids = append(deepBy[best].ids, int32(id))
		deepBy[best].rel = append(deepBy[best].rel, rel)
	}
	out := []group{flat}
	for _, g := range deepBy {
		if len(g.ids) > 0 {
			g.deep = true
			out = append(out, g)
		}
	}
	return out
}

// groupKey digests what a group's automata are compiled from: the state
// budget and each glob's tokens after the anchor, in order. It names no
// anchor, so groups that differ only in theirs share an entry; such a
// group's key begins with SharedKeyPrefix.
func groupKey(g *group) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00group\x00%d\x00%d\x00%t\x00%d\x00", cacheFormat, g.budget(), maxParts, g.deep, len(g.rel))
	var b []byte
	for _, gl := range g.rel {
		b = binary.LittleEndian.AppendUint32(b[:0], uint32(len(gl.Tokens)))
		for _, t := range gl.Tokens {
			b = append(b, byte(t.Kind))
			b = binary.LittleEndian.AppendUint32(b, uint32(t.Rune))
			b = binary.LittleEndian.AppendUint32(b, uint32(len(t.Ranges)))
			for _, rg := range t.Ranges {
				b = binary.LittleEndian.AppendUint32(b, uint32(rg.Lo))
				b = binary.LittleEndian.AppendUint32(b, uint32(rg.Hi))
			}
		}
		h.Write(b)
	}
	key := hex.EncodeToString(h.Sum(nil))
	if g.anchor != "" {
		key = SharedKeyPrefix + key
	}
	return key
}

// relocate returns the automaton of anchor followed by what a matches: a
// chain of one state per rune of anchor before a's start. anchor must be
// non-empty valid UTF-8. The rune classes are refined so that each of the
// anchor's runes has a class of its own; a class of a that other runes
// share is split, and every class keeps at least one rune (the subtree
// analysis reads every class as a possible next rune).
func (a *automaton) relocate(anchor string) (*automaton, error) {
	runes := []rune(anchor)
	if len(a.hiLo) == 0 || a.hiLo[0] != utf8.RuneSelf || len(a.hiCls) != len(a.hiLo) || len(a.accepts) != a.nstates ||
		uint64(len(a.trans)) != uint64(a.nstates)*uint64(a.ncls+1) {
		return nil, errBadCache
	}
	// The runes as intervals of one class each: every ASCII rune, then
	// a's non-ASCII intervals.
	type span struct {
		lo, hi rune // [lo, hi)
		cls    uint16
		anchor bool // the span is one rune of the anchor
	}
	var spans []span
	for r := rune(0); r < utf8.RuneSelf; r++ {
		spans = append(spans, span{lo: r, hi: r + 1, cls: a.ascii[r]})
	}
	for i, lo := range a.hiLo {
		hi := rune(utf8.MaxRune + 1)
		if i+1 < len(a.hiLo) {
			hi = a.hiLo[i+1]
		}
		spans = append(spans, span{lo: lo, hi: hi, cls: a.hiCls[i]})
	}
	for _, r := range runes {
		i, _ := slices.BinarySearchFunc(spans, r, func(s span, r rune) int {
			switch {
			case s.hi <= r:
				return -1
			case s.lo > r:
				return 1
			}
			return 0
		})
		s := spans[i]
		if s.anchor {
			continue
		}
		var repl []span
		if s.lo < r {
			repl = append(repl, span{lo: s.lo, hi: r, cls: s.cls})
		}
		repl = append(repl, span{lo: r, hi: r + 1, cls: s.cls, anchor: true})
		if r+1 < s.hi {
			repl = append(repl, span{lo: r + 1, hi: s.hi, cls: s.cls})
		}
		spans = slices.Replace(spans, i, i+1, repl...)
	}
	// The new classes: an anchor rune keeps its old class where no other
	// rune is left in it, and takes a new one otherwise.
	ncls := a.ncls
	others := make([]bool, a.ncls) // the old class keeps a rune not of the anchor
	for _, s := range spans {
		if !s.anchor {
			others[s.cls] = true
		}
	}
	oldOf := make([]uint16, 0, a.ncls+len(runes))
	for c := range a.ncls {
		oldOf = append(oldOf, uint16(c))
	}
	newCls := map[rune]uint16{}
	for i := range spans {
		s := &spans[i]
		if !s.anchor {
			continue
		}
		if !others[s.cls] {
			others[s.cls] = true // the first anchor rune of it keeps it
			newCls[s.lo] = s.cls
			continue
		}
		if ncls >= 1<<16-1 {
			return nil, fmt.Errorf("%w: too many rune classes", ErrTooComplex)
		}
		newCls[s.lo] = uint16(ncls)
		oldOf = append(oldOf, s.cls)
		s.cls = uint16(ncls)
		ncls++
	}
	n := uint32(len(runes))
	width, oldWidth := uint32(ncls+1), uint32(a.ncls+1)
	// The chain, then a's states, then a dead state of the chain's own
	// (a sink that accepts nothing). a has one too, but where sinksLast
	// left it is not something to rely on: in the VM matrix (TCG) a
	// compiled automaton once came with its dead state outside the sinks
	// sinkFrom names, which costs run only its early stop.
	nstates := int(n) + a.nstates + 1
	if nstates*int(width) > maxDFACells {
		return nil, fmt.Errorf("%w: more than %d automaton cells", ErrTooComplex, maxDFACells)
	}
	sets := a.sets
	empty := slices.IndexFunc(sets, func(s []int32) bool { return len(s) == 0 })
	if empty < 0 {
		empty = len(sets)
		sets = append(slices.Clip(sets), []int32{})
	}
	dead := n + uint32(a.nstates)
	off := func(st uint32) uint32 { return st*width + 1 }
	// Old states follow the chain: old state s is new state n+s.
	moved := func(oldOff uint32) uint32 { return off(n + (oldOff-1)/oldWidth) }
	trans := make([]uint32, nstates*int(width))
	accepts := make([]uint32, nstates)
	for i, r := range runes {
		row := trans[uint32(i)*width : uint32(i+1)*width]
		row[0] = uint32(empty)
		for c := uint32(1); c < width; c++ {
			row[c] = off(dead)
		}
		next := off(uint32(i) + 1)
		if uint32(i)+1 == n {
			next = moved(a.start)
		}
		row[1+uint32(newCls[r])] = next
		accepts[i] = uint32(empty)
	}
	row := trans[dead*width : (dead+1)*width]
	row[0] = uint32(empty)
	for c := uint32(1); c < width; c++ {
		row[c] = off(dead)
	}
	accepts[dead] = uint32(empty)
	// a's states. Every cell is read here, and each must name a state (a
	// cached entry that was vouched for had its cells taken unchecked,
	// and what is made here is kept under a key of its own); and a must
	// have a dead state somewhere, as every compiled automaton has: one
	// without is damaged.
	total := uint32(a.nstates) * oldWidth
	hasDead := false
	for st := range uint32(a.nstates) {
		src := a.trans[st*oldWidth : (st+1)*oldWidth]
		row := trans[(n+st)*width : (n+st+1)*width]
		if int(src[0]) >= len(a.sets) || int(a.accepts[st]) >= len(a.sets) {
			return nil, errBadCache
		}
		row[0] = src[0]
		self := true
		for c := range uint32(ncls) {
			to := src[1+uint32(oldOf[c])]
			if to < 1 || to-1 >= total || (to-1)%oldWidth != 0 {
				return nil, errBadCache
			}
			self = self && to == st*oldWidth+1
			row[1+c] = moved(to)
		}
		accepts[n+st] = a.accepts[st]
		hasDead = hasDead || self && len(a.sets[a.accepts[st]]) == 0
	}
	if !hasDead {
		return nil, errBadCache
	}
	if s := a.start; s < 1 || s-1 >= total || (s-1)%oldWidth != 0 {
		return nil, errBadCache
	}
	out := &automaton{ncls: ncls, slash: a.slash, trans: trans, start: off(0), accepts: accepts,
		sets: sets, nstates: nstates, nfaNodes: a.nfaNodes + int(n)}
	for _, s := range spans {
		if s.lo < utf8.RuneSelf {
			out.ascii[s.lo] = s.cls
			continue
		}
		if k := len(out.hiCls); k > 0 && out.hiCls[k-1] == s.cls {
			continue
		}
		out.hiLo = append(out.hiLo, s.lo)
		out.hiCls = append(out.hiCls, s.cls)
	}
	out.sinksLast(width)
	return out, nil
}
