/* cat_cls.c - vt_op_cat_cls: prepend the class token. cls (1, 1, D), x (B, Np, D) ->
 * y (B, 1 + Np, D) with y[b, 0] = cls, y[b, 1 + i] = x[b, i].
 * Backward: dx += dy[:, 1:];  dcls += sum over b of dy[b, 0] (summed serially in b
 * order: B D additions, deterministic). */
#include <string.h>

#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    const float *dy;
    float *dcls, *dx;
    int B, Np, D;
} cls_ctx;

static void cat_cls_bwd(void *p) {
    cls_ctx *c = p;
    int B = c->B, Np = c->Np, D = c->D;
    size_t row = (size_t)(Np + 1) * D, xs = (size_t)Np * D;
    if (c->dx) {
        #pragma omp parallel for schedule(static) if ((int64_t)B * Np * D > VT_PAR_MIN)
        for (int b = 0; b < B; b++) {
            const float *g = c->dy + b * row + D;
            float *d = c->dx + b * xs;
            for (size_t i = 0; i < xs; i++) d[i] += g[i];
        }
    }
    if (c->dcls)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < D; j++) c->dcls[j] += c->dy[b * row + j];
}

vt_tensor *vt_op_cat_cls(vt_tape *t, vt_tensor *cls, vt_tensor *x) {
    VT_ASSERT(x->ndim == 3, "cat_cls: x must be (B, Np, D), got %d-D", x->ndim);
    int B = (int)x->shape[0], Np = (int)x->shape[1], D = (int)x->shape[2];
    VT_ASSERT(cls->size == D, "cat_cls: cls has %lld elements, expected D=%d", (long long)cls->size, D);
    int g = vt_tape_wants_grad(t, cls, x, NULL);
    int64_t shape[3] = {B, Np + 1, D};
    vt_tensor *y = vt_tape_new(t, g, 3, shape);
    size_t row = (size_t)(Np + 1) * D, xs = (size_t)Np * D;
    for (int b = 0; b < B; b++) {
        memcpy(y->data + b * row, cls->data, (size_t)D * sizeof(float));
        memcpy(y->data + b * row + D, x->data + b * xs, xs * sizeof(float));
    }
    if (g) {
        cls_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (cls_ctx){y->grad, cls->grad, x->grad, B, Np, D};
        vt_tape_record(t, "cat_cls", cat_cls_bwd, c);
    }
    return y;
}
