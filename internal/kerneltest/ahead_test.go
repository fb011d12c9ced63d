package kerneltest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLaunchRecord: a run started as an earlier one was sends that run's
// configuration to its init stage before it has loaded the policy (the
// launch record, internal/cli/ahead.go); the agent starts only on the
// configuration the run itself makes. Once the policy denies a file the
// earlier runs read, the same command, started the same way, cannot read
// it: the configuration sent ahead, which granted it, was not this run's,
// and was not used. A damaged record is ignored.
func TestLaunchRecord(t *testing.T) {
	s := newSandbox(t, standard)
	secret := s.write("home/proj/secret.txt", envSec)
	notes := s.write("home/proj/notes.txt", "")
	s.extraEnv = []string{"AGENT_LAUNCHER_TRACE=1"}
	if r := s.bare("read", secret); r.code != 0 || !strings.Contains(r.stdout, envSec) {
		t.Fatalf("control: the file reads bare: %s", r)
	}
	has := func(r result, what string) bool { return strings.Contains(r.stderr, what) }
	const (
		sentAhead = "configuration sent ahead\n"
		same      = "the configuration sent ahead is this session's"
		notSame   = "the configuration sent ahead is not this session's"
	)
	// The first run keeps a record; the second sends it ahead, and it is
	// the same configuration.
	if r := s.agent("read", secret); r.code != 0 || !strings.Contains(r.stdout, envSec) || !has(r, "launch record kept") {
		t.Fatalf("control: the first run reads the file and keeps a launch record: %s", r)
	}
	r := s.agent("read", secret)
	if r.code != 0 || !strings.Contains(r.stdout, envSec) {
		t.Fatalf("control: the second run reads the file: %s", r)
	}
	if !has(r, sentAhead) || !has(r, same) || has(r, "launch record kept") {
		t.Fatalf("the second run, started as the first was, did not use the launch record (or kept it again): %s", r.stderr)
	}
	// The policy now denies the file; the command, its environment and
	// its directory are the same.
	s.writeAbs(s.config, s.policyHeader()+standard+"deny_paths = [\"<workspace>/secret.txt\"]\n")
	r = s.agent("read", secret)
	wantErr(t, "after the policy denied it, with the old configuration sent ahead", r, "EACCES")
	if strings.Contains(r.stdout, envSec) {
		t.Fatalf("LEAKED: the configuration sent ahead was used: %s", r)
	}
	if !has(r, sentAhead) || !has(r, notSame) || !has(r, "launch record kept") {
		t.Errorf("the stale record was not sent ahead and refused, or not replaced: %s", r.stderr)
	}
	r = s.agent("read", secret)
	wantErr(t, "the next run, with the new record", r, "EACCES")
	if !has(r, sentAhead) || !has(r, same) {
		t.Errorf("the replaced record was not used: %s", r.stderr)
	}
	// Damaged records: ignored, and the run confined as the policy says.
	dir := filepath.Join(s.home, ".local/state/agent-launcher/launch")
	names, err := os.ReadDir(dir)
	if err != nil || len(names) == 0 {
		t.Fatalf("no launch records in %s: %v", dir, err)
	}
	for _, n := range names {
		p := filepath.Join(dir, n.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(p, b[:len(b)-1], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r = s.agent("read", secret)
	wantErr(t, "with a damaged launch record", r, "EACCES")
	if has(r, sentAhead) {
		t.Errorf("a damaged launch record was sent ahead: %s", r.stderr)
	}
	wantOK(t, "control: the workspace is still writable", s.agent("write", notes, "x"))
}
