/* patch_embed.c - vt_op_patch_embed: a P x P stride-P convolution as im2col + GEMM.
 * img (B, C, Hi, Wi), P | Hi and P | Wi; w (D, C, P, P); b (D) or NULL ->
 * y (B, Np, D), Np = (Hi/P)(Wi/P), patches row-major (x fastest).
 * im2col: cols (B Np, C P P), each row a patch flattened in w's (C, P, P) order, so
 * y = cols w^T + b (vt_gemm_prec, in the tape's precision, as the backward's products).
 * cols is kept in the arena for dW.
 * Backward: dW += dy^T cols;  db += column sums of dy;  dimg (if wanted):
 * dcols = dy W, scattered back (+=; patches do not overlap). */
#include <string.h>

#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    vt_arena *arena;
    const float *cols, *dy;
    vt_linear_weight w;
    float *dimg, *dw, *db;
    int B, C, Hi, Wi, P, D;
} pe_ctx;

static void patch_embed_bwd(void *p) {
    pe_ctx *c = p;
    int P = c->P, gw = c->Wi / P, np = (c->Hi / P) * gw, M = c->B * np, kc = c->C * P * P;
    vt_par_linear_bwd(c->arena, c->cols, c->w, c->dy, NULL, 0.0f, c->dw, c->db, M, kc, c->D); /* dW, db */
    if (c->dimg) {
        float *dcols = vt_arena_alloc(c->arena, (size_t)M * kc * sizeof(float));
        vt_gemm_prec(c->w.bf16, 0, 0, M, kc, c->D, 1.0f, c->dy, c->D, c->w.w, c->w.w16, kc, 0.0f, NULL, dcols, kc);
        #pragma omp parallel for schedule(static) if ((int64_t)M * kc > VT_PAR_MIN)
        for (int r = 0; r < M; r++) {
            int bi = r / np, pi = r % np, py = pi / gw, px = pi % gw;
            const float *src = dcols + (size_t)r * kc;
            for (int ch = 0; ch < c->C; ch++)
                for (int i = 0; i < P; i++) {
                    float *d = c->dimg + (((size_t)bi * c->C + ch) * c->Hi + (size_t)py * P + i) * c->Wi
                               + (size_t)px * P;
                    const float *s = src + ((size_t)ch * P + i) * P;
                    for (int j = 0; j < P; j++) d[j] += s[j];
                }
        }
    }
}

vt_tensor *vt_op_patch_embed(vt_tape *t, vt_tensor *img, vt_tensor *w, vt_tensor *b, int P) {
    VT_ASSERT(img->ndim == 4, "patch_embed: img must be (B, C, Hi, Wi), got %d-D", img->ndim);
    int B = (int)img->shape[0], C = (int)img->shape[1], Hi = (int)img->shape[2], Wi = (int)img->shape[3];
    VT_ASSERT(P > 0 && Hi % P == 0 && Wi % P == 0, "patch_embed: P=%d must divide %d x %d", P, Hi, Wi);
    VT_ASSERT(w->ndim == 4 && w->shape[1] == C && w->shape[2] == P && w->shape[3] == P,
              "patch_embed: w must be (D, %d, %d, %d)", C, P, P);
    int D = (int)w->shape[0];
    VT_ASSERT(!b || b->size == D, "patch_embed: bias must have %d elements", D);
    int gw = Wi / P, np = (Hi / P) * gw, M = B * np, kc = C * P * P;
    int g = vt_tape_wants_grad(t, img, w, b);
    int64_t shape[3] = {B, np, D};
    vt_tensor *y = vt_tape_new(t, g, 3, shape);
    float *cols = vt_arena_alloc(t->arena, (size_t)M * kc * sizeof(float));
    const float *src = img->data;
    #pragma omp parallel for schedule(static) if ((int64_t)M * kc > VT_PAR_MIN)
    for (int r = 0; r < M; r++) {
        int bi = r / np, pi = r % np, py = pi / gw, px = pi % gw;
        float *dst = cols + (size_t)r * kc;
        for (int ch = 0; ch < C; ch++)
            for (int i = 0; i < P; i++)
                memcpy(dst + ((size_t)ch * P + i) * P,
                       src + (((size_t)bi * C + ch) * Hi + (size_t)py * P + i) * Wi + (size_t)px * P,
                       (size_t)P * sizeof(float));
    }
    vt_linear_weight wt = vt_linear_weight_of(t, w);
    vt_gemm_prec(wt.bf16, 0, 1, M, D, kc, 1.0f, cols, kc, wt.w, wt.w16, kc, 0.0f, b ? b->data : NULL, y->data, D);
    if (g) {
        pe_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (pe_ctx){t->arena, cols, y->grad, wt, img->grad, w->grad, b ? b->grad : NULL, B, C, Hi, Wi, P, D};
        vt_tape_record(t, "patch_embed", patch_embed_bwd, c);
    }
    return y;
}
