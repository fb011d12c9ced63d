package landlock

import (
	"slices"
	"testing"

	"github.com/agent-launcher/agent-launcher/tiers"
)

// sealFS is m where the file permissions alone keep the agent from the
// paths in sealed (osFS.sealed is the OS's answer).
type sealFS struct {
	*memFS
	seal map[string]bool
}

func (s sealFS) sealed(path string) bool { return s.seal[path] }

// etcSystem is a system whose /etc holds the system secrets.
var etcSystem = append(slices.Clone(system), "/etc/gshadow", "/etc/hosts", "/etc/resolv.conf",
	"/etc/ssh/ssh_config", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_ed25519_key.pub")

// allSealed are the answers of a system whose file permissions keep an
// ordinary user from every system secret: each existing one, each absent
// one (its parent is root's), a new name beside the SSH host keys.
var allSealed = map[string]bool{"/etc/shadow": true, "/etc/shadow-": true, "/etc/gshadow": true, "/etc/gshadow-": true,
	"/etc/sudoers": true, "/etc/sudoers.d": true, "/etc/ssh/" + newNameProbe: true, "/etc/ssh/ssh_host_ed25519_key": true}

// planSealed plans fsys on FloorPolicy, as run does without the view.
func planSealed(t *testing.T, whole *tiers.Matcher, fsys FS) (*Plan, []string) {
	t.Helper()
	q, sealed, err := FloorPolicy(whole, fsys, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	floor, err := tiers.Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := NewPlan(floor, 7, fsys, Options{Canaries: []string{"/home/u/.local/state/agent-launcher"}})
	if err != nil {
		t.Fatal(err)
	}
	return pl, sealed
}

func carved(pl *Plan, path string) bool {
	return slices.ContainsFunc(pl.Carved, func(c Carved) bool { return c.Path == path })
}

// TestFloorPolicySealed: the system secrets the file permissions keep
// from the agent get no rule, and /etc is granted whole, not carved into a
// rule per entry; a secret the permissions do not keep from it (one of
// its matches readable, or a pattern's new names) keeps its rule and the
// carve-out, and so does a deny of the operator's own, sealed or not.
func TestFloorPolicySealed(t *testing.T) {
	whole := compile(t, basePolicy)
	fsys := sealFS{newMemFS(etcSystem...), allSealed}
	pl, sealed := planSealed(t, whole, fsys)
	if len(sealed) != 7 {
		t.Errorf("sealed %q, want the 7 system secrets", sealed)
	}
	if carved(pl, "/etc") || carved(pl, "/etc/ssh") {
		t.Errorf("all sealed: carved %+v", pl.Carved)
	}
	if !slices.ContainsFunc(pl.Rules, func(r Rule) bool { return r.Path == "/etc" && r.Dir }) {
		t.Errorf("all sealed: no rule for /etc itself: %+v", pl.Rules)
	}
	// The control: nothing sealed, as for root; /etc is carved.
	ctl, sealed := planSealed(t, whole, newMemFS(etcSystem...))
	if len(sealed) != 0 || !carved(ctl, "/etc") || !carved(ctl, "/etc/ssh") {
		t.Errorf("none sealed: sealed %q, carved %+v", sealed, ctl.Carved)
	}
	if len(ctl.Rules) <= len(pl.Rules) {
		t.Errorf("none sealed: %d rules, not more than the %d of all sealed", len(ctl.Rules), len(pl.Rules))
	}
	for _, c := range []struct {
		name, open string
		kept       string // the pattern that keeps its rule
		carved     []string
	}{
		{"shadow readable", "/etc/shadow", "/etc/shadow", []string{"/etc"}},
		{"an absent secret the agent could make", "/etc/sudoers", "/etc/sudoers", []string{"/etc"}},
		{"a host key readable", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_*_key", []string{"/etc", "/etc/ssh"}},
		{"new names beside the host keys", "/etc/ssh/" + newNameProbe, "/etc/ssh/ssh_host_*_key", []string{"/etc", "/etc/ssh"}},
	} {
		s := sealFS{newMemFS(etcSystem...), map[string]bool{}}
		for p := range allSealed {
			s.seal[p] = p != c.open
		}
		pl, sealed := planSealed(t, whole, s)
		if len(sealed) != 6 || slices.Contains(sealed, c.kept) {
			t.Errorf("%s: sealed %q, want all but %s", c.name, sealed, c.kept)
		}
		for _, d := range c.carved {
			if !carved(pl, d) {
				t.Errorf("%s: %s not carved: %+v", c.name, d, pl.Carved)
			}
		}
	}
	// The operator's own deny of a sealed path keeps its rule.
	own := compile(t, basePolicy+"deny_paths = [\"/etc/shadow\"]\n")
	pl, sealed = planSealed(t, own, fsys)
	if len(sealed) != 7 || !carved(pl, "/etc") {
		t.Errorf("the operator's deny of /etc/shadow: sealed %q, carved %+v", sealed, pl.Carved)
	}
}

// TestSealedRecorded: the sealing is a question the kept plan asks again,
// and a changed answer (a secret made readable) breaks the plan.
func TestSealedRecorded(t *testing.T) {
	whole := compile(t, basePolicy)
	fsys := sealFS{newMemFS(etcSystem...), map[string]bool{}}
	for p := range allSealed {
		fsys.seal[p] = true
	}
	rec := NewRecorder(fsys)
	if _, _, err := FloorPolicy(whole, rec, false, nil); err != nil {
		t.Fatal(err)
	}
	obs, ok := rec.Observations()
	if !ok || !slices.ContainsFunc(obs, func(o Observation) bool { return o.Op == ObsSealed && o.Path == "/etc/shadow" }) {
		t.Fatalf("no sealing question recorded: %+v", obs)
	}
	if !obs.Hold(fsys) {
		t.Fatalf("control: the answers changed without a change")
	}
	fsys.seal["/etc/shadow"] = false
	if obs.Hold(fsys) {
		t.Errorf("the kept answers hold after /etc/shadow became readable")
	}
}
