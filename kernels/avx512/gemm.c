/* avx512/gemm.c - AVX-512 GEMM, BLIS-style (contract in ../entries.def):
 *   C = alpha op(A) op(B) + beta C.
 *
 * The blocking loops and the L2 prefetch are ../gemm_driver.h (shared with the other
 * ISA); the register tile shapes (packing and microkernels) are gemm_shape.h, compiled
 * here once per shape of VT_AVX512_SHAPES (../gemm_tiles.h); this file holds the
 * choice among them and the entry points.
 * Loops: jc over N in NC blocks -> pc over K in equal blocks of at most KC (KC_T for
 * ta = 1; k_block) (pack op(B) block into KC x NR panels) -> ic over M in MC blocks
 * (pack op(A) block into MR x KC panels) -> jr over NR columns -> ir over MR rows -> the
 * MR x NR register microkernel (MR rows x NR = 16 NV columns: MR NV zmm accumulators,
 * NV zmm of B, broadcasts of A). Which MR x NR runs, like the cache blocks, is the
 * CPU's context's (avx512.mr, avx512.nr in ../gemm_context.c), chosen at start-up.
 * Last panels: <= 4 rows use a 4-row variant, fewer than MR rows (and more than 16
 * columns) an mr-row one, <= 4 columns the turned-around kernel_narrow, <= 8 columns a
 * variant in 256-bit registers, <= 16 columns a one-vector one, so short and narrow
 * edges cost less than a whole tile.
 * For M <= M_ONE_PASS and N > ONE_PASS_MIN_N (the weight gradients with M < N) the K
 * blocks are outermost: all of op(A)'s K block is packed once, then op(B) in N blocks
 * of at most NC_ONE_PASS columns, so both stay in L2 (see gemm_blocked).
 * All four (ta, tb) cases are absorbed by the packing routines (the transposing ones
 * use 16 x 16 in-register transposes); for N <= 64, and when A has at least
 * INPLACE_ROWS_MIN_A floats for N <= INPLACE_ROWS_MAX_N (ta = 0) or INPLACE_T_MAX_N
 * (ta = 1) outside the one-pass order (the context's; 0: never), the whole MR-row
 * panels of op(A) are read in place instead (kernel_inplace, see gemm_blocked; ta = 0
 * only when the row stride does not put the MR rows in few L1 sets).
 * With tb = 0, op(B) is not packed in a pass of its own: the first call on each B panel
 * of more than 16 columns (a whole MR-row one) reads it from its source and stores the
 * packed panel beside its FMAs (kernel_full_pack_b, kernel_inplace_pack_b; see
 * gemm_blocked).
 * Edge tiles: packing zero-pads panels to MR/NR, the microkernel stores only the valid
 * rows, with masked column stores.
 * Latency hiding: each microkernel call prefetches into L2, at fixed steps of each
 * group of PF_GROUP steps of its loop, a line of the next call's C tile and, in a
 * block's last calls, of its share of the source of the next pack_a (and, at the end of
 * a K block, of the next pack_b; in the last block, of what the caller of
 * gemm_prefetch reads next); where the calls pack op(B), each panel's calls also
 * prefetch the next panel's source; over its last own_c steps a call also prefetches
 * its own C tile into L1 for its epilogue: see prefetch_list, prefetch_group and
 * gemm_macro in ../gemm_driver.h.
 * alpha and beta are applied at the store of the first K block (later K blocks add
 * with beta = 1), a bias (gemm_bias) at the store of the last one: in registers by the
 * full, half and in-place kernels' bias variants, by add_bias after the store of the
 * others' tiles (short rows, narrow, quarter, and the calls that pack op(B)); beta == 0
 * never reads C. K == 0 or alpha == 0 gives C = beta C without reading A or B (BLAS
 * convention).
 * Numerics: float accumulation over each KC block, blocks summed into C; error within
 * the usual K eps sum|a||b| bound, like the scalar reference (different order). For a
 * fixed shape, blocking and thread count the result is fixed.
 * work: vt_avx512_gemm_work_floats(M, N, K) floats, 64-byte aligned.
 * gemm_bf16, the bf16 fma path (../kernels.h), runs the same loops with each shape's
 * kernels_bf16: packs that round op(A) and op(B) to bf16 (or widen a bf16 weight), no
 * in-place or B-packing microkernels; same work space.
 * Why the constants and variants are what they are (measurements, CPUs, dead ends):
 * ../TUNING.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "avx512.h"
#include "../gemm_driver.h"
#include "../gemm_tiles.h"

/* The register tile (one of VT_AVX512_SHAPES), the cache blocks (KC, KC_T, MC, NC) and
 * the one-pass bounds (M_ONE_PASS, NC_ONE_PASS, ONE_PASS_MIN_N) are this CPU's
 * context's (../gemm_context.c). */
#define MR (vt_gemm_ctx.avx512.mr)
#define NR (vt_gemm_ctx.avx512.nr)
#define KC (vt_gemm_ctx.avx512.kc)
#define KC_T (vt_gemm_ctx.avx512.kc_t)
#define MC (vt_gemm_ctx.avx512.mc)
#define NC (vt_gemm_ctx.avx512.nc)
#define M_ONE_PASS (vt_gemm_ctx.avx512.m_one_pass)
#define NC_ONE_PASS (vt_gemm_ctx.avx512.nc_one_pass)
#define ONE_PASS_MIN_N (vt_gemm_ctx.avx512.one_pass_min_n)
#define INPLACE_ROWS_MAX_N (vt_gemm_ctx.avx512.inplace_rows_max_n)
#define INPLACE_T_MAX_N (vt_gemm_ctx.avx512.inplace_t_max_n)
#define SHORT_MR 4 /* last panels of <= 4 rows use kernel_short with 4-row FMAs, */
#define NARROW_NR 4 /* last panels of <= 4 columns use kernel_narrow */
/* the steps over which a call prefetches its own mr x nr C tile: its lines (at most
 * nr / 16 + 1 a row), one per group of PF_GROUP steps, all out 16 steps before the epilogue */
#define OWN_C(mr, nr) (PF_GROUP * (mr) * ((nr) / 16 + 1) + 16)
/* A (N <= INPLACE_ROWS_MAX_N with ta = 0, N <= INPLACE_T_MAX_N with ta = 1) of at least
 * this many floats is read in place: a smaller one is packed from cache at little cost,
 * and the kernel then reads contiguous panels. */
#define INPLACE_ROWS_MIN_A ((size_t)1 << 16)

/* Floats of the packed-A region: mc x kc rounded to 64 bytes so the B panels that
 * follow stay aligned. */
static inline size_t a_floats(size_t mc, size_t kc) { return round_up(mc * kc, 16); }

/* Rows of the packed A region: all of M when it may be packed in one pass, else an M
 * block (MC <= M_ONE_PASS: at most M_ONE_PASS rows, which keeps the size non-decreasing
 * in M, see ../entries.def). */
static inline size_t a_rows(int M) { return round_up((size_t)imin(M, M_ONE_PASS), (size_t)MR); }

size_t vt_avx512_gemm_work_floats(int M, int N, int K) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    size_t mc = a_rows(M), kc = (size_t)imin(K, imax(KC, KC_T)); /* the longer K block */
    size_t nc = round_up((size_t)imin(N, NC), (size_t)NR);
    return a_floats(mc, kc) + kc * nc;
}

/* How a packing routine reads its source: float32 as it is (SRC_F32), float32 rounded to
 * bf16 and widened back (SRC_ROUND), bf16 widened (SRC_BF16); the last two are the bf16
 * fma path's packing (kernels.h: bf16 product paths). */
enum { SRC_F32, SRC_ROUND, SRC_BF16 };

/* 16 elements of src (float32, or bf16 for SRC_BF16) from element `at`, as float32. */
static inline __attribute__((always_inline)) __m512 load_src(const void *src, size_t at, const int kind) {
    if (kind == SRC_BF16) return vt512_load_bf16(16, (const vt_bf16 *)src + at);
    __m512 x = _mm512_loadu_ps((const float *)src + at);
    return kind == SRC_ROUND ? _mm512_castsi512_ps(vt512_bf16_rounded(x)) : x;
}

/* The same for the first n < 16 elements (m = vt512_tail(n)), lanes past n zero and
 * memory past n not read. */
static inline __attribute__((always_inline)) __m512 load_src_tail(const void *src, size_t at, __mmask16 m, size_t n,
                                                                  const int kind) {
    if (kind == SRC_BF16) return vt512_load_bf16(n, (const vt_bf16 *)src + at);
    __m512 x = _mm512_maskz_loadu_ps(m, (const float *)src + at);
    return kind == SRC_ROUND ? _mm512_castsi512_ps(vt512_bf16_rounded(x)) : x;
}

/* Transposing copy: `rows` (<= 16) source rows of kc elements (from element `at` of src,
 * row stride ld; read as `kind` says) become kc destination vectors (lanes >= rows zero)
 * stored under wmask at dst + k * dstride. */
static inline __attribute__((always_inline)) void pack_transposed(const void *src, size_t at, size_t ld, int rows,
                                                                  int kc, float *dst, int dstride, __mmask16 wmask,
                                                                  const int kind) {
    __m512 r[16];
    int k0 = 0;
    for (; k0 + 16 <= kc; k0 += 16) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            r[i] = i < rows ? load_src(src, at + (size_t)i * ld + k0, kind) : _mm512_setzero_ps();
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
            r[i] = i < rows ? load_src_tail(src, at + (size_t)i * ld + k0, km, (size_t)kk, kind) : _mm512_setzero_ps();
        vt512_transpose16(r);
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) _mm512_store_ps(tmp + 16 * j, r[j]);
        for (int j = 0; j < kk; j++)
            _mm512_mask_storeu_ps(dst + (size_t)(k0 + j) * dstride, wmask, _mm512_load_ps(tmp + 16 * j));
    }
}

/* c[0:mr, 0:nr] += bias[0:nr] on every row (gemm_bias_fn; nr <= N): for the tiles of
 * kernels without a bias variant. */
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

/* p[0:m] += rows [0, rows) of a, each column's adds in row order (gemm_sum_rows_fn): 64
 * columns at a time, four independent sums in flight. */
void vt_avx512_sum_rows(float *p, const float *a, size_t lda, int m, int rows) {
    int j = 0;
    for (; j + 64 <= m; j += 64) {
        __m512 s0 = _mm512_loadu_ps(p + j), s1 = _mm512_loadu_ps(p + j + 16), s2 = _mm512_loadu_ps(p + j + 32),
               s3 = _mm512_loadu_ps(p + j + 48);
        for (int r = 0; r < rows; r++) {
            const float *ar = a + (size_t)r * lda + j;
            s0 = _mm512_add_ps(s0, _mm512_loadu_ps(ar));
            s1 = _mm512_add_ps(s1, _mm512_loadu_ps(ar + 16));
            s2 = _mm512_add_ps(s2, _mm512_loadu_ps(ar + 32));
            s3 = _mm512_add_ps(s3, _mm512_loadu_ps(ar + 48));
        }
        _mm512_storeu_ps(p + j, s0);
        _mm512_storeu_ps(p + j + 16, s1);
        _mm512_storeu_ps(p + j + 32, s2);
        _mm512_storeu_ps(p + j + 48, s3);
    }
    for (; j < m; j += 16) {
        __mmask16 k = vt512_tail((size_t)(m - j));
        __m512 s = _mm512_maskz_loadu_ps(k, p + j);
        for (int r = 0; r < rows; r++) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(k, a + (size_t)r * lda + j));
        _mm512_mask_storeu_ps(p + j, k, s);
    }
}

/* The packing and microkernels of each shape of VT_AVX512_SHAPES: kernels_14x32, ... */
#define SH_MR 14
#define SH_NV 2
#define SH(x) x##_14x32
#include "gemm_shape.h"
#undef SH_MR
#undef SH_NV
#undef SH
#define SH_MR 12
#define SH_NV 2
#define SH(x) x##_12x32
#include "gemm_shape.h"
#undef SH_MR
#undef SH_NV
#undef SH
#define SH_MR 9
#define SH_NV 3
#define SH(x) x##_9x48
#include "gemm_shape.h"
#undef SH_MR
#undef SH_NV
#undef SH
#define SH_MR 8
#define SH_NV 3
#define SH(x) x##_8x48
#include "gemm_shape.h"
#undef SH_MR
#undef SH_NV
#undef SH
#define SH_MR 6
#define SH_NV 4
#define SH(x) x##_6x64
#include "gemm_shape.h"
#undef SH_MR
#undef SH_NV
#undef SH

/* What the entry points (GEMM_ENTRY_POINTS) call: C = alpha op(A) op(B) + beta C
 * (+ bias), op(B) from B16 when it is not NULL, the last block prefetching next (NULL:
 * nothing), with the context's shape; bf16: the operands rounded to bf16 as they are
 * packed (the fma path's kernels, kernels_<shape>_bf16); cs: the column sums of
 * gemm_sums (NULL: none). */
static void gemm_all(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, const vt_bf16 *B16, int ldb, float beta, const float *bias, float *C, int ldc,
                     float *work, const vt_region *next, int bf16, const gemm_col_sums *cs) {
    if (vt512_gemm_no_product(M, N, K, alpha, beta, bias, C, ldc)) return;
    gemm_blocking bl = {.mr = MR,
                        .nr = NR,
                        .kc = KC,
                        .kc_t = KC_T,
                        .mc = MC,
                        .nc = NC,
                        .short_mr = imin(SHORT_MR, MR - 2),
                        .short_full_mr = MR - 2, /* MR - 1 rows run the whole tile */
                        .narrow_nr = NARROW_NR,
                        .half_nr = 16,
                        .next_c = 1,
                        .own_c = OWN_C(MR, NR),
                        .inplace_max_n = 64,
                        .inplace_rows_max_n = INPLACE_ROWS_MAX_N,
                        .inplace_t_max_n = INPLACE_T_MAX_N,
                        .inplace_rows_min_a = INPLACE_ROWS_MIN_A,
                        .m_one_pass = M_ONE_PASS,
                        .one_pass_min_n = ONE_PASS_MIN_N,
                        .nc_one_pass = NC_ONE_PASS,
                        .src_lines = 64};
    float *pb = work + a_floats(a_rows(M), (size_t)imin(K, imax(KC, KC_T)));
    /* one inlined copy of the loops per shape, each calling its own kernels directly */
#define SHAPE_CASE(mr_, nv_, nr_)                                                                           \
    if (bl.mr == mr_ && bl.nr == nr_) {                                                                     \
        if (bf16)                                                                                           \
            gemm_blocked(bl, &kernels_bf16_##mr_##x##nr_, ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta,  \
                         bias, C, ldc, work, pb, next, cs, NULL);                                           \
        else                                                                                                \
            gemm_blocked(bl, &kernels_##mr_##x##nr_, ta, tb, M, N, K, alpha, A, lda, B, NULL, ldb, beta,      \
                         bias, C, ldc, work, pb, next, cs, NULL);                                           \
        return;                                                                                             \
    }
    VT_AVX512_SHAPES(SHAPE_CASE)
#undef SHAPE_CASE
    /* a bug: the context's rules admit only VT_AVX512_SHAPES */
    fprintf(stderr, "%s:%d: avx512 gemm: no %d x %d microkernel\n", __FILE__, __LINE__, bl.mr, bl.nr);
    abort();
}

GEMM_ENTRY_POINTS(avx512)

/* The blocks gemm_all walks op(B) in (entries.def: gemm_b_blocks). */
void vt_avx512_gemm_b_blocks(int ta, int N, int K, int *nc, int *kc) {
    gemm_b_blocks_of((gemm_blocking){.kc = KC, .kc_t = KC_T, .nc = NC}, ta, N, K, nc, kc);
}

/* No packed form of op(B) to share (entries.def: gemm_packed_b_floats): the microkernels
 * pack op(B) as they first read it, beside their FMAs (kernels/TUNING.md). */
size_t vt_avx512_gemm_packed_b_floats(int N, int K, int *panels) {
    (void)N, (void)K;
    *panels = 0;
    return 0;
}
size_t vt_avx512_gemm_bf16_packed_b_floats(int N, int K, int *panels) { /* nor on the fma path */
    (void)N, (void)K;
    *panels = 0;
    return 0;
}
void vt_avx512_gemm_pack_b(int tb, int N, int K, const float *B, int ldb, int p0, int p1, float *packed) {
    (void)tb, (void)N, (void)K, (void)B, (void)ldb, (void)p0, (void)p1, (void)packed;
    abort(); /* not called: no packed form */
}
void vt_avx512_gemm_packed_b(int ta, int M, int N, int K, float alpha, const float *A, int lda, const float *packed,
                             float beta, const float *bias, float *C, int ldc, float *work) {
    (void)ta, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)packed, (void)beta, (void)bias;
    (void)C, (void)ldc, (void)work;
    abort(); /* not called: no packed form */
}
