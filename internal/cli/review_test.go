package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Regression tests for findings of the adversarial review of the policy
// engine and the CLI.

// TestCheckWarnsOverriddenPrompt: under "specific" precedence, "**/secrets/**"
// loses to "<workspace>/**" where both match; check must say so.
func TestCheckWarnsOverriddenPrompt(t *testing.T) {
	sb := newSandbox(t)
	config := writeFile(t, filepath.Join(sb.tmp, "policy.toml"), `[file_policy]
prompt_paths = ["**/secrets/**"]
prompt_write_paths = ["<workspace>/deploy/**"]
write_paths = ["<workspace>/**"]
`)
	r := run("check", "--config", config)
	want := `  $TMP/policy.toml:2: file_policy.prompt_paths[0]: "**/secrets/**" is overridden where "<workspace>/**" ($TMP/policy.toml:4: file_policy.write_paths[0]) also matches, because it is more specific: nobody is asked there. Write the prompt rule more specifically, or set precedence = "restrictive"`
	if r.code != 0 || !strings.Contains(sb.normalize(t, r.stdout), want+"\n") {
		t.Errorf("exit %d; stdout lacks the warning:\n%s", r.code, sb.normalize(t, r.stdout))
	}
	// The prompt-write rule is more specific than the write tree: no warning.
	if strings.Contains(r.stdout, `"<workspace>/deploy/**" is overridden`) {
		t.Errorf("a prompt rule that wins is reported as overridden")
	}
	if got := sb.normalize(t, r.stderr); got != "agent-launcher: policy OK, with 1 warning\n" {
		t.Errorf("stderr = %q", got)
	}
	// Positive control: the engine really lets the write through.
	e := run("explain", "--config", config, "--op", "write", "secrets/x")
	if e.code != 0 {
		t.Errorf("explain write secrets/x: exit %d, want 0 (allowed, which is what the warning is about)", e.code)
	}
}

// TestCheckShowsExpansion: a rule written with ${VAR} shows what it grants.
func TestCheckShowsExpansion(t *testing.T) {
	sb := newSandbox(t)
	t.Setenv("PROJ", sb.home+"/")
	config := writeFile(t, filepath.Join(sb.tmp, "policy.toml"), "[file_policy]\nwrite_paths = [\"${PROJ}\"]\n")
	r := run("check", "--config", config)
	if want := "write  ${PROJ} = $TMP/home/**"; r.code != 0 || !strings.Contains(sb.normalize(t, r.stdout), want) {
		t.Errorf("exit %d; stdout lacks %q", r.code, want)
	}
}

// TestExplainQuotesControlCharacters: a path with a newline cannot forge an
// output line, nor an escape sequence reach the terminal.
func TestExplainQuotesControlCharacters(t *testing.T) {
	newSandbox(t)
	for _, name := range []string{"x\n  tier: deny\n  rule: ~/.ssh/**", "x\x1b]0;pwned\x07", "x\u202eexe.txt"} {
		r := run("explain", "--op", "write", name)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.code != 0 || strings.ContainsAny(r.stdout, "\x1b\x07\u202e") || lines[0] == "" || !strings.Contains(lines[0], `\`) {
			t.Errorf("explain %q: exit %d, stdout %q", name, r.code, r.stdout)
		}
		for _, l := range lines {
			if l == "  tier: deny" {
				t.Errorf("explain %q: a forged line reached the output: %q", name, r.stdout)
			}
		}
	}
	// Positive control: a plain path prints plain.
	r := run("explain", "plain.txt")
	if !strings.HasSuffix(strings.SplitN(r.stdout, "\n", 2)[0], "/ws/plain.txt: read allowed") {
		t.Errorf("plain path: %q", r.stdout)
	}
}

// TestGitEntryProtected: a .git file that points git elsewhere is a planted
// config; creating or replacing the .git entry is denied, its siblings are not.
func TestGitEntryProtected(t *testing.T) {
	sb := newSandbox(t)
	if err := os.MkdirAll(filepath.Join(sb.ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op, path string
		want     int
	}{
		{"create", "sub/.git", 1},
		{"delete", ".git", 1},
		{"write", ".git", 1},
		{"create", "sub/.gitignore", 0},
		{"create", "sub/git", 0},
	} {
		if r := run("explain", "--op", c.op, c.path); r.code != c.want {
			t.Errorf("explain --op %s %s: exit %d, want %d\n%s", c.op, c.path, r.code, c.want, r.stdout)
		}
	}
}

// TestUnreadablePolicy runs in both suites: as root, file modes do not stop
// reading; as the unprivileged user, the error names the file and the cause.
func TestUnreadablePolicy(t *testing.T) {
	sb := newSandbox(t)
	config := writeFile(t, filepath.Join(sb.tmp, "policy.toml"), "[file_policy]\ndefault = \"deny\"\n")
	if err := os.Chmod(config, 0); err != nil {
		t.Fatal(err)
	}
	r := run("check", "--config", config)
	if os.Geteuid() == 0 {
		if r.code != 0 {
			t.Errorf("as root: exit %d, stderr %q", r.code, r.stderr)
		}
		return
	}
	want := "agent-launcher: $TMP/policy.toml: cannot read the policy file: permission denied\n"
	if got := sb.normalize(t, r.stderr); r.code != 125 || got != want {
		t.Errorf("exit %d, stderr %q; want 125, %q", r.code, got, want)
	}
}

// TestPolicySymlinkProtected: a policy reached through a symlink is
// protected at both names, and explain --op delete judges the link itself.
func TestPolicySymlinkProtected(t *testing.T) {
	sb := newSandbox(t)
	real := writeFile(t, filepath.Join(sb.tmp, "real", "policy.toml"), "[file_policy]\nwrite_paths = [\"/**\"]\n")
	link := filepath.Join(sb.ws, "policy.toml")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op, path string
		want     int
	}{
		{"delete", link, 1}, // the symlink itself
		{"write", real, 1},  // the policy it points to
		{"create", filepath.Join(sb.tmp, "real", "agents", "x.toml"), 1},
		{"delete", filepath.Join(sb.ws, "other.toml"), 0}, // positive control
	} {
		r := run("explain", "--config", link, "--op", c.op, c.path)
		if r.code != c.want {
			t.Errorf("explain --op %s %s: exit %d, want %d\n%s%s", c.op, c.path, r.code, c.want, r.stdout, r.stderr)
		}
	}
	// delete does not follow the last symlink: the answer names the link.
	r := run("explain", "--config", link, "--op", "delete", link)
	if !strings.HasPrefix(sb.normalize(t, r.stdout), "$TMP/ws/policy.toml: delete denied") {
		t.Errorf("stdout = %q", sb.normalize(t, r.stdout))
	}
}

// TestExplainJSONRefusedPolicy: explain --json stays one object per line
// when the policy is refused.
func TestExplainJSONRefusedPolicy(t *testing.T) {
	sb := newSandbox(t)
	config := writeFile(t, filepath.Join(sb.tmp, "policy.toml"), "[file_policy]\ndefault = \"raed\"\n")
	r := run("explain", "--json", "--config", config, "x")
	want := `{"config":"$TMP/policy.toml","errors":[{"file":"$TMP/policy.toml","line":2,"key":"file_policy.default","message":"\"raed\" is not a tier; use one of deny, prompt, prompt-write, read, write (did you mean \"read\"?)"}],"ok":false,"schema":1}` + "\n"
	if got := sb.normalize(t, r.stdout); r.code != 125 || got != want {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s", r.code, got, want)
	}
}

func TestRiskyWorkspaceWarnings(t *testing.T) {
	sb := newSandbox(t)
	r := run("check", "--workspace", sb.tmp) // contains $TMP/home
	if want := "agent-launcher: warning: the workspace $TMP contains the home directory: it would grant every file you own\n"; !strings.Contains(sb.normalize(t, r.stderr), want) {
		t.Errorf("stderr = %q, want it to contain %q", sb.normalize(t, r.stderr), want)
	}
	r = run("check") // the sandbox's own workspace: no warning
	if strings.Contains(r.stderr, "warning: the workspace") {
		t.Errorf("positive control warned: %q", r.stderr)
	}
}
