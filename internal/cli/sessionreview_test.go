package cli

import (
	"slices"
	"testing"
)

func TestDiffPersistence(t *testing.T) {
	before := persistSnapshot{
		"/w/.envrc":          {Type: "file", Mode: 0o644, Size: 3, Hash: "a", Rule: "r"},
		"/w/.git/config":     {Type: "file", Mode: 0o644, Size: 9, Hash: "b", Rule: "r"},
		"/w/.git/hooks":      {Type: "dir", Mode: 0o755, Rule: "r"},
		"/w/.git/hooks/post": {Type: "file", Mode: 0o755, Size: 1, Hash: "c", Rule: "r"},
		"/w/.npmrc":          {Type: "file", Mode: 0o644, Size: 1, Hash: "d", Rule: "r"},
		"/w/root-owned":      {Type: unreadable, Rule: "permission denied"},
		"/w/was-unreadable":  {Type: unreadable, Rule: "permission denied"},
	}
	after := persistSnapshot{
		"/w/.envrc":          {Type: "file", Mode: 0o644, Size: 3, Hash: "a", Rule: "r"}, // unchanged
		"/w/.git/config":     {Type: "file", Mode: 0o644, Size: 9, Hash: "B", Rule: "r"}, // same size, new content
		"/w/.git/hooks":      {Type: "dir", Mode: 0o755, Rule: "r"},                      // unchanged
		"/w/.git/hooks/post": {Type: "file", Mode: 0o777, Size: 1, Hash: "c", Rule: "r"}, // mode
		"/w/sub/.envrc":      {Type: "file", Mode: 0o644, Size: 5, Hash: "e", Rule: "r"}, // new
		"/w/.npmrc":          {Type: "symlink", Mode: 0o777, Hash: "f", Rule: "r"},       // replaced by a link
		"/w/root-owned":      {Type: unreadable, Rule: "permission denied"},              // unreadable before too
		"/w/lib":             {Type: unreadable, Rule: "permission denied"},              // made unreadable
	}
	var got []string
	for _, c := range diffPersistence(before, after) {
		got = append(got, c.Kind+" "+c.Path)
	}
	want := []string{"modified /w/.git/config", "mode changed /w/.git/hooks/post", "modified /w/.npmrc", "unreadable /w/lib", "created /w/sub/.envrc"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	delete(after, "/w/.envrc")
	if d := diffPersistence(before, after); !slices.ContainsFunc(d, func(c reviewChange) bool { return c.Kind == "deleted" && c.Path == "/w/.envrc" }) {
		t.Errorf("a deleted path is not reported: %+v", d)
	}
}
