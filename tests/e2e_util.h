/* e2e_util.h - test helpers shared by the end-to-end tests that drive the built binary
 * (header-only): the binary under test and a scratch directory at the start, the closing
 * line and the directory's removal at the end, run a formatted shell command line, look
 * for a text in a file, compare two files, the final top-1 of a training log, the train
 * records of a run's metrics; with test_util.h's temporary directories, whole-file reads
 * and kernel start-up.
 */
#ifndef VT_E2E_UTIL_H
#define VT_E2E_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "test_util.h"

/* The binary under test into bin: $VT_BIN, else vitrain; a name without '/' is taken
 * from the working directory ("./" put before it: run_tests.sh starts every test at the
 * repository root). */
static inline void e2e_bin(char *bin, size_t len) {
    const char *b = getenv("VT_BIN");
    if (!b || !*b) b = "vitrain";
    snprintf(bin, len, "%s%s", strchr(b, '/') ? "" : "./", b);
}

/* The start of a test: e2e_bin, then a fresh scratch directory $TMPDIR/vt_<tag>_XXXXXX
 * (test_util.h's test_tmpdir) into tmp. 0, or 1 after saying why. */
static inline int e2e_start(const char *tag, char *bin, size_t bin_len, char *tmp, size_t tmp_len) {
    e2e_bin(bin, bin_len);
    return test_tmpdir(tmp, tmp_len, tag);
}

/* The end of a test that used a scratch directory: the closing line (harness.h's
 * test_summary), then tmp removed if every check passed and $VT_KEEP is not set, else
 * kept and named on stderr for the diagnosis. Returns main's exit code. */
static inline int e2e_finish(const char *tmp) {
    int rc = test_summary();
    if (rc == 0 && !getenv("VT_KEEP")) test_rm_rf(tmp);
    else fprintf(stderr, "files kept in %s\n", tmp);
    return rc;
}

/* Run a shell command line; returns the exit code (-1 if it did not exit normally). */
static inline int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int run(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc == -1 || !WIFEXITED(rc)) return -1;
    return WEXITSTATUS(rc);
}

/* The top-1 of a training log's "final: top-1 X%" line, or -1 without one. */
static inline double final_top1(const char *log) {
    char *s = test_read_file(log, NULL);
    const char *p = s ? strstr(s, "final: top-1 ") : NULL;
    double v = p ? atof(p + strlen("final: top-1 ")) : -1.0;
    free(s);
    return v;
}

/* 1 if the file at path contains needle; else 0, and the file (or that it is missing) is
 * printed to stderr for the failure's diagnosis. */
static inline int file_contains(const char *path, const char *needle) {
    char *s = test_read_file(path, NULL);
    int r = s && strstr(s, needle) != NULL;
    if (!r) fprintf(stderr, "--- %s does not contain '%s'; it reads:\n%s\n", path, needle, s ? s : "(missing)");
    free(s);
    return r;
}

/* 1 if both files exist and hold the same bytes. */
static inline int same_bytes(const char *a, const char *b) {
    size_t la, lb;
    char *x = test_read_file(a, &la), *y = test_read_file(b, &lb);
    int r = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return r;
}

/* Raw text of "key": value in a JSON line (up to the next ',' or '}'), into out. */
static inline int json_raw(const char *line, const char *key, char *out, size_t len) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return 0;
    p += strlen(pat);
    size_t n = strcspn(p, ",}\n");
    if (n >= len) n = len - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

/* Train records of metrics.jsonl: "step loss grad_norm" text lines joined by '\n'. */
static inline char *train_records_text(const char *dir, int *count) {
    char path[1024];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *s = test_read_file(path, NULL);
    *count = 0;
    if (!s) return NULL;
    size_t cap = strlen(s) + 1, o = 0;
    char *out = calloc(cap, 1);
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "\"kind\":\"train\"")) continue;
        char st[64], lo[64], gn[64];
        if (!json_raw(line, "step", st, sizeof st) || !json_raw(line, "loss", lo, sizeof lo) ||
            !json_raw(line, "grad_norm", gn, sizeof gn))
            continue;
        o += (size_t)snprintf(out + o, cap - o, "%s %s %s\n", st, lo, gn);
        (*count)++;
    }
    free(s);
    return out;
}

/* A test that cannot run here: says why on stdout and prints the closing line with one
 * skip; returns main's exit code (0). */
static inline int test_skip(const char *test, const char *why) {
    printf("%s: skipped: %s\n0 passed, 0 failed, 1 skipped\n", test, why);
    return 0;
}

#endif
