/* matmul.c - vt_op_matmul: batched c[i] = op(a[i]) op(b[i]), forward, backward, record.
 * a (Bt, M, K) or (Bt, K, M) when ta; b (Bt, K, N) or (Bt, N, K) when tb; c (Bt, M, N).
 * With A' = op(a), B' = op(b): dA' = dC B'^T, dB' = A'^T dC, mapped back through the
 * transposes (da = dA' or dA'^T, db likewise), all accumulated with beta = 1.
 * When the batch has at least as many matrices as threads, OpenMP runs over the batch
 * (each thread calls vt_k.gemm with its own workspace); otherwise each product uses the
 * threaded vt_gemm. Either way every output element is written by one thread. Every
 * product in the tape's precision (t->bf16: vt_k.gemm_bf16, operands rounded). */
#include <omp.h>

#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    int bf16, ta, tb, M, N, K;
    float alpha;
    const float *A, *B;
    int lda, ldb;
    float beta;
    float *C;
    int ldc;
    int64_t sa, sb, sc; /* batch strides */
} batched_gemm;

static void run_one(const batched_gemm *g, int64_t i, int direct) {
    const float *A = g->A + i * g->sa, *B = g->B + i * g->sb;
    float *C = g->C + i * g->sc;
    if (direct && g->bf16) {
        float *w = vt_gemm_workspace(vt_k.gemm_bf16_work_floats(g->M, g->N, g->K));
        vt_k.gemm_bf16(g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, g->lda, B, NULL, g->ldb, g->beta, NULL, C, g->ldc,
                       w, NULL);
    } else if (direct) {
        float *w = vt_gemm_workspace(vt_k.gemm_work_floats(g->M, g->N, g->K));
        vt_k.gemm(g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, g->lda, B, g->ldb, g->beta, C, g->ldc, w);
    } else {
        vt_gemm_prec(g->bf16, g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, g->lda, B, NULL, g->ldb, g->beta, NULL, C,
                     g->ldc);
    }
}

static void run_batched(const batched_gemm *g, int64_t Bt) {
    if (Bt >= omp_get_max_threads() && Bt > 1) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < Bt; i++) run_one(g, i, 1);
    } else {
        for (int64_t i = 0; i < Bt; i++) run_one(g, i, 0);
    }
}

typedef struct {
    const float *a, *b, *dc;
    float *da, *db;
    int64_t Bt;
    int bf16, ta, tb, M, N, K;
} matmul_ctx;

static void matmul_bwd(void *p) {
    matmul_ctx *c = p;
    int M = c->M, N = c->N, K = c->K;
    int lda = c->ta ? M : K, ldb = c->tb ? K : N;
    if (c->da) {
        batched_gemm g;
        if (!c->ta) /* da (M, K) = dC B'^T */
            g = (batched_gemm){c->bf16, 0, !c->tb, M, K, N, 1.0f, c->dc, c->b, N, ldb, 1.0f, c->da, K,
                               (int64_t)M * N, (int64_t)K * N, (int64_t)M * K};
        else        /* da (K, M) = B' dC^T */
            g = (batched_gemm){c->bf16, c->tb, 1, K, M, N, 1.0f, c->b, c->dc, ldb, N, 1.0f, c->da, M,
                               (int64_t)K * N, (int64_t)M * N, (int64_t)M * K};
        run_batched(&g, c->Bt);
    }
    if (c->db) {
        batched_gemm g;
        if (!c->tb) /* db (K, N) = A'^T dC */
            g = (batched_gemm){c->bf16, !c->ta, 0, K, N, M, 1.0f, c->a, c->dc, lda, N, 1.0f, c->db, N,
                               (int64_t)M * K, (int64_t)M * N, (int64_t)K * N};
        else        /* db (N, K) = dC^T A' */
            g = (batched_gemm){c->bf16, 1, c->ta, N, K, M, 1.0f, c->dc, c->a, N, lda, 1.0f, c->db, K,
                               (int64_t)M * N, (int64_t)M * K, (int64_t)K * N};
        run_batched(&g, c->Bt);
    }
}

vt_tensor *vt_op_matmul(vt_tape *t, vt_tensor *a, vt_tensor *b, int ta, int tb) {
    VT_ASSERT(a->ndim == 3 && b->ndim == 3, "matmul: inputs must be 3-D, got %d-D and %d-D",
              a->ndim, b->ndim);
    VT_ASSERT(a->shape[0] == b->shape[0], "matmul: batch %lld != %lld",
              (long long)a->shape[0], (long long)b->shape[0]);
    int64_t Bt = a->shape[0];
    int M = (int)(ta ? a->shape[2] : a->shape[1]), K = (int)(ta ? a->shape[1] : a->shape[2]);
    int Kb = (int)(tb ? b->shape[2] : b->shape[1]), N = (int)(tb ? b->shape[1] : b->shape[2]);
    VT_ASSERT(K == Kb, "matmul: inner dims differ (%d vs %d, ta=%d tb=%d)", K, Kb, ta, tb);
    int g = vt_tape_wants_grad(t, a, b, NULL);
    int64_t shape[3] = {Bt, M, N};
    vt_tensor *c = vt_tape_new(t, g, 3, shape);
    batched_gemm fw = {t->bf16, ta, tb, M, N, K, 1.0f, a->data, b->data, ta ? M : K, tb ? K : N, 0.0f,
                       c->data, N, (int64_t)M * K, (int64_t)K * N, (int64_t)M * N};
    run_batched(&fw, Bt);
    if (g) {
        matmul_ctx *x = vt_tape_ctx(t, sizeof *x);
        *x = (matmul_ctx){a->data, b->data, c->grad, a->grad, b->grad, Bt, t->bf16, ta, tb, M, N, K};
        vt_tape_record(t, "matmul", matmul_bwd, x);
    }
    return c;
}
