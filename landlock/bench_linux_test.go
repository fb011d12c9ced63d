package landlock

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// benchTree makes dirs directories of files files each under a temporary
// directory: a workspace the planner and the plan cache list whole.
func benchTree(b *testing.B, dirs, files int) string {
	b.Helper()
	root := b.TempDir()
	for d := range dirs {
		dir := filepath.Join(root, fmt.Sprintf("d%02d", d%10), fmt.Sprintf("s%04d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range files {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%03d.txt", f)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return root
}

// BenchmarkOSReadDir lists a directory of 100 files.
func BenchmarkOSReadDir(b *testing.B) {
	dir := filepath.Join(benchTree(b, 1, 100), "d00", "s0000")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := OS().ReadDir(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHold asks again the questions of a plan of a 10,000-file
// workspace under the base policy, as run does with a kept plan; every
// directory's stamp is settled, so only the stamps are asked.
func BenchmarkHold(b *testing.B) {
	ws := benchTree(b, 100, 100)
	home := b.TempDir()
	time.Sleep(time.Duration(stampSettle) + 100*time.Millisecond) // a workspace at rest: stamps settled
	o := rules.Options{Config: "/cfg/config.toml", Home: home, Workspace: ws,
		ReadFile: func(name string) ([]byte, error) {
			if name == "/cfg/config.toml" {
				return []byte(basePolicy + `deny_paths = ["**/.env"]` + "\n"), nil
			}
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		},
		Launcher: rules.LauncherPaths{StateDir: filepath.Join(home, ".local/state/agent-launcher")},
	}
	pol, err := rules.Load(o)
	if err != nil {
		b.Fatal(err)
	}
	m, err := tiers.Compile(pol)
	if err != nil {
		b.Fatal(err)
	}
	rec := NewRecorder(OS())
	if _, err := NewPlan(m, 7, rec, Options{ScanRoots: []string{home, ws}}); err != nil {
		b.Fatal(err)
	}
	obs, ok := rec.Observations()
	if !ok {
		b.Fatal("the filesystem changed while planning")
	}
	b.ReportMetric(float64(len(obs)), "questions")
	b.ReportAllocs()
	for b.Loop() {
		if !obs.Hold(OS()) {
			for _, o := range obs {
				if !(Observations{o}).Hold(OS()) {
					b.Log("changed:", o)
				}
			}
			b.Fatal("the answers changed")
		}
	}
}
