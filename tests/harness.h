/* harness.h - the tiny test harness every tests/test_*.c uses.
 *
 * CHECK(cond, fmt, ...) and CHECK_CLOSE(got, want, atol, rtol, fmt, ...) count a
 * pass or print "file:line: FAIL ..." with the values. A test binary ends with
 *   return test_summary();
 * which prints "N passed, N failed" (the CI-readable closing line) and returns
 * non-zero if anything failed. Header-only: counters are static per binary.
 */
#ifndef VT_TEST_HARNESS_H
#define VT_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>

static int test_passed_count = 0, test_failed_count = 0;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (cond) {                                                   \
            test_passed_count++;                                      \
        } else {                                                      \
            test_failed_count++;                                      \
            fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                             \
            fputc('\n', stderr);                                      \
        }                                                             \
    } while (0)

/* |got - want| <= atol + rtol |want|, and both finite-or-equal. */
static inline int test_close(double got, double want, double atol, double rtol) {
    if (isnan(got) || isnan(want)) return 0;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

#define CHECK_CLOSE(got, want, atol, rtol, ...)                                    \
    do {                                                                           \
        double g_ = (double)(got), w_ = (double)(want);                            \
        if (test_close(g_, w_, (atol), (rtol))) {                                  \
            test_passed_count++;                                                   \
        } else {                                                                   \
            test_failed_count++;                                                   \
            fprintf(stderr, "%s:%d: FAIL got %.9g want %.9g (diff %.3g): ",        \
                    __FILE__, __LINE__, g_, w_, fabs(g_ - w_));                    \
            fprintf(stderr, __VA_ARGS__);                                          \
            fputc('\n', stderr);                                                   \
        }                                                                          \
    } while (0)

/* Compare arrays; counts ONE check, reports the worst element. */
#define CHECK_ARRAY_CLOSE(got, want, n, atol, rtol, ...)                           \
    do {                                                                           \
        long bad_ = -1; double worst_ = -1;                                        \
        for (long i_ = 0; i_ < (long)(n); i_++) {                                  \
            double g_ = (double)(got)[i_], w_ = (double)(want)[i_];                \
            double excess_ = fabs(g_ - w_) - ((atol) + (rtol) * fabs(w_));         \
            if (isnan(g_) != isnan(w_) || (!isnan(g_) && excess_ > worst_ && excess_ > 0)) { \
                if (bad_ < 0 || excess_ > worst_) { bad_ = i_; worst_ = isnan(excess_) ? 1e30 : excess_; } \
            }                                                                      \
        }                                                                          \
        if (bad_ < 0) {                                                            \
            test_passed_count++;                                                   \
        } else {                                                                   \
            test_failed_count++;                                                   \
            fprintf(stderr, "%s:%d: FAIL at [%ld] got %.9g want %.9g: ", __FILE__, \
                    __LINE__, bad_, (double)(got)[bad_], (double)(want)[bad_]);    \
            fprintf(stderr, __VA_ARGS__);                                          \
            fputc('\n', stderr);                                                   \
        }                                                                          \
    } while (0)

static inline int test_summary(void) {
    printf("%d passed, %d failed\n", test_passed_count, test_failed_count);
    return test_failed_count ? 1 : 0;
}

#endif
