/* status.h - error reporting shared by every layer above the kernels.
 *
 * Two kinds of failure (design.md "Errors"):
 *  - a bug (shape mismatch between ops, NULL where forbidden): VT_ASSERT prints
 *    "file:line: message" and aborts. Always on, also in release builds.
 *  - a user or environment error (config, file, dataset, checkpoint, memory):
 *    the function records a message with vt_fail() and returns the status up
 *    the stack; only main.c turns it into an exit code (2 usage/config, 1 runtime).
 * The message buffer is thread-local, so loader threads do not clobber each other.
 */
#ifndef VT_STATUS_H
#define VT_STATUS_H

#include <stdio.h>
#include <stdlib.h>

typedef enum {
    VT_OK = 0,
    VT_ERR_RUNTIME = 1, /* file, data, checkpoint, memory: exit code 1 */
    VT_ERR_USAGE = 2    /* command line or config: exit code 2 */
} vt_status;

/* Record a printf-style message as the last error of this thread and return code. */
vt_status vt_fail(vt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prepend "context: " to the last error message (e.g. the file being loaded). */
vt_status vt_fail_context(vt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The last error message recorded on this thread ("" if none). */
const char *vt_last_error(void);

/* Clear the last error of this thread. */
void vt_clear_error(void);

void vt_assert_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

#define VT_ASSERT(cond, ...) \
    do { if (!(cond)) vt_assert_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)

/* Out of memory inside a training step or an evaluation batch, past what its owner
 * reserved before the first one (an arena block, the grad region, the tape's scratch, a
 * GEMM workspace: the ops that ask cannot return a status). Prints "vitrain: error: out
 * of memory: WHAT of N bytes ..." with the batch keys that lower it and ends the process
 * with exit status 1, VT_ERR_RUNTIME's: the out-of-memory twin of VT_ASSERT, for an
 * environment failure rather than a bug. Every file of a run is written to a temporary
 * name and renamed, so the run directory keeps its last checkpoint pair; under MPI the
 * launcher ends the other ranks. */
void vt_out_of_memory(const char *what, size_t bytes) __attribute__((noreturn));

/* Allocation that aborts on failure: only for small, bounded bookkeeping. Large
 * user-sized buffers use malloc and report VT_ERR_RUNTIME with the size. */
void *vt_xmalloc(size_t bytes);
void *vt_xcalloc(size_t n, size_t size);
void *vt_xrealloc(void *p, size_t bytes);
/* 64-byte aligned allocation (NULL on failure), released with free(). Blocks of 1 MiB
 * or more (arena blocks, grad regions, GEMM workspaces, optimizer state) are rounded up
 * to whole 2 MiB pages, 2 MiB aligned, and asked to be backed by transparent huge pages
 * (madvise; Debian's default THP mode only gives them on request): with 4 KiB pages the
 * step's passes over hundreds of MB miss the TLB, and in a VM each miss walks two page
 * tables. */
void *vt_aligned_alloc(size_t bytes);

/* The process's policy for large buffers, set once at start-up before any of them is
 * allocated (the vitrain command and the benchmarks that time its steps): buffers of
 * 1 MiB or more (model, optimizer, arenas, batches, GEMM workspaces) are mappings of
 * their own, given back to the system when freed. glibc would otherwise raise its mmap
 * threshold at the first such free and then keep later large buffers, once freed,
 * resident in its heap (the first step's arena blocks, a start-up probe's scratch),
 * which the memory estimate of `info` and the peak resident set of a run would pay for. */
void vt_alloc_policy(void);

#endif
