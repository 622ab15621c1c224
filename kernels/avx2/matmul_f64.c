/* avx2/matmul_f64.c - C = A B (+ C) for small n x n float64 matrices (contract in
 * ../entries.def; the products of src/pe/expm.c, LieRE's matrix exponentials).
 * Register tiles of 4 rows x 8 columns (8 ymm accumulators of 4 doubles): per step k
 * two vectors of B's row k, one broadcast of A per row, 8 FMAs; a last column tile of
 * fewer than 8 columns is masked, rows past a multiple of 4 go one at a time. Each
 * element's sum runs over k in order, as in the reference, then is added to C (acc);
 * the FMAs do not round each product, so results differ from the reference's by
 * rounding only (n 2^-53 sum |a b| at most). */
#include "avx2.h"

#define TR 4 /* rows of a register tile */
#define TC 8 /* columns: two vectors of 4 doubles */

/* Lanes 0 .. cnt - 1 (cnt <= 4) of a 4-double mask. */
static inline __m256i lanes(int cnt) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(cnt), _mm256_setr_epi64x(0, 1, 2, 3));
}

/* The R x 8 tile of C at (i, j), its columns masked by m0 and m1. */
static inline __attribute__((always_inline)) void tile(int n, const double *A, const double *B, double *C,
                                                       int acc, int i, int j, __m256i m0, __m256i m1,
                                                       const int R) {
    __m256d c0[TR], c1[TR];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) c0[r] = c1[r] = _mm256_setzero_pd();
    const double *a = A + (size_t)i * n, *b = B + j;
    for (int k = 0; k < n; k++, b += n) {
        __m256d b0 = _mm256_maskload_pd(b, m0), b1 = _mm256_maskload_pd(b + 4, m1);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256d av = _mm256_broadcast_sd(a + (size_t)r * n + k);
            c0[r] = _mm256_fmadd_pd(av, b0, c0[r]);
            c1[r] = _mm256_fmadd_pd(av, b1, c1[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        double *o = C + (size_t)(i + r) * n + j;
        if (acc) {
            c0[r] = _mm256_add_pd(_mm256_maskload_pd(o, m0), c0[r]);
            c1[r] = _mm256_add_pd(_mm256_maskload_pd(o + 4, m1), c1[r]);
        }
        _mm256_maskstore_pd(o, m0, c0[r]);
        _mm256_maskstore_pd(o + 4, m1, c1[r]);
    }
}

void vt_avx2_matmul_f64(int n, const double *A, const double *B, double *C, int acc) {
    for (int j = 0; j < n; j += TC) {
        int cols = n - j < TC ? n - j : TC;
        __m256i m0 = lanes(cols < 4 ? cols : 4), m1 = lanes(cols > 4 ? cols - 4 : 0);
        int i = 0;
        for (; i + TR <= n; i += TR) tile(n, A, B, C, acc, i, j, m0, m1, TR);
        for (; i < n; i++) tile(n, A, B, C, acc, i, j, m0, m1, 1); /* n % TR rows: none for n = 64, 32, 16, 8 */
    }
}
