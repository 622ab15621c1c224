/* tape.c - record/replay of backward closures, the tape scratch, grad scopes and the
 * checks of their protocol (tape.h). */
#include "tape.h"

#include <stdint.h>
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
    t->bf16 = 0;
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
    const char *check = getenv("VT_TAPE_CHECK");
    VT_ASSERT(!check || !*check || strcmp(check, "0") == 0 || strcmp(check, "1") == 0,
              "VT_TAPE_CHECK: expected 0 or 1, found '%s'", check);
    t->check = check && strcmp(check, "1") == 0;
    t->scope_seq = 0;
    t->counted = t->watch = NULL;
    t->n_counted = t->cap_counted = t->n_watch = t->cap_watch = t->n_checked = 0;
    t->counted_at = NULL;
    t->counted_line = 0;
    t->hook = NULL;
    t->hook_ctx = NULL;
    t->sample0 = 0;
    t->sample_stride = 1;
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
    free(t->counted);
    free(t->watch);
    t->counted = t->watch = NULL;
    t->n_counted = t->cap_counted = t->n_watch = t->cap_watch = 0;
}

/* Append x to a growable list of tensors. */
static void push(vt_tensor ***list, int *n, int *cap, vt_tensor *x) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *list = vt_xrealloc(*list, (size_t)*cap * sizeof **list);
    }
    (*list)[(*n)++] = x;
}

void vt_tape_clear(vt_tape *t) {
    t->n = 0;
    t->open_scope = t->last_scope = NULL;
    t->n_scoped = 0;
    t->fwd_scope = 0;
    t->scope_seq = 0;
    t->n_counted = t->n_watch = 0;
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
    for (int i = 0; i < t->n_counted; i++) t->counted[i]->grad_consumer = t->n;
    t->n_counted = 0;
    t->n++;
}

float *vt_tape_scratch(vt_tape *t, size_t floats) {
    if (floats > t->scratch_floats) {
        free(t->scratch);
        t->scratch = vt_aligned_alloc(floats * sizeof(float));
        if (!t->scratch) vt_out_of_memory("the tape's scratch buffer", floats * sizeof(float));
        t->scratch_floats = floats;
    }
    return t->scratch;
}

vt_status vt_tape_reserve(vt_tape *t, size_t region_bytes, size_t scratch_floats) {
    VT_ASSERT(!t->open_scope && !t->fwd_scope, "tape reserve inside a scope");
    vt_tape_scope_reserve(t, region_bytes);
    if (region_bytes > t->region_cap) {
        unsigned char *r = vt_aligned_alloc(region_bytes);
        if (!r) return vt_fail(VT_ERR_RUNTIME, "out of memory: a gradient region of %zu bytes", region_bytes);
        memset(r, 0, region_bytes);
        free(t->region);
        t->region = r;
        t->region_cap = region_bytes;
    }
    if (scratch_floats > t->scratch_floats) {
        float *s = vt_aligned_alloc(scratch_floats * sizeof(float));
        if (!s) return vt_fail(VT_ERR_RUNTIME, "out of memory: a tape scratch of %zu bytes",
                               scratch_floats * sizeof(float));
        free(t->scratch);
        t->scratch = s;
        t->scratch_floats = scratch_floats;
    }
    return VT_OK;
}

void *vt_tape_ctx(vt_tape *t, size_t bytes) { return vt_arena_alloc(t->arena, bytes); }

int vt_tape_wants_grad_at(vt_tape *t, vt_tensor *a, vt_tensor *b, vt_tensor *c, const char *file, int line) {
    if (!t->grad_enabled) return 0;
    vt_tensor *in[3] = {a, b, c};
    int g = 0;
    for (int i = 0; i < 3; i++) {
        vt_tensor *x = in[i];
        if (!x || !x->grad) continue;
        if (x->grad_scope && x->grad_scope != t->scope_seq) {
            char sb[64];
            vt_assert_fail(file, line,
                           "tape protocol: an op recorded after grad scope %d began consumes a tensor %s "
                           "made in grad scope %d, whose gradient later scopes reuse (rule 1, tape.h: "
                           "consume a scope's tensors before the next scope begins, or make them after "
                           "its vt_tape_scope_end)",
                           t->scope_seq, vt_shape_str(x, sb, sizeof sb), x->grad_scope);
        }
        x->grad_users++;
        if (!t->n_counted) {
            t->counted_at = file;
            t->counted_line = line;
        }
        push(&t->counted, &t->n_counted, &t->cap_counted, x);
        g = 1;
    }
    return g;
}

void vt_tape_can_overwrite(vt_tensor *x) { x->grad_overwrite = 1; }

int vt_tape_grad_fresh(const vt_tensor *x) { return x->grad_scoped && x->grad_users == 1 && x->grad_overwrite; }

typedef struct vt_scope_ctx {
    vt_tape *t;
    unsigned char *region;
    size_t bytes;                      /* filled in by vt_tape_scope_end */
    const struct vt_scope_ctx *prev;   /* the scope whose backward runs next */
    int first, count;                  /* its region tensors: t->scoped[first .. first + count) */
} scope_ctx;

/* Zero region bytes [s, e) in parallel chunks with cache-bypassing stores
 * (vt_k.zero_stream: tens of MB that nothing reads before the previous block's backward
 * writes them, so caching them would only evict what it reads). Offsets are multiples of
 * 64. */
static void zero_bytes(unsigned char *region, size_t s, size_t e) {
    const size_t chunk = (size_t)1 << 20, n = (e - s + chunk - 1) / chunk;
    #pragma omp parallel for schedule(static) if (n > 1)
    for (size_t i = 0; i < n; i++) {
        size_t a = s + i * chunk, b = a + chunk < e ? a + chunk : e;
        vt_k.zero_stream((float *)(region + a), (b - a) / sizeof(float));
    }
}

/* Checking mode. A fresh gradient is filled with POISON, a signalling NaN: copies keep
 * its bits, arithmetic on it gives other bits (the quiet NaN POISON_QUIET when it is
 * added to), so a gradient its consumer wrote whole holds neither. */
#define POISON 0x7fa0deadu
#define POISON_QUIET 0x7fe0deadu

static uint32_t bits_at(const float *g, int64_t i) {
    uint32_t u;
    memcpy(&u, g + i, sizeof u);
    return u;
}

/* Fill scope q's fresh gradients with POISON and watch them until their consumer runs. */
static void poison_fresh(vt_tape *t, const scope_ctx *q) {
    const uint32_t bits = POISON;
    float v;
    memcpy(&v, &bits, sizeof v);
    for (int i = 0; i < q->count; i++) {
        vt_tensor *x = t->scoped[q->first + i];
        if (!vt_tape_grad_fresh(x)) continue;
        for (int64_t e = 0; e < x->size; e++) x->grad[e] = v;
        push(&t->watch, &t->n_watch, &t->cap_watch, x);
    }
}

/* Before entry i runs: a watched gradient whose consumer it is still holds only POISON. */
static void check_before(const vt_tape *t, int i) {
    for (int w = 0; w < t->n_watch; w++) {
        const vt_tensor *x = t->watch[w];
        if (x->grad_consumer != i) continue;
        for (int64_t e = 0; e < x->size; e++) {
            char sb[64];
            VT_ASSERT(bits_at(x->grad, e) == POISON,
                      "tape protocol: the fresh gradient of a tensor %s (grad scope %d) changed before the "
                      "backward of '%s', its one counted consumer (element %lld): an op recorded after "
                      "'%s' writes it without counting it with vt_tape_wants_grad (rule 2, tape.h)",
                      vt_shape_str(x, sb, sizeof sb), x->grad_scope, t->entries[i].name, (long long)e,
                      t->entries[i].name);
        }
    }
}

/* After entry i ran: the gradients it consumes are written whole (and no longer watched);
 * the others' first and last elements still hold POISON (else entry i wrote them). */
static void check_after(vt_tape *t, int i) {
    char sb[64];
    int kept = 0;
    for (int w = 0; w < t->n_watch; w++) {
        vt_tensor *x = t->watch[w];
        if (x->grad_consumer != i) {
            VT_ASSERT(bits_at(x->grad, 0) == POISON && bits_at(x->grad, x->size - 1) == POISON,
                      "tape protocol: the backward of '%s' wrote the fresh gradient of a tensor %s (grad "
                      "scope %d) whose one counted consumer is '%s': an op counts with vt_tape_wants_grad "
                      "every input whose gradient it writes (rule 2, tape.h)",
                      t->entries[i].name, vt_shape_str(x, sb, sizeof sb), x->grad_scope,
                      t->entries[x->grad_consumer].name);
            t->watch[kept++] = x;
            continue;
        }
        for (int64_t e = 0; e < x->size; e++) {
            uint32_t u = bits_at(x->grad, e);
            VT_ASSERT(u != POISON && u != POISON_QUIET,
                      "tape protocol: '%s' said vt_tape_can_overwrite for a tensor %s (grad scope %d), but "
                      "its backward %s element %lld of the gradient (rule 2, tape.h: with "
                      "vt_tape_grad_fresh true, write all of it without reading it)",
                      t->entries[i].name, vt_shape_str(x, sb, sizeof sb), x->grad_scope,
                      u == POISON ? "did not write" : "read the stale value of", (long long)e);
        }
        t->n_checked++;
    }
    t->n_watch = kept;
}

/* The backward of a scope, after all of its ops': zero the region bytes its grads used,
 * but the fresh gradients of the scope whose backward comes next (its consumers write
 * them before anything reads them; in checking mode they are filled with POISON). A
 * next scope in another region (the region grew between them) finds its region all
 * zero: the previous step ended on a full cleanup (the step's first scope has no next
 * one). */
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
    if (c->t->check && c->prev) poison_fresh(c->t, c->prev);
}

void vt_tape_scope_begin(vt_tape *t) {
    if (!t->scopes_enabled) return;
    VT_ASSERT(!t->open_scope && !t->fwd_scope, "scopes do not nest");
    VT_ASSERT(t->n_counted == 0,
              "tape protocol: the op at %s:%d counted inputs with vt_tape_wants_grad but recorded no entry "
              "(rule 2, tape.h)", t->counted_at, t->counted_line);
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
        if (!t->region) vt_out_of_memory("the gradient region", t->region_cap);
        memset(t->region, 0, t->region_cap);
    }
    scope_ctx *c = vt_tape_ctx(t, sizeof *c);
    *c = (scope_ctx){t, t->region, 0, t->last_scope, t->n_scoped, 0};
    vt_tape_record(t, "grad_scope", scope_zero_bwd, c);
    t->scope_seq++;
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
    x->grad_scope = t->scope_seq;
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

typedef struct {
    const vt_tape *t;
    int64_t from;
} mark_ctx;

static void mark_bwd(void *p) {
    const mark_ctx *c = p;
    c->t->hook(c->t->hook_ctx, c->from);
}

void vt_tape_mark_grads_final(vt_tape *t, int64_t from) {
    if (!t->hook || !t->grad_enabled) return;
    mark_ctx *c = vt_tape_ctx(t, sizeof *c);
    *c = (mark_ctx){t, from};
    vt_tape_record(t, "grads_final", mark_bwd, c);
}

void vt_tape_replay(vt_tape *t) {
    VT_ASSERT(!t->open_scope, "backward with a grad scope still open");
    VT_ASSERT(t->n_counted == 0,
              "tape protocol: the op at %s:%d counted inputs with vt_tape_wants_grad but recorded no entry "
              "(rule 2, tape.h)", t->counted_at, t->counted_line);
    t->n_watch = t->n_checked = 0;
    if (t->check && t->last_scope) poison_fresh(t, t->last_scope);
    for (int i = t->n - 1; i >= 0; i--) {
        if (t->n_watch) check_before(t, i);
        t->entries[i].fn(t->entries[i].ctx);
        if (t->n_watch) check_after(t, i);
        if (t->hook) t->hook(t->hook_ctx, -1);
    }
    VT_ASSERT(t->n_watch == 0, "tape protocol: %d fresh gradients' consumers never ran", t->n_watch);
}

void vt_tape_backward(vt_tape *t, vt_tensor *loss) {
    VT_ASSERT(loss->size == 1 && loss->grad != NULL, "backward needs a scalar loss with a grad buffer");
    loss->grad[0] = 1.0f;
    vt_tape_replay(t);
}
