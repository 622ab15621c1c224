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
 *
 * Grad scopes (memory). An activation's gradient is only needed from the backward of
 * its last consumer to the backward of its producer, but ops capture grad pointers
 * when they record. A scope lets the caller say which gradients are short-lived: the
 * grad buffers of tensors created between vt_tape_scope_begin and vt_tape_scope_end
 * come from one region shared by every scope (each scope starts at offset 0), not from
 * the arena. The entry recorded by scope_begin runs last in that scope's backward and
 * zeroes the bytes the scope used, so the next scope to run backward finds its grads
 * zero as vt_tape_new promises, except its fresh ones (below). The rule a caller must
 * keep (rule 1 below): a tensor created inside a scope is consumed only by ops recorded
 * before the NEXT scope begins (in the model: a block's internal tensors; the block's
 * output is created after its scope ends).
 * Without gradients (evaluation) a scope frees instead: vt_tape_scope_result moves the
 * block's output down to where the scope began and gives the arena back everything
 * the block made, so a no-grad forward holds one block's activations, not all of them.
 * A scope whose grads do not fit takes the rest from the arena; the next scope_begin
 * then replaces the region by one as large as the largest scope so far (the old one
 * is freed at the next vt_tape_clear). So the first step also holds the grads that
 * overflowed and the regions it replaced; every later step only the region, with no
 * allocation. A caller that knows its scopes' size says so with vt_tape_scope_reserve
 * before the first one (the model does), so that block 0's grads need not overflow.
 *
 * Fresh gradients. A scoped tensor whose only consumer writes its gradient without
 * reading it (the consumer said so with vt_tape_can_overwrite when it recorded) needs no
 * zeroing: the scope cleanup before its backward skips it, and its consumer's backward
 * finds vt_tape_grad_fresh true and writes (beta 0, a copy) instead of adding. Consumers
 * are counted by vt_tape_wants_grad, so every op must pass it every input whose gradient
 * it writes (all ops do); a second consumer makes the gradient an ordinary accumulated
 * one. Values are those of adding into zeros but for the sign of a zero sum (-0 + 0).
 *
 * The protocol, and how the tape holds callers to it. Broken, either rule corrupts
 * gradients without a sign, so the tape checks them and aborts (file:line, what broke):
 *  1. A tensor created inside a grad scope is consumed only by ops recorded before the
 *     next scope begins. Checked where an op counts its inputs (vt_tape_wants_grad),
 *     always: the message names the op's file:line and both scopes.
 *  2. An op counts, with vt_tape_wants_grad, every input whose gradient its backward
 *     writes, and records its entry next; it says vt_tape_can_overwrite(x) only if, when
 *     vt_tape_grad_fresh(x), its backward writes all of x's gradient without reading it.
 *     Counts that no entry follows are caught when a scope begins or the replay starts.
 *     The rest is checked in checking mode (t->check): the tape fills every fresh
 *     gradient with a signalling-NaN pattern where it would hold stale values, and the
 *     replay aborts when an op other than the one counted consumer changes it, or when
 *     the pattern (or a NaN computed from it) is left after that consumer's backward;
 *     the message names the ops. Checking mode is on when the environment has
 *     VT_TAPE_CHECK=1 at vt_tape_init (`make test` sets it); it costs a fill and two
 *     reads of the fresh gradients per step.
 */
#ifndef VT_TAPE_H
#define VT_TAPE_H

#include "rng.h"
#include "tensor.h"

typedef void (*vt_backward_fn)(void *ctx);
/* A hook the replay calls for the data-parallel gradient exchange (dist.h): from = -1
 * after every entry, and from >= 0 when the replay reaches a mark recorded by
 * vt_tape_mark_grads_final. */
typedef void (*vt_tape_hook)(void *ctx, int64_t from);

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
    int bf16;           /* train.precision = bf16: the ops' GEMMs and attention products
                           round their operands to bf16 (src/precision.h); 0: float32 */
    float *scratch;     /* vt_tape_scratch's buffer (not from the arena) */
    size_t scratch_floats;
    int scopes_enabled; /* 1 (default): grad scopes share the region; 0: plain arena */
    int check;          /* checking mode (the protocol above): VT_TAPE_CHECK at init */
    int scope_seq;      /* grad scopes begun this step: the number of the open or last one */
    int fwd_scope;              /* a no-grad scope is open since fwd_mark */
    vt_arena_mark fwd_mark;
    unsigned char *region;      /* grad region, all zero outside a scope's backward */
    size_t region_cap, region_used;
    size_t region_need, scope_want; /* bytes the largest scope asked for / the open one */
    struct vt_scope_ctx *open_scope; /* the open grad scope's zeroing entry, or NULL */
    struct vt_scope_ctx *last_scope; /* the scope begun before the open one (this step) */
    vt_tensor **scoped;         /* every scope's region tensors, in order (this step) */
    int n_scoped, cap_scoped;
    void **retired;             /* regions replaced this step, freed at the next clear */
    int n_retired;
    vt_tensor **counted;        /* inputs counted since the last entry: its consumers' */
    int n_counted, cap_counted;
    const char *counted_at;     /* file:line of the first count, for the message */
    int counted_line;
    vt_tensor **watch;          /* checking mode: filled fresh grads, their consumer to come */
    int n_watch, cap_watch;
    int n_checked;              /* checking mode: fresh grads the last replay checked */
    vt_tape_hook hook;          /* NULL (default), or called during replay (above) */
    void *hook_ctx;
    int64_t sample0, sample_stride; /* local sample b is sample0 + b sample_stride of the
                                       global batch (default 0, 1); see vt_tape_sample_key */
} vt_tape;

void vt_tape_init(vt_tape *t, vt_arena *arena);
void vt_tape_free(vt_tape *t);
/* Forget all entries (call with vt_arena_reset at the start of a step). */
void vt_tape_clear(vt_tape *t);
void vt_tape_record(vt_tape *t, const char *name, vt_backward_fn fn, void *ctx);
/* Open / close a scope (see above). No-ops when scopes_enabled is 0. Scopes do not
 * nest. */
void vt_tape_scope_begin(vt_tape *t);
void vt_tape_scope_end(vt_tape *t);
/* The scope's result y, created after scope_end: with gradients y itself; without, y
 * moved to where the scope began with every later allocation given back
 * (vt_arena_rewind_keep). Every tensor the scope made is invalid after it. */
vt_tensor *vt_tape_scope_result(vt_tape *t, vt_tensor *y);
/* A hint: the next scope_begin makes the region at least `bytes` large. Too small, and
 * what does not fit overflows as without it; too large, and the region is larger than
 * needed for as long as the tape lives. */
void vt_tape_scope_reserve(vt_tape *t, size_t bytes);
/* Allocate now, between steps (no scope open), a grad region of at least region_bytes
 * (and reserve it, as vt_tape_scope_reserve) and a scratch of at least scratch_floats:
 * the owner of a step learns before it starts that the system cannot give the memory.
 * Errors: VT_ERR_RUNTIME naming the buffer and its bytes (the tape keeps what it had). */
vt_status vt_tape_reserve(vt_tape *t, size_t region_bytes, size_t scratch_floats);
/* Context storage for a backward: arena memory that lives until the next reset. */
void *vt_tape_ctx(vt_tape *t, size_t bytes);
/* A tape-owned float buffer of at least `floats` floats, 64-byte aligned, contents
 * undefined, valid until the next vt_tape_scratch call or vt_tape_free. For an op that
 * needs a large intermediate only while its forward or its backward runs (it is neither
 * an activation nor kept for backward). Grows when a larger request comes and is never
 * shrunk, so after the first step the step loop does not allocate. */
float *vt_tape_scratch(vt_tape *t, size_t floats);
/* Whether an op with these inputs must produce a gradient: tape enabled and at
 * least one input has a grad buffer. Inputs may be NULL (ignored). Counts the op as a
 * consumer of each input with a grad buffer (fresh gradients, above); the entry it
 * records next is their consumer. Aborts, naming the caller's file:line, on a tensor
 * of an earlier grad scope (rule 1). */
#define vt_tape_wants_grad(t, a, b, c) vt_tape_wants_grad_at((t), (a), (b), (c), __FILE__, __LINE__)
int vt_tape_wants_grad_at(vt_tape *t, vt_tensor *a, vt_tensor *b, vt_tensor *c, const char *file, int line);
/* Said by an op when it records: its backward writes x's gradient without reading it
 * whenever vt_tape_grad_fresh(x). */
void vt_tape_can_overwrite(vt_tensor *x);
/* In a backward: whether x's gradient is fresh (scoped, this op its only consumer and
 * able to overwrite): its memory holds garbage and must be written, not added to. */
int vt_tape_grad_fresh(const vt_tensor *x);
/* A new activation from the tape's arena, with a zeroed grad buffer if with_grad
 * (inside a scope: from the grad region, zero when its backward runs unless fresh). */
vt_tensor *vt_tape_new(vt_tape *t, int with_grad, int ndim, const int64_t *shape);
/* The key of local sample b (leading dim of a batch tensor) for random masks: its
 * position in the global batch. Dropout, drop-path and attention dropout seed each
 * sample's stream from it, so with data parallelism (this rank holding global samples
 * sample0, sample0 + stride, ...) a sample draws the mask it draws in one process. */
static inline uint64_t vt_tape_sample_key(const vt_tape *t, int64_t b) {
    return (uint64_t)(t->sample0 + b * t->sample_stride);
}
/* With a hook installed and gradients on, record a mark: when the replay reaches it,
 * every backward recorded after it has run, and the model promises that no earlier
 * entry adds to a parameter gradient at flat offset >= from; the hook then receives
 * from (tests/test_dist.c checks the promise for the ViT). Nothing otherwise. */
void vt_tape_mark_grads_final(vt_tape *t, int64_t from);
/* Run every recorded backward in reverse order; the caller has seeded the output
 * grads (any shape), e.g. with d(sum(out * R))/d(out) = R in gradient checks. */
void vt_tape_replay(vt_tape *t);
/* Seed loss->grad with 1 (loss must be a 1-element tensor with a grad buffer)
 * and vt_tape_replay. */
void vt_tape_backward(vt_tape *t, vt_tensor *loss);

#endif
