/* npz.c - .npy headers and .npz archives (contract in npz.h).
 *
 * ZIP layout (APPNOTE 6.3, no ZIP64): per entry a local file header (signature
 * 0x04034b50, version 20, no flags, method 0 = stored, CRC-32, sizes, name) followed by
 * the .npy bytes; then one central directory header per entry (0x02014b50, with the
 * local header's offset) and the end-of-central-directory record (0x06054b50). The
 * CRC of an entry is computed before its header is written, so the file is written
 * front to back once.
 */
#include "npz.h"
#include "durable.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

unsigned char *vt_npy_header(const char *descr, int ndim, const int64_t *shape, size_t *len_out) {
    VT_ASSERT(descr && ndim >= 0 && ndim <= 32 && (ndim == 0 || shape), "vt_npy_header: bad args");
    /* numpy.lib.format (1.24): dict repr with sorted keys, then spare spaces so the
     * first axis can grow in place (21 - digits of shape[0]), then spaces and '\n' so
     * that magic (6) + version (2) + length (2) + header is a multiple of 64; the
     * padding is always at least one space. */
    char dict[1024];
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < ndim; d++) {
        VT_ASSERT(shape[d] >= 0, "vt_npy_header: negative shape[%d]", d);
        len += snprintf(dict + len, sizeof dict - (size_t)len, d ? ", %lld" : "%lld", (long long)shape[d]);
    }
    len += snprintf(dict + len, sizeof dict - (size_t)len, ndim == 1 ? ",), }" : "), }");
    if (ndim > 0) {
        char first[32];
        int digits = snprintf(first, sizeof first, "%lld", (long long)shape[0]);
        for (int k = 0; k < 21 - digits; k++) dict[len++] = ' ';
    }
    int hlen = len + 1;
    int padlen = 64 - (10 + hlen) % 64;
    size_t total = (size_t)(10 + hlen + padlen);
    unsigned char *head = vt_xmalloc(total);
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (unsigned char)((hlen + padlen) & 0xff);
    head[9] = (unsigned char)(((hlen + padlen) >> 8) & 0xff);
    memcpy(head + 10, dict, (size_t)len);
    memset(head + 10 + len, ' ', (size_t)padlen);
    head[total - 1] = '\n';
    *len_out = total;
    return head;
}

typedef struct {
    char *name;           /* "NAME.npy" */
    uint32_t crc, size, offset;
} npz_entry;

struct vt_npz {
    char *path;
    vt_durable_file f;    /* PATH.tmp until vt_npz_close commits it */
    uint64_t at;          /* bytes written */
    npz_entry *e;
    int n, cap;
};

#define ZIP_LIMIT 0xffffffffull

static void put16(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v) {
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}

static vt_status npz_write(vt_npz *z, const void *data, size_t bytes) {
    vt_status s = vt_durable_write(&z->f, data, bytes);
    if (s == VT_OK) z->at += bytes;
    return s;
}

vt_status vt_npz_open(vt_npz **out, const char *path) {
    vt_npz *z = vt_xcalloc(1, sizeof *z);
    size_t len = strlen(path);
    z->path = vt_xmalloc(len + 1);
    memcpy(z->path, path, len + 1);
    vt_status s = vt_durable_open(&z->f, z->path);
    if (s != VT_OK) {
        free(z->path);
        free(z);
        *out = NULL;
        return s;
    }
    *out = z;
    return VT_OK;
}

/* One stored entry: header bytes of the .npy, then data. */
static vt_status add_entry(vt_npz *z, const char *name, const unsigned char *head, size_t hlen,
                           const void *data, uint64_t bytes) {
    size_t nlen = strlen(name) + 4;
    uint64_t size = hlen + bytes;
    if (size > ZIP_LIMIT || z->at + 30 + nlen + size > ZIP_LIMIT)
        return vt_fail(VT_ERR_RUNTIME, "%s: array '%s' (%llu bytes) would take the archive past 4 GiB, the "
                       "limit of a .npz without ZIP64", z->path, name, (unsigned long long)size);
    for (int i = 0; i < z->n; i++)
        VT_ASSERT(strncmp(z->e[i].name, name, nlen - 4) != 0 || z->e[i].name[nlen - 4] != '.',
                  "npz: duplicate array '%s'", name);
    if (z->n == z->cap) {
        z->cap = z->cap ? 2 * z->cap : 8;
        z->e = vt_xrealloc(z->e, (size_t)z->cap * sizeof *z->e);
    }
    npz_entry *e = &z->e[z->n];
    e->name = vt_xmalloc(nlen + 1);
    snprintf(e->name, nlen + 1, "%s.npy", name);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, head, (uInt)hlen);
    for (uint64_t off = 0; off < bytes;) {   /* zlib takes uInt lengths */
        uint64_t chunk = bytes - off > (1u << 30) ? (1u << 30) : bytes - off;
        crc = crc32(crc, (const Bytef *)data + off, (uInt)chunk);
        off += chunk;
    }
    e->crc = (uint32_t)crc;
    e->size = (uint32_t)size;
    e->offset = (uint32_t)z->at;
    z->n++;
    unsigned char lh[30] = {0};
    put32(lh, 0x04034b50u);
    put16(lh + 4, 20);               /* version needed: 2.0 */
    put16(lh + 12, 0x21);            /* DOS date 1980-01-01 */
    put32(lh + 14, e->crc);
    put32(lh + 18, e->size);
    put32(lh + 22, e->size);
    put16(lh + 26, (uint32_t)nlen);
    vt_status s = npz_write(z, lh, sizeof lh);
    if (s == VT_OK) s = npz_write(z, e->name, nlen);
    if (s == VT_OK) s = npz_write(z, head, hlen);
    if (s == VT_OK) s = npz_write(z, data, (size_t)bytes);
    return s;
}

static vt_status add_array(vt_npz *z, const char *name, const char *descr, size_t esize, const void *data,
                           int ndim, const int64_t *shape) {
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= (uint64_t)shape[d];
    VT_ASSERT(n == 0 || data, "npz: array '%s' without data", name);
    size_t hlen;
    unsigned char *head = vt_npy_header(descr, ndim, shape, &hlen);
    vt_status s = add_entry(z, name, head, hlen, data, n * esize);
    free(head);
    return s;
}

vt_status vt_npz_add_f32(vt_npz *z, const char *name, const float *data, int ndim, const int64_t *shape) {
    return add_array(z, name, "<f4", 4, data, ndim, shape);
}

vt_status vt_npz_add_i64(vt_npz *z, const char *name, const int64_t *data, int ndim, const int64_t *shape) {
    return add_array(z, name, "<i8", 8, data, ndim, shape);
}

/* Next code point of UTF-8 text at *s (advancing it); invalid bytes give U+FFFD. */
static uint32_t utf8_next(const unsigned char **s) {
    const unsigned char *p = *s;
    uint32_t c = p[0];
    int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (n < 0) {
        *s = p + 1;
        return 0xfffd;
    }
    c = n == 0 ? c : c & (0x3fu >> n);
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            *s = p + i;
            return 0xfffd;
        }
        c = c << 6 | (p[i] & 0x3f);
    }
    *s = p + n + 1;
    return c;
}

vt_status vt_npz_add_str(vt_npz *z, const char *name, const char *const *strs, int64_t n) {
    int64_t w = 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t len = 0;
        for (const unsigned char *p = (const unsigned char *)strs[i]; *p; len++) utf8_next(&p);
        if (len > w) w = len;
    }
    uint32_t *u = calloc((size_t)(n * w) + 1, sizeof *u);
    if (!u) return vt_fail(VT_ERR_RUNTIME, "%s: out of memory for %lld strings of %lld characters", z->path,
                           (long long)n, (long long)w);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = 0;
        for (const unsigned char *p = (const unsigned char *)strs[i]; *p; k++) u[i * w + k] = utf8_next(&p);
    }
    char descr[32];
    snprintf(descr, sizeof descr, "<U%lld", (long long)w);
    vt_status s = add_array(z, name, descr, (size_t)w * 4, u, 1, &n);
    free(u);
    return s;
}

static void npz_free(vt_npz *z) {
    for (int i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    free(z->path);
    free(z);
}

void vt_npz_abort(vt_npz *z) {
    if (!z) return;
    vt_durable_abort(&z->f);
    npz_free(z);
}

vt_status vt_npz_close(vt_npz *z) {
    uint64_t cd_start = z->at;
    vt_status s = VT_OK;
    for (int i = 0; i < z->n && s == VT_OK; i++) {
        const npz_entry *e = &z->e[i];
        size_t nlen = strlen(e->name);
        unsigned char ch[46] = {0};
        put32(ch, 0x02014b50u);
        put16(ch + 4, 20);
        put16(ch + 6, 20);
        put16(ch + 14, 0x21);
        put32(ch + 16, e->crc);
        put32(ch + 20, e->size);
        put32(ch + 24, e->size);
        put16(ch + 28, (uint32_t)nlen);
        put32(ch + 42, e->offset);
        s = npz_write(z, ch, sizeof ch);
        if (s == VT_OK) s = npz_write(z, e->name, nlen);
    }
    if (s == VT_OK && (z->at + 22 > ZIP_LIMIT || z->n > 0xffff))
        s = vt_fail(VT_ERR_RUNTIME, "%s: archive past 4 GiB or 65535 arrays, the limit without ZIP64", z->path);
    if (s == VT_OK) {
        unsigned char end[22] = {0};
        put32(end, 0x06054b50u);
        put16(end + 8, (uint32_t)z->n);
        put16(end + 10, (uint32_t)z->n);
        put32(end + 12, (uint32_t)(z->at - cd_start));
        put32(end + 16, (uint32_t)cd_start);
        s = npz_write(z, end, sizeof end);
    }
    if (s == VT_OK) s = vt_durable_commit(&z->f);
    else vt_durable_abort(&z->f);
    npz_free(z);
    return s;
}

/* --------------------------------------------------------------------- .npy write */

vt_status vt_npy_write(const char *path, const float *data, int ndim, const int64_t *shape) {
    VT_ASSERT(path && ndim >= 0 && ndim <= 32 && (ndim == 0 || shape), "vt_npy_write: bad args");
    size_t total;
    unsigned char *head = vt_npy_header("<f4", ndim, shape, &total);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    VT_ASSERT(n == 0 || data != NULL, "vt_npy_write: NULL data for %lld elements", (long long)n);

    vt_durable_file a;
    vt_status s = vt_durable_open(&a, path);
    if (s == VT_OK) s = vt_durable_write(&a, head, total);
    if (s == VT_OK) s = vt_durable_write(&a, data, (size_t)n * 4);
    if (s == VT_OK) s = vt_durable_commit(&a);
    free(head);
    return s;
}
