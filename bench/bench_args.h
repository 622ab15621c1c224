/* bench_args.h - the one optional count argument of bench_data and bench_performer (bench
 * only, not part of vitrain; header-only). */
#ifndef VT_BENCH_ARGS_H
#define VT_BENCH_ARGS_H

#include <stdio.h>
#include <stdlib.h>

/* argv[1], when given, as a whole number in [lo, hi] into *out (which otherwise keeps its
 * default). Returns 0 after printing "usage: <usage> (got ...)" for anything else: not a
 * number, out of range, or more than one argument. */
static int bench_count_arg(int argc, char **argv, const char *usage, long lo, long hi, long *out) {
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
