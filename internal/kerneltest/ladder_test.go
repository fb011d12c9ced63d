package kerneltest

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	probe "github.com/agent-launcher/agent-launcher/internal/kernel"
	"github.com/agent-launcher/agent-launcher/landlock"
)

// withEnv runs the launcher with extra environment variables.
func (s *sandbox) launcherEnv(extra []string, args ...string) result {
	s.t.Helper()
	old := s.extraEnv
	s.extraEnv = extra
	defer func() { s.extraEnv = old }()
	return s.exec(launcher, args...)
}

// The kernel ladder of DESIGN.md section 7, written out here rather than
// taken from landlock.Ladder, so that the code and the table are checked
// against each other: the rows that apply at each ABI, and the rights run's
// refusal must name.
func ladderRows(abi int) []string {
	switch {
	case abi < 1:
		return []string{"0 (none)"}
	case abi == 1:
		return []string{"1 (5.13)", "2 (5.19)", "3-4 (6.2, 6.7)", "1-5 (5.13-6.10)"}
	case abi == 2:
		return []string{"2 (5.19)", "3-4 (6.2, 6.7)", "1-5 (5.13-6.10)"}
	case abi <= 4:
		return []string{"3-4 (6.2, 6.7)", "1-5 (5.13-6.10)"}
	case abi == 5:
		return []string{"1-5 (5.13-6.10)"}
	case abi <= 7:
		return []string{"6-7 (6.12, 6.15)"}
	}
	return []string{"6-7 (6.12, 6.15)", "8+ (7.x kernels report 10 and 11)"}
}

var ladderMissing = map[int][]string{
	1: {"REFER", "TRUNCATE", "IOCTL_DEV", "scopes"},
	2: {"TRUNCATE", "IOCTL_DEV", "scopes"},
	3: {"IOCTL_DEV", "scopes"},
	4: {"IOCTL_DEV", "scopes"},
	5: {"scopes"},
}

// ladderABIs lists the ABIs the ladder tests check on this kernel: every
// ABI from 0 to the kernel's own, simulated below it by
// AGENT_LAUNCHER_SIMULATE_ABI (which handles only that ABI's rights and
// applies its refusals), the kernel's own for real.
func ladderABIs() []int {
	var out []int
	for abi := 0; abi <= kernel.ABI && abi <= 7; abi++ {
		out = append(out, abi)
	}
	if kernel.ABI > 7 {
		out = append(out, kernel.ABI)
	}
	return out
}

// simulate returns the environment that makes the launcher behave as on
// ABI abi, and how the test log names it.
func simulate(abi int) ([]string, string) {
	if abi == kernel.ABI {
		return nil, fmt.Sprintf("ABI %d (this kernel)", abi)
	}
	return []string{"AGENT_LAUNCHER_SIMULATE_ABI=" + strconv.Itoa(abi)}, fmt.Sprintf("ABI %d (simulated on ABI %d)", abi, kernel.ABI)
}

// TestLadder: every row of the ladder up to this kernel's ABI, the
// kernel's own for real and the ones below simulated. Below ABI 6 run
// refuses before anything runs, naming what is missing; without Landlock
// --allow-unconfined runs the agent and says so, and lifts no other
// refusal. From ABI 6 on the agent runs confined. Runs on every kernel.
func TestLadder(t *testing.T) {
	s := newWorld(t, standard)
	run := []string{"run", "--config", s.config, "--workspace", s.ws, "--", agent, "write", s.ws + "/x", "ran"}
	deny := []string{"run", "--config", s.config, "--workspace", s.ws, "--", agent, "read", s.home + "/.ssh/id_ed25519"}
	for _, abi := range ladderABIs() {
		env, name := simulate(abi)
		t.Logf("%s: rows %q", name, ladderRows(abi))
		r := s.launcherEnv(env, run...)
		if abi >= landlock.MinABI {
			wantOK(t, name+": run", r)
			wantErr(t, name+": the floor denies the key", s.launcherEnv(env, deny...), "EACCES")
			continue
		}
		if r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, "nothing was run") {
			t.Errorf("%s: run did not refuse: %s", name, r)
		}
		if _, err := os.Stat(s.ws + "/x"); err == nil {
			t.Errorf("%s: the refused agent ran anyway (it wrote %s/x)", name, s.ws)
		}
		for _, m := range ladderMissing[abi] {
			if !strings.Contains(r.stderr, m) {
				t.Errorf("%s: the refusal does not name %s: %s", name, m, r.stderr)
			}
		}
		u := s.launcherEnv(env, append([]string{"run", "--allow-unconfined"}, run[1:]...)...)
		if abi > 0 {
			if u.code != 125 {
				t.Errorf("%s: --allow-unconfined lifted the refusal: %s", name, u)
			}
			continue
		}
		if !strings.Contains(r.stderr, "--allow-unconfined") {
			t.Errorf("%s: the refusal does not mention --allow-unconfined: %s", name, r.stderr)
		}
		if env == nil && !strings.Contains(r.stderr, kernel.Reason) {
			t.Errorf("%s: the refusal does not say why (%q): %s", name, kernel.Reason, r.stderr)
		}
		wantOK(t, name+": run --allow-unconfined", u)
		if !strings.Contains(u.stderr, "UNCONFINED") {
			t.Errorf("%s: --allow-unconfined ran without saying so: %s", name, u)
		}
		if err := os.Remove(s.ws + "/x"); err != nil {
			t.Errorf("%s: --allow-unconfined: the agent's file: %v", name, err)
		}
	}
}

// doctorReport is the part of doctor --json the tests read.
type doctorReport struct {
	Schema   int    `json:"schema"`
	Release  string `json:"kernel_release"`
	Landlock struct {
		ABI    int    `json:"abi"`
		Reason string `json:"reason"`
	} `json:"landlock"`
	Seccomp probe.Seccomp `json:"seccomp"`
	Ladder  []struct {
		ABIs    string `json:"abis"`
		Applies bool   `json:"applies"`
	} `json:"ladder"`
	Run struct {
		Works bool `json:"works"`
	} `json:"run"`
}

// TestDoctor: doctor's verdict and the ladder rows it marks, in text and
// JSON, at every ABI up to this kernel's, match the table above. Runs on
// every kernel.
func TestDoctor(t *testing.T) {
	s := newWorld(t, standard)
	for _, abi := range ladderABIs() {
		env, name := simulate(abi)
		works := abi >= landlock.MinABI
		want := ladderRows(abi)
		r := s.launcherEnv(env, "doctor")
		verdict := "run: will refuse here"
		if works {
			verdict = "run: works here"
		}
		if (r.code == 0) != works || !strings.Contains(r.stdout, verdict) {
			t.Errorf("%s: doctor: want %q: %s", name, verdict, r)
		}
		var marked []string
		for _, line := range strings.Split(r.stdout, "\n") {
			if rest, ok := strings.CutPrefix(line, "* "); ok {
				marked = append(marked, strings.TrimSpace(strings.Split(rest, "  ")[0]))
			}
		}
		if !slices.Equal(marked, want) {
			t.Errorf("%s: doctor marks rows %q, the ladder says %q:\n%s", name, marked, want, r.stdout)
		}

		r = s.launcherEnv(env, "doctor", "--json")
		var rep doctorReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%s: doctor --json: %v: %s", name, err, r)
		}
		var applies []string
		for _, row := range rep.Ladder {
			if row.Applies {
				applies = append(applies, row.ABIs)
			}
		}
		if rep.Schema != 1 || rep.Landlock.ABI != abi || rep.Run.Works != works || (r.code == 0) != works || !slices.Equal(applies, want) {
			t.Errorf("%s: doctor --json: exit %d, %+v; want ABI %d, works %v, rows %q", name, r.code, rep, abi, works, want)
		}
		if abi == 0 && env == nil && rep.Landlock.Reason != kernel.Reason {
			t.Errorf("%s: doctor --json gives the reason %q, want %q", name, rep.Landlock.Reason, kernel.Reason)
		}
	}
}

// TestDoctorSeccomp: the seccomp user-notify features doctor reports are
// the ones this kernel's version has (each feature's first release, from
// the kernel's documentation and history). Runs on every kernel.
func TestDoctorSeccomp(t *testing.T) {
	s := newWorld(t, standard)
	r := s.exec(launcher, "doctor", "--json")
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v: %s", err, r)
	}
	var major, minor int
	if _, err := fmt.Sscanf(rep.Release, "%d.%d", &major, &minor); err != nil {
		t.Fatalf("kernel release %q: %v", rep.Release, err)
	}
	at := func(maj, min int) bool { return major > maj || major == maj && minor >= min }
	sc := rep.Seccomp
	for _, f := range []struct {
		name      string
		got, want bool
	}{
		{"filter", sc.Filter, true},
		{"user_notif (5.0)", sc.UserNotif, at(5, 0)},
		{"new_listener (5.0)", sc.NewListener, at(5, 0)},
		{"tsync_esrch (5.7)", sc.TsyncESRCH, at(5, 7)},
		{"addfd (5.9)", sc.AddFD, at(5, 9)},
		{"addfd_send (5.14)", sc.AddFDSend, at(5, 14)},
		{"wait_killable_recv (5.19)", sc.WaitKillableRecv, at(5, 19)},
		{"sync_wake_up (6.6)", sc.SyncWakeUp, at(6, 6)},
	} {
		if f.got != f.want {
			t.Errorf("Linux %s: doctor says %s is %v, want %v", rep.Release, f.name, f.got, f.want)
		}
	}
}

// TestSimulateOnlyLowers: AGENT_LAUNCHER_SIMULATE_ABI cannot make the
// launcher trust an ABI the kernel does not have.
func TestSimulateOnlyLowers(t *testing.T) {
	s := newWorld(t, standard)
	r := s.launcherEnv([]string{"AGENT_LAUNCHER_SIMULATE_ABI=99"}, "doctor", "--json")
	var rep struct {
		Landlock struct {
			ABI int `json:"abi"`
		} `json:"landlock"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Landlock.ABI != kernel.ABI {
		t.Errorf("SIMULATE_ABI=99 on ABI %d: doctor reports %+v (%v): %s", kernel.ABI, rep, err, r)
	}
}
