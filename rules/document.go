package rules

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// The TOML schema. Pointers tell an omitted field (inherit) from a set one
// (replace); go-toml decodes in strict mode, so an unknown key is an error.

type fileDoc struct {
	FilePolicy *filePolicyDoc       `toml:"file_policy"`
	Env        *envDoc              `toml:"env"`
	Prompt     *promptDoc           `toml:"prompt"`
	Agents     map[string]*agentDoc `toml:"agents"`
}

type agentDoc struct {
	FilePolicy *filePolicyDoc `toml:"file_policy"`
	Env        *envDoc        `toml:"env"`
	Prompt     *promptDoc     `toml:"prompt"`
}

type filePolicyDoc struct {
	Default           *string   `toml:"default"`
	Precedence        *string   `toml:"precedence"`
	Presets           *[]string `toml:"presets"`
	DenyPaths         *[]string `toml:"deny_paths"`
	PromptPaths       *[]string `toml:"prompt_paths"`
	PromptWritePaths  *[]string `toml:"prompt_write_paths"`
	ReadPaths         *[]string `toml:"read_paths"`
	WritePaths        *[]string `toml:"write_paths"`
	ExecPaths         *[]string `toml:"exec_paths"`
	ConnectPaths      *[]string `toml:"connect_paths"`
	BuiltinExceptions *[]string `toml:"builtin_exceptions"`
}

type envDoc struct {
	Pass *[]string `toml:"pass"`
	Drop *[]string `toml:"drop"`
}

type promptDoc struct {
	Timeout *string `toml:"timeout"`
}

// Known keys per table, for "did you mean" suggestions.
var (
	topKeys        = []string{"file_policy", "env", "prompt", "agents"}
	agentKeys      = []string{"file_policy", "env", "prompt"}
	filePolicyKeys = []string{"default", "precedence", "presets", "deny_paths", "prompt_paths", "prompt_write_paths",
		"read_paths", "write_paths", "exec_paths", "connect_paths", "builtin_exceptions"}
	envKeys    = []string{"pass", "drop"}
	promptKeys = []string{"timeout"}
)

// document is one decoded policy file with the line of every key and list
// element.
type document struct {
	name  string // file name for messages
	dir   string // directory for agents/NAME.toml, "" for the embedded policy
	tree  fileDoc
	lines map[string]int // "file_policy.deny_paths[2]" -> line
	errs  ErrorList      // unknown keys, reported with the other problems
}

// line returns the line of key, or of its closest ancestor that has one.
func (d *document) line(key string) int {
	for key != "" {
		if l, ok := d.lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

// parseDocument decodes data strictly and indexes the position of its keys.
// Unknown keys come back as errors with a usable document; any other error
// comes back with a nil document.
func parseDocument(name, dir string, data []byte) (*document, ErrorList) {
	d := &document{name: name, dir: dir, lines: map[string]int{}}
	// A UTF-8 byte order mark, which some Windows editors write: TOML
	// does not allow one, and the decoder's error names the character
	// U+00EF of its first byte, which says nothing to the operator. It
	// is no content; lines and columns stay the same without it.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&d.tree); err != nil {
		errs := decodeErrors(name, data, err)
		var strict *toml.StrictMissingError
		if !errors.As(err, &strict) {
			return nil, errs
		}
		// Unknown keys: the rest decoded, so validate it too and report
		// every problem at once.
		return d, append(errs, indexLines(name, data, d.lines)...)
	}
	if errs := indexLines(name, data, d.lines); errs != nil {
		return d, errs
	}
	return d, nil
}

var typeErrRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`cannot decode TOML ([\w ]+?) into (?:.* of type )?(\S+)`)
})

// decodeErrors turns go-toml's errors into file:line: key: sentences.
func decodeErrors(name string, data []byte, err error) ErrorList {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var out ErrorList
		for _, e := range strict.Errors {
			row, _ := e.Position()
			key := strings.Join(e.Key(), ".")
			msg := "unknown key"
			if s := Suggest(e.Key()[len(e.Key())-1], schemaKeys(e.Key()[:len(e.Key())-1])); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				msg += "; the keys here are " + strings.Join(schemaKeys(e.Key()[:len(e.Key())-1]), ", ")
			}
			out = append(out, &Error{File: name, Line: row, Key: key, Msg: msg})
		}
		return out
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		key := strings.Join(de.Key(), ".")
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if m := typeErrRe().FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("expected %s, found %s", goTypeName(m[2]), tomlTypeName(m[1]))
		} else if strings.Contains(msg, "already defined") {
			// go-toml names the key relative to its table.
			key = fullKeyAt(data, row, key)
			msg = "is set twice; keep one"
		} else if strings.Contains(msg, "array table") {
			msg = "expected a table, found an array of tables ([[...]]); write [" + key + "]"
		} else if strings.ContainsAny(msg, ".*[") && strings.Contains(msg, "struct") {
			msg = "has a value of the wrong type"
		} else {
			msg = "not valid TOML: " + msg
		}
		return ErrorList{{File: name, Line: row, Key: key, Msg: msg}}
	}
	return ErrorList{{File: name, Msg: "cannot decode: " + err.Error()}}
}

// fullKeyAt returns the dotted key (with its table) written on line row, or
// fallback.
func fullKeyAt(data []byte, row int, fallback string) string {
	ix := index("", data, map[string]int{})
	if k, ok := ix.keyAt[row]; ok {
		return k
	}
	return fallback
}

func goTypeName(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list of strings"
	}
	return "a table"
}

func tomlTypeName(t string) string {
	switch t {
	case "integer", "array", "inline table":
		return "an " + t
	case "":
		return "something else"
	}
	return "a " + t
}

// indexLines records the line of every key, table and list element, and
// returns the keys spelled with the wrong case: go-toml matches struct
// fields case-insensitively, but TOML keys are case-sensitive, and
// "[File_Policy]" beside "[file_policy]" would decode into one table, the
// later values silently replacing the earlier. It runs on documents the
// decoder accepted, so the parser cannot fail here.
func indexLines(name string, data []byte, lines map[string]int) ErrorList {
	return index(name, data, lines).errs
}

// index walks the document's expressions once, filling lines, keyAt and
// errs.
func index(name string, data []byte, lines map[string]int) *indexer {
	ix := &indexer{name: name, lines: lines, keyAt: map[int]string{}}
	ix.p.Reset(data)
	var table []string
	for ix.p.NextExpression() {
		e := ix.p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = table[:0]
			it := e.Key()
			line := 0
			for it.Next() {
				n := it.Node()
				table = append(table, string(n.Data))
				if line == 0 {
					line = ix.p.Shape(n.Raw).Start.Line
				}
				ix.checkCase(table, line)
				setLine(lines, strings.Join(table, "."), line)
				ix.keyAt[line] = strings.Join(table, ".")
			}
		case unstable.KeyValue:
			ix.keyValue(e, table)
		}
	}
	return ix
}

type indexer struct {
	p     unstable.Parser
	name  string
	lines map[string]int
	keyAt map[int]string // line -> the full key written there (the first one)
	errs  ErrorList
}

// checkCase reports the last part of key when only its case differs from
// a key of the schema.
func (ix *indexer) checkCase(key []string, line int) {
	known := schemaKeys(key[:len(key)-1])
	last := key[len(key)-1]
	if known == nil || slices.Contains(known, last) {
		return
	}
	for _, k := range known {
		if strings.EqualFold(k, last) {
			ix.errs = append(ix.errs, &Error{File: ix.name, Line: line, Key: strings.Join(key, "."),
				Msg: fmt.Sprintf("keys are case-sensitive; write %q", k)})
			return
		}
	}
}

// schemaKeys returns the keys the schema allows under prefix, or nil where
// any key is allowed (agent names) or the decoder already reports unknown
// ones.
func schemaKeys(prefix []string) []string {
	// The prefix is matched ignoring case, as the decoder does: a
	// misspelt table was reported itself, its keys are checked too.
	agents := len(prefix) > 0 && strings.EqualFold(prefix[0], "agents")
	switch {
	case len(prefix) == 0:
		return topKeys
	case len(prefix) == 2 && agents:
		return agentKeys
	case len(prefix) == 1 || len(prefix) == 3 && agents:
		switch strings.ToLower(prefix[len(prefix)-1]) {
		case "file_policy":
			return filePolicyKeys
		case "env":
			return envKeys
		case "prompt":
			return promptKeys
		}
	}
	return nil
}

func (ix *indexer) keyValue(e *unstable.Node, prefix []string) {
	key := append([]string(nil), prefix...)
	it := e.Key()
	line := 0
	for it.Next() {
		n := it.Node()
		key = append(key, string(n.Data))
		if line == 0 {
			line = ix.p.Shape(n.Raw).Start.Line
		}
		ix.checkCase(key, line)
		setLine(ix.lines, strings.Join(key, "."), line)
	}
	if _, ok := ix.keyAt[line]; !ok {
		ix.keyAt[line] = strings.Join(key, ".")
	}
	ix.value(e.Value(), strings.Join(key, "."), key)
}

func (ix *indexer) value(v *unstable.Node, name string, key []string) {
	switch v.Kind {
	case unstable.Array:
		c := v.Children()
		for i := 0; c.Next(); i++ {
			n := c.Node()
			elem := name + "[" + strconv.Itoa(i) + "]"
			if n.Raw.Length > 0 {
				setLine(ix.lines, elem, ix.p.Shape(n.Raw).Start.Line)
			}
			ix.value(n, elem, key)
		}
	case unstable.InlineTable:
		c := v.Children()
		for c.Next() {
			ix.keyValue(c.Node(), key)
		}
	}
}

func setLine(lines map[string]int, key string, line int) {
	if _, ok := lines[key]; !ok && line > 0 {
		lines[key] = line
	}
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
