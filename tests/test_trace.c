/* test_trace.c - the product trace (src/ops/trace.h) that bench/bench_step.c reads: off,
 * nothing is recorded; on, each vt_gemm_prec call made outside a parallel region is
 * recorded with its arguments (the same call made again from the record gives the same
 * bits), 2 M N K flops and a time; attention's forward and backward are recorded with
 * their products' flops; a weight gradient that sums its columns (vt_gemm_prec_wgrad) as
 * one product marked so; calls inside a parallel region are not; entries past the
 * capacity are counted but not written; stopping turns it off. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "ops/par.h"
#include "ops/trace.h"
#include "rng.h"
#include "test_runtime.h"

#define RM 37 /* the product's sizes */
#define RN 29
#define RK 23

/* An after function: counts its calls, checks the trace is inactive, and makes a product
 * (which must not be recorded). */
typedef struct {
    int calls, active, M;
    const float *A;
} after_seen;

static void after(const vt_trace_call *c, void *ctx) {
    after_seen *a = ctx;
    a->calls++;
    a->M = c->M;
    a->active |= vt_trace_active();
    float Cx[4];
    vt_gemm_prec(0, 0, 0, 2, 2, 1, 1.0f, c->A, 1, c->A, NULL, 2, 0.0f, NULL, Cx, 2);
}

static void fill(float *x, size_t n, vt_rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(2.0 * vt_rng_uniform(r) - 1.0);
}

int main(void) {
    vt_arena arena;
    vt_tape tape;
    if (test_runtime_init(&arena, 1 << 20, &tape) != 0) return 1;
    vt_rng r;
    vt_rng_seed(&r, 7);
    float A[RM * RK], B[RN * RK], bias[RN], C[RM * RN], C2[RM * RN];
    fill(A, RM * RK, &r);
    fill(B, RN * RK, &r);
    fill(bias, RN, &r);
    vt_trace_call calls[4];
    memset(calls, 0, sizeof calls);

    /* off: nothing recorded */
    CHECK(!vt_trace_active(), "the trace is on before it was started");
    vt_gemm_prec(0, 0, 1, RM, RN, RK, 1.0f, A, RK, B, NULL, RK, 0.0f, bias, C, RN);
    vt_trace_start(calls, 4, NULL, NULL);
    CHECK(vt_trace_stop() == 0, "a call made while off was counted");
    CHECK(calls[0].M == 0, "a call made while off was written");

    /* on: the arguments, the flops, a time; the record makes the same call again */
    vt_trace_start(calls, 4, NULL, NULL);
    CHECK(vt_trace_active(), "the trace is off after vt_trace_start");
    vt_gemm_prec(0, 0, 1, RM, RN, RK, 0.5f, A, RK, B, NULL, RK, 0.0f, bias, C, RN);
    int n = vt_trace_stop();
    CHECK(!vt_trace_active(), "the trace is on after vt_trace_stop");
    CHECK(n == 1, "%d calls recorded for one", n);
    const vt_trace_call *c = &calls[0];
    CHECK(c->kind == VT_TRACE_GEMM && c->ta == 0 && c->tb == 1 && c->M == RM && c->N == RN && c->K == RK &&
              c->lda == RK && c->ldb == RK && c->ldc == RN && c->alpha == 0.5f && c->beta == 0.0f && c->A == A &&
              c->B == B && c->bias == bias && c->C == C && c->B16 == NULL && c->bf16 == 0,
          "the record does not hold the call's arguments");
    CHECK(c->flops == 2.0 * RM * RN * RK, "flops %g, expected 2 M N K = %g", c->flops, 2.0 * RM * RN * RK);
    CHECK(c->seconds >= 0.0 && c->seconds < 10.0, "seconds %g", c->seconds);
    vt_gemm_prec(c->bf16, c->ta, c->tb, c->M, c->N, c->K, c->alpha, c->A, c->lda, c->B, c->B16, c->ldb, 0.0f, c->bias,
                 C2, c->ldc);
    CHECK(memcmp(C, C2, sizeof C) == 0, "the recorded call made again gives other bits");
    CHECK(c->sums == 0, "a plain product recorded as one that summed columns");

    /* a weight gradient with its column sums: one product record, marked as summing */
    vt_trace_start(calls, 4, NULL, NULL);
    float sums[RK] = {0};
    vt_gemm_prec_wgrad(&arena, 0, RK, RN, RM, A, RK, C, RN, C2, RN, sums);
    n = vt_trace_stop();
    CHECK(n == 1 && calls[0].kind == VT_TRACE_GEMM && calls[0].ta == 1 && calls[0].tb == 0 && calls[0].M == RK &&
              calls[0].N == RN && calls[0].K == RM && calls[0].beta == 1.0f && calls[0].sums == 1,
          "a weight gradient with column sums: %d records, sums %d", n, calls[0].sums);

    /* inside a parallel region: not recorded */
    vt_trace_start(calls, 4, NULL, NULL);
    #pragma omp parallel num_threads(2)
    {
        float Ct[RM * RN];
        CHECK(!vt_trace_active(), "the trace is active inside a parallel region");
        vt_gemm_prec(0, 0, 1, RM, RN, RK, 1.0f, A, RK, B, NULL, RK, 0.0f, NULL, Ct, RN);
    }
    CHECK(vt_trace_stop() == 0, "calls inside a parallel region were recorded");

    /* past the capacity: counted, not written */
    memset(calls, 0, sizeof calls);
    vt_trace_start(calls, 1, NULL, NULL);
    vt_gemm_prec(0, 0, 0, RM, RN, RK, 1.0f, A, RK, B, NULL, RN, 0.0f, NULL, C, RN);
    vt_gemm_prec(0, 1, 0, RK, RN, RM, 1.0f, A, RK, C, NULL, RN, 0.0f, NULL, C2, RN);
    CHECK(vt_trace_stop() == 2, "two calls not counted");
    CHECK(calls[0].ta == 0 && calls[1].M == 0, "the record was written past its capacity");

    /* the after function: called once per recorded call, its own products not recorded */
    after_seen seen = {0};
    vt_trace_start(calls, 4, after, &seen);
    vt_gemm_prec(0, 0, 1, RM, RN, RK, 1.0f, A, RK, B, NULL, RK, 0.0f, NULL, C, RN);
    n = vt_trace_stop();
    CHECK(n == 1 && seen.calls == 1 && seen.M == RM, "after: %d recorded, %d after calls (M %d)", n, seen.calls,
          seen.M);
    CHECK(!seen.active, "the trace is active inside the after function");

    /* attention: forward and backward, with their products' flops */
    const int Bt = 2, H = 2, T = 9, hd = 4;
    int64_t shape[3] = {Bt, T, 3 * H * hd};
    vt_tensor *qkv = vt_tensor_new(&arena, 1, 3, shape);
    fill(qkv->data, (size_t)qkv->size, &r);
    memset(calls, 0, sizeof calls);
    vt_trace_start(calls, 4, NULL, NULL);
    vt_tensor *o = vt_op_attention_qkv(&tape, qkv, H, 0.5f, 0.0f, 1);
    fill(o->grad, (size_t)o->size, &r);
    vt_tape_replay(&tape);
    n = vt_trace_stop();
    CHECK(n == 2, "attention forward and backward: %d records", n);
    double per = 2.0 * Bt * H * (double)T * T * hd;
    CHECK(calls[0].kind == VT_TRACE_ATTENTION_FWD && calls[0].M == Bt * H && calls[0].N == T && calls[0].K == hd &&
              calls[0].flops == 2.0 * per,
          "attention forward record: kind %d, %d x %d x %d, %g flops", (int)calls[0].kind, calls[0].M, calls[0].N,
          calls[0].K, calls[0].flops);
    CHECK(calls[1].kind == VT_TRACE_ATTENTION_BWD && calls[1].flops == 4.0 * per,
          "attention backward record: kind %d, %g flops", (int)calls[1].kind, calls[1].flops);

    test_runtime_done(&arena, &tape);
    return test_summary();
}
