//go:build linux && cgo

package launch

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestTextPopulatedAtStart: before the Go runtime starts, the constructor
// maps in this executable's read-only segments at once (populate_text in
// initstage.c), so that the supervisor does not fault its code and
// read-only data in 64 KiB at a time: in a fresh run of this test binary
// (a child: in this process, earlier tests may have touched every page),
// every page of both mappings is present, though the child ran and read a
// small part of them. Control: a read-only private file mapping that
// nothing populated, touched once, is mostly not present, so the measure
// tells the two apart.
func TestTextPopulatedAtStart(t *testing.T) {
	if os.Getenv(populateChildVar) != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTextPopulatedAtStart$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), populateChildVar+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the test in a fresh process: %v\n%s", err, out)
		}
		return
	}
	for what, addr := range map[string]uintptr{
		"code":           reflect.ValueOf(TestTextPopulatedAtStart).Pointer(),
		"read-only data": uintptr(unsafe.Pointer(unsafe.StringData(rodataProbe))),
	} {
		if size, rss := mappingRSS(t, addr); rss != size {
			t.Errorf("the test binary's %s: %d of %d KiB mapped; not populated at start", what, rss, size)
		}
	}

	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 4<<20, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	_ = m[0]
	csize, crss := mappingRSS(t, uintptr(reflect.ValueOf(m).UnsafePointer()))
	if csize != 4<<10 || crss > csize/2 {
		t.Errorf("control: a mapping touched once has %d of %d KiB resident", crss, csize)
	}
}

// mappingRSS returns the size and the resident size, in KiB, of this
// process's mapping that holds addr (/proc/self/smaps).
func mappingRSS(t *testing.T, addr uintptr) (size, rss int) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				if in {
					break
				}
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if !in || len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "Size:":
			size, _ = strconv.Atoi(fields[1])
		case "Rss:":
			rss, _ = strconv.Atoi(fields[1])
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if size == 0 {
		t.Fatalf("no mapping holds %#x in /proc/self/smaps", addr)
	}
	return size, rss
}

// populateChildVar marks the fresh process TestTextPopulatedAtStart runs.
const populateChildVar = "AGENT_LAUNCHER_TEST_POPULATE_CHILD"

const rodataProbe = "a string constant, in the executable's read-only data"
