package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agent-launcher/agent-launcher/internal/launch"
	"github.com/agent-launcher/agent-launcher/landlock"
)

// requireRun skips where run refuses the kernel by design (no Landlock,
// or an ABI below the ladder's minimum), as the kernel suite does; an
// AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI that the kernel does not have fails.
func requireRun(t *testing.T) {
	t.Helper()
	k, err := landlock.Detect()
	if err != nil {
		t.Fatal(err)
	}
	if want := os.Getenv("AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI"); want != "" {
		if n, err := strconv.Atoi(want); err != nil || n != k.ABI {
			t.Fatalf("AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI=%s, kernel has ABI %d (%s)", want, k.ABI, k.Reason)
		}
	}
	if err := landlock.RunSupported(k); err != nil {
		t.Skipf("run refuses this kernel by design: %v", err)
	}
}

// TestRunPlansAgainAtMostThrice: an init stage that finds a path of the
// plan replaced (launch.StaleError) has run plan again, at most
// maxReplans times, each said in a line; a path replaced at every attempt
// ends run with exit 125 and nothing run. The positive control: replaced
// at the first two attempts only, the third, a real session, runs the
// agent.
func TestRunPlansAgainAtMostThrice(t *testing.T) {
	requireRun(t)
	real := runSession
	t.Cleanup(func() { runSession = real })
	for _, tc := range []struct {
		name  string
		stale int // attempts that find the plan stale
		code  int
		again int // "planning again" lines
	}{
		{"replaced twice", 2, 0, 2},
		{"replaced at every attempt", 1 << 30, ExitFailure, maxReplans},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			for _, d := range []string{"home", "ws"} {
				if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			ws := filepath.Join(tmp, "ws")
			t.Setenv("HOME", filepath.Join(tmp, "home"))
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "config"))
			t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "state"))
			t.Setenv("AGENT_LAUNCHER_CONFIG", "")
			cfg := filepath.Join(tmp, "policy.toml")
			if err := os.WriteFile(cfg, []byte("[file_policy]\ndefault = \"deny\"\npresets = [\"system\"]\nwrite_paths = [\"<workspace>/**\"]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(ws, "ran")
			msg := ws + ": changed since planning (replaced or renamed)"
			attempts := 0
			runSession = func(ctx context.Context, pending *launch.Pending, s launch.Session) (int, error) {
				attempts++
				if attempts <= tc.stale {
					if s.Plan == nil || len(s.Plan.Rules) == 0 {
						t.Errorf("attempt %d: no plan", attempts)
					}
					if pending != nil {
						pending.Abort()
					}
					return 0, &launch.StaleError{Msg: msg}
				}
				return real(ctx, pending, s)
			}
			var out bytes.Buffer
			c := &command{ctx: context.Background(), stdout: &out, stderr: &out}
			code := c.run([]string{"--config", cfg, "--workspace", ws, "--", "/bin/sh", "-c", "echo ran > " + marker})
			got := out.String()
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, got)
			}
			if n := strings.Count(got, msg+"; planning again\n"); n != tc.again {
				t.Errorf("%d lines of planning again, want %d:\n%s", n, tc.again, got)
			}
			_, err := os.Stat(marker)
			if tc.code == 0 {
				if attempts != tc.stale+1 {
					t.Errorf("%d attempts, want %d", attempts, tc.stale+1)
				}
				if err != nil {
					t.Errorf("the agent did not run after the plans made again: %v\n%s", err, got)
				}
				return
			}
			if attempts != maxReplans+1 {
				t.Errorf("%d attempts, want %d", attempts, maxReplans+1)
			}
			if want := "run: " + msg + ", again after planning 3 times; nothing was run\n"; !strings.Contains(got, want) {
				t.Errorf("no %q in:\n%s", want, got)
			}
			if err == nil {
				t.Errorf("the agent ran")
			}
		})
	}
}
