/* tensor.c - the arena allocator and tensor header helpers. */
#include "tensor.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "status.h"

static vt_arena_block *block_new(size_t cap) {
    vt_arena_block *b = vt_xmalloc(sizeof *b);
    b->cap = (cap + 63) / 64 * 64;
    b->used = 0;
    b->base = vt_aligned_alloc(b->cap);
    if (!b->base) vt_out_of_memory("an arena block (the step's activations)", b->cap);
    b->next = NULL;
    return b;
}

void vt_arena_init(vt_arena *a, size_t initial_bytes) {
    a->head = block_new(initial_bytes < 4096 ? 4096 : initial_bytes);
    a->total_used = 0;
    a->high_water = 0;
}

void vt_arena_free(vt_arena *a) {
    vt_arena_block *b = a->head;
    while (b) {
        vt_arena_block *n = b->next;
        free(b->base);
        free(b);
        b = n;
    }
    a->head = NULL;
}

void vt_arena_reset(vt_arena *a) {
    if (a->total_used > a->high_water) a->high_water = a->total_used;
    if (a->head->next) { /* several blocks: replace by one big enough for the high water */
        size_t cap = a->high_water + a->high_water / 8;
        vt_arena_free(a);
        a->head = block_new(cap);
    }
    a->head->used = 0;
    a->total_used = 0;
}

vt_status vt_arena_reserve(vt_arena *a, size_t bytes) {
    VT_ASSERT(a->total_used == 0 && a->head->next == NULL, "arena reserve with %zu bytes in use",
              a->total_used);
    if (bytes <= a->head->cap) return VT_OK;
    size_t cap = (bytes + 63) / 64 * 64;
    unsigned char *base = vt_aligned_alloc(cap);
    if (!base) return vt_fail(VT_ERR_RUNTIME, "out of memory: an arena block of %zu bytes", cap);
    free(a->head->base);
    a->head->base = base;
    a->head->cap = cap;
    a->head->used = 0;
    return VT_OK;
}

void *vt_arena_alloc(vt_arena *a, size_t bytes) {
    size_t need = (bytes + 63) / 64 * 64;
    if (need == 0) need = 64;
    vt_arena_block *b = a->head;
    if (b->used + need > b->cap) {
        size_t cap = b->cap * 2 > need ? b->cap * 2 : need;
        vt_arena_block *nb = block_new(cap);
        nb->next = b;
        a->head = nb;
        b = nb;
    }
    void *p = b->base + b->used;
    b->used += need;
    a->total_used += need;
    return p;
}

void *vt_arena_calloc(vt_arena *a, size_t bytes) {
    void *p = vt_arena_alloc(a, bytes);
    memset(p, 0, bytes);
    return p;
}

vt_arena_mark vt_arena_get_mark(const vt_arena *a) {
    return (vt_arena_mark){a->head, a->head->used, a->total_used};
}

void *vt_arena_rewind_keep(vt_arena *a, vt_arena_mark m, const void *keep, size_t bytes) {
    if (a->total_used > a->high_water) a->high_water = a->total_used;
    size_t need = (bytes + 63) / 64 * 64;
    if (a->head == m.block) { /* in place: keep lies above the mark, move it down */
        a->head->used = m.used;
        a->total_used = m.total_used;
        void *p = vt_arena_alloc(a, bytes);
        memmove(p, keep, bytes);
        return p;
    }
    /* Blocks were chained since the mark: one new block, twice as large as everything
     * the span used (pages never touched cost no memory), takes `keep`, the chained
     * blocks are freed, so the next spans of that size fit in place. */
    vt_arena_block *nb = block_new(2 * (a->total_used - m.total_used + need));
    memcpy(nb->base, keep, bytes);
    nb->used = need;
    vt_arena_block *b = a->head;
    while (b != m.block) {
        VT_ASSERT(b != NULL, "arena rewind: the mark is not of this arena's blocks");
        vt_arena_block *n = b->next;
        free(b->base);
        free(b);
        b = n;
    }
    b->used = m.used;
    nb->next = b;
    a->head = nb;
    a->total_used = m.total_used + need;
    return nb->base;
}

int64_t vt_shape_size(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

vt_tensor vt_shape(int ndim, ...) {
    vt_tensor t;
    memset(&t, 0, sizeof t);
    VT_ASSERT(ndim >= 1 && ndim <= VT_MAX_DIMS, "bad ndim %d", ndim);
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) t.shape[i] = va_arg(ap, int64_t);
    va_end(ap);
    t.ndim = ndim;
    t.size = vt_shape_size(ndim, t.shape);
    return t;
}

int vt_same_shape(const vt_tensor *a, const vt_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

const char *vt_shape_str(const vt_tensor *t, char *buf, size_t len) {
    size_t off = 0;
    off += (size_t)snprintf(buf + off, len - off, "(");
    for (int i = 0; i < t->ndim && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (off < len) snprintf(buf + off, len - off, ")");
    return buf;
}

vt_tensor *vt_tensor_wrap(vt_arena *a, float *data, int ndim, const int64_t *shape) {
    VT_ASSERT(ndim >= 1 && ndim <= VT_MAX_DIMS, "bad ndim %d", ndim);
    vt_tensor *t = vt_arena_alloc(a, sizeof *t);
    memset(t, 0, sizeof *t);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->size = vt_shape_size(ndim, shape);
    t->data = data;
    return t;
}

vt_tensor *vt_tensor_new(vt_arena *a, int with_grad, int ndim, const int64_t *shape) {
    vt_tensor *t = vt_tensor_wrap(a, NULL, ndim, shape);
    t->data = vt_arena_alloc(a, (size_t)t->size * sizeof(float));
    t->grad = with_grad ? vt_arena_calloc(a, (size_t)t->size * sizeof(float)) : NULL;
    return t;
}
