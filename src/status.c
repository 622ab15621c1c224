/* status.c - the thread-local last-error message, assertions, checked allocation. */
#include "status.h"

#include <malloc.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static _Thread_local char last_error[2048];

vt_status vt_fail(vt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

vt_status vt_fail_context(vt_status code, const char *fmt, ...) {
    char old[sizeof last_error];
    memcpy(old, last_error, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : (size_t)n < sizeof last_error ? (size_t)n : sizeof last_error - 1;
    size_t room = sizeof last_error - 1 - used;
    const char *parts[2] = {": ", old};
    for (int i = 0; i < 2; i++) {
        size_t len = strlen(parts[i]);
        if (len > room) len = room;
        memcpy(last_error + used, parts[i], len);
        used += len;
        room -= len;
    }
    last_error[used] = '\0';
    return code;
}

const char *vt_last_error(void) { return last_error; }

void vt_clear_error(void) { last_error[0] = '\0'; }

void vt_assert_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s:%d: internal error: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

void vt_out_of_memory(const char *what, size_t bytes) {
    fflush(stdout);
    fprintf(stderr, "vitrain: error: out of memory: %s of %zu bytes (%.1f MiB), needed during a step beyond "
            "the memory reserved before the first one, which this process cannot allocate; lower "
            "train.batch_size (raising train.accum_steps as much keeps the global batch) or, during an "
            "evaluation, eval.batch_size\n", what, bytes, (double)bytes / 1048576.0);
    _exit(1); /* from any thread: the others hold nothing that must be flushed */
}

void *vt_xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    VT_ASSERT(p != NULL, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *vt_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    VT_ASSERT(p != NULL, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *vt_xrealloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    VT_ASSERT(q != NULL, "out of memory reallocating %zu bytes", bytes);
    return q;
}

void vt_alloc_policy(void) { mallopt(M_MMAP_THRESHOLD, 1 << 20); }

void *vt_aligned_alloc(size_t bytes) {
    const size_t page = (size_t)2 << 20;
    if (bytes >= page / 2) {
        size_t rounded = (bytes + page - 1) / page * page;
        void *p = aligned_alloc(page, rounded);
        if (p) madvise(p, rounded, MADV_HUGEPAGE); /* a hint: failure leaves 4 KiB pages */
        return p;
    }
    size_t rounded = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, rounded ? rounded : 64);
}
