/* eval.h - accuracy of a model on the validation split.
 *
 * Owns: batching over the val split (dataset order, the last partial batch kept; with
 * eval.max_samples > 0 only that many samples from its start), the
 * eval-mode forward (gradients off, no dropout / drop-path), top-1 / top-5 counting and
 * the mean cross-entropy, and the patch-shuffle probe. Used by the training loop
 * (periodic and final evaluation) and by `vitrain eval` (which also evaluates at other
 * image sizes: one evaluator per size, the model handles any grid through vt_vit_forward,
 * positions per pe.positions, a learned APE resampled, a sincos APE recomputed). Does
 * not own the model, checkpoints or metrics files.
 *
 * Patch shuffle (the LieRE study of how much a model uses position): with
 * ev->shuffle set, every val image's P x P patches are permuted before the forward by
 * a permutation fixed per image (vt_eval_patch_permutation of (shuffle_seed, dataset
 * index)), so positions stay on the grid and the content moves. A model without any
 * PE and with CLS or mean pooling gives the same logits up to float rounding (its
 * patch tokens are permutation-equivariant and the pooling is invariant).
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
    int64_t n;           /* samples evaluated: the split, or its first eval.max_samples */
    int rank, ranks;     /* data parallel: this rank evaluates samples rank, rank + ranks, ... */
    int64_t n_local;     /* of which this rank's */
    float *logits_local; /* this rank's logits rows and labels when gathering them */
    int *labels_local;
    float *images;       /* batch_size * in_chans * img_size^2 */
    int *labels;         /* batch_size */
    float *soft;         /* batch_size * num_classes (loader contract; unused for val) */
    vt_arena arena;
    vt_tape tape;
    int patch_size;
    int *labels_out;         /* NULL, or ev->n ints receiving the labels in dataset order
                                (set by the caller; for `vitrain eval --logits`) */
    int shuffle;             /* 0: plain evaluation; 1: patch-shuffled (set by the caller) */
    uint64_t shuffle_seed;   /* seed of the per-image permutations */
    int *perm;               /* (S/P)^2 permutation workspace */
    float *scratch;          /* one image, in_chans * S * S */
    int (*stop_signal)(void); /* NULL, or this process's stop request (stop.h, set by the
                                 training loop): checked before each batch, agreed across
                                 ranks; a request ends the evaluation early */
    int stopped;             /* the request (a signal number) that ended the last
                                vt_eval_run early, its result left unset; 0: it ran whole */
} vt_evaluator;

/* Open the val split of a resolved cfg's data at img_size (S, a multiple of
 * model.patch_size: resolve.h's vt_resolve_image_size checks a size a user gives; here it
 * is asserted) with batches of eval.batch_size. With R data-parallel ranks (dist.h) each
 * rank takes the shard of samples rank, rank + R, ... in batches of ceil(batch / R), and
 * vt_eval_run (a collective then) sums the counts: a sample's logits do not depend on
 * which samples share its batch (tests/test_dist.c), so top-1 and top-5 equal one
 * process's exactly and the loss up to summation order. Errors: the loader's (missing
 * files ...), or a dataset whose class count exceeds model.num_classes. */
vt_status vt_eval_open(vt_evaluator *ev, const vt_config *cfg, int img_size);
void vt_eval_close(vt_evaluator *ev);
/* Allocate now the memory a batch of m's evaluation needs (the arena and the tape
 * scratch, vit.h vt_vit_eval_floats, and the GEMM buffers, ops/par.h), so an
 * eval.batch_size too large for this machine is an error before the first evaluation,
 * not an abort inside it. Errors: VT_ERR_RUNTIME naming the batch, the bytes and
 * eval.batch_size (or the GEMM buffers and the thread count). */
vt_status vt_eval_reserve(vt_evaluator *ev, const vt_vit *m);

/* Evaluate m over the first ev->n samples of the split (all of it, or eval.max_samples).
 * logits: NULL, or ev->n * num_classes floats that receive the logits, rows in dataset
 * order (for `vitrain eval --logits`). With several ranks, logits and ev->labels_out are
 * gathered on rank 0: every rank passes them (or none does), and the other ranks' pointers
 * are only read as "wanted", never written. The model's parameters are not modified.
 * Errors (every rank returns the first failing rank's): loader failures; a label outside
 * [0, num_classes). With ev->stop_signal set, a stop request seen by any rank before a
 * batch ends the evaluation there on every rank: VT_OK with ev->stopped = the request and
 * *res not set (a long evaluation of a run told to stop does not run to its end). */
vt_status vt_eval_run(vt_evaluator *ev, vt_vit *m, float *logits, vt_eval_result *res);

/* The patch permutation of dataset sample `index` under `seed`: perm[g] (n entries,
 * a permutation of 0..n-1, uniform by Fisher-Yates over vt_rng seeded with
 * vt_rng_derive(seed, index, 0x5107)) is the source patch whose content lands at grid
 * cell g. Deterministic: independent of batch size and thread count. */
void vt_eval_patch_permutation(int *perm, int n, uint64_t seed, int64_t index);

/* dst (C, S, S) = src with patch cell g (row-major over the (S/P)^2 grid) taken from
 * src's cell perm[g]. dst and src must not overlap; S divisible by P. */
void vt_eval_permute_patches(float *dst, const float *src, const int *perm, int C, int S, int P);

/* Rank of class y among the K logits in row (see the tie rule above). */
int vt_eval_rank(const float *row, int K, int y);

#endif
