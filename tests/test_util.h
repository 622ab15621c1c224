/* test_util.h - the scaffolding test binaries share (header-only): the kernel table (or a
 * clear failure), a private temporary directory, paths in it and its removal, a whole
 * file read into memory, and an address-space cap for out-of-memory paths. Tape-based
 * tests start through test_runtime.h, end-to-end tests drive the binary through
 * e2e_util.h; both build on this.
 */
#ifndef VT_TEST_UTIL_H
#define VT_TEST_UTIL_H

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "kernels.h"

/* The kernel table for this CPU (VT_ISA honoured). Returns 0, or 1 after printing
 * "vt_kernels_init: <why>" on stderr: the test binary then exits 1 at once. */
static inline int test_kernels_init(void) {
    char err[256];
    if (vt_kernels_init(err, sizeof err) == 0) return 0;
    fprintf(stderr, "vt_kernels_init: %s\n", err);
    return 1;
}

/* dir (n bytes) = a fresh directory "$TMPDIR/vt_<tag>_XXXXXX" ($TMPDIR unset: /tmp).
 * Returns 0, or 1 after perror. */
static inline int test_tmpdir(char *dir, size_t n, const char *tag) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, n, "%s/vt_%s_XXXXXX", base && *base ? base : "/tmp", tag);
    if (mkdtemp(dir)) return 0;
    perror("mkdtemp");
    return 1;
}

static inline int test_rm_entry_(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Remove dir and everything below it (links are removed, not followed). */
static inline void test_rm_rf(const char *dir) { nftw(dir, test_rm_entry_, 16, FTW_DEPTH | FTW_PHYS); }

/* "dir/name" in one of 4 rotating static buffers: up to 4 paths may be held at once. */
static inline const char *test_path(const char *dir, const char *name) {
    static char buf[4][512];
    static int k = 0;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* The whole file at path, malloc'd and followed by a NUL (so text can use str*), its byte
 * count into *len when len is not NULL; NULL (and *len 0) if it cannot be opened or
 * read in full. */
static inline char *test_read_file(const char *path, size_t *len) {
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)n + 1)) != NULL) {
        if (fread(b, 1, (size_t)n, f) == (size_t)n) {
            b[n] = '\0';
            if (len) *len = (size_t)n;
        } else {
            free(b);
            b = NULL;
        }
    }
    fclose(f);
    return b;
}

/* Cap this process's address space (RLIMIT_AS) at what it maps now plus `headroom` bytes,
 * so an allocation beyond that fails as on a machine without the memory; the limit before
 * into *old (restore it with setrlimit(RLIMIT_AS, old)). Returns 0 if the cap is in
 * place, -1 if the limit or the mapped size could not be read or the cap set (*old is
 * valid unless getrlimit failed). */
static inline int test_cap_address_space(uint64_t headroom, struct rlimit *old) {
    if (getrlimit(RLIMIT_AS, old) != 0) return -1;
    long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lld", &pages) != 1) pages = 0;
        fclose(f);
    }
    if (pages <= 0) return -1;
    struct rlimit lim = *old;
    lim.rlim_cur = (rlim_t)(pages * 4096 + (long long)headroom);
    return setrlimit(RLIMIT_AS, &lim);
}

#endif
