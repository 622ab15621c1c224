/* tape.h - the autograd tape.
 *
 * Ops run their forward immediately and, when gradients are wanted, record one
 * entry: a backward function and a context (allocated in the step arena) holding
 * whatever the backward needs. vt_tape_backward() seeds d(loss)/d(loss) = 1 and
 * replays entries in reverse order. Each backward ACCUMULATES (+=) into the grad
 * buffers of its inputs that have one (grad != NULL), so a tensor used twice
 * (residual fan-out) receives the sum of both contributions.
 *
 * The tape also carries what every op needs from the step: the arena that
 * activations come from, whether this is a training forward (dropout, drop-path
 * active) and whether gradients are recorded at all (off in evaluation: no grad
 * buffers are allocated and nothing is recorded).
 */
#ifndef VT_TAPE_H
#define VT_TAPE_H

#include "rng.h"
#include "tensor.h"

typedef void (*vt_backward_fn)(void *ctx);

typedef struct {
    vt_backward_fn fn;
    void *ctx;
    const char *name;   /* op name, for debugging */
} vt_tape_entry;

typedef struct vt_tape {
    vt_arena *arena;
    vt_tape_entry *entries;
    int n, cap;
    int grad_enabled;   /* record entries and allocate activation grads */
    int training;       /* dropout / drop-path active */
    vt_rng *rng;        /* stream for dropout masks; may be NULL when !training */
    float *scratch;     /* vt_tape_scratch's buffer (not from the arena) */
    size_t scratch_floats;
} vt_tape;

void vt_tape_init(vt_tape *t, vt_arena *arena);
void vt_tape_free(vt_tape *t);
/* Forget all entries (call with vt_arena_reset at the start of a step). */
void vt_tape_clear(vt_tape *t);
void vt_tape_record(vt_tape *t, const char *name, vt_backward_fn fn, void *ctx);
/* Context storage for a backward: arena memory that lives until the next reset. */
void *vt_tape_ctx(vt_tape *t, size_t bytes);
/* A tape-owned float buffer of at least `floats` floats, 64-byte aligned, contents
 * undefined, valid until the next vt_tape_scratch call or vt_tape_free. For an op that
 * needs a large intermediate only while its forward or its backward runs (it is neither
 * an activation nor kept for backward). Grows when a larger request comes and is never
 * shrunk, so after the first step the step loop does not allocate. */
float *vt_tape_scratch(vt_tape *t, size_t floats);
/* Whether an op with these inputs must produce a gradient: tape enabled and at
 * least one input has a grad buffer. Inputs may be NULL (ignored). */
int vt_tape_wants_grad(const vt_tape *t, const vt_tensor *a, const vt_tensor *b, const vt_tensor *c);
/* A new activation from the tape's arena, with a zeroed grad buffer if with_grad. */
vt_tensor *vt_tape_new(vt_tape *t, int with_grad, int ndim, const int64_t *shape);
/* Run every recorded backward in reverse order; the caller has seeded the output
 * grads (any shape), e.g. with d(sum(out * R))/d(out) = R in gradient checks. */
void vt_tape_replay(vt_tape *t);
/* Seed loss->grad with 1 (loss must be a 1-element tensor with a grad buffer)
 * and vt_tape_replay. */
void vt_tape_backward(vt_tape *t, vt_tensor *loss);

#endif
