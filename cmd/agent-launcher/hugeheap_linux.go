package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeHeap asks the kernel to back the Go heap with transparent huge pages:
// each mapping of the heap arena that holds the supervisor's first objects
// gets MADV_HUGEPAGE, and its 2 MiB halves that the runtime has already
// begun to use are collapsed into huge pages (MADV_COLLAPSE).
//
// Why: a launch's supervisor touches two to four MiB of fresh heap, which
// the kernel fills one 4 KiB page fault at a time. On the machine the
// start-up target is measured on (a PVM guest) a fault costs about 13 us
// and faults from the two CPUs serialize, so those faults were the
// largest single part of run's start-up; a huge page is one fault.
//
// Only the heap arena is advised, never the runtime's other mappings
// (its heap index it marks MADV_NOHUGEPAGE itself), and only at start:
// chunks the runtime maps later keep 4 KiB pages, so at most the first
// 4 MiB chunk's untouched half can fault a huge page in later (where
// defrag is "madvise", such a fault may compact memory first). Where THP
// is "always" the kernel does this by itself; where it is "never", or
// GODEBUG=disablethp=1 (the runtime's own switch) is set, nothing is
// done (MADV_COLLAPSE would ignore "never"). The cost is up to 4 MiB more
// resident memory. The first chunk is all the supervisor's only with the
// heap at a fixed base, as scripts/build-launcher builds the launcher: Go
// 1.26's random base marks up to 4 MiB of it as padding, and the heap then
// grows into a second chunk, which faults 4 KiB at a time.
// docs/design-amendments.md, the eighth and tenth passes, has the
// measurements.
func hugeHeap() { hugeHeapAt(uintptr(unsafe.Pointer(heapProbe()))) }

// hugeHeapAt is hugeHeap for the heap arena that holds addr.
func hugeHeapAt(addr uintptr) {
	if strings.Contains(os.Getenv("GODEBUG"), "disablethp=1") {
		return
	}
	if mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || bytes.Contains(mode, []byte("[never]")) {
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	// Raw addresses, not slices: the memory is the runtime's, and only
	// the kernel's view of it changes.
	madvise := func(addr, n uintptr, advice int) bool {
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, addr, n, uintptr(advice))
		return errno == 0
	}
	for _, r := range heapChunks(maps, addr) {
		if !madvise(r[0], r[1]-r[0], unix.MADV_HUGEPAGE) {
			continue
		}
		var vec [hugePage / 4096]byte
		for half := r[0]; half < r[1]; half += hugePage {
			_, _, errno := unix.Syscall(unix.SYS_MINCORE, half, hugePage, uintptr(unsafe.Pointer(&vec[0])))
			if errno == 0 && anyResident(vec[:]) {
				madvise(half, hugePage, unix.MADV_COLLAPSE)
			}
		}
	}
}

// heapProbe returns a new heap object: its address lies in the heap arena
// the runtime allocates from.
//
//go:noinline
func heapProbe() *[64]byte { return new([64]byte) }

// anyResident reports whether mincore's vector shows a resident page (the
// low bit; the others are reserved).
func anyResident(vec []byte) bool {
	for _, b := range vec {
		if b&1 != 0 {
			return true
		}
	}
	return false
}

const (
	heapArena = 64 << 20 // the runtime's heap arenas on 64-bit Linux
	heapChunk = 4 << 20  // it maps each in chunks of this size
	hugePage  = 2 << 20
)

// heapChunks returns the [start, end) of the mappings in a /proc/PID/maps
// text that are the Go heap's in the arena holding addr: anonymous,
// private, read-write, aligned to heapChunk and a multiple of it, cut to
// that 64 MiB arena, and unnamed or named as the runtime names its heap
// where the kernel has CONFIG_ANON_VMA_NAME.
func heapChunks(maps []byte, addr uintptr) [][2]uintptr {
	arena := uint64(addr) &^ (heapArena - 1)
	var out [][2]uintptr
	for line := range bytes.Lines(maps) {
		f := bytes.Fields(line)
		switch {
		case len(f) < 5 || string(f[1]) != "rw-p" || string(f[2]) != "00000000" || string(f[3]) != "00:00" || string(f[4]) != "0":
			continue // a file, or another mode
		case len(f) > 5 && string(bytes.Join(f[5:], []byte(" "))) != "[anon: Go: heap]":
			continue // named: [stack], [heap], another runtime mapping
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(string(lo), 16, 64)
		b, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || b <= a || a%heapChunk != 0 || (b-a)%heapChunk != 0 {
			continue
		}
		// The kernel merges adjacent chunks into one mapping, also
		// across the arena's edges: only the part inside it counts.
		a, b = max(a, arena), min(b, arena+heapArena)
		if a >= b {
			continue
		}
		out = append(out, [2]uintptr{uintptr(a), uintptr(b)})
	}
	return out
}
