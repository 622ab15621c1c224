/* tape.c - record/replay of backward closures and the tape scratch. */
#include "tape.h"

#include <stdlib.h>

#include "status.h"

void vt_tape_init(vt_tape *t, vt_arena *arena) {
    t->arena = arena;
    t->cap = 256;
    t->n = 0;
    t->entries = vt_xmalloc((size_t)t->cap * sizeof *t->entries);
    t->grad_enabled = 1;
    t->training = 1;
    t->rng = NULL;
    t->scratch = NULL;
    t->scratch_floats = 0;
}

void vt_tape_free(vt_tape *t) {
    free(t->entries);
    t->entries = NULL;
    t->n = t->cap = 0;
    free(t->scratch);
    t->scratch = NULL;
    t->scratch_floats = 0;
}

void vt_tape_clear(vt_tape *t) { t->n = 0; }

void vt_tape_record(vt_tape *t, const char *name, vt_backward_fn fn, void *ctx) {
    VT_ASSERT(t->grad_enabled, "op %s recorded on a tape with gradients disabled", name);
    if (t->n == t->cap) {
        t->cap *= 2;
        t->entries = vt_xrealloc(t->entries, (size_t)t->cap * sizeof *t->entries);
    }
    t->entries[t->n].fn = fn;
    t->entries[t->n].ctx = ctx;
    t->entries[t->n].name = name;
    t->n++;
}

float *vt_tape_scratch(vt_tape *t, size_t floats) {
    if (floats > t->scratch_floats) {
        free(t->scratch);
        t->scratch = vt_aligned_alloc(floats * sizeof(float));
        VT_ASSERT(t->scratch != NULL, "out of memory: tape scratch of %zu floats", floats);
        t->scratch_floats = floats;
    }
    return t->scratch;
}

void *vt_tape_ctx(vt_tape *t, size_t bytes) { return vt_arena_alloc(t->arena, bytes); }

int vt_tape_wants_grad(const vt_tape *t, const vt_tensor *a, const vt_tensor *b, const vt_tensor *c) {
    if (!t->grad_enabled) return 0;
    return (a && a->grad) || (b && b->grad) || (c && c->grad);
}

vt_tensor *vt_tape_new(vt_tape *t, int with_grad, int ndim, const int64_t *shape) {
    return vt_tensor_new(t->arena, with_grad, ndim, shape);
}

void vt_tape_replay(vt_tape *t) {
    for (int i = t->n - 1; i >= 0; i--) t->entries[i].fn(t->entries[i].ctx);
}

void vt_tape_backward(vt_tape *t, vt_tensor *loss) {
    VT_ASSERT(loss->size == 1 && loss->grad != NULL, "backward needs a scalar loss with a grad buffer");
    loss->grad[0] = 1.0f;
    vt_tape_replay(t);
}
