package tiers

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/agent-launcher/agent-launcher/rules"
)

// Cache stores compiled automata between runs of a program, so that a
// launcher starting an agent does not rebuild the same automata every time
// (a few tens of milliseconds for the built-in rules). Keys are hex
// SHA-256 digests of everything the automata depend on; values are opaque.
// Get returns false on a miss; the value it returns may be read-only
// memory (a mapped file) and must stay valid for the program's life. A
// Cache is trusted like the policy file: an
// entry is checked for consistency, not authenticity, so it must live where
// only the operator writes (the launcher's state directory, which the
// built-in denylist keeps from agents).
//
// A matcher's entry is built from the entries of its groups of automata
// (those of patterns starting with "**/" after a directory are shared by
// every workspace and home directory: anchor.go), and a miss of the first
// is cheap while the others hit. Their keys begin with SharedKeyPrefix: a
// Cache that bounds its size should bound them apart, so that the entries
// of many workspaces do not push out the few they all share.
type Cache interface {
	Get(key string) ([]byte, bool)
	Put(key string, value []byte)
}

// SharedKeyPrefix begins the keys of the entries many matchers share.
const SharedKeyPrefix = "g-"

// A Voucher is a Cache that remembers which of its entries were validated:
// Vouched reports whether the entry Get returned for key is, unchanged, one
// that validated before (in an earlier process), and Validated records that
// it did. A vouched entry's structure (every count and length) is checked
// still, but not each cell of its transition tables: that reads every page
// of the entry, about a millisecond of a launch for the built-in rules on
// the machine the start-up target is measured on. What the validation
// guards against is an entry damaged where it is stored (the cache is
// trusted like the policy file: checked for consistency, not
// authenticity): cells it refuses would make Decide panic, or decide by
// another rule (cells it accepts can do that too). So a Voucher must vouch
// only for an entry that cannot have changed since it validated, and must
// not vouch again for one that a process using it ended in a panic
// (internal/cli's file cache takes its mark off while the entry is in use).
type Voucher interface {
	Vouched(key string) bool
	Validated(key string)
}

// CompileCached is Compile with the automata taken from c when an entry for
// exactly these patterns exists, and stored in c otherwise. An entry that
// fails to decode or to validate is ignored (and replaced).
func CompileCached(p *rules.Policy, c Cache) (*Matcher, error) {
	return compile(p, c)
}

// cacheFormat changes whenever the automaton layout or its construction
// changes, so that old entries are never read as new.
const cacheFormat = "agent-launcher tiers automata v2"

// cacheKey digests the inputs of the automata: the glob alternatives in id
// (rank) order with their group and its anchor, and the state budgets.
func cacheKey(m *Matcher, groups []group) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00", cacheFormat, flatStates, deepStates, maxParts)
	var n [4]byte
	str := func(s string) {
		binary.LittleEndian.PutUint32(n[:], uint32(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, g := range groups {
		binary.LittleEndian.PutUint32(n[:], uint32(len(g.ids)))
		h.Write([]byte{boolByte(g.deep)})
		str(g.anchor)
		h.Write(n[:])
		for _, id := range g.ids {
			binary.LittleEndian.PutUint32(n[:], uint32(id))
			h.Write(n[:])
			str(m.alts[id].glob.Text)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// wirePart and wireAutomaton are the cached form of a part.
type wirePart struct {
	A   wireAutomaton
	IDs []int32
}

type wireAutomaton struct {
	Ncls     int
	Slash    uint16
	ASCII    []uint16
	HiLo     []rune
	HiCls    []uint16
	Trans    []uint32
	Start    uint32
	SinkFrom uint32
	Accepts  []uint32
	Sets     [][]int32
	Nstates  int
	NFANodes int
}

type wireParts struct {
	Nflat int
	Parts []wirePart
}

// The entry format: little-endian uint32s. nflat, the part count, then
// per part its automaton's scalars and length-prefixed slices, and its
// ids. A hand-rolled format, not gob: decoding is on every launch's path,
// and gob's reflection costs several milliseconds for the built-in rules.
type encoder struct{ b []byte }

func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u32s(vs []uint32) {
	e.u32(uint32(len(vs)))
	for _, v := range vs {
		e.u32(v)
	}
}
func (e *encoder) i32s(vs []int32) {
	e.u32(uint32(len(vs)))
	for _, v := range vs {
		e.u32(uint32(v))
	}
}

type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) u32() uint32 {
	if len(d.b) < 4 {
		d.err = true
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

// n reads a length and checks that that many uint32s can follow.
func (d *decoder) n() int {
	n := d.u32()
	if uint64(n)*4 > uint64(len(d.b)) {
		d.err = true
		return 0
	}
	return int(n)
}

func (d *decoder) u32s() []uint32 {
	n := d.n()
	if n == 0 {
		return []uint32{}
	}
	var out []uint32
	if littleEndian {
		// The host's layout is the file's. An aligned entry (a mapped
		// file) is used in place; otherwise one copy, not n decodes (the
		// transition table is most of an entry). Nothing writes a cached
		// automaton's tables, so a read-only mapping is safe.
		if uintptr(unsafe.Pointer(&d.b[0]))%4 == 0 {
			out = unsafe.Slice((*uint32)(unsafe.Pointer(&d.b[0])), n)
		} else {
			out = make([]uint32, n)
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 4*n), d.b[:4*n])
		}
		d.b = d.b[4*n:]
		return out
	}
	out = make([]uint32, n)
	for i := range out {
		out[i] = d.u32()
	}
	return out
}

func (d *decoder) i32s() []int32 {
	u := d.u32s()
	if len(u) == 0 {
		return []int32{}
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&u[0])), len(u))
}

// littleEndian is set on little-endian hosts.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

func encodeParts(parts []part, nflat int) []byte {
	var e encoder
	e.u32(uint32(nflat))
	e.u32(uint32(len(parts)))
	for _, pt := range parts {
		a := pt.a
		e.u32(uint32(a.ncls))
		e.u32(uint32(a.slash))
		for _, c := range a.ascii {
			e.u32(uint32(c))
		}
		hi := make([]uint32, len(a.hiLo))
		for i, r := range a.hiLo {
			hi[i] = uint32(r)
		}
		e.u32s(hi)
		hc := make([]uint32, len(a.hiCls))
		for i, c := range a.hiCls {
			hc[i] = uint32(c)
		}
		e.u32s(hc)
		e.u32s(a.trans)
		e.u32(a.start)
		e.u32(a.sinkFrom)
		e.u32s(a.accepts)
		e.u32(uint32(len(a.sets)))
		for _, set := range a.sets {
			e.i32s(set)
		}
		e.u32(uint32(a.nstates))
		e.u32(uint32(a.nfaNodes))
		e.i32s(pt.ids)
	}
	return e.b
}

func decodeWire(data []byte) (*wireParts, error) {
	d := &decoder{b: data}
	w := &wireParts{Nflat: int(d.u32())}
	n := d.u32()
	if n > maxParts {
		return nil, errBadCache
	}
	for range n {
		var a wireAutomaton
		a.Ncls = int(d.u32())
		a.Slash = uint16(d.u32())
		a.ASCII = make([]uint16, len(automaton{}.ascii))
		for i := range a.ASCII {
			v := d.u32()
			if v > 1<<16-1 {
				d.err = true
			}
			a.ASCII[i] = uint16(v)
		}
		for _, v := range d.u32s() {
			a.HiLo = append(a.HiLo, rune(v))
		}
		for _, v := range d.u32s() {
			if v > 1<<16-1 {
				d.err = true
			}
			a.HiCls = append(a.HiCls, uint16(v))
		}
		a.Trans = d.u32s()
		a.Start = d.u32()
		a.SinkFrom = d.u32()
		a.Accepts = d.u32s()
		nsets := d.n()
		a.Sets = make([][]int32, nsets)
		for i := range a.Sets {
			a.Sets[i] = d.i32s()
		}
		a.Nstates = int(d.u32())
		a.NFANodes = int(d.u32())
		ids := d.i32s()
		if d.err {
			return nil, errBadCache
		}
		w.Parts = append(w.Parts, wirePart{A: a, IDs: ids})
	}
	if d.err || len(d.b) != 0 {
		return nil, errBadCache
	}
	return w, nil
}

var errBadCache = errors.New("tiers: cache entry does not fit")

// decodeParts decodes and validates a cache entry for a matcher whose
// alternatives fall in groups: every index must be in range, so that a
// damaged entry cannot make Decide panic or take an accept set of another
// automaton, and the parts must cover the groups in order, each within
// one, the flat group's first. With vouched (Voucher), the cells of the
// transition and accept tables are taken as they validated before.
func decodeParts(data []byte, groups []group, vouched bool) (parts []part, nflat int, err error) {
	defer func() {
		if recover() != nil {
			parts, nflat, err = nil, 0, errBadCache
		}
	}()
	w, err := decodeWire(data)
	if err != nil {
		return nil, 0, err
	}
	if len(w.Parts) == 0 || len(w.Parts) > maxParts {
		return nil, 0, errBadCache
	}
	parts = make([]part, 0, len(w.Parts))
	for gi := range groups {
		g := &groups[gi]
		// One part or more per group; one with no alternatives only for
		// an empty group.
		for at := 0; at < len(g.ids) || at == 0 && len(g.ids) == 0; {
			if len(parts) == len(w.Parts) {
				return nil, 0, errBadCache
			}
			wp := &w.Parts[len(parts)]
			if len(wp.IDs) == 0 && len(g.ids) > 0 || at+len(wp.IDs) > len(g.ids) || !equalIDs(wp.IDs, g.ids[at:at+len(wp.IDs)]) {
				return nil, 0, errBadCache
			}
			a, err := wp.A.automaton(vouched)
			if err != nil {
				return nil, 0, err
			}
			if err := setsInRange(a, len(wp.IDs)); err != nil {
				return nil, 0, err
			}
			parts = append(parts, part{a: a, ids: wp.IDs, anchor: g.anchor})
			if at += len(wp.IDs); len(g.ids) == 0 {
				break
			}
		}
		if gi == 0 {
			nflat = len(parts)
		}
	}
	if len(parts) != len(w.Parts) || nflat != w.Nflat {
		return nil, 0, errBadCache
	}
	return parts, nflat, nil
}

// setsInRange checks that a's accept sets name only its n alternatives.
func setsInRange(a *automaton, n int) error {
	for _, set := range a.sets {
		for _, l := range set {
			if l < 0 || int(l) >= n {
				return errBadCache
			}
		}
	}
	return nil
}

// encodeGroup is the cache entry of one group's parts (groupKey): its
// alternatives by their place in the group, ids, so that any group of the
// same globs can take it.
func encodeGroup(parts []part, ids []int32) []byte {
	local := make([]part, len(parts))
	at := 0
	for k, pt := range parts {
		l := make([]int32, len(pt.ids))
		for i := range l {
			l[i] = int32(at + i)
		}
		at += len(pt.ids)
		local[k] = part{a: pt.a, ids: l}
	}
	if at != len(ids) {
		return nil
	}
	return encodeParts(local, 0)
}

// decodeGroup decodes and validates a group's entry (encodeGroup) for the
// group of alternatives ids: its parts must cover them in order.
func decodeGroup(data []byte, ids []int32, vouched bool) (parts []part, err error) {
	defer func() {
		if recover() != nil {
			parts, err = nil, errBadCache
		}
	}()
	w, err := decodeWire(data)
	if err != nil {
		return nil, err
	}
	if w.Nflat != 0 || len(w.Parts) == 0 || len(w.Parts) > maxParts {
		return nil, errBadCache
	}
	at := 0
	for _, wp := range w.Parts {
		if len(wp.IDs) == 0 {
			return nil, errBadCache // a group is split only where it has two alternatives or more
		}
		for i, l := range wp.IDs {
			if int(l) != at+i {
				return nil, errBadCache
			}
		}
		if at+len(wp.IDs) > len(ids) {
			return nil, errBadCache
		}
		a, err := wp.A.automaton(vouched)
		if err != nil {
			return nil, err
		}
		if err := setsInRange(a, len(wp.IDs)); err != nil {
			return nil, err
		}
		parts = append(parts, part{a: a, ids: ids[at : at+len(wp.IDs) : at+len(wp.IDs)]})
		at += len(wp.IDs)
	}
	if at != len(ids) {
		return nil, errBadCache
	}
	return parts, nil
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (w *wireAutomaton) automaton(vouched bool) (*automaton, error) {
	if w.Ncls < 1 || w.Ncls > 1<<16-1 || int(w.Slash) >= w.Ncls || len(w.ASCII) != len(automaton{}.ascii) ||
		len(w.HiLo) != len(w.HiCls) || w.Nstates < 1 || len(w.Accepts) != w.Nstates {
		return nil, errBadCache
	}
	width := uint64(w.Ncls) + 1
	if uint64(len(w.Trans)) != uint64(w.Nstates)*width {
		return nil, errBadCache
	}
	total := uint64(len(w.Trans))
	if vouched {
		if w.Start < 1 || uint64(w.Start)-1 >= total || (uint64(w.Start)-1)%width != 0 ||
			w.SinkFrom < 1 || uint64(w.SinkFrom-1) > total || !w.smallTablesValid() {
			return nil, errBadCache
		}
		return w.build(), nil
	}
	// A state is named by the offset of its row's second cell: valid has
	// bit off-1 set for each (a bit test per cell, where a division per
	// cell cost most of a launch's decoding).
	valid := make([]uint64, (total+63)/64)
	for o := uint64(0); o < total; o += width {
		valid[o>>6] |= 1 << (o & 63)
	}
	validState := func(off uint32) bool {
		x := uint64(off) - 1
		return off >= 1 && x < total && valid[x>>6]&(1<<(x&63)) != 0
	}
	for row := uint64(0); row < total; row += width {
		if int(w.Trans[row]) >= len(w.Sets) {
			return nil, errBadCache
		}
		for _, v := range w.Trans[row+1 : row+width] {
			if !validState(v) {
				return nil, errBadCache
			}
		}
	}
	if !w.smallTablesValid() {
		return nil, errBadCache
	}
	for _, acc := range w.Accepts {
		if int(acc) >= len(w.Sets) {
			return nil, errBadCache
		}
	}
	if !validState(w.Start) || w.SinkFrom < 1 || uint64(w.SinkFrom-1) > uint64(len(w.Trans)) {
		return nil, errBadCache
	}
	return w.build(), nil
}

// smallTablesValid checks the character-class tables: each class in range,
// and the non-ASCII intervals in order from utf8.RuneSelf on (classOf
// searches them; an interval below it would be read as an ASCII rune).
func (w *wireAutomaton) smallTablesValid() bool {
	for _, c := range w.ASCII {
		if int(c) >= w.Ncls {
			return false
		}
	}
	for _, c := range w.HiCls {
		if int(c) >= w.Ncls {
			return false
		}
	}
	if len(w.HiLo) == 0 || w.HiLo[0] != utf8.RuneSelf {
		return false
	}
	for i := 1; i < len(w.HiLo); i++ {
		if w.HiLo[i] <= w.HiLo[i-1] || w.HiLo[i] > utf8.MaxRune {
			return false
		}
	}
	return true
}

// build makes the automaton of w, its tables in place.
func (w *wireAutomaton) build() *automaton {
	a := &automaton{ncls: w.Ncls, slash: w.Slash, hiLo: w.HiLo, hiCls: w.HiCls, trans: w.Trans,
		start: w.Start, sinkFrom: w.SinkFrom, accepts: w.Accepts, sets: w.Sets, nstates: w.Nstates, nfaNodes: w.NFANodes}
	copy(a.ascii[:], w.ASCII)
	return a
}
