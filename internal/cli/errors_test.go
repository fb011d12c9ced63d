package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestUserMistakes runs the mistakes a new user makes and checks the exact
// message: one sentence naming file:line: key (where there is a file),
// prefixed "agent-launcher: ", exit status 125, nothing on stdout, and no Go
// internals.
func TestUserMistakes(t *testing.T) {
	tests := []struct {
		name   string
		policy string            // $TMP/policy.toml; passed with --config unless empty
		files  map[string]string // more files, relative to $TMP
		env    map[string]string // "" unsets the variable
		args   []string
		// wantStderr is the exact stderr after normalization ($TMP).
		wantStderr string
	}{
		{
			name:       "typo in a key",
			policy:     "[file_policy]\ndeny_path = [\"~/private/**\"]\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:2: file_policy.deny_path: unknown key; did you mean \"deny_paths\"?\n",
		},
		{
			name:       "typo in a top-level table",
			policy:     "[file_polcy]\ndefault = \"read\"\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:1: file_polcy: unknown key; did you mean \"file_policy\"?\n",
		},
		{
			name:       "misspelt tier",
			policy:     "[file_policy]\ndefault = \"raed\"\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:2: file_policy.default: \"raed\" is not a tier; use one of deny, prompt, prompt-write, read, write (did you mean \"read\"?)\n",
		},
		{
			name:       "misspelt precedence",
			policy:     "[file_policy]\nprecedence = \"restrictve\"\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:2: file_policy.precedence: \"restrictve\" is not a precedence mode; use \"specific\" or \"restrictive\" (did you mean \"restrictive\"?)\n",
		},
		{
			name:       "unset variable",
			policy:     "[file_policy]\nread_paths = [\n  \"/srv/**\",\n  \"${AGENT_LAUNCHER_TEST_UNSET}/data/**\",\n]\n",
			env:        map[string]string{"AGENT_LAUNCHER_TEST_UNSET": ""},
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:4: file_policy.read_paths[1]: \"${AGENT_LAUNCHER_TEST_UNSET}/data/**\" uses ${AGENT_LAUNCHER_TEST_UNSET}, which is not set; set it or remove the rule\n",
		},
		{
			name:       "relative pattern",
			policy:     "[file_policy]\nwrite_paths = [\"src/**\"]\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:2: file_policy.write_paths[0]: \"src/**\" is relative; start it with \"/\", \"~/\", \"<workspace>/\" or \"**/\"\n",
		},
		{
			name:       "unclosed character class",
			policy:     "[file_policy]\nread_paths = [\"/srv/[data\"]\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:2: file_policy.read_paths[0]: \"/srv/[data\" has a character class \"[\" that is never closed with \"]\"\n",
		},
		{
			name:       "unclosed brace",
			policy:     "[file_policy]\n\nprompt_paths = [\"<workspace>/{secrets,keys\"]\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:3: file_policy.prompt_paths[0]: \"<workspace>/{secrets,keys\" has a \"{\" that is never closed with \"}\" (expanded to \"$TMP/ws/{secrets,keys\")\n",
		},
		{
			name:       "double star inside a segment",
			policy:     "[file_policy]\ndeny_paths = [\"~/secret**\"]\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:2: file_policy.deny_paths[0]: \"~/secret**\" has \"**\" inside a segment; \"**\" must be a whole segment (\"/**/\"), use \"*\" within a segment (expanded to \"$TMP/home/secret**\")\n",
		},
		{
			name:       "number for a tier",
			policy:     "[file_policy]\ndefault = 3\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:2: file_policy.default: expected a string, found an integer\n",
		},
		{
			name:       "string for a list",
			policy:     "[file_policy]\nread_paths = \"/srv/**\"\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:2: file_policy.read_paths: expected a list of strings, found a string\n",
		},
		{
			name:       "duplicate table",
			policy:     "[file_policy]\ndefault = \"read\"\n\n[file_policy]\nprecedence = \"specific\"\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:4: file_policy: not valid TOML: table file_policy already exists\n",
		},
		{
			name:       "mistake in an in-file overlay",
			policy:     "[file_policy]\n\n[agents.coder.file_policy]\ndefault = \"writ\"\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:4: agents.coder.file_policy.default: \"writ\" is not a tier; use one of deny, prompt, prompt-write, read, write (did you mean \"write\"?)\n",
		},
		{
			name:       "mistake in an agent file",
			policy:     "[file_policy]\n",
			files:      map[string]string{"agents/reviewer.toml": "[file_policy]\nwrite_path = []\n"},
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/agents/reviewer.toml:2: file_policy.write_path: unknown key; did you mean \"write_paths\"?\n",
		},
		{
			// check loads the global policy and each agent: a mistake
			// in the global file is reported once, not once per agent.
			name:       "global mistake shared by agents",
			policy:     "[file_policy]\nread_path = []\n\n[agents.coder.file_policy]\n[agents.tester.file_policy]\n",
			args:       []string{"check"},
			wantStderr: "agent-launcher: $TMP/policy.toml:2: file_policy.read_path: unknown key; did you mean \"read_paths\"?\n",
		},
		{
			name:       "unknown agent",
			policy:     "[agents.coder.file_policy]\nwrite_paths = [\"<workspace>/**\"]\n",
			args:       []string{"check", "--agent", "coderr"},
			wantStderr: "agent-launcher: agent \"coderr\" is not defined in $TMP/policy.toml or $TMP/agents/coderr.toml; did you mean \"coder\"?\n",
		},
		{
			name:       "unknown agent in explain",
			policy:     "[agents.coder.file_policy]\nwrite_paths = [\"<workspace>/**\"]\n",
			args:       []string{"explain", "--agent", "coderr", "main.go"},
			wantStderr: "agent-launcher: agent \"coderr\" is not defined in $TMP/policy.toml or $TMP/agents/coderr.toml; did you mean \"coder\"?\n",
		},
		{
			name:       "unknown agent, embedded default",
			args:       []string{"check", "--agent", "coder"},
			wantStderr: "agent-launcher: agent \"coder\" is not defined in (embedded default policy)\n",
		},
		{
			name:       "unknown subcommand",
			args:       []string{"chek"},
			wantStderr: "agent-launcher: unknown command \"chek\"; did you mean \"check\"? (run \"agent-launcher help\" for the list)\n",
		},
		{
			name:       "unknown subcommand, nothing close",
			args:       []string{"frobnicate"},
			wantStderr: "agent-launcher: unknown command \"frobnicate\" (run \"agent-launcher help\" for the list)\n",
		},
		{
			name:       "missing policy file",
			args:       []string{"check", "--config", "policy.tom"},
			wantStderr: "agent-launcher: $TMP/ws/policy.tom: cannot read the policy file: no such file or directory\n",
		},
		{
			name:       "HOME unset",
			env:        map[string]string{"HOME": ""},
			args:       []string{"check"},
			wantStderr: "agent-launcher: HOME is not set to an absolute path; set it, the policy's \"~\" needs it\n",
		},
		{
			name:       "workspace is not a directory",
			args:       []string{"explain", "--workspace", "nowhere", "x"},
			wantStderr: "agent-launcher: workspace $TMP/ws/nowhere is not a directory; pass --workspace DIR\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newSandbox(t)
			args := tt.args
			if tt.policy != "" {
				config := writeFile(t, filepath.Join(sb.tmp, "policy.toml"), tt.policy)
				args = append([]string{args[0], "--config", config}, args[1:]...)
			}
			for name, content := range tt.files {
				writeFile(t, filepath.Join(sb.tmp, name), content)
			}
			for k, v := range tt.env {
				if v == "" {
					unsetenv(t, k)
				} else {
					t.Setenv(k, v)
				}
			}
			r := run(args...)
			if r.code != 125 {
				t.Errorf("exit status %d, want 125", r.code)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if got := sb.normalize(t, r.stderr); got != tt.wantStderr {
				t.Errorf("stderr:\n%s\nwant:\n%s", got, tt.wantStderr)
			}
			checkNoLeaks(t, r.stderr)
		})
	}
}

// TestUnknownFlag checks that an unknown flag fails with one line naming the
// command and the flag, whatever flag package wording it uses.
func TestUnknownFlag(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"check", []string{"check", "--jsn"}, "agent-launcher: check: unknown flag --jsn; did you mean --json?\n"},
		{"explain", []string{"explain", "--opp", "write", "x"}, "agent-launcher: explain: unknown flag --opp; did you mean --op?\n"},
		{"after a path", []string{"explain", "x", "--verbose"},
			"agent-launcher: explain: unknown flag --verbose; the flags are --agent, --config, --json, --op, --tool, --workspace\n"},
		{"missing value", []string{"explain", "x", "--op"}, "agent-launcher: explain: --op needs a value\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newSandbox(t)
			r := run(tt.args...)
			if r.code != 125 {
				t.Errorf("exit status %d, want 125", r.code)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if r.stderr != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", r.stderr, tt.wantStderr)
			}
			checkNoLeaks(t, r.stderr)
		})
	}
}

// TestDoubleDashEndsFlags checks that everything after "--" is a path, even
// when it looks like a flag.
func TestDoubleDashEndsFlags(t *testing.T) {
	sb := newSandbox(t)
	r := run("explain", "--", "x.txt", "--json")
	if r.code != 0 || strings.Contains(r.stdout, "{") {
		t.Fatalf("explain -- x.txt --json: exit %d, stdout %q: --json was read as a flag", r.code, r.stdout)
	}
	want := filepath.Join(sb.ws, "--json") + ": read allowed\n"
	if !strings.Contains(sb.normalize(t, r.stdout), sb.normalize(t, want)) {
		t.Errorf("stdout = %q, want the path %q explained", r.stdout, want)
	}
}

// TestHelpFlag checks that -h shows the usage on stdout and succeeds.
func TestHelpFlag(t *testing.T) {
	for _, cmd := range []string{"check", "explain"} {
		r := run(cmd, "-h")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "agent-launcher confines") || r.stderr != "" {
			t.Errorf("%s -h: exit %d, stdout %q, stderr %q", cmd, r.code, r.stdout, r.stderr)
		}
	}
}

// TestDuplicateKey checks that a key set twice is refused at the line of the
// second one, named with its table.
func TestDuplicateKey(t *testing.T) {
	tests := []struct {
		name       string
		policy     string
		wantStderr string
	}{
		{"file_policy", "[file_policy]\ndefault = \"read\"\nprecedence = \"specific\"\ndefault = \"write\"\n",
			"agent-launcher: $TMP/policy.toml:4: file_policy.default: is set twice; keep one\n"},
		{"agent overlay", "[agents.coder.file_policy]\nread_paths = []\nread_paths = [\"/srv/**\"]\n",
			"agent-launcher: $TMP/policy.toml:3: agents.coder.file_policy.read_paths: is set twice; keep one\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newSandbox(t)
			config := writeFile(t, filepath.Join(sb.tmp, "policy.toml"), tt.policy)
			r := run("check", "--config", config)
			if r.code != 125 {
				t.Errorf("exit status %d, want 125", r.code)
			}
			if got := sb.normalize(t, r.stderr); got != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", got, tt.wantStderr)
			}
			checkNoLeaks(t, r.stderr)
		})
	}
}
