package tiers

import (
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
		if _, err := CompileCached(p, cache); err != nil || cache.puts != 1 {
			t.Fatalf("%d: miss: %v, %d puts", i, err, cache.puts)
		}
		hit, err := CompileCached(p, cache)
		if err != nil || cache.puts != 1 {
			t.Fatalf("%d: hit: %v, %d puts", i, err, cache.puts)
		}
		sameDecisions(t, doc, fresh, hit, c.path)
		// An entry at an address not 4-aligned (read, not mapped) is
		// copied, and used.
		for key, v := range cache.m {
			odd := make([]byte, len(v)+1)[1:]
			copy(odd, v)
			cache.m[key] = odd
			m, err := CompileCached(p, cache)
			if err != nil || cache.puts != 1 {
				t.Fatalf("%d: unaligned entry: %v, %d puts (it was compiled again)", i, err, cache.puts)
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
