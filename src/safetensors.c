/* safetensors.c - the safetensors codec: read (F32, BF16, F16 as float32) and write
 * (F32) with per-tensor CRC-32 and the finite check (contract in safetensors.h).
 *
 * Owns: the byte format of checkpoint files, their validation and integrity checks on
 * read. Does not own: how a file reaches the disk (durable.c), which tensors a model
 * saves or how they map onto parameters (vit.c), the training state's contents
 * (train_state.c), the pairs of a run directory (checkpoint.c).
 *
 * The safetensors header is JSON, parsed and printed here with cJSON. design.md names
 * config.c as the only cJSON user *for configs*; a file format's header is a separate
 * concern, and this file only ever treats the config as an opaque metadata string.
 * zlib supplies the CRC-32 (crc32_z), the one users can recompute with Python's zlib.
 *
 * Layout written: u64 LE header length n (n a multiple of 8, header padded with
 * spaces), the JSON header {"__metadata__": {...}, "name": {"dtype": "F32", "shape":
 * [...], "data_offsets": [b, e]}, ...} with tensors in the given order, then the data
 * of each tensor in the same order, contiguous, offsets relative to the data start.
 * Reading accepts any key order; it requires dtype F32, BF16 or F16 (widened exactly to
 * float32 by checkpoint_dtype.c), shape product * element size == e - b,
 * offsets inside the data section, the tensors covering it exactly without overlap or
 * gaps, unique names and string-valued metadata. Unknown keys inside a tensor entry
 * are ignored (other writers may add them). Data is little-endian, as on every host
 * this project builds for (x86-64). Work and memory on read are bounded by the file's
 * size: the header and data buffers are never larger than the file (BF16 and F16 data
 * are widened into a buffer twice their size).
 */
#include "safetensors.h"
#include "checkpoint_dtype.h"
#include "durable.h"
#include "input_file.h"
#include "json_nul.h"
#include "name_index.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>
#include <zlib.h>

#define ST_CRC_KEY "tensor_crc32"

/* ------------------------------------------------------------------- integrity */

uint32_t vt_crc32(const void *data, size_t n) {
    return (uint32_t)crc32_z(crc32_z(0L, Z_NULL, 0), data, n);
}

/* The tensor_crc32 metadata value: {"name": "8 hex digits", ...} (malloc'd). */
static char *st_crc_json(const vt_st_tensor *tensors, int n) {
    cJSON *o = cJSON_CreateObject();
    VT_ASSERT(o != NULL, "out of memory building a safetensors header");
    for (int i = 0; i < n; i++) {
        char hex[9];
        snprintf(hex, sizeof hex, "%08x",
                 vt_crc32(tensors[i].data, (size_t)tensors[i].size * sizeof(float)));
        VT_ASSERT(cJSON_AddStringToObject(o, tensors[i].name, hex) != NULL,
                  "out of memory building a safetensors header");
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    VT_ASSERT(s != NULL, "out of memory printing a safetensors header");
    return s;
}

/* 8 lowercase or uppercase hex digits -> value; -1 if s is anything else. */
static int64_t parse_hex32(const char *s) {
    if (strlen(s) != 8) return -1;
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v << 4 | (uint32_t)d;
    }
    return v;
}

/* One tensor_crc32 entry: the tensor's index in the file and the recorded CRC. */
typedef struct {
    const char *name;
    int tensor;
    uint32_t crc;
} crc_entry;

static int crc_entry_cmp(const void *a, const void *b) {
    return strcmp(((const crc_entry *)a)->name, ((const crc_entry *)b)->name);
}

/* Verify __metadata__["tensor_crc32"] against the stored bytes of each tensor (tensor i
 * at byte begins[i] of st->buffer) when present, and drop it from st's metadata. The
 * entries are matched to the tensors by sorting them (st->by_name is the tensors' order),
 * so the work is n log n in the tensor count. */
static vt_status st_verify_crc(const char *path, vt_safetensors *st, const int64_t *begins) {
    int k = -1;
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], ST_CRC_KEY) == 0) k = i;
    if (k < 0) return VT_OK;
    const char *text = st->meta_values[k];
    cJSON *o = vt_json_escaped_nul(text, strlen(text)) < 0 ? cJSON_Parse(text) : NULL;
    vt_status s = VT_OK;
    crc_entry *entries = NULL;
    int n_entries = 0;
    if (!cJSON_IsObject(o)) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: __metadata__[\"" ST_CRC_KEY "\"] is not a JSON object "
                    "mapping tensor names to CRC-32 hex strings%s", path,
                    vt_json_escaped_nul(text, strlen(text)) >= 0
                        ? " (it holds an escaped NUL, \\u0000, which no name may contain)" : "");
        goto out;
    }
    entries = vt_xcalloc((size_t)cJSON_GetArraySize(o) + 1, sizeof *entries);
    for (const cJSON *e = o->child; e && s == VT_OK; e = e->next) {
        if (!cJSON_IsString(e) || parse_hex32(e->valuestring) < 0)
            s = vt_fail(VT_ERR_RUNTIME, "%s: __metadata__[\"" ST_CRC_KEY "\"] entry \"%s\" is not "
                        "an 8-digit hex string", path, e->string);
        else if (!vt_st_find(st, e->string))
            s = vt_fail(VT_ERR_RUNTIME, "%s: __metadata__[\"" ST_CRC_KEY "\"] has a checksum for "
                        "tensor \"%s\", which the file does not contain (tensors were removed "
                        "after it was written)", path, e->string);
        else
            entries[n_entries++] = (crc_entry){e->string, (int)(vt_st_find(st, e->string) -
                                                                st->tensors),
                                               (uint32_t)parse_hex32(e->valuestring)};
    }
    if (s != VT_OK) goto out;
    qsort(entries, (size_t)n_entries, sizeof *entries, crc_entry_cmp);
    for (int i = 1; i < n_entries && s == VT_OK; i++)
        if (strcmp(entries[i].name, entries[i - 1].name) == 0)
            s = vt_fail(VT_ERR_RUNTIME, "%s: __metadata__[\"" ST_CRC_KEY "\"] has two entries for "
                        "tensor \"%s\"", path, entries[i].name);
    /* Both sorted by name, without duplicates: the i-th entry belongs to the i-th tensor
     * unless a tensor has none. */
    uint32_t *want = vt_xcalloc((size_t)st->n + 1, sizeof *want);
    for (int i = 0; i < st->n && s == VT_OK; i++) {
        const vt_st_tensor *t = &st->tensors[st->by_name[i]];
        if (i >= n_entries || strcmp(entries[i].name, t->name) != 0)
            s = vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\" has no entry in __metadata__[\""
                        ST_CRC_KEY "\"] (tensors were added after the file was written)", path,
                        t->name);
        else
            want[entries[i].tensor] = entries[i].crc;
    }
    for (int i = 0; i < st->n && s == VT_OK; i++) {
        const vt_st_tensor *t = &st->tensors[i];
        int64_t bytes = t->size * vt_st_dtype_size(t->dtype);
        uint32_t got = vt_crc32((const char *)st->buffer + begins[i], (size_t)bytes);
        if (got != want[i])
            s = vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": data checksum mismatch (CRC-32 of "
                        "its %lld bytes is %08x, the file records %08x): the file is corrupt "
                        "(flipped bits or a damaged copy)", path, t->name, (long long)bytes, got,
                        want[i]);
    }
    free(want);
out:
    free(entries);
    cJSON_Delete(o);
    if (s == VT_OK) {
        free(st->meta_keys[k]);
        free(st->meta_values[k]);
        for (int i = k; i + 1 < st->n_meta; i++) {
            st->meta_keys[i] = st->meta_keys[i + 1];
            st->meta_values[i] = st->meta_values[i + 1];
        }
        st->n_meta--;
        st->meta_keys[st->n_meta] = st->meta_values[st->n_meta] = NULL;
    }
    return s;
}

/* The first element of t that is NaN or infinite, as an error naming path, the tensor
 * and the element, followed by why it matters to the caller (`why`). */
static vt_status check_finite(const char *path, const vt_st_tensor *t, const char *why) {
    const uint32_t *u = (const uint32_t *)(const void *)t->data;
    const int64_t block = 4096;
    for (int64_t b0 = 0; b0 < t->size; b0 += block) {
        int64_t b1 = b0 + block < t->size ? b0 + block : t->size;
        uint32_t bad = 0;
        for (int64_t i = b0; i < b1; i++) bad |= (u[i] & 0x7f800000u) == 0x7f800000u;
        if (!bad) continue;
        for (int64_t i = b0; i < b1; i++) {
            if ((u[i] & 0x7f800000u) != 0x7f800000u) continue;
            char idx[160];
            size_t off = 0;
            int64_t rest = i;
            int64_t pos[8] = {0};
            for (int d = t->ndim - 1; d >= 0; d--) {
                pos[d] = t->shape[d] ? rest % t->shape[d] : 0;
                rest = t->shape[d] ? rest / t->shape[d] : 0;
            }
            off += (size_t)snprintf(idx + off, sizeof idx - off, "[");
            for (int d = 0; d < t->ndim && off < sizeof idx; d++)
                off += (size_t)snprintf(idx + off, sizeof idx - off, d ? ", %lld" : "%lld",
                                        (long long)pos[d]);
            if (off < sizeof idx) snprintf(idx + off, sizeof idx - off, "]");
            float v = t->data[i];
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\" holds %s at element %lld (index "
                           "%s): %s", path, t->name, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf",
                           (long long)i, idx, why);
        }
    }
    return VT_OK;
}

/* ------------------------------------------------------------- safetensors write */

static int64_t shape_product(int ndim, const int64_t *shape) {
    int64_t p = 1;
    for (int d = 0; d < ndim; d++) p *= shape[d];
    return p;
}

/* The header JSON (unpadded, malloc'd) for tensors laid out contiguously in order. */
static char *st_header_json(const vt_st_tensor *tensors, int n, const char *const *meta_keys,
                            const char *const *meta_values, int n_meta) {
    cJSON *root = cJSON_CreateObject();
    VT_ASSERT(root != NULL, "out of memory building a safetensors header");
    if (n_meta > 0) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        VT_ASSERT(meta != NULL, "out of memory building a safetensors header");
        for (int i = 0; i < n_meta; i++) {
            VT_ASSERT(meta_keys[i] && meta_values[i], "metadata entry %d is NULL", i);
            for (int j = 0; j < i; j++)
                VT_ASSERT(strcmp(meta_keys[i], meta_keys[j]) != 0,
                          "duplicate metadata key '%s'", meta_keys[i]);
            VT_ASSERT(cJSON_AddStringToObject(meta, meta_keys[i], meta_values[i]) != NULL,
                      "out of memory building a safetensors header");
        }
    }
    int64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const vt_st_tensor *t = &tensors[i];
        VT_ASSERT(t->name[0] != '\0' && strcmp(t->name, "__metadata__") != 0,
                  "tensor %d has an invalid name '%s'", i, t->name);
        VT_ASSERT(t->ndim >= 0 && t->ndim <= 8, "tensor '%s': ndim %d not in [0, 8]", t->name,
                  t->ndim);
        VT_ASSERT(t->size == shape_product(t->ndim, t->shape),
                  "tensor '%s': size %lld != shape product", t->name, (long long)t->size);
        VT_ASSERT(t->size == 0 || t->data != NULL, "tensor '%s' has no data", t->name);
        for (int j = 0; j < i; j++)
            VT_ASSERT(strcmp(t->name, tensors[j].name) != 0, "duplicate tensor name '%s'",
                      t->name);
        cJSON *e = cJSON_AddObjectToObject(root, t->name);
        cJSON *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();
        VT_ASSERT(e && shape && offs, "out of memory building a safetensors header");
        cJSON_AddStringToObject(e, "dtype", "F32");
        for (int d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddItemToObject(e, "shape", shape);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        offset += t->size * 4;
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToObject(e, "data_offsets", offs);
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    VT_ASSERT(json != NULL, "out of memory printing a safetensors header");
    return json;
}

vt_status vt_st_write(const char *path, const vt_st_tensor *tensors, int n,
                      const char *const *meta_keys, const char *const *meta_values, int n_meta) {
    VT_ASSERT(path && n >= 0 && n_meta >= 0 && (n == 0 || tensors), "vt_st_write: bad arguments");
    /* What the reader would refuse is never written: the file at path stays as it was. */
    for (int i = 0; i < n; i++) {
        vt_status s = check_finite(path, &tensors[i], "not written, since a file holding it "
                                   "would not load (the values diverged)");
        if (s != VT_OK) return s;
    }
    /* The caller's metadata plus the checksums (st_header_json rejects a duplicate key);
     * a file without tensors has nothing to check. */
    const char **keys = vt_xcalloc((size_t)n_meta + 1, sizeof *keys);
    const char **vals = vt_xcalloc((size_t)n_meta + 1, sizeof *vals);
    for (int i = 0; i < n_meta; i++) {
        keys[i] = meta_keys[i];
        vals[i] = meta_values[i];
    }
    char *crc = st_crc_json(tensors, n);
    keys[n_meta] = ST_CRC_KEY;
    vals[n_meta] = crc;
    char *json = st_header_json(tensors, n, keys, vals, n_meta + (n > 0));
    cJSON_free(crc);
    free(keys);
    free(vals);
    size_t len = strlen(json), padded = (len + 7) / 8 * 8;
    char *header = vt_xmalloc(8 + padded);
    uint64_t n_le = padded;
    for (int b = 0; b < 8; b++) header[b] = (char)((n_le >> (8 * b)) & 0xff);
    memcpy(header + 8, json, len);
    memset(header + 8 + len, ' ', padded - len);
    cJSON_free(json);

    vt_durable_file a;
    vt_status s = vt_durable_open(&a, path);
    if (s == VT_OK) s = vt_durable_write(&a, header, 8 + padded);
    for (int i = 0; s == VT_OK && i < n; i++)
        s = vt_durable_write(&a, tensors[i].data, (size_t)tensors[i].size * 4);
    if (s == VT_OK) s = vt_durable_commit(&a);
    free(header);
    return s;
}

/* -------------------------------------------------------------- safetensors read */

/* A JSON number that is an exact integer in [0, 2^53]; else -1. */
static int64_t json_uint(const cJSON *v) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return -1;
    return (int64_t)d;
}

typedef struct {
    int64_t begin, end;
    int index;
} st_span;

static int span_cmp(const void *a, const void *b) {
    const st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->index - y->index;
}

static int str_ptr_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

_Static_assert(offsetof(vt_st_tensor, name) == 0, "name_index.h reads a record's name first");

/* Fill out from the parsed header; data offsets are validated against data_bytes. */
static vt_status st_parse_header(const char *path, const cJSON *root, int64_t data_bytes,
                                 vt_safetensors *out, int64_t **begins) {
    if (!cJSON_IsObject(root))
        return vt_fail(VT_ERR_RUNTIME, "%s: safetensors header is not a JSON object", path);
    int n_items = cJSON_GetArraySize(root), n_meta_objs = 0;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") != 0) continue;
        if (++n_meta_objs > 1)
            return vt_fail(VT_ERR_RUNTIME, "%s: header has more than one \"__metadata__\"", path);
        if (!cJSON_IsObject(it))
            return vt_fail(VT_ERR_RUNTIME, "%s: \"__metadata__\" is not a JSON object", path);
        int nm = cJSON_GetArraySize(it), k = 0;
        out->meta_keys = vt_xcalloc((size_t)nm + 1, sizeof(char *));
        out->meta_values = vt_xcalloc((size_t)nm + 1, sizeof(char *));
        for (const cJSON *m = it->child; m; m = m->next, k++) {
            if (!cJSON_IsString(m))
                return vt_fail(VT_ERR_RUNTIME,
                               "%s: __metadata__[\"%s\"] must be a string, found a %s", path,
                               m->string, cJSON_IsNumber(m) ? "number"
                               : cJSON_IsObject(m)          ? "object"
                               : cJSON_IsArray(m)           ? "array"
                               : cJSON_IsBool(m)            ? "boolean"
                                                            : "null");
            out->meta_keys[k] = strdup(m->string);
            out->meta_values[k] = strdup(m->valuestring);
            VT_ASSERT(out->meta_keys[k] && out->meta_values[k], "out of memory");
            out->n_meta = k + 1;
        }
        /* Unique keys: adjacent once sorted. */
        char **sorted = vt_xcalloc((size_t)k + 1, sizeof *sorted);
        memcpy(sorted, out->meta_keys, (size_t)k * sizeof *sorted);
        qsort(sorted, (size_t)k, sizeof *sorted, str_ptr_cmp);
        const char *dup = NULL;
        for (int j = 1; j < k && !dup; j++)
            if (strcmp(sorted[j], sorted[j - 1]) == 0) dup = sorted[j];
        vt_status s = dup ? vt_fail(VT_ERR_RUNTIME, "%s: duplicate __metadata__ key \"%s\"", path,
                                    dup)
                          : VT_OK;
        free(sorted);
        if (s != VT_OK) return s;
    }
    int n = n_items - n_meta_objs;
    out->tensors = vt_xcalloc((size_t)n + 1, sizeof(vt_st_tensor));
    *begins = vt_xcalloc((size_t)n + 1, sizeof(int64_t));
    int i = 0;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) continue;
        const char *name = it->string;
        vt_st_tensor *t = &out->tensors[i];
        if (name[0] == '\0')
            return vt_fail(VT_ERR_RUNTIME, "%s: a tensor has an empty name", path);
        if (strlen(name) >= sizeof t->name)
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor name \"%.60s...\" is %zu bytes, at most %zu "
                           "are supported", path, name, strlen(name), sizeof t->name - 1);
        if (!cJSON_IsObject(it))
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": entry is not a JSON object", path,
                           name);
        const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!dtype || !shape || !offs)
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": missing \"%s\"", path, name,
                           !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
        if (!cJSON_IsString(dtype))
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": dtype is not a string", path, name);
        int esize = vt_st_dtype_size(dtype->valuestring);
        if (esize == 0)
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\" has dtype %s; supported: F32, BF16, "
                           "F16 (read exactly as float32)", path, name, dtype->valuestring);
        if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > 8)
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": shape must be an array of at most 8 "
                           "non-negative integers", path, name);
        if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
            json_uint(cJSON_GetArrayItem(offs, 0)) < 0 || json_uint(cJSON_GetArrayItem(offs, 1)) < 0)
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": data_offsets must be [begin, end] "
                           "with non-negative integers", path, name);
        snprintf(t->name, sizeof t->name, "%s", name);
        snprintf(t->dtype, sizeof t->dtype, "%s", dtype->valuestring);
        t->ndim = cJSON_GetArraySize(shape);
        int64_t size = 1;
        for (int d = 0; d < t->ndim; d++) {
            int64_t v = json_uint(cJSON_GetArrayItem(shape, d));
            if (v < 0)
                return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": shape[%d] is not a non-negative "
                               "integer", path, name, d);
            t->shape[d] = v;
            if (v != 0 && size > INT64_MAX / 4 / v)
                return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": shape product overflows", path,
                               name);
            size *= v;
        }
        t->size = size;
        int64_t b = json_uint(cJSON_GetArrayItem(offs, 0)), e = json_uint(cJSON_GetArrayItem(offs, 1));
        if (b > e || e > data_bytes)
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": data_offsets [%lld, %lld] out of "
                           "range: the data section has %lld bytes", path, name, (long long)b,
                           (long long)e, (long long)data_bytes);
        if (size * esize != e - b)
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": shape holds %lld %s values "
                           "(%lld bytes) but data_offsets [%lld, %lld] span %lld bytes", path, name,
                           (long long)size, t->dtype, (long long)size * esize, (long long)b,
                           (long long)e, (long long)(e - b));
        (*begins)[i] = b;
        out->n = ++i;
    }
    /* Unique names, and the index vt_st_find searches. */
    out->by_name = vt_name_index_build(out->tensors, sizeof *out->tensors, n);
    int dup = vt_name_index_duplicate(out->tensors, sizeof *out->tensors, out->by_name, n);
    if (dup >= 0)
        return vt_fail(VT_ERR_RUNTIME, "%s: duplicate tensor name \"%s\"", path,
                       out->tensors[out->by_name[dup]].name);
    /* Exact coverage of the data section: sorted spans must be contiguous from 0. */
    st_span *spans = vt_xcalloc((size_t)n + 1, sizeof *spans);
    for (int k = 0; k < n; k++)
        spans[k] = (st_span){(*begins)[k], (*begins)[k] + out->tensors[k].size *
                             vt_st_dtype_size(out->tensors[k].dtype), k};
    qsort(spans, (size_t)n, sizeof *spans, span_cmp);
    int64_t pos = 0;
    vt_status s = VT_OK;
    for (int k = 0; k < n && s == VT_OK; k++) {
        const char *name = out->tensors[spans[k].index].name;
        if (spans[k].begin < pos)
            s = vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": data_offsets [%lld, %lld] overlap the "
                        "previous tensor's data, which ends at offset %lld", path, name,
                        (long long)spans[k].begin, (long long)spans[k].end, (long long)pos);
        else if (spans[k].begin > pos)
            s = vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": data_offsets [%lld, %lld] leave a gap "
                        "at offset %lld: the data section is not covered contiguously", path,
                        name, (long long)spans[k].begin, (long long)spans[k].end, (long long)pos);
        pos = spans[k].end;
    }
    free(spans);
    if (s == VT_OK && pos != data_bytes)
        s = vt_fail(VT_ERR_RUNTIME, "%s: tensors cover data offsets [0, %lld) but the data section "
                    "has %lld bytes (trailing data not covered)", path, (long long)pos,
                    (long long)data_bytes);
    return s;
}

/* Read exactly n bytes at the current offset; 0 on success, else -1 (errno, or 0 at
 * end of file). */
static int read_full(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* After the data section is in st->buffer (tensor i at byte begins[i]): point every
 * tensor's data at float32 values, converting the non-F32 ones (checkpoint_dtype.h) into
 * a new buffer that replaces st->buffer. Errors (VT_ERR_RUNTIME, naming path): out of
 * memory. */
static vt_status bind_float32(vt_safetensors *st, const int64_t *begins, const char *path) {
    int64_t wide = 0;
    int all_f32 = 1;
    for (int i = 0; i < st->n; i++) {
        all_f32 &= st->tensors[i].dtype[0] == '\0' || strcmp(st->tensors[i].dtype, "F32") == 0;
        wide += st->tensors[i].size;
    }
    if (all_f32) {
        for (int i = 0; i < st->n; i++)
            st->tensors[i].data = (float *)((char *)st->buffer + begins[i]);
        return VT_OK;
    }
    float *out = vt_aligned_alloc((size_t)wide * sizeof(float) + 64);
    if (!out)
        return vt_fail(VT_ERR_RUNTIME, "%s: out of memory widening %lld values to float32", path,
                       (long long)wide);
    int64_t at = 0;
    for (int i = 0; i < st->n; i++) {
        vt_st_tensor *t = &st->tensors[i];
        vt_st_widen(t->dtype, (const char *)st->buffer + begins[i], out + at, t->size);
        t->data = out + at;
        at += t->size;
    }
    free(st->buffer);
    st->buffer = out;
    return VT_OK;
}

vt_status vt_st_read(const char *path, vt_safetensors *out) {
    VT_ASSERT(path && out, "vt_st_read: NULL argument");
    memset(out, 0, sizeof *out);
    int fd;
    int64_t file_size;
    vt_status s = vt_input_open(path, "checkpoint (.safetensors file)", &fd, &file_size);
    if (s != VT_OK) return s;
    char *header = NULL;
    int64_t *begins = NULL;
    cJSON *root = NULL;
    unsigned char len_bytes[8];
    if (file_size < 8 || read_full(fd, len_bytes, 8) != 0) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: file has %lld bytes, shorter than the 8-byte safetensors "
                    "header length (truncated or not a safetensors file)", path,
                    (long long)file_size);
        goto done;
    }
    uint64_t hlen = 0;
    for (int b = 0; b < 8; b++) hlen |= (uint64_t)len_bytes[b] << (8 * b);
    if (hlen > (uint64_t)file_size - 8) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: header length %llu at offset 0 is larger than the %lld "
                    "bytes after it (truncated or not a safetensors file)", path,
                    (unsigned long long)hlen, (long long)file_size - 8);
        goto done;
    }
    header = malloc(hlen + 1);
    if (!header) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: out of memory for a %llu-byte header", path,
                    (unsigned long long)hlen);
        goto done;
    }
    if (read_full(fd, header, hlen) != 0) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: reading the %llu-byte header failed: %s", path,
                    (unsigned long long)hlen, errno ? strerror(errno) : "the file shrank");
        goto done;
    }
    header[hlen] = '\0';
    if (memchr(header, '\0', hlen) != NULL) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: header contains a NUL byte at offset %td: invalid JSON",
                    path, 8 + ((char *)memchr(header, '\0', hlen) - header));
        goto done;
    }
    long nul = vt_json_escaped_nul(header, hlen);
    if (nul >= 0) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: header holds an escaped NUL (\\u0000) at offset %ld: no "
                    "tensor name, metadata key or value may contain one", path, 8 + nul);
        goto done;
    }
    const char *err_at = NULL;
    root = cJSON_ParseWithOpts(header, &err_at, 1);
    if (!root) {
        long at = err_at ? (long)(err_at - header) : 0;
        s = vt_fail(VT_ERR_RUNTIME, "%s: header is not valid JSON: error at header byte %ld (file "
                    "offset %ld) near \"%.20s\"", path, at, at + 8, err_at ? err_at : "");
        goto done;
    }
    int64_t data_bytes = file_size - 8 - (int64_t)hlen;
    s = st_parse_header(path, root, data_bytes, out, &begins);
    if (s != VT_OK) goto done;
    out->buffer = vt_aligned_alloc((size_t)data_bytes);
    if (!out->buffer) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: out of memory for %lld bytes of tensor data", path,
                    (long long)data_bytes);
        goto done;
    }
    if (data_bytes > 0 && read_full(fd, out->buffer, (size_t)data_bytes) != 0) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: reading %lld bytes of tensor data at offset %llu failed: %s",
                    path, (long long)data_bytes, (unsigned long long)hlen + 8,
                    errno ? strerror(errno) : "the file shrank");
        goto done;
    }
    /* the checksums cover the bytes as stored; the finite check the float32 values */
    s = st_verify_crc(path, out, begins);
    if (s == VT_OK) s = bind_float32(out, begins, path);
    for (int i = 0; s == VT_OK && i < out->n; i++)
        s = check_finite(path, &out->tensors[i], "a checkpoint must hold finite values (the run "
                         "that wrote it diverged, or the file is corrupt)");
done:
    cJSON_Delete(root);
    free(header);
    free(begins);
    close(fd);
    if (s != VT_OK) vt_st_free(out);
    return s;
}

void vt_st_free(vt_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->meta_keys);
    free(st->meta_values);
    free(st->tensors);
    free(st->by_name);
    free(st->buffer);
    memset(st, 0, sizeof *st);
}

const vt_st_tensor *vt_st_find(const vt_safetensors *st, const char *name) {
    if (!st->by_name) {
        for (int i = 0; i < st->n; i++)
            if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
        return NULL;
    }
    int i = vt_name_index_find(st->tensors, sizeof *st->tensors, st->by_name, st->n, name);
    return i >= 0 ? &st->tensors[i] : NULL;
}

const char *vt_st_meta(const vt_safetensors *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

