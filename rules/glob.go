package rules

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// The glob syntax is the subset of github.com/bmatcuk/doublestar/v4's Match
// syntax on which doublestar behaves as a regular language over path
// segments; tiers compiles it into one automaton and a differential fuzz
// target proves the two agree. Accepted:
//
//	/            separator; a pattern is absolute or starts with "**/"
//	*            any run of characters within one segment
//	**           a whole segment: zero or more segments ("/a/**/b", "**/x", "/a/**")
//	?            one character (a UTF-8 rune) other than '/'
//	[abc] [a-z]  one rune from the class
//	{a,b}        alternatives (nestable; an alternative may contain '/')
//	\c           the rune c literally
//
// Refused, because doublestar gives them surprising meanings: "**" inside a
// segment (doublestar treats "a**" as "a*"), negated classes "[!x]" and "[^x]"
// (they match '/'), classes that contain '/', escaped separators "\/",
// consecutive "**" segments, empty segments, "." and ".." segments, reversed
// ranges, and a trailing '/' (the policy layer rewrites "dir/" to "dir/**"
// before parsing).

// maxAlternatives bounds the brace expansion of one pattern.
const maxAlternatives = 1024

// TokenKind is the kind of one element of a parsed glob.
type TokenKind uint8

const (
	// TokSep matches '/'.
	TokSep TokenKind = iota
	// TokLit matches the rune Token.Rune.
	TokLit
	// TokAny matches one rune other than '/' ("?").
	TokAny
	// TokStar matches any run of runes other than '/' ("*").
	TokStar
	// TokClass matches one rune within Token.Ranges ("[...]").
	TokClass
	// TokDirs matches nothing or any string that ends in '/': a leading
	// "**/" or the "**/" of a middle "/**/".
	TokDirs
	// TokTail matches nothing or '/' followed by anything: a trailing "/**".
	TokTail
)

// RuneRange is an inclusive range of runes.
type RuneRange struct{ Lo, Hi rune }

// Token is one element of a parsed glob.
type Token struct {
	Kind   TokenKind
	Rune   rune        // TokLit
	Ranges []RuneRange // TokClass
}

// Glob is one brace-free alternative of a pattern, parsed. Its zero value is
// not useful; Globs come from ParsePattern.
type Glob struct {
	// Text is the alternative as doublestar would match it.
	Text string
	// Tokens is the parsed form, Text's alone: digests of a policy
	// (internal/wire, the launcher's plan key) leave it out.
	Tokens []Token `wire:"-"`
	// Anywhere is set when the glob starts with "**/".
	Anywhere bool
	// LiteralSegments is the number of leading segments without any
	// wildcard, the first key of "specific" precedence.
	LiteralSegments int
	// DoubleStar is set when the glob contains a "**" segment.
	DoubleStar bool
}

// GlobError describes a malformed pattern. Offset is a byte offset into
// Pattern, or -1.
type GlobError struct {
	Pattern string
	Offset  int
	Msg     string
}

func (e *GlobError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("%q %s (at byte %d)", e.Pattern, e.Msg, e.Offset)
	}
	return fmt.Sprintf("%q %s", e.Pattern, e.Msg)
}

// ErrBadPattern is wrapped by every *GlobError (errors.Is(err, ErrBadPattern)).
var ErrBadPattern = errors.New("bad pattern")

// Unwrap returns ErrBadPattern.
func (e *GlobError) Unwrap() error { return ErrBadPattern }

// ParsePattern expands the braces of an expanded pattern (no "~",
// "<workspace>" or "${VAR}" left) and parses each alternative. It returns
// the alternatives in expansion order, without duplicates.
func ParsePattern(pattern string) ([]Glob, error) {
	if pattern == "" {
		return nil, &GlobError{pattern, -1, "is empty"}
	}
	if !utf8.ValidString(pattern) {
		return nil, &GlobError{pattern, -1, "is not valid UTF-8"}
	}
	if strings.ContainsRune(pattern, 0) {
		return nil, &GlobError{pattern, -1, "contains a NUL byte"}
	}
	if err := checkBraces(pattern); err != nil {
		return nil, err
	}
	alts, err := expandBraces(pattern, nil)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(alts))
	globs := make([]Glob, 0, len(alts))
	for _, a := range alts {
		if seen[a] {
			continue
		}
		seen[a] = true
		g, err := parseGlob(a)
		if err != nil {
			if a != pattern {
				err.Msg = fmt.Sprintf("%s (in the alternative %q)", err.Msg, a)
				err.Offset = -1
			}
			err.Pattern = pattern
			return nil, err
		}
		globs = append(globs, g)
	}
	return globs, nil
}

// EscapeLiteral escapes the glob metacharacters of s so that the result
// matches s literally. Separators are not escaped.
func EscapeLiteral(s string) string {
	if !strings.ContainsAny(s, `*?[]{}\,`) {
		return s
	}
	// Byte by byte: the metacharacters are ASCII, and every other byte,
	// valid UTF-8 or not, is copied as it is.
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '{', '}', '\\', ',':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// HasMeta reports whether pattern contains an unescaped glob metacharacter.
func HasMeta(pattern string) bool {
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '*', '?', '[', '{':
			return true
		}
	}
	return false
}

// literalSegment returns seg unescaped when it has no unescaped
// metacharacter, else false.
func literalSegment(seg string) (string, bool) {
	if HasMeta(seg) {
		return "", false
	}
	if !strings.Contains(seg, `\`) {
		return seg, true
	}
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		if seg[i] == '\\' && i+1 < len(seg) {
			i++
		}
		b.WriteByte(seg[i])
	}
	return b.String(), true
}

// classEnd returns the index of the ']' closing the class that opens at
// s[i] == '[', skipping escapes, or -1. This is the extent doublestar's
// brace scanner gives a class.
func classEnd(s string, i int) int {
	for i++; i < len(s); i++ {
		if s[i] == '\\' {
			i++
		} else if s[i] == ']' {
			return i
		}
	}
	return -1
}

// checkBraces refuses unbalanced braces, as doublestar.ValidatePattern does.
func checkBraces(s string) *GlobError {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
			if i >= len(s) {
				return &GlobError{s, i - 1, `ends in an unfinished escape "\"`}
			}
		case '[':
			end := classEnd(s, i)
			if end < 0 {
				return &GlobError{s, i, `has a character class "[" that is never closed with "]"`}
			}
			i = end
		case '{':
			if i >= 2 && s[i-1] == '*' && s[i-2] == '*' {
				// doublestar decides what "**" means before it expands
				// the braces after it: "**{/x}" is "*" followed by "/x".
				return &GlobError{s, i - 2, `has "**" directly followed by "{", which is ambiguous; write "**/{...}"`}
			}
			depth++
		case '}':
			if depth == 0 {
				return &GlobError{s, i, `has a "}" without a matching "{"`}
			}
			depth--
		}
	}
	if depth != 0 {
		return &GlobError{s, strings.LastIndexByte(s, '{'), `has a "{" that is never closed with "}"`}
	}
	return nil
}

// expandBraces expands the first alternation and recurses, mirroring the
// order in which doublestar tries alternatives.
func expandBraces(s string, out []string) ([]string, *GlobError) {
	open := -1
	for i := 0; i < len(s) && open < 0; i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			if end := classEnd(s, i); end >= 0 {
				i = end
			}
		case '{':
			open = i
		}
	}
	if open < 0 {
		if len(out) >= maxAlternatives {
			return nil, &GlobError{s, -1, fmt.Sprintf("expands to more than %d alternatives", maxAlternatives)}
		}
		return append(out, s), nil
	}
	// Find the matching '}' and the top-level commas.
	depth := 1
	start := open + 1
	var parts []string
	closeIdx := -1
	for i := start; i < len(s) && closeIdx < 0; i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			if end := classEnd(s, i); end >= 0 {
				i = end
			}
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				parts = append(parts, s[start:i])
				closeIdx = i
			}
		case ',':
			if depth == 1 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	if closeIdx < 0 {
		return nil, &GlobError{s, open, `has a "{" that is never closed with "}"`}
	}
	prefix, suffix := s[:open], s[closeIdx+1:]
	for _, p := range parts {
		// doublestar reads "*{*x}" as two stars, not "**": it decides what
		// a star means before it expands the braces after it.
		if strings.HasSuffix(prefix, "*") && (strings.HasPrefix(p, "*") || strings.HasPrefix(p, "{")) {
			return nil, &GlobError{s, open, `has a "*" right before "{" and an alternative that starts with "*" or "{", which is ambiguous; move the star inside the braces`}
		}
		// doublestar expands an alternation only when it reaches it with
		// name runes left; at the end of the name it asks whether the
		// unexpanded rest can match nothing, and "/a/*{,x}" or "/a/{**}"
		// then answer differently from their expansions. An alternative
		// that always contributes a character other than '*' and '/' keeps
		// the two readings equal.
		if !strings.ContainsFunc(p, func(r rune) bool { return !strings.ContainsRune("*/{},", r) }) {
			if p == "" {
				return nil, &GlobError{s, open, "has an empty alternative; list it as its own pattern"}
			}
			return nil, &GlobError{s, open, fmt.Sprintf("has an alternative %q with only \"*\" and \"/\"; write it as its own pattern", p)}
		}
	}
	var err *GlobError
	for _, p := range parts {
		if out, err = expandBraces(prefix+p+suffix, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseGlob parses one brace-free alternative.
func parseGlob(s string) (Glob, *GlobError) {
	// At most one token per byte, and one more ("**/" is two): one
	// allocation, where growing by appends cost most of a policy load.
	g := Glob{Text: s, Tokens: make([]Token, 0, len(s)+1)}
	bad := func(off int, format string, args ...any) (Glob, *GlobError) {
		return Glob{}, &GlobError{s, off, fmt.Sprintf(format, args...)}
	}
	if s == "**" {
		return bad(-1, `is "**" alone, which is not a path; write "/**" for every path`)
	}
	var rest string
	switch {
	case strings.HasPrefix(s, "**/"):
		g.Anywhere = true
		g.DoubleStar = true
		g.Tokens = append(g.Tokens, Token{Kind: TokDirs})
		rest = s[3:]
		if rest == "" {
			return bad(-1, `ends in "/"; write "**" segments explicitly`)
		}
	case strings.HasPrefix(s, "/"):
		rest = s[1:]
		if rest == "" {
			g.Tokens = slices.Clip(append(g.Tokens, Token{Kind: TokSep}))
			return g, nil
		}
	default:
		return bad(0, `is relative; start it with "/", "~/", "<workspace>/" or "**/"`)
	}
	base := len(s) - len(rest)
	needSep := !g.Anywhere
	literalPrefix := !g.Anywhere
	prevDouble := g.Anywhere
	for {
		// Cut one segment, refusing separators inside classes and escapes.
		end := len(rest)
		for i := 0; i < len(rest); i++ {
			c := rest[i]
			if c == '\\' {
				if i+1 < len(rest) && rest[i+1] == '/' {
					return bad(base+i, `has an escaped separator "\/"; a separator is always a separator, write "/"`)
				}
				i++
				continue
			}
			if c == '[' {
				e := classEnd(rest, i)
				if e < 0 {
					return bad(base+i, `has a character class "[" that is never closed with "]"`)
				}
				if strings.IndexByte(rest[i:e], '/') >= 0 {
					return bad(base+i, `has a character class that contains "/"; a class matches within one segment`)
				}
				i = e
				continue
			}
			if c == '/' {
				end = i
				break
			}
		}
		seg := rest[:end]
		last := end == len(rest)
		// Escaped, a dot segment is still one ("\.\." names ".."): no
		// canonical path has it.
		if lit, ok := literalSegment(seg); ok && (lit == "." || lit == "..") {
			seg = lit
		}
		switch seg {
		case "":
			if last {
				return bad(base+end, `ends in "/"; the policy layer turns "dir/" into "dir/**"`)
			}
			return bad(base+end, `has an empty segment ("//")`)
		case ".", "..":
			return bad(base, "has a %q segment; write the path without it", seg)
		case "**":
			if prevDouble {
				return bad(base, `has consecutive "**" segments; one "**" already matches any depth`)
			}
			g.DoubleStar = true
			literalPrefix = false
			if last {
				g.Tokens = append(g.Tokens, Token{Kind: TokTail})
			} else {
				if needSep {
					g.Tokens = append(g.Tokens, Token{Kind: TokSep})
				}
				g.Tokens = append(g.Tokens, Token{Kind: TokDirs})
			}
			needSep = false
			prevDouble = true
		default:
			if needSep {
				g.Tokens = append(g.Tokens, Token{Kind: TokSep})
			}
			toks, literal, err := parseSegment(s, base, seg, g.Tokens)
			if err != nil {
				return Glob{}, err
			}
			g.Tokens = toks
			if literalPrefix && literal {
				g.LiteralSegments++
			} else {
				literalPrefix = false
			}
			needSep = true
			prevDouble = false
		}
		if last {
			break
		}
		rest = rest[end+1:]
		base += end + 1
	}
	g.Tokens = slices.Clip(g.Tokens) // an append to a copy must not write into this one
	return g, nil
}

// parseSegment parses the items of one segment (no '/', not "**"),
// appending them to toks.
func parseSegment(pat string, base int, seg string, toks []Token) ([]Token, bool, *GlobError) {
	literal := true
	bad := func(off int, format string, args ...any) ([]Token, bool, *GlobError) {
		return nil, false, &GlobError{pat, base + off, fmt.Sprintf(format, args...)}
	}
	for i := 0; i < len(seg); {
		c := seg[i]
		switch c {
		case '*':
			if i+1 < len(seg) && seg[i+1] == '*' {
				return bad(i, `has "**" inside a segment; "**" must be a whole segment ("/**/"), use "*" within a segment`)
			}
			toks = append(toks, Token{Kind: TokStar})
			literal = false
			i++
		case '?':
			toks = append(toks, Token{Kind: TokAny})
			literal = false
			i++
		case '[':
			tok, n, err := parseClass(pat, base+i, seg[i:])
			if err != nil {
				return nil, false, err
			}
			toks = append(toks, tok)
			literal = false
			i += n
		case '{', '}':
			return bad(i, "has an unexpected %q", c)
		case '\\':
			r, n := utf8.DecodeRuneInString(seg[i+1:])
			if n == 0 {
				return bad(i, `ends in an unfinished escape "\"`)
			}
			toks = append(toks, Token{Kind: TokLit, Rune: r})
			i += 1 + n
		default:
			r, n := utf8.DecodeRuneInString(seg[i:])
			toks = append(toks, Token{Kind: TokLit, Rune: r})
			i += n
		}
	}
	return toks, literal, nil
}

// parseClass parses "[...]" at the start of s, mirroring doublestar's
// element grammar: a '-' between two elements forms a range, a leading or
// trailing '-' is literal, '\' escapes.
func parseClass(pat string, off int, s string) (Token, int, *GlobError) {
	bad := func(o int, format string, args ...any) (Token, int, *GlobError) {
		return Token{}, 0, &GlobError{pat, off + o, fmt.Sprintf(format, args...)}
	}
	i := 1
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		return bad(0, `has a negated class %q, which is not supported (doublestar lets it match "/"); list the characters, or use {a,b}`, s[:min(len(s), i+1)])
	}
	if i >= len(s) || s[i] == ']' {
		return bad(0, `has an empty character class "[]"`)
	}
	var ranges []RuneRange
	// As in doublestar, utf8.MaxRune stands for "no previous element".
	last := utf8.MaxRune
	for i < len(s) && s[i] != ']' {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if last < utf8.MaxRune && r == '-' && i < len(s) && s[i] != ']' {
			if s[i] == '\\' {
				i++
			}
			hi, m := utf8.DecodeRuneInString(s[i:])
			if m == 0 {
				return bad(i, "has a character class that is never closed")
			}
			i += m
			if hi < last {
				return bad(0, "has a reversed range %q-%q", last, hi)
			}
			if last <= '/' && '/' <= hi {
				return bad(0, `has a range %q-%q that contains "/"`, last, hi)
			}
			ranges = append(ranges, RuneRange{last, hi})
			last = utf8.MaxRune
			continue
		}
		if r == '\\' {
			var m int
			r, m = utf8.DecodeRuneInString(s[i:])
			if m == 0 {
				return bad(i, "has a character class that is never closed")
			}
			i += m
		}
		if r == '/' {
			return bad(0, `has a character class that contains "/"`)
		}
		ranges = append(ranges, RuneRange{r, r})
		last = r
	}
	if i >= len(s) {
		return bad(0, `has a character class "[" that is never closed with "]"`)
	}
	return Token{Kind: TokClass, Ranges: ranges}, i + 1, nil
}

// LiteralPath reports whether g names one literal path (tree false) or a
// literal directory and everything below it ("/x/**", tree true), and
// which path, unescaped.
func (g *Glob) LiteralPath() (path string, tree, ok bool) {
	prefix, rest := g.LiteralPrefix()
	switch {
	case prefix == "":
		return "", false, false
	case rest == "**":
		return prefix, true, true
	}
	return prefix, false, rest == ""
}

// LiteralPrefix splits g after its LiteralSegments leading segments: prefix
// is the path they name, unescaped ("" for a glob that starts with a
// wildcard or "**/"), rest the glob text after them, "" when g is a
// literal path ("**" for a literal directory followed by "/**").
func (g *Glob) LiteralPrefix() (prefix, rest string) {
	if !strings.HasPrefix(g.Text, "/") || g.LiteralSegments == 0 {
		return "", g.Text
	}
	var b strings.Builder
	seps := 0
	for _, t := range g.Tokens {
		if t.Kind == TokSep {
			if seps == g.LiteralSegments {
				break
			}
			seps++
			b.WriteByte('/')
			continue
		}
		if t.Kind != TokLit {
			break
		}
		b.WriteRune(t.Rune)
	}
	segs := strings.Split(g.Text, "/") // "\/" is refused: every '/' separates
	if 1+g.LiteralSegments < len(segs) {
		rest = strings.Join(segs[1+g.LiteralSegments:], "/")
	}
	return b.String(), rest
}
