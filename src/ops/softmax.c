/* softmax.c - vt_op_softmax over the last dim: x (..., C) -> y, max-subtracted
 * (vt_k.softmax_rows). The output is kept for backward:
 * dx += y (dy - sum(dy y)) per row (vt_k.softmax_bwd_rows into an arena temporary,
 * then added, since the kernel overwrites). */
#include "kernels.h"
#include "ops.h"
#include "status.h"

/* Rows per parallel work item: small inputs stay on one thread (nb == 1). */
#define SOFTMAX_ROWS_PER_TASK 64

typedef struct {
    vt_arena *arena;
    const float *y, *dy;
    float *dx;
    int64_t rows;
    int C;
} softmax_ctx;

static void softmax_bwd(void *p) {
    softmax_ctx *c = p;
    int C = c->C;
    float *tmp = vt_arena_alloc(c->arena, (size_t)c->rows * C * sizeof(float));
    int64_t nb = (c->rows + SOFTMAX_ROWS_PER_TASK - 1) / SOFTMAX_ROWS_PER_TASK;
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (int64_t k = 0; k < nb; k++) {
        int64_t r0 = k * SOFTMAX_ROWS_PER_TASK;
        int64_t r1 = r0 + SOFTMAX_ROWS_PER_TASK < c->rows ? r0 + SOFTMAX_ROWS_PER_TASK : c->rows;
        size_t off = (size_t)r0 * C, n = (size_t)(r1 - r0) * C;
        vt_k.softmax_bwd_rows(c->y + off, c->dy + off, tmp + off, (int)(r1 - r0), C, C);
        vt_k.axpy(1.0f, tmp + off, c->dx + off, n);
    }
}

vt_tensor *vt_op_softmax(vt_tape *t, vt_tensor *x) {
    int C = (int)x->shape[x->ndim - 1];
    int64_t rows = x->size / C;
    int g = vt_tape_wants_grad(t, x, NULL, NULL);
    vt_tensor *y = vt_tape_new(t, g, x->ndim, x->shape);
    int64_t nb = (rows + SOFTMAX_ROWS_PER_TASK - 1) / SOFTMAX_ROWS_PER_TASK;
    const float *xd = x->data;
    float *yd = y->data;
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (int64_t k = 0; k < nb; k++) {
        int64_t r0 = k * SOFTMAX_ROWS_PER_TASK;
        int64_t r1 = r0 + SOFTMAX_ROWS_PER_TASK < rows ? r0 + SOFTMAX_ROWS_PER_TASK : rows;
        vt_k.softmax_rows(xd + r0 * C, yd + r0 * C, (int)(r1 - r0), C, C, 1.0f);
    }
    if (g) {
        softmax_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (softmax_ctx){t->arena, y->data, y->grad, x->grad, rows, C};
        vt_tape_record(t, "softmax", softmax_bwd, c);
    }
    return y;
}
