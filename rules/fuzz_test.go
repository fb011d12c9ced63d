package rules

import (
	"errors"
	"strings"
	"testing"
)

var loadCorpus = []string{
	"",
	"[file_policy]\ndefault = \"read\"\nread_paths = [\"/usr/**\", \"~/x/\"]\n",
	"[file_policy]\ndeny_path = []\n",
	"[file_policy]\nwrite_paths = [\"<workspace>/**\", \"${DATA}/**\", \"/a/{b,c}/**\"]\nbuiltin_exceptions = [\"~/.aws/config\"]\n",
	"[agents.a.file_policy]\ndeny_paths = [\"**/x\"]\n[agents.a.env]\ndrop = [\"X_*\"]\n",
	"[env]\npass = [\"A\"]\n[prompt]\ntimeout = \"1m\"\n",
	"file_policy = { read_paths = [\"/a/**\"] }\n",
	"[file_policy]\nconnect_paths = [\"@sock\", \"/run/x.sock\"]\nexec_paths = [\"/usr/bin/*\"]\n",
	"[[file_policy]]\n",
	"[file_policy]\ndefault = \"deny\"\ndefault = \"read\"\n",
	"[agents]\na = 1\n",
}

// checkLoad is the loader property: Load never panics; it either returns a
// policy whose every rule parsed, or an ErrorList of sentences that name the
// file and carry no Go internals.
func checkLoad(t *testing.T, doc, agent string) {
	files := memFS{"/cfg/config.toml": doc}
	p, err := Load(options(files, agent))
	if err != nil {
		var list ErrorList
		if !errors.As(err, &list) || len(list) == 0 {
			t.Fatalf("Load(%q) error %T is not an ErrorList: %v", doc, err, err)
		}
		for _, e := range list {
			if e.Msg == "" {
				t.Fatalf("empty message in %v", list)
			}
			// Only the summary line and an unknown --agent name belong to
			// no file.
			if e.File == "" && e.Key == "" && !strings.HasPrefix(e.Msg, "and ") && !strings.HasPrefix(e.Msg, "agent ") {
				t.Fatalf("error without file or key: %q", e)
			}
			for _, bad := range []string{"panic", "goroutine", "rules.", "[]string", "*string", "reflect"} {
				if strings.Contains(e.Msg, bad) {
					t.Fatalf("error leaks %q: %q", bad, e)
				}
			}
		}
		return
	}
	for _, r := range p.Rules {
		if len(r.Globs) == 0 {
			t.Fatalf("rule %q has no globs", r.Pattern)
		}
		if r.Kind == KindTier && r.Source.Origin >= OriginGlobal && r.Source.Line == 0 && r.Source.File != "" {
			// Every rule from a file knows its line, unless the file spells
			// the key in a way the position index cannot see.
			if !strings.Contains(doc, "{") {
				t.Fatalf("rule %q from %s has no line", r.Pattern, r.Source)
			}
		}
	}
}

func TestLoadCorpus(t *testing.T) {
	for _, doc := range loadCorpus {
		checkLoad(t, doc, "")
		checkLoad(t, doc, "a")
	}
}

func FuzzLoad(f *testing.F) {
	for _, doc := range loadCorpus {
		f.Add(doc, "")
		f.Add(doc, "a")
	}
	f.Fuzz(func(t *testing.T, doc, agent string) {
		if len(doc) > 4096 {
			return
		}
		checkLoad(t, doc, agent)
	})
}
