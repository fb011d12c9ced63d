package landlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The apply tests restrict a re-executed copy of the test binary, never
// the test process (STYLE.md 4). childEnv carries the child's job.
const childEnv = "LANDLOCK_TEST_CHILD"

type childJob struct {
	Plan    Plan     `json:"plan"`
	Access  []uint64 `json:"access"`
	Handled Access
	Scoped  Scope
	Ops     [][]string
}

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(child(v))
	}
	os.Exit(m.Run())
}

// child applies the plan and runs each op, printing one result per line.
func child(spec string) int {
	var job childJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Println("bad job:", err)
		return 2
	}
	for i := range job.Plan.Rules {
		job.Plan.Rules[i].Access = Access(job.Access[i])
	}
	job.Plan.Handled, job.Plan.Scoped = job.Handled, job.Scoped
	if err := Apply(&job.Plan); err != nil {
		fmt.Println("apply:", err)
		return 3
	}
	for _, op := range job.Ops {
		fmt.Println(doOp(op))
	}
	return 0
}

func errName(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func doOp(op []string) string {
	var err error
	switch op[0] {
	case "read":
		_, err = os.ReadFile(op[1])
	case "write":
		err = os.WriteFile(op[1], []byte("x"), 0o644)
	case "truncate":
		err = unix.Truncate(op[1], 0)
	case "rename":
		err = unix.Rename(op[1], op[2])
	case "link":
		err = unix.Link(op[1], op[2])
	case "wait":
		// Poll (stat is not Landlock's business) until the test process
		// has made op[1].
		for i := 0; i < 1000; i++ {
			if _, err = os.Stat(op[1]); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	case "kill-parent":
		err = unix.Kill(os.Getppid(), 0)
	case "abstract":
		var fd int
		fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			err = unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + op[1]})
			unix.Close(fd)
		}
	}
	if err != nil {
		return errName(err)
	}
	return "ok"
}

// runChild applies pl in a child and runs ops there.
func runChild(t *testing.T, pl *Plan, ops ...[]string) []string {
	t.Helper()
	job := childJob{Plan: *pl, Ops: ops, Handled: pl.Handled, Scoped: pl.Scoped}
	for _, r := range pl.Rules {
		job.Access = append(job.Access, uint64(r.Access))
	}
	spec, _ := json.Marshal(job)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func expectedABI(t *testing.T) Kernel {
	t.Helper()
	k, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	if want := os.Getenv("AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI"); want != "" {
		if n, _ := strconv.Atoi(want); n != k.ABI {
			t.Fatalf("AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI=%s, kernel has ABI %d (%s)", want, k.ABI, k.Reason)
		}
	} else if k.ABI < 1 {
		t.Skip("no Landlock: " + k.Reason)
	}
	return k
}

// TestApplyPerABI applies the planner's plan for every ABI up to the
// kernel's, handling only that ABI's rights (how older kernels are
// simulated here), and checks what each ABI can and cannot enforce.
func TestApplyPerABI(t *testing.T) {
	k := expectedABI(t)
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	ws := filepath.Join(dir, "ws")
	for _, f := range []string{"a/f", "b/g", "ro/r"} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(ws, f), []byte("data"), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "secret"), []byte("s"), 0o644)
	m := compile(t, fmt.Sprintf("[file_policy]\ndefault = \"deny\"\npresets = [\"system\"]\nwrite_paths = [%q]\nread_paths = [%q]\n", ws+"/**", ws+"/ro/**"))
	for abi := 1; abi <= k.ABI; abi++ {
		t.Run(fmt.Sprintf("ABI%d", abi), func(t *testing.T) {
			pl, err := NewPlan(m, abi, OS(), Options{Canaries: []string{filepath.Join(dir, "secret")}})
			if err != nil {
				t.Fatal(err)
			}
			got := runChild(t, pl,
				[]string{"read", filepath.Join(dir, "secret")},
				[]string{"read", ws + "/a/f"},
				[]string{"write", ws + "/ro/r"},
				[]string{"truncate", ws + "/ro/r"},
				[]string{"rename", ws + "/a/f", ws + "/b/f"},
				[]string{"kill-parent"},
			)
			want := []string{"EACCES", "ok", "EACCES", "EACCES", "ok", "ok"}
			if abi < 3 {
				want[3] = "ok" // TRUNCATE is not handled before ABI 3
			}
			if abi < 2 {
				want[4] = "EXDEV" // no REFER: renames across directories fail
			}
			if abi >= 6 {
				want[5] = "EPERM" // the signal scope
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("ABI %d: got %q, want %q", abi, got, want)
			}
			os.WriteFile(ws+"/ro/r", []byte("data"), 0o644)
			os.Rename(ws+"/b/f", ws+"/a/f")
		})
	}
}

// TestApplyRefusesChangedPath: a rule path replaced between planning and
// enforcement (by a symlink to a secret, say) is refused, not followed.
func TestApplyRefusesChangedPath(t *testing.T) {
	k := expectedABI(t)
	if k.ABI < 1 {
		t.Skip("no Landlock on this kernel (declared): nothing to apply")
	}
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	os.MkdirAll(dir+"/ws/sub", 0o755)
	os.MkdirAll(dir+"/secret", 0o755)
	m := compile(t, fmt.Sprintf("[file_policy]\nwrite_paths = [%q]\n", dir+"/ws/**"))
	pl, err := NewPlan(m, k.ABI, OS(), Options{Canaries: []string{dir + "/secret"}})
	if err != nil {
		t.Fatal(err)
	}
	os.Rename(dir+"/ws", dir+"/ws.old")
	os.Symlink(dir+"/secret", dir+"/ws")
	job := childJob{Plan: *pl, Handled: pl.Handled, Scoped: pl.Scoped}
	for _, r := range pl.Rules {
		job.Access = append(job.Access, uint64(r.Access))
	}
	spec, _ := json.Marshal(job)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "apply:") || !strings.Contains(string(out), dir+"/ws") {
		t.Errorf("a swapped rule path was accepted: %v\n%s", err, out)
	}
}

// TestDetect: this kernel's Landlock is what the run declared.
func TestDetect(t *testing.T) {
	k, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	if want := os.Getenv("AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI"); want != "" {
		if n, _ := strconv.Atoi(want); n != k.ABI {
			t.Fatalf("AGENT_LAUNCHER_EXPECT_LANDLOCK_ABI=%s, kernel has ABI %d (%s)", want, k.ABI, k.Reason)
		}
	}
	if (k.ABI < 1) != (k.Reason != "") {
		t.Errorf("Detect: %+v: a reason exactly when there is no Landlock", k)
	}
	if err := RunSupported(k); k.ABI >= MinABI && err != nil {
		t.Errorf("RunSupported(%+v): %v", k, err)
	}
	for abi := 1; abi < MinABI; abi++ {
		var ae *ABIError
		if err := RunSupported(Kernel{ABI: abi}); !errors.As(err, &ae) || len(ae.Missing) == 0 {
			t.Errorf("RunSupported(ABI %d) = %v", abi, err)
		}
	}
	if err := RunSupported(Kernel{Reason: "x"}); !errors.Is(err, ErrNoLandlock) {
		t.Errorf("RunSupported(no Landlock) = %v", err)
	}
}

// TestApplySkipsRemovedPath: a rule path removed between planning and
// enforcement is skipped, and what is made there afterwards has no rule:
// the floor denies it (fail closed).
func TestApplySkipsRemovedPath(t *testing.T) {
	k := expectedABI(t)
	if k.ABI < 1 {
		t.Skip("no Landlock on this kernel (declared): nothing to apply")
	}
	dir := t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	os.MkdirAll(dir+"/ws/gone", 0o755)
	os.MkdirAll(dir+"/ws/kept", 0o755)
	os.WriteFile(dir+"/ws/.env", []byte("s"), 0o644) // carves ws: gone and kept get rules of their own
	os.WriteFile(dir+"/ws/kept/f", []byte("k"), 0o644)
	os.MkdirAll(dir+"/secret", 0o755)
	m := compile(t, fmt.Sprintf("[file_policy]\nwrite_paths = [%q]\ndeny_paths = [%q]\n", dir+"/ws/**", dir+"/ws/.env"))
	pl, err := NewPlan(m, k.ABI, OS(), Options{Canaries: []string{dir + "/secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Grants(dir+"/ws/gone/x", TypeFile)&ReadFile == 0 {
		t.Fatalf("the plan does not grant the directory to remove:\n%s", pl.Format())
	}
	os.RemoveAll(dir + "/ws/gone")
	// The child applies the plan (skipping the removed path), says so in
	// the granted sibling, waits until the test has made a new directory
	// at the old name, and reads in it.
	job := childJob{Plan: *pl, Handled: pl.Handled, Scoped: pl.Scoped, Ops: [][]string{
		{"write", dir + "/ws/kept/applied"},
		{"wait", dir + "/made"},
		{"read", dir + "/ws/gone/x"},
		{"read", dir + "/ws/kept/f"},
	}}
	for _, r := range pl.Rules {
		job.Access = append(job.Access, uint64(r.Access))
	}
	spec, _ := json.Marshal(job)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(dir + "/ws/kept/applied"); err == nil {
			break
		}
		if i == 3000 {
			cmd.Process.Kill()
			t.Fatalf("the child never applied the plan: %s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	os.MkdirAll(dir+"/ws/gone", 0o755)
	os.WriteFile(dir+"/ws/gone/x", []byte("x"), 0o644)
	os.WriteFile(dir+"/made", nil, 0o644)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")[2:]
	if strings.Join(got, " ") != "EACCES ok" {
		t.Errorf("got %q, want the replacement denied and the sibling readable", got)
	}
}

// osFS.ReadDir lists what os.ReadDir lists, with the same types, in the
// same order: a directory with every kind of entry, one of over a batch
// of getdents64, and system directories.
func TestOSReadDir(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("file-with-a-long-name-%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"sub/", "f", "l@", "fifo|", "\n newline", "é"} {
		full := filepath.Join(dir, strings.TrimRight(p, "/@|"))
		var err error
		switch {
		case strings.HasSuffix(p, "/"):
			err = os.Mkdir(full, 0o755)
		case strings.HasSuffix(p, "@"):
			err = os.Symlink("f", full)
		case strings.HasSuffix(p, "|"):
			err = unix.Mkfifo(full, 0o644)
		default:
			err = os.WriteFile(full, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{dir, big, "/", "/etc", "/usr/bin", "/dev", "/proc/self"} {
		got, err := OS().ReadDir(d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var want []DirEntry
		for _, e := range ents {
			typ := TypeOther
			switch m := e.Type(); {
			case m.IsDir():
				typ = TypeDir
			case m.IsRegular():
				typ = TypeFile
			case m&fs.ModeSymlink != 0:
				typ = TypeSymlink
			}
			want = append(want, DirEntry{Name: e.Name(), Type: typ})
		}
		if d == "/proc/self" {
			continue // its entries' own changes aside, listing it must work
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d entries, os.ReadDir %d; first difference at %d", d, len(got), len(want), firstDiff(got, want))
		}
	}
	if _, err := OS().ReadDir(filepath.Join(dir, "f")); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("listing a file: %v, want ENOTDIR", err)
	}
	if _, err := OS().ReadDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("listing nothing: %v, want not found", err)
	}
}

func firstDiff(a, b []DirEntry) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
