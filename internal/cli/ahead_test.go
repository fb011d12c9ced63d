package cli

import (
	"bytes"
	"testing"

	"github.com/agent-launcher/agent-launcher/landlock"
)

func TestLaunchRecordRoundTrip(t *testing.T) {
	frame := []byte("config\x00frame\xff")
	b := encodeLaunchRecord("k1", "p1", frame)
	k, p, f, err := decodeLaunchRecord(b)
	if err != nil || k != "k1" || p != "p1" || !bytes.Equal(f, frame) {
		t.Fatalf("round trip: %q %q %q %v", k, p, f, err)
	}
	bad := map[string][]byte{
		"empty":          nil,
		"another format": append([]byte("agent-launcher launch record 0\n"), b[len(launchRecordFormat)+1:]...),
		"cut short":      b[:len(b)-1],
		"trailing bytes": append(bytes.Clone(b), 0),
		"no frame":       encodeLaunchRecord("k1", "p1", nil),
		"a length past the end": func() []byte {
			c := bytes.Clone(b)
			c[len(launchRecordFormat)+1] = 0x7f
			return c
		}(),
	}
	for name, c := range bad {
		if _, _, _, err := decodeLaunchRecord(c); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestLaunchKey: the key follows what run is started with.
func TestLaunchKey(t *testing.T) {
	t.Setenv("AGENT_LAUNCHER_TEST_VAR", "a")
	k := launchKey([]string{"--workspace", "/w", "--", "x"})
	if k != launchKey([]string{"--workspace", "/w", "--", "x"}) {
		t.Fatal("not the same for the same start")
	}
	for name, other := range map[string][]string{
		"another argument":    {"--workspace", "/w", "--", "y"},
		"arguments regrouped": {"--workspace", "/w", "--", "x", ""},
		"joined differently":  {"--workspace", "/w--", "x"},
	} {
		if launchKey(other) == k {
			t.Errorf("%s: the same key", name)
		}
	}
	t.Setenv("AGENT_LAUNCHER_TEST_VAR", "b")
	if launchKey([]string{"--workspace", "/w", "--", "x"}) == k {
		t.Error("another environment: the same key")
	}
	t.Setenv("AGENT_LAUNCHER_TEST_VAR", "a")
	t.Chdir(t.TempDir())
	if launchKey([]string{"--workspace", "/w", "--", "x"}) == k {
		t.Error("another directory: the same key")
	}
}

// TestReadAheadIgnoresDamage: a record that does not decode, names
// another key, or names a plan not kept gives nothing to send ahead.
func TestReadAheadIgnoresDamage(t *testing.T) {
	e := &env{}
	e.launcher.StateDir = t.TempDir()
	dir := launchRecordDir(e.launcher.StateDir)
	storeEntry(dir, "k1", encodeLaunchRecord("k1", "no-such-plan", []byte("f")), maxLaunchRecords)
	storeEntry(dir, "k2", encodeLaunchRecord("k1", "no-such-plan", []byte("f")), maxLaunchRecords)
	storeEntry(dir, "k3", []byte("garbage"), maxLaunchRecords)
	for _, k := range []string{"k1", "k2", "k3", "k4"} {
		if a := e.readAhead(k); a != nil {
			t.Errorf("%s: read ahead: %+v", k, a)
		}
	}
	// Control: with the plan kept, the record is read, and the plan's
	// questions asked (this one holds).
	rec := landlock.NewRecorder(landlock.OS())
	if _, err := rec.Lstat("/"); err != nil {
		t.Fatal(err)
	}
	obs, _ := rec.Observations()
	e.planCache().put("no-such-plan", obs, &landlock.Plan{ABI: 1}, nil)
	a := e.readAhead("k1")
	if a == nil || !bytes.Equal(a.frame, []byte("f")) || a.planKey != "no-such-plan" || !a.held() {
		t.Fatalf("control: a record with its plan kept: %+v", a)
	}
	t.Setenv(planCacheVar, "0")
	if e.readAhead("k1") != nil {
		t.Errorf("read ahead with the plan cache off")
	}
}
