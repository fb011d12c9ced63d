package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// explainPolicy gives every tier a tree of its own. Line numbers matter: the
// tests name them.
const explainPolicy = `[file_policy]
read_paths = ["/srv/**"]
write_paths = ["<workspace>/**"]
prompt_paths = ["<workspace>/secrets/**"]
prompt_write_paths = ["<workspace>/ci/**"]
deny_paths = ["<workspace>/private/**"]
`

// explainSandbox is a project sandbox (the workspace is ~/project) with
// explainPolicy in $TMP/policy.toml, a private key in ~/.ssh, a git
// repository in the workspace and symlinks from the workspace into ~/.ssh.
// It returns the policy's path.
func explainSandbox(t *testing.T) (*sandbox, string) {
	t.Helper()
	sb := newProjectSandbox(t)
	config := writeFile(t, filepath.Join(sb.tmp, "policy.toml"), explainPolicy)
	writeFile(t, filepath.Join(sb.home, ".ssh", "id_ed25519"), "not a key\n")
	writeFile(t, filepath.Join(sb.ws, ".git", "config"), "[core]\n")
	writeFile(t, filepath.Join(sb.ws, ".git", "hooks", "pre-commit.sample"), "#!/bin/sh\n")
	writeFile(t, filepath.Join(sb.ws, "sub", "main.go"), "package main\n")
	for link, target := range map[string]string{
		"key":     filepath.Join(sb.home, ".ssh", "id_ed25519"),
		"sshdir":  filepath.Join(sb.home, ".ssh"),
		"planted": filepath.Join(sb.home, ".ssh", "authorized_keys"), // dangling
		"relkey":  "../.ssh/id_ed25519",                              // relative to the workspace
		"loop":    "loop",
	} {
		if err := os.Symlink(target, filepath.Join(sb.ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	return sb, config
}

// explainOut is the part of explain --json the tests compare.
type explainOut struct {
	Schema       int      `json:"schema"`
	Error        string   `json:"error"`
	ToolName     string   `json:"tool_name"`
	Path         string   `json:"path"`
	AllowedPaths []string `json:"allowed_paths"`
	Hint         string   `json:"hint"`
	Op           string   `json:"op"`
	Verdict      string   `json:"verdict"`
	Tier         string   `json:"tier"`
	Floor        string   `json:"floor"`
	Rule         struct {
		Pattern string `json:"pattern"`
		Kind    string `json:"kind"`
		Source  struct {
			Origin string `json:"origin"`
			File   string `json:"file"`
			Line   int    `json:"line"`
			Key    string `json:"key"`
		} `json:"source"`
	} `json:"rule"`
	Why string `json:"why"`

	keys []string // the object's keys, sorted
}

// decodeLines decodes explain --json output: one JSON object per line.
func decodeLines(t *testing.T, stdout string) []explainOut {
	t.Helper()
	var out []explainOut
	if !strings.HasSuffix(stdout, "\n") {
		t.Fatalf("stdout does not end in a newline: %q", stdout)
	}
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var o explainOut
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("line is not a JSON object: %v\n%s", err, line)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			o.keys = append(o.keys, k)
		}
		slices.Sort(o.keys)
		out = append(out, o)
	}
	return out
}

var (
	deniedKeys  = sortedStrings("schema", "error", "tool_name", "path", "allowed_paths", "hint", "op", "verdict", "tier", "rule", "why", "matches")
	allowedKeys = sortedStrings("schema", "tool_name", "path", "op", "verdict", "tier", "rule", "why", "matches")
)

func sortedStrings(s ...string) []string {
	slices.Sort(s)
	return s
}

func TestExplainExitStatus(t *testing.T) {
	tests := []struct {
		name     string
		op       string
		paths    []string
		wantCode int
	}{
		{"all allowed", "read", []string{"sub/main.go", "/srv/www/index.html", "ci/build.yml"}, 0},
		{"one denied", "read", []string{"sub/main.go", "/nowhere/x"}, 1},
		{"one needs approval", "write", []string{"sub/main.go", "ci/build.yml"}, 2},
		{"approval, then denied", "read", []string{"secrets/token", "private/notes"}, 1},
		{"denied, then approval", "read", []string{"private/notes", "secrets/token"}, 1},
		{"denied, approval, allowed", "write", []string{"/srv/www/index.html", "ci/build.yml", "sub/main.go"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, config := explainSandbox(t)
			args := append([]string{"explain", "--config", config, "--op", tt.op}, tt.paths...)
			r := run(args...)
			if r.code != tt.wantCode {
				t.Errorf("%v: exit status %d, want %d; stdout:\n%s", tt.paths, r.code, tt.wantCode, r.stdout)
			}
			if r.stderr != "" {
				t.Errorf("stderr = %q, want nothing", r.stderr)
			}
			// One paragraph per path, in order.
			var heads []string
			for _, line := range strings.Split(r.stdout, "\n") {
				if line != "" && !strings.HasPrefix(line, " ") {
					heads = append(heads, line)
				}
			}
			if len(heads) != len(tt.paths) {
				t.Errorf("%d paragraphs, want %d:\n%s", len(heads), len(tt.paths), r.stdout)
			}
		})
	}
}

// TestExplainOps checks every --op on a path of each tier.
func TestExplainOps(t *testing.T) {
	tests := []struct {
		path        string
		op          string
		wantVerdict string // as explain prints it
	}{
		{"sub/main.go", "read", "allowed"},
		{"sub/main.go", "write", "allowed"},
		{"sub/main.go", "create", "allowed"},
		{"sub/main.go", "delete", "allowed"},
		{"sub/main.go", "exec", "allowed"},
		{"sub/main.go", "metadata", "allowed"},
		{"/srv/www/index.html", "read", "allowed"},
		{"/srv/www/index.html", "write", "denied"},
		{"/srv/www/index.html", "create", "denied"},
		{"/srv/www/index.html", "delete", "denied"},
		{"/srv/www/index.html", "exec", "allowed"},
		{"/srv/www/index.html", "metadata", "denied"},
		{"ci/build.yml", "read", "allowed"},
		{"ci/build.yml", "write", "needs approval"},
		{"ci/build.yml", "create", "needs approval"},
		{"ci/build.yml", "delete", "needs approval"},
		{"ci/build.yml", "exec", "allowed"},
		{"ci/build.yml", "metadata", "needs approval"},
		{"secrets/token", "read", "needs approval"},
		{"secrets/token", "write", "needs approval"},
		{"secrets/token", "exec", "needs approval"},
		{"secrets/token", "metadata", "needs approval"},
		{"private/notes", "read", "denied"},
		{"private/notes", "write", "denied"},
		{"private/notes", "exec", "denied"},
		{"private/notes", "metadata", "denied"},
	}
	sb, config := explainSandbox(t)
	// One run per op with every path of that op: compiling the policy is
	// most of the cost of a run.
	var ops, paths []string
	for _, tt := range tests {
		ops, paths = append(ops, tt.op), append(paths, tt.path)
	}
	jsonOut := explainAll(t, sb, []string{"--config", config}, ops, paths)
	heads := explainHeads(t, sb, []string{"--config", config}, ops, paths)
	wantJSONVerdict := map[string]string{"allowed": "allow", "denied": "deny", "needs approval": "prompt"}
	for i, tt := range tests {
		t.Run(tt.path+" "+tt.op, func(t *testing.T) {
			abs := tt.path
			if !filepath.IsAbs(abs) {
				abs = "$TMP/home/project/" + abs
			}
			if want := abs + ": " + tt.op + " " + tt.wantVerdict; heads[i] != want {
				t.Errorf("explain --op %s %s: %q, want %q", tt.op, tt.path, heads[i], want)
			}
			if o := jsonOut[i]; o.Op != tt.op || o.Verdict != wantJSONVerdict[tt.wantVerdict] || o.Path != abs {
				t.Errorf("explain --json --op %s %s: op %q, verdict %q, path %q; want %q, %q, %q", tt.op, tt.path,
					o.Op, o.Verdict, o.Path, tt.op, wantJSONVerdict[tt.wantVerdict], abs)
			}
		})
	}
}

// explainAll runs explain --json once per distinct op, with every path of
// that op, and returns the normalized object of each (op, path) pair. It
// checks the exit status of each run against the verdicts: 1 when one is
// denied, else 2 when one needs approval, else 0.
func explainAll(t *testing.T, sb *sandbox, args, ops, paths []string) []explainOut {
	t.Helper()
	out := make([]explainOut, len(ops))
	for _, op := range uniq(ops) {
		var idx []int
		var ps []string
		for i := range ops {
			if ops[i] == op {
				idx, ps = append(idx, i), append(ps, paths[i])
			}
		}
		r := run(append(append([]string{"explain", "--json", "--op", op}, args...), ps...)...)
		if r.stderr != "" {
			t.Errorf("explain --op %s: stderr = %q, want nothing", op, r.stderr)
		}
		got := decodeLines(t, sb.normalize(t, r.stdout))
		if len(got) != len(ps) {
			t.Fatalf("explain --op %s %q: %d JSON lines, want %d", op, ps, len(got), len(ps))
		}
		wantCode := 0
		for j, i := range idx {
			out[i] = got[j]
			switch {
			case got[j].Verdict == "deny":
				wantCode = 1
			case got[j].Verdict == "prompt" && wantCode == 0:
				wantCode = 2
			}
		}
		if r.code != wantCode {
			t.Errorf("explain --op %s %q: exit status %d, want %d", op, ps, r.code, wantCode)
		}
	}
	return out
}

// explainHeads runs explain (for people) like explainAll and returns the
// first line of each path's paragraph.
func explainHeads(t *testing.T, sb *sandbox, args, ops, paths []string) []string {
	t.Helper()
	out := make([]string, len(ops))
	for _, op := range uniq(ops) {
		var idx []int
		var ps []string
		for i := range ops {
			if ops[i] == op {
				idx, ps = append(idx, i), append(ps, paths[i])
			}
		}
		r := run(append(append([]string{"explain", "--op", op}, args...), ps...)...)
		var heads []string
		for _, line := range strings.Split(sb.normalize(t, r.stdout), "\n") {
			if line != "" && !strings.HasPrefix(line, " ") {
				heads = append(heads, line)
			}
		}
		if len(heads) != len(ps) {
			t.Fatalf("explain --op %s %q: %d paragraphs, want %d:\n%s", op, ps, len(heads), len(ps), r.stdout)
		}
		for j, i := range idx {
			out[i] = heads[j]
		}
	}
	return out
}

func uniq(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func TestExplainUsageErrors(t *testing.T) {
	const ops = "read, write, create, delete, exec, metadata"
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"op not an operation", []string{"explain", "--op", "rename", "x"}, "agent-launcher: explain: --op \"rename\" is not an operation; use one of " + ops + "\n"},
		{"op in capitals", []string{"explain", "--op", "READ", "x"}, "agent-launcher: explain: --op \"READ\" is not an operation; use one of " + ops + "\n"},
		{"op empty", []string{"explain", "--op=", "x"}, "agent-launcher: explain: --op \"\" is not an operation; use one of " + ops + "\n"},
		{"no path", []string{"explain", "--op", "write"}, "agent-launcher: explain: name at least one PATH\n"},
		{"no path with json", []string{"explain", "--json"}, "agent-launcher: explain: name at least one PATH\n"},
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
		})
	}
}

// TestExplainOutput compares explain's output for people, in full.
func TestExplainOutput(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStdout string
	}{
		{
			name: "prompt, relative path",
			args: []string{"secrets/token"},
			wantStdout: `$TMP/home/project/secrets/token: read needs approval
  resolved from: secrets/token
  tier: prompt
  rule: <workspace>/secrets/**  ($TMP/policy.toml:4: file_policy.prompt_paths[0])
  why: prompt tier by "<workspace>/secrets/**" ($TMP/policy.toml:4: file_policy.prompt_paths[0]): read needs approval
  also matches:
    write <workspace>/**  ($TMP/policy.toml:3: file_policy.write_paths[0])
`,
		},
		{
			name: "default tier, absolute path",
			args: []string{"/nowhere/x"},
			wantStdout: `/nowhere/x: read denied
  tier: deny
  rule: none matches; the default tier applies (built-in default)
  why: no rule matches; default tier deny (built-in default): read denied
`,
		},
		{
			name: "write protection",
			args: []string{"--op", "write", ".git/config"},
			wantStdout: `$TMP/home/project/.git/config: write denied
  resolved from: .git/config
  tier: read
  rule: ~/**/.git/config  (built-in write protection: git configuration (core.fsmonitor, core.hooksPath run commands))
  why: write tier capped at read by "~/**/.git/config" (built-in write protection: git configuration (core.fsmonitor, core.hooksPath run commands)): write denied
  also matches:
    write <workspace>/**  ($TMP/policy.toml:3: file_policy.write_paths[0])
`,
		},
		{
			name: "symlink to a key",
			args: []string{"key"},
			wantStdout: `$TMP/home/.ssh/id_ed25519: read denied
  resolved from: key
  tier: deny
  rule: ~/.ssh/**  (built-in denylist: SSH keys)
  why: deny tier by "~/.ssh/**" (built-in denylist: SSH keys): read denied
  also matches:
    deny ~/**/id_ed25519  (built-in denylist: SSH private key)
`,
		},
		{
			name: "two paths",
			args: []string{"--op", "delete", "/srv/a", "private/b"},
			wantStdout: `/srv/a: delete denied
  tier: read
  rule: /srv/**  ($TMP/policy.toml:2: file_policy.read_paths[0])
  why: read tier by "/srv/**" ($TMP/policy.toml:2: file_policy.read_paths[0]): delete denied
$TMP/home/project/private/b: delete denied
  resolved from: private/b
  tier: deny
  rule: <workspace>/private/**  ($TMP/policy.toml:6: file_policy.deny_paths[0])
  why: deny tier by "<workspace>/private/**" ($TMP/policy.toml:6: file_policy.deny_paths[0]): delete denied
  also matches:
    write <workspace>/**  ($TMP/policy.toml:3: file_policy.write_paths[0])
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb, config := explainSandbox(t)
			r := run(append([]string{"explain", "--config", config}, tt.args...)...)
			if got := sb.normalize(t, r.stdout); got != tt.wantStdout {
				t.Errorf("stdout:\n%s\nwant:\n%s\n%s", got, tt.wantStdout, lineDiff(tt.wantStdout, got))
			}
			if r.stderr != "" {
				t.Errorf("stderr = %q, want nothing", r.stderr)
			}
		})
	}
}

// TestExplainResolvesPaths checks that explain decides on the path the kernel
// would open: relative to the current directory, with symlinks resolved.
func TestExplainResolvesPaths(t *testing.T) {
	tests := []struct {
		name        string
		arg         string
		op          string
		wantPath    string
		wantVerdict string
		wantRule    string
	}{
		{"relative", "sub/main.go", "write", "$TMP/home/project/sub/main.go", "allow", "<workspace>/**"},
		{"dot-dot", "sub/../sub/main.go", "write", "$TMP/home/project/sub/main.go", "allow", "<workspace>/**"},
		{"does not exist yet", "new/dir/file", "create", "$TMP/home/project/new/dir/file", "allow", "<workspace>/**"},
		{"symlink to a key", "key", "read", "$TMP/home/.ssh/id_ed25519", "deny", "~/.ssh/**"},
		{"symlink to a key, write", "key", "write", "$TMP/home/.ssh/id_ed25519", "deny", "~/.ssh/**"},
		{"through a symlinked directory", "sshdir/id_ed25519", "read", "$TMP/home/.ssh/id_ed25519", "deny", "~/.ssh/**"},
		{"new file in a symlinked directory", "sshdir/authorized_keys", "create", "$TMP/home/.ssh/authorized_keys", "deny", "~/.ssh/**"},
		{"absolute path through a symlink", "$TMP/home/project/key", "read", "$TMP/home/.ssh/id_ed25519", "deny", "~/.ssh/**"},
		{"relative symlink", "relkey", "read", "$TMP/home/.ssh/id_ed25519", "deny", "~/.ssh/**"},
		// A create through a dangling symlink creates its target.
		{"dangling symlink", "planted", "create", "$TMP/home/.ssh/authorized_keys", "deny", "~/.ssh/**"},
		// The kernel applies ".." to the symlink's target: this is
		// ~/notes.txt, outside the workspace, not ~/project/notes.txt.
		{"dot-dot after a symlink", "sshdir/../notes.txt", "write", "$TMP/home/notes.txt", "deny", "(default)"},
	}
	sb, config := explainSandbox(t)
	var ops, args []string
	for _, tt := range tests {
		ops, args = append(ops, tt.op), append(args, strings.Replace(tt.arg, "$TMP", sb.tmp, 1))
	}
	out := explainAll(t, sb, []string{"--config", config}, ops, args)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := out[i]
			if o.Path != tt.wantPath || o.Verdict != tt.wantVerdict || o.Rule.Pattern != tt.wantRule {
				t.Errorf("explain --op %s %s = (path %q, verdict %q, rule %q), want (%q, %q, %q)", tt.op, tt.arg,
					o.Path, o.Verdict, o.Rule.Pattern, tt.wantPath, tt.wantVerdict, tt.wantRule)
			}
		})
	}

	// From a subdirectory of the workspace, ".." leads back to it.
	t.Run("from a subdirectory", func(t *testing.T) {
		t.Chdir(filepath.Join(sb.ws, "sub"))
		r := run("explain", "--json", "--config", config, "--workspace", sb.ws, "../private/notes")
		out := decodeLines(t, sb.normalize(t, r.stdout))
		if len(out) != 1 || out[0].Path != "$TMP/home/project/private/notes" || out[0].Verdict != "deny" || r.code != 1 {
			t.Errorf("explain ../private/notes from sub/ = %+v, exit status %d; want path $TMP/home/project/private/notes denied, 1", out, r.code)
		}
	})
}

// TestExplainUnresolvable checks the paths the kernel's walk would refuse.
func TestExplainUnresolvable(t *testing.T) {
	tests := []struct {
		name       string
		arg        string
		wantStderr string
	}{
		{
			name:       "dot-dot after a missing directory",
			arg:        "missing/../main.go",
			wantStderr: "agent-launcher: explain: $TMP/home/project/missing does not exist, so \"$TMP/home/project/missing/../main.go\" cannot be resolved\n",
		},
		{
			name:       "a file used as a directory",
			arg:        "sub/main.go/x",
			wantStderr: "agent-launcher: explain: cannot resolve $TMP/home/project/sub/main.go/x: $TMP/home/project/sub/main.go is not a directory\n",
		},
		{
			name:       "symlink loop",
			arg:        "loop/x",
			wantStderr: "agent-launcher: explain: cannot resolve $TMP/home/project/loop/x: too many levels of symbolic links\n",
		},
	}
	sb, config := explainSandbox(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run("explain", "--config", config, tt.arg)
			if r.code != 125 {
				t.Errorf("exit status %d, want 125", r.code)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if got := sb.normalize(t, r.stderr); got != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", got, tt.wantStderr)
			}
		})
	}
}

// TestExplainDefaultPolicy checks the embedded default policy's key
// decisions.
func TestExplainDefaultPolicy(t *testing.T) {
	tests := []struct {
		name        string
		op          string
		path        string // "~/" and "ws/" are the sandbox's home and workspace
		wantVerdict string
		wantTier    string
		wantRule    string
	}{
		{"write in the workspace", "write", "ws/src/main.go", "allow", "write", "<workspace>/**"},
		{"create in the workspace", "create", "ws/new.txt", "allow", "write", "<workspace>/**"},
		{"read an SSH key", "read", "~/.ssh/id_ed25519", "deny", "deny", "~/.ssh/**"},
		{"read an SSH key outside ~/.ssh", "read", "~/backup/id_ed25519", "deny", "deny", "~/**/id_ed25519"},
		{"create a git hook", "create", "ws/.git/hooks/pre-commit", "deny", "read", "<workspace>/**/.git/hooks/**"},
		{"write .git/config", "write", "ws/.git/config", "deny", "read", "<workspace>/**/.git/config"},
		{"read .git/config", "read", "ws/.git/config", "allow", "read", "<workspace>/**/.git/config"},
		{"read a nested .env", "read", "ws/sub/.env", "deny", "deny", "<workspace>/**/.env"},
		{"read .env.local", "read", "ws/.env.local", "deny", "deny", "<workspace>/**/.env.*"},
		{"write .envrc", "write", "ws/.envrc", "deny", "read", "<workspace>/**/.envrc"},
		{"write a submodule hook", "write", "ws/.git/modules/lib/hooks/post-checkout", "deny", "read", "<workspace>/**/.git/modules/**/hooks/**"},
		{"read ~/.gitconfig", "read", "~/.gitconfig", "allow", "read", "~/.gitconfig"},
		{"write ~/.gitconfig", "write", "~/.gitconfig", "deny", "read", "~/.gitconfig"},
		// File-name patterns apply under ~ and the workspace only.
		{"read a CA bundle under /usr", "read", "/usr/share/ca-certificates/x/cacert.pem", "allow", "read", "/usr/**"},
		{"read a .env under /etc", "read", "/etc/app/.env", "allow", "read", "/etc/**"},
		{"read /etc/shadow", "read", "/etc/shadow", "deny", "deny", "/etc/shadow"},
		{"read /etc/sudoers.d", "read", "/etc/sudoers.d/90-agent", "deny", "deny", "/etc/sudoers.d/**"},
		{"read /etc/hostname", "read", "/etc/hostname", "allow", "read", "/etc/**"},
		{"write /etc/hostname", "write", "/etc/hostname", "deny", "read", "/etc/**"},
		{"write /dev/null", "write", "/dev/null", "allow", "write", "/dev/null"},
		{"exec /usr/bin/env", "exec", "/usr/bin/env", "allow", "read", "/usr/**"},
		{"read /root", "read", "/root/notes", "deny", "deny", "(default)"},
		{"read the launcher's state", "read", "$TMP/xdg/state/agent-launcher/session.json", "deny", "deny", "$TMP/xdg/state/agent-launcher/**"},
	}
	sb := newSandbox(t)
	var ops, paths []string
	for _, tt := range tests {
		path := tt.path
		switch {
		case strings.HasPrefix(path, "~/"):
			path = filepath.Join(sb.home, path[2:])
		case strings.HasPrefix(path, "ws/"):
			path = filepath.Join(sb.ws, path[3:])
		case strings.HasPrefix(path, "$TMP/"):
			path = filepath.Join(sb.tmp, path[5:])
		}
		ops, paths = append(ops, tt.op), append(paths, path)
	}
	out := explainAll(t, sb, nil, ops, paths)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := out[i]
			if o.Verdict != tt.wantVerdict || o.Tier != tt.wantTier || o.Rule.Pattern != tt.wantRule {
				t.Errorf("%s %s = (verdict %q, tier %q, rule %q), want (%q, %q, %q)\nwhy: %s", tt.op, tt.path,
					o.Verdict, o.Tier, o.Rule.Pattern, tt.wantVerdict, tt.wantTier, tt.wantRule, o.Why)
			}
		})
	}
}

// TestExplainProtectsLauncher checks that a policy that grants everything
// still cannot open the launcher's own files: its policy, the agents/
// beside it, its configuration, state and approval directories, and its
// executable (write-protected).
func TestExplainProtectsLauncher(t *testing.T) {
	tests := []struct {
		name        string
		op          string
		path        string // under $TMP, or $EXE
		wantVerdict string
		wantTier    string
		wantRule    string
	}{
		{"read the policy", "read", "$TMP/policy.toml", "deny", "deny", "$TMP/policy.toml"},
		{"write the policy", "write", "$TMP/policy.toml", "deny", "deny", "$TMP/policy.toml"},
		{"create an agent file", "create", "$TMP/agents/evil.toml", "deny", "deny", "$TMP/agents/**"},
		{"read the XDG config", "read", "$TMP/xdg/config/agent-launcher/config.toml", "deny", "deny", "$TMP/xdg/config/agent-launcher/**"},
		{"read the state", "read", "$TMP/xdg/state/agent-launcher/audit.log", "deny", "deny", "$TMP/xdg/state/agent-launcher/**"},
		{"create an approval socket", "create", "$TMP/xdg/run/agent-launcher/approve.sock", "deny", "deny", "$TMP/xdg/run/agent-launcher/**"},
		{"write the executable", "write", "$EXE", "deny", "read", "$EXE"},
		{"delete the executable", "delete", "$EXE", "deny", "read", "$EXE"},
		{"exec the executable", "exec", "$EXE", "allow", "read", "$EXE"},
		{"write elsewhere", "write", "$TMP/xdg/state/other/file", "allow", "write", "/**"},
	}
	sb := newProjectSandbox(t)
	config := writeFile(t, filepath.Join(sb.tmp, "policy.toml"), "[file_policy]\nwrite_paths = [\"/**\"]\n")
	exe := executable(t)
	var ops, paths []string
	for _, tt := range tests {
		path := strings.Replace(strings.Replace(tt.path, "$TMP", sb.tmp, 1), "$EXE", exe, 1)
		ops, paths = append(ops, tt.op), append(paths, path)
	}
	out := explainAll(t, sb, []string{"--config", config}, ops, paths)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := out[i]
			if o.Verdict != tt.wantVerdict || o.Tier != tt.wantTier || o.Rule.Pattern != tt.wantRule {
				t.Errorf("%s %s = (verdict %q, tier %q, rule %q), want (%q, %q, %q)\nwhy: %s", tt.op, tt.path,
					o.Verdict, o.Tier, o.Rule.Pattern, tt.wantVerdict, tt.wantTier, tt.wantRule, o.Why)
			}
		})
	}
}

// TestExplainJSON checks the --json envelope: for a denied path, the fields
// agent frameworks read (error, tool_name, path, allowed_paths, hint) plus
// the decision; for any other path, no error, hint or allowed_paths.
func TestExplainJSON(t *testing.T) {
	readAllowed := []string{"$TMP/home/project/ci/**", "/srv/**", "$TMP/home/project/**"}
	tests := []struct {
		name   string
		policy string // replaces explainPolicy when set
		tool   string // --tool; "" omits the flag
		op     string
		arg    string
		want   explainOut // keys, Why and Rule.Source are not compared
		// anyAllowed skips allowed_paths (only its presence is checked):
		// for exec under exec_paths it lists the read and write trees,
		// which exec_paths narrows further.
		anyAllowed bool
		// wantSource is Rule.Source as "origin file:line: key".
		wantSource string
	}{
		{
			name: "denied by the built-in denylist",
			tool: "Read",
			op:   "read",
			arg:  "key",
			want: explainOut{
				Schema: 1, ToolName: "Read", Path: "$TMP/home/.ssh/id_ed25519", Op: "read", Verdict: "deny", Tier: "deny",
				Error:        "agent-launcher policy denies read of $TMP/home/.ssh/id_ed25519",
				AllowedPaths: readAllowed,
				Hint:         "this path is on the built-in denylist (SSH keys); only the operator can lift it, with builtin_exceptions in the global policy file",
				keys:         deniedKeys,
			},
			wantSource: "built-in :0: built-in denylist",
		},
		{
			name: "denied by deny_paths",
			tool: "Read",
			op:   "read",
			arg:  "private/notes",
			want: explainOut{
				Schema: 1, ToolName: "Read", Path: "$TMP/home/project/private/notes", Op: "read", Verdict: "deny", Tier: "deny",
				Error:        "agent-launcher policy denies read of $TMP/home/project/private/notes",
				AllowedPaths: readAllowed,
				Hint:         "denied by $TMP/policy.toml:6: file_policy.deny_paths[0]; ask the operator to change the policy",
				keys:         deniedKeys,
			},
			wantSource: "global $TMP/policy.toml:6: file_policy.deny_paths[0]",
		},
		{
			name: "denied by the default tier",
			tool: "Glob",
			op:   "read",
			arg:  "/nowhere/x",
			want: explainOut{
				Schema: 1, ToolName: "Glob", Path: "/nowhere/x", Op: "read", Verdict: "deny", Tier: "deny",
				Error:        "agent-launcher policy denies read of /nowhere/x",
				AllowedPaths: readAllowed,
				Hint:         "no rule grants this path; the operator can add it to read_paths or write_paths in the policy",
				keys:         deniedKeys,
			},
			wantSource: "built-in :0: built-in default",
		},
		{
			name: "write to a read-only path",
			tool: "Write",
			op:   "write",
			arg:  "/srv/www/index.html",
			want: explainOut{
				Schema: 1, ToolName: "Write", Path: "/srv/www/index.html", Op: "write", Verdict: "deny", Tier: "read",
				Error:        "agent-launcher policy denies write of /srv/www/index.html",
				AllowedPaths: []string{"$TMP/home/project/**"},
				Hint:         "the path is read-only ($TMP/policy.toml:2: file_policy.read_paths[0]); write under one of allowed_paths instead",
				keys:         deniedKeys,
			},
			wantSource: "global $TMP/policy.toml:2: file_policy.read_paths[0]",
		},
		{
			name: "write-protected file",
			tool: "Edit",
			op:   "write",
			arg:  ".git/config",
			want: explainOut{
				Schema: 1, ToolName: "Edit", Path: "$TMP/home/project/.git/config", Op: "write", Verdict: "deny", Tier: "read",
				Error:        "agent-launcher policy denies write of $TMP/home/project/.git/config",
				AllowedPaths: []string{"$TMP/home/project/**"},
				Hint:         "this file is write-protected because programs outside the session run or obey it (git configuration (core.fsmonitor, core.hooksPath run commands)); read it, or ask the operator",
				keys:         deniedKeys,
			},
			wantSource: "built-in :0: built-in write protection",
		},
		{
			name: "the launcher's own policy file",
			tool: "Read",
			op:   "read",
			arg:  "../../policy.toml",
			want: explainOut{
				Schema: 1, ToolName: "Read", Path: "$TMP/policy.toml", Op: "read", Verdict: "deny", Tier: "deny",
				Error:        "agent-launcher policy denies read of $TMP/policy.toml",
				AllowedPaths: readAllowed,
				Hint:         "this is one of agent-launcher's own files; no policy can open it to the agent",
				keys:         deniedKeys,
			},
			wantSource: "built-in :0: built-in launcher protection",
		},
		{
			name:   "exec outside exec_paths, write tier",
			policy: "[file_policy]\nwrite_paths = [\"/srv/**\"]\nexec_paths = [\"/srv/bin/**\"]\n",
			tool:   "Bash",
			op:     "exec",
			arg:    "/srv/www/run.sh",
			want: explainOut{
				Schema: 1, ToolName: "Bash", Path: "/srv/www/run.sh", Op: "exec", Verdict: "deny", Tier: "write",
				AllowedPaths: []string{"/srv/bin/**"}, // only exec_paths may be executed
				Error:        "agent-launcher policy denies exec of /srv/www/run.sh",
				Hint:         "exec_paths does not list this program (where the global file and the agent overlay both set exec_paths, both must list it)",
				keys:         deniedKeys,
			},
			wantSource: "global $TMP/policy.toml:2: file_policy.write_paths[0]",
		},
		{
			name:   "exec outside exec_paths, read tier",
			policy: "[file_policy]\nread_paths = [\"/srv/**\"]\nexec_paths = [\"/srv/bin/**\"]\n",
			tool:   "Bash",
			op:     "exec",
			arg:    "/srv/www/run.sh",
			want: explainOut{
				Schema: 1, ToolName: "Bash", Path: "/srv/www/run.sh", Op: "exec", Verdict: "deny", Tier: "read",
				AllowedPaths: []string{"/srv/bin/**"}, // only exec_paths may be executed
				Error:        "agent-launcher policy denies exec of /srv/www/run.sh",
				Hint:         "exec_paths does not list this program (where the global file and the agent overlay both set exec_paths, both must list it)",
				keys:         deniedKeys,
			},
			wantSource: "global $TMP/policy.toml:2: file_policy.read_paths[0]",
		},
		{
			name:   "nothing allows the op",
			policy: "[file_policy]\nread_paths = [\"/srv/**\"]\n",
			tool:   "Write",
			op:     "write",
			arg:    "/srv/x",
			want: explainOut{
				Schema: 1, ToolName: "Write", Path: "/srv/x", Op: "write", Verdict: "deny", Tier: "read",
				Error:        "agent-launcher policy denies write of /srv/x",
				Hint:         "the path is read-only ($TMP/policy.toml:2: file_policy.read_paths[0]); write under one of allowed_paths instead",
				AllowedPaths: []string{}, // present and empty, not absent
				keys:         deniedKeys,
			},
			wantSource: "global $TMP/policy.toml:2: file_policy.read_paths[0]",
		},
		{
			name: "allowed",
			tool: "Read",
			op:   "read",
			arg:  "sub/main.go",
			want: explainOut{
				Schema: 1, ToolName: "Read", Path: "$TMP/home/project/sub/main.go", Op: "read", Verdict: "allow", Tier: "write",
				keys: allowedKeys,
			},
			wantSource: "global $TMP/policy.toml:3: file_policy.write_paths[0]",
		},
		{
			name: "needs approval",
			tool: "Write",
			op:   "write",
			arg:  "ci/build.yml",
			want: explainOut{
				Schema: 1, ToolName: "Write", Path: "$TMP/home/project/ci/build.yml", Op: "write", Verdict: "prompt", Tier: "prompt-write",
				keys: allowedKeys,
			},
			wantSource: "global $TMP/policy.toml:5: file_policy.prompt_write_paths[0]",
		},
		{
			name: "default tool name",
			op:   "read",
			arg:  "sub/main.go",
			want: explainOut{
				Schema: 1, ToolName: "agent-launcher", Path: "$TMP/home/project/sub/main.go", Op: "read", Verdict: "allow", Tier: "write",
				keys: allowedKeys,
			},
			wantSource: "global $TMP/policy.toml:3: file_policy.write_paths[0]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb, config := explainSandbox(t)
			if tt.policy != "" {
				writeFile(t, config, tt.policy)
			}
			args := []string{"explain", "--json", "--config", config, "--op", tt.op}
			if tt.tool != "" {
				args = append(args, "--tool", tt.tool)
			}
			r := run(append(args, tt.arg)...)
			out := decodeLines(t, sb.normalize(t, r.stdout))
			if len(out) != 1 {
				t.Fatalf("%d JSON lines, want 1", len(out))
			}
			got := out[0]
			src := got.Rule.Source
			if s := src.Origin + " " + src.File + ":" + strconv.Itoa(src.Line) + ": " + src.Key; s != tt.wantSource {
				t.Errorf("rule source = %q, want %q", s, tt.wantSource)
			}
			if !strings.HasSuffix(got.Why, ": "+tt.op+" "+map[string]string{"allow": "allowed", "deny": "denied", "prompt": "needs approval"}[tt.want.Verdict]) {
				t.Errorf("why = %q does not end in the verdict", got.Why)
			}
			got.Rule, got.Why = tt.want.Rule, ""
			if tt.anyAllowed {
				got.AllowedPaths = nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("explain --json:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestExplainJSONLines checks that several paths give one object per line,
// in order.
func TestExplainJSONLines(t *testing.T) {
	sb, config := explainSandbox(t)
	r := run("explain", "--json", "--config", config, "--tool", "Read", "sub/main.go", "key", "secrets/token")
	if r.code != 1 {
		t.Errorf("exit status %d, want 1", r.code)
	}
	if n := strings.Count(r.stdout, "\n"); n != 3 {
		t.Errorf("%d lines, want 3:\n%s", n, r.stdout)
	}
	var got []string
	for _, o := range decodeLines(t, sb.normalize(t, r.stdout)) {
		got = append(got, o.Path+" "+o.Verdict+" "+o.ToolName)
	}
	want := []string{"$TMP/home/project/sub/main.go allow Read", "$TMP/home/.ssh/id_ed25519 deny Read", "$TMP/home/project/secrets/token prompt Read"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lines = %q, want %q", got, want)
	}
}

// TestExplainPlansWithTheView: explain follows symlinked protected names
// by planning the floor as run plans it, for the session's private view.
// In a workspace under /var/tmp (granted whole by the default policy, and
// not an ancestor of the home directory) a git directory is protected by
// mounts in the view, and run starts; explain must not warn that the
// floor would expose it. A .env there is another matter: run refuses it,
// and explain says why.
func TestExplainPlansWithTheView(t *testing.T) {
	newSandbox(t)
	ws, err := os.MkdirTemp("/var/tmp", "al-explain-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	if ws, err = filepath.EvalSymlinks(ws); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(ws, ".git", "config"), "[core]\n")
	writeFile(t, filepath.Join(ws, ".git", "hooks", "pre-commit.sample"), "#!/bin/sh\n")
	r := run("explain", "--workspace", ws, filepath.Join(ws, "main.go"))
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("explain in a git workspace under /var/tmp: exit %d, stderr %q; want no warning", r.code, r.stderr)
	}
	writeFile(t, filepath.Join(ws, ".env"), "SECRET=1\n")
	r = run("explain", "--workspace", ws, filepath.Join(ws, "main.go"))
	if !strings.Contains(r.stderr, ".env, which the policy protects") {
		t.Fatalf("explain with a .env in a workspace under /var/tmp: stderr %q; want the warning run refuses with", r.stderr)
	}
}

// TestExplainFloorCaveat: where a name pattern decided for a path that
// does not exist, explain says that a session's floor does not keep a file
// of that name created during the session (a review found `git init`
// allowed where explain said create denied); a literal path, an existing
// file and an allowed answer carry no such line.
func TestExplainFloorCaveat(t *testing.T) {
	sb := newSandbox(t)
	if err := os.MkdirAll(filepath.Join(sb.ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sb.ws, "sub", ".env"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		op, path string
		want     string // a word of the caveat, "" for none
	}{
		{"create", filepath.Join(sb.ws, ".git/config"), "review"},
		{"create", filepath.Join(sb.ws, ".env"), "not denied"},
		{"read", filepath.Join(sb.ws, "sub/.env"), ""},    // exists: the floor found it at launch
		{"create", filepath.Join(sb.home, ".bashrc"), ""}, // a literal path
		{"create", filepath.Join(sb.ws, "main.go"), ""},   // allowed
		{"read", filepath.Join(sb.home, ".ssh/id_ed25519"), ""},
	}
	var ops, paths []string
	for _, tt := range tests {
		ops, paths = append(ops, tt.op), append(paths, tt.path)
	}
	out := explainAll(t, sb, nil, ops, paths)
	for i, tt := range tests {
		got := out[i].Floor
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s %s: floor %q, want one saying %q", tt.op, tt.path, got, tt.want)
		}
	}
	r := run("explain", "--op", "create", filepath.Join(sb.ws, ".envrc"))
	if !strings.Contains(r.stdout, "  floor: the kernel floor applies this name pattern") {
		t.Errorf("the text output has no floor line: %s", r.stdout)
	}
}
