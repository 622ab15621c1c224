/* checkpoint.c - safetensors read (F32, BF16, F16 as float32) and write (F32) with
 * per-tensor CRC-32, NumPy .npy output, and the crash-consistent checkpoint pairs of a
 * run directory (contract and protocol in checkpoint.h).
 *
 * Owns: the byte format of checkpoint files and .npy dumps, their validation and
 * integrity checks on read, the tmp + fsync + rename + directory fsync write path, the
 * pair/pointer protocol and its fault-injection hooks. Does not own: which tensors a
 * model saves or how they map onto parameters (vit.c), the training state's contents
 * (train_state.c), when a run saves (train.c).
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
#include "checkpoint.h"
#include "checkpoint_dtype.h"
#include "npz.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>
#include <zlib.h>

#define ST_CRC_KEY "tensor_crc32"

/* ------------------------------------------------------------ file operations */

/* Every file operation of this file goes through the ck_* wrappers below, each one an
 * event of the fault-injection build (checkpoint.h). Cleanup after a failure (removing
 * a temporary file) is not an event. */
#ifdef VT_FAULT_INJECTION
static long fault_count;

/* Record event `op` on `path`; kill the process before it, or return the errno it
 * must fail with (0: run it), as the environment asks. */
static int fault_event(const char *op, const char *path) {
    long n = ++fault_count;
    const char *trace = getenv("VT_FAULT_TRACE");
    if (trace && *trace) {
        FILE *f = fopen(trace, "a");
        if (f) {
            fprintf(f, "%ld %s %s\n", n, op, path);
            fclose(f);
        }
    }
    const char *kill_at = getenv("VT_FAULT_KILL_AT");
    if (kill_at && atol(kill_at) == n) raise(SIGKILL);
    const char *nospc = getenv("VT_FAULT_ENOSPC_AT");
    if (nospc && atol(nospc) == n) return ENOSPC;
    return 0;
}
#else
static inline int fault_event(const char *op, const char *path) {
    (void)op;
    (void)path;
    return 0;
}
#endif

#define FAULT(op, path)                   \
    do {                                  \
        int e_ = fault_event(op, path);   \
        if (e_) { errno = e_; return -1; } \
    } while (0)

static int ck_create(const char *path) {
    FAULT("create", path);
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
}

/* All n bytes, retrying short writes; -1 with errno on failure. */
static int ck_write(int fd, const void *data, size_t n, const char *path) {
    FAULT("write", path);
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) { errno = EIO; return -1; }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int ck_fsync(int fd, const char *path) {
    FAULT("fsync", path);
    return fsync(fd);
}

static int ck_close(int fd, const char *path) {
    int e = fault_event("close", path);
    int rc = close(fd);
    if (e) { errno = e; return -1; }
    return rc;
}

static int ck_rename(const char *from, const char *to) {
    FAULT("rename", to);
    return rename(from, to);
}

static int ck_link(const char *from, const char *to) {
    FAULT("link", to);
#ifdef VT_FAULT_INJECTION
    const char *no_link = getenv("VT_FAULT_NO_LINK");
    if (no_link && strcmp(no_link, "1") == 0) { /* a file system without hard links */
        errno = EXDEV;
        return -1;
    }
#endif
    return link(from, to);
}

static int ck_unlink(const char *path) {
    FAULT("unlink", path);
    return unlink(path);
}

/* The directory part of path ("." when it has none) into out. */
static void dir_of(const char *path, char *out, size_t len) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, len, ".");
    else if (slash == path) snprintf(out, len, "/");
    else snprintf(out, len, "%.*s", (int)(slash - path), path);
}

/* fsync a directory, so renames, links and unlinks in it are durable. */
static int ck_fsync_dir(const char *dir) {
    FAULT("fsync-dir", dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* ---------------------------------------------------------------- atomic writes */

/* An open PATH.tmp that becomes PATH on commit or disappears on abort. */
typedef struct {
    const char *path;
    char *tmp;
    int fd;
    int renamed;         /* commit got as far as the rename: PATH is the new file */
} vt_atomic_file;

static vt_status atomic_open(vt_atomic_file *a, const char *path) {
    size_t len = strlen(path);
    a->path = path;
    a->renamed = 0;
    a->tmp = vt_xmalloc(len + 5);
    memcpy(a->tmp, path, len);
    memcpy(a->tmp + len, ".tmp", 5);
    a->fd = ck_create(a->tmp);
    if (a->fd < 0) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: cannot create temporary file '%s': %s",
                              path, a->tmp, strerror(errno));
        unlink(a->tmp);
        free(a->tmp);
        a->tmp = NULL;
        return s;
    }
    return VT_OK;
}

/* Drop the temporary file; the file at path (if any) is untouched. */
static void atomic_abort(vt_atomic_file *a) {
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
    if (a->tmp) unlink(a->tmp);
    free(a->tmp);
    a->tmp = NULL;
}

static vt_status atomic_write(vt_atomic_file *a, const void *data, size_t bytes) {
    if (bytes && ck_write(a->fd, data, bytes, a->tmp) != 0) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: write of %zu bytes to '%s' failed: %s",
                              a->path, bytes, a->tmp, strerror(errno));
        atomic_abort(a);
        return s;
    }
    return VT_OK;
}

/* fsync, close, rename, fsync the directory; a failure before the rename removes the
 * tmp file, one after it leaves the new file in place (a->renamed). */
static vt_status atomic_commit(vt_atomic_file *a) {
    const char *step = NULL;
    if (ck_fsync(a->fd, a->tmp) != 0) step = "fsync";
    int fd = a->fd;
    a->fd = -1;
    if (!step && ck_close(fd, a->tmp) != 0) step = "closing";
    else if (step) close(fd);
    if (!step && ck_rename(a->tmp, a->path) != 0) step = "renaming";
    if (step) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: %s '%s' failed: %s", a->path, step, a->tmp,
                              strerror(errno));
        atomic_abort(a);
        return s;
    }
    a->renamed = 1;
    free(a->tmp);
    a->tmp = NULL;
    char dir[VT_CKPT_PATH];
    dir_of(a->path, dir, sizeof dir);
    if (ck_fsync_dir(dir) != 0)
        return vt_fail(VT_ERR_RUNTIME, "%s: fsync of directory '%s' after the rename failed: %s",
                       a->path, dir, strerror(errno));
    return VT_OK;
}

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

/* Verify __metadata__["tensor_crc32"] against the stored bytes of each tensor (tensor i
 * at byte begins[i] of st->buffer) when present, and drop it from st's metadata. */
static vt_status st_verify_crc(const char *path, vt_safetensors *st, const int64_t *begins) {
    int k = -1;
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], ST_CRC_KEY) == 0) k = i;
    if (k < 0) return VT_OK;
    cJSON *o = cJSON_Parse(st->meta_values[k]);
    vt_status s = VT_OK;
    if (!cJSON_IsObject(o)) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: __metadata__[\"" ST_CRC_KEY "\"] is not a JSON object "
                    "mapping tensor names to CRC-32 hex strings", path);
        goto out;
    }
    for (const cJSON *e = o->child; e && s == VT_OK; e = e->next) {
        if (!cJSON_IsString(e) || parse_hex32(e->valuestring) < 0)
            s = vt_fail(VT_ERR_RUNTIME, "%s: __metadata__[\"" ST_CRC_KEY "\"] entry \"%s\" is not "
                        "an 8-digit hex string", path, e->string);
        else if (!vt_st_find(st, e->string))
            s = vt_fail(VT_ERR_RUNTIME, "%s: __metadata__[\"" ST_CRC_KEY "\"] has a checksum for "
                        "tensor \"%s\", which the file does not contain (tensors were removed "
                        "after it was written)", path, e->string);
    }
    for (int i = 0; i < st->n && s == VT_OK; i++)
        if (!cJSON_GetObjectItemCaseSensitive(o, st->tensors[i].name))
            s = vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\" has no entry in __metadata__[\""
                        ST_CRC_KEY "\"] (tensors were added after the file was written)", path,
                        st->tensors[i].name);
    for (int i = 0; i < st->n && s == VT_OK; i++) {
        const vt_st_tensor *t = &st->tensors[i];
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, t->name);
        uint32_t want = (uint32_t)parse_hex32(e->valuestring);
        int64_t bytes = t->size * vt_st_dtype_size(t->dtype);
        uint32_t got = vt_crc32((const char *)st->buffer + begins[i], (size_t)bytes);
        if (got != want)
            s = vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": data checksum mismatch (CRC-32 of "
                        "its %lld bytes is %08x, the file records %08x): the file is corrupt "
                        "(flipped bits or a damaged copy)", path, t->name, (long long)bytes, got,
                        want);
    }
out:
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

/* The first element of t that is NaN or infinite, as an error naming it. */
static vt_status st_check_finite(const char *path, const vt_st_tensor *t) {
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
                           "%s): a checkpoint must hold finite values (the run that wrote it "
                           "diverged, or the file is corrupt)", path, t->name,
                           isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf", (long long)i, idx);
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

vt_status vt_st_read(const char *path, vt_safetensors *out) {
    VT_ASSERT(path && out, "vt_st_read: NULL argument");
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return vt_fail(VT_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
    vt_status s = VT_OK;
    char *header = NULL;
    int64_t *begins = NULL;
    cJSON *root = NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: is %s, expected a .safetensors file", path,
                    S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
        goto done;
    }
    const int64_t file_size = (int64_t)sb.st_size;
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
    if (s == VT_OK) s = vt_st_bind_float32(out, begins, path);
    for (int i = 0; s == VT_OK && i < out->n; i++) s = st_check_finite(path, &out->tensors[i]);
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

/* ------------------------------------------------------------ checkpoint pairs */

#define CKPT_PREFIX "step_"
#define CKPT_WEIGHTS ".safetensors"
#define CKPT_STATE ".state.safetensors"
#define CKPT_POINTER "latest"
#define CKPT_LAST "last.safetensors"
#define CKPT_LEGACY_STATE "last.state.safetensors"

static void path_join(char *out, size_t len, const char *dir, const char *name) {
    int n = snprintf(out, len, "%s/%s", dir, name);
    VT_ASSERT(n > 0 && (size_t)n < len, "checkpoint path '%s/%s' too long", dir, name);
}

void vt_ckpt_pair_of(const char *dir, int64_t step, vt_ckpt_pair *p) {
    VT_ASSERT(step >= 0, "checkpoint step %lld", (long long)step);
    char name[64];
    p->step = step;
    snprintf(name, sizeof name, CKPT_PREFIX "%08lld" CKPT_WEIGHTS, (long long)step);
    path_join(p->weights, sizeof p->weights, dir, name);
    snprintf(name, sizeof name, CKPT_PREFIX "%08lld" CKPT_STATE, (long long)step);
    path_join(p->state, sizeof p->state, dir, name);
}

void vt_ckpt_discard(const vt_ckpt_pair *p) {
    unlink(p->state);
    unlink(p->weights);
}

/* Step of a pair file name "step_<digits><suffix>[.tmp]" with suffix CKPT_WEIGHTS or
 * CKPT_STATE: *state = 1 for the state file, *tmp = 1 for a temporary; -1 if the name is
 * not one of ours. */
static int64_t parse_pair_name(const char *name, int *state, int *tmp) {
    if (strncmp(name, CKPT_PREFIX, strlen(CKPT_PREFIX)) != 0) return -1;
    const char *p = name + strlen(CKPT_PREFIX), *q = p;
    int64_t step = 0;
    while (*q >= '0' && *q <= '9') {
        if (step > (INT64_MAX - 9) / 10) return -1;
        step = step * 10 + (*q++ - '0');
    }
    if (q - p < 8) return -1;
    *tmp = 0;
    size_t rest = strlen(q);
    if (rest > 4 && strcmp(q + rest - 4, ".tmp") == 0) {
        *tmp = 1;
        rest -= 4;
    }
    if (rest == strlen(CKPT_STATE) && strncmp(q, CKPT_STATE, rest) == 0) *state = 1;
    else if (rest == strlen(CKPT_WEIGHTS) && strncmp(q, CKPT_WEIGHTS, rest) == 0) *state = 0;
    else return -1;
    return step;
}

typedef struct {
    int64_t step;
    int has_weights, has_state;
} pair_files;

static int pair_cmp_desc(const void *a, const void *b) {
    const pair_files *x = a, *y = b;
    return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

/* Step 5 of the protocol: remove pairs other than the newest `keep` complete ones up to
 * `current`, pairs newer than it, incomplete pairs and leftover temporary files. */
static vt_status prune(const char *dir, int64_t current, int keep) {
    DIR *d = opendir(dir);
    if (!d) return vt_fail(VT_ERR_RUNTIME, "%s: cannot list the run directory to remove old "
                           "checkpoints: %s", dir, strerror(errno));
    pair_files *pairs = NULL;
    int n = 0, cap = 0, removed = 0;
    vt_status s = VT_OK;
    char path[VT_CKPT_PATH];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int state = 0, tmp = 0;
        int64_t step = parse_pair_name(e->d_name, &state, &tmp);
        int other_tmp = strcmp(e->d_name, CKPT_POINTER ".tmp") == 0 ||
                        strcmp(e->d_name, CKPT_LAST ".tmp") == 0;
        /* The older layout's state file is superseded once `latest` exists. */
        int legacy = strcmp(e->d_name, CKPT_LEGACY_STATE) == 0;
        /* A killed save's leftover, never part of a pair: a failure to remove it is
         * harmless (the next tidy tries again), so it is not an error. */
        if (tmp || other_tmp || legacy) {
            path_join(path, sizeof path, dir, e->d_name);
            if (ck_unlink(path) == 0) removed++;
            continue;
        }
        if (step < 0) continue;
        int k = 0;
        while (k < n && pairs[k].step != step) k++;
        if (k == n) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                pairs = vt_xrealloc(pairs, (size_t)cap * sizeof *pairs);
            }
            pairs[n++] = (pair_files){step, 0, 0};
        }
        if (state) pairs[k].has_state = 1;
        else pairs[k].has_weights = 1;
    }
    closedir(d);
    qsort(pairs, (size_t)n, sizeof *pairs, pair_cmp_desc);
    int kept = 0;
    for (int k = 0; k < n && s == VT_OK; k++) {
        pair_files *p = &pairs[k];
        int complete = p->has_weights && p->has_state;
        if (p->step == current || (p->step < current && complete && kept < keep)) {
            kept++;
            continue;
        }
        vt_ckpt_pair pp;
        vt_ckpt_pair_of(dir, p->step, &pp);
        if (p->has_state && ck_unlink(pp.state) != 0 && errno != ENOENT)
            s = vt_fail(VT_ERR_RUNTIME, "%s: cannot remove an old checkpoint: %s", pp.state,
                        strerror(errno));
        else if (p->has_weights && ck_unlink(pp.weights) != 0 && errno != ENOENT)
            s = vt_fail(VT_ERR_RUNTIME, "%s: cannot remove an old checkpoint: %s", pp.weights,
                        strerror(errno));
        removed++;
    }
    free(pairs);
    if (s == VT_OK && removed && ck_fsync_dir(dir) != 0)
        s = vt_fail(VT_ERR_RUNTIME, "%s: fsync of the run directory failed: %s", dir,
                    strerror(errno));
    return s;
}

/* Copy src to the new file dst (fsynced): last.safetensors where hard links fail. */
static vt_status copy_file(const char *src, const char *dst) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return vt_fail(VT_ERR_RUNTIME, "%s: cannot open: %s", src, strerror(errno));
    int out = ck_create(dst);
    if (out < 0) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: cannot create: %s", dst, strerror(errno));
        close(in);
        return s;
    }
    static char buf[1 << 16];
    vt_status s = VT_OK;
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            s = vt_fail(VT_ERR_RUNTIME, "%s: read failed: %s", src, strerror(errno));
            break;
        }
        if (r == 0) break;
        if (ck_write(out, buf, (size_t)r, dst) != 0) {
            s = vt_fail(VT_ERR_RUNTIME, "%s: write failed: %s", dst, strerror(errno));
            break;
        }
    }
    close(in);
    if (s == VT_OK && ck_fsync(out, dst) != 0)
        s = vt_fail(VT_ERR_RUNTIME, "%s: fsync failed: %s", dst, strerror(errno));
    if (ck_close(out, dst) != 0 && s == VT_OK)
        s = vt_fail(VT_ERR_RUNTIME, "%s: close failed: %s", dst, strerror(errno));
    if (s != VT_OK) unlink(dst);
    return s;
}

/* Step 4: last.safetensors becomes (a link to) the current weights. When it already is
 * that file (a resume's tidy), rename(2) of one hard link over another of the same file
 * does nothing and leaves the .tmp name, which prune removes. */
static vt_status relink_last(const char *dir, const char *weights) {
    char last[VT_CKPT_PATH], tmp[VT_CKPT_PATH];
    path_join(last, sizeof last, dir, CKPT_LAST);
    path_join(tmp, sizeof tmp, dir, CKPT_LAST ".tmp");
    unlink(tmp);
    vt_status s = VT_OK;
    if (ck_link(weights, tmp) != 0) {
        if (errno == EPERM || errno == EXDEV || errno == EMLINK || errno == EOPNOTSUPP)
            s = copy_file(weights, tmp);
        else
            s = vt_fail(VT_ERR_RUNTIME, "%s: cannot link it to %s: %s", weights, tmp,
                        strerror(errno));
    }
    if (s == VT_OK && ck_rename(tmp, last) != 0) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: renaming '%s' over it failed: %s", last, tmp,
                    strerror(errno));
        unlink(tmp);
    }
    if (s == VT_OK && ck_fsync_dir(dir) != 0)
        s = vt_fail(VT_ERR_RUNTIME, "%s: fsync of the run directory failed: %s", dir,
                    strerror(errno));
    return s;
}

vt_status vt_ckpt_tidy(const char *dir, const vt_ckpt_pair *p, int keep) {
    VT_ASSERT(p->step >= 0 && keep >= 1, "tidy of pair %lld, keep %d", (long long)p->step, keep);
    vt_status s = relink_last(dir, p->weights);
    vt_status s2 = prune(dir, p->step, keep);
    return s != VT_OK ? s : s2;
}

vt_status vt_ckpt_publish(const char *dir, const vt_ckpt_pair *p, int keep, int *committed) {
    VT_ASSERT(keep >= 1, "keep_checkpoints %d", keep);
    if (committed) *committed = 0;
    char pointer[VT_CKPT_PATH], line[64];
    path_join(pointer, sizeof pointer, dir, CKPT_POINTER);
    int len = snprintf(line, sizeof line, CKPT_PREFIX "%08lld\n", (long long)p->step);
    vt_atomic_file a;
    vt_status s = atomic_open(&a, pointer);
    if (s == VT_OK) s = atomic_write(&a, line, (size_t)len);
    if (s == VT_OK) s = atomic_commit(&a);
    if (s != VT_OK && !a.renamed) { /* before the commit point: the previous pair stays */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vt_last_error());
        vt_ckpt_discard(p);
        return vt_fail(s, "%s", msg);
    }
    if (committed) *committed = 1;
    vt_status s2 = vt_ckpt_tidy(dir, p, keep);
    return s != VT_OK ? s : s2;
}

static int is_regular(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

vt_status vt_ckpt_current(const char *dir, vt_ckpt_pair *p) {
    char pointer[VT_CKPT_PATH];
    path_join(pointer, sizeof pointer, dir, CKPT_POINTER);
    int fd = open(pointer, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        /* The older layout: one pair under fixed names. */
        memset(p, 0, sizeof *p);
        p->step = -1;
        path_join(p->weights, sizeof p->weights, dir, CKPT_LAST);
        path_join(p->state, sizeof p->state, dir, CKPT_LEGACY_STATE);
        if (is_regular(p->weights) && is_regular(p->state)) return VT_OK;
        return vt_fail(VT_ERR_USAGE, "%s holds no checkpoint to resume from: expected %s (written "
                       "with the first checkpoint pair, see train.ckpt_every); a run killed "
                       "before its first checkpoint must start again", dir, pointer);
    }
    if (fd < 0) return vt_fail(VT_ERR_RUNTIME, "%s: cannot open: %s", pointer, strerror(errno));
    char buf[65];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) return vt_fail(VT_ERR_RUNTIME, "%s: cannot read: %s", pointer, strerror(errno));
    buf[n] = '\0';
    size_t len = (size_t)n;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    char name[96];
    snprintf(name, sizeof name, "%s" CKPT_WEIGHTS, buf);
    int state = 0, tmp = 0;
    int64_t step = memchr(buf, '/', len) ? -1 : parse_pair_name(name, &state, &tmp);
    if (step < 0 || tmp || state || n == (ssize_t)sizeof buf - 1)
        return vt_fail(VT_ERR_RUNTIME, "%s: expected one line \"step_<8 or more digits>\" naming "
                       "the newest checkpoint pair, found \"%.40s\"", pointer, buf);
    vt_ckpt_pair_of(dir, step, p);
    const char *missing = !is_regular(p->weights) ? p->weights : !is_regular(p->state) ? p->state
                                                                                         : NULL;
    if (missing)
        return vt_fail(VT_ERR_RUNTIME, "%s names %s, but %s is missing (files were removed or "
                       "copied without it)", pointer, buf, missing);
    return VT_OK;
}
