/* amx/emulated.h - test-only: the AMX tile intrinsics kernels/amx/ uses, in C, so its
 * kernels run (slowly) on any CPU: included by amx.h instead of the native intrinsics
 * when VT_AVX512_EMULATED is defined (`make emu` and `make test`'s emulation lane, build
 * tree build-emu512; never in the normal build).
 *
 * State per thread: the palette-1 configuration and eight tile registers of 16 rows x
 * 64 bytes, as arrays. Semantics as Intel's SDM documents them:
 *   _tile_loadconfig(cfg)       the 64-byte config (palette, start row, colsb[16] bytes
 *                               per row, rows[16]); palette 1: tiles 0-7, at most 16 rows
 *                               of 64 bytes; palette 0 releases;
 *   _tile_loadd(t, p, stride)   rows[t] rows of colsb[t] bytes from p + r stride, the rest
 *                               of the register zero; _tile_stream_loadd (TILELOADDT1) the
 *                               same (its caching hint has no effect on values);
 *   _tile_stored(t, p, stride)  the same rows written; _tile_zero(t) zeroes;
 *   _tile_dpbf16ps(c, a, b)     TDPBF16PS: for each row m of c and column n, the even and
 *                               the odd steps of a's row m against b's column n (b's row k
 *                               holds pair k of every column) in two float32 sums from
 *                               zero, each step an FMA rounded to nearest even with
 *                               denormal inputs read as zero and results flushed to zero,
 *                               then their sum added to c[m][n] (same rounding);
 *   _tile_release()             back to the initial, unconfigured state.
 * What the hardware faults on traps here (__builtin_trap): a tile used unconfigured, a
 * bad configuration, shapes that do not match in TDPBF16PS (a.colsb / 4 != b.rows,
 * c.colsb != b.colsb, c.rows != a.rows). */
#ifndef VT_KERNELS_AMX_EMULATED_H
#define VT_KERNELS_AMX_EMULATED_H

#include <stdint.h>
#include <string.h>

#include "../bf16.h"

typedef struct {
    int configured;
    uint16_t colsb[8];
    uint8_t rows[8];
    unsigned char t[8][16][64];
} vt_emu_tiles;

static _Thread_local vt_emu_tiles vt_emu_tile_state;

static inline void vt_emu_tile_loadconfig(const void *cfg) {
    const unsigned char *c = cfg;
    vt_emu_tiles *s = &vt_emu_tile_state;
    memset(s, 0, sizeof *s);
    if (c[0] == 0) return;          /* palette 0: the initial state */
    if (c[0] != 1) __builtin_trap(); /* only palette 1 exists */
    for (int i = 0; i < 16; i++) {
        uint16_t colsb;
        memcpy(&colsb, c + 16 + 2 * i, 2);
        uint8_t rows = c[48 + i];
        if (i >= 8) {
            if (colsb || rows) __builtin_trap(); /* palette 1 has 8 tiles */
            continue;
        }
        if (rows > 16 || colsb > 64 || (rows == 0) != (colsb == 0)) __builtin_trap();
        s->colsb[i] = colsb;
        s->rows[i] = rows;
    }
    s->configured = 1;
}

static inline void vt_emu_tile_check(int t) {
    const vt_emu_tiles *s = &vt_emu_tile_state;
    if (!s->configured || t < 0 || t > 7 || s->rows[t] == 0) __builtin_trap();
}

static inline void vt_emu_tile_loadd(int t, const void *base, long stride) {
    vt_emu_tile_check(t);
    vt_emu_tiles *s = &vt_emu_tile_state;
    memset(s->t[t], 0, sizeof s->t[t]);
    for (int r = 0; r < s->rows[t]; r++) memcpy(s->t[t][r], (const char *)base + r * stride, s->colsb[t]);
}

static inline void vt_emu_tile_stored(int t, void *base, long stride) {
    vt_emu_tile_check(t);
    vt_emu_tiles *s = &vt_emu_tile_state;
    for (int r = 0; r < s->rows[t]; r++) memcpy((char *)base + r * stride, s->t[t][r], s->colsb[t]);
}

static inline void vt_emu_tile_zero(int t) {
    vt_emu_tile_check(t);
    memset(vt_emu_tile_state.t[t], 0, sizeof vt_emu_tile_state.t[t]);
}

/* The bf16 element at p, as TDPBF16PS reads it (denormals as zero). */
static inline float vt_emu_tile_bf16(const unsigned char *p) {
    vt_bf16 h;
    memcpy(&h, p, sizeof h);
    return vt_bf16_ftz(vt_bf16_float(h));
}

static inline void vt_emu_tile_dpbf16ps(int c, int a, int b) {
    vt_emu_tile_check(c);
    vt_emu_tile_check(a);
    vt_emu_tile_check(b);
    vt_emu_tiles *s = &vt_emu_tile_state;
    if (s->colsb[a] / 4 != s->rows[b] || s->colsb[c] != s->colsb[b] || s->rows[c] != s->rows[a] ||
        s->colsb[c] % 4 || s->colsb[a] % 4)
        __builtin_trap();
    int K = s->colsb[a] / 4, N = s->colsb[c] / 4;
    for (int m = 0; m < s->rows[c]; m++) {
        float even[16] = {0}, odd[16] = {0};
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                const unsigned char *pa = s->t[a][m] + 4 * k, *pb = s->t[b][k] + 4 * n;
                even[n] = vt_bf16_ftz(fmaf(vt_emu_tile_bf16(pa), vt_emu_tile_bf16(pb), even[n]));
                odd[n] = vt_bf16_ftz(fmaf(vt_emu_tile_bf16(pa + 2), vt_emu_tile_bf16(pb + 2), odd[n]));
            }
        for (int n = 0; n < N; n++) {
            float acc;
            memcpy(&acc, s->t[c][m] + 4 * n, sizeof acc);
            acc = vt_bf16_ftz(vt_bf16_ftz(acc) + vt_bf16_ftz(even[n] + odd[n]));
            memcpy(s->t[c][m] + 4 * n, &acc, sizeof acc);
        }
        memset(s->t[c][m] + s->colsb[c], 0, 64 - (size_t)s->colsb[c]); /* the row past colsb */
    }
    for (int m = s->rows[c]; m < 16; m++) memset(s->t[c][m], 0, 64); /* the rows past rows */
}

static inline void vt_emu_tile_release(void) { memset(&vt_emu_tile_state, 0, sizeof vt_emu_tile_state); }

/* <immintrin.h> defines the tile macros whatever the flags: these replace them */
#undef _tile_loadd
#undef _tile_stream_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbf16ps
#define _tile_loadconfig(cfg) vt_emu_tile_loadconfig(cfg)
#define _tile_loadd(t, base, stride) vt_emu_tile_loadd(t, base, (long)(stride))
#define _tile_stream_loadd(t, base, stride) vt_emu_tile_loadd(t, base, (long)(stride))
#define _tile_stored(t, base, stride) vt_emu_tile_stored(t, base, (long)(stride))
#define _tile_zero(t) vt_emu_tile_zero(t)
#define _tile_dpbf16ps(c, a, b) vt_emu_tile_dpbf16ps(c, a, b)
#define _tile_release() vt_emu_tile_release()

#endif
