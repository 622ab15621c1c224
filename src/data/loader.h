/* loader.h - batches of model-ready images from any dataset kind.
 *
 * The training loop sees only this interface: it never knows whether samples come
 * from IDX files, CIFAR binaries, an image folder or the synthetic generator.
 * Images come out as float32 (B, C, S, S) at the requested size S, normalised with
 * data.mean/std, C = model.in_chans. The sample order of epoch e is a permutation
 * derived from (seed, e) (train split; the eval split keeps dataset order), so a
 * run resumed at (epoch, batch) sees exactly the batches the uninterrupted run saw.
 */
#ifndef VT_LOADER_H
#define VT_LOADER_H

#include <stdint.h>

#include "config.h"
#include "status.h"

typedef struct vt_loader vt_loader;

typedef enum { VT_SPLIT_TRAIN = 0, VT_SPLIT_VAL = 1 } vt_split;

/* Open the dataset of cfg->data for a split; images are produced at img_size
 * (the model's, or another for resolution studies) with model.in_chans channels.
 * Errors (missing root/split, bad files) name the path and reason. */
vt_status vt_loader_open(vt_loader **out, const vt_config *cfg, vt_split split, int img_size);
void vt_loader_close(vt_loader *L);

int64_t vt_loader_size(const vt_loader *L);      /* samples in the split */
int vt_loader_num_classes(const vt_loader *L);   /* classes the dataset defines */

/* Position the loader at batch `batch` of epoch `epoch` (batches of batch_size;
 * the train split drops the last partial batch, the eval split keeps it). */
void vt_loader_seek(vt_loader *L, int epoch, int64_t batch, int batch_size);
/* Batches in one epoch for this batch size (see the drop rule above). */
int64_t vt_loader_batches(const vt_loader *L, int batch_size);
/* Fill the next batch: images (batch_size * C * S * S floats), labels (batch_size
 * ints), soft (batch_size * num_classes floats, mixup/cutmix targets) or NULL when the
 * recipe has none. *count receives the samples filled (< batch_size only for the last
 * eval batch; 0 at the end of the epoch). Returns *soft_used = 1 if soft targets
 * were written. Errors (a corrupt file under on_error=fail) return non-OK. */
vt_status vt_loader_next(vt_loader *L, float *images, int *labels, float *soft,
                         int *soft_used, int *count);

/* Where the next vt_loader_next reads: its epoch and batch (for resume state). After
 * next() reports the end of an epoch (*count = 0) the loader stands at batch 0 of the
 * following epoch. Until the first seek the batch size is train.batch_size (train
 * split) or eval.batch_size, falling back to train.batch_size (eval split). */
void vt_loader_position(const vt_loader *L, int *epoch, int64_t *batch);

#endif
