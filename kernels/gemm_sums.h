/* gemm_sums.h - the column sums a weight gradient's GEMM takes of its A as it packs it
 * (the gemm_sums entry, ../entries.def), shared by both GEMM drivers (gemm_driver.h,
 * gemm_bf16_driver.h): each driver calls col_sums_block right after its pack of op(A)
 * read a block, in the first N block only, with its level's sum_rows. */
#ifndef VT_KERNELS_GEMM_SUMS_H
#define VT_KERNELS_GEMM_SUMS_H

#include <stddef.h>

/* p[0:m] += rows 0 to rows - 1 of a (row stride lda floats), each column's adds in row
 * order: the bits of adding the rows to p one after another. */
typedef void (*gemm_sum_rows_fn)(float *p, const float *a, size_t lda, int m, int rows);

/* The column sums a weight gradient's product takes of op(A) = A^T as it goes (the
 * gemm_sums entry): sums[c M + i] += A[k][i] over chunk c's rows [edge[c], edge[c + 1]). */
typedef struct {
    float *sums;
    const int *edge;
    int nchunks;
} gemm_col_sums;

/* The sums of A's rows [k0, k0 + kc), columns [i0, i0 + m) (A is K x M), chunk by chunk,
 * right after the block's pack read them: from cache. */
static inline void col_sums_block(gemm_sum_rows_fn sum_rows, const gemm_col_sums *cs, const float *A, int lda,
                                  int M, int i0, int m, int k0, int kc) {
    for (int c = 0, k = k0; c < cs->nchunks && k < k0 + kc; c++) {
        int e = cs->edge[c + 1] < k0 + kc ? cs->edge[c + 1] : k0 + kc;
        if (e <= k) continue;
        sum_rows(cs->sums + (size_t)c * M + i0, A + (size_t)k * lda + i0, (size_t)lda, m, e - k);
        k = e;
    }
}

/* gemm_sums with no product to take the sums in (N <= 0: C has no columns): all K rows of
 * A's M columns summed here, in the same order, so the same bits. */
static inline void plain_sum_rows(float *p, const float *a, size_t lda, int m, int rows) {
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < m; i++) p[i] += a[(size_t)r * lda + i];
}
static inline void col_sums_no_product(const gemm_col_sums *cs, const float *A, int lda, int M, int K) {
    if (M > 0 && K > 0) col_sums_block(plain_sum_rows, cs, A, lda, M, 0, M, 0, K);
}

#endif
