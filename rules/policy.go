package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Kind says what a Rule does.
type Kind uint8

const (
	// KindTier gives matching paths its Tier (deny_paths, prompt_paths,
	// prompt_write_paths, read_paths, write_paths, presets, the built-in
	// denylist).
	KindTier Kind = iota
	// KindWriteProtect caps matching paths at the read tier: a path the
	// policy makes writable becomes read-only (the built-in write
	// protection). Prompt tiers are left as they are.
	KindWriteProtect
	// KindExec allows execve of matching paths (exec_paths). When a policy
	// has any exec rule, nothing else may be executed.
	KindExec
	// KindException lifts the built-in lists at exactly one path
	// (builtin_exceptions, global file only).
	KindException
)

func (k Kind) String() string {
	switch k {
	case KindTier:
		return "tier"
	case KindWriteProtect:
		return "write-protect"
	case KindExec:
		return "exec"
	case KindException:
		return "exception"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Origin says which layer a rule came from.
type Origin uint8

const (
	// OriginBuiltin: the built-in denylist or write protection.
	OriginBuiltin Origin = iota
	// OriginPreset: a named preset the policy asked for.
	OriginPreset
	// OriginGlobal: the global policy file (or the embedded default policy).
	OriginGlobal
	// OriginAgent: the agent's overlay.
	OriginAgent
)

func (o Origin) String() string {
	switch o {
	case OriginBuiltin:
		return "built-in"
	case OriginPreset:
		return "preset"
	case OriginGlobal:
		return "global"
	case OriginAgent:
		return "agent"
	}
	return fmt.Sprintf("Origin(%d)", uint8(o))
}

// MarshalText implements encoding.TextMarshaler.
func (o Origin) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Source says where a rule or setting was written.
type Source struct {
	Origin Origin `json:"origin"`
	// File is the policy file, EmbeddedName for the embedded default
	// policy, or "" for built-in rules and defaults.
	File string `json:"file,omitempty"`
	// Line is 1-based, or 0 when unknown (built-ins, defaults).
	Line int `json:"line,omitempty"`
	// Key is the TOML key, with the element index for list entries
	// ("file_policy.write_paths[0]"), or the built-in list's name.
	Key string `json:"key"`
}

// String returns "file:line: key", or the built-in list's name.
func (s Source) String() string {
	switch {
	case s.File == "":
		return s.Key
	case s.Line > 0:
		return fmt.Sprintf("%s:%d: %s", s.File, s.Line, s.Key)
	}
	return fmt.Sprintf("%s: %s", s.File, s.Key)
}

// Rule is one pattern of a compiled policy.
type Rule struct {
	// Pattern is the pattern as written ("~/.ssh/**", "<workspace>/**").
	Pattern string `json:"pattern"`
	// Expanded is Pattern after expansion of "~", "<workspace>", ${VAR}
	// and a trailing "/"; Globs are its brace alternatives.
	Expanded string `json:"expanded"`
	Globs    []Glob `json:"-"`
	Kind     Kind   `json:"kind"`
	// Tier is the tier a KindTier rule gives; Read for write protection.
	Tier Tier `json:"tier"`
	// Note says why a built-in or preset rule exists.
	Note   string `json:"note,omitempty"`
	Source Source `json:"source"`
}

// MarshalJSON leaves out the tier of rules that have none (exec_paths,
// builtin_exceptions).
func (r *Rule) MarshalJSON() ([]byte, error) {
	type plain Rule
	var v any = (*plain)(r)
	if r.Kind != KindTier && r.Kind != KindWriteProtect {
		v = struct {
			*plain
			Tier *Tier `json:"tier,omitempty"`
		}{plain: (*plain)(r)}
	}
	// Patterns hold "<workspace>": keep it readable.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Exceptable reports whether builtin_exceptions may lift r: the built-in
// denylist and write protection, but not the launcher's own files.
func (r *Rule) Exceptable() bool {
	return r.Source.Origin == OriginBuiltin && r.Source.Key != layerLauncher
}

// SystemSecret reports whether r is one of the built-in denylist's
// system secrets (/etc/shadow, /etc/sudoers, the SSH host keys, ...):
// files the system itself keeps from every user but root, at absolute
// paths. The floor leaves one to the file permissions where they already
// refuse the agent (landlock.FloorPolicy).
func (r *Rule) SystemSecret() bool {
	if r.Source.Origin != OriginBuiltin || r.Source.Key != layerDenylist || r.Kind != KindTier || r.Tier != Deny {
		return false
	}
	for _, e := range systemSecrets {
		if r.Pattern == e.pattern {
			return true
		}
	}
	return false
}

// Connect is one connect_paths entry.
type Connect struct {
	// Value is an absolute socket path, or an abstract name starting with "@".
	Value    string `json:"value"`
	Abstract bool   `json:"abstract"`
	Source   Source `json:"source"`
}

// Warning is a problem that does not stop the policy from loading.
type Warning struct {
	Source Source `json:"source"`
	Msg    string `json:"message"`
}

func (w Warning) String() string { return w.Source.String() + ": " + w.Msg }

// Policy is a loaded, validated and layered policy for one agent (or the
// global policy when Agent is ""). Its rules are fully expanded; tiers
// compiles it. A Policy is not modified after Load returns and is safe for
// concurrent reads.
type Policy struct {
	Agent     string   `json:"agent,omitempty"`
	Files     []string `json:"files"`
	Home      string   `json:"home"`
	Workspace string   `json:"workspace,omitempty"`

	Default       Tier   `json:"default"`
	DefaultSource Source `json:"default_source"`
	// GlobalDefault is the default of the global file alone, before the
	// overlay; where it asks, an overlay's grant does not win (package tiers).
	GlobalDefault       Tier       `json:"global_default"`
	GlobalDefaultSource Source     `json:"global_default_source"`
	Precedence          Precedence `json:"precedence"`
	PrecedenceSource    Source     `json:"precedence_source"`
	Presets             []string   `json:"presets"`

	// Rules holds every rule of every kind: built-ins first, then presets,
	// then the global file, then the overlay, each in file order.
	Rules []*Rule `json:"rules"`

	Connect []Connect `json:"connect_paths"`
	Env     EnvPolicy `json:"env"`

	PromptTimeout       time.Duration `json:"prompt_timeout_ns"`
	PromptTimeoutSource Source        `json:"prompt_timeout_source"`

	Warnings []Warning `json:"warnings"`
}

// ExecRestricted reports whether the policy has exec_paths, so that only
// paths they match may be executed.
func (p *Policy) ExecRestricted() bool {
	for _, r := range p.Rules {
		if r.Kind == KindExec {
			return true
		}
	}
	return false
}

// Protects reports whether r protects what it matches beyond a plain read
// grant: a write protection, or a deny, prompt or prompt-write tier rule.
func (r *Rule) Protects() bool {
	return r.Kind == KindWriteProtect || r.Kind == KindTier && r.Tier <= PromptWrite
}

// AddDerived adds to p a rule that gives the paths pattern (an expanded
// glob) the protection r gives, because they are what r's paths lead to
// through symlinks: the kernel follows symlinks and decides on the target,
// so without it a protected name such as ~/.bashrc that is a symlink into a
// write tree would be writable. via names the symlink for the rule's
// Source. It refuses a rule that does not protect (Protects).
//
// tier replaces r's tier for a tier rule (the caller picks one that
// grants the target no more than either the name or the target had);
// it is ignored for a write protection.
func (p *Policy) AddDerived(r *Rule, tier Tier, pattern, via string) (*Rule, error) {
	if !r.Protects() {
		return nil, fmt.Errorf("rules: %s does not protect %s", r.Pattern, via)
	}
	if r.Kind == KindTier && tier > r.Tier {
		return nil, fmt.Errorf("rules: a derived rule cannot grant more than %s", r.Pattern)
	}
	globs, err := ParsePattern(pattern)
	if err != nil {
		return nil, fmt.Errorf("rules: protecting %s, where %s leads: %w", pattern, via, err)
	}
	src := r.Source
	src.Key = fmt.Sprintf("%s, through the symlink %s", src.Key, via)
	if r.Kind != KindTier {
		tier = r.Tier
	}
	d := &Rule{Pattern: pattern, Expanded: pattern, Globs: globs, Kind: r.Kind, Tier: tier, Note: r.Note, Source: src}
	p.Rules = append(p.Rules, d)
	return d, nil
}

// AddReferenced adds to p a write protection of the paths pattern (an
// expanded glob) names, because a file r protects sends programs there: a
// git configuration's include.path or core.hooksPath. how says which
// reference ("included from ~/.gitconfig"), for the rule's Source; r is
// the rule that keeps the agent from writing that file; note says what the
// programs do there. The rule added only ever protects.
func (p *Policy) AddReferenced(r *Rule, pattern, how, note string) (*Rule, error) {
	globs, err := ParsePattern(pattern)
	if err != nil {
		return nil, fmt.Errorf("rules: protecting %s, %s: %w", pattern, how, err)
	}
	src := r.Source
	src.Key = fmt.Sprintf("%s, %s", src.Key, how)
	d := &Rule{Pattern: pattern, Expanded: pattern, Globs: globs, Kind: KindWriteProtect, Tier: Read, Note: note, Source: src}
	p.Rules = append(p.Rules, d)
	return d, nil
}
