/* status.c - the thread-local last-error message, assertions, checked allocation. */
#include "status.h"

#include <stdarg.h>
#include <string.h>

static _Thread_local char last_error[2048];

vt_status vt_fail(vt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

vt_status vt_fail_context(vt_status code, const char *fmt, ...) {
    char prefix[1024], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    snprintf(last_error, sizeof last_error, "%s: %s", prefix, old);
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

void *vt_aligned_alloc(size_t bytes) {
    size_t rounded = (bytes + 63) / 64 * 64;
    return aligned_alloc(64, rounded ? rounded : 64);
}
