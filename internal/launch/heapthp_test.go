//go:build linux && cgo && (amd64 || arm64 || loong64)

package launch

import (
	"os"
	"strconv"
	"strings"
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
