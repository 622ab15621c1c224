/* avx512/matmul_f64.c - C = A B (+ C) for small n x n float64 matrices (contract in
 * ../entries.def; the products of src/pe/expm.c, LieRE's matrix exponentials).
 * Register tiles of 8 rows x 16 columns (16 zmm accumulators of 8 doubles): per
 * step k two vectors of B's row k, one broadcast of A per row, 16 FMAs; a last column
 * tile of fewer than 16 columns is masked, rows past a multiple of 8 go one at a time. Each
 * element's sum runs over k in order, as in the reference, then is added to C (acc);
 * the FMAs do not round each product, so results differ from the reference's by
 * rounding only (n 2^-53 sum |a b| at most). */
#include "avx512.h"

#define TR 8  /* rows of a register tile */
#define TC 16 /* columns: two vectors of 8 doubles */

/* The R x 16 tile of C at (i, j), its columns masked by m0 and m1. */
static inline __attribute__((always_inline)) void tile(int n, const double *A, const double *B, double *C,
                                                       int acc, int i, int j, __mmask8 m0, __mmask8 m1,
                                                       const int R) {
    __m512d c0[TR], c1[TR];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) c0[r] = c1[r] = _mm512_setzero_pd();
    const double *a = A + (size_t)i * n, *b = B + j;
    for (int k = 0; k < n; k++, b += n) {
        __m512d b0 = _mm512_maskz_loadu_pd(m0, b), b1 = _mm512_maskz_loadu_pd(m1, b + 8);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512d av = _mm512_set1_pd(a[(size_t)r * n + k]);
            c0[r] = _mm512_fmadd_pd(av, b0, c0[r]);
            c1[r] = _mm512_fmadd_pd(av, b1, c1[r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        double *o = C + (size_t)(i + r) * n + j;
        if (acc) {
            c0[r] = _mm512_add_pd(_mm512_maskz_loadu_pd(m0, o), c0[r]);
            c1[r] = _mm512_add_pd(_mm512_maskz_loadu_pd(m1, o + 8), c1[r]);
        }
        _mm512_mask_storeu_pd(o, m0, c0[r]);
        _mm512_mask_storeu_pd(o + 8, m1, c1[r]);
    }
}

void vt_avx512_matmul_f64(int n, const double *A, const double *B, double *C, int acc) {
    for (int j = 0; j < n; j += TC) {
        int cols = n - j < TC ? n - j : TC;
        __mmask8 m0 = (__mmask8)((1u << (cols < 8 ? cols : 8)) - 1u);
        __mmask8 m1 = (__mmask8)((1u << (cols > 8 ? cols - 8 : 0)) - 1u);
        int i = 0;
        for (; i + TR <= n; i += TR) tile(n, A, B, C, acc, i, j, m0, m1, TR);
        for (; i < n; i++) tile(n, A, B, C, acc, i, j, m0, m1, 1); /* n % TR rows: none for n = 64, 32, 16, 8 */
    }
}
