package rules

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a policy: where it is (file, line, key) and one
// sentence saying what is wrong and how to fix it.
type Error struct {
	File string // policy file, EmbeddedName, or "" for options such as the workspace
	Line int    // 1-based, 0 when unknown
	Key  string // TOML key, with the element index for list entries
	Msg  string
}

// Error returns "file:line: key: message".
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in a policy, in file and line order. Load
// returns one (as an error) when the policy is refused; errors.As finds it.
type ErrorList []*Error

// maxErrors bounds the problems reported for one policy.
const maxErrors = 20

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap returns the individual errors.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

func (l ErrorList) sorted() ErrorList {
	// Files in the order their first problem was found, lines in order
	// within a file.
	rank := map[string]int{}
	for _, e := range l {
		if _, ok := rank[e.File]; !ok {
			rank[e.File] = len(rank)
		}
	}
	sort.SliceStable(l, func(i, j int) bool {
		if ri, rj := rank[l[i].File], rank[l[j].File]; ri != rj {
			return ri < rj
		}
		return l[i].Line < l[j].Line
	})
	if len(l) > maxErrors {
		l = append(l[:maxErrors:maxErrors], &Error{Msg: fmt.Sprintf("and %d more problems", len(l)-maxErrors)})
	}
	return l
}

// Suggest returns the candidate closest to s by edit distance, or "" when
// none is close enough to be a likely typo.
func Suggest(s string, candidates []string) string {
	best, bestD := "", len(s)/2+2
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
