package rules

import "fmt"

// Tier is the access level a policy gives a path. Tiers are ordered from the
// most restrictive (Deny) to the least (Write); the zero value is Deny, so a
// Tier that was never set denies.
type Tier uint8

const (
	// Deny: no access of any kind.
	Deny Tier = iota
	// Prompt: every access (read, write, create, delete, exec, metadata)
	// waits for a person's approval.
	Prompt
	// PromptWrite: reads and exec are free; every write, create, delete,
	// rename or metadata change waits for approval.
	PromptWrite
	// Read: read files, list directories, execute.
	Read
	// Write: Read plus write, truncate, create, delete, rename and
	// metadata changes.
	Write
)

// NumTiers is the number of tiers; Tier values are below it.
const NumTiers = 5

var tierNames = [NumTiers]string{"deny", "prompt", "prompt-write", "read", "write"}

// String returns the tier's name as written in a policy file.
func (t Tier) String() string {
	if int(t) < len(tierNames) {
		return tierNames[t]
	}
	return fmt.Sprintf("Tier(%d)", uint8(t))
}

// MoreRestrictive reports whether t is strictly more restrictive than u.
func (t Tier) MoreRestrictive(u Tier) bool { return t < u }

// ParseTier returns the tier named s ("deny", "prompt", "prompt-write",
// "read" or "write").
func ParseTier(s string) (Tier, bool) {
	for i, n := range tierNames {
		if n == s {
			return Tier(i), true
		}
	}
	return Deny, false
}

// MarshalText implements encoding.TextMarshaler.
func (t Tier) MarshalText() ([]byte, error) {
	if int(t) >= len(tierNames) {
		return nil, fmt.Errorf("rules: invalid tier %d", uint8(t))
	}
	return []byte(tierNames[t]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseTier.
func (t *Tier) UnmarshalText(b []byte) error {
	v, ok := ParseTier(string(b))
	if !ok {
		return fmt.Errorf("%q is not a tier", b)
	}
	*t = v
	return nil
}

// Precedence selects how overlapping rules are ordered. Whatever the mode,
// deny_paths and the built-in denylist win over every other rule.
type Precedence uint8

const (
	// Specific: the most specific matching rule wins: more literal leading
	// segments, then a pattern without "**", then the longer pattern; a tie
	// goes to the more restrictive tier.
	Specific Precedence = iota
	// Restrictive: the most restrictive matching tier wins
	// (deny > prompt > prompt-write > read > write).
	Restrictive
)

// String returns the mode's name as written in a policy file.
func (p Precedence) String() string {
	switch p {
	case Specific:
		return "specific"
	case Restrictive:
		return "restrictive"
	}
	return fmt.Sprintf("Precedence(%d)", uint8(p))
}

// MarshalText implements encoding.TextMarshaler.
func (p Precedence) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func parsePrecedence(s string) (Precedence, bool) {
	switch s {
	case "specific":
		return Specific, true
	case "restrictive":
		return Restrictive, true
	}
	return Specific, false
}
