/* scalar/matmul_f64.c - C = A B (+ C) for small n x n float64 matrices (contract in
 * ../entries.def; the products of src/pe/expm.c). 4 x 4 tiles of C are accumulated in locals
 * over all of k (the compiler keeps them in registers); rows and columns beyond a
 * multiple of 4 take the plain loop. Each element's sum runs over k in order, then is
 * added to C (acc), so the result does not depend on the tiling. */
#include "scalar.h"

void vt_scalar_matmul_f64(int n, const double *A, const double *B, double *C, int acc) {
    int n4 = n - n % 4;
    for (int i = 0; i < n4; i += 4) {
        for (int j = 0; j < n4; j += 4) {
            double c[4][4] = {{0}};
            for (int k = 0; k < n; k++) {
                const double *b = B + (size_t)k * n + j;
                for (int r = 0; r < 4; r++) {
                    double a = A[(size_t)(i + r) * n + k];
                    for (int q = 0; q < 4; q++) c[r][q] += a * b[q];
                }
            }
            for (int r = 0; r < 4; r++)
                for (int q = 0; q < 4; q++) {
                    double *o = C + (size_t)(i + r) * n + j + q;
                    *o = acc ? *o + c[r][q] : c[r][q];
                }
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = i < n4 ? n4 : 0; j < n; j++) {
            double s = 0.0;
            for (int k = 0; k < n; k++) s += A[(size_t)i * n + k] * B[(size_t)k * n + j];
            double *o = C + (size_t)i * n + j;
            *o = acc ? *o + s : s;
        }
}
