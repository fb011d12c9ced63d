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
