package cli_test

import (
	"encoding/json"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/agent-launcher/agent-launcher/internal/cli"
)

func TestVersion(t *testing.T) {
	platform := " (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	tests := []struct {
		name       string
		version    string // cli.Version, as set with -ldflags -X
		args       []string
		wantStdout string // "" checks the form only: the build info decides
	}{
		{"linked version", "v1.2.3", []string{"version"}, "agent-launcher v1.2.3" + platform},
		{"--version", "v1.2.3", []string{"--version"}, "agent-launcher v1.2.3" + platform},
		{"build info", "", []string{"version"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := cli.Version
			cli.Version = tt.version
			t.Cleanup(func() { cli.Version = old })
			r := run(tt.args...)
			if r.code != 0 {
				t.Errorf("exit status %d, want 0", r.code)
			}
			if r.stderr != "" {
				t.Errorf("stderr = %q, want nothing", r.stderr)
			}
			if strings.Count(r.stdout, "\n") != 1 || !strings.HasPrefix(r.stdout, "agent-launcher ") || !strings.HasSuffix(r.stdout, platform) {
				t.Errorf("stdout = %q, want one line \"agent-launcher VERSION%s\"", r.stdout, strings.TrimSuffix(platform, "\n"))
			}
			if tt.wantStdout != "" && r.stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", r.stdout, tt.wantStdout)
			}
		})
	}
}

func TestVersionTakesNoArguments(t *testing.T) {
	r := run("version", "--json")
	const want = "agent-launcher: version: takes no arguments\n"
	if r.code != 125 || r.stdout != "" || r.stderr != want {
		t.Errorf("version --json = (%d, stdout %q, stderr %q), want (125, \"\", %q)", r.code, r.stdout, r.stderr, want)
	}
}

func TestHelp(t *testing.T) {
	const wantStart = "agent-launcher confines an AI agent and everything it starts to a file policy.\n"
	tests := []struct {
		name         string
		args         []string
		wantCode     int
		wantInStdout bool // the usage goes to stdout, else to stderr
	}{
		{"help", []string{"help"}, 0, true},
		{"-h", []string{"-h"}, 0, true},
		{"--help", []string{"--help"}, 0, true},
		{"no command", nil, 125, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit status %d, want %d", r.code, tt.wantCode)
			}
			usage, other := r.stdout, r.stderr
			if !tt.wantInStdout {
				usage, other = other, usage
			}
			if !strings.HasPrefix(usage, wantStart) || !strings.Contains(usage, "\n  agent-launcher explain ") {
				t.Errorf("usage = %q, want it to start %q and list explain", usage, wantStart)
			}
			if other != "" {
				t.Errorf("the other stream = %q, want nothing", other)
			}
		})
	}
}

// TestJSONSchema checks that every --json output carries "schema": 1, on
// success and on failure, in every object of explain's stream.
func TestJSONSchema(t *testing.T) {
	tests := []struct {
		name     string
		policy   string // $TMP/policy.toml, passed with --config; "" for the embedded default
		args     []string
		wantCode int
		wantDocs int // JSON documents on stdout
	}{
		{"check", "", []string{"check", "--json"}, 0, 1},
		{"check with agents", "[agents.a.file_policy]\n[agents.b.file_policy]\n", []string{"check", "--json"}, 0, 1},
		{"check, refused policy", "[file_policy]\ndefault = \"raed\"\n", []string{"check", "--json"}, 125, 1},
		{"check, missing policy", "(missing)", []string{"check", "--json"}, 125, 1},
		{"explain, allowed", "", []string{"explain", "--json", "main.go"}, 0, 1},
		{"explain, denied", "", []string{"explain", "--json", "/etc/shadow"}, 1, 1},
		{"explain, approval", "[file_policy]\nprompt_paths = [\"<workspace>/**\"]\n", []string{"explain", "--json", "main.go"}, 2, 1},
		{"explain, several paths", "", []string{"explain", "--json", "main.go", "/etc/shadow", "/usr/bin/env"}, 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newProjectSandbox(t)
			args := tt.args
			switch tt.policy {
			case "":
			case "(missing)":
				args = append(args, "--config", filepath.Join(sb.tmp, "missing.toml"))
			default:
				args = append(args, "--config", writeFile(t, filepath.Join(sb.tmp, "policy.toml"), tt.policy))
			}
			r := run(args...)
			if r.code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			dec := json.NewDecoder(strings.NewReader(r.stdout))
			docs := 0
			for {
				var doc map[string]any
				err := dec.Decode(&doc)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("stdout is not a stream of JSON objects: %v\n%s", err, r.stdout)
				}
				docs++
				if s, ok := doc["schema"].(float64); !ok || s != 1 {
					t.Errorf("document %d: schema = %#v, want 1", docs, doc["schema"])
				}
			}
			if docs != tt.wantDocs {
				t.Errorf("%d JSON documents, want %d:\n%s", docs, tt.wantDocs, r.stdout)
			}
		})
	}
}
