/* gelu.c - vt_op_gelu: exact-erf GELU, elementwise (torch GELU(approximate='none')).
 * Forward vt_k.gelu_fwd, backward vt_k.gelu_bwd (dx += dy (Phi(x) + x phi(x))), both
 * over fixed contiguous chunks in parallel. The SIMD erf error bound is stated in
 * tests/test_kernels.c. */
#include "kernels.h"
#include "ops.h"
#include "status.h"

#define GELU_CHUNK 4096

typedef struct {
    const float *x, *dy;
    float *dx;
    int64_t n;
} gelu_ctx;

static void gelu_bwd(void *p) {
    gelu_ctx *c = p;
    int64_t nb = (c->n + GELU_CHUNK - 1) / GELU_CHUNK;
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (int64_t k = 0; k < nb; k++) {
        int64_t s = k * GELU_CHUNK, e = s + GELU_CHUNK < c->n ? s + GELU_CHUNK : c->n;
        vt_k.gelu_bwd(c->x + s, c->dy + s, c->dx + s, (size_t)(e - s));
    }
}

vt_tensor *vt_op_gelu(vt_tape *t, vt_tensor *x) {
    int g = vt_tape_wants_grad(t, x, NULL, NULL);
    vt_tensor *y = vt_tape_new(t, g, x->ndim, x->shape);
    int64_t n = x->size, nb = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    const float *xd = x->data;
    float *yd = y->data;
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (int64_t k = 0; k < nb; k++) {
        int64_t s = k * GELU_CHUNK, e = s + GELU_CHUNK < n ? s + GELU_CHUNK : n;
        vt_k.gelu_fwd(xd + s, yd + s, (size_t)(e - s));
    }
    if (g) {
        gelu_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (gelu_ctx){x->data, y->grad, x->grad, n};
        vt_tape_record(t, "gelu", gelu_bwd, c);
    }
    return y;
}
