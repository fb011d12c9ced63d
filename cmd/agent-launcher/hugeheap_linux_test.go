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

func TestHeapChunks(t *testing.T) {
	maps := []byte(`00400000-00401000 r--p 00000000 fe:00 10275202                           /usr/bin/agent-launcher
0090f000-0294c000 rw-p 00000000 00:00 0
27f7ab400000-27f7ab800000 rw-p 00000000 00:00 0
27f7ab800000-27f7ac000000 rw-p 00000000 00:00 0
27f7ac000000-27f7ac400000 r--p 00000000 00:00 0
27f7ac400000-27f7ac600000 rw-p 00000000 00:00 0
27f7b0000000-27f7c0000000 rw-p 00000000 00:00 0
7ffc11800000-7ffc11c00000 rw-p 00000000 00:00 0                          [stack]
7fb82e000000-7fb82e400000 rw-p 00000000 fe:00 786484                     /home/u/.local/state/agent-launcher/cache/x
7fb82e400000-7fb82e800000 rw-s 00000000 00:01 5                          /memfd:x (deleted)
nonsense
`)
	want := [][2]uintptr{{0x27f7ab400000, 0x27f7ab800000}, {0x27f7ab800000, 0x27f7ac000000}}
	if got := heapChunks(maps); !reflect.DeepEqual(got, want) {
		t.Errorf("heapChunks = %#x, want %#x", got, want)
	}
}

// TestHugeHeapAdvises checks on the real kernel that hugeHeap marks the
// heap chunk that holds a live object eligible for huge pages, and, as the
// control, that it was not before (where THP is "madvise", as here).
func TestHugeHeapAdvises(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Fatalf("THP mode: %v", err)
	}
	obj := new([64]byte)
	addr := uintptr(unsafe.Pointer(obj))
	before := thpEligible(t, addr)
	hugeHeap()
	after := thpEligible(t, addr)
	switch {
	case bytes.Contains(mode, []byte("[madvise]")):
		if before || !after {
			t.Errorf("THP madvise: the heap chunk eligible before %v, after %v; want false, true", before, after)
		}
	case bytes.Contains(mode, []byte("[always]")):
		if !after {
			t.Errorf("THP always: the heap chunk is not eligible after hugeHeap")
		}
	default: // never: no advice makes a difference
		if after {
			t.Errorf("THP never: the heap chunk is eligible")
		}
	}
	t.Logf("THP %s; eligible before %v, after %v", bytes.TrimSpace(mode), before, after)
	_ = obj[0]
}

// thpEligible reads THPeligible of the mapping that holds addr.
func thpEligible(t *testing.T, addr uintptr) bool {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, line := range strings.Split(string(smaps), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, _ := strings.Cut(f[0], "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= a && uint64(addr) < b
			continue
		}
		if v, ok := strings.CutPrefix(line, "THPeligible:"); ok && in {
			return strings.TrimSpace(v) == "1"
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x", addr)
	return false
}
