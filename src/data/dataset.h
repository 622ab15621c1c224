/* dataset.h - the internal dataset interface behind loader.c.
 *
 * A dataset kind is one file implementing a small vtable: it knows how many samples a
 * split has, how many classes and native channels it defines, and how to read sample
 * `index` as 8-bit HWC pixels plus a label. It knows nothing about ordering, batching,
 * resizing, normalisation, augmentation or threads: loader.c owns those for every kind.
 *
 * Thread safety: read() is called concurrently, from the loader's worker pthreads
 * (data.workers > 0) or from the OpenMP threads of its synchronous path, each caller
 * with its own vt_sample buffer, so an implementation must not mutate shared state in read()
 * (the IDX, synthetic and CIFAR kinds are read-only after open; imagefolder's only
 * writes are atomics recording bad files under data.on_error = skip).
 *
 * Kinds: idx.c (MNIST-style IDX files), synthetic.c (generated on the fly), cifar.c
 * (CIFAR-10/100 binary versions), imagefolder.c (root/<split>/<class>/<image>, decoded
 * per sample through image.h). A kind is one file and one case in loader.c's open.
 *
 * Native size: idx, synthetic and CIFAR samples all have the dataset's height x width;
 * imagefolder samples have their own size and 1 or 3 channels (height = width = 0,
 * channels = 3): read() sets s->h, s->w, s->c per sample and the transform stage resizes
 * and converts gray to the model's channels.
 *
 * Bad files (imagefolder): with data.on_error = fail, read() returns the decode error
 * naming the file and the reason. With skip, read() replaces the sample by the next
 * index (cyclically) whose file decodes, logs each bad file once on stderr, and counts
 * distinct bad files: vt_dataset_skipped reports that count (0 for the other kinds).
 */
#ifndef VT_DATASET_H
#define VT_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "data/loader.h"
#include "status.h"

/* One decoded sample: h x w x c bytes, HWC, row-major, c fastest. The buffer is owned
 * by the caller (one per thread) and grows only through vt_sample_reserve, so after
 * the first batches no read allocates. */
typedef struct {
    uint8_t *pixels;
    size_t cap;          /* bytes allocated at pixels */
    int h, w, c;         /* set by read() */
} vt_sample;

/* Make room for `bytes` pixels (keeps the buffer if already large enough). Returns
 * VT_ERR_RUNTIME with the size if memory runs out. */
vt_status vt_sample_reserve(vt_sample *s, size_t bytes);
void vt_sample_free(vt_sample *s);

typedef struct vt_dataset vt_dataset;

typedef struct {
    const char *kind;    /* "idx", "synthetic": used in messages */
    /* Decode sample `index` (0 <= index < size) into s (reserving as needed) and its
     * class label (0 <= label < num_classes). Errors name the file and sample. */
    vt_status (*read)(const vt_dataset *ds, int64_t index, vt_sample *s, int *label);
    /* Release everything the dataset owns, including ds itself. */
    void (*close)(vt_dataset *ds);
} vt_dataset_ops;

struct vt_dataset {
    const vt_dataset_ops *ops;
    int64_t size;        /* samples in the split */
    int num_classes;     /* classes the dataset defines */
    int channels;        /* native channels: 1 gray, 3 RGB, 4 RGB + depth */
    int height, width;   /* native size of every sample; 0 if it varies per sample */
    void *impl;          /* the kind's private state */
};

/* Open the IDX dataset (data.kind = idx) of cfg->data.root for a split; see idx.c for
 * file naming, the val -> t10k fallback and validation. */
vt_status vt_dataset_open_idx(vt_dataset **out, const vt_config *cfg, vt_split split);

/* Open the synthetic dataset (data.kind = synthetic) for a split; see synthetic.c. */
vt_status vt_dataset_open_synthetic(vt_dataset **out, const vt_config *cfg, vt_split split);

/* Open CIFAR-10 / CIFAR-100 (data.kind = cifar10 / cifar100, binary versions) for a
 * split; see cifar.c for files, record layout and validation. */
vt_status vt_dataset_open_cifar10(vt_dataset **out, const vt_config *cfg, vt_split split);
vt_status vt_dataset_open_cifar100(vt_dataset **out, const vt_config *cfg, vt_split split);

/* Open an image folder (data.kind = imagefolder) for a split; see imagefolder.c for the
 * layout, class indexing and bad-file handling. */
vt_status vt_dataset_open_imagefolder(vt_dataset **out, const vt_config *cfg, vt_split split);
/* Name of class k (0 <= k < num_classes) of an imagefolder dataset. */
const char *vt_imagefolder_class_name(const vt_dataset *ds, int k);
/* Files of an imagefolder split that were not indexed: names without a .jpg, .jpeg or
 * .png extension (any case), hidden names, and files outside class folders. */
int64_t vt_imagefolder_ignored(const vt_dataset *ds);
/* Distinct files skipped so far under data.on_error = skip: thread-safe, monotonic;
 * always 0 for kinds that validate everything at open (idx, synthetic, CIFAR). */
int64_t vt_dataset_skipped(const vt_dataset *ds);
/* Path of sample index of an imagefolder dataset (into buf of len bytes; returns buf). */
const char *vt_imagefolder_path(const vt_dataset *ds, int64_t index, char *buf, size_t len);

/* The synthetic class pattern k, channel ch: p x p floats, zero mean and unit standard
 * deviation (exposed for tests and for documentation of the generator). */
void vt_synthetic_pattern(uint64_t seed, int k, int ch, int p, float *out);

#endif
