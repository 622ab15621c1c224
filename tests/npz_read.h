/* npz_read.h - test helper: read one array of a .npz written by src/npz.c (stored ZIP
 * entries), independently of the writer: the central directory is found from the end
 * record, the entry's local header checked, its CRC-32 recomputed with zlib, and the .npy
 * header parsed for descr and shape. Header-only. */
#ifndef VT_TEST_NPZ_READ_H
#define VT_TEST_NPZ_READ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct {
    char descr[16];
    int ndim;
    int64_t shape[8];
    const unsigned char *data; /* into the caller's file buffer */
    size_t bytes;
} npz_array;

static inline uint32_t npz_rd16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static inline uint32_t npz_rd32(const unsigned char *p) { return npz_rd16(p) | npz_rd16(p + 2) << 16; }

/* Array NAME (without ".npy") of the archive in buf (len bytes); 0 if absent or malformed
 * (a message on stderr says which). */
static inline int npz_find(const unsigned char *buf, size_t len, const char *name, npz_array *out) {
    if (len < 22 || npz_rd32(buf + len - 22) != 0x06054b50u) {
        fprintf(stderr, "npz: no end-of-central-directory record at the end\n");
        return 0;
    }
    const unsigned char *end = buf + len - 22;
    uint32_t n = npz_rd16(end + 10), cd = npz_rd32(end + 16);
    char want[256];
    snprintf(want, sizeof want, "%s.npy", name);
    size_t at = cd;
    for (uint32_t i = 0; i < n; i++) {
        if (at + 46 > len || npz_rd32(buf + at) != 0x02014b50u) {
            fprintf(stderr, "npz: bad central directory entry %u\n", i);
            return 0;
        }
        uint32_t crc = npz_rd32(buf + at + 16), size = npz_rd32(buf + at + 20), nl = npz_rd16(buf + at + 28);
        uint32_t xl = npz_rd16(buf + at + 30), cl = npz_rd16(buf + at + 32), off = npz_rd32(buf + at + 42);
        if (nl == strlen(want) && memcmp(buf + at + 46, want, nl) == 0) {
            if (npz_rd16(buf + at + 10) != 0 || npz_rd32(buf + off) != 0x04034b50u) {
                fprintf(stderr, "npz: %s not stored or local header missing\n", want);
                return 0;
            }
            const unsigned char *p = buf + off + 30 + npz_rd16(buf + off + 26) + npz_rd16(buf + off + 28);
            if ((size_t)(p - buf) + size > len || crc32(crc32(0L, Z_NULL, 0), p, size) != crc) {
                fprintf(stderr, "npz: %s CRC or size wrong\n", want);
                return 0;
            }
            if (size < 10 || memcmp(p, "\x93NUMPY\x01\x00", 8) != 0) return 0;
            size_t hl = npz_rd16(p + 8);
            char head[1024];
            snprintf(head, sizeof head, "%.*s", (int)hl, (const char *)p + 10);
            const char *d = strstr(head, "'descr': '"), *s = strstr(head, "'shape': (");
            if (!d || !s) return 0;
            sscanf(d + 10, "%15[^']", out->descr);
            out->ndim = 0;
            for (const char *q = s + 10; *q && *q != ')' && out->ndim < 8;) {
                char *e;
                long long v = strtoll(q, &e, 10);
                if (e == q) break;
                out->shape[out->ndim++] = v;
                q = e;
                while (*q == ',' || *q == ' ') q++;
            }
            out->data = p + 10 + hl;
            out->bytes = size - 10 - hl;
            return 1;
        }
        at += 46 + nl + xl + cl;
    }
    fprintf(stderr, "npz: no array '%s'\n", name);
    return 0;
}

/* Element i of an int64 array (the data of a ZIP entry need not be aligned). */
static inline int64_t npz_i64(const npz_array *a, size_t i) {
    int64_t v;
    memcpy(&v, a->data + 8 * i, sizeof v);
    return v;
}

#endif
