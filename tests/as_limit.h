/* as_limit.h - test helper (header-only): limit the process's address space to its current
 * size plus a given number of bytes, so an allocation beyond what a test allows fails
 * instead of succeeding on a large machine; restore the old limit afterwards.
 *
 *   struct rlimit old;
 *   if (as_limit_above(2LL << 30, &old) == 0) { ... ; setrlimit(RLIMIT_AS, &old); }
 *
 * Sanitizer builds reserve large shadow regions: callers skip the limit there.
 */
#ifndef VT_TEST_AS_LIMIT_H
#define VT_TEST_AS_LIMIT_H

#include <stdio.h>
#include <sys/resource.h>

/* 0 when the limit is set (the previous one in *old), -1 when it could not be. */
static inline int as_limit_above(long long above, struct rlimit *old) {
    if (getrlimit(RLIMIT_AS, old) != 0) return -1;
    long long vm_pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lld", &vm_pages) != 1) vm_pages = 0;
        fclose(f);
    }
    if (vm_pages <= 0) return -1;
    struct rlimit lim = *old;
    lim.rlim_cur = (rlim_t)(vm_pages * 4096 + above);
    if (old->rlim_max != RLIM_INFINITY && lim.rlim_cur > old->rlim_max) lim.rlim_cur = old->rlim_max;
    return setrlimit(RLIMIT_AS, &lim) == 0 ? 0 : -1;
}

#endif
