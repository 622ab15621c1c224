/* tape.c - record/replay of backward closures, the tape scratch and grad scopes. */
#include "tape.h"

#include <stdlib.h>
#include <string.h>

#include "kernels.h"
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
    t->scopes_enabled = 1;
    t->fwd_scope = 0;
    t->region = NULL;
    t->region_cap = t->region_used = t->region_need = t->scope_want = 0;
    t->open_scope = t->last_scope = NULL;
    t->scoped = NULL;
    t->n_scoped = t->cap_scoped = 0;
    t->retired = NULL;
    t->n_retired = 0;
}

/* Free the regions replaced during the last step (their scopes are gone). */
static void free_retired(vt_tape *t) {
    for (int i = 0; i < t->n_retired; i++) free(t->retired[i]);
    free(t->retired);
    t->retired = NULL;
    t->n_retired = 0;
}

void vt_tape_free(vt_tape *t) {
    free(t->entries);
    t->entries = NULL;
    t->n = t->cap = 0;
    free(t->scratch);
    t->scratch = NULL;
    t->scratch_floats = 0;
    free(t->region);
    t->region = NULL;
    t->region_cap = t->region_used = t->region_need = t->scope_want = 0;
    free(t->scoped);
    t->scoped = NULL;
    t->n_scoped = t->cap_scoped = 0;
    free_retired(t);
}

void vt_tape_clear(vt_tape *t) {
    t->n = 0;
    t->open_scope = t->last_scope = NULL;
    t->n_scoped = 0;
    t->fwd_scope = 0;
    free_retired(t);
}

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

int vt_tape_wants_grad(const vt_tape *t, vt_tensor *a, vt_tensor *b, vt_tensor *c) {
    if (!t->grad_enabled) return 0;
    vt_tensor *in[3] = {a, b, c};
    int g = 0;
    for (int i = 0; i < 3; i++)
        if (in[i] && in[i]->grad) {
            in[i]->grad_users++;
            g = 1;
        }
    return g;
}

void vt_tape_can_overwrite(vt_tensor *x) { x->grad_overwrite = 1; }

int vt_tape_grad_fresh(const vt_tensor *x) { return x->grad_scoped && x->grad_users == 1 && x->grad_overwrite; }

typedef struct vt_scope_ctx {
    const vt_tape *t;
    unsigned char *region;
    size_t bytes;                      /* filled in by vt_tape_scope_end */
    const struct vt_scope_ctx *prev;   /* the scope whose backward runs next */
    int first, count;                  /* its region tensors: t->scoped[first .. first + count) */
} scope_ctx;

/* Zero region bytes [s, e) in parallel chunks with cache-bypassing stores
 * (vt_k.zero_stream: tens of MB, next written by the previous block's backward; ViT-Ti/4
 * training +1-3% over memset). Offsets are multiples of 64. */
static void zero_bytes(unsigned char *region, size_t s, size_t e) {
    const size_t chunk = (size_t)1 << 20, n = (e - s + chunk - 1) / chunk;
    #pragma omp parallel for schedule(static) if (n > 1)
    for (size_t i = 0; i < n; i++) {
        size_t a = s + i * chunk, b = a + chunk < e ? a + chunk : e;
        vt_k.zero_stream((float *)(region + a), (b - a) / sizeof(float));
    }
}

/* The backward of a scope, after all of its ops': zero the region bytes its grads used,
 * but the fresh gradients of the scope whose backward comes next (its consumers write
 * them before anything reads them). A next scope in another region (the region grew
 * between them) finds its region all zero: the previous step ended on a full cleanup
 * (the step's first scope has no next one). */
static void scope_zero_bwd(void *p) {
    const scope_ctx *c = p;
    const scope_ctx *q = c->prev && c->prev->region == c->region ? c->prev : NULL;
    size_t at = 0;
    for (int i = 0; q && i < q->count && at < c->bytes; i++) {
        const vt_tensor *x = c->t->scoped[q->first + i];
        if (!vt_tape_grad_fresh(x)) continue;
        size_t s = (size_t)((unsigned char *)x->grad - c->region);
        size_t e = s + ((size_t)x->size * sizeof(float) + 63) / 64 * 64;
        if (s > at) zero_bytes(c->region, at, s < c->bytes ? s : c->bytes);
        if (e > at) at = e;
    }
    if (at < c->bytes) zero_bytes(c->region, at, c->bytes);
}

void vt_tape_scope_begin(vt_tape *t) {
    if (!t->scopes_enabled) return;
    VT_ASSERT(!t->open_scope && !t->fwd_scope, "scopes do not nest");
    if (!t->grad_enabled) {
        t->fwd_mark = vt_arena_get_mark(t->arena);
        t->fwd_scope = 1;
        return;
    }
    if (t->region_need > t->region_cap) { /* a scope overflowed or a reserve: a bigger region */
        t->retired = vt_xrealloc(t->retired, (size_t)(t->n_retired + 1) * sizeof *t->retired);
        t->retired[t->n_retired++] = t->region; /* earlier scopes of this step still use it */
        t->region_cap = t->region_need;
        t->region = vt_aligned_alloc(t->region_cap);
        VT_ASSERT(t->region != NULL, "out of memory: grad region of %zu bytes", t->region_cap);
        memset(t->region, 0, t->region_cap);
    }
    scope_ctx *c = vt_tape_ctx(t, sizeof *c);
    *c = (scope_ctx){t, t->region, 0, t->last_scope, t->n_scoped, 0};
    vt_tape_record(t, "grad_scope", scope_zero_bwd, c);
    t->open_scope = t->last_scope = c;
    t->region_used = t->scope_want = 0;
}

void vt_tape_scope_end(vt_tape *t) {
    if (!t->open_scope) return;
    t->open_scope->bytes = t->region_used;
    t->open_scope = NULL;
}

void vt_tape_scope_reserve(vt_tape *t, size_t bytes) {
    if (bytes > t->region_need) t->region_need = bytes;
}

vt_tensor *vt_tape_scope_result(vt_tape *t, vt_tensor *y) {
    if (!t->fwd_scope) return y;
    t->fwd_scope = 0;
    vt_tensor h = *y; /* y's header lives in the memory given back */
    float *data = vt_arena_rewind_keep(t->arena, t->fwd_mark, h.data, (size_t)h.size * sizeof(float));
    return vt_tensor_wrap(t->arena, data, h.ndim, h.shape);
}

vt_tensor *vt_tape_new(vt_tape *t, int with_grad, int ndim, const int64_t *shape) {
    if (!with_grad || !t->open_scope) return vt_tensor_new(t->arena, with_grad, ndim, shape);
    vt_tensor *x = vt_tensor_new(t->arena, 0, ndim, shape);
    size_t bytes = ((size_t)x->size * sizeof(float) + 63) / 64 * 64;
    t->scope_want += bytes;
    if (t->scope_want > t->region_need) t->region_need = t->scope_want;
    if (t->region_used + bytes <= t->region_cap) {
        x->grad = (float *)(t->region + t->region_used);
        t->region_used += bytes;
        x->grad_scoped = 1;
        if (t->n_scoped == t->cap_scoped) {
            t->cap_scoped = t->cap_scoped ? 2 * t->cap_scoped : 64;
            t->scoped = vt_xrealloc(t->scoped, (size_t)t->cap_scoped * sizeof *t->scoped);
        }
        t->scoped[t->n_scoped++] = x;
        t->open_scope->count++;
    } else { /* does not fit: arena memory; the region grows at the next scope_begin */
        x->grad = vt_arena_calloc(t->arena, (size_t)x->size * sizeof(float));
    }
    return x;
}

void vt_tape_replay(vt_tape *t) {
    VT_ASSERT(!t->open_scope, "backward with a grad scope still open");
    for (int i = t->n - 1; i >= 0; i--) t->entries[i].fn(t->entries[i].ctx);
}

void vt_tape_backward(vt_tape *t, vt_tensor *loss) {
    VT_ASSERT(loss->size == 1 && loss->grad != NULL, "backward needs a scalar loss with a grad buffer");
    loss->grad[0] = 1.0f;
    vt_tape_replay(t);
}
