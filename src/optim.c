/* optim.c - AdamW and SGD over the model's flat parameter buffer, the LR schedule and
 * global-norm gradient clipping (contracts in optim.h).
 *
 * AdamW: torch.optim.AdamW. One vt_k.adamw call per parameter view with wd =
 * weight_decay when the parameter's decay flag is set, else 0; bias corrections
 * bc1 = 1 - b1^t, bc2 = 1 - b2^t are computed in double (t = updates done, 1-based
 * inside the step) and passed as float. SGD: torch.optim.SGD with momentum, no
 * dampening, no Nesterov: g' = g + wd p (decay params only), buf = momentum buf + g',
 * p -= lr buf (buf starts at 0, so the first step sets buf = g' as torch does).
 * Both updates are elementwise, so splitting parameters over OpenMP threads does not
 * change any result. A parameter with a bf16 copy (train.precision = bf16, precision.h)
 * has it rounded again right after its update, while it is in cache: once per step.
 * Clipping: each parameter's sum of squares on some thread (vt_k.dot), added in parameter
 * order, so the norm is the same for any thread count; the scale is elementwise.
 * Does not own the moments' checkpointing (train.c saves o->m, o->v).
 */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

vt_status vt_optim_init(vt_optim *o, const vt_optim_config *cfg, int64_t n_params) {
    memset(o, 0, sizeof *o);
    if (cfg->name != VT_OPT_ADAMW && cfg->name != VT_OPT_SGD)
        return vt_fail(VT_ERR_USAGE, "optim.name: expected adamw or sgd, found enum value %d", (int)cfg->name);
    o->cfg = *cfg;
    o->n = n_params;
    size_t bytes = (size_t)n_params * sizeof(float);
    o->m = vt_aligned_alloc(bytes);
    if (cfg->name == VT_OPT_ADAMW) o->v = vt_aligned_alloc(bytes);
    if (!o->m || (cfg->name == VT_OPT_ADAMW && !o->v)) {
        vt_optim_free(o);
        return vt_fail(VT_ERR_RUNTIME, "out of memory: optimizer state needs %s%zu bytes",
                       cfg->name == VT_OPT_ADAMW ? "2 x " : "", bytes);
    }
    memset(o->m, 0, bytes);
    if (o->v) memset(o->v, 0, bytes);
    return VT_OK;
}

void vt_optim_free(vt_optim *o) {
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
    o->n = 0;
}

static void sgd_update(float *p, const float *g, float *buf, int64_t n, float lr, float momentum, float wd) {
    for (int64_t i = 0; i < n; i++) {
        float gi = wd != 0.0f ? g[i] + wd * p[i] : g[i];
        buf[i] = momentum * buf[i] + gi;
        p[i] -= lr * buf[i];
    }
}

void vt_optim_step(vt_optim *o, vt_vit *m, float lr) {
    VT_ASSERT(o->n == m->n_params, "optimizer sized for %lld parameters, model has %lld", (long long)o->n,
              (long long)m->n_params);
    o->t++;
    const vt_optim_config *c = &o->cfg;
    float wd = (float)c->weight_decay;
    if (c->name == VT_OPT_ADAMW) {
        float b1 = (float)c->betas[0], b2 = (float)c->betas[1], eps = (float)c->eps;
        float bc1 = (float)(1.0 - pow(c->betas[0], (double)o->t));
        float bc2 = (float)(1.0 - pow(c->betas[1], (double)o->t));
        #pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < m->n_p; i++) {
            const vt_param *p = &m->p[i];
            vt_k.adamw(p->t.data, p->t.grad, o->m + p->offset, o->v + p->offset, (size_t)p->t.size, lr, b1, b2,
                       eps, p->decay ? wd : 0.0f, bc1, bc2);
            if (p->t.bf16) vt_k.bf16_round(p->t.data, p->t.bf16, (size_t)p->t.size);
        }
    } else {
        float mom = (float)c->momentum;
        #pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < m->n_p; i++) {
            const vt_param *p = &m->p[i];
            sgd_update(p->t.data, p->t.grad, o->m + p->offset, p->t.size, lr, mom, p->decay ? wd : 0.0f);
            if (p->t.bf16) vt_k.bf16_round(p->t.data, p->t.bf16, (size_t)p->t.size);
        }
    }
}

double vt_lr_at(const vt_optim_config *cfg, int64_t s, int64_t T, int64_t W) {
    if (s < 0) s = 0;
    if (W > 0 && s < W) {
        if (cfg->warmup_lr > 0) return cfg->warmup_lr + (cfg->lr - cfg->warmup_lr) * (double)s / (double)W;
        return cfg->lr * (double)(s + 1) / (double)W;
    }
    if (cfg->schedule == VT_SCHED_CONSTANT) return cfg->lr;
    double frac = T > W ? (double)(s - W) / (double)(T - W) : 1.0;
    if (frac > 1.0) frac = 1.0;
    return cfg->min_lr + (cfg->lr - cfg->min_lr) * 0.5 * (1.0 + cos(M_PI * frac));
}

#define CLIP_CHUNK 65536 /* floats per work item of the clipping scale */

double vt_clip_grad_norm(vt_vit *m, double max_norm) {
    double *sq = vt_xmalloc((size_t)m->n_p * sizeof *sq);
    #pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < m->n_p; i++) sq[i] = vt_k.dot(m->p[i].t.grad, m->p[i].t.grad, (size_t)m->p[i].t.size);
    double sum = 0.0;
    for (int i = 0; i < m->n_p; i++) sum += sq[i];
    free(sq);
    double norm = sqrt(sum);
    if (max_norm > 0 && norm > max_norm) {
        float coef = (float)(max_norm / (norm + 1e-6));
        int64_t n = m->n_params, nc = (n + CLIP_CHUNK - 1) / CLIP_CHUNK;
        #pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < nc; c++) {
            int64_t s = c * CLIP_CHUNK, len = s + CLIP_CHUNK < n ? CLIP_CHUNK : n - s;
            vt_k.scale(m->grads + s, coef, (size_t)len);
        }
    }
    return norm;
}
