/* optim.h - AdamW / SGD over the flat parameter buffer, the LR schedule and global-norm
 * gradient clipping.
 *
 * AdamW follows torch.optim.AdamW (decoupled decay, bias correction). Weight decay
 * applies only to parameters with decay = 1 (weights of linear/conv layers): never to
 * biases, norms, CLS, APE or PE parameters. SGD: torch.optim.SGD with momentum and
 * (coupled) weight decay on the same set.
 *
 * Schedule (step s = 0-based optimizer step, evaluated before the update):
 *   s < W:  lr * (s + 1) / W            (linear warmup; W = warmup steps, warmup_epochs
 *                                         converted with steps per epoch; warmup_lr is the
 *                                         start value when > 0: warmup_lr + (lr - warmup_lr) s / W)
 *   else:   cosine: min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi (s - W) / (T - W)))
 *           constant: lr
 * with T the total number of optimizer steps.
 */
#ifndef VT_OPTIM_H
#define VT_OPTIM_H

#include <stdint.h>

#include "config.h"
#include "vit.h"

typedef struct vt_optim {
    vt_optim_config cfg;
    float *m, *v;          /* AdamW moments (SGD: m is the momentum buffer), n floats each */
    int64_t n;
    int64_t t;             /* updates done (bias-correction exponent) */
} vt_optim;

vt_status vt_optim_init(vt_optim *o, const vt_optim_config *cfg, int64_t n_params);
void vt_optim_free(vt_optim *o);
/* One update of every parameter of m with learning rate lr (grads already averaged
 * over accumulation). */
void vt_optim_step(vt_optim *o, vt_vit *m, float lr);

/* LR at optimizer step s of T total, W warmup steps (see the formula above). */
double vt_lr_at(const vt_optim_config *cfg, int64_t s, int64_t T, int64_t W);

/* Global L2 norm of all grads (double accumulation, deterministic); if max_norm > 0
 * and the norm exceeds it, scale grads by max_norm / (norm + 1e-6) (torch's
 * clip_grad_norm_). Returns the norm before clipping. */
double vt_clip_grad_norm(vt_vit *m, double max_norm);

#endif
