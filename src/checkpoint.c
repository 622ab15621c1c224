/* checkpoint.c - safetensors read (F32, BF16, F16 as float32) and write (F32), NumPy
 * .npy output, both written atomically.
 *
 * Owns: the byte format of checkpoint files and .npy dumps, their validation on read,
 * and the tmp + fsync + rename write protocol. Does not own: which tensors a model
 * saves or how they map onto parameters (vit.c), training state (train.c).
 *
 * The safetensors header is JSON, parsed and printed here with cJSON. design.md names
 * config.c as the only cJSON user *for configs*; a file format's header is a separate
 * concern, and this file only ever treats the config as an opaque metadata string.
 *
 * Layout written: u64 LE header length n (n a multiple of 8, header padded with
 * spaces), the JSON header {"__metadata__": {...}, "name": {"dtype": "F32", "shape":
 * [...], "data_offsets": [b, e]}, ...} with tensors in the given order, then the data
 * of each tensor in the same order, contiguous, offsets relative to the data start.
 * Reading accepts any key order; it requires dtype F32, BF16 or F16 (widened exactly to
 * float32 by checkpoint_dtype.c), shape product * element size == e - b,
 * offsets inside the data section, the tensors covering it exactly without overlap or
 * gaps, unique names and string-valued metadata. Unknown keys inside a tensor entry
 * are ignored (other writers may add them). Data is little-endian, as on
 * every host this project builds for (x86-64).
 */
#include "checkpoint.h"
#include "checkpoint_dtype.h"
#include "npz.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

/* ---------------------------------------------------------------- atomic writes */

/* An open PATH.tmp that becomes PATH on commit or disappears on abort. */
typedef struct {
    const char *path;
    char *tmp;
    FILE *f;
} vt_atomic_file;

static vt_status atomic_open(vt_atomic_file *a, const char *path) {
    size_t len = strlen(path);
    a->path = path;
    a->tmp = vt_xmalloc(len + 5);
    memcpy(a->tmp, path, len);
    memcpy(a->tmp + len, ".tmp", 5);
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: cannot create temporary file '%s': %s",
                              path, a->tmp, strerror(errno));
        free(a->tmp);
        a->tmp = NULL;
        return s;
    }
    return VT_OK;
}

/* Drop the temporary file; the file at path (if any) is untouched. */
static void atomic_abort(vt_atomic_file *a) {
    if (a->f) fclose(a->f);
    a->f = NULL;
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    a->tmp = NULL;
}

static vt_status atomic_write(vt_atomic_file *a, const void *data, size_t bytes) {
    if (bytes && fwrite(data, 1, bytes, a->f) != bytes) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: write of %zu bytes to '%s' failed: %s",
                              a->path, bytes, a->tmp, strerror(errno));
        atomic_abort(a);
        return s;
    }
    return VT_OK;
}

/* fflush, fsync, fclose, rename; on any failure the tmp file is removed. */
static vt_status atomic_commit(vt_atomic_file *a) {
    const char *step = NULL;
    if (fflush(a->f) != 0) step = "fflush";
    else if (fsync(fileno(a->f)) != 0) step = "fsync";
    if (step) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: %s of '%s' failed: %s", a->path, step,
                              a->tmp, strerror(errno));
        atomic_abort(a);
        return s;
    }
    int rc = fclose(a->f);
    a->f = NULL;
    if (rc != 0) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: closing '%s' failed: %s", a->path, a->tmp,
                              strerror(errno));
        atomic_abort(a);
        return s;
    }
    if (rename(a->tmp, a->path) != 0) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: renaming '%s' over it failed: %s", a->path,
                              a->tmp, strerror(errno));
        atomic_abort(a);
        return s;
    }
    free(a->tmp);
    a->tmp = NULL;
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
    char *json = st_header_json(tensors, n, meta_keys, meta_values, n_meta);
    size_t len = strlen(json), padded = (len + 7) / 8 * 8;
    char *header = vt_xmalloc(8 + padded);
    uint64_t n_le = padded;
    for (int b = 0; b < 8; b++) header[b] = (char)((n_le >> (8 * b)) & 0xff);
    memcpy(header + 8, json, len);
    memset(header + 8 + len, ' ', padded - len);
    cJSON_free(json);

    vt_atomic_file a;
    vt_status s = atomic_open(&a, path);
    if (s == VT_OK) s = atomic_write(&a, header, 8 + padded);
    for (int i = 0; s == VT_OK && i < n; i++)
        s = atomic_write(&a, tensors[i].data, (size_t)tensors[i].size * 4);
    if (s == VT_OK) s = atomic_commit(&a);
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

static int name_cmp(const void *a, const void *b) {
    const vt_st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

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
            for (int j = 0; j < k; j++)
                if (strcmp(out->meta_keys[j], m->string) == 0)
                    return vt_fail(VT_ERR_RUNTIME, "%s: duplicate __metadata__ key \"%s\"", path,
                                   m->string);
            out->meta_keys[k] = strdup(m->string);
            out->meta_values[k] = strdup(m->valuestring);
            VT_ASSERT(out->meta_keys[k] && out->meta_values[k], "out of memory");
            out->n_meta = k + 1;
        }
    }
    int n = n_items - n_meta_objs;
    out->tensors = vt_xcalloc((size_t)n + 1, sizeof(vt_st_tensor));
    *begins = vt_xcalloc((size_t)n + 1, sizeof(int64_t));
    int i = 0;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) continue;
        const char *name = it->string;
        vt_st_tensor *t = &out->tensors[i];
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
    /* Unique names. */
    const vt_st_tensor **by_name = vt_xcalloc((size_t)n + 1, sizeof *by_name);
    for (int k = 0; k < n; k++) by_name[k] = &out->tensors[k];
    qsort(by_name, (size_t)n, sizeof *by_name, name_cmp);
    for (int k = 1; k < n; k++)
        if (strcmp(by_name[k]->name, by_name[k - 1]->name) == 0) {
            vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: duplicate tensor name \"%s\"", path,
                                  by_name[k]->name);
            free(by_name);
            return s;
        }
    free(by_name);
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

vt_status vt_st_read(const char *path, vt_safetensors *out) {
    VT_ASSERT(path && out, "vt_st_read: NULL argument");
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return vt_fail(VT_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
    vt_status s = VT_OK;
    char *header = NULL;
    int64_t *begins = NULL;
    cJSON *root = NULL;
    long file_size = -1;
    if (fseek(f, 0, SEEK_END) == 0) file_size = ftell(f);
    if (file_size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: cannot determine the file size: %s", path, strerror(errno));
        goto done;
    }
    unsigned char len_bytes[8];
    if (file_size < 8 || fread(len_bytes, 1, 8, f) != 8) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: file has %ld bytes, shorter than the 8-byte safetensors "
                    "header length (truncated or not a safetensors file)", path, file_size);
        goto done;
    }
    uint64_t hlen = 0;
    for (int b = 0; b < 8; b++) hlen |= (uint64_t)len_bytes[b] << (8 * b);
    if (hlen > (uint64_t)file_size - 8) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: header length %llu at offset 0 is larger than the %ld "
                    "bytes after it (truncated or not a safetensors file)", path,
                    (unsigned long long)hlen, file_size - 8);
        goto done;
    }
    header = malloc(hlen + 1);
    if (!header) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: out of memory for a %llu-byte header", path,
                    (unsigned long long)hlen);
        goto done;
    }
    if (fread(header, 1, hlen, f) != hlen) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: reading the %llu-byte header failed", path,
                    (unsigned long long)hlen);
        goto done;
    }
    header[hlen] = '\0';
    if (memchr(header, '\0', hlen) != NULL) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: header contains a NUL byte at offset %td: invalid JSON",
                    path, 8 + ((char *)memchr(header, '\0', hlen) - header));
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
    if (data_bytes > 0 && fread(out->buffer, 1, (size_t)data_bytes, f) != (size_t)data_bytes) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: reading %lld bytes of tensor data at offset %llu failed",
                    path, (long long)data_bytes, (unsigned long long)hlen + 8);
        goto done;
    }
    s = vt_st_bind_float32(out, begins, path);
done:
    cJSON_Delete(root);
    free(header);
    free(begins);
    fclose(f);
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
    free(st->buffer);
    memset(st, 0, sizeof *st);
}

const vt_st_tensor *vt_st_find(const vt_safetensors *st, const char *name) {
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

const char *vt_st_meta(const vt_safetensors *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

/* --------------------------------------------------------------------- .npy write */

vt_status vt_npy_write(const char *path, const float *data, int ndim, const int64_t *shape) {
    VT_ASSERT(path && ndim >= 0 && ndim <= 32 && (ndim == 0 || shape), "vt_npy_write: bad args");
    size_t total;
    unsigned char *head = vt_npy_header("<f4", ndim, shape, &total);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    VT_ASSERT(n == 0 || data != NULL, "vt_npy_write: NULL data for %lld elements", (long long)n);

    vt_atomic_file a;
    vt_status s = atomic_open(&a, path);
    if (s == VT_OK) s = atomic_write(&a, head, total);
    if (s == VT_OK) s = atomic_write(&a, data, (size_t)n * 4);
    if (s == VT_OK) s = atomic_commit(&a);
    free(head);
    return s;
}
