/* dataset.h - the dataset interface: what a dataset format is (its descriptor, the
 * registry of formats), what it receives (vt_data_spec) and the small vtable loader.c
 * reads samples through.
 *
 * A format (data.kind) is one descriptor, defined in the format's own file and listed in
 * the registry, formats.h: whether its samples share one native size, whether it reads
 * data.root, the classes it defines, its rules (checked once by resolve.c) and how to
 * open a split. A format knows nothing about ordering, batching, resizing, normalisation,
 * augmentation or threads: loader.c owns those for every format.
 *
 * An open dataset is a small vtable: it knows how many samples a split has, how many
 * classes and native channels it defines, and how to read sample `index` as 8-bit HWC
 * pixels plus a label.
 *
 * Thread safety: read() is called concurrently, from the loader's worker pthreads
 * (data.workers > 0) or from the OpenMP threads of its synchronous path, each caller
 * with its own vt_sample buffer, so an implementation must not mutate shared state in read()
 * (the IDX, synthetic and CIFAR kinds are read-only after open; imagefolder's only
 * writes are atomics recording bad files under data.on_error = skip).
 *
 * Formats: idx.c (MNIST-style IDX files), synthetic.c (generated on the fly), cifar.c
 * (CIFAR-10/100 binary versions), imagefolder.c (root/<split>/<class>/<image>, decoded
 * per sample through image.h). Adding one: formats.h.
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

#include "data/data_config.h"
#include "data/augment.h"
#include "status.h"

typedef enum { VT_SPLIT_TRAIN = 0, VT_SPLIT_VAL = 1 } vt_split;

/* What the data pipeline receives: the resolved data section and the few values of
 * other sections it uses (resolve.h's vt_resolve_data_spec builds it from a config). */
typedef struct {
    vt_data_config data;     /* resolved: train_transform and eval_transform are not auto */
    vt_randaug randaug;      /* data.auto_augment, parsed */
    int img_size;            /* model.img_size: the native size of synthetic samples */
    int in_chans;            /* model.in_chans: channels of every image produced */
    int num_classes;         /* model.num_classes: label range and soft-target width */
    uint64_t seed;           /* train.seed: sample order and augmentation streams */
    double label_smoothing;  /* train.label_smoothing, folded into mixup/cutmix targets */
    int train_batch, eval_batch; /* train.batch_size, eval.batch_size: a loader's batch
                                    size until its first seek */
    int quiet;               /* 1: no informational lines on stderr (data-parallel ranks
                                but rank 0); warnings about bad files still print */
} vt_data_spec;

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
    const char *kind;    /* the dataset's name in messages: NULL for the formats of the
                            registry (their data.kind name, formats.h), a name for a
                            dataset built outside it (tests, benches) */
    /* Decode sample `index` (0 <= index < size) into s (reserving as needed) and its
     * class label (0 <= label < num_classes). Errors name the file and sample. */
    vt_status (*read)(const vt_dataset *ds, int64_t index, vt_sample *s, int *label);
    /* Release everything the dataset owns, including ds itself. */
    void (*close)(vt_dataset *ds);
    /* Distinct bad files skipped so far (data.on_error = skip); NULL: never skips. */
    int64_t (*skipped)(const vt_dataset *ds);
    /* The file of sample index (into buf of len bytes; returns buf); NULL: samples are
     * not files of their own. */
    const char *(*sample_path)(const vt_dataset *ds, int64_t index, char *buf, size_t len);
    /* The name of class k (0 <= k < num_classes); NULL: classes have no names. */
    const char *(*class_name)(const vt_dataset *ds, int k);
} vt_dataset_ops;

struct vt_dataset {
    const vt_dataset_ops *ops;
    int64_t size;        /* samples in the split */
    int num_classes;     /* classes the dataset defines */
    int channels;        /* native channels: 1 gray, 3 RGB, 4 RGB + depth */
    int height, width;   /* native size of every sample; 0 if it varies per sample */
    void *impl;          /* the kind's private state */
};

/* A dataset format (data.kind): everything the rest of the program knows about it. */
typedef struct {
    vt_data_kind kind;   /* its data.kind; the name is vt_data_kind_name(kind) */
    int fixed_size;      /* every sample has the dataset's native size: resolve's defaults
                            are train_transform simple and eval_transform resize (crop
                            with an explicit data.crop_pct); otherwise rrc and crop */
    int needs_root;      /* reads data.root (resolve: it must not be empty) */
    int native_side;     /* every sample's side before the transforms when the format fixes
                            it (CIFAR: 32), else 0 (taken as model.img_size's by the
                            loader's memory estimate) */
    /* The classes it defines (model.num_classes' default), from the data section and,
     * for formats whose files name the classes (imagefolder), from those files; 0 when
     * the files cannot be read, NULL when only the samples tell (idx, synthetic). */
    int (*classes)(const vt_data_config *d);
    /* Its rules at resolve time, on the spec of a resolved config; step_samples =
     * train.batch_size * train.accum_steps. A broken rule is VT_ERR_USAGE with a message
     * that starts with src and names the key. NULL: none. */
    vt_status (*check)(const vt_data_spec *s, int64_t step_samples, const char *src);
    /* Open a split of a resolved spec; errors name the path and reason. */
    vt_status (*open)(vt_dataset **out, const vt_data_spec *s, vt_split split);
    /* Bytes a split holds in memory once open, and in *samples its sample count, from the
     * spec and the files' sizes alone (`vitrain info`); missing files count 0 bytes and
     * 0 samples. NULL: unknown without reading the data (the loader counts no bytes and
     * samples -1). */
    int64_t (*memory)(const vt_data_spec *s, vt_split split, int64_t *samples);
    /* Its classes and rules in words (the Dataset formats table of configs/README.md). */
    const char *classes_doc, *rules_doc;
} vt_dataset_kind;

/* Distinct files skipped so far under data.on_error = skip: thread-safe, monotonic;
 * always 0 for kinds that validate everything at open (idx, synthetic, CIFAR). */
int64_t vt_dataset_skipped(const vt_dataset *ds);

/* Path of sample index (into buf of len bytes; returns buf), or NULL for a format whose
 * samples are not files of their own (all but imagefolder). */
const char *vt_dataset_sample_path(const vt_dataset *ds, int64_t index, char *buf, size_t len);
/* Name of class k (0 <= k < num_classes), or NULL for a format without class names (all
 * but imagefolder). */
const char *vt_dataset_class_name(const vt_dataset *ds, int k);

#endif
