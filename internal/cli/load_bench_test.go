package cli

import "testing"

// BenchmarkLoadDefault loads and compiles the embedded default policy with
// its automata kept, as every run does first.
func BenchmarkLoadDefault(b *testing.B) {
	tmp := b.TempDir()
	b.Setenv("HOME", tmp+"/home")
	b.Setenv("XDG_CONFIG_HOME", tmp+"/config")
	b.Setenv("XDG_STATE_HOME", tmp+"/state")
	b.Setenv("AGENT_LAUNCHER_CONFIG", "")
	e, err := resolveEnv(&policyFlags{workspace: tmp})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.load(""); err != nil { // fills the automata cache
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.load(""); err != nil {
			b.Fatal(err)
		}
	}
}
