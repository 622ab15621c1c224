/* avx512/gemm_shape.h - one register tile shape of the AVX-512 GEMM: its packing
 * routines and microkernels, as a gemm_kernels table. Private to avx512/gemm.c, which
 * includes it once per shape it offers, with
 *   SH_MR  rows of the tile (<= 15: a packed A step is one vector, kernel_narrow's lanes),
 *   SH_NV  16-float vectors per row (NR = 16 SH_NV columns; SH_MR SH_NV accumulators),
 *   SH(x)  x's name for this shape (x##_14x32, ...),
 * and the per-CPU context picks the shape (../gemm_context.c: avx512.mr, avx512.nr).
 * Kernels (all read packed panels: A panel q holds step k's SH_MR rows at
 * a[q MR kc + k MR + i], B panel q step k's NR columns at b[q NR kc + k NR + j]):
 *   full        MR x NR (kernel_rows with R = MR), also for edges of more than 16 columns
 *               (masked stores);
 *   short_rows  last panels of mr < MR rows: R = 4 for mr <= 4, else R = mr rows of FMAs;
 *   inplace     MR whole rows of op(A) read where they are (row i at a[i rs + k ks]);
 *   full_pack_b, inplace_pack_b: the same, packing the B panel from its source (tb = 0)
 *               beside the FMAs on the panel's first call;
 *   half        <= 16 columns, one 512-bit vector per row;
 *   quarter     <= 8 columns, one 256-bit vector per row;
 *   narrow      <= 4 columns, turned around: the MR rows in the lanes of one vector;
 *   full_bias, half_bias, inplace_bias: full, half and inplace adding the bias of a
 *               product's last K block in registers before the store (gemm_macro; the
 *               other kernels leave it to add_bias after the store).
 * Every kernel computes an element as one FMA chain in step order and stores
 * alpha acc (+ beta C as one FMA), so an element's bits do not depend on which kernel its
 * tile gets (for one shape and K blocking). */

#define SH_NR (16 * SH_NV)

/* Pack the mc x kc block of op(A) at (i0, p0) into SH_MR-row panels (zero past mc),
 * reading A as `kind` says (SRC_F32, SRC_ROUND). With ta = 1 a step's rows are
 * contiguous floats of A: for SH_MR <= 8 one vector holds two panels' rows, so each
 * load (and rounding) fills both, the upper lanes stored through a mask shifted by
 * SH_MR lanes (a vector per panel would leave half of every load idle). */
static inline __attribute__((always_inline)) void SH(pack_a_src)(int ta, const float *A, int lda, int i0, int p0,
                                                                 int mc, int kc, float *dst, const int kind) {
    const __mmask16 wmask = (__mmask16)((1u << SH_MR) - 1u);
    const int per_load = 2 * SH_MR <= 16 ? 2 * SH_MR : SH_MR; /* rows one ta = 1 load covers */
    for (int ir = 0; ir < mc; ir += ta ? per_load : SH_MR) {
        float *d = dst + (size_t)ir * kc;
        if (ta) {
            int rows = imin(per_load, mc - ir);
            __mmask16 rm = vt512_tail((size_t)rows);
            size_t s = (size_t)p0 * lda + i0 + ir;
            /* the second panel's step k at d + SH_MR kc + k SH_MR, its first row in lane SH_MR */
            float *d2 = d + (size_t)SH_MR * kc - SH_MR;
            for (int k = 0; k < kc; k++) {
                __m512 v = load_src_tail(A, s + (size_t)k * lda, rm, (size_t)rows, kind);
                _mm512_mask_storeu_ps(d + (size_t)k * SH_MR, wmask, v);
                if (rows > SH_MR) _mm512_mask_storeu_ps(d2 + (size_t)k * SH_MR, (__mmask16)(wmask << SH_MR), v);
            }
        } else {
            pack_transposed(A, (size_t)(i0 + ir) * lda + p0, (size_t)lda, imin(SH_MR, mc - ir), kc, d, SH_MR,
                            wmask, kind);
        }
    }
}

/* Pack the kc x nc block of op(B) at (p0, j0) into SH_NR-column panels (zero past nc),
 * reading B (float32, or bf16 for SRC_BF16) as `kind` says. */
static inline __attribute__((always_inline)) void SH(pack_b_src)(int tb, const void *B, int ldb, int p0, int j0,
                                                                 int kc, int nc, float *dst, const int kind) {
    for (int jr = 0; jr < nc; jr += SH_NR) {
        int cols = imin(SH_NR, nc - jr);
        float *d = dst + (size_t)jr * kc;
        if (!tb) {
            size_t s = (size_t)p0 * ldb + j0 + jr;
            __mmask16 m[SH_NV];
            for (int v = 0; v < SH_NV; v++) m[v] = vt512_tail((size_t)imax(0, cols - 16 * v));
            for (int k = 0; k < kc; k++)
#pragma GCC unroll 4
                for (int v = 0; v < SH_NV; v++)
                    _mm512_store_ps(d + (size_t)k * SH_NR + 16 * v,
                                    load_src_tail(B, s + (size_t)k * ldb + 16 * v, m[v],
                                                  (size_t)imax(0, cols - 16 * v), kind));
        } else {
            size_t s = (size_t)(j0 + jr) * ldb + p0;
            for (int v = 0; v < SH_NV; v++)
                pack_transposed(B, s + (size_t)16 * v * ldb, (size_t)ldb, imin(16, imax(0, cols - 16 * v)), kc,
                                d + 16 * v, SH_NR, 0xFFFF, kind);
        }
    }
}

static void SH(pack_a)(int ta, const float *A, int lda, int i0, int p0, int mc, int kc, float *dst) {
    SH(pack_a_src)(ta, A, lda, i0, p0, mc, kc, dst, SRC_F32);
}
static void SH(pack_b)(int tb, const float *B, int ldb, int p0, int j0, int kc, int nc, float *dst) {
    SH(pack_b_src)(tb, B, ldb, p0, j0, kc, nc, dst, SRC_F32);
}
/* The bf16 fma path's packs (kernels_bf16): rounded float32 operands, widened bf16 B. */
static void SH(pack_a_round)(int ta, const float *A, int lda, int i0, int p0, int mc, int kc, float *dst) {
    SH(pack_a_src)(ta, A, lda, i0, p0, mc, kc, dst, SRC_ROUND);
}
static void SH(pack_b_round)(int tb, const float *B, int ldb, int p0, int j0, int kc, int nc, float *dst) {
    SH(pack_b_src)(tb, B, ldb, p0, j0, kc, nc, dst, SRC_ROUND);
}
static void SH(pack_b16)(int tb, const vt_bf16 *B, int ldb, int p0, int j0, int kc, int nc, float *dst) {
    SH(pack_b_src)(tb, B, ldb, p0, j0, kc, nc, dst, SRC_BF16);
}

/* One step of kernel_rows: R rows of FMAs on step k's B vectors (from b, or with PACK_B
 * from the source bs, stored to bd as pack_b stores them) and op(A)'s column at a (row i
 * at (i % 5) rs from a, a + 5 rs or a + 10 rs: with rs a runtime stride GCC keeps 3
 * pointers and 4 offsets in registers instead of spilling 14 row offsets). */
static inline __attribute__((always_inline)) void SH(rows_step)(__m512 acc[SH_MR][SH_NV], const float *a, size_t rs,
                                                                const float *b, const __mmask16 km[SH_NV],
                                                                const int R, const int PACK_B, const float *bs,
                                                                float *bd) {
    __m512 bv[SH_NV];
#pragma GCC unroll 4
    for (int v = 0; v < SH_NV; v++) {
        if (PACK_B) {
            bv[v] = _mm512_maskz_loadu_ps(km[v], bs + 16 * v);
            _mm512_store_ps(bd + 16 * v, bv[v]);
        } else {
            bv[v] = _mm512_load_ps(b + 16 * v);
        }
    }
    const float *a5 = a + 5 * rs, *a10 = a + 10 * rs;
#pragma GCC unroll 16
    for (int i = 0; i < SH_MR; i++) {
        if (i < R) {
            __m512 av = _mm512_set1_ps((i < 5 ? a : i < 10 ? a5 : a10)[(i % 5) * rs]);
#pragma GCC unroll 4
            for (int v = 0; v < SH_NV; v++) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
        }
    }
}

/* c[0:mr, 0:nr] = alpha * (a panel) (b panel) + beta * c (beta == 0: c not read)
 * (+ bias[0:nr] on every row when bias is not NULL, a constant in each caller),
 * mr <= R <= SH_MR, row i of op(A) at step k at a[i rs + k ks] ((1, MR) for a packed
 * panel). R rows of FMAs (R SH_NV accumulators). With PACK_B, step k's B vectors come
 * from the source bs[k ldbs + j] (zero past nr) and are stored to bd[k NR] as pack_b
 * stores them. The loop runs in groups of PF_GROUP steps, each issuing its prefetches
 * at fixed steps (prefetch_group), and the last kc % PF_GROUP steps without. Always
 * inlined, so each caller's constant R, PACK_B and strides give their own code. */
static inline __attribute__((always_inline)) void
SH(kernel_rows)(int kc, const float *a, size_t rs, size_t ks, const float *b, float *c, int ldc, int mr, int nr,
                float alpha, float beta, const float *bias, const prefetch_list *pf, const int R, const int PACK_B,
                const float *bs, size_t ldbs, float *bd) {
    __mmask16 km[SH_NV];
    __m512 acc[SH_MR][SH_NV];
#pragma GCC unroll 4
    for (int v = 0; v < SH_NV; v++) km[v] = vt512_tail((size_t)imax(0, nr - 16 * v));
#pragma GCC unroll 16
    for (int i = 0; i < SH_MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < SH_NV; v++) acc[i][v] = _mm512_setzero_ps();
    const int groups = kc / PF_GROUP;
    for (int g = 0; g < groups; g++) {
#pragma GCC unroll 4
        for (int s = 0; s < PF_GROUP; s++) {
            if (s == 0) prefetch_group_list(pf, g, groups);
            if (s == PF_GROUP / 2) prefetch_group_next_c(pf, g, SH_MR);
            if (s == PF_GROUP - 1) prefetch_group_own_c(pf, g, SH_MR);
            if (PACK_B) SH(rows_step)(acc, a + s * ks, rs, NULL, km, R, 1, bs + s * ldbs, bd + s * SH_NR);
            else SH(rows_step)(acc, a + s * ks, rs, b + s * SH_NR, km, R, 0, NULL, NULL);
        }
        a += PF_GROUP * ks;
        if (PACK_B) {
            bs += PF_GROUP * ldbs;
            bd += PF_GROUP * SH_NR;
        } else {
            b += PF_GROUP * SH_NR;
        }
    }
    for (int k = groups * PF_GROUP; k < kc; k++) {
        SH(rows_step)(acc, a, rs, b, km, R, PACK_B, bs, bd);
        a += ks;
        if (PACK_B) {
            bs += ldbs;
            bd += SH_NR;
        } else {
            b += SH_NR;
        }
    }
    prefetch_rest(pf, groups, SH_MR);
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __m512 bias_v[SH_NV];
#pragma GCC unroll 4
    for (int v = 0; v < SH_NV; v++)
        bias_v[v] = bias ? _mm512_maskz_loadu_ps(km[v], bias + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < SH_MR; i++) {
        if (i < R && i < mr) {
            float *cr = c + (size_t)i * ldc;
#pragma GCC unroll 4
            for (int v = 0; v < SH_NV; v++) {
                __m512 x = _mm512_mul_ps(acc[i][v], va);
                if (beta != 0.0f) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(km[v], cr + 16 * v), x);
                if (bias) x = _mm512_add_ps(x, bias_v[v]);
                _mm512_mask_storeu_ps(cr + 16 * v, km[v], x);
            }
        }
    }
}

static void SH(kernel_full)(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr, float alpha,
                            float beta, const prefetch_list *pf) {
    SH(kernel_rows)(kc, a, 1, SH_MR, b, c, ldc, mr, nr, alpha, beta, NULL, pf, SH_MR, 0, NULL, 0, NULL);
}

static void SH(kernel_full_bias)(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,
                                 float alpha, float beta, const float *bias, const prefetch_list *pf) {
    SH(kernel_rows)(kc, a, 1, SH_MR, b, c, ldc, mr, nr, alpha, beta, bias, pf, SH_MR, 0, NULL, 0, NULL);
}

static void SH(kernel_full_pack_b)(int kc, const float *a, const float *bs, size_t ldbs, float *b, float *c,
                                   int ldc, int mr, int nr, float alpha, float beta, const prefetch_list *pf) {
    SH(kernel_rows)(kc, a, 1, SH_MR, NULL, c, ldc, mr, nr, alpha, beta, NULL, pf, SH_MR, 1, bs, ldbs, b);
}

/* R rows of FMAs for a last panel of mr < MR rows (R = 4 for mr <= 4: 4 SH_NV
 * independent chains cover the FMA latency). */
#define SH_ROWS_CASE(r)                                                                                      \
    case r:                                                                                                 \
        SH(kernel_rows)(kc, a, 1, SH_MR, b, c, ldc, mr, nr, alpha, beta, NULL, pf, (r) < SH_MR ? (r) : SH_MR, \
                        0, NULL, 0, NULL);                                                                  \
        break
static void SH(kernel_short)(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,
                             float alpha, float beta, const prefetch_list *pf) {
    switch (mr) {
        SH_ROWS_CASE(5); SH_ROWS_CASE(6); SH_ROWS_CASE(7); SH_ROWS_CASE(8); SH_ROWS_CASE(9);
        SH_ROWS_CASE(10); SH_ROWS_CASE(11); SH_ROWS_CASE(12); SH_ROWS_CASE(13);
    default:
        if (mr <= 4)
            SH(kernel_rows)(kc, a, 1, SH_MR, b, c, ldc, mr, nr, alpha, beta, NULL, pf, imin(4, SH_MR), 0, NULL, 0,
                            NULL);
        else SH(kernel_rows)(kc, a, 1, SH_MR, b, c, ldc, mr, nr, alpha, beta, NULL, pf, SH_MR, 0, NULL, 0, NULL);
    }
}
#undef SH_ROWS_CASE

/* MR whole rows of op(A) read in place: one inlined copy of kernel_rows per stride form
 * (ta = 1: rows contiguous, rs = 1; ta = 0: steps contiguous, ks = 1). */
static inline __attribute__((always_inline)) void SH(inplace_rows)(int kc, const float *a, size_t rs, size_t ks,
                                                                   const float *b, float *c, int ldc, int nr,
                                                                   float alpha, float beta, const float *bias,
                                                                   const prefetch_list *pf) {
    if (rs == 1) SH(kernel_rows)(kc, a, 1, ks, b, c, ldc, SH_MR, nr, alpha, beta, bias, pf, SH_MR, 0, NULL, 0, NULL);
    else SH(kernel_rows)(kc, a, rs, 1, b, c, ldc, SH_MR, nr, alpha, beta, bias, pf, SH_MR, 0, NULL, 0, NULL);
}

static void SH(kernel_inplace)(int kc, const float *a, size_t rs, size_t ks, const float *b, float *c, int ldc,
                               int nr, float alpha, float beta, const prefetch_list *pf) {
    SH(inplace_rows)(kc, a, rs, ks, b, c, ldc, nr, alpha, beta, NULL, pf);
}

static void SH(kernel_inplace_bias)(int kc, const float *a, size_t rs, size_t ks, const float *b, float *c,
                                    int ldc, int nr, float alpha, float beta, const float *bias,
                                    const prefetch_list *pf) {
    SH(inplace_rows)(kc, a, rs, ks, b, c, ldc, nr, alpha, beta, bias, pf);
}

static void SH(kernel_inplace_pack_b)(int kc, const float *a, size_t rs, size_t ks, const float *bs, size_t ldbs,
                                      float *b, float *c, int ldc, int nr, float alpha, float beta,
                                      const prefetch_list *pf) {
    if (rs == 1) SH(kernel_rows)(kc, a, 1, ks, NULL, c, ldc, SH_MR, nr, alpha, beta, NULL, pf, SH_MR, 1, bs, ldbs, b);
    else SH(kernel_rows)(kc, a, rs, 1, NULL, c, ldc, SH_MR, nr, alpha, beta, NULL, pf, SH_MR, 1, bs, ldbs, b);
}

/* A tile of nr columns that fit one W-bit vector per row (W = 512: nr <= 16, `half`;
 * 256: nr <= 8, `quarter`, where a 256-bit FMA costs half a 512-bit one, e.g. the 5-column
 * tail of attention's 197 x 197 products): the first W / 32 columns of the B panel
 * (+ bias[0:nr] on every row when bias is not NULL, a constant in each caller). */
#define SH_KERNEL_1V(name, W, mask_t, mask)                                                                  \
    static inline __attribute__((always_inline)) void name(int kc, const float *a, const float *b, float *c, \
                                                           int ldc, int mr, int nr, float alpha, float beta, \
                                                           const float *bias, const prefetch_list *pf) {     \
        __m##W acc[SH_MR];                                                                                   \
        _Pragma("GCC unroll 16") for (int i = 0; i < SH_MR; i++) acc[i] = _mm##W##_setzero_ps();             \
        const int groups = (kc + PF_GROUP - 1) / PF_GROUP; /* the last one shorter */                        \
        for (int k = 0; k < kc; k++) {                                                                       \
            if (k % PF_GROUP == 0) prefetch_group(pf, k / PF_GROUP, groups, SH_MR);                          \
            __m##W b0 = _mm##W##_load_ps(b);                                                                 \
            _Pragma("GCC unroll 16") for (int i = 0; i < SH_MR; i++) acc[i] =                                \
                _mm##W##_fmadd_ps(_mm##W##_set1_ps(a[i]), b0, acc[i]);                                       \
            a += SH_MR;                                                                                      \
            b += SH_NR;                                                                                      \
        }                                                                                                    \
        prefetch_rest(pf, groups, SH_MR);                                                                    \
        const __m##W va = _mm##W##_set1_ps(alpha), vb = _mm##W##_set1_ps(beta);                               \
        const mask_t k0 = mask;                                                                              \
        const __m##W bias0 = bias ? _mm##W##_maskz_loadu_ps(k0, bias) : _mm##W##_setzero_ps();              \
        _Pragma("GCC unroll 16") for (int i = 0; i < SH_MR; i++) {                                           \
            if (i < mr) {                                                                                    \
                float *cr = c + (size_t)i * ldc;                                                             \
                __m##W x = _mm##W##_mul_ps(acc[i], va);                                                      \
                if (beta != 0.0f) x = _mm##W##_fmadd_ps(vb, _mm##W##_maskz_loadu_ps(k0, cr), x);             \
                if (bias) x = _mm##W##_add_ps(x, bias0);                                                     \
                _mm##W##_mask_storeu_ps(cr, k0, x);                                                          \
            }                                                                                                \
        }                                                                                                    \
    }

SH_KERNEL_1V(SH(kernel_half_body), 512, __mmask16, vt512_tail((size_t)nr))
SH_KERNEL_1V(SH(kernel_quarter_body), 256, __mmask8, (__mmask8)((1u << nr) - 1u))

static void SH(kernel_half)(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr, float alpha,
                            float beta, const prefetch_list *pf) {
    SH(kernel_half_body)(kc, a, b, c, ldc, mr, nr, alpha, beta, NULL, pf);
}
static void SH(kernel_half_bias)(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,
                                 float alpha, float beta, const float *bias, const prefetch_list *pf) {
    SH(kernel_half_body)(kc, a, b, c, ldc, mr, nr, alpha, beta, bias, pf);
}
static void SH(kernel_quarter)(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,
                               float alpha, float beta, const prefetch_list *pf) {
    SH(kernel_quarter_body)(kc, a, b, c, ldc, mr, nr, alpha, beta, NULL, pf);
}

/* A last panel of nr = n <= 4 columns, turned around: the SH_MR rows in the lanes of one
 * vector (a packed A step is SH_MR contiguous floats), one FMA per column per step
 * (65 = 2 x 32 + 1 tokens leave a 1-column panel in attention's products). n is a
 * constant in each caller. */
static inline __attribute__((always_inline)) void SH(kernel_narrow_n)(int kc, const float *a, const float *b,
                                                                      float *c, int ldc, int mr, float alpha,
                                                                      float beta, const prefetch_list *pf,
                                                                      const int n) {
    const __mmask16 rows = (__mmask16)((1u << SH_MR) - 1u);
    __m512 e[4];
    for (int j = 0; j < n; j++) e[j] = _mm512_setzero_ps();
    const int groups = (kc + PF_GROUP - 1) / PF_GROUP; /* the last one shorter */
    for (int k = 0; k < kc; k++) {
        if (k % PF_GROUP == 0) prefetch_group(pf, k / PF_GROUP, groups, SH_MR);
        __m512 a0 = _mm512_maskz_loadu_ps(rows, a);
        for (int j = 0; j < n; j++) e[j] = _mm512_fmadd_ps(a0, _mm512_set1_ps(b[j]), e[j]);
        a += SH_MR;
        b += SH_NR;
    }
    prefetch_rest(pf, groups, SH_MR);
    float col[16] __attribute__((aligned(64)));
    for (int j = 0; j < n; j++) {
        _mm512_store_ps(col, _mm512_mul_ps(e[j], _mm512_set1_ps(alpha)));
        for (int i = 0; i < mr; i++) {
            float *ci = c + (size_t)i * ldc + j;
            *ci = beta != 0.0f ? fmaf(beta, *ci, col[i]) : col[i];
        }
    }
}

static void SH(kernel_narrow)(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,
                              float alpha, float beta, const prefetch_list *pf) {
    switch (nr) {
    case 1: SH(kernel_narrow_n)(kc, a, b, c, ldc, mr, alpha, beta, pf, 1); break;
    case 2: SH(kernel_narrow_n)(kc, a, b, c, ldc, mr, alpha, beta, pf, 2); break;
    case 3: SH(kernel_narrow_n)(kc, a, b, c, ldc, mr, alpha, beta, pf, 3); break;
    default: SH(kernel_narrow_n)(kc, a, b, c, ldc, mr, alpha, beta, pf, 4); break;
    }
}

static const gemm_kernels SH(kernels) = {.pack_a = SH(pack_a),
                                         .pack_b = SH(pack_b),
                                         .full = SH(kernel_full),
                                         .half = SH(kernel_half),
                                         .quarter = SH(kernel_quarter),
                                         .narrow = SH(kernel_narrow),
                                         .short_rows = SH(kernel_short),
                                         .inplace = SH(kernel_inplace),
                                         .inplace_bias = SH(kernel_inplace_bias),
                                         .full_pack_b = SH(kernel_full_pack_b),
                                         .inplace_pack_b = SH(kernel_inplace_pack_b),
                                         .add_bias = add_bias,
                                         .full_bias = SH(kernel_full_bias),
                                         .half_bias = SH(kernel_half_bias),
                                         .sum_rows = vt_avx512_sum_rows};

/* The bf16 fma path's (kernels.h): every operand element through the rounding packs, so
 * no kernel reads op(A) in place or op(B) from its source. */
static const gemm_kernels SH(kernels_bf16) = {.pack_a = SH(pack_a_round),
                                              .pack_b = SH(pack_b_round),
                                              .pack_b16 = SH(pack_b16),
                                              .full = SH(kernel_full),
                                              .half = SH(kernel_half),
                                              .quarter = SH(kernel_quarter),
                                              .narrow = SH(kernel_narrow),
                                              .short_rows = SH(kernel_short),
                                              .add_bias = add_bias,
                                              .full_bias = SH(kernel_full_bias),
                                              .half_bias = SH(kernel_half_bias),
                                              .sum_rows = vt_avx512_sum_rows};

#undef SH_NR
#undef SH_KERNEL_1V
