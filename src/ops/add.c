/* add.c - vt_op_add: y = a + b with b broadcast over a's leading dims.
 * b's shape, after dropping its leading 1s, must equal a's trailing dims (b (1, N, D)
 * or (D) against a (B, N, D); equal shapes are the no-broadcast case). a is viewed as
 * (outer, inner) with inner = b->size.
 * Backward: da += dy;  db += sum over outer of dy (vt_par_colsum_acc, deterministic;
 * equal shapes: db += dy, elementwise like da, with no partial sums in the arena). A
 * fresh da (or equal-shape db) is written, da = dy, instead (tape.h). */
#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    vt_arena *arena;
    const float *dy;
    float *da, *db;
    const vt_tensor *a, *b; /* for vt_tape_grad_fresh */
    int64_t outer, inner;
} add_ctx;

static void add_bwd(void *p) {
    add_ctx *c = p;
    if (c->da) vt_par_rows_add(c->dy, NULL, c->da, vt_tape_grad_fresh(c->a), c->outer, c->inner);
    if (c->db && c->outer == 1) /* equal shapes */
        vt_par_rows_add(c->dy, NULL, c->db, vt_tape_grad_fresh(c->b), 1, c->inner);
    else if (c->db) vt_par_colsum_acc(c->arena, c->dy, NULL, c->outer, c->inner, c->db);
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
    vt_par_rows_add(a->data, b->data, y->data, 0, outer, inner);
    if (g) {
        if (a->grad) vt_tape_can_overwrite(a);
        if (b->grad && outer == 1) vt_tape_can_overwrite(b);
        add_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (add_ctx){t->arena, y->grad, a->grad, b->grad, a, b, outer, inner};
        vt_tape_record(t, "add", add_bwd, c);
    }
    return y;
}
