package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-launcher/agent-launcher/rules"
)

// installPolicy copies testdata/policy (config.toml and agents/reviewer.toml)
// into the sandbox and returns the path of the copied config.toml. The copy
// lives under $TMP so that golden files do not depend on the checkout's
// location.
func installPolicy(t *testing.T, sb *sandbox) string {
	t.Helper()
	dst := filepath.Join(sb.tmp, "policy")
	copyFile(t, filepath.Join(testdataDir, "policy", "config.toml"), filepath.Join(dst, "config.toml"))
	copyFile(t, filepath.Join(testdataDir, "policy", "agents", "reviewer.toml"), filepath.Join(dst, "agents", "reviewer.toml"))
	return filepath.Join(dst, "config.toml")
}

// TestCheckGolden compares the output of check, for people and with --json,
// with the golden files. Regenerate them with
//
//	go test ./internal/cli -run Golden -update
//
// and read every changed line before committing.
func TestCheckGolden(t *testing.T) {
	tests := []struct {
		name       string
		testdata   bool // check --config testdata/policy/config.toml
		json       bool
		golden     string
		wantStderr string
	}{
		{
			name:       "default",
			golden:     "check_default.golden",
			wantStderr: "agent-launcher: policy OK\n",
		},
		{
			name:   "default_json",
			json:   true,
			golden: "check_default.json.golden",
		},
		{
			name:     "testdata_policy",
			testdata: true,
			golden:   "check_policy.golden",
			// Global: the exception and /srv/data/**; coder: the
			// exception; reviewer: the exception and review/**.
			wantStderr: "agent-launcher: policy OK, with 8 warnings\n",
		},
		{
			name:     "testdata_policy_json",
			testdata: true,
			json:     true,
			golden:   "check_policy.json.golden",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newSandbox(t)
			args := []string{"check"}
			if tt.testdata {
				args = append(args, "--config", installPolicy(t, sb))
			}
			if tt.json {
				args = append(args, "--json")
			}
			r := run(args...)
			if r.code != 0 {
				t.Fatalf("%v: exit status %d, want 0; stderr:\n%s", args, r.code, r.stderr)
			}
			if r.stderr != tt.wantStderr {
				t.Errorf("%v: stderr = %q, want %q", args, r.stderr, tt.wantStderr)
			}
			got := sb.normalize(t, r.stdout)
			if tt.json {
				if !json.Valid([]byte(r.stdout)) {
					t.Fatalf("%v: stdout is not JSON:\n%s", args, r.stdout)
				}
				got = normalizeStats(got)
			} else {
				// realign must reproduce check's own alignment, or
				// the golden file would hide a misaligned table.
				if again := realign(r.stdout); again != r.stdout {
					t.Errorf("check's tables are not aligned as realign aligns them:\n%s", lineDiff(r.stdout, again))
				}
				got = realign(got)
			}
			golden(t, tt.golden, got)
		})
	}
}

// TestCheckAgent checks that --agent NAME checks that agent alone.
func TestCheckAgent(t *testing.T) {
	tests := []struct {
		name         string
		agent        string
		wantSections []string
		wantFiles    string
		wantWarnings string
	}{
		{
			name:         "in_file_overlay",
			agent:        "coder",
			wantSections: []string{"== agent coder =="},
			wantFiles:    "files:      $TMP/policy/config.toml\n",
			wantWarnings: "agent-launcher: policy OK, with 2 warnings\n",
		},
		{
			name:         "agent_file",
			agent:        "reviewer",
			wantSections: []string{"== agent reviewer =="},
			wantFiles:    "files:      $TMP/policy/config.toml, $TMP/policy/agents/reviewer.toml\n",
			wantWarnings: "agent-launcher: policy OK, with 3 warnings\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newProjectSandbox(t)
			config := installPolicy(t, sb)
			r := run("check", "--config", config, "--agent", tt.agent)
			if r.code != 0 {
				t.Fatalf("exit status %d, want 0; stderr:\n%s", r.code, r.stderr)
			}
			if r.stderr != tt.wantWarnings {
				t.Errorf("stderr = %q, want %q", r.stderr, tt.wantWarnings)
			}
			var sections []string
			for _, line := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(line, "== ") {
					sections = append(sections, line)
				}
			}
			if strings.Join(sections, "|") != strings.Join(tt.wantSections, "|") {
				t.Errorf("sections = %q, want %q", sections, tt.wantSections)
			}
			if got := sb.normalize(t, r.stdout); !strings.Contains(got, "\n"+tt.wantFiles) {
				t.Errorf("stdout has no line %q:\n%s", tt.wantFiles, got)
			}
		})
	}
}

// TestCheckExitStatus checks check's exit status and that a refused policy
// prints nothing on stdout (without --json).
func TestCheckExitStatus(t *testing.T) {
	tests := []struct {
		name       string
		policy     string // written to $TMP/policy.toml and passed with --config
		args       []string
		wantCode   int
		wantStdout bool
	}{
		{
			name:       "valid",
			policy:     "[file_policy]\nread_paths = [\"/srv/**\"]\n",
			wantCode:   0,
			wantStdout: true,
		},
		{
			name:     "bad tier",
			policy:   "[file_policy]\ndefault = \"all\"\n",
			wantCode: 125,
		},
		{
			name:     "not TOML",
			policy:   "[file_policy\n",
			wantCode: 125,
		},
		{
			name:       "empty file is a valid policy",
			policy:     "",
			wantCode:   0,
			wantStdout: true,
		},
		{
			name:     "unexpected argument",
			policy:   "[file_policy]\n",
			args:     []string{"extra"},
			wantCode: 125,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newSandbox(t)
			config := writeFile(t, filepath.Join(sb.tmp, "policy.toml"), tt.policy)
			r := run(append([]string{"check", "--config", config}, tt.args...)...)
			if r.code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if got := r.stdout != ""; got != tt.wantStdout {
				t.Errorf("stdout written: %v, want %v:\n%s", got, tt.wantStdout, r.stdout)
			}
			checkNoLeaks(t, r.stderr)
		})
	}
}

func TestCheckUnexpectedArgument(t *testing.T) {
	newSandbox(t)
	r := run("check", "--json", "policy.toml")
	const want = "agent-launcher: check: unexpected argument \"policy.toml\"; check takes only flags\n"
	if r.code != 125 || r.stderr != want || r.stdout != "" {
		t.Errorf("check --json policy.toml = (%d, stdout %q, stderr %q), want (125, \"\", %q)", r.code, r.stdout, r.stderr, want)
	}
}

func TestCheckShowDefault(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"alone", []string{"check", "--show-default"}},
		// The embedded default is printed whatever policy the lookup
		// would find.
		{"with a config", []string{"check", "--config", "/nonexistent/policy.toml", "--show-default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newSandbox(t)
			r := run(tt.args...)
			if r.code != 0 {
				t.Errorf("exit status %d, want 0; stderr:\n%s", r.code, r.stderr)
			}
			if want := string(rules.DefaultPolicy()); r.stdout != want {
				t.Errorf("stdout is not rules.DefaultPolicy():\n%s", lineDiff(want, r.stdout))
			}
			if r.stderr != "" {
				t.Errorf("stderr = %q, want nothing", r.stderr)
			}
		})
	}
}

// TestCheckDefaultIsValid checks the embedded default policy through the file
// path too: printed with --show-default and loaded with --config, it checks
// OK with the same rules as the embedded copy.
func TestCheckDefaultIsValid(t *testing.T) {
	sb := newSandbox(t)
	config := writeFile(t, filepath.Join(sb.tmp, "default.toml"), string(rules.DefaultPolicy()))
	embedded := run("check")
	file := run("check", "--config", config)
	if embedded.code != 0 || file.code != 0 {
		t.Fatalf("exit status %d (embedded), %d (file), want 0, 0; stderr:\n%s%s", embedded.code, file.code, embedded.stderr, file.stderr)
	}
	// Only the file names differ, and the file loaded with --config is
	// denied as the launcher's own policy (and agents/ beside it). Column
	// widths differ too (the file's path is long), so compare words.
	words := func(l string) string { return strings.Join(strings.Fields(sb.normalize(t, l)), " ") }
	embeddedLines := map[string]bool{}
	for _, l := range strings.Split(embedded.stdout, "\n") {
		embeddedLines[words(strings.ReplaceAll(l, rules.EmbeddedName, config))] = true
	}
	var onlyFile []string
	for _, l := range strings.Split(file.stdout, "\n") {
		if !embeddedLines[words(l)] {
			onlyFile = append(onlyFile, words(l))
		}
	}
	want := []string{
		"deny $TMP/default.toml built-in launcher protection: the launcher's policy",
		"deny $TMP/agents/** built-in launcher protection: the launcher's agent policies",
	}
	if strings.Join(onlyFile, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines only in the --config output:\n%s\nwant:\n%s", strings.Join(onlyFile, "\n"), strings.Join(want, "\n"))
	}
}

// TestCheckRiskyWorkspace checks that check warns, on stderr, about a
// workspace that run refuses, and still exits 0: the policy itself is valid.
func TestCheckRiskyWorkspace(t *testing.T) {
	tests := []struct {
		name       string
		workspace  string // "~" is the sandbox's home
		wantStderr string
	}{
		{
			name:      "home directory",
			workspace: "~",
			wantStderr: "agent-launcher: warning: the workspace is the home directory, which run refuses: it would grant every file you own\n" +
				"agent-launcher: policy OK\n",
		},
		{
			name:      "root",
			workspace: "/",
			// The default policy's "<workspace>/**" is then "/**".
			wantStderr: "agent-launcher: warning: the workspace is /, which run refuses: it would grant the whole filesystem\n" +
				"agent-launcher: policy OK, with 1 warning\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newProjectSandbox(t)
			ws := tt.workspace
			if ws == "~" {
				ws = sb.home
			}
			r := run("check", "--workspace", ws)
			if r.code != 0 {
				t.Errorf("exit status %d, want 0", r.code)
			}
			if r.stderr != tt.wantStderr {
				t.Errorf("stderr:\n%s\nwant:\n%s", r.stderr, tt.wantStderr)
			}
			if !strings.Contains(r.stdout, "\nworkspace:  "+ws+"\n") {
				t.Errorf("stdout does not name the workspace %s", ws)
			}
		})
	}
}
