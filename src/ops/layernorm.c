/* layernorm.c - vt_op_layernorm over the last dim: x (..., D), g (D), b (D) -> y, and its
 * arithmetic on raw rows (vt_par_layernorm_*, shared with vt_op_layernorm_linear).
 * y = (x - mean) rstd g + b with the biased variance, rstd = 1/sqrt(var + eps)
 * (vt_k.layernorm_fwd over fixed row chunks in parallel; mean/rstd per row are kept in
 * the arena for backward). Backward (vt_k.layernorm_bwd) runs over the same chunks:
 * dx rows are disjoint, dg/db go to per-chunk partials added in chunk order
 * (deterministic for any thread count). */
#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    vt_arena *arena;
    const float *x, *g, *mean, *rstd, *dy;
    float *dx, *dg, *db;
    int64_t rows;
    int D;
} ln_ctx;

void vt_par_layernorm_fwd(const float *x, const float *g, const float *b, float *y, float *mean, float *rstd,
                          int64_t rows, int D, float eps) {
    int nc = vt_par_nchunks(rows);
    #pragma omp parallel for schedule(static) if (rows * D > VT_PAR_MIN)
    for (int k = 0; k < nc; k++) {
        int64_t r0 = vt_par_chunk_begin(rows, nc, k), r1 = vt_par_chunk_begin(rows, nc, k + 1);
        vt_k.layernorm_fwd(x + r0 * D, g, b, y + r0 * D, mean + r0, rstd + r0, (int)(r1 - r0), D, eps);
    }
}

void vt_par_layernorm_bwd(vt_arena *arena, const float *x, const float *g, const float *mean,
                          const float *rstd, const float *dy, float *dx, float *dg, float *db,
                          int64_t rows, int D) {
    int nc = vt_par_nchunks(rows);
    float *dxs = dx ? dx : vt_arena_calloc(arena, (size_t)rows * D * sizeof(float));
    float *pg = dg ? vt_arena_calloc(arena, (size_t)nc * D * sizeof(float)) : NULL;
    float *pb = db ? vt_arena_calloc(arena, (size_t)nc * D * sizeof(float)) : NULL;
    #pragma omp parallel for schedule(static) if (rows * D > VT_PAR_MIN)
    for (int k = 0; k < nc; k++) {
        int64_t r0 = vt_par_chunk_begin(rows, nc, k), r1 = vt_par_chunk_begin(rows, nc, k + 1);
        vt_k.layernorm_bwd(dy + r0 * D, x + r0 * D, g, mean + r0, rstd + r0, dxs + r0 * D,
                           pg ? pg + (size_t)k * D : NULL, pb ? pb + (size_t)k * D : NULL, (int)(r1 - r0), D);
    }
    for (int j = 0; j < D; j++) {
        float sg = 0.0f, sb = 0.0f;
        for (int k = 0; k < nc; k++) {
            if (pg) sg += pg[(size_t)k * D + j];
            if (pb) sb += pb[(size_t)k * D + j];
        }
        if (dg) dg[j] += sg;
        if (db) db[j] += sb;
    }
}

static void layernorm_bwd(void *p) {
    ln_ctx *c = p;
    vt_par_layernorm_bwd(c->arena, c->x, c->g, c->mean, c->rstd, c->dy, c->dx, c->dg, c->db, c->rows, c->D);
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
    vt_par_layernorm_fwd(x->data, g->data, b->data, y->data, mean, rstd, rows, D, eps);
    if (gr) {
        ln_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (ln_ctx){t->arena, x->data, g->data, mean, rstd, y->grad, x->grad, g->grad, b->grad, rows, D};
        vt_tape_record(t, "layernorm", layernorm_bwd, c);
    }
    return y;
}
