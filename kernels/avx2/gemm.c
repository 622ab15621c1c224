/* avx2/gemm.c - AVX2+FMA GEMM, BLIS-style (contract in ../entries.def):
 *   C = alpha op(A) op(B) + beta C.
 *
 * The blocking loops and the L2 prefetch are ../gemm_driver.h (shared with the other
 * ISA); this file holds the tile sizes, the packing and the microkernels.
 * Loops: jc over N in NC blocks -> pc over K in equal blocks of at most KC (k_block in
 * ../gemm_driver.h) (pack op(B) block into
 * KC x NR panels) -> ic over M in MC blocks (pack op(A) block into MR x KC panels)
 * -> jr over NR columns -> ir over MR rows -> the MR x NR register microkernel
 * (MR = 6 rows x NR = 16 columns: 12 ymm accumulators, 2 ymm of B, 1 broadcast; a
 * last panel with <= 8 columns uses a 6 x 8 variant so narrow edges cost half, one with
 * <= 4 columns a turned-around kernel, kernel_narrow, with one FMA per column a step).
 * For M <= M_ONE_PASS and N > NC_ONE_PASS (the weight gradients with M < N) the K
 * blocks are outermost: all of op(A)'s K block is packed once, then op(B) in N blocks
 * of at most NC_ONE_PASS columns, so both stay in L2 (see gemm_blocked).
 * All four (ta, tb) cases are absorbed by the packing routines (the transposing ones
 * use 8 x 8 in-register transposes). Edge tiles: packing zero-pads panels to MR/NR,
 * the microkernel stores only the valid rows and columns (vt256_store: a ragged edge
 * in pieces, VMASKMOVPS stores being slow on AMD cores).
 * Latency hiding: each microkernel call prefetches at its start its own C tile (12
 * lines, which the core's outstanding-miss buffers take at once; ../TUNING.md) and its
 * share of the source of the next pack_a (and, at the end of a K
 * block, of the next pack_b; in the last block, of what the caller of gemm_prefetch
 * reads next): see prefetch_list in ../gemm_driver.h.
 * alpha and beta are applied at the store of the first K block (later K blocks add
 * with beta = 1), a bias (gemm_bias) in registers at the store of the last one
 * (kernel_6x16_bias, kernel_6x8_bias); beta == 0 never reads C. K == 0 or alpha == 0
 * gives C = beta C without reading A or B (BLAS convention).
 * Numerics: float accumulation over each KC block, blocks summed into C; error within
 * the usual K eps sum|a||b| bound, like the scalar reference (different order).
 * work: vt_avx2_gemm_work_floats(M, N, K) floats, 64-byte aligned.
 * gemm_bf16, the bf16 fma path (../kernels.h), runs the same loops with packs that round
 * op(A) and op(B) to bf16 (or widen a bf16 weight); same work space. */
#include <math.h>

#include "avx2.h"
#include "../gemm_driver.h"
#include "../gemm_tiles.h"

/* Register tile MR x NR (12 ymm accumulators). The cache blocks (KC for both ta, MC,
 * NC) and the one-pass bounds (K blocks outermost for M <= M_ONE_PASS and N >
 * ONE_PASS_MIN_N, N blocks of NC_ONE_PASS) are this CPU's context's (../gemm_context.c). */
#define MR VT_AVX2_MR
#define NR VT_AVX2_NR
#define KC (vt_gemm_ctx.avx2.kc)
#define KC_T (vt_gemm_ctx.avx2.kc_t)
#define MC (vt_gemm_ctx.avx2.mc)
#define NC (vt_gemm_ctx.avx2.nc)
#define M_ONE_PASS (vt_gemm_ctx.avx2.m_one_pass)
#define NC_ONE_PASS (vt_gemm_ctx.avx2.nc_one_pass)
#define ONE_PASS_MIN_N (vt_gemm_ctx.avx2.one_pass_min_n)
#define NARROW_NR 4 /* last panels of <= 4 columns use kernel_narrow (<= 4 FMAs a step, kernel_6x8's 6) */

/* Floats of the packed-A region: mc x kc plus 8 floats of slack, which the packs' full-vector
 * stores spill into and kernel_narrow's full-vector loads of a last step read, rounded to
 * 64 bytes so the B panels that follow stay aligned. */
static inline size_t a_floats(size_t mc, size_t kc) { return round_up(mc * kc + 8, 16); }

/* Rows of the packed A region: all of M when it may be packed in one pass, else an M
 * block (MC <= M_ONE_PASS: at most M_ONE_PASS rows, which keeps the size non-decreasing
 * in M, see ../entries.def). */
static inline size_t a_rows(int M) { return round_up((size_t)imin(M, M_ONE_PASS), MR); }

size_t vt_avx2_gemm_work_floats(int M, int N, int K) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    size_t mc = a_rows(M), kc = (size_t)imin(K, imax(KC, KC_T)); /* the longer K block */
    size_t nc = round_up((size_t)imin(N, NC), NR);
    return a_floats(mc, kc) + kc * nc;
}

/* In-register transpose of 8 rows of 8 floats: r[j][i] <- r[i][j]. */
static inline __attribute__((always_inline)) void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
#pragma GCC unroll 8
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* How a packing routine reads its source: float32 as it is (SRC_F32), float32 rounded to
 * bf16 and widened back (SRC_ROUND), bf16 widened (SRC_BF16); the last two are the bf16
 * fma path's packing (kernels.h: bf16 product paths). */
enum { SRC_F32, SRC_ROUND, SRC_BF16 };

/* The first min(n, 8) elements of src (float32, or bf16 for SRC_BF16) from element `at`,
 * as float32 lanes (zero past n, memory past n not read). */
static inline __attribute__((always_inline)) __m256 load_src(const void *src, size_t at, size_t n, const int kind) {
    if (kind == SRC_BF16) return vt256_load_bf16(n, (const vt_bf16 *)src + at);
    __m256 x = vt256_load(n, (const float *)src + at);
    return kind == SRC_ROUND ? _mm256_castsi256_ps(vt256_bf16_rounded(x)) : x;
}

/* Transposing copy: `rows` (<= 8) source rows of kc elements (from element `at` of src,
 * row stride ld; read as `kind` says) become kc destination vectors (lanes >= rows zero)
 * at dst + k * dstride. Each store writes all 8 lanes: with dstride < 8 (A panels) the
 * extra lanes are overwritten by the next store, and the last one spills 8 - dstride
 * floats past the panel (the work space has that slack). */
static inline __attribute__((always_inline)) void pack_transposed(const void *src, size_t at, size_t ld, int rows,
                                                                  int kc, float *dst, int dstride, const int kind) {
    __m256 r[8];
    int k0 = 0;
    for (; k0 + 8 <= kc; k0 += 8) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            r[i] = i < rows ? load_src(src, at + (size_t)i * ld + k0, 8, kind) : _mm256_setzero_ps();
        transpose8(r);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) _mm256_storeu_ps(dst + (size_t)(k0 + j) * dstride, r[j]);
    }
    if (k0 < kc) {
        int kk = kc - k0;

        float tmp[8 * 8] __attribute__((aligned(32)));
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            r[i] = i < rows ? load_src(src, at + (size_t)i * ld + k0, (size_t)kk, kind) : _mm256_setzero_ps();
        transpose8(r);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) _mm256_store_ps(tmp + 8 * j, r[j]);
        for (int j = 0; j < kk; j++)
            _mm256_storeu_ps(dst + (size_t)(k0 + j) * dstride, _mm256_load_ps(tmp + 8 * j));
    }
}

/* Pack the mc x kc block of op(A) at (i0, p0) into MR-row panels: panel q holds
 * dst[q MR kc + k MR + i] = op(A)[i0 + q MR + i][p0 + k], zero for rows past mc; A read
 * as `kind` says (SRC_F32, SRC_ROUND). */
static inline __attribute__((always_inline)) void pack_a_src(int ta, const float *A, int lda, int i0, int p0, int mc,
                                                             int kc, float *dst, const int kind) {
    for (int ir = 0; ir < mc; ir += MR) {
        int rows = imin(MR, mc - ir);
        float *d = dst + (size_t)ir * kc;
        if (ta) {
            size_t s = (size_t)p0 * lda + i0 + ir;
            /* a whole panel whose 8 floats from s are op(A) rows of this block (ir + 8 <= mc)
             * takes plain loads (masked ones are slow on AMD cores); lanes 6 and 7 land in
             * the store's spill, which the next store (or panel) overwrites */
            size_t n = ir + 8 <= mc ? 8 : (size_t)rows;
            for (int k = 0; k < kc; k++)
                _mm256_storeu_ps(d + (size_t)k * MR, load_src(A, s + (size_t)k * lda, n, kind));
        } else {
            pack_transposed(A, (size_t)(i0 + ir) * lda + p0, (size_t)lda, rows, kc, d, MR, kind);
        }
    }
}

/* Pack the kc x nc block of op(B) at (p0, j0) into NR-column panels: panel q holds
 * dst[q NR kc + k NR + j] = op(B)[p0 + k][j0 + q NR + j], zero for columns past nc; B
 * (float32, or bf16 for SRC_BF16) read as `kind` says. */
static inline __attribute__((always_inline)) void pack_b_src(int tb, const void *B, int ldb, int p0, int j0, int kc,
                                                             int nc, float *dst, const int kind) {
    for (int jr = 0; jr < nc; jr += NR) {
        int cols = imin(NR, nc - jr);
        float *d = dst + (size_t)jr * kc;
        if (!tb) {
            size_t m0 = (size_t)cols, m1 = (size_t)(cols > 8 ? cols - 8 : 0);
            size_t s = (size_t)p0 * ldb + j0 + jr;
            for (int k = 0; k < kc; k++) {
                size_t sk = s + (size_t)k * ldb;
                _mm256_store_ps(d + (size_t)k * NR, load_src(B, sk, m0, kind));
                _mm256_store_ps(d + (size_t)k * NR + 8, load_src(B, sk + 8, m1, kind));
            }
        } else {
            size_t s = (size_t)(j0 + jr) * ldb + p0;
            pack_transposed(B, s, (size_t)ldb, imin(8, cols), kc, d, NR, kind);
            pack_transposed(B, s + (size_t)8 * ldb, (size_t)ldb, cols > 8 ? cols - 8 : 0, kc, d + 8, NR, kind);
        }
    }
}

static void pack_a(int ta, const float *A, int lda, int i0, int p0, int mc, int kc, float *dst) {
    pack_a_src(ta, A, lda, i0, p0, mc, kc, dst, SRC_F32);
}
static void pack_b(int tb, const float *B, int ldb, int p0, int j0, int kc, int nc, float *dst) {
    pack_b_src(tb, B, ldb, p0, j0, kc, nc, dst, SRC_F32);
}
/* The bf16 fma path's packs: rounded float32 operands, widened bf16 B. */
static void pack_a_round(int ta, const float *A, int lda, int i0, int p0, int mc, int kc, float *dst) {
    pack_a_src(ta, A, lda, i0, p0, mc, kc, dst, SRC_ROUND);
}
static void pack_b_round(int tb, const float *B, int ldb, int p0, int j0, int kc, int nc, float *dst) {
    pack_b_src(tb, B, ldb, p0, j0, kc, nc, dst, SRC_ROUND);
}
static void pack_b16(int tb, const vt_bf16 *B, int ldb, int p0, int j0, int kc, int nc, float *dst) {
    pack_b_src(tb, B, ldb, p0, j0, kc, nc, dst, SRC_BF16);
}

#define ROW_FMA(i)                                   \
    do {                                             \
        __m256 a_ = _mm256_broadcast_ss(a + (i));    \
        c##i##0 = _mm256_fmadd_ps(a_, b0, c##i##0); \
        c##i##1 = _mm256_fmadd_ps(a_, b1, c##i##1); \
    } while (0)

#define ROW_STORE(i)                                                                   \
    do {                                                                               \
        if (i < mr) {                                                                  \
            float *cr = c + (size_t)(i) * ldc;                                         \
            __m256 x0 = _mm256_mul_ps(c##i##0, va), x1 = _mm256_mul_ps(c##i##1, va);  \
            if (beta != 0.0f) {                                                        \
                x0 = _mm256_fmadd_ps(vb, vt256_load(k0, cr), x0);                     \
                x1 = _mm256_fmadd_ps(vb, vt256_load(k1, cr + 8), x1);                 \
            }                                                                          \
            if (bias) {                                                                \
                x0 = _mm256_add_ps(x0, bias0);                                         \
                x1 = _mm256_add_ps(x1, bias1);                                         \
            }                                                                          \
            vt256_store(k0, cr, x0);                                                   \
            vt256_store(k1, cr + 8, x1);                                               \
        }                                                                              \
    } while (0)

/* c[0:mr, 0:nr] = alpha * (a panel) (b panel) + beta * c (beta == 0: c not read), + bias[0:nr]
 * on every row when bias is not NULL (a constant in each caller). */
static inline __attribute__((always_inline)) void kernel_6x16_body(int kc, const float *a, const float *b, float *c,
                                                                   int ldc, int mr, int nr, float alpha, float beta,
                                                                   const float *bias, const prefetch_list *pf) {
    prefetch_all(pf);
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int i = 0; i < mr; i++) { /* the C tile arrives while the FMAs run */
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + nr - 1), _MM_HINT_T0);
    }
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
        ROW_FMA(0); ROW_FMA(1); ROW_FMA(2); ROW_FMA(3); ROW_FMA(4); ROW_FMA(5);
        a += MR;
        b += NR;
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    const size_t k0 = (size_t)nr, k1 = (size_t)(nr > 8 ? nr - 8 : 0);
    const __m256 none = _mm256_setzero_ps(); /* bias0, bias1 when there is no bias (unused) */
    const __m256 bias0 = bias ? vt256_load(k0, bias) : none, bias1 = bias && k1 ? vt256_load(k1, bias + 8) : none;
    ROW_STORE(0); ROW_STORE(1); ROW_STORE(2); ROW_STORE(3); ROW_STORE(4); ROW_STORE(5);
}

/* name (a gemm_micro_fn) and name_bias (its gemm_micro_bias_fn) from name_body. */
#define KERNEL_AND_BIAS_VARIANT(name)                                                                         \
    static void name(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr, float alpha,  \
                     float beta, const prefetch_list *pf) {                                                   \
        name##_body(kc, a, b, c, ldc, mr, nr, alpha, beta, NULL, pf);                                         \
    }                                                                                                         \
    static void name##_bias(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,        \
                            float alpha, float beta, const float *bias, const prefetch_list *pf) {            \
        name##_body(kc, a, b, c, ldc, mr, nr, alpha, beta, bias, pf);                                         \
    }
KERNEL_AND_BIAS_VARIANT(kernel_6x16)

#define ROW_FMA_HALF(i) c##i##0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + (i)), b0, c##i##0)

#define ROW_STORE_HALF(i)                                                              \
    do {                                                                               \
        if (i < mr) {                                                                  \
            float *cr = c + (size_t)(i) * ldc;                                         \
            __m256 x0 = _mm256_mul_ps(c##i##0, va);                                    \
            if (beta != 0.0f) x0 = _mm256_fmadd_ps(vb, vt256_load(k0, cr), x0);        \
            if (bias) x0 = _mm256_add_ps(x0, bias0);                                   \
            vt256_store(k0, cr, x0);                                                   \
        }                                                                              \
    } while (0)

/* The same for a last panel with nr <= 8: only the first 8 columns of the (16-wide)
 * B panel are used, halving the work of a narrow edge. */
static inline __attribute__((always_inline)) void kernel_6x8_body(int kc, const float *a, const float *b, float *c,
                                                                  int ldc, int mr, int nr, float alpha, float beta,
                                                                  const float *bias, const prefetch_list *pf) {
    prefetch_all(pf);
    __m256 c00 = _mm256_setzero_ps(), c10 = c00, c20 = c00, c30 = c00, c40 = c00, c50 = c00;
    for (int i = 0; i < mr; i++) _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(b);
        ROW_FMA_HALF(0); ROW_FMA_HALF(1); ROW_FMA_HALF(2); ROW_FMA_HALF(3); ROW_FMA_HALF(4);
        ROW_FMA_HALF(5);
        a += MR;
        b += NR;
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    const size_t k0 = (size_t)nr;
    const __m256 bias0 = bias ? vt256_load(k0, bias) : _mm256_setzero_ps(); /* unused without a bias */
    ROW_STORE_HALF(0); ROW_STORE_HALF(1); ROW_STORE_HALF(2); ROW_STORE_HALF(3); ROW_STORE_HALF(4);
    ROW_STORE_HALF(5);
}

KERNEL_AND_BIAS_VARIANT(kernel_6x8)

/* A last panel of nr = n <= NARROW_NR columns, turned around: the MR rows of a packed A
 * step in the lanes of one vector (its lanes 6 and 7, the next step's first rows or the
 * work space's spill, are computed and never stored), one FMA per column per step
 * where kernel_6x8 takes MR (65 = 4 x 16 + 1 tokens leave a 1-column panel in
 * attention's products). The same FMA chain per element as kernel_6x8, so the same bits.
 * n is a constant in each caller. */
static inline __attribute__((always_inline)) void kernel_narrow_n(int kc, const float *a, const float *b, float *c,
                                                                  int ldc, int mr, float alpha, float beta,
                                                                  const prefetch_list *pf, const int n) {
    prefetch_all(pf);
    __m256 e[NARROW_NR];
#pragma GCC unroll 4
    for (int j = 0; j < n; j++) e[j] = _mm256_setzero_ps();
    for (int k = 0; k < kc; k++) {
        __m256 a0 = _mm256_loadu_ps(a);
#pragma GCC unroll 4
        for (int j = 0; j < n; j++) e[j] = _mm256_fmadd_ps(a0, _mm256_broadcast_ss(b + j), e[j]);
        a += MR;
        b += NR;
    }
    float col[8] __attribute__((aligned(32)));
#pragma GCC unroll 4
    for (int j = 0; j < n; j++) {
        _mm256_store_ps(col, _mm256_mul_ps(e[j], _mm256_set1_ps(alpha)));
        for (int i = 0; i < mr; i++) {
            float *ci = c + (size_t)i * ldc + j;
            *ci = beta != 0.0f ? fmaf(beta, *ci, col[i]) : col[i];
        }
    }
}

static void kernel_narrow(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr, float alpha,
                          float beta, const prefetch_list *pf) {
    switch (nr) {
    case 1: kernel_narrow_n(kc, a, b, c, ldc, mr, alpha, beta, pf, 1); break;
    case 2: kernel_narrow_n(kc, a, b, c, ldc, mr, alpha, beta, pf, 2); break;
    case 3: kernel_narrow_n(kc, a, b, c, ldc, mr, alpha, beta, pf, 3); break;
    default: kernel_narrow_n(kc, a, b, c, ldc, mr, alpha, beta, pf, 4); break;
    }
}

/* c[0:mr, 0:nr] += bias[0:nr] on every row (gemm_bias_fn; nr <= N). */
static void add_bias(float *c, int ldc, int mr, int nr, const float *bias) {
    for (int j = 0; j < nr; j += 8) {
        size_t k = (size_t)(nr - j);
        __m256 b = vt256_load(k, bias + j);
        for (int i = 0; i < mr; i++) {
            float *cr = c + (size_t)i * ldc + j;
            vt256_store(k, cr, _mm256_add_ps(vt256_load(k, cr), b));
        }
    }
}

/* p[0:m] += rows [0, rows) of a, each column's adds in row order (gemm_sum_rows_fn): 32
 * columns at a time, four independent sums in flight. */
static void sum_rows(float *p, const float *a, size_t lda, int m, int rows) {
    int j = 0;
    for (; j + 32 <= m; j += 32) {
        __m256 s0 = _mm256_loadu_ps(p + j), s1 = _mm256_loadu_ps(p + j + 8), s2 = _mm256_loadu_ps(p + j + 16),
               s3 = _mm256_loadu_ps(p + j + 24);
        for (int r = 0; r < rows; r++) {
            const float *ar = a + (size_t)r * lda + j;
            s0 = _mm256_add_ps(s0, _mm256_loadu_ps(ar));
            s1 = _mm256_add_ps(s1, _mm256_loadu_ps(ar + 8));
            s2 = _mm256_add_ps(s2, _mm256_loadu_ps(ar + 16));
            s3 = _mm256_add_ps(s3, _mm256_loadu_ps(ar + 24));
        }
        _mm256_storeu_ps(p + j, s0);
        _mm256_storeu_ps(p + j + 8, s1);
        _mm256_storeu_ps(p + j + 16, s2);
        _mm256_storeu_ps(p + j + 24, s3);
    }
    for (; j < m; j += 8) {
        size_t k = (size_t)(m - j);
        __m256 s = vt256_load(k, p + j);
        for (int r = 0; r < rows; r++) s = _mm256_add_ps(s, vt256_load(k, a + (size_t)r * lda + j));
        vt256_store(k, p + j, s);
    }
}

/* C = beta C (+ bias rows) over M x N (beta == 0: C = 0 without reading it). */
static void scale_c(int M, int N, float beta, const float *bias, float *C, int ldc) {
    for (int i = 0; i < M; i++) {
        float *cr = C + (size_t)i * ldc;
        for (int j = 0; j < N; j += 8) {
            size_t k = (size_t)(N - j);
            __m256 v = beta == 0.0f ? _mm256_setzero_ps()
                                    : _mm256_mul_ps(_mm256_set1_ps(beta), vt256_load(k, cr + j));
            if (bias) v = _mm256_add_ps(v, vt256_load(k, bias + j));
            vt256_store(k, cr + j, v);
        }
    }
}

/* C = alpha op(A) op(B) + beta C (+ bias), op(B) from B16 when it is not NULL, or from
 * packed, op(B) packed whole (gemm_packed_b_size; NULL: none), the last block prefetching
 * next (NULL: nothing); bf16: the operands rounded to bf16 as they are packed (the fma
 * path); cs: the column sums of gemm_sums (NULL: none). */
static void gemm_run(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     const vt_bf16 *B16, int ldb, float beta, const float *bias, float *C, int ldc, float *work,
                     const vt_region *next, int bf16, const gemm_col_sums *cs, const float *packed) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, bias, C, ldc);
        return;
    }
    /* no quarter, short-row or in-place kernels (NULL / 0: never chosen) */
    static const gemm_kernels kn = {.pack_a = pack_a, .pack_b = pack_b, .full = kernel_6x16, .half = kernel_6x8,
                                    .narrow = kernel_narrow, .add_bias = add_bias, .full_bias = kernel_6x16_bias,
                                    .half_bias = kernel_6x8_bias, .sum_rows = sum_rows};
    static const gemm_kernels kn_bf16 = {.pack_a = pack_a_round, .pack_b = pack_b_round, .pack_b16 = pack_b16,
                                         .full = kernel_6x16, .half = kernel_6x8, .narrow = kernel_narrow,
                                         .add_bias = add_bias, .full_bias = kernel_6x16_bias,
                                         .half_bias = kernel_6x8_bias, .sum_rows = sum_rows};
    gemm_blocking bl = {.mr = MR, .nr = NR, .kc = KC, .kc_t = KC_T, .mc = MC, .nc = NC, .m_one_pass = M_ONE_PASS,
                        .one_pass_min_n = ONE_PASS_MIN_N, .nc_one_pass = NC_ONE_PASS, .narrow_nr = NARROW_NR};
    float *pb = work + a_floats(a_rows(M), (size_t)imin(K, imax(KC, KC_T)));
    gemm_blocked(bl, bf16 ? &kn_bf16 : &kn, ta, tb, M, N, K, alpha, A, lda, B, bf16 ? B16 : NULL, ldb, beta, bias, C,
                 ldc, work, pb, next, cs, packed);
}

/* What the entry points (GEMM_ENTRY_POINTS) call. */
static void gemm_all(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, const vt_bf16 *B16, int ldb, float beta, const float *bias, float *C, int ldc,
                     float *work, const vt_region *next, int bf16, const gemm_col_sums *cs) {
    gemm_run(ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta, bias, C, ldc, work, next, bf16, cs, NULL);
}

GEMM_ENTRY_POINTS(avx2)

/* The blocks gemm_all walks op(B) in (entries.def: gemm_b_blocks). */
void vt_avx2_gemm_b_blocks(int ta, int N, int K, int *nc, int *kc) {
    gemm_b_blocks_of((gemm_blocking){.kc = KC, .kc_t = KC_T, .nc = NC}, ta, N, K, nc, kc);
}

/* op(B) packed for the threads of a product cut over rows (entries.def:
 * gemm_packed_b_floats): the pack_b panels of all K steps, which each row block reads in
 * place of packing op(B) again. */
size_t vt_avx2_gemm_packed_b_floats(int N, int K, int *panels) { return gemm_packed_b_size(NR, N, K, panels); }

void vt_avx2_gemm_pack_b(int tb, int N, int K, const float *B, int ldb, int p0, int p1, float *packed) {
    gemm_pack_b_panels(pack_b, NR, tb, N, K, B, ldb, p0, p1, packed);
}

void vt_avx2_gemm_packed_b(int ta, int M, int N, int K, float alpha, const float *A, int lda, const float *packed,
                           float beta, const float *bias, float *C, int ldc, float *work) {
    gemm_run(ta, 0, M, N, K, alpha, A, lda, NULL, NULL, 0, beta, bias, C, ldc, work, NULL, 0, NULL, packed);
}

/* The same for the bf16 fma path (entries.def: gemm_bf16_packed_b_floats): the float32
 * panels, op(B) rounded to bf16 (or widened from its bf16 copy) as gemm_bf16 packs it. */
size_t vt_avx2_gemm_bf16_packed_b_floats(int N, int K, int *panels) { return gemm_packed_b_size(NR, N, K, panels); }

void vt_avx2_gemm_bf16_pack_b(int tb, int N, int K, const float *B, const vt_bf16 *B16, int ldb, int p0, int p1,
                              float *packed) {
    if (!B16) {
        gemm_pack_b_panels(pack_b_round, NR, tb, N, K, B, ldb, p0, p1, packed);
        return;
    }
    int j0 = p0 * NR, j1 = imin(p1 * NR, N);
    if (j1 > j0) pack_b16(tb, B16, ldb, 0, j0, K, j1 - j0, packed + (size_t)j0 * K);
}

void vt_avx2_gemm_bf16_packed_b(int ta, int M, int N, int K, float alpha, const float *A, int lda,
                                const float *packed, float beta, const float *bias, float *C, int ldc, float *work) {
    gemm_run(ta, 0, M, N, K, alpha, A, lda, NULL, NULL, 0, beta, bias, C, ldc, work, NULL, 1, NULL, packed);
}
