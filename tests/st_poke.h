/* st_poke.h - a test helper: one value put into a safetensors file in place, with the
 * file's checksum of that tensor updated, so the file differs from what vt_st_write
 * wrote by that value only (vt_st_write itself refuses a NaN or an infinity). */
#ifndef VT_TEST_ST_POKE_H
#define VT_TEST_ST_POKE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"
#include "safetensors.h"

/* Put value into element 0 of tensor `name` of the safetensors file at path; 1 if done. */
static inline int poke_tensor(const char *path, const char *name, float value) {
    size_t n = 0;
    char *b = test_read_file(path, &n);
    if (!b || n < 8) { free(b); return 0; }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)(unsigned char)b[i] << (8 * i);
    char key[200], crc_key[200];
    snprintf(key, sizeof key, "\"%s\":{", name);
    snprintf(crc_key, sizeof crc_key, "\\\"%s\\\":\\\"", name);
    char save = b[8 + hlen];
    b[8 + hlen] = '\0';
    char *t = strstr(b + 8, key), *c = strstr(b + 8, crc_key);
    char *offs = t ? strstr(t, "\"data_offsets\":[") : NULL;
    long long beg = -1, end = -1;
    if (offs) sscanf(offs + strlen("\"data_offsets\":["), "%lld,%lld", &beg, &end);
    b[8 + hlen] = save;
    int ok = c && beg >= 0 && end > beg && 8 + hlen + (uint64_t)end <= n;
    if (ok) {
        char *data = b + 8 + hlen + beg;
        memcpy(data, &value, sizeof value);
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", vt_crc32(data, (size_t)(end - beg)));
        memcpy(c + strlen(crc_key), hex, 8);
        FILE *f = fopen(path, "wb");
        ok = f && fwrite(b, 1, n, f) == n;
        if (f) ok = fclose(f) == 0 && ok;
    }
    free(b);
    return ok;
}

#endif
