/* tensor.h - tensor views and the per-step arena.
 *
 * A vt_tensor is a view: float32, row-major, contiguous, up to 4 dims. It owns
 * nothing. `data` points into the parameter buffer (parameters) or the arena
 * (activations). `grad` is NULL when no gradient flows to it, otherwise a buffer
 * of the same size that backward accumulates into (+=).
 *
 * The arena is a bump allocator reset at the start of every step. It grows by
 * chaining blocks during the first step(s); vt_arena_reset() merges them into one
 * block of the high-water size, so after warm-up the step loop does no malloc.
 * All arena allocations are 64-byte aligned.
 */
#ifndef VT_TENSOR_H
#define VT_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define VT_MAX_DIMS 4

typedef struct vt_tensor {
    float *data;
    float *grad;                 /* NULL: no gradient needed */
    uint16_t *bf16;              /* a bf16 copy of data its owner keeps current (the GEMM
                                    weights under train.precision = bf16), or NULL */
    int ndim;
    int64_t shape[VT_MAX_DIMS];
    int64_t size;                /* product of shape */
    /* The tape's bookkeeping (tape.h): how many recorded ops take this tensor as an input
     * wanting gradients, and the tape entry of the last of them; the grad scope it was
     * made in with a gradient (1, 2, ... this step; 0: none); whether the grad lives in a
     * grad scope's region; whether its consumer can write the grad without reading. */
    int grad_users, grad_consumer, grad_scope;
    unsigned char grad_scoped, grad_overwrite;
} vt_tensor;

typedef struct vt_arena_block {
    struct vt_arena_block *next;
    size_t cap, used;
    unsigned char *base;         /* 64-byte aligned */
} vt_arena_block;

typedef struct vt_arena {
    vt_arena_block *head;        /* current block (newest first) */
    size_t total_used;           /* bytes handed out since the last reset */
    size_t high_water;           /* max total_used over all steps */
} vt_arena;

void vt_arena_init(vt_arena *a, size_t initial_bytes);
void vt_arena_free(vt_arena *a);
/* Make every byte free again; consolidates chained blocks into one. */
void vt_arena_reset(vt_arena *a);
/* Make the arena (empty: just initialised or reset) one block of at least `bytes`, so a
 * step of that size chains no block, allocated now: the owner of a step learns before it
 * starts that the system cannot give the memory. Errors: VT_ERR_RUNTIME naming the bytes
 * (the arena keeps its block). */
vt_status vt_arena_reserve(vt_arena *a, size_t bytes);
/* 64-byte aligned, uninitialised. Aborts if the system is out of memory. */
void *vt_arena_alloc(vt_arena *a, size_t bytes);
/* Same, zero-filled. */
void *vt_arena_calloc(vt_arena *a, size_t bytes);
/* A position in the arena (valid until the next reset), and a rewind to it that keeps
 * one thing: every allocation made since the mark is given back but `bytes` bytes
 * copied from `keep` (itself allocated since the mark), returned at their new place.
 * Blocks chained since the mark are freed and replaced by one block twice as large as
 * the span used, so later spans of that size fit without chaining. */
typedef struct {
    const vt_arena_block *block;
    size_t used, total_used;
} vt_arena_mark;
vt_arena_mark vt_arena_get_mark(const vt_arena *a);
void *vt_arena_rewind_keep(vt_arena *a, vt_arena_mark m, const void *keep, size_t bytes);

/* Shape helpers. vt_shape(ndim, d0, d1, ...) fills a tensor header (no storage). */
vt_tensor vt_shape(int ndim, ...);
int64_t vt_shape_size(int ndim, const int64_t *shape);
int vt_same_shape(const vt_tensor *a, const vt_tensor *b);
/* "(2, 3, 4)" into buf; returns buf. */
const char *vt_shape_str(const vt_tensor *t, char *buf, size_t len);

/* A new tensor whose data (and grad, zeroed, if with_grad) come from the arena. */
vt_tensor *vt_tensor_new(vt_arena *a, int with_grad, int ndim, const int64_t *shape);
/* Same as a tensor header in the arena wrapping existing data (no grad). */
vt_tensor *vt_tensor_wrap(vt_arena *a, float *data, int ndim, const int64_t *shape);

#endif
