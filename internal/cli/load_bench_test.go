package cli

import "testing"

// BenchmarkLoadDefault loads and compiles the embedded default policy with
// its automata kept, as every run does first.
func BenchmarkLoadDefault(b *testing.B) {
	tmp := b.TempDir()
	e, _ := loadedEnv(b, tmp, &policyFlags{workspace: tmp}) // fills the automata cache
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.load(""); err != nil {
			b.Fatal(err)
		}
	}
}
