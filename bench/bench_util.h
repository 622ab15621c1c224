/* bench_util.h - what every benchmark of bench/ measures and reports with (bench only, not
 * part of vitrain; header-only): wall-clock and process CPU time, the median of a sample,
 * the CPU's name for the JSON lines, and the one optional count argument of bench_data
 * and bench_performer. The peak loops of bench_kernels and bench_train are fma_peak.h. */
#ifndef VT_BENCH_UTIL_H
#define VT_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Wall-clock seconds (CLOCK_MONOTONIC). */
static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process (all threads): work done, whatever the machine's load. */
static inline double bench_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v[0..n) in ascending order. */
static inline void bench_sort(double *v, int n) {
    if (n > 0) qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
}

/* The median of v[0..n) (sorted in place; 0 for n <= 0). */
static inline double bench_median(double *v, int n) {
    if (n <= 0) return 0;
    bench_sort(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* "model name (family F, model M)" of the first CPU in /proc/cpuinfo into out, quotes
 * and backslashes blanked (it goes into JSON strings). */
static inline void bench_cpu(char *out, size_t len) {
    char name[128] = "unknown", line[256];
    int family = -1, model = -1;
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *v = strchr(line, ':');
        if (!v) continue;
        v += 1 + (v[1] == ' ');
        v[strcspn(v, "\n")] = '\0';
        if (!strncmp(line, "model name", 10) && !strcmp(name, "unknown")) snprintf(name, sizeof name, "%s", v);
        else if (!strncmp(line, "cpu family", 10) && family < 0) family = atoi(v);
        else if (!strncmp(line, "model\t", 6) && model < 0) model = atoi(v);
    }
    if (f) fclose(f);
    for (char *c = name; *c; c++)
        if (*c == '"' || *c == '\\') *c = ' ';
    snprintf(out, len, "%s (family %d, model %d)", name, family, model);
}

/* argv[1], when given, as a whole number in [lo, hi] into *out (which otherwise keeps its
 * default). Returns 0 after printing "usage: <usage> (got ...)" for anything else: not a
 * number, out of range, or more than one argument. */
static inline int bench_count_arg(int argc, char **argv, const char *usage, long lo, long hi, long *out) {
    if (argc < 2) return 1;
    char *end;
    long v = strtol(argv[1], &end, 10);
    if (argc > 2 || *end || end == argv[1] || v < lo || v > hi) {
        fprintf(stderr, "usage: %s (got \"%s\"%s)\n", usage, argv[1], argc > 2 ? " and more" : "");
        return 0;
    }
    *out = v;
    return 1;
}

#endif
