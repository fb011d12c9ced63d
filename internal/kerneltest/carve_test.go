package kerneltest

import (
	"os"
	"strings"
	"testing"
)

// carveRow is one row of a carve-out behaviour table: an operation, what
// it must give, and why. deferred marks an operation the policy allows but
// the carved parent refuses until the supervisor serves it (a later
// release): it must fail closed now, and the table says so instead of
// passing silently.
type carveRow struct {
	id       string
	args     []string
	want     string // "ok" or an errno
	alt      string // another acceptable errno
	deferred bool
	note     string
}

func runCarveTable(t *testing.T, s *sandbox, rows []carveRow) {
	t.Helper()
	for _, row := range rows {
		t.Run(row.id, func(t *testing.T) {
			r := s.agent(row.args...)
			what := strings.Join(row.args, " ")
			if row.deferred {
				t.Logf("left for the supervisor, fails closed now: %s (%s)", what, row.note)
			}
			if row.want == "ok" {
				wantOK(t, what, r)
				return
			}
			errs := []string{row.want}
			if row.alt != "" {
				errs = append(errs, row.alt)
			}
			wantErr(t, what, r, errs...)
		})
	}
}

// TestCarveOutTable reproduces kernel.md section 1.2 (recipe A, sibling
// rules) with the launcher's planner: write the workspace, prompt its
// secrets directory (a prompt is denied by the floor until approved).
func TestCarveOutTable(t *testing.T) {
	s := newSandbox(t, standard+"prompt_paths = [\"<workspace>/secrets/**\"]\n")
	ws := s.ws
	s.write("home/proj/src/a.txt", "a")
	s.write("home/proj/src/d/f.txt", "f")
	s.write("home/proj/secrets/key", envSec)
	s.write("home/proj/top.txt", "top")
	s.write("home/proj/docs/b.txt", "b")
	// Controls: each attack works without the launcher (on copies, so the
	// table runs on the original tree).
	wantOK(t, "control: read the secret bare", s.bare("read", ws+"/secrets/key"))
	wantOK(t, "control: list the secrets bare", s.bare("list", ws+"/secrets"))

	runCarveTable(t, s, []carveRow{
		{id: "01 read a sibling's file", args: []string{"read", ws + "/src/a.txt"}, want: "ok"},
		{id: "02 read the carve-out", args: []string{"read", ws + "/secrets/key"}, want: "EACCES"},
		{id: "04 create a new top-level entry", args: []string{"create", ws + "/newtop.txt"}, want: "EACCES", deferred: true, note: "new entries in a carved parent"},
		{id: "05 write a top-level file (its own rule)", args: []string{"write", ws + "/top.txt", "x"}, want: "ok"},
		{id: "06 list the carve-out", args: []string{"list", ws + "/secrets"}, want: "EACCES", note: "recipe A leaked the names; the planner keeps no read_dir on a parent of a carved directory"},
		{id: "06b list the carved parent", args: []string{"list", ws}, want: "EACCES", deferred: true, note: "listing a parent of a carved directory"},
		{id: "07 list a sibling directory", args: []string{"list", ws + "/src"}, want: "ok"},
		{id: "17 unlink in the carve-out", args: []string{"unlink", ws + "/secrets/key"}, want: "EACCES"},
		{id: "18 rename the carve-out under a granted sibling", args: []string{"rename", ws + "/secrets", ws + "/src/secrets"}, want: "EACCES"},
		{id: "19 link out of the carve-out", args: []string{"link", ws + "/secrets/key", ws + "/src/key2"}, want: "EXDEV", alt: "EACCES"},
		{id: "20 rename into the carve-out", args: []string{"rename", ws + "/src/a.txt", ws + "/secrets/a.txt"}, want: "EACCES"},
		{id: "41a rename a top-level file", args: []string{"rename", ws + "/top.txt", ws + "/top2.txt"}, want: "EACCES", deferred: true, note: "renames of top-level entries"},
		{id: "41b delete a top-level file", args: []string{"unlink", ws + "/top.txt"}, want: "EACCES", deferred: true, note: "deletes of top-level entries"},
		{id: "41c atomic save of a top-level file (temporary file)", args: []string{"write", ws + "/.top.txt.swp", "x"}, want: "EACCES", deferred: true, note: "an editor's atomic save"},
		{id: "42 rename between granted siblings", args: []string{"rename", ws + "/src/d", ws + "/docs/d"}, want: "ok"},
		{id: "43 create inside a granted sibling", args: []string{"create", ws + "/docs/new.txt"}, want: "ok"},
	})
	if b, _ := os.ReadFile(ws + "/secrets/key"); string(b) != envSec {
		t.Errorf("the carve-out changed: %q", b)
	}
}

// TestCarvedParentRights is the planner's table of rights that may stay on
// a carved parent (landlock package documentation), one row per kind of
// carve-out, each checked to not reach the carve-out's contents, also by
// rename or link.
func TestCarvedParentRights(t *testing.T) {
	t.Run("file carve-out keeps read_dir", func(t *testing.T) {
		s := newSandbox(t, standard)
		ws := s.ws
		s.write("home/proj/.env", envSec)
		s.write("home/proj/src/a.txt", "a")
		wantOK(t, "control: read .env bare", s.bare("read", ws+"/.env"))
		runCarveTable(t, s, []carveRow{
			{id: "list the parent (read_dir kept)", args: []string{"list", ws}, want: "ok"},
			{id: "read the carve-out", args: []string{"read", ws + "/.env"}, want: "EACCES"},
			{id: "write the carve-out", args: []string{"write", ws + "/.env", "x"}, want: "EACCES"},
			{id: "truncate the carve-out", args: []string{"truncate", ws + "/.env", "0"}, want: "EACCES"},
			{id: "rename it into a granted sibling", args: []string{"rename", ws + "/.env", ws + "/src/env"}, want: "EACCES"},
			{id: "link it into a granted sibling", args: []string{"link", ws + "/.env", ws + "/src/env"}, want: "EXDEV", alt: "EACCES"},
			{id: "unlink it", args: []string{"unlink", ws + "/.env"}, want: "EACCES"},
			{id: "replace it by rename from a sibling", args: []string{"rename", ws + "/src/a.txt", ws + "/.env"}, want: "EACCES"},
			{id: "O_PATH reopen", args: []string{"opath-reopen", ws + "/.env"}, want: "EACCES"},
			{id: "control: a sibling stays writable", args: []string{"write", ws + "/src/a.txt", "b"}, want: "ok"},
		})
	})
	t.Run("read-only carve-out keeps read_file", func(t *testing.T) {
		s := newSandbox(t, standard+"read_paths = [\"<workspace>/ro.txt\"]\n")
		ws := s.ws
		s.write("home/proj/ro.txt", "read-only")
		s.write("home/proj/src/a.txt", "a")
		wantOK(t, "control: write ro.txt bare", s.bare("write", ws+"/ro.txt", "read-only"))
		runCarveTable(t, s, []carveRow{
			{id: "read it", args: []string{"read", ws + "/ro.txt"}, want: "ok"},
			{id: "write it", args: []string{"write", ws + "/ro.txt", "x"}, want: "EACCES"},
			{id: "O_TRUNC it", args: []string{"open-trunc", ws + "/ro.txt"}, want: "EACCES"},
			{id: "truncate it", args: []string{"truncate", ws + "/ro.txt", "0"}, want: "EACCES"},
			{id: "rename it into a writable sibling", args: []string{"rename", ws + "/ro.txt", ws + "/src/ro.txt"}, want: "EACCES"},
			{id: "link it into a writable sibling", args: []string{"link", ws + "/ro.txt", ws + "/src/ro.txt"}, want: "EXDEV", alt: "EACCES"},
			{id: "control: a sibling stays writable", args: []string{"write", ws + "/src/a.txt", "b"}, want: "ok"},
		})
		if b, _ := os.ReadFile(ws + "/ro.txt"); string(b) != "read-only" {
			t.Errorf("the read-only file changed: %q", b)
		}
	})
	t.Run("directory carve-out keeps nothing", func(t *testing.T) {
		s := newSandbox(t, standard+"deny_paths = [\"<workspace>/private/**\"]\n")
		ws := s.ws
		s.write("home/proj/private/k", envSec)
		s.write("home/proj/src/a.txt", "a")
		runCarveTable(t, s, []carveRow{
			{id: "list the carve-out", args: []string{"list", ws + "/private"}, want: "EACCES"},
			{id: "read in the carve-out", args: []string{"read", ws + "/private/k"}, want: "EACCES"},
			{id: "create in the carve-out", args: []string{"create", ws + "/private/new"}, want: "EACCES"},
			{id: "rename the carve-out away", args: []string{"rename", ws + "/private", ws + "/src/private"}, want: "EACCES"},
			{id: "link out of the carve-out", args: []string{"link", ws + "/private/k", ws + "/src/k"}, want: "EXDEV", alt: "EACCES"},
			{id: "list the parent", args: []string{"list", ws}, want: "EACCES", deferred: true, note: "read_dir on the parent would list the carve-out"},
			{id: "control: a sibling stays writable", args: []string{"write", ws + "/src/a.txt", "b"}, want: "ok"},
		})
	})
}

// TestNestedCarveOut: carve-outs deeper in a granted tree than its top
// directory (a denied file and a read-only directory two levels down):
// the directories between them and the workspace get no rule that reaches
// them, while their siblings stay usable.
func TestNestedCarveOut(t *testing.T) {
	s := newSandbox(t, standard+"deny_paths = [\"<workspace>/app/conf/secret.txt\"]\nread_paths = [\"<workspace>/app/vendor/**\"]\n")
	secret := s.write("home/proj/app/conf/secret.txt", sshKey)
	s.write("home/proj/app/conf/settings.ini", "a=1")
	s.write("home/proj/app/vendor/lib.go", "package lib")
	s.write("home/proj/app/main.go", "package main")
	wantOK(t, "control: bare reads the nested secret", s.bare("read", secret))
	wantErr(t, "read the nested denied file", s.agent("read", secret), "EACCES")
	wantErr(t, "write the nested denied file", s.agent("write", secret, "x"), "EACCES")
	wantErr(t, "write into the nested read-only directory", s.agent("write", s.ws+"/app/vendor/lib.go", "x"), "EACCES")
	wantErr(t, "create in the nested read-only directory", s.agent("create", s.ws+"/app/vendor/new.go"), "EACCES")
	wantOK(t, "control: write the denied file's sibling", s.agent("write", s.ws+"/app/conf/settings.ini", "a=2"))
	wantOK(t, "control: read the read-only directory", s.agent("read", s.ws+"/app/vendor/lib.go"))
	wantOK(t, "control: write an existing file beside them", s.agent("write", s.ws+"/app/main.go", "package main // edited"))
	wantFile(t, secret, sshKey)
}
