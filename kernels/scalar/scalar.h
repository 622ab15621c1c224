/* scalar/scalar.h - declarations of the scalar reference kernels (see kernels.h for
 * each entry's contract). Private to kernels/. */
#ifndef VT_KERNELS_SCALAR_H
#define VT_KERNELS_SCALAR_H

#include <stddef.h>

#include "../kernels.h"

void vt_scalar_gemm_bias(int ta, int tb, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb,
                         float beta, const float *bias, float *C, int ldc, float *work);
void vt_scalar_gemm(int ta, int tb, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc, float *work);
void vt_scalar_gemm_prefetch(int ta, int tb, int M, int N, int K, float alpha,
                             const float *A, int lda, const float *B, int ldb,
                             float beta, float *C, int ldc, float *work, const vt_region next[2]);
size_t vt_scalar_gemm_work_floats(int M, int N, int K);
void vt_scalar_softmax_rows(const float *x, float *y, int rows, int cols, float scale);
void vt_scalar_softmax_bwd_rows(const float *y, const float *dy, float *dx, int rows, int cols);
void vt_scalar_layernorm_fwd(const float *x, const float *g, const float *b, float *y,
                             float *mean, float *rstd, int rows, int D, float eps);
void vt_scalar_layernorm_bwd(const float *dy, const float *x, const float *g,
                             const float *mean, const float *rstd,
                             float *dx, float *dg, float *db, int rows, int D);
void vt_scalar_gelu_fwd(const float *x, float *y, size_t n);
void vt_scalar_gelu_bwd(const float *x, const float *dy, float *dx, size_t n);
void vt_scalar_gelu_bwd_fwd(const float *x, float *g, float *dx, size_t n, int add);
void vt_scalar_add(const float *a, const float *b, float *y, size_t n);
void vt_scalar_scale(float *x, float s, size_t n);
void vt_scalar_zero_stream(float *x, size_t n);
void vt_scalar_copy_stream(const float *x, float *y, size_t n);
void vt_scalar_axpy(float a, const float *x, float *y, size_t n);
double vt_scalar_sum(const float *x, size_t n);
double vt_scalar_dot(const float *x, const float *y, size_t n);
float vt_scalar_max(const float *x, size_t n);
void vt_scalar_rot_pairs(const float *x, const float *r, size_t npr, size_t n, float *y);
void vt_scalar_rot_pairs_bwd(const float *dy, const float *r, size_t npr, size_t n, float *dx);
void vt_scalar_rot_pairs_bwd_cs(const float *x, const float *dy, size_t npr, float *dcs);
void vt_scalar_matmul_f64(int n, const double *A, const double *B, double *C, int acc);
void vt_scalar_feature_exp(const float *x, float *y, size_t n, float t, float c, float eps);
double vt_scalar_feature_grad(float *d, const float *p, float ce, size_t n);
void vt_scalar_adamw(float *p, const float *g, float *m, float *v, size_t n,
                     float lr, float b1, float b2, float eps, float wd, float bc1, float bc2);

#endif
