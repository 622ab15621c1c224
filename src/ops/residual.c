/* residual.c - the fused residual adds' arithmetic (vt_op_linear_add, vt_op_gelu_linear_add;
 * contract in par.h): the branch's drop path and the in-place add over the product the op
 * wrote, and their backward, with the bits of vt_op_drop_path and vt_op_add. */
#include "ops.h"
#include "par.h"
#include "status.h"

void vt_par_residual_check(const char *op, const vt_tensor *r, int ndim, const int64_t *shape) {
    int ok = r->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = r->shape[i] == shape[i];
    char sr[64];
    VT_ASSERT(ok, "%s: the residual %s is not shaped like the output", op, vt_shape_str(r, sr, sizeof sr));
}

float *vt_par_residual_fwd(vt_tape *t, vt_tensor *y, const vt_tensor *r, float p) {
    VT_ASSERT(p >= 0.0f && p < 1.0f, "drop_path: p=%g not in [0, 1)", p);
    if (!t->training || p == 0.0f) {
        vt_par_rows_add(y->data, r->data, y->data, 0, 1, y->size);
        return NULL;
    }
    int64_t B = y->shape[0], per = y->size / B;
    float *factor = vt_par_drop_path_factors(t, B, p);
    float *yd = y->data;
    const float *rd = r->data;
    #pragma omp parallel for schedule(static) if (y->size > VT_PAR_MIN)
    for (int64_t b = 0; b < B; b++) {
        const float f = factor[b];
        #pragma omp simd /* GCC -O2 leaves the loop scalar otherwise; the same operations per element */
        for (int64_t i = b * per; i < (b + 1) * per; i++) yd[i] = rd[i] + yd[i] * f;
    }
    return factor;
}

void vt_par_residual_bwd(float *dy, const vt_tensor *r, const float *factor) {
    if (r->grad) vt_par_rows_add(dy, NULL, r->grad, vt_tape_grad_fresh(r), 1, r->size);
    if (!factor) return;
    int64_t B = r->shape[0], per = r->size / B; /* r is shaped like the branch's output */
    #pragma omp parallel for schedule(static) if (r->size > VT_PAR_MIN)
    for (int64_t b = 0; b < B; b++) /* 0 + ...: a -0 product becomes +0, as in the zeroed gradient */
        for (int64_t i = b * per; i < (b + 1) * per; i++) dy[i] = factor[b] == 0.0f ? 0.0f : 0.0f + dy[i] * factor[b];
}
