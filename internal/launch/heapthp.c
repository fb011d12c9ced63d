// The Go runtime's start-up memory in transparent huge pages: its first
// heap chunks, advised as the runtime maps them, and its small mappings
// (the persistent allocator's chunks, arena metadata) carved from one
// advised arena.
//
// Why: on the machine the start-up target is measured on (a PVM guest) a
// page fault costs about 13 us, and a Go program's start-up was mostly
// faults: `agent-launcher version` took 235-240 of them, about 140 in the
// Go heap, 66 of those before the first package initializer; the
// supervisor of a run took about 110 more in the runtime's small
// mappings. Prefaulting the same pages (MADV_POPULATE_WRITE) saved nothing:
// the cost is in the page-table entries, one per 4 KiB page, which a huge
// page replaces with one.
//
// How: with cgo the Go runtime maps its memory through the C library's
// mmap (runtime/cgo's x_cgo_mmap, there so that sanitizers see Go's
// mappings), from its first mapping on. This mmap is that function, linked
// in place of the C library's (musl's and glibc's are weak aliases of their
// __mmap; the C library itself calls __mmap):
//   - a mapping shaped like the runtime's heap chunks (sysMapOS: anonymous,
//     private, fixed, read-write, 2 MiB aligned, 2 MiB or more) is the
//     system call, then MADV_HUGEPAGE on its first 4 MiB, for the first two
//     such mappings only: the supervisor's start-up heap, wherever the
//     runtime's random heap base (a build without scripts/build-launcher)
//     puts it;
//   - a small mapping of the runtime's own (sysAllocOS: anonymous,
//     private, read-write, no address asked, 512 KiB or less) is carved
//     from the arena: 4 MiB reserved and advised by al_thp_arena_init
//     before the runtime starts, handed out in page multiples by an atomic
//     bump, never twice; a munmap of a carved range unmaps it (the
//     kernel's), and the bump never returns there. Fresh anonymous memory,
//     so zero, as mmap's;
//   - everything else, and everything once the arena is used up, is the
//     system call alone.
// At most 8 MiB of heap and 4 MiB of arena are advised: memory mapped
// later keeps 4 KiB pages, so a long session's memory does not grow in 2
// MiB steps. The cost is up to 12 MiB more resident memory (a huge page is
// filled whole; a range the runtime frees stays unused, and splits its huge
// page), and where defrag is "madvise" a fault there may compact memory
// first. Where THP is "never" the advice does nothing; with
// GODEBUG=disablethp=1 there is no arena, and the runtime advises
// MADV_NOHUGEPAGE on its heap right after mapping it, which wins there. The
// launcher turns the runtime's naming of its mappings off
// (decoratemappings=0, cmd/agent-launcher): each name would make its own
// mapping region of a carved range, and no huge page would fit the arena.
// Not in a sanitizer's build, whose mmap interceptor this would bypass.
//
// It replaces the supervisor's hugeHeap (cmd/agent-launcher, the eighth to
// twelfth passes), which advised and collapsed the heap chunk from main,
// after the runtime and the package initializers had faulted it in 4 KiB
// at a time. Measured in docs/design-amendments.md, the thirteenth pass.
//
// Only where the Go runtime maps through it (linux/amd64, arm64, loong64)
// and mmap's system call takes the offset in bytes.

#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The arena: [al_arena_lo, al_arena_hi), handed out from al_arena_next up.
// Set once, before the Go runtime starts (al_thp_arena_init); 0 without.
uintptr_t al_arena_lo, al_arena_hi;
uintptr_t al_arena_next;

// al_carve hands out n bytes from *next up to hi, or 0 when *next is 0 (no
// arena) or fewer than n are left: one atomic bump, so that no byte is
// handed out twice, from any number of threads.
uintptr_t al_carve(uintptr_t *next, uintptr_t hi, size_t n) {
	uintptr_t cur = __atomic_load_n(next, __ATOMIC_RELAXED);
	do {
		if (cur == 0 || hi - cur < n)
			return 0;
	} while (!__atomic_compare_exchange_n(next, &cur, cur + n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return cur;
}

// al_carve_many carves count ranges of n bytes into out: al_carve in a
// loop, for the tests (TestCarveConcurrent), from several threads at once.
void al_carve_many(uintptr_t *next, uintptr_t hi, size_t n, size_t count, uintptr_t *out) {
	for (size_t i = 0; i < count; i++)
		out[i] = al_carve(next, hi, n);
}

#ifndef __has_feature
#define __has_feature(x) 0
#endif

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__) || defined(__loongarch64)) && \
    !defined(__SANITIZE_ADDRESS__) && !__has_feature(address_sanitizer) && !__has_feature(memory_sanitizer) && \
    !__has_feature(thread_sanitizer)

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define AL_HUGE ((uintptr_t)2 << 20)
#define AL_ARENA ((uintptr_t)4 << 20)
#define AL_CARVED_MAX ((size_t)512 << 10)

// al_heap_thp_advised counts the heap mappings advised (at most 2).
static int al_heap_thp_advised;

// al_thp_arena_init reserves and advises the arena, with 4 KiB pages (2 MiB
// huge ones). The supervisor's constructor calls it, single-threaded,
// before the Go runtime starts; without it, or when it fails, there is no
// arena and every mapping is the system call's.
void al_thp_arena_init(void) {
	if (sysconf(_SC_PAGESIZE) != 4096)
		return; // huge pages of another size: not this arena's
	const char *godebug = getenv("GODEBUG");
	if (godebug != NULL && strstr(godebug, "disablethp=1") != NULL)
		return; // the runtime's own switch against huge pages
	int e = errno;
	long r = syscall(SYS_mmap, NULL, AL_ARENA + AL_HUGE, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (r != -1) {
		// 2 MiB aligned, so that both halves can be huge pages; the
		// slack before and after goes back.
		uintptr_t lo = ((uintptr_t)r + AL_HUGE - 1) & ~(AL_HUGE - 1);
		if (lo > (uintptr_t)r)
			syscall(SYS_munmap, r, lo - (uintptr_t)r);
		uintptr_t end = (uintptr_t)r + AL_ARENA + AL_HUGE;
		if (end > lo + AL_ARENA)
			syscall(SYS_munmap, lo + AL_ARENA, end - (lo + AL_ARENA));
		syscall(SYS_madvise, lo, AL_ARENA, MADV_HUGEPAGE); // advice: a refusal changes nothing
		al_arena_lo = al_arena_next = lo;
		al_arena_hi = lo + AL_ARENA;
	}
	errno = e;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
	if (addr == NULL && fd == -1 && off == 0 && prot == (PROT_READ | PROT_WRITE) &&
	    flags == (MAP_ANONYMOUS | MAP_PRIVATE) && len > 0 && len <= AL_CARVED_MAX) {
		uintptr_t q = al_carve(&al_arena_next, al_arena_hi, (len + 4095) & ~(size_t)4095); // 4 KiB pages: al_thp_arena_init
		if (q != 0)
			return (void *)q;
	}
	long p = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (p == -1)
		return MAP_FAILED; // errno set
	if (fd == -1 && prot == (PROT_READ | PROT_WRITE) && flags == (MAP_ANONYMOUS | MAP_PRIVATE | MAP_FIXED) &&
	    ((uintptr_t)p & (AL_HUGE - 1)) == 0 && len >= AL_HUGE &&
	    __atomic_fetch_add(&al_heap_thp_advised, 1, __ATOMIC_RELAXED) < 2) {
		int e = errno;
		size_t n = len < 2 * AL_HUGE ? len & ~(AL_HUGE - 1) : 2 * AL_HUGE;
		syscall(SYS_madvise, p, n, MADV_HUGEPAGE); // advice: a refusal changes nothing
		errno = e;
	}
	return (void *)p;
}

#else

void al_thp_arena_init(void) {}

#endif
