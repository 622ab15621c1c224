/* footprint.h - the memory a training run of a config holds, estimated from the config
 * alone for `vitrain info`: no model is allocated (vt_vit_plan) and no data is read
 * beyond file sizes, so it answers at once for any size.
 *
 * Owns only the sum; every term comes from the module that owns the memory:
 *   baseline     the process before training: the caller's own resident set (the
 *                binary, its libraries, the kernel table), measured
 *   dataset      the train and val splits as held in memory (loader.h: CIFAR and IDX
 *                files, the synthetic class patterns; an imagefolder index is not counted)
 *   model        parameters, gradients and the optimizer moments (two for AdamW, one for
 *                SGD), plus Performer's features
 *   activations  a training step's arena and gradient region (vit.h
 *                vt_vit_activation_floats), with the loss's targets and probabilities
 *                (cross_entropy.c keeps both, K floats each per image)
 *   scratch      the training and evaluation tapes' scratch (layernorm_linear and
 *                gelu_linear: N max(D, Dh) floats per image) and each thread's GEMM
 *                workspace (vt_k.gemm_work_floats of the largest product)
 *   eval         the evaluator: its arena (vt_vit_eval_floats and the loss's 2 K per image)
 *                and batch buffers
 *   loader       the train and val loaders (loader.h: prefetch slots, worker buffers) and
 *                the training loop's batch
 * total is their sum: the peak of a run, reached at its first evaluation, when the
 * training step's memory is still held. A resumed run also reads its checkpoint pair
 * while the model exists but before any step: resume_peak.
 */
#ifndef VT_FOOTPRINT_H
#define VT_FOOTPRINT_H

#include "config.h"
#include "status.h"

typedef struct {
    double baseline, dataset, model, activations, scratch, eval, loader; /* bytes */
    double total;
    double resume_peak;  /* bytes at the peak of loading a checkpoint pair on --resume */
} vt_footprint;

/* The estimate for cfg (resolved) with the process's own baseline bytes. Errors: the
 * model's config checks (vt_vit_plan). */
vt_status vt_footprint_estimate(const vt_config *cfg, double baseline, vt_footprint *out);

/* This process's resident set in bytes (/proc/self/statm; 0 if unreadable). */
double vt_footprint_resident(void);

#endif
