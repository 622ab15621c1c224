/* avx512/gemm.c - AVX-512 GEMM, BLIS-style (contract in ../entries.def):
 *   C = alpha op(A) op(B) + beta C.
 *
 * The blocking loops and the L2 prefetch are ../gemm_driver.h (shared with the other
 * ISA); this file holds the tile sizes, the packing and the microkernels.
 * Loops: jc over N in NC blocks -> pc over K in equal blocks of at most KC (KC_T for
 * ta = 1; k_block) (pack op(B) block into KC x NR panels) -> ic over M in MC blocks
 * (pack op(A) block into MR x KC panels) -> jr over NR columns -> ir over MR rows -> the
 * MR x NR register microkernel (MR = 14 rows x NR = 32 columns: 28 zmm accumulators,
 * 2 zmm of B, broadcasts of A). Last panels: <= 4 rows use a 4 x 32 variant, 5-12 rows
 * (and more than 16 columns) an mr x 32 variant, <= 4 columns the turned-around
 * kernel_14xn, <= 8 columns a 14 x 8 variant in 256-bit registers, <= 16 columns a
 * 14 x 16 one, so short and narrow edges cost less than a whole tile.
 * For M <= M_ONE_PASS and N > ONE_PASS_MIN_N (the weight gradients with M < N) the K
 * blocks are outermost: all of op(A)'s K block is packed once, then op(B) in N blocks
 * of at most NC_ONE_PASS columns, so both stay in L2 (see gemm_blocked).
 * All four (ta, tb) cases are absorbed by the packing routines (the transposing ones
 * use 16 x 16 in-register transposes); for N <= 64, and when A has at least
 * INPLACE_ROWS_MIN_A floats for N <= 1536 (ta = 0) or N <= 768 (ta = 1) outside the
 * one-pass order, the whole 14-row panels of op(A) are read in place instead
 * (kernel_14x32_inplace, see gemm_blocked; ta = 0 only when the row stride does not
 * put the 14 rows in few L1 sets).
 * With tb = 0, op(B) is not packed in a pass of its own: the first call on each B panel
 * of more than 16 columns (a whole 14-row one) reads it from its source and stores the
 * packed panel beside its FMAs (kernel_14x32_pack_b, kernel_14x32_inplace_pack_b; see
 * gemm_blocked).
 * Edge tiles: packing zero-pads panels to MR/NR, the microkernel stores only the valid
 * rows, with masked column stores.
 * Latency hiding: each microkernel call prefetches into L2, a line every 2 steps of its
 * loop, the next call's C tile and its share of the source of the next pack_a (and, at
 * the end of a K block, of the next pack_b; in the last block, of what the caller of
 * gemm_prefetch reads next): see prefetch_list in ../gemm_driver.h.
 * alpha and beta are applied at the store of the first K block (later K blocks add
 * with beta = 1); beta == 0 never reads C. K == 0 or alpha == 0 gives C = beta C
 * without reading A or B (BLAS convention).
 * Numerics: float accumulation over each KC block, blocks summed into C; error within
 * the usual K eps sum|a||b| bound, like the scalar reference (different order).
 * work: vt_avx512_gemm_work_floats(M, N, K) floats, 64-byte aligned.
 * Why the constants and variants are what they are (measurements, CPUs, dead ends):
 * ../TUNING.md. */
#include <math.h>

#include "avx512.h"
#include "../gemm_driver.h"
#include "../gemm_tiles.h"

/* Register tile MR x NR: 28 accumulators + 2 B vectors + a broadcast fill the 32 zmm. */
#define MR VT_AVX512_MR
#define NR VT_AVX512_NR
/* The cache blocks (KC, KC_T, MC, NC) and the one-pass bounds (M_ONE_PASS, NC_ONE_PASS,
 * ONE_PASS_MIN_N) are this CPU's context's (../gemm_context.c). */
#define KC (vt_gemm_ctx.avx512.kc)
#define KC_T (vt_gemm_ctx.avx512.kc_t)
#define MC (vt_gemm_ctx.avx512.mc)
#define NC (vt_gemm_ctx.avx512.nc)
#define M_ONE_PASS (vt_gemm_ctx.avx512.m_one_pass)
#define NC_ONE_PASS (vt_gemm_ctx.avx512.nc_one_pass)
#define ONE_PASS_MIN_N (vt_gemm_ctx.avx512.one_pass_min_n)
#define SHORT_MR 4 /* last panels of <= 4 rows use kernel_short_x32 with 4-row FMAs, */
#define SHORT_FULL_MR 12 /* and those of <= 12 rows with more than 16 columns */
#define NARROW_NR 4 /* last panels of <= 4 columns use kernel_14xn */
/* A (N <= 1536 with ta = 0, N <= 768 with ta = 1) of at least this many floats is read
 * in place: a smaller one is packed from cache at little cost and reads faster packed. */
#define INPLACE_ROWS_MIN_A ((size_t)1 << 16)

/* Floats of the packed-A region: mc x kc rounded to 64 bytes so the B panels that
 * follow stay aligned. */
static inline size_t a_floats(size_t mc, size_t kc) { return round_up(mc * kc, 16); }

/* Rows of the packed A region: all of M when it may be packed in one pass, else an M
 * block (MC <= M_ONE_PASS: at most M_ONE_PASS rows, which keeps the size non-decreasing
 * in M, see ../entries.def). */
static inline size_t a_rows(int M) { return round_up((size_t)imin(M, M_ONE_PASS), MR); }

size_t vt_avx512_gemm_work_floats(int M, int N, int K) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    size_t mc = a_rows(M), kc = (size_t)imin(K, imax(KC, KC_T)); /* the longer K block */
    size_t nc = round_up((size_t)imin(N, NC), NR);
    return a_floats(mc, kc) + kc * nc;
}

/* Transposing copy: `rows` (<= 16) source rows of kc floats (row stride ld) become kc
 * destination vectors (lanes >= rows zero) stored under wmask at dst + k * dstride. */
static void pack_transposed(const float *src, size_t ld, int rows, int kc, float *dst,
                            int dstride, __mmask16 wmask) {
    __m512 r[16];
    int k0 = 0;
    for (; k0 + 16 <= kc; k0 += 16) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_loadu_ps(src + (size_t)i * ld + k0) : _mm512_setzero_ps();
        vt512_transpose16(r);
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) _mm512_mask_storeu_ps(dst + (size_t)(k0 + j) * dstride, wmask, r[j]);
    }
    if (k0 < kc) {
        int kk = kc - k0;
        __mmask16 km = vt512_tail((size_t)kk);
        float tmp[16 * 16] __attribute__((aligned(64)));
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            r[i] = i < rows ? _mm512_maskz_loadu_ps(km, src + (size_t)i * ld + k0) : _mm512_setzero_ps();
        vt512_transpose16(r);
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) _mm512_store_ps(tmp + 16 * j, r[j]);
        for (int j = 0; j < kk; j++)
            _mm512_mask_storeu_ps(dst + (size_t)(k0 + j) * dstride, wmask, _mm512_load_ps(tmp + 16 * j));
    }
}

/* Pack the mc x kc block of op(A) at (i0, p0) into MR-row panels: panel q holds
 * dst[q MR kc + k MR + i] = op(A)[i0 + q MR + i][p0 + k], zero for rows past mc. */
static void pack_a(int ta, const float *A, int lda, int i0, int p0, int mc, int kc, float *dst) {
    const __mmask16 wmask = (__mmask16)((1u << MR) - 1u);
    for (int ir = 0; ir < mc; ir += MR) {
        int rows = imin(MR, mc - ir);
        float *d = dst + (size_t)ir * kc;
        if (ta) {
            __mmask16 rm = vt512_tail((size_t)rows);
            const float *s = A + (size_t)p0 * lda + i0 + ir;
            for (int k = 0; k < kc; k++)
                _mm512_mask_storeu_ps(d + (size_t)k * MR, wmask,
                                      _mm512_maskz_loadu_ps(rm, s + (size_t)k * lda));
        } else {
            pack_transposed(A + (size_t)(i0 + ir) * lda + p0, (size_t)lda, rows, kc, d, MR, wmask);
        }
    }
}

/* Pack the kc x nc block of op(B) at (p0, j0) into NR-column panels: panel q holds
 * dst[q NR kc + k NR + j] = op(B)[p0 + k][j0 + q NR + j], zero for columns past nc. */
static void pack_b(int tb, const float *B, int ldb, int p0, int j0, int kc, int nc, float *dst) {
    for (int jr = 0; jr < nc; jr += NR) {
        int cols = imin(NR, nc - jr);
        float *d = dst + (size_t)jr * kc;
        if (!tb) {
            __mmask16 m0 = vt512_tail((size_t)cols), m1 = vt512_tail((size_t)(cols > 16 ? cols - 16 : 0));
            const float *s = B + (size_t)p0 * ldb + j0 + jr;
            for (int k = 0; k < kc; k++) {
                const float *sk = s + (size_t)k * ldb;
                _mm512_store_ps(d + (size_t)k * NR, _mm512_maskz_loadu_ps(m0, sk));
                _mm512_store_ps(d + (size_t)k * NR + 16, _mm512_maskz_loadu_ps(m1, sk + 16));
            }
        } else {
            const float *s = B + (size_t)(j0 + jr) * ldb + p0;
            pack_transposed(s, (size_t)ldb, imin(16, cols), kc, d, NR, 0xFFFF);
            pack_transposed(s + (size_t)16 * ldb, (size_t)ldb, cols > 16 ? cols - 16 : 0, kc, d + 16, NR,
                            0xFFFF);
        }
    }
}

/* X(0); X(1); ... X(13);: a row macro over the MR = 14 rows of a tile. */
#define FOR_14_ROWS(X)                                                                        \
    do {                                                                                      \
        X(0); X(1); X(2); X(3); X(4); X(5); X(6); X(7); X(8); X(9); X(10); X(11); X(12); X(13); \
    } while (0)

/* Row i of the A panel, a[i rs], times the two B vectors into row i's accumulators.
 * rs (the panel's row stride) and a5 = a + 5 rs, a10 = a + 10 rs are in scope: row i is
 * read at offset (i % 5) rs from one of the three, so that with rs a runtime stride (op(A)
 * read in place, ta = 0) GCC keeps 3 pointers and 4 offsets in registers instead of 14
 * row offsets, which it spills to the stack; with rs = 1 every offset is a constant. */
#define ROW_FMA(i)                                                                        \
    do {                                                                                  \
        __m512 a_ = _mm512_set1_ps(((i) < 5 ? a : (i) < 10 ? a5 : a10)[((i) % 5) * rs]); \
        c##i##0 = _mm512_fmadd_ps(a_, b0, c##i##0);                                      \
        c##i##1 = _mm512_fmadd_ps(a_, b1, c##i##1);                                      \
    } while (0)

/* Row i's epilogue: alpha acc (+ beta C, read just before) stored under the column
 * masks. (C rows a multiple of 4 KB apart cost a few percent here: ../TUNING.md.) */
#define ROW_STORE(i)                                                                   \
    do {                                                                               \
        if (i < mr) {                                                                  \
            float *cr = c + (size_t)(i) * ldc;                                         \
            __m512 x0 = _mm512_mul_ps(c##i##0, va), x1 = _mm512_mul_ps(c##i##1, va);  \
            if (beta != 0.0f) {                                                        \
                x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k0, cr), x0);          \
                x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k1, cr + 16), x1);     \
            }                                                                          \
            _mm512_mask_storeu_ps(cr, k0, x0);                                         \
            _mm512_mask_storeu_ps(cr + 16, k1, x1);                                    \
        }                                                                              \
    } while (0)

/* Row i's FMA and store only for the first R rows of a tile (R: the kernel's row count). */
#define ROW_FMA_R(i) do { if ((i) < R) ROW_FMA(i); } while (0)
#define ROW_STORE_R(i) do { if ((i) < R) ROW_STORE(i); } while (0)

/* c[0:mr, 0:nr] = alpha * (a panel) (b panel) + beta * c (beta == 0: c not read), mr <= R,
 * with row i of the A panel at step k read from a[i rs + k ks]: (1, MR) for a packed
 * panel, other strides to read op(A) in place (kernel_14x32_inplace). R <= MR rows of
 * FMAs (2 R accumulators): R = MR for whole panels, fewer for a last panel of R rows, so
 * a short edge costs R rows of FMAs instead of 14. Every element's sums are the same
 * whatever R (the same FMAs in the same order). With PACK_B, step k's B vectors come
 * from the source, bs[k ldbs + j] for the nr valid columns (zero past them), not from
 * the packed panel b, and are stored to bd[k NR] as pack_b (tb = 0) would store them:
 * a panel's first call packs it (kernel_14x32_pack_b, kernel_14x32_inplace_pack_b).
 * Always inlined, so each caller's constant R, PACK_B and strides give its own code. */
static inline __attribute__((always_inline)) void
kernel_rows_x32(int kc, const float *a, size_t rs, size_t ks, const float *b, float *c, int ldc, int mr,
                int nr, float alpha, float beta, const prefetch_list *pf, const int R, const int PACK_B,
                const float *bs, size_t ldbs, float *bd) {
    const __mmask16 k0 = vt512_tail((size_t)nr), k1 = vt512_tail((size_t)(nr > 16 ? nr - 16 : 0));
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00,
           c70 = c00, c71 = c00, c80 = c00, c81 = c00, c90 = c00, c91 = c00, c100 = c00, c101 = c00,
           c110 = c00, c111 = c00, c120 = c00, c121 = c00, c130 = c00, c131 = c00;
    for (int k = 0; k < kc; k++) {
        prefetch_step(pf, k);
        __m512 b0, b1;
        if (PACK_B) {
            b0 = _mm512_maskz_loadu_ps(k0, bs);
            b1 = _mm512_maskz_loadu_ps(k1, bs + 16);
            _mm512_store_ps(bd, b0);
            _mm512_store_ps(bd + 16, b1);
            bs += ldbs;
            bd += NR;
        } else {
            b0 = _mm512_load_ps(b);
            b1 = _mm512_load_ps(b + 16);
            b += NR;
        }
        const float *a5 = a + 5 * rs, *a10 = a + 10 * rs; /* ROW_FMA's row bases */
        FOR_14_ROWS(ROW_FMA_R);
        a += ks;
    }
    prefetch_rest(pf, kc);
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    FOR_14_ROWS(ROW_STORE_R);
}

static void kernel_14x32(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,
                         float alpha, float beta, const prefetch_list *pf) {
    kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, MR, 0, NULL, 0, NULL);
}

/* kernel_14x32 whose B panel (nr > 16 columns) is packed to b from its source bs (row
 * stride ldbs, tb = 0) as it is read (gemm_pack_b_fn). */
static void kernel_14x32_pack_b(int kc, const float *a, const float *bs, size_t ldbs, float *b, float *c,
                                int ldc, int mr, int nr, float alpha, float beta, const prefetch_list *pf) {
    kernel_rows_x32(kc, a, 1, MR, NULL, c, ldc, mr, nr, alpha, beta, pf, MR, 1, bs, ldbs, b);
}

/* A last panel of mr <= SHORT_FULL_MR rows of the packed A panel, all 32 columns:
 * kernel_rows_x32 with R = mr rows, and R = 4 for mr <= 4 (as the kernel_4x32 it
 * replaced: 8 accumulators, enough independent chains to cover the FMA latency). Such
 * panels are ViT-Ti's 192 = 13 x 14 + 10 weight-gradient rows and attention's
 * 65 = 4 x 14 + 9 token rows, where a 14-row tile spent 4 and 5 rows of FMAs on padding. */
static void kernel_short_x32(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,
                             float alpha, float beta, const prefetch_list *pf) {
    switch (mr) {
    case 5: kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, 5, 0, NULL, 0, NULL); break;
    case 6: kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, 6, 0, NULL, 0, NULL); break;
    case 7: kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, 7, 0, NULL, 0, NULL); break;
    case 8: kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, 8, 0, NULL, 0, NULL); break;
    case 9: kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, 9, 0, NULL, 0, NULL); break;
    case 10: kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, 10, 0, NULL, 0, NULL); break;
    case 11: kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, 11, 0, NULL, 0, NULL); break;
    case 12: kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, 12, 0, NULL, 0, NULL); break;
    default:
        if (mr <= 4) kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, 4, 0, NULL, 0, NULL);
        else kernel_rows_x32(kc, a, 1, MR, b, c, ldc, mr, nr, alpha, beta, pf, MR, 0, NULL, 0, NULL);
    }
}

/* The same for 14 whole rows of op(A) read in place, row i at step k at a[i rs + k ks]:
 * ta = 0 (rs = lda, ks = 1) or ta = 1 (rs = 1, ks = lda). */
static void kernel_14x32_inplace(int kc, const float *a, size_t rs, size_t ks, const float *b, float *c,
                                 int ldc, int nr, float alpha, float beta, const prefetch_list *pf) {
    if (rs == 1) kernel_rows_x32(kc, a, 1, ks, b, c, ldc, MR, nr, alpha, beta, pf, MR, 0, NULL, 0, NULL);
    else kernel_rows_x32(kc, a, rs, 1, b, c, ldc, MR, nr, alpha, beta, pf, MR, 0, NULL, 0, NULL);
}

/* kernel_14x32_inplace packing its B panel as it reads it (as kernel_14x32_pack_b). */
static void kernel_14x32_inplace_pack_b(int kc, const float *a, size_t rs, size_t ks, const float *bs,
                                        size_t ldbs, float *b, float *c, int ldc, int nr, float alpha,
                                        float beta, const prefetch_list *pf) {
    if (rs == 1) kernel_rows_x32(kc, a, 1, ks, NULL, c, ldc, MR, nr, alpha, beta, pf, MR, 1, bs, ldbs, b);
    else kernel_rows_x32(kc, a, rs, 1, NULL, c, ldc, MR, nr, alpha, beta, pf, MR, 1, bs, ldbs, b);
}

/* Row i of a one-vector-wide tile, vectors of W = 512 or 256 bits (kernel_14x16,
 * kernel_14x8): its FMA at one step, and its store (k0 the column mask). */
#define ROW_FMA_1V(W, i) c##i##0 = _mm##W##_fmadd_ps(_mm##W##_set1_ps(a[i]), b0, c##i##0)

#define ROW_STORE_1V(W, i)                                                                      \
    do {                                                                                        \
        if (i < mr) {                                                                           \
            float *cr = c + (size_t)(i) * ldc;                                                  \
            __m##W x0 = _mm##W##_mul_ps(c##i##0, va);                                           \
            if (beta != 0.0f) x0 = _mm##W##_fmadd_ps(vb, _mm##W##_maskz_loadu_ps(k0, cr), x0); \
            _mm##W##_mask_storeu_ps(cr, k0, x0);                                                \
        }                                                                                       \
    } while (0)

#define ROW_FMA_512(i) ROW_FMA_1V(512, i)
#define ROW_STORE_512(i) ROW_STORE_1V(512, i)
#define ROW_FMA_256(i) ROW_FMA_1V(256, i)
#define ROW_STORE_256(i) ROW_STORE_1V(256, i)

/* Defines `name`, the same kernel for a last panel of nr columns that fit one W-bit
 * vector per row: it uses the first W / 32 columns of the (32-wide) B panel and stores
 * under the column mask `mask` (of type mask_t). */
#define KERNEL_14X1V(name, W, mask_t, mask)                                                            \
    static void name(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,       \
                     float alpha, float beta, const prefetch_list *pf) {                              \
        __m##W c00 = _mm##W##_setzero_ps(), c10 = c00, c20 = c00, c30 = c00, c40 = c00, c50 = c00,    \
               c60 = c00, c70 = c00, c80 = c00, c90 = c00, c100 = c00, c110 = c00, c120 = c00,        \
               c130 = c00;                                                                            \
        for (int k = 0; k < kc; k++) {                                                                \
            prefetch_step(pf, k);                                                                     \
            __m##W b0 = _mm##W##_load_ps(b);                                                          \
            FOR_14_ROWS(ROW_FMA_##W);                                                                 \
            a += MR;                                                                                  \
            b += NR;                                                                                  \
        }                                                                                             \
        prefetch_rest(pf, kc);                                                                        \
        const __m##W va = _mm##W##_set1_ps(alpha), vb = _mm##W##_set1_ps(beta);                       \
        const mask_t k0 = mask;                                                                       \
        FOR_14_ROWS(ROW_STORE_##W);                                                                   \
    }

/* kernel_14x16: nr <= 16, halving the work of a narrow edge. */
KERNEL_14X1V(kernel_14x16, 512, __mmask16, vt512_tail((size_t)nr))

/* kernel_14x8: nr <= 8, in 256-bit registers: where a 256-bit FMA costs half a 512-bit
 * one (and elsewhere no more than one), the 5-column tail of attention's 197 x 197
 * products (197 = 6 x 32 + 5) costs 8 lanes of FMAs, not kernel_14x16's 16. */
KERNEL_14X1V(kernel_14x8, 256, __mmask8, (__mmask8)((1u << nr) - 1u))

/* The same for a last panel of nr = n <= NARROW_NR columns, turned around: the 14 rows
 * in the lanes of one vector (a packed A step is 14 contiguous floats) and one FMA per
 * column per step, against 14 in kernel_14x16 (65 = 2 x 32 + 1 tokens leave a 1-column
 * panel in attention's q k^T and dout v^T products). One FMA chain per element in step
 * order and the store's alpha acc + beta c as one FMA, as in every other microkernel: an
 * element's bits do not depend on which kernel its panel gets (the short-row and in-place
 * kernels take the same columns' other rows), so a row of C does not depend on M
 * (tests/test_dist.c). n is a constant in each caller. */
static inline __attribute__((always_inline)) void
kernel_14xn_n(int kc, const float *a, const float *b, float *c, int ldc, int mr, float alpha, float beta,
              const prefetch_list *pf, const int n) {
    const __mmask16 rows = (__mmask16)((1u << MR) - 1u);
    __m512 e[NARROW_NR];
    for (int j = 0; j < n; j++) e[j] = _mm512_setzero_ps();
    for (int k = 0; k < kc; k++) {
        prefetch_step(pf, k);
        __m512 a0 = _mm512_maskz_loadu_ps(rows, a);
        for (int j = 0; j < n; j++) e[j] = _mm512_fmadd_ps(a0, _mm512_set1_ps(b[j]), e[j]);
        a += MR;
        b += NR;
    }
    prefetch_rest(pf, kc);
    float col[16] __attribute__((aligned(64)));
    for (int j = 0; j < n; j++) {
        _mm512_store_ps(col, _mm512_mul_ps(e[j], _mm512_set1_ps(alpha)));
        for (int i = 0; i < mr; i++) {
            float *ci = c + (size_t)i * ldc + j;
            *ci = beta != 0.0f ? fmaf(beta, *ci, col[i]) : col[i];
        }
    }
}

static void kernel_14xn(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,
                        float alpha, float beta, const prefetch_list *pf) {
    switch (nr) {
    case 1: kernel_14xn_n(kc, a, b, c, ldc, mr, alpha, beta, pf, 1); break;
    case 2: kernel_14xn_n(kc, a, b, c, ldc, mr, alpha, beta, pf, 2); break;
    case 3: kernel_14xn_n(kc, a, b, c, ldc, mr, alpha, beta, pf, 3); break;
    default: kernel_14xn_n(kc, a, b, c, ldc, mr, alpha, beta, pf, 4); break;
    }
}

/* c[0:mr, 0:nr] += bias[0:nr] on every row (gemm_bias_fn; nr <= N). */
static void add_bias(float *c, int ldc, int mr, int nr, const float *bias) {
    for (int j = 0; j < nr; j += 16) {
        __mmask16 k = vt512_tail((size_t)(nr - j));
        __m512 b = _mm512_maskz_loadu_ps(k, bias + j);
        for (int i = 0; i < mr; i++) {
            float *cr = c + (size_t)i * ldc + j;
            _mm512_mask_storeu_ps(cr, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, cr), b));
        }
    }
}

/* C = beta C (+ bias rows) over M x N (beta == 0: C = 0 without reading it). */
static void scale_c(int M, int N, float beta, const float *bias, float *C, int ldc) {
    for (int i = 0; i < M; i++) {
        float *cr = C + (size_t)i * ldc;
        for (int j = 0; j < N; j += 16) {
            __mmask16 k = vt512_tail((size_t)(N - j));
            __m512 v = beta == 0.0f ? _mm512_setzero_ps()
                                    : _mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(k, cr + j));
            if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, bias + j));
            _mm512_mask_storeu_ps(cr + j, k, v);
        }
    }
}

/* The three entry points: C = alpha op(A) op(B) + beta C (+ bias), the last block
 * prefetching next (NULL: nothing). */
static void gemm_all(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, const float *bias, float *C, int ldc, float *work,
                     const vt_region *next) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, bias, C, ldc);
        return;
    }
    static const gemm_kernels kn = {.pack_a = pack_a,
                                    .pack_b = pack_b,
                                    .full = kernel_14x32,
                                    .half = kernel_14x16,
                                    .quarter = kernel_14x8,
                                    .narrow = kernel_14xn,
                                    .short_rows = kernel_short_x32,
                                    .inplace = kernel_14x32_inplace,
                                    .full_pack_b = kernel_14x32_pack_b,
                                    .inplace_pack_b = kernel_14x32_inplace_pack_b,
                                    .add_bias = add_bias};
    gemm_blocking bl = {.mr = MR,
                        .nr = NR,
                        .kc = KC,
                        .kc_t = KC_T,
                        .mc = MC,
                        .nc = NC,
                        .short_mr = SHORT_MR,
                        .short_full_mr = SHORT_FULL_MR,
                        .narrow_nr = NARROW_NR,
                        .next_c = 1,
                        .inplace_max_n = 2 * NR,
                        .inplace_rows_max_n = 48 * NR,
                        .inplace_t_max_n = 24 * NR,
                        .inplace_rows_min_a = INPLACE_ROWS_MIN_A,
                        .m_one_pass = M_ONE_PASS,
                        .one_pass_min_n = ONE_PASS_MIN_N,
                        .nc_one_pass = NC_ONE_PASS};
    float *pb = work + a_floats(a_rows(M), (size_t)imin(K, imax(KC, KC_T)));
    gemm_blocked(bl, &kn, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, ldc, work, pb, next);
}

void vt_avx512_gemm_bias(int ta, int tb, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb,
                         float beta, const float *bias, float *C, int ldc, float *work) {
    gemm_all(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, ldc, work, NULL);
}

void vt_avx512_gemm(int ta, int tb, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc, float *work) {
    gemm_all(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc, work, NULL);
}

void vt_avx512_gemm_prefetch(int ta, int tb, int M, int N, int K, float alpha,
                             const float *A, int lda, const float *B, int ldb,
                             float beta, float *C, int ldc, float *work, const vt_region next[2]) {
    gemm_all(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc, work, next);
}
