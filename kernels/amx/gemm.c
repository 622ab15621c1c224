/* amx/gemm.c - the bf16 GEMM on AMX tiles (TDPBF16PS), BLIS-style (contract in
 * ../entries.def, numerics in ../kernels.h):
 *   C = alpha op(A') op(B') + beta C (+ bias), A', B' rounded to bf16, float32 sums.
 * The blocking loops and the C tile's epilogue are ../gemm_bf16_driver.h, packed B is
 * avx512bf16's (../avx512bf16/avx512bf16.h), both shared with avx512bf16/gemm.c; this
 * file holds the packing of op(A), K blocks of whole 32-step tiles and the 32 x 32
 * microkernel: four float32 C tiles (tmm0-3, 16 x 16 each) from zero, per 32 steps two
 * A tiles (tmm4-5: 16 rows x 16 pairs) and two B tiles (tmm6-7: 16 pairs x 16 columns,
 * the pair-interleaved rows TDPBF16PS reads) and four TDPBF16PS; then the tiles stored
 * straight to C when they are the result (a whole tile, alpha 1, beta 0, no bias), else
 * to a 32 x 32 buffer and applied to C with AVX-512 (alpha, beta, bias, masked to the
 * valid rows and columns).
 * Caching: the driver runs the A panels of an M block under one B panel, so the B panel
 * is the operand worth keeping in L1 and the A tiles are loaded with TILELOADDT1 (the
 * streamed operand's hint); each call brings the next call's C tile (c_next) into L2,
 * a share of its rows per 32 steps, so that its stores (or its epilogue's loads) do not
 * wait on memory.
 * Packed A panel: MR rows of kc2p words (pairs of steps, low half the even step) laid out
 * tile by tile, so that each A tile (16 rows of 64 bytes) is one contiguous read (a row
 * stride of a whole packed row would make every tile load 16 separate streams): row i's
 * pair p at (p / 16) 16 MR + 16 i + p % 16, rows past M and pairs past K zero; kc2p is a
 * multiple of 16 (a tile's pairs); the tile of rows 16 h.. 16 h + 15 and pairs 16 t.. at
 * word 16 MR t + 256 h.
 * K == 0 or alpha == 0 gives C = beta C (+ bias) without reading A or B. Each other call
 * loads the tile configuration (palette 1, eight 16 x 64-byte tiles) and releases the
 * tiles at its end.
 * work: vt_amx_gemm_bf16_work_floats(M, N, K) floats, 64-byte aligned. gemm_bf16_pack_b,
 * gemm_bf16_packed_b, gemm_bf16_pack_a and gemm_bf16_packed_a: the same loops on op(B) or
 * op(A) packed once (../gemm_bf16_driver.h). */
#include "amx.h"
#include "../gemm_bf16_driver.h"

#define MR VT_AMX_MR  /* two 16-row A tiles */
#define NR VT_BF16_NR /* two 16-column B tiles */

/* K blocks of at most kc steps (whole 32-step tiles), packed rows of whole 16-pair tiles,
 * M blocks of mc rows, N blocks of nc columns: this CPU's context's (../gemm_context.c). */
static inline bf16_blocking blocking(void) {
    bf16_blocking bl = {.mr = MR, .kc = vt_gemm_ctx.amx.kc, .mc = vt_gemm_ctx.amx.mc, .nc = vt_gemm_ctx.amx.nc,
                        .k_step = 32, .pair_step = 16, .prefetch = 0};
    return bl;
}

/* Pack rows [i0, i0 + mc) x steps [p0, p0 + kc) of op(A) (float32, rounded) into MR-row
 * panels of kc2p words per row at dst. */
static void pack_a(int ta, const float *A, int lda, int i0, int p0, int mc, int kc, int kc2p, uint32_t *dst) {
    const __m512i inter = vt_bf16_interleave_idx(16);
    for (int ir = 0; ir < mc; ir += MR, dst += (size_t)MR * kc2p) {
        int rows = imin(MR, mc - ir);
        if (!ta) { /* a row of A: 32 steps are 16 words */
            for (int i = 0; i < MR; i++) {
                uint32_t *d = dst + (size_t)i * 16;
                const float *s = A + (size_t)(i0 + ir + i) * lda + p0;
                for (int k0 = 0; k0 < 2 * kc2p; k0 += 32) {
                    int kk = i < rows && k0 < kc ? imin(32, kc - k0) : 0;
                    __m512 lo = _mm512_maskz_loadu_ps(vt512_tail((size_t)kk), s + k0);
                    __m512 hi = _mm512_maskz_loadu_ps(vt512_tail((size_t)(kk > 16 ? kk - 16 : 0)), s + k0 + 16);
                    _mm512_store_si512(d + (size_t)(k0 / 32) * MR * 16, vt_cvtne2ps(hi, lo));
                }
            }
        } else { /* A is K x M: 16 rows x 16 pairs at a time, interleaved then transposed; per 32
                  * steps both 16-row halves (a step's MR floats are adjacent), while the next 32
                  * steps' rows are brought into L1 (each step is a row of A, lda floats apart) */
            for (int q = 0; q < kc2p; q += 16) {
                for (int k = 2 * (q + 16); k < 2 * (q + 32) && k < kc; k++) {
                    const float *next = A + (size_t)(p0 + k) * lda + i0 + ir;
                    _mm_prefetch((const char *)next, _MM_HINT_T0);
                    if (rows > 16) _mm_prefetch((const char *)(next + 16), _MM_HINT_T0);
                }
                for (int i16 = 0; i16 < MR; i16 += 16) {
                    int n = rows - i16 < 0 ? 0 : imin(16, rows - i16);
                    __mmask16 rm = vt512_tail((size_t)n);
                    const float *s = A + (size_t)p0 * lda + i0 + ir + i16;
                    __m512 r[16];
#pragma GCC unroll 16
                    for (int m = 0; m < 16; m++) {
                        int k = 2 * (q + m);
                        __m512 e = k < kc ? _mm512_maskz_loadu_ps(rm, s + (size_t)k * lda) : _mm512_setzero_ps();
                        __m512 o = k + 1 < kc ? _mm512_maskz_loadu_ps(rm, s + (size_t)(k + 1) * lda) : _mm512_setzero_ps();
                        r[m] = _mm512_castsi512_ps(_mm512_permutexvar_epi16(inter, vt_cvtne2ps(o, e)));
                    }
                    vt512_transpose16(r);
                    for (int i = 0; i < 16; i++) _mm512_store_ps(dst + (size_t)q * MR + (size_t)(i16 + i) * 16, r[i]);
                }
            }
        }
    }
}

/* c[0:mr, 0:nr] = alpha (A panel)(B panel) + beta c (+ bias) over kc2p pairs
 * (bf16_micro_fn); c_next's MR rows of NR floats (two 64-byte halves each) are brought
 * into L2 over the K loop. */
static void kernel_32x32(int kc2p, const uint32_t *a, const uint32_t *b, float *c, int ldc, int mr, int nr,
                         float alpha, float beta, const float *bias, const float *c_next) {
    float t[MR * NR] __attribute__((aligned(64)));
    const size_t as = 64, bs = NR * 4; /* tile row strides in bytes */
    const int halves = 2 * MR, per_step = (halves + kc2p / 16 - 1) / (kc2p / 16); /* prefetches per 32 steps */
    int h = 0;                                                                   /* c_next's next half-row */
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int p = 0; p < kc2p; p += 16) {
        for (int q = 0; q < per_step && h < halves; q++, h++)
            _mm_prefetch((const char *)(c_next + (size_t)(h >> 1) * ldc + (h & 1) * 16), _MM_HINT_T1);
        _tile_stream_loadd(4, a + (size_t)p * MR, as);
        _tile_stream_loadd(5, a + (size_t)p * MR + 256, as);
        _tile_loadd(6, b + (size_t)p * NR, bs);
        _tile_loadd(7, b + (size_t)p * NR + 16, bs);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    if (mr == MR && nr == NR && alpha == 1.0f && beta == 0.0f && !bias) { /* C = the sums, bitwise */
        const size_t cs = (size_t)ldc * 4;
        _tile_stored(0, c, cs);
        _tile_stored(1, c + 16, cs);
        _tile_stored(2, c + (size_t)16 * ldc, cs);
        _tile_stored(3, c + (size_t)16 * ldc + 16, cs);
        return;
    }
    _tile_stored(0, t, NR * 4);
    _tile_stored(1, t + 16, NR * 4);
    _tile_stored(2, t + 16 * NR, NR * 4);
    _tile_stored(3, t + 16 * NR + 16, NR * 4);
    const bf16_epilogue e = bf16_epilogue_of(nr, alpha, beta, bias, 2);
    for (int i = 0; i < mr; i++)
        bf16_store_row(&e, c + (size_t)i * ldc, _mm512_load_ps(t + i * NR), _mm512_load_ps(t + i * NR + 16), 2);
}

/* Every entry's product (BF16_ENTRY_POINTS), on the tiles: the tile configuration loaded
 * around the blocked loops. */
static void product(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                    const vt_bf16 *B16, int ldb, float beta, const float *bias, float *C, int ldc, float *work,
                    const vt_region next[2], const uint32_t *packed, const uint32_t *packed_a,
                    const gemm_col_sums *cs) {
    if (vt512_gemm_no_product(M, N, K, alpha, beta, bias, C, ldc)) return;
    /* palette 1: tiles 0-7 of 16 rows x 64 bytes (colsb at byte 16 + 2 t, rows at 48 + t) */
    unsigned char cfg[64] __attribute__((aligned(64))) = {0};
    cfg[0] = 1;
    for (int t = 0; t < 8; t++) cfg[16 + 2 * t] = 64, cfg[48 + t] = 16;
    _tile_loadconfig(cfg);
    const bf16_blocking bl = blocking();
    gemm_bf16_blocked(&bl, pack_a, vt_avx512bf16_pack_b, kernel_32x32, ta, tb, M, N, K, alpha, A, lda, B, B16, ldb,
                      beta, bias, C, ldc, work, next, packed, packed_a, cs);
    _tile_release();
}

BF16_ENTRY_POINTS(amx)
