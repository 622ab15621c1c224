/* gelu.c - vt_op_gelu: exact-erf GELU, elementwise (torch GELU(approximate='none')),
 * and vt_par_gelu_fwd / _bwd, its chunked parallel loops (shared with vt_op_gelu_linear).
 * Forward vt_k.gelu_fwd, backward vt_k.gelu_bwd (dx += dy (Phi(x) + x phi(x))), both
 * over fixed contiguous chunks in parallel; vt_par_gelu_bwd_fwd runs vt_k.gelu_bwd_fwd
 * (both in one pass) the same way. The SIMD erf error bound is stated in
 * tests/test_kernels.c. */
#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"

/* Elements per parallel work item (16 KiB): inputs up to one chunk stay on one thread. */
#define GELU_CHUNK 4096

typedef struct {
    const float *x, *dy;
    float *dx;
    int64_t n;
} gelu_ctx;

/* The three kernel passes over fixed contiguous chunks, in parallel. */
typedef enum { GELU_FWD, GELU_BWD, GELU_BWD_FWD } gelu_pass;

static void gelu_chunks(gelu_pass pass, const float *x, const float *dy, float *g, float *out, int64_t n,
                        int add) {
    int64_t nb = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    #pragma omp parallel for schedule(static) if (nb > 1)
    for (int64_t k = 0; k < nb; k++) {
        int64_t s = k * GELU_CHUNK, e = s + GELU_CHUNK < n ? s + GELU_CHUNK : n;
        size_t len = (size_t)(e - s);
        switch (pass) {
        case GELU_FWD: vt_k.gelu_fwd(x + s, out + s, len); break;
        case GELU_BWD: vt_k.gelu_bwd(x + s, dy + s, out + s, len); break;
        case GELU_BWD_FWD: vt_k.gelu_bwd_fwd(x + s, g + s, out + s, len, add); break;
        }
    }
}

void vt_par_gelu_fwd(const float *x, float *y, int64_t n) { gelu_chunks(GELU_FWD, x, NULL, NULL, y, n, 1); }

void vt_par_gelu_bwd(const float *x, const float *dy, float *dx, int64_t n) {
    gelu_chunks(GELU_BWD, x, dy, NULL, dx, n, 1);
}

void vt_par_gelu_bwd_fwd(const float *x, float *g, float *dx, int64_t n, int add) {
    gelu_chunks(GELU_BWD_FWD, x, NULL, g, dx, n, add);
}

static void gelu_bwd(void *p) {
    gelu_ctx *c = p;
    vt_par_gelu_bwd(c->x, c->dy, c->dx, c->n);
}

vt_tensor *vt_op_gelu(vt_tape *t, vt_tensor *x) {
    int g = vt_tape_wants_grad(t, x, NULL, NULL);
    vt_tensor *y = vt_tape_new(t, g, x->ndim, x->shape);
    vt_par_gelu_fwd(x->data, y->data, x->size);
    if (g) {
        gelu_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (gelu_ctx){x->data, y->grad, x->grad, x->size};
        vt_tape_record(t, "gelu", gelu_bwd, c);
    }
    return y;
}
