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
// each anonymous read-write mapping aligned to the heap's 4 MiB chunks gets
// MADV_HUGEPAGE, and its 2 MiB halves that the runtime has already begun
// to use are collapsed into huge pages (MADV_COLLAPSE).
//
// Why: a launch's supervisor touches two to four MiB of fresh heap, which
// the kernel fills one 4 KiB page fault at a time. On the machine the
// start-up target is measured on (a PVM guest) a fault costs about 13 us
// and faults from the two CPUs serialize, so those faults were the
// largest single part of run's start-up; a huge page is one fault. Where
// THP is "always" the kernel does this by itself; where it is "madvise"
// (Ubuntu, Debian's cloud kernels) or this advice fails, nothing changes
// but the speed. The cost is up to 4 MiB more resident memory for the
// supervisor. GODEBUG=disablethp=1, the runtime's own switch, turns it
// off. docs/design-amendments.md, the eighth pass, has the measurements.
func hugeHeap() {
	if strings.Contains(os.Getenv("GODEBUG"), "disablethp=1") {
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
	for _, r := range heapChunks(maps) {
		if !madvise(r[0], r[1]-r[0], unix.MADV_HUGEPAGE) {
			continue
		}
		var vec [hugePage / 4096]byte
		for half := r[0]; half < r[1]; half += hugePage {
			_, _, errno := unix.Syscall(unix.SYS_MINCORE, half, hugePage, uintptr(unsafe.Pointer(&vec[0])))
			if errno == 0 && bytes.ContainsFunc(vec[:], func(r rune) bool { return r&1 != 0 }) {
				madvise(half, hugePage, unix.MADV_COLLAPSE)
			}
		}
	}
}

const (
	heapChunk = 4 << 20 // the runtime maps its heap in chunks of this size
	hugePage  = 2 << 20
)

// heapChunks returns the [start, end) of the mappings in a /proc/PID/maps
// text that can be the Go heap's: anonymous, private, read-write, aligned
// to heapChunk and a multiple of it (at most 64 MiB, one heap arena).
func heapChunks(maps []byte) [][2]uintptr {
	var out [][2]uintptr
	for line := range bytes.Lines(maps) {
		f := bytes.Fields(line)
		if len(f) != 5 || string(f[1]) != "rw-p" || string(f[4]) != "0" {
			continue // a file, a named mapping ([stack], [heap]) or another mode
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(string(lo), 16, 64)
		b, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || b <= a || a%heapChunk != 0 || (b-a)%heapChunk != 0 || b-a > 64<<20 {
			continue
		}
		out = append(out, [2]uintptr{uintptr(a), uintptr(b)})
	}
	return out
}
