package landlock

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// Format renders the plan for people and golden files: the handled rights,
// the canary, one line per rule, the carved directories and the protected
// entries. `agent-launcher check --landlock` prints it.
func (pl *Plan) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Landlock ABI %d\nhandled: %s\nscoped:  %s\ncanary:  %s\n", pl.ABI, pl.Handled, pl.Scoped, pl.Canary)
	fmt.Fprintf(&b, "\nrules (%d):\n", len(pl.Rules))
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range pl.Rules {
		kind := "file"
		if r.Dir {
			kind = "dir"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\n", kind, r.Path, r.Access)
	}
	w.Flush()
	if len(pl.Carved) > 0 {
		fmt.Fprintf(&b, "\ncarved directories (%d): they keep only rights that cannot reach their carve-outs; what they defer fails with EACCES until the supervisor serves it:\n", len(pl.Carved))
		for _, c := range pl.Carved {
			fmt.Fprintf(&b, "  %s\n    kept:       %s\n    deferred:   %s\n    carve-outs: %s\n", c.Path, c.Kept, c.Deferred, strings.Join(c.CarveOuts, " "))
		}
	}
	if len(pl.Protected) > 0 {
		fmt.Fprintf(&b, "\nprotected entries (%d):\n", len(pl.Protected))
		w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, p := range pl.Protected {
			fmt.Fprintf(w, "  %s\t%s\t%s\n", p.Path, p.Type, p.Tier)
		}
		w.Flush()
	}
	if len(pl.Sealed) > 0 {
		fmt.Fprintf(&b, "\nsystem secrets without a rule (%d): the file permissions alone keep the agent from them, as from every user but root:\n  %s\n", len(pl.Sealed), strings.Join(pl.Sealed, " "))
	}
	fmt.Fprintf(&b, "\nscanned %d entries for name patterns\n", pl.Scanned)
	return b.String()
}
