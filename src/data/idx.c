/* idx.c - the IDX dataset kind (MNIST, Fashion-MNIST, KMNIST...).
 *
 * data.root is a directory holding, for split name s (data.train_split or
 * data.val_split), the files {s}-images-idx3-ubyte and {s}-labels-idx1-ubyte, each raw
 * or gzip-compressed (".gz" suffix; the raw file is preferred when both exist). The
 * defaults "train"/"val" come from imagefolder; IDX distributions call their test split
 * "t10k", so when the split is "val" and no val-images file exists but the t10k files
 * do, the t10k files are used.
 *
 * Both files are read whole into memory at open through zlib (gzopen/gzread handle
 * compressed and raw files alike) and validated: magic numbers (0x00000803 images,
 * 0x00000801 labels), positive dimensions, equal image and label counts, file length
 * equal to the header-implied size, every label < model.num_classes. After open the
 * dataset is read-only, so read() is thread-safe.
 *
 * Memory is bounded by the files' bytes, whatever the header claims: a raw file's size
 * must equal the header's before anything is allocated; a gzip file must be able to hold
 * the payload (deflate expands at most 1032:1), and its payload buffer grows with the
 * data actually decompressed, so a truncated or lying file costs at most twice its
 * contents.
 *
 * Samples are h x w x 1 (gray). IDX files carry no class count: num_classes is
 * model.num_classes, against which the labels are validated.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data/dataset.h"
#include "input_file.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define DEFLATE_MAX_RATIO 1032 /* deflate's largest expansion: 258 bytes per 2 bits */
#define GZ_FIRST_CHUNK ((size_t)1 << 20)

typedef struct {
    uint8_t *images; /* count x h x w */
    uint8_t *labels; /* count */
} idx_impl;

static uint32_t be32(const unsigned char *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Read up to len bytes; returns bytes read, or -1 with a message on a zlib error. */
static int64_t gz_read_all(gzFile f, const char *path, uint8_t *buf, size_t len) {
    size_t total = 0;
    while (total < len) {
        size_t chunk = len - total;
        if (chunk > (size_t)1 << 30) chunk = (size_t)1 << 30;
        int n = gzread(f, buf + total, (unsigned)chunk);
        if (n < 0) {
            int errnum;
            const char *msg = gzerror(f, &errnum);
            vt_fail(VT_ERR_RUNTIME, "%s: read error after %zu bytes: %s", path, total, msg);
            return -1;
        }
        if (n == 0) break;
        total += (size_t)n;
    }
    return (int64_t)total;
}

/* Load one IDX file of `ndims` dimensions with magic `magic` into a malloc'd payload.
 * dims receives the dimension sizes. */
static vt_status idx_load_file(const char *path, uint32_t magic, int ndims, uint32_t *dims,
                               uint8_t **payload_out) {
    *payload_out = NULL;
    const char *what = magic == IDX_MAGIC_IMAGES ? "images" : "labels";
    int fd;
    int64_t fsize;
    vt_status opened = vt_input_open(path, magic == IDX_MAGIC_IMAGES ? "IDX images file"
                                                                     : "IDX labels file",
                                     &fd, &fsize);
    if (opened != VT_OK) return opened;
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return vt_fail(VT_ERR_RUNTIME, "%s: out of memory opening the gzip stream", path);
    }
    size_t header = 4 + 4 * (size_t)ndims;
    unsigned char hdr[16];
    int64_t got = gz_read_all(f, path, hdr, header);
    if (got < 0) { gzclose(f); return VT_ERR_RUNTIME; }
    int raw = gzdirect(f);
    const char *unit = raw ? "bytes" : "bytes uncompressed";
    if (got == 0) {
        gzclose(f);
        return vt_fail(VT_ERR_RUNTIME, "%s: file is empty (0 bytes), expected an IDX %s file "
                       "starting with the %zu-byte header (magic 0x%08x)", path, what, header, magic);
    }
    if ((size_t)got < 4 || be32(hdr) != magic) {
        uint32_t found = (size_t)got >= 4 ? be32(hdr) : 0;
        gzclose(f);
        if ((size_t)got < 4)
            return vt_fail(VT_ERR_RUNTIME, "%s: truncated header: expected %zu %s, found %lld",
                           path, header, unit, (long long)got);
        return vt_fail(VT_ERR_RUNTIME, "%s: wrong magic number: expected 0x%08x (IDX %s: unsigned "
                       "bytes, %d dimensions), found 0x%08x", path, magic, what, ndims, found);
    }
    if ((size_t)got < header) {
        gzclose(f);
        return vt_fail(VT_ERR_RUNTIME, "%s: truncated header: expected %zu %s, found %lld",
                       path, header, unit, (long long)got);
    }
    uint64_t payload = 1;
    for (int d = 0; d < ndims; d++) {
        dims[d] = be32(hdr + 4 + 4 * d);
        if (dims[d] == 0) {
            gzclose(f);
            return vt_fail(VT_ERR_RUNTIME, "%s: dimension %d of the header is 0, expected > 0",
                           path, d);
        }
        payload *= dims[d];
        if (payload > ((uint64_t)1 << 40)) {
            gzclose(f);
            return vt_fail(VT_ERR_RUNTIME, "%s: header dimensions imply more than 2^40 bytes; "
                           "not an IDX %s file?", path, what);
        }
    }
    /* The file's size against the header, before any allocation. */
    if (raw && (uint64_t)fsize != header + payload) {
        gzclose(f);
        if ((uint64_t)fsize < header + payload)
            return vt_fail(VT_ERR_RUNTIME, "%s: truncated file: expected %llu bytes (%zu header + "
                           "%llu data, as its header says), found %lld", path,
                           (unsigned long long)(header + payload), header,
                           (unsigned long long)payload, (long long)fsize);
        return vt_fail(VT_ERR_RUNTIME, "%s: file longer than its header says: expected %llu bytes, "
                       "found %lld", path, (unsigned long long)(header + payload), (long long)fsize);
    }
    if (!raw && payload > (uint64_t)fsize * DEFLATE_MAX_RATIO) {
        gzclose(f);
        return vt_fail(VT_ERR_RUNTIME, "%s: the header declares %llu data bytes, more than the "
                       "%lld-byte gzip file can hold (deflate expands at most %d:1): a corrupt "
                       "header or a truncated file", path, (unsigned long long)payload,
                       (long long)fsize, DEFLATE_MAX_RATIO);
    }
    /* Raw: exactly the payload. Gzip: a buffer that grows with the data decompressed. */
    size_t cap = raw || payload <= GZ_FIRST_CHUNK ? (size_t)payload : GZ_FIRST_CHUNK;
    uint8_t *data = malloc(cap ? cap : 1);
    if (!data) {
        gzclose(f);
        return vt_fail(VT_ERR_RUNTIME, "%s: out of memory allocating %zu bytes", path, cap);
    }
    uint64_t have = 0;
    for (;;) {
        got = gz_read_all(f, path, data + have, cap - (size_t)have);
        if (got < 0) { free(data); gzclose(f); return VT_ERR_RUNTIME; }
        have += (uint64_t)got;
        if (have < cap || cap == payload) break;
        size_t next = cap > payload / 2 ? (size_t)payload : 2 * cap;
        uint8_t *grown = realloc(data, next);
        if (!grown) {
            free(data);
            gzclose(f);
            return vt_fail(VT_ERR_RUNTIME, "%s: out of memory growing the data buffer to %zu bytes",
                           path, next);
        }
        data = grown;
        cap = next;
    }
    if (have < payload) {
        free(data);
        gzclose(f);
        return vt_fail(VT_ERR_RUNTIME, "%s: truncated file: expected %llu %s (%zu header + %llu "
                       "data), found %llu", path, (unsigned long long)(header + payload), unit,
                       header, (unsigned long long)payload, (unsigned long long)(header + have));
    }
    uint8_t extra[4096];
    uint64_t more = 0;
    for (;;) {
        int64_t n = gz_read_all(f, path, extra, sizeof extra);
        if (n < 0) { free(data); gzclose(f); return VT_ERR_RUNTIME; }
        if (n == 0) break;
        more += (uint64_t)n;
    }
    gzclose(f);
    if (more) {
        free(data);
        return vt_fail(VT_ERR_RUNTIME, "%s: file longer than its header says: expected %llu %s, "
                       "found %llu", path, (unsigned long long)(header + payload), unit,
                       (unsigned long long)(header + payload + more));
    }
    *payload_out = data;
    return VT_OK;
}

/* Anything at path counts: a FIFO or directory there is reported by the loader as what
 * it is, not as a missing file. */
static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* path <- {root}/{split}-{stem}, raw if present, else .gz; 1 if found. */
static int find_file(char *path, size_t len, const char *root, const char *split, const char *stem) {
    snprintf(path, len, "%s/%s-%s", root, split, stem);
    if (file_exists(path)) return 1;
    snprintf(path, len, "%s/%s-%s.gz", root, split, stem);
    return file_exists(path);
}

/* "train, t10k" - the splits root offers (raw or .gz), for the missing-split hint. */
static void list_splits(const char *root, char *out, size_t len) {
    out[0] = '\0';
    DIR *d = opendir(root);
    if (!d) return;
    struct dirent *e;
    size_t used = 0;
    while ((e = readdir(d)) != NULL) {
        const char *p = strstr(e->d_name, "-images-idx3-ubyte");
        if (!p || (p[18] != '\0' && strcmp(p + 18, ".gz") != 0)) continue;
        char name[256], token[260];
        snprintf(name, sizeof name, "%.*s", (int)(p - e->d_name), e->d_name);
        snprintf(token, sizeof token, ", %s,", name);
        char padded[1024];
        snprintf(padded, sizeof padded, ", %s,", out);
        if (strstr(padded, token)) continue;
        int w = snprintf(out + used, len - used, "%s%s", used ? ", " : "", name);
        if (w < 0 || (size_t)w >= len - used) { out[used] = '\0'; break; }
        used += (size_t)w;
    }
    closedir(d);
}

static vt_status idx_read(const vt_dataset *ds, int64_t index, vt_sample *s, int *label) {
    const idx_impl *im = ds->impl;
    size_t bytes = (size_t)ds->height * ds->width;
    vt_status st = vt_sample_reserve(s, bytes);
    if (st) return st;
    memcpy(s->pixels, im->images + (size_t)index * bytes, bytes);
    s->h = ds->height;
    s->w = ds->width;
    s->c = 1;
    *label = im->labels[index];
    return VT_OK;
}

static void idx_close(vt_dataset *ds) {
    idx_impl *im = ds->impl;
    free(im->images);
    free(im->labels);
    free(im);
    free(ds);
}

static const vt_dataset_ops idx_ops = {.read = idx_read, .close = idx_close};

static vt_status idx_open(vt_dataset **out, const vt_data_spec *spec, vt_split split) {
    *out = NULL;
    const char *root = spec->data.root;
    const char *key = split == VT_SPLIT_TRAIN ? "data.train_split" : "data.val_split";
    const char *name = split == VT_SPLIT_TRAIN ? spec->data.train_split : spec->data.val_split;
    struct stat st;
    VT_ASSERT(root[0] != '\0', "data.kind=idx with an empty data.root (not resolved?)");
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode))
        return vt_fail(VT_ERR_RUNTIME, "data.root '%s': %s; data.kind=idx expects a directory "
                       "holding {split}-images-idx3-ubyte[.gz] and {split}-labels-idx1-ubyte[.gz]",
                       root, stat(root, &st) != 0 ? "no such directory" : "not a directory");

    char img_path[VT_STR + 128], lbl_path[VT_STR + 128];
    const char *used = name;
    int have_img = find_file(img_path, sizeof img_path, root, name, "images-idx3-ubyte");
    if (!have_img && strcmp(name, "val") == 0 &&
        find_file(img_path, sizeof img_path, root, "t10k", "images-idx3-ubyte")) {
        used = "t10k";
        have_img = 1;
    }
    if (!have_img) {
        char avail[256];
        list_splits(root, avail, sizeof avail);
        return vt_fail(VT_ERR_RUNTIME, "%s='%s': neither %s/%s-images-idx3-ubyte nor its .gz "
                       "exists (splits found in %s: %s)", key, name, root, name, root,
                       avail[0] ? avail : "none");
    }
    if (!find_file(lbl_path, sizeof lbl_path, root, used, "labels-idx1-ubyte"))
        return vt_fail(VT_ERR_RUNTIME, "%s='%s': found %s but neither %s/%s-labels-idx1-ubyte "
                       "nor its .gz exists", key, name, img_path, root, used);

    uint32_t idims[3], ldims[1];
    uint8_t *images = NULL, *labels = NULL;
    vt_status s = idx_load_file(img_path, IDX_MAGIC_IMAGES, 3, idims, &images);
    if (s) return s;
    s = idx_load_file(lbl_path, IDX_MAGIC_LABELS, 1, ldims, &labels);
    if (s) { free(images); return s; }
    if (idims[0] != ldims[0]) {
        free(images);
        free(labels);
        return vt_fail(VT_ERR_RUNTIME, "%s has %u images but %s has %u labels: expected equal "
                       "counts", img_path, idims[0], lbl_path, ldims[0]);
    }
    if (idims[1] > INT_MAX / idims[2]) {
        free(images);
        free(labels);
        return vt_fail(VT_ERR_RUNTIME, "%s: image size %u x %u is too large", img_path, idims[1],
                       idims[2]);
    }
    int k = spec->num_classes;
    for (uint32_t i = 0; i < ldims[0]; i++) {
        if ((int)labels[i] >= k) {
            vt_status e = vt_fail(VT_ERR_RUNTIME, "%s: label %d of sample %u is out of range: "
                                  "model.num_classes = %d, expected 0..%d", lbl_path, labels[i],
                                  i, k, k - 1);
            free(images);
            free(labels);
            return e;
        }
    }
    idx_impl *im = vt_xmalloc(sizeof *im);
    im->images = images;
    im->labels = labels;
    vt_dataset *ds = vt_xmalloc(sizeof *ds);
    ds->ops = &idx_ops;
    ds->size = idims[0];
    ds->num_classes = k;
    ds->channels = 1;
    ds->height = (int)idims[1];
    ds->width = (int)idims[2];
    ds->impl = im;
    *out = ds;
    return VT_OK;
}

/* Bytes the file at path holds uncompressed: its size, or a gzip file's size trailer
 * (ISIZE: the uncompressed size mod 2^32, exact below 4 GB). */
static int64_t uncompressed_bytes(const char *path) {
    int fd;
    int64_t size;
    if (vt_input_open(path, "IDX file", &fd, &size) != VT_OK) return 0;
    size_t n = strlen(path);
    unsigned char b[4] = {0};
    int gz = n >= 3 && strcmp(path + n - 3, ".gz") == 0 && size >= 4;
    int ok = gz && pread(fd, b, 4, size - 4) == 4;
    close(fd);
    return ok ? (int64_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24)
              : size;
}

/* The split's payloads are held whole once open: their bytes, and in *samples the
 * labels file's count. */
static int64_t idx_memory(const vt_data_spec *spec, vt_split split, int64_t *samples) {
    *samples = 0;
    const char *root = spec->data.root;
    const char *name = split == VT_SPLIT_TRAIN ? spec->data.train_split : spec->data.val_split;
    char img[VT_STR + 128], lbl[VT_STR + 128];
    const char *used = name;
    if (!find_file(img, sizeof img, root, name, "images-idx3-ubyte")) {
        if (strcmp(name, "val") != 0 || !find_file(img, sizeof img, root, "t10k", "images-idx3-ubyte"))
            return 0;
        used = "t10k";
    }
    int64_t total = uncompressed_bytes(img);
    if (find_file(lbl, sizeof lbl, root, used, "labels-idx1-ubyte")) {
        int64_t labels = uncompressed_bytes(lbl);
        total += labels;
        *samples = labels > 8 ? labels - 8 : 0; /* one byte per sample after the 8-byte header */
    }
    return total;
}

const vt_dataset_kind vt_dataset_idx = {
    .kind = VT_DATA_IDX,
    .fixed_size = 1,
    .needs_root = 1,
    .open = idx_open,
    .memory = idx_memory,
    .classes_doc = "model.num_classes (labels must be below it)",
    .rules_doc = "-",
};
