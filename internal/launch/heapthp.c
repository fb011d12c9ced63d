// The Go heap's first chunks backed by transparent huge pages from the
// moment the runtime maps them.
//
// Why: a launch's supervisor touches two to four MiB of fresh heap, which
// the kernel fills one 4 KiB page fault at a time. On the machine the
// start-up target is measured on (a PVM guest) a fault costs about 13 us and
// faults from the two CPUs serialize, and a Go program's start-up was mostly
// such faults: `agent-launcher version` took 243 of them, about 100 in the
// heap before `main`. A huge page is one fault.
//
// How: with cgo the Go runtime maps memory through the C library's mmap
// (runtime/cgo's x_cgo_mmap, so that sanitizers see it), from its first
// mapping on. This mmap is that function, linked in place of the C
// library's (musl's and glibc's are weak aliases of their __mmap), and
// the same system call; it then asks for huge pages (MADV_HUGEPAGE) on the
// first 4 MiB of each of the first two mappings shaped like the runtime's
// heap chunks (sysMapOS: anonymous, private, fixed, read-write, 2 MiB
// aligned, 2 MiB or more): the supervisor's start-up heap, wherever the
// runtime's random heap base (a build without scripts/build-launcher) puts
// it. At most 8 MiB: chunks mapped later, and the rest of a large one,
// keep 4 KiB pages, so a long session's heap does not grow by whole huge
// pages. Everything else is the
// system call alone. Where THP is "never" the advice does nothing; with
// GODEBUG=disablethp=1 the runtime advises MADV_NOHUGEPAGE right after the
// mapping, which wins. The cost is up to 4 MiB more resident memory (a
// huge page is filled whole), and where defrag is "madvise" a fault there
// may compact memory first.
//
// It replaces the supervisor's hugeHeap (cmd/agent-launcher, the eighth to
// twelfth passes), which advised and collapsed the chunk from main, after
// the runtime and the package initializers had faulted it in 4 KiB at a time
// and at a cost of its own (reading /proc/self/maps, MADV_COLLAPSE):
// `version` 10.15 -> 7.41 ms, 243 -> 93 faults (perf stat, 40 runs each);
// docs/design-amendments.md, the thirteenth pass.
//
// Only where the Go runtime maps through it (linux/amd64, arm64, loong64)
// and mmap's system call takes the offset in bytes.

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__) || defined(__loongarch64))

#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

// al_heap_thp_advised counts the mappings advised (at most 2); the runtime
// maps its heap from one thread at a time (under the heap's lock).
int al_heap_thp_advised;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
	long p = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (p == -1)
		return MAP_FAILED; // errno set
	const uintptr_t huge = 2u << 20;
	if (al_heap_thp_advised < 2 && fd == -1 && prot == (PROT_READ | PROT_WRITE) &&
	    flags == (MAP_ANONYMOUS | MAP_PRIVATE | MAP_FIXED) && ((uintptr_t)p & (huge - 1)) == 0 && len >= huge) {
		al_heap_thp_advised++;
		int e = errno;
		size_t n = len < 2 * huge ? len & ~(huge - 1) : 2 * huge;
		syscall(SYS_madvise, p, n, MADV_HUGEPAGE); // advice: a refusal changes nothing
		errno = e;
	}
	return (void *)p;
}

#endif
