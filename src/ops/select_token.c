/* select_token.c - vt_op_select_token: x (B, N, D) -> y (B, D) = x[:, index].
 * Backward: dx[:, index] += dy. */
#include <string.h>

#include "ops.h"
#include "status.h"

typedef struct {
    const float *dy;
    float *dx;
    int B, N, D, index;
} select_ctx;

static void select_token_bwd(void *p) {
    select_ctx *c = p;
    for (int b = 0; b < c->B; b++) {
        float *d = c->dx + ((size_t)b * c->N + c->index) * c->D;
        const float *g = c->dy + (size_t)b * c->D;
        for (int j = 0; j < c->D; j++) d[j] += g[j];
    }
}

vt_tensor *vt_op_select_token(vt_tape *t, vt_tensor *x, int index) {
    VT_ASSERT(x->ndim == 3, "select_token: x must be (B, N, D), got %d-D", x->ndim);
    int B = (int)x->shape[0], N = (int)x->shape[1], D = (int)x->shape[2];
    VT_ASSERT(index >= 0 && index < N, "select_token: index %d not in [0, %d)", index, N);
    int g = vt_tape_wants_grad(t, x, NULL, NULL);
    int64_t shape[2] = {B, D};
    vt_tensor *y = vt_tape_new(t, g, 2, shape);
    for (int b = 0; b < B; b++)
        memcpy(y->data + (size_t)b * D, x->data + ((size_t)b * N + index) * D, (size_t)D * sizeof(float));
    if (g) {
        select_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (select_ctx){y->grad, x->grad, B, N, D, index};
        vt_tape_record(t, "select_token", select_token_bwd, c);
    }
    return y;
}
