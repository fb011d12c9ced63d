package kerneltest

import (
	"encoding/json"
	"github.com/agent-launcher/agent-launcher/landlock"
	"strconv"
	"strings"
	"testing"
)

// withEnv runs the launcher with extra environment variables.
func (s *sandbox) launcherEnv(extra []string, args ...string) result {
	s.t.Helper()
	old := s.extraEnv
	s.extraEnv = extra
	defer func() { s.extraEnv = old }()
	return s.exec(launcher, args...)
}

// TestLadder: the kernel ladder of DESIGN.md section 7 on this kernel,
// older ABIs simulated by AGENT_LAUNCHER_SIMULATE_ABI (which handles only
// that ABI's rights and applies its refusals).
func TestLadder(t *testing.T) {
	s := newSandbox(t, standard)
	run := []string{"run", "--config", s.config, "--workspace", s.ws, "--", agent, "write", s.ws + "/x", "ran"}
	missing := map[int][]string{
		1: {"REFER", "TRUNCATE", "IOCTL_DEV", "scopes"},
		2: {"TRUNCATE", "IOCTL_DEV", "scopes"},
		3: {"IOCTL_DEV", "scopes"},
		4: {"IOCTL_DEV", "scopes"},
		5: {"scopes"},
	}
	for abi := 0; abi <= 5; abi++ {
		r := s.launcherEnv([]string{"AGENT_LAUNCHER_SIMULATE_ABI=" + strconv.Itoa(abi)}, run...)
		if r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, "nothing was run") {
			t.Errorf("ABI %d: run did not refuse: %s", abi, r)
		}
		for _, m := range missing[abi] {
			if !strings.Contains(r.stderr, m) {
				t.Errorf("ABI %d: the refusal does not name %s: %s", abi, m, r.stderr)
			}
		}
		if abi == 0 && !strings.Contains(r.stderr, "--allow-unconfined") {
			t.Errorf("ABI 0: the refusal does not mention --allow-unconfined: %s", r.stderr)
		}
		// --allow-unconfined lifts only the "no Landlock" refusal.
		u := s.launcherEnv([]string{"AGENT_LAUNCHER_SIMULATE_ABI=" + strconv.Itoa(abi)},
			append([]string{"run", "--allow-unconfined"}, run[1:]...)...)
		if abi == 0 {
			if u.code != 0 || !strings.Contains(u.stderr, "UNCONFINED") {
				t.Errorf("ABI 0 with --allow-unconfined: %s", u)
			}
		} else if u.code != 125 {
			t.Errorf("ABI %d: --allow-unconfined lifted the refusal: %s", abi, u)
		}
	}
	// The real kernel (and 6, simulated) runs.
	for _, env := range [][]string{nil, {"AGENT_LAUNCHER_SIMULATE_ABI=6"}} {
		if r := s.launcherEnv(env, run...); r.code != 0 || !strings.HasPrefix(r.line(), "ok") {
			t.Errorf("%v: %s", env, r)
		}
	}
}

// TestDoctor: doctor's verdict follows the ladder, in text and JSON.
func TestDoctor(t *testing.T) {
	s := newSandbox(t, standard)
	r := s.exec(launcher, "doctor")
	if r.code != 0 || !strings.Contains(r.stdout, "run: works here") || !strings.Contains(r.stdout, "Landlock") {
		t.Errorf("doctor: %s", r)
	}
	r = s.exec(launcher, "doctor", "--json")
	var rep struct {
		Schema   int `json:"schema"`
		Landlock struct {
			ABI int `json:"abi"`
		} `json:"landlock"`
		Seccomp struct {
			UserNotif, AddFD, AddFDSend, WaitKillableRecv, SyncWakeUp bool
		} `json:"seccomp"`
		Ladder []struct {
			ABIs    string `json:"abis"`
			Applies bool   `json:"applies"`
		} `json:"ladder"`
		Run struct {
			Works bool `json:"works"`
		} `json:"run"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("doctor --json: %v: %s", err, r)
	}
	if rep.Schema != 1 || rep.Landlock.ABI != kernel.ABI || !rep.Run.Works {
		t.Errorf("doctor --json: %+v", rep)
	}
	for abi, wantRows := range map[int][]string{0: {"0 (none)"}, 2: {"2 (5.19)", "3-4 (6.2, 6.7)", "1-5 (5.13-6.10)"}, 5: {"1-5 (5.13-6.10)"}} {
		r := s.launcherEnv([]string{"AGENT_LAUNCHER_SIMULATE_ABI=" + strconv.Itoa(abi)}, "doctor")
		if r.code != 1 || !strings.Contains(r.stdout, "run: will refuse here") {
			t.Errorf("doctor at ABI %d: %s", abi, r)
		}
		for _, row := range wantRows {
			if !strings.Contains(r.stdout, "* "+row) {
				t.Errorf("doctor at ABI %d does not mark row %q:\n%s", abi, row, r.stdout)
			}
		}
	}
}

// TestRefusalHere: on this kernel, run confines the agent, or refuses
// before anything runs with the reason the ladder gives; without Landlock,
// --allow-unconfined runs the agent and says so.
func TestRefusalHere(t *testing.T) {
	dir := t.TempDir()
	s := &sandbox{t: t, dir: dir, home: dir + "/home", ws: dir + "/home/proj", config: dir + "/config.toml"}
	s.mkdir("home/proj")
	s.writeAbs(s.config, s.policyHeader()+standard)
	r := s.exec(launcher, "run", "--config", s.config, "--workspace", s.ws, "--", agent, "write", s.ws+"/x", "1")
	err := landlock.RunSupported(kernel)
	switch {
	case err == nil:
		wantOK(t, "run on a kernel that supports it", r)
	case r.code != 125 || r.stdout != "" || !strings.Contains(r.stderr, "nothing was run"):
		t.Errorf("run did not refuse on this kernel (%v): %s", err, r)
	}
	if kernel.ABI == 0 {
		u := s.exec(launcher, "run", "--allow-unconfined", "--config", s.config, "--workspace", s.ws, "--", agent, "write", s.ws+"/x", "1")
		if u.code != 0 || !strings.Contains(u.stderr, "UNCONFINED") {
			t.Errorf("--allow-unconfined without Landlock: %s", u)
		}
	}
	d := s.exec(launcher, "doctor")
	if (err == nil) != (d.code == 0) {
		t.Errorf("doctor's verdict (exit %d) disagrees with the ladder (%v): %s", d.code, err, d.stdout)
	}
}

// TestSimulateOnlyLowers: AGENT_LAUNCHER_SIMULATE_ABI cannot make the
// launcher trust an ABI the kernel does not have.
func TestSimulateOnlyLowers(t *testing.T) {
	s := newSandbox(t, standard)
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
