/* drop_path.c - vt_op_drop_path: stochastic depth on a residual branch (timm drop_path
 * with scale_by_keep). When t->training and p > 0, sample b (leading dim) is zeroed
 * with probability p and survivors are scaled by 1/(1 - p); otherwise returns x itself.
 * Mask: one base seed from t->rng per call; sample b keeps iff the first uniform of
 * vt_rng_derive(base, vt_tape_sample_key(t, b), 0) is >= p (b in one process; independent
 * of the thread count and of the number of data-parallel ranks). The per-sample
 * factors (0 or 1/(1 - p)) are kept for backward: dx[b] += dy[b] * factor[b]. */
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    const float *factor, *dy;
    float *dx;
    int64_t B, per;
} drop_path_ctx;

static void drop_path_bwd(void *p) {
    drop_path_ctx *c = p;
    #pragma omp parallel for schedule(static) if (c->B * c->per > VT_PAR_MIN)
    for (int64_t b = 0; b < c->B; b++) {
        float f = c->factor[b];
        if (f == 0.0f) continue;
        for (int64_t i = b * c->per; i < (b + 1) * c->per; i++) c->dx[i] += c->dy[i] * f;
    }
}

float *vt_par_drop_path_factors(vt_tape *t, int64_t B, float p) {
    VT_ASSERT(t->rng != NULL, "drop_path: training forward needs t->rng");
    float *factor = vt_arena_alloc(t->arena, (size_t)B * sizeof(float));
    uint64_t base = vt_rng_u64(t->rng);
    float inv_keep = 1.0f / (1.0f - p);
    for (int64_t b = 0; b < B; b++) {
        vt_rng rng;
        vt_rng_seed(&rng, vt_rng_derive(base, vt_tape_sample_key(t, b), 0));
        factor[b] = vt_rng_uniform(&rng) >= p ? inv_keep : 0.0f;
    }
    return factor;
}

vt_tensor *vt_op_drop_path(vt_tape *t, vt_tensor *x, float p) {
    VT_ASSERT(p >= 0.0f && p < 1.0f, "drop_path: p=%g not in [0, 1)", p);
    if (!t->training || p == 0.0f) return x;
    int g = vt_tape_wants_grad(t, x, NULL, NULL);
    vt_tensor *y = vt_tape_new(t, g, x->ndim, x->shape);
    int64_t B = x->shape[0], per = x->size / B;
    float *factor = vt_par_drop_path_factors(t, B, p);
    const float *xd = x->data;
    float *yd = y->data;
    #pragma omp parallel for schedule(static) if (x->size > VT_PAR_MIN)
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = b * per; i < (b + 1) * per; i++) yd[i] = xd[i] * factor[b];
    if (g) {
        drop_path_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (drop_path_ctx){factor, y->grad, x->grad, B, per};
        vt_tape_record(t, "drop_path", drop_path_bwd, c);
    }
    return y;
}
