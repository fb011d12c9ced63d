package tiers

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/agent-launcher/agent-launcher/rules"
)

// Cache stores compiled automata between runs of a program, so that a
// launcher starting an agent does not rebuild the same automata every time
// (a few tens of milliseconds for the built-in rules). Keys are hex
// SHA-256 digests of everything the automata depend on; values are opaque.
// Get returns false on a miss. A Cache is trusted like the policy file: an
// entry is checked for consistency, not authenticity, so it must live where
// only the operator writes (the launcher's state directory, which the
// built-in denylist keeps from agents).
type Cache interface {
	Get(key string) ([]byte, bool)
	Put(key string, value []byte)
}

// CompileCached is Compile with the automata taken from c when an entry for
// exactly these patterns exists, and stored in c otherwise. An entry that
// fails to decode or to validate is ignored (and replaced).
func CompileCached(p *rules.Policy, c Cache) (*Matcher, error) {
	return compile(p, c)
}

// cacheFormat changes whenever the automaton layout or its construction
// changes, so that old entries are never read as new.
const cacheFormat = "agent-launcher tiers automata v1"

// cacheKey digests the inputs of the automata: the glob alternatives in id
// (rank) order with their group, and the state budgets.
func cacheKey(m *Matcher, groups [2][]int32) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00", cacheFormat, flatStates, deepStates, maxParts)
	var n [4]byte
	for gi, g := range groups {
		binary.LittleEndian.PutUint32(n[:], uint32(len(g)))
		h.Write([]byte{byte(gi)})
		h.Write(n[:])
		for _, id := range g {
			binary.LittleEndian.PutUint32(n[:], uint32(id))
			h.Write(n[:])
			t := m.alts[id].glob.Text
			binary.LittleEndian.PutUint32(n[:], uint32(len(t)))
			h.Write(n[:])
			h.Write([]byte(t))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
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

func encodeParts(parts []part, nflat int) []byte {
	w := wireParts{Nflat: nflat}
	for _, pt := range parts {
		a := pt.a
		w.Parts = append(w.Parts, wirePart{IDs: pt.ids, A: wireAutomaton{
			Ncls: a.ncls, Slash: a.slash, ASCII: a.ascii[:], HiLo: a.hiLo, HiCls: a.hiCls,
			Trans: a.trans, Start: a.start, SinkFrom: a.sinkFrom, Accepts: a.accepts, Sets: a.sets,
			Nstates: a.nstates, NFANodes: a.nfaNodes,
		}})
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&w); err != nil {
		return nil
	}
	return b.Bytes()
}

var errBadCache = errors.New("tiers: cache entry does not fit")

// decodeParts decodes and validates a cache entry for a matcher with
// nalts alternatives in groups: every index must be in range, so that a
// damaged entry can make Decide neither panic nor read another rule.
func decodeParts(data []byte, groups [2][]int32) (parts []part, nflat int, err error) {
	defer func() {
		if recover() != nil {
			parts, nflat, err = nil, 0, errBadCache
		}
	}()
	var w wireParts
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&w); err != nil {
		return nil, 0, err
	}
	if len(w.Parts) == 0 || len(w.Parts) > maxParts || w.Nflat < 1 || w.Nflat >= len(w.Parts) {
		return nil, 0, errBadCache
	}
	// The ids of the flat parts must be exactly the flat group, in order;
	// likewise the deep ones.
	var flat, deepIDs []int32
	parts = make([]part, len(w.Parts))
	for k, wp := range w.Parts {
		if k < w.Nflat {
			flat = append(flat, wp.IDs...)
		} else {
			deepIDs = append(deepIDs, wp.IDs...)
		}
		a, err := wp.A.automaton()
		if err != nil {
			return nil, 0, err
		}
		for _, set := range a.sets {
			for _, l := range set {
				if l < 0 || int(l) >= len(wp.IDs) {
					return nil, 0, errBadCache
				}
			}
		}
		parts[k] = part{a: a, ids: wp.IDs}
	}
	if !equalIDs(flat, groups[0]) || !equalIDs(deepIDs, groups[1]) {
		return nil, 0, errBadCache
	}
	return parts, w.Nflat, nil
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

func (w *wireAutomaton) automaton() (*automaton, error) {
	if w.Ncls < 1 || w.Ncls > 1<<16-1 || int(w.Slash) >= w.Ncls || len(w.ASCII) != len(automaton{}.ascii) ||
		len(w.HiLo) != len(w.HiCls) || w.Nstates < 1 || len(w.Accepts) != w.Nstates {
		return nil, errBadCache
	}
	width := uint64(w.Ncls) + 1
	if uint64(len(w.Trans)) != uint64(w.Nstates)*width {
		return nil, errBadCache
	}
	validState := func(off uint32) bool {
		return off >= 1 && uint64(off-1)%width == 0 && uint64(off-1)/width < uint64(w.Nstates)
	}
	for i, v := range w.Trans {
		if uint64(i)%width == 0 {
			if int(v) >= len(w.Sets) {
				return nil, errBadCache
			}
		} else if !validState(v) {
			return nil, errBadCache
		}
	}
	for _, c := range w.ASCII {
		if int(c) >= w.Ncls {
			return nil, errBadCache
		}
	}
	for _, c := range w.HiCls {
		if int(c) >= w.Ncls {
			return nil, errBadCache
		}
	}
	for _, acc := range w.Accepts {
		if int(acc) >= len(w.Sets) {
			return nil, errBadCache
		}
	}
	if !validState(w.Start) || w.SinkFrom < 1 || uint64(w.SinkFrom-1) > uint64(len(w.Trans)) {
		return nil, errBadCache
	}
	a := &automaton{ncls: w.Ncls, slash: w.Slash, hiLo: w.HiLo, hiCls: w.HiCls, trans: w.Trans,
		start: w.Start, sinkFrom: w.SinkFrom, accepts: w.Accepts, sets: w.Sets, nstates: w.Nstates, nfaNodes: w.NFANodes}
	copy(a.ascii[:], w.ASCII)
	return a, nil
}
