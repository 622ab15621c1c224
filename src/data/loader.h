/* loader.h - batches of model-ready images from any dataset kind.
 *
 * The training loop sees only this interface: it never knows whether samples come
 * from IDX files, CIFAR binaries, an image folder or the synthetic generator.
 * It receives a vt_data_spec (dataset.h: the resolved data section plus the few values of
 * other sections it uses), never the whole config.
 * Images come out as float32 (B, C, S, S) at the requested size S, normalised with
 * data.mean/std, C = model.in_chans. The sample order of epoch e is a permutation
 * derived from (seed, e) (train split; the eval split keeps dataset order), so a
 * run resumed at (epoch, batch) sees exactly the batches the uninterrupted run saw.
 * Training transforms and augmentation (data.train_transform, auto_augment, mixup,
 * cutmix, reprob) and the evaluation resize + crop are described in loader.c; every
 * random decision is seeded per sample (train.seed, epoch, index) or per batch, so
 * batches do not depend on thread counts, worker counts or timing.
 */
#ifndef VT_LOADER_H
#define VT_LOADER_H

#include <stdint.h>

#include "data/dataset.h"
#include "status.h"

typedef struct vt_loader vt_loader;

/* Open the dataset of a resolved spec for a split; images are produced at img_size
 * (the model's, or another for resolution studies) with spec->in_chans channels.
 * Errors (missing root/split, bad files) name the path and reason. */
vt_status vt_loader_open(vt_loader **out, const vt_data_spec *spec, vt_split split, int img_size);
void vt_loader_close(vt_loader *L);

int64_t vt_loader_size(const vt_loader *L);      /* samples in the split (this rank's shard) */
int64_t vt_loader_split_size(const vt_loader *L); /* samples in the split (every shard) */
int vt_loader_num_classes(const vt_loader *L);   /* classes the dataset defines */
/* Distinct bad files replaced so far under data.on_error = skip (0 for kinds that
 * validate at open); thread-safe, for the training loop's epoch summary. */
int64_t vt_loader_skipped(const vt_loader *L);

/* Position the loader at batch `batch` of epoch `epoch` (batches of batch_size;
 * the train split drops the last partial batch, the eval split keeps it). */
void vt_loader_seek(vt_loader *L, int epoch, int64_t batch, int batch_size);
/* Batches in one epoch for this batch size (see the drop rule above). */
int64_t vt_loader_batches(const vt_loader *L, int batch_size);
/* Fill the next batch: images (batch_size * C * S * S floats), labels (batch_size
 * ints), soft (batch_size * num_classes floats, mixup/cutmix targets) or NULL when the
 * recipe has none. *count receives the samples filled (< batch_size only for the last
 * eval batch; 0 at the end of the epoch). Returns *soft_used = 1 if soft targets
 * were written. Errors (a corrupt file under on_error=fail) return non-OK and name the
 * epoch and batch counted from 1, as the progress line counts epochs. */
vt_status vt_loader_next(vt_loader *L, float *images, int *labels, float *soft,
                         int *soft_used, int *count);

/* Where the next vt_loader_next reads: its epoch and batch (for resume state). After
 * next() reports the end of an epoch (*count = 0) the loader stands at batch 0 of the
 * following epoch. Until the first seek the batch size is the spec's train_batch (train
 * split) or eval_batch (eval split). */
void vt_loader_position(const vt_loader *L, int *epoch, int64_t *batch);

/* Image-folder datasets: the file of position p of the eval split (dataset order, every
 * shard's: a rank gathering all ranks' rows names them all) into buf (returns buf), and
 * the folder name of class k. NULL for other kinds. */
const char *vt_loader_sample_path(const vt_loader *L, int64_t p, char *buf, size_t len);
const char *vt_loader_class_name(const vt_loader *L, int k);

/* Shard for data-parallel training: this loader reads only positions rank, rank + world,
 * rank + 2 world, ... of each epoch's order (train: the permutation; eval: dataset order),
 * so the ranks' shards partition the split. vt_loader_size is then the shard's sample
 * count; train batches per epoch are floor(size / world) / batch_size on every rank (equal
 * step counts; the few samples past that are not seen that epoch), eval batches cover the
 * whole shard (empty for a rank >= size). With batch_size = B / world, batch b of the ranks
 * together is batch b of one process at B, mixup included (loader.c). Positions the
 * loader at batch 0 of its current epoch. Default: 0 of 1. */
void vt_loader_set_shard(vt_loader *L, int rank, int world);

/* Worker threads that prefetch batches (loader.c describes the design): n > 0 threads,
 * or 0 for the synchronous path (the calling thread fills each batch with an OpenMP loop).
 * vt_loader_open takes data.workers (0 there = auto: online CPUs, at most 8). Batches are
 * bitwise identical for every choice. Stops running workers; takes effect at the next
 * vt_loader_next. */
void vt_loader_set_workers(vt_loader *L, int workers);
int vt_loader_workers(const vt_loader *L);

/* Bytes a loader of this split would hold at img_size with batches of batch_size
 * (prefetch slots, their soft targets when soft is set: the train split with mixup or
 * cutmix; per-worker buffers), in *dataset_bytes what its dataset holds and in *samples
 * its sample count (dataset.h's descriptors' memory(); an imagefolder's index is not
 * counted and its count is -1, unknown), without opening anything: the memory estimate of
 * `vitrain info`. */
int64_t vt_loader_memory_estimate(const vt_data_spec *spec, vt_split split, int img_size,
                                  int batch_size, int soft, int64_t *dataset_bytes, int64_t *samples);

/* Open a loader over a dataset the caller built (the dataset.h vtable; tests and benches
 * use it for datasets that are not a data.kind). Takes ownership of ds, also on error.
 * spec supplies everything else as for vt_loader_open (its data.kind only names the
 * dataset in messages when ds->ops->kind is NULL). */
vt_status vt_loader_open_dataset(vt_loader **out, vt_dataset *ds, const vt_data_spec *spec,
                                 vt_split split, int img_size);

#endif
