/* e2e_util.h - test helpers shared by the end-to-end tests that drive the built binary
 * (header-only): run a formatted shell command line, read a whole file into memory,
 * look for a text in a file, compare two files, the binary and scratch directory of a test.
 */
#ifndef VT_E2E_UTIL_H
#define VT_E2E_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Run a shell command line; returns the exit code (-1 if it did not exit normally). */
static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc == -1 || !WIFEXITED(rc)) return -1;
    return WEXITSTATUS(rc);
}

/* Whole file as a NUL-terminated malloc'd string (NULL if it cannot be opened); its byte
 * count into *len when len is not NULL. */
static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    fclose(f);
    b[got] = '\0';
    if (len) *len = got;
    return b;
}

/* 1 if the file at path contains needle; else 0, and the file (or that it is missing) is
 * printed to stderr for the failure's diagnosis. */
static inline int file_contains(const char *path, const char *needle) {
    char *s = slurp(path, NULL);
    int r = s && strstr(s, needle) != NULL;
    if (!r) fprintf(stderr, "--- %s does not contain '%s'; it reads:\n%s\n", path, needle, s ? s : "(missing)");
    free(s);
    return r;
}

/* The binary under test ($VT_BIN, default ./vitrain; a bare name gets "./") into bin and a
 * new scratch directory /tmp/vt_<name>_XXXXXX into tmp. 0, or 1 with the reason printed. */
static inline int e2e_start(const char *name, char *bin, size_t bin_len, char *tmp, size_t tmp_len) {
    const char *b = getenv("VT_BIN");
    if (!b || !*b) b = "vitrain";
    snprintf(bin, bin_len, "%s%s", strchr(b, '/') ? "" : "./", b);
    snprintf(tmp, tmp_len, "/tmp/vt_%s_XXXXXX", name);
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    return 0;
}

/* 1 if both files exist and hold the same bytes. */
static inline int same_bytes(const char *a, const char *b) {
    size_t la, lb;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    int r = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return r;
}

#endif
