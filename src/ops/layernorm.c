/* layernorm.c - vt_op_layernorm over the last dim: x (..., D), g (D), b (D) -> y.
 * y = (x - mean) rstd g + b with the biased variance, rstd = 1/sqrt(var + eps)
 * (vt_k.layernorm_fwd; mean/rstd per row are kept in the arena for backward).
 * Backward (vt_k.layernorm_bwd) runs over fixed row chunks in parallel: dx rows are
 * disjoint, dg/db go to per-chunk partials added in chunk order (deterministic for
 * any thread count). */
#include <string.h>

#include "kernels.h"
#include "ops.h"
#include "status.h"

typedef struct {
    vt_arena *arena;
    const float *x, *g, *mean, *rstd, *dy;
    float *dx, *dg, *db;
    int64_t rows;
    int D;
} ln_ctx;

static void layernorm_bwd(void *p) {
    ln_ctx *c = p;
    int D = c->D, nc = vt_ops_nchunks(c->rows);
    int want_dx = c->dx != NULL;
    float *dx = want_dx ? c->dx : vt_arena_calloc(c->arena, (size_t)c->rows * D * sizeof(float));
    float *pg = c->dg ? vt_arena_calloc(c->arena, (size_t)nc * D * sizeof(float)) : NULL;
    float *pb = c->db ? vt_arena_calloc(c->arena, (size_t)nc * D * sizeof(float)) : NULL;
    #pragma omp parallel for schedule(static) if (c->rows * D > 16384)
    for (int k = 0; k < nc; k++) {
        int64_t r0 = vt_ops_chunk_begin(c->rows, nc, k), r1 = vt_ops_chunk_begin(c->rows, nc, k + 1);
        vt_k.layernorm_bwd(c->dy + r0 * D, c->x + r0 * D, c->g, c->mean + r0, c->rstd + r0,
                           dx + r0 * D, pg ? pg + (size_t)k * D : NULL, pb ? pb + (size_t)k * D : NULL,
                           (int)(r1 - r0), D);
    }
    for (int j = 0; j < D; j++) {
        float sg = 0.0f, sb = 0.0f;
        for (int k = 0; k < nc; k++) {
            if (pg) sg += pg[(size_t)k * D + j];
            if (pb) sb += pb[(size_t)k * D + j];
        }
        if (c->dg) c->dg[j] += sg;
        if (c->db) c->db[j] += sb;
    }
}

vt_tensor *vt_op_layernorm(vt_tape *t, vt_tensor *x, vt_tensor *g, vt_tensor *b, float eps) {
    int D = (int)x->shape[x->ndim - 1];
    VT_ASSERT(g->size == D && b->size == D, "layernorm: g/b have %lld/%lld elements, x last dim is %d",
              (long long)g->size, (long long)b->size, D);
    int64_t rows = x->size / D;
    int gr = vt_tape_wants_grad(t, x, g, b);
    vt_tensor *y = vt_tape_new(t, gr, x->ndim, x->shape);
    float *mean = vt_arena_alloc(t->arena, (size_t)rows * sizeof(float));
    float *rstd = vt_arena_alloc(t->arena, (size_t)rows * sizeof(float));
    int nc = vt_ops_nchunks(rows);
    const float *xd = x->data, *gd = g->data, *bd = b->data;
    float *yd = y->data;
    #pragma omp parallel for schedule(static) if (x->size > 16384)
    for (int k = 0; k < nc; k++) {
        int64_t r0 = vt_ops_chunk_begin(rows, nc, k), r1 = vt_ops_chunk_begin(rows, nc, k + 1);
        vt_k.layernorm_fwd(xd + r0 * D, gd, bd, yd + r0 * D, mean + r0, rstd + r0, (int)(r1 - r0), D, eps);
    }
    if (gr) {
        ln_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (ln_ctx){t->arena, x->data, g->data, mean, rstd, y->grad, x->grad, g->grad, b->grad, rows, D};
        vt_tape_record(t, "layernorm", layernorm_bwd, c);
    }
    return y;
}
