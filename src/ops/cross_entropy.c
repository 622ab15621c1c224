/* cross_entropy.c - vt_op_cross_entropy: mean cross-entropy over the batch.
 * logits (B, K); targets either hard labels (B ints in [0, K)) with label smoothing
 * eps, target = (1 - eps) onehot + eps/K, or soft rows (B, K) used as given.
 * loss = (1/B) sum_b sum_k -target[b, k] log_softmax(logits[b])[k], a (1) tensor.
 * log_softmax is computed stably per row as x - max - log(sum exp(x - max)), the
 * sums in double. The targets are copied into the arena (the caller's buffers may
 * change before backward) together with the softmax probabilities.
 * Backward: dlogits += (softmax - target) / B * dloss. */
#include <math.h>
#include <string.h>

#include "ops.h"
#include "status.h"

typedef struct {
    const float *prob, *target, *dloss;
    float *dlogits;
    int B, K;
} ce_ctx;

static void cross_entropy_bwd(void *p) {
    ce_ctx *c = p;
    float s = c->dloss[0] / (float)c->B;
    size_t n = (size_t)c->B * c->K;
    for (size_t i = 0; i < n; i++) c->dlogits[i] += (c->prob[i] - c->target[i]) * s;
}

vt_tensor *vt_op_cross_entropy(vt_tape *t, vt_tensor *logits, const int *labels,
                               const float *soft, float smoothing) {
    VT_ASSERT(logits->ndim == 2, "cross_entropy: logits must be (B, K), got %d-D", logits->ndim);
    VT_ASSERT((labels == NULL) != (soft == NULL), "cross_entropy: give exactly one of labels, soft");
    VT_ASSERT(smoothing >= 0.0f && smoothing < 1.0f, "cross_entropy: smoothing %g not in [0, 1)", smoothing);
    int B = (int)logits->shape[0], K = (int)logits->shape[1];
    size_t n = (size_t)B * K;
    int g = vt_tape_wants_grad(t, logits, NULL, NULL);
    int64_t one = 1;
    vt_tensor *loss = vt_tape_new(t, g, 1, &one);
    float *target = vt_arena_alloc(t->arena, n * sizeof(float));
    if (soft) {
        memcpy(target, soft, n * sizeof(float));
    } else {
        float off = smoothing / (float)K, on = 1.0f - smoothing + off;
        for (int b = 0; b < B; b++) {
            VT_ASSERT(labels[b] >= 0 && labels[b] < K, "cross_entropy: label %d of sample %d not in [0, %d)",
                      labels[b], b, K);
            for (int k = 0; k < K; k++) target[(size_t)b * K + k] = k == labels[b] ? on : off;
        }
    }
    float *prob = g ? vt_arena_alloc(t->arena, n * sizeof(float)) : NULL;
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        const float *x = logits->data + (size_t)b * K, *tg = target + (size_t)b * K;
        float mx = -INFINITY;
        for (int k = 0; k < K; k++) mx = fmaxf(mx, x[k]);
        double se = 0.0;
        for (int k = 0; k < K; k++) se += exp((double)x[k] - mx);
        double lse = mx + log(se), row = 0.0;
        for (int k = 0; k < K; k++) {
            double lp = (double)x[k] - lse;
            if (tg[k] != 0.0f) row -= tg[k] * lp;
            if (prob) prob[(size_t)b * K + k] = (float)exp(lp);
        }
        total += row;
    }
    loss->data[0] = (float)(total / B);
    if (g) {
        ce_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (ce_ctx){prob, target, loss->grad, logits->grad, B, K};
        vt_tape_record(t, "cross_entropy", cross_entropy_bwd, c);
    }
    return loss;
}
