/* cifar.c - the CIFAR-10 and CIFAR-100 dataset kinds (binary versions).
 *
 * Files (the official "binary version" archives, cifar-10-binary.tar.gz and
 * cifar-100-binary.tar.gz), in data.root or in the folder the archive extracts to
 * (data.root/cifar-10-batches-bin, data.root/cifar-100-binary):
 *   cifar10   train: data_batch_1.bin .. data_batch_5.bin   val: test_batch.bin
 *             record = 1 label byte (0..9) + 3072 pixel bytes
 *   cifar100  train: train.bin                              val: test.bin
 *             record = coarse label byte (0..19) + fine label byte (0..99) + 3072 bytes
 * The 3072 pixel bytes are the R plane, then G, then B, each 32 x 32 row-major.
 * data.train_split / data.val_split are not used: the split picks the files above.
 * data.label (cifar100) selects fine (100 classes) or coarse (20 classes).
 *
 * Every file is read whole into memory at open (CIFAR-10 train: 5 x 10000 records,
 * 154 MB) and validated: present, non-empty, a whole number of records (the message names
 * the file, its size and the record size), every label in range (both labels for
 * cifar100). After open the dataset is read-only, so read() is thread-safe; read() turns
 * the planes into HWC.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "data/dataset.h"
#include "data/formats.h"
#include "input_file.h"

#define CIFAR_SIDE 32
#define CIFAR_PIXELS (3 * CIFAR_SIDE * CIFAR_SIDE)

typedef struct {
    uint8_t *records;   /* n records of rec bytes, in file order */
    int rec;            /* record size: 3073 (cifar10) or 3074 (cifar100) */
    int label_off;      /* byte of the label used: 0 (cifar10, cifar100 coarse) or 1 (fine) */
} cifar_impl;

static vt_status cifar_read(const vt_dataset *ds, int64_t index, vt_sample *s, int *label) {
    const cifar_impl *im = ds->impl;
    vt_status st = vt_sample_reserve(s, CIFAR_PIXELS);
    if (st) return st;
    const uint8_t *r = im->records + (size_t)index * (size_t)im->rec;
    const uint8_t *px = r + (im->rec - CIFAR_PIXELS);
    const int hw = CIFAR_SIDE * CIFAR_SIDE;
    for (int i = 0; i < hw; i++) {
        s->pixels[3 * i] = px[i];
        s->pixels[3 * i + 1] = px[hw + i];
        s->pixels[3 * i + 2] = px[2 * hw + i];
    }
    s->h = s->w = CIFAR_SIDE;
    s->c = 3;
    *label = r[im->label_off];
    return VT_OK;
}

static void cifar_close(vt_dataset *ds) {
    if (!ds) return;
    cifar_impl *im = ds->impl;
    if (im) free(im->records);
    free(im);
    free(ds);
}

static const vt_dataset_ops cifar_ops = {.read = cifar_read, .close = cifar_close};

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Read `path` (size bytes, a whole number of records) to dst and validate its labels. */
static vt_status load_file(const char *path, size_t size, const char *kind, int rec, uint8_t *dst) {
    int fd;
    int64_t have;
    vt_status opened = vt_input_open(path, kind, &fd, &have);
    if (opened != VT_OK) return vt_fail_context(opened, "data.kind=%s", kind);
    FILE *f = fdopen(fd, "rb");
    VT_ASSERT(f != NULL, "fdopen of an open descriptor failed");
    size_t got = fread(dst, 1, size, f);
    int err = ferror(f);
    fclose(f);
    if (got != size)
        return vt_fail(VT_ERR_RUNTIME, "data.kind=%s: %s: read %zu of %zu bytes%s", kind, path, got,
                       size, err ? " (read error)" : " (file shrank while reading)");
    int cifar100 = rec == CIFAR_PIXELS + 2;
    for (size_t r = 0; r < size / (size_t)rec; r++) {
        const uint8_t *b = dst + r * (size_t)rec;
        for (int k = 0; k < (cifar100 ? 2 : 1); k++) {
            int lim = cifar100 ? (k == 0 ? 20 : 100) : 10;
            if (b[k] >= lim)
                return vt_fail(VT_ERR_RUNTIME, "data.kind=%s: %s: record %zu (byte offset %zu) has "
                               "%s label %d, expected 0..%d; is this the %s binary version?", kind,
                               path, r, r * (size_t)rec + (size_t)k,
                               cifar100 ? (k == 0 ? "coarse" : "fine") : "its", b[k], lim - 1,
                               cifar100 ? "CIFAR-100" : "CIFAR-10");
        }
    }
    return VT_OK;
}

/* The files of a split (names[0..*nfiles)) and the directory holding them: root, or the
 * folder the archive extracts to when the first file is there. */
static void split_files(const vt_data_config *d, vt_split split, int cifar100, const char **names,
                        int *nfiles, char *dir, size_t dir_len) {
    static const char *const names10[5] = {"data_batch_1.bin", "data_batch_2.bin",
                                           "data_batch_3.bin", "data_batch_4.bin",
                                           "data_batch_5.bin"};
    const char *root = d->root;
    if (split == VT_SPLIT_TRAIN && !cifar100) {
        *nfiles = 5;
        for (int i = 0; i < 5; i++) names[i] = names10[i];
    } else {
        *nfiles = 1;
        names[0] = split == VT_SPLIT_TRAIN ? "train.bin" : cifar100 ? "test.bin" : "test_batch.bin";
    }
    char path[VT_STR + 128];
    snprintf(dir, dir_len, "%s", root);
    snprintf(path, sizeof path, "%s/%s", root, names[0]);
    if (!is_file(path)) {
        snprintf(path, sizeof path, "%s/%s/%s", root, cifar100 ? "cifar-100-binary" : "cifar-10-batches-bin",
                 names[0]);
        if (is_file(path)) snprintf(dir, dir_len, "%s/%s", root, cifar100 ? "cifar-100-binary"
                                                                             : "cifar-10-batches-bin");
    }
}

/* Open cifar10 (cifar100 = 0) or cifar100 for a split. */
static vt_status cifar_open(vt_dataset **out, const vt_data_spec *spec, vt_split split, int cifar100) {
    *out = NULL;
    const char *kind = cifar100 ? "cifar100" : "cifar10";
    const char *root = spec->data.root;
    const char *subdir = cifar100 ? "cifar-100-binary" : "cifar-10-batches-bin";
    struct stat rst;
    if (stat(root, &rst) != 0 || !S_ISDIR(rst.st_mode))
        return vt_fail(VT_ERR_RUNTIME, "data.root = %s: %s; data.kind=%s expects a directory holding "
                       "the CIFAR binary files (%s)", root,
                       stat(root, &rst) != 0 ? strerror(errno) : "not a directory", kind,
                       cifar100 ? "train.bin, test.bin" : "data_batch_1..5.bin, test_batch.bin");
    const char *names[5];
    int nfiles;
    char dir[VT_STR + 64], path[VT_STR + 128];
    split_files(&spec->data, split, cifar100, names, &nfiles, dir, sizeof dir);
    int rec = CIFAR_PIXELS + (cifar100 ? 2 : 1);
    size_t sizes[5], total = 0;
    for (int i = 0; i < nfiles; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        int64_t size;
        vt_status found = vt_input_size(path, kind, &size);
        if (found != VT_OK && errno != ENOENT) return vt_fail_context(found, "data.kind=%s", kind);
        if (found != VT_OK)
            return vt_fail(VT_ERR_RUNTIME, "data.kind=%s: missing %s (also looked in %s/%s); the %s "
                           "split needs %s (the official binary version, %s)", kind, path, root,
                           subdir, split == VT_SPLIT_TRAIN ? "train" : "val",
                           nfiles == 5 ? "data_batch_1.bin .. data_batch_5.bin" : names[0],
                           cifar100 ? "cifar-100-binary.tar.gz" : "cifar-10-binary.tar.gz");
        sizes[i] = (size_t)size;
        if (sizes[i] == 0)
            return vt_fail(VT_ERR_RUNTIME, "data.kind=%s: %s: empty file (0 bytes), expected "
                           "%d-byte records", kind, path, rec);
        if (sizes[i] % (size_t)rec != 0)
            return vt_fail(VT_ERR_RUNTIME, "data.kind=%s: %s: size %zu bytes is not a whole number of "
                           "%d-byte records (%zu records + %zu bytes); truncated, or not the %s binary "
                           "version?", kind, path, sizes[i], rec, sizes[i] / (size_t)rec,
                           sizes[i] % (size_t)rec, cifar100 ? "CIFAR-100" : "CIFAR-10");
        total += sizes[i];
    }
    uint8_t *records = malloc(total);
    if (!records)
        return vt_fail(VT_ERR_RUNTIME, "data.kind=%s: out of memory for %zu bytes of records", kind, total);
    size_t at = 0;
    for (int i = 0; i < nfiles; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        vt_status s = load_file(path, sizes[i], kind, rec, records + at);
        if (s) {
            free(records);
            return s;
        }
        at += sizes[i];
    }
    cifar_impl *im = vt_xcalloc(1, sizeof *im);
    im->records = records;
    im->rec = rec;
    int fine = cifar100 && strcmp(spec->data.label, "coarse") != 0;
    im->label_off = fine ? 1 : 0;
    vt_dataset *ds = vt_xcalloc(1, sizeof *ds);
    ds->ops = &cifar_ops;
    ds->size = (int64_t)(total / (size_t)rec);
    ds->num_classes = cifar100 ? (fine ? 100 : 20) : 10;
    ds->channels = 3;
    ds->height = ds->width = CIFAR_SIDE;
    ds->impl = im;
    *out = ds;
    return VT_OK;
}

static vt_status cifar10_open(vt_dataset **out, const vt_data_spec *spec, vt_split split) {
    return cifar_open(out, spec, split, 0);
}

static vt_status cifar100_open(vt_dataset **out, const vt_data_spec *spec, vt_split split) {
    return cifar_open(out, spec, split, 1);
}

/* The split's files are held whole once open: their bytes, and records in *samples. */
static int64_t cifar_memory(const vt_data_spec *spec, vt_split split, int64_t *samples) {
    const char *names[5];
    int nfiles, cifar100 = spec->data.kind == VT_DATA_CIFAR100;
    char dir[VT_STR + 64], path[VT_STR + 128];
    split_files(&spec->data, split, cifar100, names, &nfiles, dir, sizeof dir);
    int64_t total = 0;
    for (int i = 0; i < nfiles; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) total += (int64_t)st.st_size;
    }
    *samples = total / (CIFAR_PIXELS + (cifar100 ? 2 : 1));
    return total;
}

static int cifar10_classes(const vt_data_config *d) {
    (void)d;
    return 10;
}

static int cifar100_classes(const vt_data_config *d) {
    return strcmp(d->label, "coarse") == 0 ? 20 : 100;
}

/* The model's classifier has exactly the dataset's classes. */
static vt_status cifar_check(const vt_data_spec *s, int64_t step_samples, const char *src) {
    (void)step_samples;
    int c100 = s->data.kind == VT_DATA_CIFAR100;
    int k = c100 ? cifar100_classes(&s->data) : cifar10_classes(&s->data);
    if (s->num_classes != k)
        return vt_fail(VT_ERR_USAGE, "%s: model.num_classes = %d but data.kind = %s%s has %d classes",
                       src, s->num_classes, vt_data_kind_name(s->data.kind),
                       c100 ? (k == 20 ? " (coarse)" : " (fine)") : "", k);
    return VT_OK;
}

const vt_dataset_kind vt_dataset_cifar10 = {
    .kind = VT_DATA_CIFAR10,
    .fixed_size = 1,
    .needs_root = 1,
    .native_side = 32,
    .classes = cifar10_classes,
    .check = cifar_check,
    .open = cifar10_open,
    .memory = cifar_memory,
    .classes_doc = "10",
    .rules_doc = "model.num_classes = 10",
};

const vt_dataset_kind vt_dataset_cifar100 = {
    .kind = VT_DATA_CIFAR100,
    .fixed_size = 1,
    .needs_root = 1,
    .native_side = 32,
    .classes = cifar100_classes,
    .check = cifar_check,
    .open = cifar100_open,
    .memory = cifar_memory,
    .classes_doc = "100 (data.label = fine) or 20 (coarse)",
    .rules_doc = "model.num_classes = the classes",
};
