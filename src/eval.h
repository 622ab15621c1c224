/* eval.h - accuracy of a model on the validation split.
 *
 * Owns: batching over the val split (dataset order, the last partial batch kept), the
 * eval-mode forward (gradients off, no dropout / drop-path), top-1 / top-5 counting and
 * the mean cross-entropy. Used by the training loop (periodic and final evaluation)
 * and by `vitrain eval`. Does not own the model, checkpoints or metrics files.
 *
 * Top-k with ties: the rank of the true class y is the number of classes j whose
 * logit is greater than logit[y], plus the classes j < y whose logit equals it (so a
 * tie is resolved in favour of the lower class index, like a stable arg-sort). A
 * sample is top-k correct when that rank is < k; a NaN logit for y counts as wrong.
 * With fewer than 5 classes top-5 is 100%.
 */
#ifndef VT_EVAL_H
#define VT_EVAL_H

#include <stdint.h>

#include "config.h"
#include "data/loader.h"
#include "status.h"
#include "tape.h"
#include "tensor.h"
#include "vit.h"

typedef struct {
    double top1, top5;   /* percent, 0..100 */
    double loss;         /* mean cross-entropy (no label smoothing) over all samples */
    int64_t n;           /* samples evaluated */
    int img_size;        /* resolution the images were produced at */
} vt_eval_result;

/* An evaluator: the val-split loader at one image size plus its buffers, arena and
 * tape, so repeated evaluations during training allocate nothing after the first. */
typedef struct {
    vt_loader *loader;
    int img_size, batch_size, in_chans, num_classes;
    int64_t n;           /* samples in the split */
    float *images;       /* batch_size * in_chans * img_size^2 */
    int *labels;         /* batch_size */
    float *soft;         /* batch_size * num_classes (loader contract; unused for val) */
    vt_arena arena;
    vt_tape tape;
} vt_evaluator;

/* Open the val split of cfg->data at img_size (S, divisible by model.patch_size) with
 * batches of cfg->eval.batch_size (0: train.batch_size). Errors: the loader's (missing
 * files ...), or a dataset whose class count exceeds model.num_classes. */
vt_status vt_eval_open(vt_evaluator *ev, const vt_config *cfg, int img_size);
void vt_eval_close(vt_evaluator *ev);

/* Evaluate m over the whole split. logits: NULL, or ev->n * num_classes floats that
 * receive the logits, rows in dataset order (for `vitrain eval --logits`). The model's
 * parameters are not modified. Errors: loader failures; a label outside
 * [0, num_classes). */
vt_status vt_eval_run(vt_evaluator *ev, vt_vit *m, float *logits, vt_eval_result *res);

/* Rank of class y among the K logits in row (see the tie rule above). */
int vt_eval_rank(const float *row, int K, int y);

#endif
