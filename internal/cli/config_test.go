package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestConfigLookup checks the lookup order of DESIGN.md section 11: --config,
// else $AGENT_LAUNCHER_CONFIG, else $XDG_CONFIG_HOME/agent-launcher/
// config.toml, else the embedded default; a named file that is missing is an
// error, never a fallback. The policy used is the "config" of check --json.
func TestConfigLookup(t *testing.T) {
	const (
		flagFile = "$TMP/flag.toml"
		envFile  = "$TMP/env.toml"
		xdgFile  = "$TMP/xdg/config/agent-launcher/config.toml"
		homeFile = "$TMP/home/.config/agent-launcher/config.toml"
		missing  = "$TMP/missing.toml"
		embedded = "(embedded default policy)"
	)
	tests := []struct {
		name string
		// files are created with a valid policy; dirs as directories.
		files []string
		dirs  []string
		// flag is the --config value, "" for none.
		flag string
		// env sets variables; "" unsets one, "(empty)" sets it to "".
		env map[string]string
		// chdir is the directory to run in, "" for the workspace.
		chdir      string
		wantConfig string
		wantCode   int
		// wantError is the message of the one error when wantCode is 125.
		wantError string
	}{
		{
			name:       "flag wins over everything",
			files:      []string{flagFile, envFile, xdgFile},
			flag:       flagFile,
			env:        map[string]string{"AGENT_LAUNCHER_CONFIG": envFile},
			wantConfig: flagFile,
		},
		{
			name:       "environment wins over XDG",
			files:      []string{envFile, xdgFile},
			env:        map[string]string{"AGENT_LAUNCHER_CONFIG": envFile},
			wantConfig: envFile,
		},
		{
			name:       "XDG wins over the embedded default",
			files:      []string{xdgFile},
			wantConfig: xdgFile,
		},
		{
			name:       "embedded default",
			wantConfig: embedded,
		},
		{
			name:       "XDG_CONFIG_HOME unset: ~/.config",
			files:      []string{homeFile, xdgFile},
			env:        map[string]string{"XDG_CONFIG_HOME": ""},
			wantConfig: homeFile,
		},
		{
			// The XDG base directory spec: a relative path is invalid
			// and is ignored.
			name:       "XDG_CONFIG_HOME relative: ~/.config",
			files:      []string{homeFile, xdgFile},
			env:        map[string]string{"XDG_CONFIG_HOME": "xdg/config"},
			chdir:      "$TMP",
			wantConfig: homeFile,
		},
		{
			name:       "empty AGENT_LAUNCHER_CONFIG counts as unset",
			files:      []string{xdgFile},
			env:        map[string]string{"AGENT_LAUNCHER_CONFIG": "(empty)"},
			wantConfig: xdgFile,
		},
		{
			name:       "relative flag is resolved against the current directory",
			files:      []string{"$TMP/home/project/local.toml", xdgFile},
			flag:       "local.toml",
			wantConfig: "$TMP/home/project/local.toml",
		},
		{
			name:       "relative AGENT_LAUNCHER_CONFIG is resolved against the current directory",
			files:      []string{"$TMP/home/project/local.toml", xdgFile},
			env:        map[string]string{"AGENT_LAUNCHER_CONFIG": "local.toml"},
			wantConfig: "$TMP/home/project/local.toml",
		},
		{
			name:       "missing flag file is an error",
			files:      []string{envFile, xdgFile},
			flag:       missing,
			env:        map[string]string{"AGENT_LAUNCHER_CONFIG": envFile},
			wantConfig: missing,
			wantCode:   125,
			wantError:  "cannot read the policy file: no such file or directory",
		},
		{
			name:       "missing AGENT_LAUNCHER_CONFIG file is an error",
			files:      []string{xdgFile},
			env:        map[string]string{"AGENT_LAUNCHER_CONFIG": missing},
			wantConfig: missing,
			wantCode:   125,
			wantError:  "cannot read the policy file: no such file or directory",
		},
		{
			name:       "XDG config that is a directory is an error",
			dirs:       []string{xdgFile},
			wantConfig: xdgFile,
			wantCode:   125,
			wantError:  "cannot read the policy file: is a directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newProjectSandbox(t)
			expand := func(s string) string {
				if s == "(empty)" {
					return ""
				}
				if rest, ok := strings.CutPrefix(s, "$TMP"); ok {
					return sb.tmp + rest
				}
				return s
			}
			for _, f := range tt.files {
				writeFile(t, expand(f), "# "+f+"\n[file_policy]\ndefault = \"read\"\n")
			}
			for _, d := range tt.dirs {
				if err := os.MkdirAll(expand(d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for k, v := range tt.env {
				if v == "" {
					unsetenv(t, k)
				} else {
					t.Setenv(k, expand(v))
				}
			}
			if tt.chdir != "" {
				t.Chdir(expand(tt.chdir))
			}
			args := []string{"check", "--json", "--workspace", sb.ws}
			if tt.flag != "" {
				args = append(args, "--config", expand(tt.flag))
			}
			r := run(args...)
			if r.code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			var out struct {
				Schema int    `json:"schema"`
				OK     bool   `json:"ok"`
				Config string `json:"config"`
				Errors []struct {
					File    string `json:"file"`
					Line    int    `json:"line"`
					Key     string `json:"key"`
					Message string `json:"message"`
				} `json:"errors"`
			}
			if err := json.Unmarshal([]byte(sb.normalize(t, r.stdout)), &out); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
			}
			if out.Config != tt.wantConfig {
				t.Errorf("config = %q, want %q", out.Config, tt.wantConfig)
			}
			if out.OK != (tt.wantCode == 0) {
				t.Errorf("ok = %v, want %v", out.OK, tt.wantCode == 0)
			}
			if tt.wantCode == 0 {
				if len(out.Errors) != 0 || r.stderr != "" {
					t.Errorf("errors = %+v, stderr = %q, want none", out.Errors, r.stderr)
				}
				return
			}
			type jerr = struct {
				File    string `json:"file"`
				Line    int    `json:"line"`
				Key     string `json:"key"`
				Message string `json:"message"`
			}
			wantErrors := []jerr{{File: tt.wantConfig, Message: tt.wantError}}
			gotErrors := make([]jerr, len(out.Errors))
			for i, e := range out.Errors {
				gotErrors[i] = jerr(e)
			}
			if !reflect.DeepEqual(gotErrors, wantErrors) {
				t.Errorf("errors = %+v, want %+v", gotErrors, wantErrors)
			}
			wantStderr := "agent-launcher: " + tt.wantConfig + ": " + tt.wantError + "\n"
			if got := sb.normalize(t, r.stderr); got != wantStderr {
				t.Errorf("stderr = %q, want %q", got, wantStderr)
			}
		})
	}
}

// TestConfigLookupDecides checks that the policy the lookup finds is the one
// explain decides with, not only the one check names: each candidate file
// gives the path a different tier.
func TestConfigLookupDecides(t *testing.T) {
	// Not under the temporary directory: the embedded default lets the
	// agent write /tmp.
	const path = "/srv/agent-launcher-test/data/x"
	policy := func(key string) string {
		return "[file_policy]\n" + key + " = [\"/srv/agent-launcher-test/data/**\"]\n"
	}
	tests := []struct {
		name     string
		flag     bool
		env      bool
		xdg      bool
		wantTier string
	}{
		{"flag", true, true, true, "write"},
		{"environment", false, true, true, "prompt"},
		{"XDG", false, false, true, "read"},
		{"embedded default", false, false, false, "deny"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newProjectSandbox(t)
			args := []string{"explain", "--json"}
			if tt.flag {
				args = append(args, "--config", writeFile(t, filepath.Join(sb.tmp, "flag.toml"), policy("write_paths")))
			}
			if tt.env {
				t.Setenv("AGENT_LAUNCHER_CONFIG", writeFile(t, filepath.Join(sb.tmp, "env.toml"), policy("prompt_paths")))
			}
			if tt.xdg {
				writeFile(t, filepath.Join(sb.cfg, "agent-launcher", "config.toml"), policy("read_paths"))
			}
			r := run(append(args, path)...)
			var got struct {
				Tier string `json:"tier"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("stdout is not one JSON object: %v\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
			}
			if got.Tier != tt.wantTier {
				t.Errorf("tier of %s = %q, want %q", path, got.Tier, tt.wantTier)
			}
		})
	}
}
