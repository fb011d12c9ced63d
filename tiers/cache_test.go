package tiers

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/agent-launcher/agent-launcher/rules"
)

type mapCache struct {
	m          map[string][]byte
	gets, puts int
}

func (c *mapCache) Get(k string) ([]byte, bool) { c.gets++; v, ok := c.m[k]; return v, ok }
func (c *mapCache) Put(k string, v []byte)      { c.puts++; c.m[k] = v }

// TestCompileCached: a matcher from the cache decides exactly like a fresh
// one, and a damaged entry is ignored, never trusted.
func TestCompileCached(t *testing.T) {
	for i, c := range decideCorpus {
		doc := fuzzPolicy(c.policy)
		fresh := cachedMatcher(t, doc)
		p := fresh.Policy()
		cache := &mapCache{m: map[string][]byte{}}
		// A miss stores the matcher's entry and one per deep group key
		// (anchor.go).
		if _, err := CompileCached(p, cache); err != nil || cache.puts != 1+len(groupKeys(fresh)) || len(cache.m) != cache.puts {
			t.Fatalf("%d: miss: %v, %d puts, %d entries; want 1 + %d", i, err, cache.puts, len(cache.m), len(groupKeys(fresh)))
		}
		puts := cache.puts
		hit, err := CompileCached(p, cache)
		if err != nil || cache.puts != puts {
			t.Fatalf("%d: hit: %v, %d puts", i, err, cache.puts-puts)
		}
		sameDecisions(t, doc, fresh, hit, c.path)
		// An entry at an address not 4-aligned (read, not mapped) is
		// copied, and used.
		for key, v := range cache.m {
			odd := make([]byte, len(v)+1)[1:]
			copy(odd, v)
			cache.m[key] = odd
			m, err := CompileCached(p, cache)
			if err != nil || cache.puts != puts {
				t.Fatalf("%d: unaligned entry: %v, %d puts (it was compiled again)", i, err, cache.puts-puts)
			}
			sameDecisions(t, doc, fresh, m, c.path)
			cache.m[key] = v
		}
		// Damage every entry in a few ways: the matcher must still be right.
		for key, v := range cache.m {
			for j, bad := range [][]byte{v[:len(v)/2], flip(v, len(v)/3), flip(v, len(v)-9), nil} {
				cache.m[key] = bad
				m, err := CompileCached(p, cache)
				if err != nil {
					t.Fatalf("%d/%d: %v", i, j, err)
				}
				sameDecisions(t, doc, fresh, m, c.path)
			}
		}
	}
}

func flip(b []byte, i int) []byte {
	out := append([]byte(nil), b...)
	if i >= 0 && i < len(out) {
		out[i] ^= 0x5a
	}
	return out
}

func sameDecisions(t *testing.T, doc string, want, got *Matcher, pathSpec []byte) {
	t.Helper()
	paths := []string{"/", fuzzPath(pathSpec), testWS + fuzzPath(pathSpec), testHome + fuzzPath(pathSpec), testWS + "/.env", testHome + "/.ssh/id_rsa", "/usr/bin/x"}
	for _, path := range paths {
		for op := range numOps {
			if a, b := want.Decide(path, op), got.Decide(path, op); a.Verdict != b.Verdict || a.Tier != b.Tier || a.Rule.Pattern != b.Rule.Pattern || a.Rule.Source != b.Rule.Source || a.Why != b.Why {
				t.Fatalf("policy:\n%s\n%s %s: fresh %v, cached %v", doc, path, op, a, b)
			}
		}
	}
	if fmt.Sprint(want.Stats()) != fmt.Sprint(got.Stats()) {
		t.Fatalf("stats differ: %+v vs %+v", want.Stats(), got.Stats())
	}
	_ = rules.Deny
}

// voucherCache is a mapCache that vouches for the keys in vouched and
// records the keys it was told validated.
type voucherCache struct {
	mapCache
	vouched   map[string]bool
	validated []string
}

func (c *voucherCache) Vouched(k string) bool { return c.vouched[k] }
func (c *voucherCache) Validated(k string)    { c.validated = append(c.validated, k) }

// TestCompileCachedVouched: an entry that validated is reported to a
// Voucher once; a vouched entry decides as a fresh matcher does, its
// structure still checked but not its cells. So a Voucher must vouch only
// for an entry that cannot have changed: a cell damaged after the entry
// validated is taken as it is (the entry is not compiled again), while the
// same damage in an entry not vouched for is caught.
func TestCompileCachedVouched(t *testing.T) {
	doc := `
[file_policy]
presets = ["system"]
write_paths = ["<workspace>/**"]
prompt_paths = ["~/notes/**"]
`
	fresh := cachedMatcher(t, doc)
	p := fresh.Policy()
	c := &voucherCache{mapCache: mapCache{m: map[string][]byte{}}, vouched: map[string]bool{}}
	if _, err := CompileCached(p, c); err != nil || len(c.validated) != 0 {
		t.Fatalf("miss: %v, validated %q (a fresh entry needs no validation)", err, c.validated)
	}
	// The matcher's own entry; the groups' are the next test's.
	key := cacheKey(fresh, fresh.groups())
	if _, ok := c.m[key]; !ok {
		t.Fatal("the miss stored no entry under the matcher's key")
	}
	c.puts = 1
	hit, err := CompileCached(p, c)
	if err != nil || c.puts != 1 || len(c.validated) != 1 || c.validated[0] != key {
		t.Fatalf("hit: %v, %d puts, validated %q; want %q once", err, c.puts, c.validated, key)
	}
	sameDecisions(t, doc, fresh, hit, []byte("a/b"))
	c.vouched[key] = true
	vouched, err := CompileCached(p, c)
	if err != nil || c.puts != 1 || len(c.validated) != 1 {
		t.Fatalf("vouched: %v, %d puts, validated %q; want no compile and no second validation", err, c.puts, c.validated)
	}
	sameDecisions(t, doc, fresh, vouched, []byte("a/b"))

	// A transition cell that names no state.
	good := c.m[key]
	bad := append([]byte(nil), good...)
	w, err := decodeWire(bad)
	if err != nil {
		t.Fatal(err)
	}
	w.Parts[0].A.Trans[1] = 0xfffffff0 // in place: the tables alias the entry
	if bytes.Equal(bad, good) {
		t.Fatal("the damage did not reach the entry")
	}
	c.m[key] = bad
	if _, err := CompileCached(p, c); err != nil || c.puts != 1 {
		t.Fatalf("vouched, damaged cell: %v, %d puts; want the entry taken as vouched for", err, c.puts)
	}
	c.vouched[key] = false
	c.m[key] = bad
	m, err := CompileCached(p, c)
	if err != nil || c.puts != 2 {
		t.Fatalf("not vouched, damaged cell: %v, %d puts; want the entry refused and made again (from the groups' entries)", err, c.puts)
	}
	sameDecisions(t, doc, fresh, m, []byte("a/b"))
	// Damage to the structure is caught, vouched or not.
	for _, v := range []bool{true, false} {
		c.vouched[key] = v
		c.m[key] = good[:len(good)/2]
		puts := c.puts
		m, err := CompileCached(p, c)
		if err != nil || c.puts != puts+1 {
			t.Fatalf("vouched %v, truncated: %v, %d puts; want it compiled again", v, err, c.puts-puts)
		}
		sameDecisions(t, doc, fresh, m, []byte("a/b"))
	}
}

// groupKeys returns the distinct keys of m's groups that have entries of
// their own: the deep ones.
func groupKeys(m *Matcher) map[string]bool {
	keys := map[string]bool{}
	for _, g := range m.groups() {
		if g.deep {
			keys[groupKey(&g)] = true
		}
	}
	return keys
}

// rewrite decodes a cache entry, lets f change it, and encodes it again.
func rewrite(t *testing.T, entry []byte, f func(*wireParts)) []byte {
	t.Helper()
	w, err := decodeWire(append([]byte(nil), entry...))
	if err != nil {
		t.Fatal(err)
	}
	f(w)
	parts := make([]part, len(w.Parts))
	for i := range w.Parts {
		parts[i] = part{a: w.Parts[i].A.build(), ids: w.Parts[i].IDs}
	}
	return encodeParts(parts, w.Nflat)
}

// TestDamagedGroupEntry: a shared group entry (anchor.go) that is damaged
// where it is stored is taken as a miss, compiled again and replaced,
// whether or not it is vouched for: never a panic, an error at every
// launch, or a wrong decision. (An adversarial review found each of these
// damages crashing or failing every launch whose own entry missed.)
func TestDamagedGroupEntry(t *testing.T) {
	doc := "[file_policy]\npresets = [\"system\"]\nwrite_paths = [\"<workspace>/**\"]\n"
	load := func(ws string) *Matcher {
		m, _ := loadAnchored(t, doc, "/home/u", ws)
		return m
	}
	first := load("/home/u/proj")
	var gkey string
	for k := range groupKeys(first) {
		gkey = k
	}
	damages := []struct {
		name string
		f    func(*wireParts)
	}{
		{"a non-ASCII interval below zero", func(w *wireParts) {
			w.Parts[0].A.HiLo = append(w.Parts[0].A.HiLo, -1<<31)
			w.Parts[0].A.HiCls = append(w.Parts[0].A.HiCls, 0)
		}},
		{"the non-ASCII intervals starting at 129", func(w *wireParts) { w.Parts[0].A.HiLo[0] = 129 }},
		{"no non-ASCII interval", func(w *wireParts) { w.Parts[0].A.HiLo, w.Parts[0].A.HiCls = nil, nil }},
		{"intervals out of order", func(w *wireParts) {
			a := &w.Parts[0].A
			a.HiLo = append(a.HiLo, 0x10FFFF, 0x200)
			a.HiCls = append(a.HiCls, 0, 0)
		}},
		{"every state accepting", func(w *wireParts) {
			a := &w.Parts[0].A
			full := -1
			for i, s := range a.Sets {
				if len(s) > 0 {
					full = i
				}
			}
			for st := range a.Accepts {
				a.Accepts[st] = uint32(full)
				a.Trans[st*(a.Ncls+1)] = uint32(full)
			}
		}},
		{"parts with no alternatives", func(w *wireParts) {
			for range maxParts - 1 {
				w.Parts = append(w.Parts, wirePart{A: w.Parts[0].A, IDs: []int32{}})
			}
		}},
		{"a transition between two states", func(w *wireParts) {
			a := &w.Parts[0].A
			a.Trans[a.Ncls+2] = a.Start + 1
		}},
	}
	for i, d := range damages {
		for _, vouched := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/vouched=%v", d.name, vouched), func(t *testing.T) {
				c := &voucherCache{mapCache: mapCache{m: map[string][]byte{}}, vouched: map[string]bool{}}
				if _, err := CompileCached(first.Policy(), c); err != nil {
					t.Fatal(err)
				}
				good := c.m[gkey]
				if good == nil {
					t.Fatalf("no entry under the group's key %s", gkey)
				}
				c.m[gkey] = rewrite(t, good, d.f)
				c.vouched[gkey] = vouched
				ws := fmt.Sprintf("/home/u/w%d", i)
				fresh := load(ws)
				puts := c.puts
				m, err := func() (m *Matcher, err error) {
					defer func() {
						if r := recover(); r != nil {
							err = fmt.Errorf("panic: %v", r)
						}
					}()
					return CompileCached(fresh.Policy(), c)
				}()
				if err != nil {
					t.Fatalf("workspace %s with the damaged group entry: %v", ws, err)
				}
				sameDecisions(t, doc, fresh, m, []byte{0, 1})
				for _, p := range anchorPaths([]string{"/home/u", ws}, []byte{14, 15}) {
					for op := range numOps {
						if x, y := m.Decide(p, op), fresh.Decide(p, op); x.Verdict != y.Verdict || !sameRule(x.Rule, y.Rule) {
							t.Fatalf("Decide(%q, %s) = %v, fresh %v", p, op, x, y)
						}
					}
				}
				if c.puts-puts != 2 || bytes.Equal(c.m[gkey], rewrite(t, good, d.f)) {
					t.Errorf("%d puts; want the matcher's entry and the group's again, the damaged one replaced", c.puts-puts)
				}
			})
		}
	}
	// A matcher's entry whose non-ASCII intervals do not start at 128 is
	// refused too (it made Decide panic on such a rune).
	c := &mapCache{m: map[string][]byte{}}
	p := first.Policy()
	if _, err := CompileCached(p, c); err != nil {
		t.Fatal(err)
	}
	key := cacheKey(first, first.groups())
	c.m[key] = rewrite(t, c.m[key], func(w *wireParts) { w.Parts[0].A.HiLo = []rune{200}; w.Parts[0].A.HiCls = []uint16{0} })
	puts := c.puts
	m, err := CompileCached(p, c)
	if err != nil || c.puts == puts {
		t.Fatalf("matcher entry with intervals from 200: %v, %d puts; want it refused and made again", err, c.puts-puts)
	}
	if d := m.Decide("/\u0081", OpRead); d.Rule == nil {
		t.Fatalf("Decide of a non-ASCII name: %+v", d)
	}
}
