//go:build linux && cgo && (amd64 || arm64 || loong64)

package launch

import (
	"os"
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

// TestRuntimeSmallMappingsCarved: the arena exists, is advised for huge
// pages, and the Go runtime's own small mappings came from it (this test
// binary's runtime, started after the constructor made the arena); a
// mapping of that shape is carved while the arena has room for it, zeroed
// and writable, and the kernel's once it has not (the test's own mappings
// use the arena up when it runs again with -count); one too large for it
// is the kernel's.
func TestRuntimeSmallMappingsCarved(t *testing.T) {
	lo, hi, next := thpArena()
	if lo == 0 || hi-lo != 4<<20 || lo%(2<<20) != 0 {
		t.Fatalf("no 2 MiB-aligned 4 MiB arena: %#x-%#x", lo, hi)
	}
	if next <= lo {
		t.Errorf("the Go runtime took nothing from the arena (next %#x)", next)
	}
	if got := advised(t, lo); !strings.Contains(got, " hg") {
		t.Errorf("the arena is not advised for huge pages: VmFlags %q", got)
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

// TestCarveConcurrent: mappings carved from several threads at once never
// overlap, and each is the size asked.
func TestCarveConcurrent(t *testing.T) {
	const threads, each, size = 8, 16, 8 << 10
	lo, hi, next := thpArena()
	room := hi - next
	var mu sync.Mutex
	var got [][2]uintptr
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			<-start
			for range each {
				p, err := cMmap(size)
				if err != nil {
					t.Error(err)
					return
				}
				*(*byte)(unsafe.Add(p, size-1)) = 1
				mu.Lock()
				got = append(got, [2]uintptr{uintptr(p), uintptr(p) + size})
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	slices.SortFunc(got, func(a, b [2]uintptr) int { return int(a[0]>>12) - int(b[0]>>12) })
	carved := 0
	for i, r := range got {
		if i > 0 && r[0] < got[i-1][1] {
			t.Errorf("%#x-%#x overlaps %#x-%#x", r[0], r[1], got[i-1][0], got[i-1][1])
		}
		if r[0] >= lo && r[1] <= hi {
			carved++
		}
	}
	if carved == 0 && room >= 1<<20 {
		t.Errorf("none of the %d mappings came from the arena %#x-%#x, which had %d bytes free", len(got), lo, hi, room)
	}
	t.Logf("%d of %d mappings carved", carved, len(got))
}

// advised returns the VmFlags of the mapping that holds addr.
func advised(t *testing.T, addr uintptr) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, _ := strings.Cut(f[0], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			z, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= a && uint64(addr) < z
			continue
		}
		if v, ok := strings.CutPrefix(l, "VmFlags:"); ok && in {
			return v
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x", addr)
	return ""
}
