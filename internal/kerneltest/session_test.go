package kerneltest

import (
	"strings"
	"testing"
)

// TestEnvironment: the variables that point at the operator's services and
// the ones that look like secrets do not reach the agent unless the policy
// passes them (research/review.md 10); the start-up line names what was
// dropped, never a value; everything else passes.
func TestEnvironment(t *testing.T) {
	vars := []string{
		"SSH_AUTH_SOCK=/run/user/1000/ssh-agent.sock",
		"AWS_SECRET_ACCESS_KEY=aws-secret-value",
		"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus",
		"GITHUB_TOKEN=ghp-token-value",
		"HARMLESS_SETTING=kept",
	}
	s := newSandbox(t, standard)
	s.extraEnv = vars
	for _, kv := range vars {
		name, value, _ := strings.Cut(kv, "=")
		if r := s.bare("getenv", name); r.line() != "ok "+value {
			t.Fatalf("control: the bare agent does not see %s: %s", name, r)
		}
	}
	for _, name := range []string{"SSH_AUTH_SOCK", "AWS_SECRET_ACCESS_KEY", "DBUS_SESSION_BUS_ADDRESS", "GITHUB_TOKEN"} {
		r := s.agent("getenv", name)
		wantErr(t, name+" inside", r, "ENOENT")
		if !strings.Contains(r.stderr, name) {
			t.Errorf("the start-up line does not name the dropped %s: %s", name, r.stderr)
		}
		for _, kv := range vars {
			if _, value, _ := strings.Cut(kv, "="); strings.Contains(r.stderr, value) {
				t.Errorf("the launcher printed the value of a variable: %s", r.stderr)
			}
		}
	}
	if r := s.agent("getenv", "HARMLESS_SETTING"); r.line() != "ok kept" {
		t.Errorf("an ordinary variable did not pass: %s", r)
	}

	// Passed by name, each reaches the agent.
	p := newSandbox(t, standard+"\n[env]\npass = [\"SSH_AUTH_SOCK\", \"AWS_SECRET_ACCESS_KEY\"]\n")
	p.extraEnv = vars
	if r := p.agent("getenv", "SSH_AUTH_SOCK"); r.line() != "ok /run/user/1000/ssh-agent.sock" {
		t.Errorf("SSH_AUTH_SOCK passed by the policy: %s", r)
	}
	if r := p.agent("getenv", "AWS_SECRET_ACCESS_KEY"); r.line() != "ok aws-secret-value" {
		t.Errorf("AWS_SECRET_ACCESS_KEY passed by the policy: %s", r)
	}
	wantErr(t, "GITHUB_TOKEN, not passed", p.agent("getenv", "GITHUB_TOKEN"), "ENOENT")
}

// TestNothingOutlivesSession: a double-forked daemon is gone when the
// agent exits (research/review.md 8): the session's PID namespace ends
// with its PID 1, the init stage. Control: without the launcher, the same
// daemon outlives its parent and reports.
func TestNothingOutlivesSession(t *testing.T) {
	s := newSandbox(t, standard)
	bareOut := s.ws + "/bare-daemon.out"
	wantOK(t, "control: bare daemon started", s.bare("daemon", bareOut, "sleep", "1500"))
	if r := s.bare("wait-file", bareOut, "10000"); !strings.Contains(r.line(), "ok") {
		t.Fatalf("control: the bare daemon did not outlive its parent: %s", r)
	}
	out := s.ws + "/daemon.out"
	wantOK(t, "daemon started inside", s.agent("daemon", out, "sleep", "1500"))
	if r := s.bare("wait-file", out, "4000"); !strings.Contains(r.line(), "ETIMEDOUT") {
		t.Errorf("the session's daemon outlived the session: %s", r)
	}
}
