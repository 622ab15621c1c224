/* add.c - vt_op_add: y = a + b with b broadcast over a's leading dims.
 * b's shape, after dropping its leading 1s, must equal a's trailing dims (b (1, N, D)
 * or (D) against a (B, N, D); equal shapes are the no-broadcast case). a is viewed as
 * (outer, inner) with inner = b->size.
 * Backward: da += dy;  db += sum over outer of dy (vt_ops_colsum_acc, deterministic). */
#include "kernels.h"
#include "ops.h"
#include "status.h"

typedef struct {
    vt_arena *arena;
    const float *dy;
    float *da, *db;
    int64_t outer, inner;
} add_ctx;

static void add_bwd(void *p) {
    add_ctx *c = p;
    if (c->da) {
        int64_t n = c->outer * c->inner;
        #pragma omp parallel for schedule(static) if (c->outer > 1 && n > 16384)
        for (int64_t o = 0; o < c->outer; o++)
            vt_k.axpy(1.0f, c->dy + o * c->inner, c->da + o * c->inner, (size_t)c->inner);
    }
    if (c->db) vt_ops_colsum_acc(c->arena, c->dy, NULL, c->outer, c->inner, c->db);
}

vt_tensor *vt_op_add(vt_tape *t, vt_tensor *a, vt_tensor *b) {
    int lead = 0;
    while (lead < b->ndim - 1 && b->shape[lead] == 1) lead++;
    int bn = b->ndim - lead;
    int ok = bn <= a->ndim;
    for (int i = 0; ok && i < bn; i++) ok = b->shape[lead + i] == a->shape[a->ndim - bn + i];
    char sa[64], sb[64];
    VT_ASSERT(ok, "add: b %s does not broadcast onto a %s", vt_shape_str(b, sb, sizeof sb),
              vt_shape_str(a, sa, sizeof sa));
    int64_t inner = b->size, outer = a->size / inner;
    int g = vt_tape_wants_grad(t, a, b, NULL);
    vt_tensor *y = vt_tape_new(t, g, a->ndim, a->shape);
    const float *ad = a->data, *bd = b->data;
    float *yd = y->data;
    #pragma omp parallel for schedule(static) if (outer > 1 && a->size > 16384)
    for (int64_t o = 0; o < outer; o++) vt_k.add(ad + o * inner, bd, yd + o * inner, (size_t)inner);
    if (g) {
        add_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (add_ctx){t->arena, y->grad, a->grad, b->grad, outer, inner};
        vt_tape_record(t, "add", add_bwd, c);
    }
    return y;
}
