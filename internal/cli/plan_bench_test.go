package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agent-launcher/agent-launcher/landlock"
)

// BenchmarkPlanWorkspace plans the floor afresh, with the private view and
// the embedded default policy, for a git workspace of 10,000 files in 100
// directories: what a run pays after a session changed its workspace
// (the kept plan no longer holds).
func BenchmarkPlanWorkspace(b *testing.B) {
	e, p, ws := benchWorkspace(b)
	e.view = e.privateView(p.pol, ws)
	b.ReportAllocs()
	for b.Loop() {
		rec := landlock.NewRecorder(landlock.OS())
		if _, _, _, _, err := e.planFloorOn(rec, p, 7, ""); err != nil {
			b.Fatal(err)
		}
		if obs, _ := rec.Observations(); len(obs) == 0 {
			b.Fatal("no questions asked")
		}
	}
}

// BenchmarkReviewWalk walks the same workspace for the session-end review
// with no index kept (a session's first walk, or one after the workspace
// changed everywhere).
func BenchmarkReviewWalk(b *testing.B) {
	e, p, ws := benchWorkspace(b)
	e.view = e.privateView(p.pol, ws)
	roots := e.reviewRoots(p.pol, p.m)
	b.ReportAllocs()
	for b.Loop() {
		snap, incomplete, _ := walkPersistence(p.m, "", roots, nil, nil)
		if incomplete != "" || len(snap) == 0 {
			b.Fatalf("walk: %d persistence paths, incomplete %q", len(snap), incomplete)
		}
	}
}

// benchWorkspace makes a git workspace of 10,000 files in 100 directories
// with a throwaway home and state, and loads the embedded default policy.
func benchWorkspace(b *testing.B) (*env, *compiled, string) {
	tmp := b.TempDir()
	ws := filepath.Join(tmp, "ws")
	for d := range 100 {
		dir := filepath.Join(ws, "src", fmt.Sprintf("pkg%d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", f)), []byte("package x\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, d := range []string{".git/hooks", ".git/objects"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(tmp+"/home", 0o755); err != nil {
		b.Fatal(err)
	}
	e, p := loadedEnv(b, tmp, &policyFlags{workspace: ws})
	return e, p, ws
}

// BenchmarkPlanKey digests what a plan depends on, as every run does
// before it looks for a kept plan.
func BenchmarkPlanKey(b *testing.B) {
	tmp := b.TempDir()
	e, p := loadedEnv(b, tmp, &policyFlags{workspace: tmp})
	e.view = e.privateView(p.pol, tmp)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.planKey(p, 7, "/x"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeptPlan reads a kept plan back and checks that it holds, as a
// run in a workspace that did not change does.
func BenchmarkKeptPlan(b *testing.B) {
	tmp := b.TempDir()
	e, p := loadedEnv(b, tmp, &policyFlags{workspace: tmp})
	e.view = e.privateView(p.pol, tmp)
	canary, err := prepareCanary(e.launcher.StateDir)
	if err != nil {
		b.Fatal(err)
	}
	for range 2 {
		if _, _, _, err := e.planFloorCached(p, 7, canary); err != nil {
			b.Fatal(err)
		}
	}
	key, err := e.planKey(p, 7, canary)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := e.planCache().get(key, landlock.OS()); !ok {
			b.Fatal("the kept plan does not hold")
		}
	}
}
