/* kernels.h - the SIMD primitives: the only kernel header the rest of vitrain uses.
 *
 * Kernels see raw pointers and sizes only: no tensors, no tape, no allocation, no
 * threads, no printing. Every entry exists as scalar C in kernels/scalar/ (the
 * specification); kernels/avx2/ and kernels/avx512/ override entries. At start-up
 * vt_kernels_init() probes CPUID/XGETBV, fills the table scalar-first and overrides
 * by level; VT_ISA=scalar|avx2|avx512 forces a level (an error if the CPU lacks it).
 *
 * Conventions: float32, row-major. Fast kernels match scalar within
 * |fast - ref| <= atol + rtol |ref| (tests/test_kernels.c states the tolerances).
 * "accumulates" means the kernel does out += ..., never out = ... .
 */
#ifndef VT_KERNELS_H
#define VT_KERNELS_H

#include <stddef.h>

typedef enum { VT_ISA_SCALAR = 0, VT_ISA_AVX2 = 1, VT_ISA_AVX512 = 2 } vt_isa;

/* A rows x len block of floats at base, row stride ld floats (rows == 0: none). */
typedef struct {
    const float *base;
    size_t ld;
    int rows, len;
} vt_region;

typedef struct vt_kernels {
    vt_isa isa;
    const char *name; /* "scalar", "avx2", "avx512" ("avx512-emulated" in the SIMDe test build) */

    /* C = alpha * op(A) op(B) + beta * C. op(A) is M x K, op(B) is K x N, C is M x N.
     * ta: 0 -> A is M x K with row stride lda; 1 -> A is K x M (op(A) = A^T).
     * tb: 0 -> B is K x N with row stride ldb; 1 -> B is N x K (op(B) = B^T).
     * beta == 0: C is not read (NaN/garbage in C does not propagate).
     * work: at least gemm_work_floats(M, N, K) floats, 64-byte aligned (packing space);
     * gemm_work_floats never decreases when M, N or K grows, so one workspace sized for
     * the largest of several calls serves them all. */
    void (*gemm)(int ta, int tb, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc, float *work);
    /* The same with bias (N floats; NULL: none) added to every row of C last:
     * C = (alpha op(A) op(B) + beta C) + bias, bitwise gemm followed by adding bias to
     * each row (the add fused into the GEMM's passes over C tiles, so C is not read
     * again). Same work space as gemm. */
    void (*gemm_bias)(int ta, int tb, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb,
                      float beta, const float *bias, float *C, int ldc, float *work);
    /* gemm, bitwise, which also brings next[0] and next[1] (what the caller reads right
     * after it) into the L2 cache, a few lines per microkernel call over the product's
     * last cache block: for chains of small products whose next operands come from
     * memory, attention's per (batch, head) ones (83.9 -> 91.1 GFLOP/s at 197 tokens,
     * 1 thread, Zen 4).
     * A hint only: it reads nothing of next and changes no result; the scalar level
     * ignores it. */
    void (*gemm_prefetch)(int ta, int tb, int M, int N, int K, float alpha,
                          const float *A, int lda, const float *B, int ldb,
                          float beta, float *C, int ldc, float *work, const vt_region next[2]);
    size_t (*gemm_work_floats)(int M, int N, int K);

    /* y[r, :] = softmax(scale * x[r, :]) for rows x cols; max-subtracted. y may equal x. */
    void (*softmax_rows)(const float *x, float *y, int rows, int cols, float scale);
    /* dx[r, :] = y * (dy - sum(dy * y)) (gradient w.r.t. the softmax input, before any
     * scale); overwrites dx. dx may equal dy. */
    void (*softmax_bwd_rows)(const float *y, const float *dy, float *dx, int rows, int cols);

    /* Per row: mean, rstd = 1/sqrt(var + eps) (biased variance, two-pass),
     * y = (x - mean) * rstd * g + b. mean/rstd: rows floats (saved for backward). */
    void (*layernorm_fwd)(const float *x, const float *g, const float *b, float *y,
                          float *mean, float *rstd, int rows, int D, float eps);
    /* Accumulates dx (+=); accumulates dg, db (+=, summed over rows) when non-NULL. */
    void (*layernorm_bwd)(const float *dy, const float *x, const float *g,
                          const float *mean, const float *rstd,
                          float *dx, float *dg, float *db, int rows, int D);

    /* Exact GELU: y = x * 0.5 * (1 + erf(x / sqrt(2))). SIMD erf error bound in
     * tests/test_kernels.c. */
    void (*gelu_fwd)(const float *x, float *y, size_t n);
    /* dx += dy * (Phi(x) + x * phi(x)), Phi/phi the standard normal cdf/pdf. */
    void (*gelu_bwd)(const float *x, const float *dy, float *dx, size_t n);
    /* Both in one pass sharing the erf (vt_op_gelu_linear's backward): with g = dy on
     * entry, dx += g (Phi(x) + x phi(x)) (add 0: dx = that, dx not read), then g = gelu(x);
     * bitwise what gelu_bwd(x, g, dx) (into zeros for add 0, but for the sign of a zero)
     * followed by gelu_fwd(x, g) give. */
    void (*gelu_bwd_fwd)(const float *x, float *g, float *dx, size_t n, int add);

    void (*add)(const float *a, const float *b, float *y, size_t n); /* y = a + b */
    void (*scale)(float *x, float s, size_t n);                      /* x *= s */
    /* x[0:n] = 0 with stores that bypass the caches where the ISA has them: for regions
     * far larger than the caches that are not read again soon (the grad scopes'
     * zeroing; ~1.8x memset's rate on a Sapphire Rapids class Xeon). */
    void (*zero_stream)(float *x, size_t n);
    /* y[0:n] = x[0:n] (no overlap) with the same cache-bypassing stores: for a result
     * kept in memory for much later while a cached copy is used now (attention's kept
     * probabilities: writing them in place made the q k^T product read every line of
     * them from memory first, ~20% of its time at 197 tokens). */
    void (*copy_stream)(const float *x, float *y, size_t n);
    void (*axpy)(float a, const float *x, float *y, size_t n);       /* y += a x */
    /* Sums accumulate in double inside each kernel call. */
    double (*sum)(const float *x, size_t n);
    double (*dot)(const float *x, const float *y, size_t n);
    /* The largest of x[0:n], n >= 1 (x free of NaN; of a -0 and a +0, either). */
    float (*max)(const float *x, size_t n);

    /* The pair rotation of one token row (position-encodings.md section 1), r its npr
     * (cos, sin) pairs (c, s): y[2q] = x[2q] c - x[2q+1] s, y[2q+1] = x[2q] s + x[2q+1] c
     * for q < npr; channels 2 npr <= i < n copied. Backward to the row, accumulating:
     * dx[2q] += dy[2q] c + dy[2q+1] s, dx[2q+1] += dy[2q+1] c - dy[2q] s, channels past
     * 2 npr dx += dy; to the pairs: dcs[2q] += x[2q] dy[2q] + x[2q+1] dy[2q+1],
     * dcs[2q+1] += x[2q] dy[2q+1] - x[2q+1] dy[2q]. Exact: every level evaluates these
     * expressions with the same IEEE operations (no FMA). */
    void (*rot_pairs)(const float *x, const float *r, size_t npr, size_t n, float *y);
    void (*rot_pairs_bwd)(const float *dy, const float *r, size_t npr, size_t n, float *dx);
    void (*rot_pairs_bwd_cs)(const float *x, const float *dy, size_t npr, float *dcs);

    /* C = A B (+ C when acc) for n x n row-major float64 matrices, n >= 1; C must not
     * alias A or B (src/pe/expm.c: LieRE's matrix exponentials). Each element's sum runs
     * over k in order; levels differ by rounding (FMA) within n 2^-53 sum_k |a b|. */
    void (*matmul_f64)(int n, const double *A, const double *B, double *C, int acc);

    /* Performer's positive (FAVOR+) feature map (src/ops/performer.c), per row:
     * y = c (e^(x - t) + eps); y may equal x. SIMD exp error bound as softmax's. */
    void (*feature_exp)(const float *x, float *y, size_t n, float t, float c, float eps);
    /* Its backward: d[i] *= p[i] - ce, in float; returns the sum of the new d[0:n],
     * accumulated in double. */
    double (*feature_grad)(float *d, const float *p, float ce, size_t n);

    /* AdamW, PyTorch semantics (decoupled decay):
     *   p -= lr * wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
     *   p -= lr * (m / bc1) / (sqrt(v / bc2) + eps)
     * with bc1 = 1 - b1^t, bc2 = 1 - b2^t computed by the caller. */
    void (*adamw)(float *p, const float *g, float *m, float *v, size_t n,
                  float lr, float b1, float b2, float eps, float wd, float bc1, float bc2);
} vt_kernels;

/* The active table (valid after vt_kernels_init). */
extern vt_kernels vt_k;

/* Probe the CPU, honour VT_ISA, fill vt_k. Returns 0, or -1 with a message in
 * err (VT_ISA unknown or not supported by this CPU/OS). Idempotent. */
int vt_kernels_init(char *err, size_t errlen);
/* Highest level this CPU and OS support. */
vt_isa vt_kernels_best_isa(void);
/* Fill t with the table for a given level (for tests comparing levels);
 * returns -1 if the CPU lacks it. */
int vt_kernels_table(vt_isa isa, vt_kernels *t);

/* Per-ISA override hooks (each ISA directory defines its own). */
void vt_kernels_fill_scalar(vt_kernels *t);
void vt_kernels_fill_avx2(vt_kernels *t);
void vt_kernels_fill_avx512(vt_kernels *t);

#endif
