/* gemm.c - vt_gemm, the threaded GEMM every op uses, and the per-thread packing
 * workspaces. Owns the split of C across OpenMP threads; the arithmetic is vt_k.gemm's
 * (kernels.h). Does not own any tape or tensor logic.
 *
 * Split: C is cut into one block per thread, over rows when M >= N, over columns
 * otherwise; block edges are multiples of 16 (a whole number of microkernel tiles for
 * every register blocking we use) except the last. Each element of C is computed by
 * exactly one thread with the same kernel call shape for a fixed thread count, so the
 * result is deterministic and needs no cross-thread reduction.
 * Products with a long K and a small C (the weight gradients: K = B N tokens) are cut
 * over K instead: a C split would make every thread pack the whole of the operand it
 * does not split, for only M / nt rows of work. Thread 0 computes alpha A0 B0 + beta C
 * into C, thread t > 0 alpha At Bt into its own partial buffer, and the partials are
 * added to C in thread order, so the result is again fixed for a fixed thread count
 * (but, unlike the C split, not equal to the 1-thread sums).
 * Small products (under VT_GEMM_PAR_FLOPS multiply-adds) run on the calling thread.
 * The split is static (measurements: kernels/TUNING.md). */
#include <omp.h>
#include <stdlib.h>

#include "kernels.h"
#include "ops.h"
#include "status.h"

#define VT_GEMM_PAR_FLOPS 65536.0
#define VT_GEMM_ALIGN 16
#define VT_GEMM_K_ALIGN 64 /* K cuts of the K split */
#define VT_GEMM_MAX_THREADS 256

/* A per-thread buffer that only grows (the first training step sizes it). */
typedef struct {
    float *data;
    size_t floats;
} tls_buffer;

static float *tls_buffer_get(tls_buffer *b, size_t floats, const char *what) {
    if (floats == 0) floats = 16;
    if (floats > b->floats) {
        free(b->data);
        b->data = vt_aligned_alloc(floats * sizeof(float));
        VT_ASSERT(b->data != NULL, "out of memory: GEMM %s of %zu floats", what, floats);
        b->floats = floats;
    }
    return b->data;
}

static _Thread_local tls_buffer tls_work, tls_partial;

float *vt_gemm_workspace(size_t floats) { return tls_buffer_get(&tls_work, floats, "workspace"); }

/* One block of C: rows [i0, i0 + m), columns [j0, j0 + n). */
static void gemm_block(int ta, int tb, int i0, int m, int j0, int n, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb,
                       float beta, const float *bias, float *C, int ldc) {
    const float *a = ta ? A + i0 : A + (size_t)i0 * lda;
    const float *b = tb ? B + (size_t)j0 * ldb : B + j0;
    float *work = vt_gemm_workspace(vt_k.gemm_work_floats(m, n, K));
    vt_k.gemm_bias(ta, tb, m, n, K, alpha, a, lda, b, ldb, beta, bias ? bias + j0 : NULL,
                   C + (size_t)i0 * ldc + j0, ldc, work);
}

/* Whether to cut over K: K at least 4 times the larger side of C, so each thread's
 * partial (M N floats) and the final adds cost little next to its M N K / nt FMAs. */
static int split_over_k(int M, int N, int K, int nt) {
    int side = M > N ? M : N;
    return K >= 4 * side && K >= nt * VT_GEMM_K_ALIGN;
}

/* C = alpha op(A) op(B) + beta C (+ bias rows) on nblk threads, each taking a range of
 * K; the bias is added after the partials. */
static void gemm_split_k(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, const float *bias, float *C, int ldc,
                         int nblk) {
    float *partial[VT_GEMM_MAX_THREADS];
    int kblocks = (K + VT_GEMM_K_ALIGN - 1) / VT_GEMM_K_ALIGN;
    #pragma omp parallel num_threads(nblk)
    {
        /* the team's real size: the runtime may give fewer threads than asked */
        int t = omp_get_thread_num(), nth = omp_get_num_threads();
        int s = (int)((int64_t)kblocks * t / nth) * VT_GEMM_K_ALIGN;
        int e = (int)((int64_t)kblocks * (t + 1) / nth) * VT_GEMM_K_ALIGN;
        if (e > K) e = K;
        const float *a = ta ? A + (size_t)s * lda : A + s;
        const float *b = tb ? B + s : B + (size_t)s * ldb;
        float *work = vt_gemm_workspace(vt_k.gemm_work_floats(M, N, e - s));
        if (t == 0) {
            vt_k.gemm(ta, tb, M, N, e - s, alpha, a, lda, b, ldb, beta, C, ldc, work);
        } else {
            partial[t] = tls_buffer_get(&tls_partial, (size_t)M * N, "partial");
            vt_k.gemm(ta, tb, M, N, e - s, alpha, a, lda, b, ldb, 0.0f, partial[t], N, work);
        }
        #pragma omp barrier
        int r0 = (int)((int64_t)M * t / nth), r1 = (int)((int64_t)M * (t + 1) / nth);
        for (int u = 1; u < nth; u++)
            for (int i = r0; i < r1; i++)
                vt_k.add(C + (size_t)i * ldc, partial[u] + (size_t)i * N, C + (size_t)i * ldc, (size_t)N);
        for (int i = r0; bias && i < r1; i++) vt_k.add(C + (size_t)i * ldc, bias, C + (size_t)i * ldc, (size_t)N);
    }
}

void vt_gemm(int ta, int tb, int M, int N, int K, float alpha,
             const float *A, int lda, const float *B, int ldb,
             float beta, float *C, int ldc) {
    vt_gemm_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc);
}

void vt_gemm_bias(int ta, int tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb,
                  float beta, const float *bias, float *C, int ldc) {
    VT_ASSERT(M >= 0 && N >= 0 && K >= 0, "gemm: negative size %d x %d x %d", M, N, K);
    if (M == 0 || N == 0) return;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt <= 1 || (double)M * N * K < VT_GEMM_PAR_FLOPS) {
        gemm_block(ta, tb, 0, M, 0, N, K, alpha, A, lda, B, ldb, beta, bias, C, ldc);
        return;
    }
    if (nt > VT_GEMM_MAX_THREADS) nt = VT_GEMM_MAX_THREADS;
    if (split_over_k(M, N, K, nt)) {
        gemm_split_k(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, ldc, nt);
        return;
    }
    int by_rows = M >= N;
    int len = by_rows ? M : N;
    int tiles = (len + VT_GEMM_ALIGN - 1) / VT_GEMM_ALIGN;
    int nblk = tiles < nt ? tiles : nt;
    #pragma omp parallel for num_threads(nblk) schedule(static, 1)
    for (int t = 0; t < nblk; t++) {
        int s = (int)((int64_t)tiles * t / nblk) * VT_GEMM_ALIGN;
        int e = (int)((int64_t)tiles * (t + 1) / nblk) * VT_GEMM_ALIGN;
        if (e > len) e = len;
        if (by_rows) gemm_block(ta, tb, s, e - s, 0, N, K, alpha, A, lda, B, ldb, beta, bias, C, ldc);
        else gemm_block(ta, tb, 0, M, s, e - s, K, alpha, A, lda, B, ldb, beta, bias, C, ldc);
    }
}
