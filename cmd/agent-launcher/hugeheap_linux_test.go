package main

import (
	"bytes"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestHeapChunks: only the heap arena's chunks (unnamed, or named as the
// runtime names its heap), never the runtime's other anonymous mappings,
// a file, a shared or named mapping, or memory outside the arena.
func TestHeapChunks(t *testing.T) {
	maps := []byte(`00400000-00401000 r--p 00000000 fe:00 10275202                           /usr/bin/agent-launcher
0090f000-0294c000 rw-p 00000000 00:00 0
27f7ab400000-27f7ab800000 rw-p 00000000 00:00 0
27f7ab800000-27f7ac000000 rw-p 00000000 00:00 0                          [anon: Go: heap]
27f7ac000000-27f7ac400000 r--p 00000000 00:00 0
27f7ac400000-27f7ac600000 rw-p 00000000 00:00 0
27f7ac800000-27f7acc00000 rw-p 00000000 00:00 0                          [anon: Go: heap index]
27f7b0000000-27f7b0400000 rw-p 00000000 00:00 0
27f7a8000000-27f7a8400000 rw-p 00000000 00:00 0
7ffc11800000-7ffc11c00000 rw-p 00000000 00:00 0                          [stack]
7fb82e000000-7fb82e400000 rw-p 00000000 fe:00 786484                     /home/u/.local/state/agent-launcher/cache/x
27f7ad000000-27f7ad400000 rw-s 00000000 00:01 5                          /memfd:x (deleted)
27f7ad400000-27f7ad800000 rw-p 00001000 00:00 0
nonsense
`)
	// The arena is 27f7a8000000-27f7ac000000 (64 MiB); 27f7b0000000 lies
	// in the next one, 27f7a8000000 in this one.
	want := [][2]uintptr{{0x27f7ab400000, 0x27f7ab800000}, {0x27f7ab800000, 0x27f7ac000000}, {0x27f7a8000000, 0x27f7a8400000}}
	if got := heapChunks(maps, 0x27f7ab812345); !reflect.DeepEqual(got, want) {
		t.Errorf("heapChunks = %#x, want %#x", got, want)
	}
	// The kernel merges adjacent chunks into one mapping, also across an
	// arena's edge (with the runtime's random heap base, the first chunks
	// can straddle one): the part inside the arena is the heap's.
	straddling := []byte(`27f7a7c00000-27f7a8400000 rw-p 00000000 00:00 0
27f7abc00000-27f7ac400000 rw-p 00000000 00:00 0                          [anon: Go: heap]
`)
	want = [][2]uintptr{{0x27f7a8000000, 0x27f7a8400000}, {0x27f7abc00000, 0x27f7ac000000}}
	if got := heapChunks(straddling, 0x27f7a8012345); !reflect.DeepEqual(got, want) {
		t.Errorf("heapChunks, mappings across the arena's edges = %#x, want %#x", got, want)
	}
}

// TestHugeHeapAdvises checks on the real kernel that hugeHeap marks the
// heap chunk that holds a live heap object for huge pages (VmFlags "hg"),
// as the control it was not before, and that it leaves the runtime's
// other anonymous mappings as they were; where THP is "never" it does
// nothing. The object is given to hugeHeapAt, as hugeHeap gives it its
// own: with the test binary's random heap base the heap can span two
// arenas, and two objects need not lie in the same one.
func TestHugeHeapAdvises(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Fatalf("THP mode: %v", err)
	}
	obj := heapProbe()
	addr := uintptr(unsafe.Pointer(obj))
	before := smaps(t)
	if maps, err := os.ReadFile("/proc/self/maps"); err != nil || !inChunks(heapChunks(maps, addr), addr) {
		t.Fatalf("heapProbe's object %#x lies in none of its arena's heap chunks %#x (%v)", addr, heapChunks(maps, addr), err)
	}
	hugeHeapAt(addr)
	after := smaps(t)
	never := bytes.Contains(mode, []byte("[never]"))
	var heap *mapping
	for i, m := range after {
		if m.lo <= addr && addr < m.hi {
			heap = &after[i]
		}
	}
	if heap == nil {
		t.Fatalf("no mapping holds %#x", addr)
	}
	if was := find(before, addr); strings.Contains(was.flags, " hg") {
		t.Fatalf("control: the heap chunk was advised before hugeHeap: %q", was.flags)
	}
	if got := strings.Contains(heap.flags, " hg"); got == never {
		t.Errorf("THP %s: the heap chunk's VmFlags %q (advised: %v)", bytes.TrimSpace(mode), heap.flags, got)
	}
	arena := addr &^ (heapArena - 1)
	for _, m := range after {
		if (m.lo < arena || m.hi > arena+heapArena) && strings.Contains(m.flags, " hg") && !strings.Contains(find(before, m.lo).flags, " hg") {
			t.Errorf("hugeHeap advised %#x-%#x, outside the heap arena %#x: %q", m.lo, m.hi, arena, m.flags)
		}
	}
	t.Logf("THP %s; the heap chunk %#x-%#x: %q", bytes.TrimSpace(mode), heap.lo, heap.hi, heap.flags)
	_ = obj[0]
}

func inChunks(chunks [][2]uintptr, addr uintptr) bool {
	for _, c := range chunks {
		if c[0] <= addr && addr < c[1] {
			return true
		}
	}
	return false
}

type mapping struct {
	lo, hi uintptr
	flags  string
}

func find(ms []mapping, addr uintptr) mapping {
	for _, m := range ms {
		if m.lo <= addr && addr < m.hi {
			return m
		}
	}
	return mapping{}
}

// smaps reads this process's mappings and their VmFlags.
func smaps(t *testing.T) []mapping {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var out []mapping
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, _ := strings.Cut(f[0], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			z, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				out = append(out, mapping{lo: uintptr(a), hi: uintptr(z)})
			}
			continue
		}
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok && len(out) > 0 {
			out[len(out)-1].flags = " " + strings.TrimSpace(v)
		}
	}
	return out
}
