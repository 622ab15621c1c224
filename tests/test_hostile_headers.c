/* test_hostile_headers.c - safetensors headers built to make the reader work hard
 * (src/safetensors.c): time and memory bounded by what the file weighs.
 *
 * Covers: many metadata keys, many zero-size tensors, many tensor_crc32 entries, and the
 * same with a duplicate as the last entry (the check that finds it must not cost n^2).
 * Each family is read at two sizes, n and 16n: linear work grows 16 times (n log n a
 * little more, and caches and page faults add their part), quadratic work 256 times; the
 * test asserts the CPU-time ratio stays below 80, a generous multiple of linear and far
 * below quadratic, each time the fastest of a few reads, and only when the large read
 * takes more than 50 ms (below that, noise rules). Every read runs under an
 * address-space limit of the process's current size plus 64 times the file plus 256 MiB
 * (not in sanitizer builds, whose allocator reserves more), so memory grows with the
 * file, never faster. Also: an escaped NUL in a tensor name or metadata key is an error,
 * as is a FIFO or a device given as the file, without blocking.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "test_util.h"
#include "safetensors.h"

static char dir[64];

typedef struct {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s) {
    size_t len = strlen(s);
    if (b->n + len + 1 > b->cap) {
        b->cap = (b->n + len + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, len + 1);
    b->n += len;
}

/* A safetensors file at path: the header JSON, padded, then data_bytes zero bytes. */
static void write_file(const char *path, const buf *json, size_t data_bytes) {
    size_t padded = (json->n + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    uint64_t h = padded;
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(h >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(json->p, 1, json->n, f);
    for (size_t i = json->n; i < padded; i++) fputc(' ', f);
    for (size_t i = 0; i < data_bytes; i++) fputc(0, f);
    fclose(f);
}

typedef enum { META_KEYS, ZERO_TENSORS, CRC_ENTRIES } family;
static const char *const family_name[] = {"metadata keys", "zero-size tensors", "tensor_crc32 entries"};

/* The header of family f with n entries (dup: the last entry repeats the first name). */
static void build(buf *b, family f, int n, int dup) {
    char e[128];
    b->n = 0;
    put(b, "{");
    if (f == META_KEYS) {
        put(b, "\"__metadata__\":{");
        for (int i = 0; i < n; i++) {
            snprintf(e, sizeof e, "%s\"key%d\":\"v\"", i ? "," : "", dup && i == n - 1 ? 0 : i);
            put(b, e);
        }
        put(b, "},\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}");
    } else {
        if (f == CRC_ENTRIES) {
            put(b, "\"__metadata__\":{\"tensor_crc32\":\"{");
            for (int i = 0; i < n; i++) {
                snprintf(e, sizeof e, "%s\\\"t%d\\\":\\\"00000000\\\"", i ? "," : "",
                         dup && i == n - 1 ? 0 : i);
                put(b, e);
            }
            put(b, "}\"},");
        }
        for (int i = 0; i < n; i++) {
            snprintf(e, sizeof e, "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}",
                     i ? "," : "", dup && i == n - 1 && f == ZERO_TENSORS ? 0 : i);
            put(b, e);
        }
    }
    put(b, "}");
}

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Read path under the address-space limit; *seconds the CPU time it took. */
static vt_status read_bounded(const char *path, size_t file_bytes, double *seconds) {
    struct rlimit old;
    getrlimit(RLIMIT_AS, &old);
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(test_cap_address_space(64 * (long long)file_bytes + (256LL << 20), &old) == 0,
          "address-space limit set");
#endif
    vt_safetensors st;
    double t0 = cpu_seconds();
    vt_status s = vt_st_read(path, &st);
    *seconds = cpu_seconds() - t0;
    if (s == VT_OK) vt_st_free(&st);
    setrlimit(RLIMIT_AS, &old);
    return s;
}

static void test_family(family f, int n) {
    char path[128];
    buf b = {0};
    double t[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        int entries = k ? 16 * n : n;
        build(&b, f, entries, 0);
        snprintf(path, sizeof path, "%s/h%d_%d.safetensors", dir, (int)f, entries);
        write_file(path, &b, f == META_KEYS ? 4 : 0);
        /* the fastest of a few reads: less noise in the ratio */
        double best = 1e30;
        for (int r = 0; r < (k ? 2 : 5); r++) {
            double s;
            vt_status st = read_bounded(path, b.n, &s);
            CHECK(st == VT_OK, "%s: %d %s: %s", path, entries, family_name[f], vt_last_error());
            if (s < best) best = s;
        }
        t[k] = best;
        if (k == 1) {
            /* a duplicate as the last entry: found, and named */
            build(&b, f, entries, 1);
            write_file(path, &b, f == META_KEYS ? 4 : 0);
            double s;
            vt_status st = read_bounded(path, b.n, &s);
            const char *want = f == META_KEYS ? "duplicate __metadata__ key \"key0\""
                               : f == ZERO_TENSORS ? "duplicate tensor name \"t0\""
                                                   : "two entries for tensor \"t0\"";
            CHECK(st == VT_ERR_RUNTIME && strstr(vt_last_error(), want), "%d %s with a duplicate: %s",
                  entries, family_name[f], vt_last_error());
            CHECK(s < 4 * t[1] + 0.5, "%d %s with a duplicate: %.3f s, without %.3f s", entries,
                  family_name[f], s, t[1]);
        }
        unlink(path);
    }
    CHECK(t[1] < 0.05 || t[1] < 80 * t[0],
          "%s: %d entries read in %.3f s CPU, %d in %.3f s: the work grows faster than the file",
          family_name[f], n, t[0], 16 * n, t[1]);
    printf("%s: %d in %.4f s, %d in %.4f s CPU (ratio %.1f)\n", family_name[f], n, t[0], 16 * n,
           t[1], t[0] > 0 ? t[1] / t[0] : 0.0);
    free(b.p);
}

/* "\u0000" in a tensor name or a metadata key would end the name cJSON hands back:
 * "head.bias\u0000evil" must not load as "head.bias". */
static void test_escaped_nul(void) {
    const char *headers[] = {
        "{\"head.bias\\u0000evil\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"__metadata__\":{\"config\\u0000x\":\"{}\"},\"x\":{\"dtype\":\"F32\",\"shape\":[1],"
        "\"data_offsets\":[0,4]}}",
        /* inside the checksum object, a JSON text in a metadata string */
        "{\"__metadata__\":{\"tensor_crc32\":\"{\\\"x\\\\u0000y\\\":\\\"00000000\\\"}\"},"
        "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
    };
    char path[128];
    snprintf(path, sizeof path, "%s/nul.safetensors", dir);
    for (int i = 0; i < 3; i++) {
        buf b = {0};
        put(&b, headers[i]);
        write_file(path, &b, 4);
        free(b.p);
        vt_safetensors st;
        vt_status s = vt_st_read(path, &st);
        CHECK(s == VT_ERR_RUNTIME && strstr(vt_last_error(), path) &&
                  strstr(vt_last_error(), i < 2 ? "escaped NUL (\\u0000) at offset"
                                                : "holds an escaped NUL, \\u0000, which no name"),
              "header %d: %s", i, vt_last_error());
        if (s == VT_OK) vt_st_free(&st);
    }
    /* an escaped backslash before "u0000" is no NUL */
    buf b = {0};
    put(&b, "{\"a\\\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}");
    write_file(path, &b, 4);
    free(b.p);
    vt_safetensors st;
    CHECK(vt_st_read(path, &st) == VT_OK && st.n == 1 && strcmp(st.tensors[0].name, "a\\u0000b") == 0,
          "escaped backslash: %s", vt_last_error());
    if (st.n) vt_st_free(&st);
    unlink(path);
}

/* A FIFO or a device is refused at once: no open() waiting for a writer, no endless read. */
static void test_not_regular(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/fifo.safetensors", dir);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    vt_safetensors st;
    CHECK(vt_st_read(path, &st) == VT_ERR_RUNTIME &&
              strstr(vt_last_error(), "is a FIFO (named pipe), not a regular file"),
          "FIFO: %s", vt_last_error());
    unlink(path);
    CHECK(vt_st_read("/dev/zero", &st) == VT_ERR_RUNTIME &&
              strstr(vt_last_error(), "/dev/zero: the checkpoint (.safetensors file) is a character "
                     "device"),
          "/dev/zero: %s", vt_last_error());
}

int main(void) {
    if (test_tmpdir(dir, sizeof dir, "test_hostile")) return 1;
    test_family(META_KEYS, 8000);
    test_family(ZERO_TENSORS, 3000);
    test_family(CRC_ENTRIES, 3000);
    test_escaped_nul();
    test_not_regular();
    test_rm_rf(dir);
    return test_summary();
}
