//go:build linux && cgo && (amd64 || arm64 || loong64) && !msan && !asan

// As the launcher (cmd/agent-launcher): the runtime names no mappings, which
// would split the arena where the kernel names them.
//
//go:debug decoratemappings=0

package launch

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// early is allocated by the package's initialization, in the first heap
// chunks the runtime mapped.
var early = new([64]byte)

// TestHeapChunksAdvisedAtMapping: the Go heap's first chunks carry the
// huge-page advice (VmFlags "hg") from their mapping on (heapthp.c), not
// after the runtime faulted them in; the end of a large allocation does not
// (at most 4 MiB of each of the first two mappings: the advice is for the
// start only). The kernel keeps the flag whatever the THP mode, so the test
// holds where THP is "never" too.
func TestHeapChunksAdvisedAtMapping(t *testing.T) {
	if got := advised(t, uintptr(unsafe.Pointer(early))); !strings.Contains(got, " hg") {
		t.Errorf("the first heap chunk, holding an object made at initialization, is not advised for huge pages: VmFlags %q", got)
	}
	// 64 MiB more heap, in memory the runtime maps now: its end lies
	// beyond any 4 MiB advised.
	late := make([]byte, 64<<20)
	late[len(late)-1] = 1
	if got := advised(t, uintptr(unsafe.Pointer(&late[len(late)-1]))); strings.Contains(got, " hg") {
		t.Errorf("control: the end of a large allocation is advised for huge pages too: VmFlags %q", got)
	}
}

// TestRuntimeSmallMappingsCarved: with 4 KiB pages the arena exists, is
// advised for huge pages and backed by them where THP is not "never"
// (AnonHugePages; the test binary, like the launcher, names no mappings),
// and the Go runtime's own small mappings came from it (this test binary's
// runtime, started after the constructor made the arena); a mapping of
// that shape is carved while the arena has room for it, zeroed and
// writable, and the kernel's once it has not (the test's own mappings use
// the arena up when it runs again with -count); one too large for it is
// the kernel's. With other pages there is no arena.
func TestRuntimeSmallMappingsCarved(t *testing.T) {
	lo, hi, next := thpArena()
	if os.Getpagesize() != 4096 {
		if lo != 0 {
			t.Errorf("an arena %#x-%#x with %d-byte pages", lo, hi, os.Getpagesize())
		}
		return
	}
	if lo == 0 || hi-lo != 4<<20 || lo%(2<<20) != 0 {
		t.Fatalf("no 2 MiB-aligned 4 MiB arena: %#x-%#x", lo, hi)
	}
	if next <= lo {
		t.Errorf("the Go runtime took nothing from the arena (next %#x)", next)
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	switch {
	case err != nil: // no THP in this kernel: the advice is refused
		if got := advised(t, lo); strings.Contains(got, " hg") {
			t.Errorf("the arena is advised for huge pages on a kernel without them: VmFlags %q", got)
		}
	case !strings.Contains(advised(t, lo), " hg"):
		t.Errorf("the arena is not advised for huge pages: VmFlags %q", advised(t, lo))
	case !strings.Contains(string(mode), "[never]") && smapsField(t, lo, "AnonHugePages:") == 0:
		t.Errorf("THP %s, yet the arena %#x-%#x, %d bytes of it handed out, holds no huge page", strings.TrimSpace(string(mode)), lo, hi, next-lo)
	}
	in := func(p uintptr) bool { return p >= lo && p < hi }
	_, _, next = thpArena()
	room := hi - next
	p, err := cMmap(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	// The runtime may take a little of the arena meanwhile: between 64 KiB
	// and 1 MiB of room, either answer is right.
	switch {
	case room >= 1<<20 && !in(uintptr(p)):
		t.Errorf("a 64 KiB mapping of the runtime's shape is at %p, outside the arena %#x-%#x with %d bytes free", p, lo, hi, room)
	case room < 64<<10 && in(uintptr(p)):
		t.Errorf("a 64 KiB mapping is at %p, in the arena %#x-%#x that had only %d bytes free", p, lo, hi, room)
	}
	b := unsafe.Slice((*byte)(p), 64<<10)
	if i := slices.IndexFunc(b, func(c byte) bool { return c != 0 }); i >= 0 {
		t.Errorf("carved memory is not zero at %d", i)
	}
	b[0], b[len(b)-1] = 1, 1
	if q, err := cMmap(1 << 20); err != nil || in(uintptr(q)) {
		t.Errorf("control: a 1 MiB mapping is at %p (%v), in the arena %#x-%#x", q, err, lo, hi)
	}
}

// TestCarveConcurrent: the arena's bump hands out every byte once from
// several threads at once: 4 threads carve 500,000 pages each from one
// test arena (al_carve is arithmetic: nothing is mapped), in C loops long
// enough to overlap, so that they race; every range is distinct and
// together they are the arena's first 8,000,000 KiB, no more.
func TestCarveConcurrent(t *testing.T) {
	const threads, each, page = 4, 500000, 4096
	const base = uintptr(1) << 40
	next, hi := base, base+threads*each*page+page/2 // room for all, not for one more
	outs := make([][]uintptr, threads)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range outs {
		outs[i] = make([]uintptr, each)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			<-start
			carveMany(&next, hi, page, outs[i])
		}()
	}
	close(start)
	wg.Wait()
	all := slices.Concat(outs...)
	slices.Sort(all)
	for i, p := range all {
		if want := base + uintptr(i)*page; p != want {
			t.Fatalf("range %d of %d starts at %#x, want %#x (a range handed out twice, or none)", i, len(all), p, want)
		}
	}
	if rest := make([]uintptr, 1); true {
		carveMany(&next, hi, page, rest)
		if rest[0] != 0 {
			t.Errorf("carved %#x past the arena's end %#x", rest[0], hi)
		}
	}
}

// TestNoArenaWithDisableTHP: GODEBUG=disablethp=1, the runtime's switch
// against huge pages, leaves the process without the arena. Control: the
// same test binary without it has one (where pages are 4 KiB).
func TestNoArenaWithDisableTHP(t *testing.T) {
	if os.Getenv("AL_TEST_PRINT_ARENA") == "1" {
		lo, _, _ := thpArena()
		fmt.Printf("arena %d\n", lo)
		return
	}
	arena := func(godebug string) uint64 {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoArenaWithDisableTHP$", "-test.count=1")
		cmd.Env = append(os.Environ(), "AL_TEST_PRINT_ARENA=1", "GODEBUG="+godebug)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GODEBUG=%s: %v: %s", godebug, err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "arena "); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("GODEBUG=%s: no arena line in %q", godebug, out)
		return 0
	}
	if os.Getpagesize() == 4096 && arena("") == 0 {
		t.Fatalf("control: no arena without GODEBUG")
	}
	if lo := arena("disablethp=1"); lo != 0 {
		t.Errorf("GODEBUG=disablethp=1, and the arena is at %#x", lo)
	}
}

// smapsField returns a kB field (such as "AnonHugePages:") of the mapping
// that holds addr, in bytes.
func smapsField(t *testing.T, addr uintptr, field string) uint64 {
	t.Helper()
	f := strings.Fields(smapsOf(t, addr)[field])
	if len(f) != 2 || f[1] != "kB" {
		t.Fatalf("no %s in kB for %#x in /proc/self/smaps: %q", field, addr, f)
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n << 10
}

// advised returns the VmFlags of the mapping that holds addr.
func advised(t *testing.T, addr uintptr) string {
	t.Helper()
	return smapsOf(t, addr)["VmFlags:"]
}

// smapsOf returns the fields of the mapping in /proc/self/smaps that holds
// addr, by name with its colon ("VmFlags:"), each with the rest of its line.
func smapsOf(t *testing.T, addr uintptr) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			if fields != nil {
				break // the mapping after addr's
			}
			lo, hi, _ := strings.Cut(f[0], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			z, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil && uint64(addr) >= a && uint64(addr) < z {
				fields = map[string]string{}
			}
			continue
		}
		if fields != nil {
			fields[f[0]] = strings.TrimPrefix(l, f[0])
		}
	}
	if fields == nil {
		t.Fatalf("no mapping in /proc/self/smaps holds %#x", addr)
	}
	return fields
}
