/* trace.h - a timed record of the products a stretch of code runs, for benchmarks that
 * compare a training step's products with the same products run alone
 * (bench/bench_step.c). Owns the record and its switch; the ops that report into it
 * (vt_gemm_prec in gemm.c, attention.c) own what they report. Nothing is recorded, and
 * no clock is read, while the trace is off (the default): a reporting op then only asks
 * vt_trace_active once per call.
 *
 * Only calls made outside OpenMP parallel regions are recorded (one thread writes the
 * record); each entry holds everything needed to make the same call again (the GEMM's
 * arguments, pointers included), its analytic flops and its wall-clock seconds. */
#ifndef VT_OPS_TRACE_H
#define VT_OPS_TRACE_H

#include <stdint.h>

typedef enum {
    VT_TRACE_GEMM,          /* one vt_gemm_prec call */
    VT_TRACE_ATTENTION_FWD, /* one attention forward (every (batch, head) block) */
    VT_TRACE_ATTENTION_BWD, /* one attention backward */
} vt_trace_kind;

/* One traced call. GEMM: vt_gemm_prec's arguments. Attention: M = B H blocks, N tokens,
 * K = hd (the GEMM fields otherwise zero); flops are the products' 4 N^2 hd per block
 * forward and 8 N^2 hd backward (a backward that recomputes P does more). */
typedef struct {
    vt_trace_kind kind;
    int bf16, ta, tb, M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B, *bias;
    const uint16_t *B16;
    float *C;
    double flops, seconds;
    int sums; /* GEMM: 1 when the call also summed A's columns (vt_gemm_prec_wgrad), in its seconds */
} vt_trace_call;

/* Called after each recorded call with its entry (then already in the record, when under
 * cap) and the ctx given to vt_trace_start; the trace is inactive while it runs, so
 * products it makes are not recorded. */
typedef void (*vt_trace_after_fn)(const vt_trace_call *c, void *ctx);

/* Start recording into calls[0..cap) (the count restarts at 0); after: NULL, or called
 * after each recorded call. */
void vt_trace_start(vt_trace_call *calls, int cap, vt_trace_after_fn after, void *ctx);
/* Stop recording; returns how many calls were made while on (entries past cap were
 * not kept). */
int vt_trace_stop(void);

/* Whether a call made now would be recorded: on, outside a parallel region and outside
 * the after function. */
int vt_trace_active(void);
/* Wall-clock seconds, the clock of vt_trace_call.seconds. */
double vt_trace_now(void);
/* Append c (when active; kept only while under cap). */
void vt_trace_add(const vt_trace_call *c);

#endif
