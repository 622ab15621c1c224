/* gemm.c - vt_gemm, the threaded GEMM every op uses, and the per-thread packing
 * workspaces. Owns the split of C across OpenMP threads; the arithmetic is vt_k.gemm's
 * (kernels.h). Does not own any tape or tensor logic.
 *
 * Split: C is cut into one block per thread, over rows when M >= N, over columns
 * otherwise; block edges are multiples of 16 (a whole number of microkernel tiles for
 * every register blocking we use) except the last. Each element of C is computed by
 * exactly one thread with the same kernel call shape for a fixed thread count, so the
 * result is deterministic and needs no cross-thread reduction. Small products (under
 * VT_GEMM_PAR_FLOPS multiply-adds) run on the calling thread. */
#include <omp.h>
#include <stdlib.h>

#include "kernels.h"
#include "ops.h"
#include "status.h"

#define VT_GEMM_PAR_FLOPS 65536.0
#define VT_GEMM_ALIGN 16

static _Thread_local float *tls_work = NULL;
static _Thread_local size_t tls_work_floats = 0;

float *vt_gemm_workspace(size_t floats) {
    if (floats == 0) floats = 16;
    if (floats > tls_work_floats) {
        free(tls_work);
        tls_work = vt_aligned_alloc(floats * sizeof(float));
        VT_ASSERT(tls_work != NULL, "out of memory: GEMM workspace of %zu floats", floats);
        tls_work_floats = floats;
    }
    return tls_work;
}

/* One block of C: rows [i0, i0 + m), columns [j0, j0 + n). */
static void gemm_block(int ta, int tb, int i0, int m, int j0, int n, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb,
                       float beta, float *C, int ldc) {
    const float *a = ta ? A + i0 : A + (size_t)i0 * lda;
    const float *b = tb ? B + (size_t)j0 * ldb : B + j0;
    float *work = vt_gemm_workspace(vt_k.gemm_work_floats(m, n, K));
    vt_k.gemm(ta, tb, m, n, K, alpha, a, lda, b, ldb, beta, C + (size_t)i0 * ldc + j0, ldc, work);
}

void vt_gemm(int ta, int tb, int M, int N, int K, float alpha,
             const float *A, int lda, const float *B, int ldb,
             float beta, float *C, int ldc) {
    VT_ASSERT(M >= 0 && N >= 0 && K >= 0, "gemm: negative size %d x %d x %d", M, N, K);
    if (M == 0 || N == 0) return;
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt <= 1 || (double)M * N * K < VT_GEMM_PAR_FLOPS) {
        gemm_block(ta, tb, 0, M, 0, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
        if (by_rows) gemm_block(ta, tb, s, e - s, 0, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        else gemm_block(ta, tb, 0, M, s, e - s, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
}
