package tiers_test

import (
	"fmt"
	"io/fs"
	"log"

	"github.com/agent-launcher/agent-launcher/rules"
	"github.com/agent-launcher/agent-launcher/tiers"
)

// An agent framework checks a tool call before running it, with the same
// policy and engine that confine the agent in the kernel.
func Example() {
	policy := `
[file_policy]
default = "deny"
presets = ["system"]
write_paths = ["<workspace>/**"]
prompt_write_paths = ["<workspace>/.github/workflows/**"]
`
	pol, err := rules.Load(rules.Options{
		Config:    "/etc/agent-launcher/config.toml",
		Home:      "/home/dev",
		Workspace: "/home/dev/src/app",
		ReadFile: func(name string) ([]byte, error) { // a real caller leaves this nil
			if name == "/etc/agent-launcher/config.toml" {
				return []byte(policy), nil
			}
			return nil, fs.ErrNotExist
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	m, err := tiers.Compile(pol)
	if err != nil {
		log.Fatal(err)
	}

	// The tool calls the model asked for, with their paths already made
	// canonical (filepath.Abs, filepath.EvalSymlinks).
	calls := []struct {
		tool string
		op   tiers.Op
		path string
	}{
		{"write_file", tiers.OpWrite, "/home/dev/src/app/main.go"},
		{"write_file", tiers.OpWrite, "/home/dev/src/app/.github/workflows/ci.yml"},
		{"read_file", tiers.OpRead, "/home/dev/src/app/.env"},
		{"write_file", tiers.OpCreate, "/home/dev/src/app/.git/hooks/pre-commit"},
		{"run", tiers.OpExec, "/usr/bin/git"},
		{"read_file", tiers.OpRead, "/home/dev/.ssh/id_ed25519"},
	}
	for _, c := range calls {
		d := m.Decide(c.path, c.op)
		fmt.Printf("%-10s %-7s %-6s %s (rule %s)\n", c.tool, d.Verdict, d.Tier, c.path, d.Rule.Pattern)
	}
	// Output:
	// write_file allow   write  /home/dev/src/app/main.go (rule <workspace>/**)
	// write_file prompt  prompt-write /home/dev/src/app/.github/workflows/ci.yml (rule <workspace>/.github/workflows/**)
	// read_file  deny    deny   /home/dev/src/app/.env (rule ~/**/.env)
	// write_file deny    read   /home/dev/src/app/.git/hooks/pre-commit (rule ~/**/.git/hooks/**)
	// run        allow   read   /usr/bin/git (rule /usr/**)
	// read_file  deny    deny   /home/dev/.ssh/id_ed25519 (rule ~/.ssh/**)
}
