package tiers

import (
	"fmt"

	"github.com/agent-launcher/agent-launcher/rules"
)

// Tier is the access level of a path; see rules.Tier.
type Tier = rules.Tier

// The tiers, most restrictive first.
const (
	Deny        = rules.Deny
	Prompt      = rules.Prompt
	PromptWrite = rules.PromptWrite
	Read        = rules.Read
	Write       = rules.Write
)

// Op is an operation on a path. A rename is OpDelete at the source plus
// OpCreate at the destination (see DecideRename).
type Op uint8

const (
	OpRead     Op = iota // open for reading, list a directory
	OpWrite              // open for writing, truncate
	OpCreate             // create a file, directory, link or node
	OpDelete             // unlink, rmdir
	OpExec               // execve
	OpMetadata           // chmod, chown, utime, xattr changes
	numOps
)

var opNames = [numOps]string{"read", "write", "create", "delete", "exec", "metadata"}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// MarshalText implements encoding.TextMarshaler.
func (o Op) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// ParseOp returns the operation named s ("read", "write", "create",
// "delete", "exec", "metadata").
func ParseOp(s string) (Op, bool) {
	for i, n := range opNames {
		if n == s {
			return Op(i), true
		}
	}
	return 0, false
}

// OpNames returns the names ParseOp accepts.
func OpNames() []string { return append([]string(nil), opNames[:]...) }

// Verdict is what happens to an operation.
type Verdict uint8

const (
	// Denied: the operation fails with EACCES.
	Denied Verdict = iota
	// NeedsApproval: the operation waits for a person's approval.
	NeedsApproval
	// Allowed: the operation proceeds.
	Allowed
)

func (v Verdict) String() string {
	switch v {
	case Denied:
		return "deny"
	case NeedsApproval:
		return "prompt"
	case Allowed:
		return "allow"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// MarshalText implements encoding.TextMarshaler.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// verdicts maps a tier and an operation to a verdict.
var verdicts = [rules.NumTiers][numOps]Verdict{
	Deny:        {Denied, Denied, Denied, Denied, Denied, Denied},
	Prompt:      {NeedsApproval, NeedsApproval, NeedsApproval, NeedsApproval, NeedsApproval, NeedsApproval},
	PromptWrite: {Allowed, NeedsApproval, NeedsApproval, NeedsApproval, Allowed, NeedsApproval},
	Read:        {Allowed, Denied, Denied, Denied, Allowed, Denied},
	Write:       {Allowed, Allowed, Allowed, Allowed, Allowed, Allowed},
}

// Decision is the answer for one path and operation.
type Decision struct {
	Op      Op
	Verdict Verdict
	// Tier is the path's tier, after the built-in write protection.
	Tier Tier
	// Rule is the rule that decided. When no rule matches, it is a rule
	// standing for the policy's default tier (Kind KindTier, Pattern
	// "(default)"). Never nil; shared, do not modify.
	Rule *rules.Rule
	// Why is one sentence for people and logs.
	Why string
}

// TierVerdict returns the verdict of op on a path of tier t, before
// exec_paths and the built-in write protection.
func TierVerdict(t Tier, op Op) Verdict {
	if int(t) >= len(verdicts) || op >= numOps {
		return Denied
	}
	return verdicts[t][op]
}
