/* dropout.c - vt_op_dropout: inverted dropout. When t->training and p > 0, each element
 * is zeroed with probability p and survivors are scaled by 1/(1 - p); otherwise the op
 * is the identity and returns x itself (no copy, nothing recorded).
 * Mask: one base seed from t->rng per call; row r (x viewed as rows of its last dim;
 * the leading dim is the batch, sample b holding rows [b n, (b + 1) n)) draws from
 * vt_rng_derive(base, vt_tape_sample_key(t, b) n + r - b n, 0) (= r in one process), an
 * element dropped when its uniform draw is < p: the mask depends neither on the thread
 * count nor on the number of data-parallel ranks. With gradients the mask (one byte
 * per element) is kept in the arena; backward: dx += dy * mask / (1 - p). */
#include <stdint.h>

#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    const uint8_t *mask;
    const float *dy;
    float *dx;
    int64_t n;
    float inv_keep;
} dropout_ctx;

static void dropout_bwd(void *p) {
    dropout_ctx *c = p;
    #pragma omp parallel for schedule(static) if (c->n > VT_PAR_MIN)
    for (int64_t i = 0; i < c->n; i++)
        if (c->mask[i]) c->dx[i] += c->dy[i] * c->inv_keep;
}

vt_tensor *vt_op_dropout(vt_tape *t, vt_tensor *x, float p) {
    VT_ASSERT(p >= 0.0f && p < 1.0f, "dropout: p=%g not in [0, 1)", p);
    if (!t->training || p == 0.0f) return x;
    VT_ASSERT(t->rng != NULL, "dropout: training forward needs t->rng");
    int g = vt_tape_wants_grad(t, x, NULL, NULL);
    vt_tensor *y = vt_tape_new(t, g, x->ndim, x->shape);
    uint8_t *mask = g ? vt_arena_alloc(t->arena, (size_t)x->size) : NULL;
    uint64_t base = vt_rng_u64(t->rng);
    float inv_keep = 1.0f / (1.0f - p);
    int64_t D = x->shape[x->ndim - 1], rows = x->size / D;
    int64_t per = x->ndim > 1 && x->shape[0] > 0 ? rows / x->shape[0] : rows; /* rows per sample */
    if (per < 1) per = 1;
    const float *xd = x->data;
    float *yd = y->data;
    #pragma omp parallel for schedule(static) if (x->size > VT_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        vt_rng rng;
        uint64_t key = vt_tape_sample_key(t, r / per) * (uint64_t)per + (uint64_t)(r % per);
        vt_rng_seed(&rng, vt_rng_derive(base, key, 0));
        for (int64_t j = 0; j < D; j++) {
            int64_t e = r * D + j;
            int keep = vt_rng_uniform(&rng) >= p;
            if (mask) mask[e] = (uint8_t)keep;
            yd[e] = keep ? xd[e] * inv_keep : 0.0f;
        }
    }
    if (g) {
        dropout_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (dropout_ctx){mask, y->grad, x->grad, x->size, inv_keep};
        vt_tape_record(t, "dropout", dropout_bwd, c);
    }
    return y;
}
