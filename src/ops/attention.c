/* attention.c - vt_op_attention: fused softmax attention per (batch, head).
 * q, k, v (B, H, N, hd) -> out (B, H, N, hd):
 *   S = scale q k^T (N x N),  P = softmax(S) rows,  Pd = P * mask / (1 - p),  out = Pd v.
 * Dropout (p = attn_drop, only when t->training and p > 0): one base seed is drawn from
 * t->rng per call, row i of (b, h) draws its keep decisions from the stream
 * vt_rng_derive(base, (b H + h) N + i, 0), so the mask does not depend on the thread
 * count. An element is dropped when its uniform draw is < p.
 * With gradients the op keeps P (B H N N floats) and the mask (B H N N bytes) in the
 * arena; without, it uses one N x N scratch per thread and keeps nothing.
 * Backward per (b, h), with dPd = dout v^T and dP = dPd * mask / (1 - p):
 *   dv += Pd^T dout,  dS = P (dP - rowsum(dP P)),  dq += scale dS k,  dk += scale dS^T q.
 * OpenMP over (b, h); each task calls vt_k.gemm with its thread's workspace. */
#include <omp.h>
#include <stdint.h>

#include "kernels.h"
#include "ops.h"
#include "status.h"

typedef struct {
    vt_arena *arena;
    const float *q, *k, *v, *P, *dout;
    const uint8_t *mask; /* NULL: no dropout */
    float *dq, *dk, *dv;
    float scale, inv_keep;
    int BH, N, hd;
} attn_ctx;

static size_t attn_work_floats(int N, int hd) {
    size_t a = vt_k.gemm_work_floats(N, N, hd), b = vt_k.gemm_work_floats(N, hd, N);
    return a > b ? a : b;
}

/* Pd = P * mask * inv_keep for an N x N block. */
static void apply_mask(const float *P, const uint8_t *mask, float inv_keep, float *Pd, size_t nn) {
    for (size_t i = 0; i < nn; i++) Pd[i] = mask[i] ? P[i] * inv_keep : 0.0f;
}

static void attention_bwd(void *p) {
    attn_ctx *c = p;
    int N = c->N, hd = c->hd;
    size_t nn = (size_t)N * N, nh = (size_t)N * hd;
    int nt = omp_get_max_threads();
    float *scratch = vt_arena_alloc(c->arena, (size_t)nt * 2 * nn * sizeof(float));
    size_t wf = attn_work_floats(N, hd);
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < c->BH; bh++) {
        float *dP = scratch + (size_t)omp_get_thread_num() * 2 * nn, *Pd = dP + nn;
        float *work = vt_gemm_workspace(wf);
        const float *P = c->P + bh * nn, *dout = c->dout + bh * nh;
        const float *q = c->q + bh * nh, *k = c->k + bh * nh, *v = c->v + bh * nh;
        const uint8_t *mask = c->mask ? c->mask + bh * nn : NULL;
        if (mask) apply_mask(P, mask, c->inv_keep, Pd, nn);
        const float *Pu = mask ? Pd : P;
        if (c->dv) vt_k.gemm(1, 0, N, hd, N, 1.0f, Pu, N, dout, hd, 1.0f, c->dv + bh * nh, hd, work);
        if (!c->dq && !c->dk) continue;
        vt_k.gemm(0, 1, N, N, hd, 1.0f, dout, hd, v, hd, 0.0f, dP, N, work);
        if (mask)
            for (size_t i = 0; i < nn; i++) dP[i] = mask[i] ? dP[i] * c->inv_keep : 0.0f;
        vt_k.softmax_bwd_rows(P, dP, dP, N, N);
        if (c->dq) vt_k.gemm(0, 0, N, hd, N, c->scale, dP, N, k, hd, 1.0f, c->dq + bh * nh, hd, work);
        if (c->dk) vt_k.gemm(1, 0, N, hd, N, c->scale, dP, N, q, hd, 1.0f, c->dk + bh * nh, hd, work);
    }
}

vt_tensor *vt_op_attention(vt_tape *t, vt_tensor *q, vt_tensor *k, vt_tensor *v,
                           float scale, float attn_drop) {
    VT_ASSERT(q->ndim == 4 && vt_same_shape(q, k) && vt_same_shape(q, v),
              "attention: q, k, v must all be (B, H, N, hd)");
    VT_ASSERT(attn_drop >= 0.0f && attn_drop < 1.0f, "attention: dropout %g not in [0, 1)", attn_drop);
    int BH = (int)(q->shape[0] * q->shape[1]), N = (int)q->shape[2], hd = (int)q->shape[3];
    size_t nn = (size_t)N * N, nh = (size_t)N * hd;
    int g = vt_tape_wants_grad(t, q, k, v);
    vt_tensor *out = vt_tape_new(t, g, 4, q->shape);
    int drop = t->training && attn_drop > 0.0f;
    uint64_t base = 0;
    if (drop) {
        VT_ASSERT(t->rng != NULL, "attention: dropout in training needs t->rng");
        base = vt_rng_u64(t->rng);
    }
    float inv_keep = drop ? 1.0f / (1.0f - attn_drop) : 1.0f;
    int nt = omp_get_max_threads();
    /* Per-thread N x N scratch: the dropped probabilities when P is kept, else P itself. */
    float *scratch = (g && !drop) ? NULL : vt_arena_alloc(t->arena, (size_t)nt * nn * sizeof(float));
    float *Pall = g ? vt_arena_alloc(t->arena, (size_t)BH * nn * sizeof(float)) : NULL;
    uint8_t *mall = (g && drop) ? vt_arena_alloc(t->arena, (size_t)BH * nn) : NULL;
    size_t wf = attn_work_floats(N, hd);
    const float *qd = q->data, *kd = k->data, *vd = v->data;
    float *od = out->data;
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < BH; bh++) {
        float *work = vt_gemm_workspace(wf);
        float *tmp = scratch ? scratch + (size_t)omp_get_thread_num() * nn : NULL;
        float *P = g ? Pall + bh * nn : tmp;
        vt_k.gemm(0, 1, N, N, hd, scale, qd + bh * nh, hd, kd + bh * nh, hd, 0.0f, P, N, work);
        vt_k.softmax_rows(P, P, N, N, 1.0f);
        float *Pd = P;
        if (drop) {
            Pd = tmp;
            for (int i = 0; i < N; i++) {
                vt_rng r;
                vt_rng_seed(&r, vt_rng_derive(base, (uint64_t)bh * N + i, 0));
                for (int j = 0; j < N; j++) {
                    size_t e = (size_t)i * N + j;
                    int keep = vt_rng_uniform(&r) >= attn_drop;
                    if (mall) mall[bh * nn + e] = (uint8_t)keep;
                    Pd[e] = keep ? P[e] * inv_keep : 0.0f;
                }
            }
        }
        vt_k.gemm(0, 0, N, hd, N, 1.0f, Pd, N, vd + bh * nh, hd, 0.0f, od + bh * nh, hd, work);
    }
    if (g) {
        attn_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (attn_ctx){t->arena, q->data, k->data, v->data, Pall, out->grad, mall,
                        q->grad, k->grad, v->grad, scale, inv_keep, BH, N, hd};
        vt_tape_record(t, "attention", attention_bwd, c);
    }
    return out;
}
