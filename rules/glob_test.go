package rules

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

func TestParsePatternAccepted(t *testing.T) {
	cases := []struct {
		pattern      string
		wantAlts     []string
		wantLiteral  int
		wantDouble   bool
		wantAnywhere bool
	}{
		{"/", []string{"/"}, 0, false, false},
		{"/usr/**", []string{"/usr/**"}, 1, true, false},
		{"/home/u/.ssh/config", []string{"/home/u/.ssh/config"}, 4, false, false},
		{"**/.env", []string{"**/.env"}, 0, true, true},
		{"/a/*/c", []string{"/a/*/c"}, 1, false, false},
		{"/a/b/*.pem", []string{"/a/b/*.pem"}, 2, false, false},
		{"/a/{b,c}/d", []string{"/a/b/d", "/a/c/d"}, 3, false, false},
		{"/a/{b,{c,d}}", []string{"/a/b", "/a/c", "/a/d"}, 2, false, false},
		{"/a/{b,c/e}", []string{"/a/b", "/a/c/e"}, 2, false, false},
		{"/a/{b,b}", []string{"/a/b"}, 2, false, false}, // duplicates dropped
		{"/a/[bc]x", []string{"/a/[bc]x"}, 1, false, false},
		{"/a/[a-z0-9_]", []string{"/a/[a-z0-9_]"}, 1, false, false},
		{`/a/\*`, []string{`/a/\*`}, 2, false, false},
		{`/a/\\.`, []string{`/a/\\.`}, 2, false, false}, // a backslash and a dot: no dot segment
		{"/a/.../b", []string{"/a/.../b"}, 3, false, false},
		{"/a/**/b", []string{"/a/**/b"}, 1, true, false},
		{"/a,b/c", []string{"/a,b/c"}, 2, false, false},
		{"/é/?", []string{"/é/?"}, 1, false, false},
	}
	for _, c := range cases {
		globs, err := ParsePattern(c.pattern)
		if err != nil {
			t.Errorf("ParsePattern(%q): %v", c.pattern, err)
			continue
		}
		var alts []string
		for _, g := range globs {
			alts = append(alts, g.Text)
		}
		g := globs[0]
		if !slices.Equal(alts, c.wantAlts) || g.LiteralSegments != c.wantLiteral || g.DoubleStar != c.wantDouble || g.Anywhere != c.wantAnywhere {
			t.Errorf("ParsePattern(%q) = %q literal %d double %v anywhere %v; want %q %d %v %v", c.pattern, alts,
				g.LiteralSegments, g.DoubleStar, g.Anywhere, c.wantAlts, c.wantLiteral, c.wantDouble, c.wantAnywhere)
		}
	}
}

func TestParsePatternTokens(t *testing.T) {
	globs, err := ParsePattern("/a/**/b*/[xy]?/**")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []TokenKind
	for _, tk := range globs[0].Tokens {
		kinds = append(kinds, tk.Kind)
	}
	want := []TokenKind{TokSep, TokLit, TokSep, TokDirs, TokLit, TokStar, TokSep, TokClass, TokAny, TokTail}
	if !slices.Equal(kinds, want) {
		t.Errorf("tokens = %v, want %v", kinds, want)
	}
}

func TestParsePatternRefused(t *testing.T) {
	cases := []struct{ pattern, want string }{
		{"", `"" is empty`},
		{"a/b", `"a/b" is relative; start it with "/", "~/", "<workspace>/" or "**/" (at byte 0)`},
		{"**", `"**" is "**" alone, which is not a path; write "/**" for every path`},
		{"/a//b", `"/a//b" has an empty segment ("//") (at byte 3)`},
		{"/a/", `"/a/" ends in "/"; the policy layer turns "dir/" into "dir/**" (at byte 3)`},
		{"/a/./b", `"/a/./b" has a "." segment; write the path without it (at byte 3)`},
		// Escaped, a dot segment is still one: no canonical path has it, and
		// the literal prefix would name a path that is not canonical.
		{`/a/\./b`, `"/a/\\./b" has a "." segment; write the path without it (at byte 3)`},
		{`/a/\.\./**`, `"/a/\\.\\./**" has a ".." segment; write the path without it (at byte 3)`},
		{`/a/.\.`, `"/a/.\\." has a ".." segment; write the path without it (at byte 3)`},
		{`/a/{x,\.}/b`, `"/a/{x,\\.}/b" has a "." segment; write the path without it (in the alternative "/a/\\./b")`},
		{"/a/**/**/b", `"/a/**/**/b" has consecutive "**" segments; one "**" already matches any depth (at byte 6)`},
		{"/a**", `"/a**" has "**" inside a segment; "**" must be a whole segment ("/**/"), use "*" within a segment (at byte 2)`},
		{`/a\/b`, `"/a\\/b" has an escaped separator "\/"; a separator is always a separator, write "/" (at byte 2)`},
		{"/a/[/]", `"/a/[/]" has a character class that contains "/"; a class matches within one segment (at byte 3)`},
		{"/a/[!x]", `"/a/[!x]" has a negated class "[!", which is not supported (doublestar lets it match "/"); list the characters, or use {a,b} (at byte 3)`},
		{"/a/[^x]", `"/a/[^x]" has a negated class "[^", which is not supported (doublestar lets it match "/"); list the characters, or use {a,b} (at byte 3)`},
		{"/a/[]", `"/a/[]" has an empty character class "[]" (at byte 3)`},
		{"/a/[z-a]", `"/a/[z-a]" has a reversed range 'z'-'a' (at byte 3)`},
		{"/a/[!-0]", `"/a/[!-0]" has a negated class "[!", which is not supported (doublestar lets it match "/"); list the characters, or use {a,b} (at byte 3)`},
		{"/a/[+-0]", `"/a/[+-0]" has a range '+'-'0' that contains "/" (at byte 3)`},
		{"/a/[b", `"/a/[b" has a character class "[" that is never closed with "]" (at byte 3)`},
		{"/a/{b", `"/a/{b" has a "{" that is never closed with "}" (at byte 3)`},
		{"/a/b}", `"/a/b}" has a "}" without a matching "{" (at byte 4)`},
		{"/a/{}", `"/a/{}" has an empty alternative; list it as its own pattern (at byte 3)`},
		{"/a/{b,}", `"/a/{b,}" has an empty alternative; list it as its own pattern (at byte 3)`},
		{"/a/{**,b}/c", `"/a/{**,b}/c" has an alternative "**" with only "*" and "/"; write it as its own pattern (at byte 3)`},
		{"/a/*{*b,c}", `"/a/*{*b,c}" has a "*" right before "{" and an alternative that starts with "*" or "{", which is ambiguous; move the star inside the braces (at byte 4)`},
		{"**{/a,/b}", `"**{/a,/b}" has "**" directly followed by "{", which is ambiguous; write "**/{...}" (at byte 0)`},
		{`/a\`, `"/a\\" ends in an unfinished escape "\" (at byte 2)`},
		{"/a/{b,c//d}", `"/a/{b,c//d}" has an empty segment ("//") (in the alternative "/a/c//d")`},
		{"/a\x00", `"/a\x00" contains a NUL byte`},
		{"/a/\xff", `"/a/\xff" is not valid UTF-8`},
	}
	for _, c := range cases {
		_, err := ParsePattern(c.pattern)
		if err == nil {
			t.Errorf("ParsePattern(%q) succeeded", c.pattern)
			continue
		}
		if !errors.Is(err, ErrBadPattern) {
			t.Errorf("ParsePattern(%q): %v does not wrap ErrBadPattern", c.pattern, err)
		}
		if err.Error() != c.want {
			t.Errorf("ParsePattern(%q):\n got %s\nwant %s", c.pattern, err, c.want)
		}
	}
}

func TestEscapeLiteral(t *testing.T) {
	for _, s := range []string{"/plain/path", "/a*b?c[d]e{f}g\\h,i", "/home/o'brien/x y"} {
		e := EscapeLiteral(s)
		if HasMeta(e) {
			t.Errorf("EscapeLiteral(%q) = %q still has metacharacters", s, e)
		}
		if unescape(e) != s {
			t.Errorf("unescape(EscapeLiteral(%q)) = %q", s, unescape(e))
		}
		globs, err := ParsePattern(e)
		if err != nil || len(globs) != 1 {
			t.Errorf("ParsePattern(%q) = %v, %v", e, globs, err)
		}
	}
	if maxAlternatives != 1024 {
		t.Fatal("the limit below assumes 1024")
	}
	// 2^11 alternatives is over the limit.
	_, err := ParsePattern("/{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}")
	if err == nil {
		t.Error("expansion over the limit accepted")
	}
}

func TestLiteralPrefix(t *testing.T) {
	for _, c := range []struct{ pattern, prefix, rest string }{
		{"/home/u/.ssh/**", "/home/u/.ssh", "**"},
		{"/etc/shadow", "/etc/shadow", ""},
		{"/home/u/**/.env", "/home/u", "**/.env"},
		{"/etc/ssh/ssh_host_*_key", "/etc/ssh", "ssh_host_*_key"},
		{`/a\*b/c/*.txt`, "/a*b/c", "*.txt"},
		{"**/.env", "", "**/.env"},
		{"/*/x", "", "/*/x"},
	} {
		gs, err := ParsePattern(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if prefix, rest := gs[0].LiteralPrefix(); prefix != c.prefix || rest != c.rest {
			t.Errorf("%q: %q, %q; want %q, %q", c.pattern, prefix, rest, c.prefix, c.rest)
		}
	}
}

// TestGlobTokensFollowText: a glob's tokens are its text's parse, in every
// glob a policy holds (the built-ins and the system preset, brace
// alternatives, a derived rule), so that a digest of the policy that
// leaves the tokens out (Glob.Tokens is tagged wire:"-"; the launcher's
// plan key) still tells every two policies apart.
func TestGlobTokensFollowText(t *testing.T) {
	p := load(t, memFS{"/cfg/config.toml": `
[file_policy]
presets = ["system"]
read_paths = ["<workspace>/{a,b/[c-e]*}/**", "**/x?.txt"]
`}, "")
	if _, err := p.AddDerived(p.Rules[0], Deny, "/derived/{p,q}/**", "/from"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range p.Rules {
		for _, g := range r.Globs {
			again, err := parseGlob(g.Text)
			if err != nil {
				t.Fatalf("%q: %v", g.Text, err)
			}
			if !reflect.DeepEqual(again.Tokens, g.Tokens) {
				t.Errorf("%q (rule %q): tokens %v, its text parses to %v", g.Text, r.Pattern, g.Tokens, again.Tokens)
			}
			n++
		}
	}
	if n < 50 {
		t.Errorf("only %d globs checked", n)
	}
}
