/* kernels.h - the SIMD primitives: the only kernel header the rest of vitrain uses.
 *
 * Kernels see raw pointers and sizes only: no tensors, no tape, no allocation, no
 * threads, no printing. The table's entries and their contracts are listed once, in
 * entries.def. Every entry exists as scalar C in kernels/scalar/ (the specification);
 * each higher level (kernels/<level>/) overrides the entries it lists. At start-up
 * vt_kernels_init() probes CPUID/XGETBV, fills the table scalar-first and overrides
 * level by level up to the chosen one; VT_ISA=<level> forces a level (an error if the
 * CPU or OS lacks it).
 *
 * bf16 numerics (train.precision = bf16: the entries gemm_bf16 and bf16_round).
 * - bf16 is the upper half of a float32: sign, 8 exponent bits, 7 mantissa bits (vt_bf16).
 *   Rounding a float32 to bf16 is VCVTNEPS2BF16's: to nearest, ties to even; a zero or
 *   denormal gives a zero of its sign; an infinity stays one; a NaN stays a NaN, made
 *   quiet. Every level rounds bitwise the same.
 * - gemm_bf16 multiplies the operands rounded to bf16 (when packed, or a weight's copy
 *   made by bf16_round) and accumulates in float32: a product of two bf16 values is
 *   exact in float32 (8 x 8 significant bits), so the result differs from the exact sum
 *   of the rounded products by the float32 accumulation alone.
 * - Accumulation order per level. scalar (the reference): k ascending in one float32
 *   accumulator per element. avx2, avx512 (no bf16 hardware): op(A) and op(B) rounded to
 *   bf16 into float32 buffers, K chunk by K chunk, and multiplied by that level's fp32
 *   gemm (its order; the same numerics, not faster). avx512bf16: VDPBF16PS, per pair of
 *   steps (k, k + 1) the k + 1 product then the k product, each a float32 fused
 *   multiply-add rounded to nearest even with denormal inputs read as zero and denormal
 *   results flushed to zero, K blocks summed into C. amx: TDPBF16PS, per tile of 32
 *   steps the even and the odd steps in two float32 sums from zero (same rounding and
 *   flushing), added to each other, then to the accumulator.
 * - So levels differ only in summation order (and flushed denormals): every level is
 *   within |C - C_ref| <= 2.4e-7 (K + 4) S + K 2^-126, S = |alpha| sum_k |a' b'| +
 *   |beta C0|, of the scalar reference (tests/test_kernels.c checks it), and is
 *   deterministic for a fixed level and thread count.
 */
#ifndef VT_KERNELS_H
#define VT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* The levels, each including the ones below it. */
typedef enum {
    VT_ISA_SCALAR = 0,
    VT_ISA_AVX2 = 1,       /* AVX2 + FMA */
    VT_ISA_AVX512 = 2,     /* AVX-512 F/BW/DQ/VL */
    VT_ISA_AVX512BF16 = 3, /* + AVX512_BF16 (VDPBF16PS) */
    VT_ISA_AMX = 4         /* + AMX-TILE, AMX-BF16 (TDPBF16PS) */
} vt_isa;
#define VT_ISA_COUNT 5

/* A rows x len block of floats at base, row stride ld floats (rows == 0: none). */
typedef struct {
    const float *base;
    size_t ld;
    int rows, len;
} vt_region;

/* A bf16 value: the upper 16 bits of a float32 (see the numerics above). */
typedef uint16_t vt_bf16;

/* vt_kernel_<name>_fn: the function type of each entry. */
#define VT_KERNEL(name, ret, params) typedef ret vt_kernel_##name##_fn params;
#include "entries.def"
#undef VT_KERNEL

typedef struct vt_kernels {
    vt_isa isa;
    const char *name; /* the level's name ("avx512-emulated" etc. in the emulation build) */
#define VT_KERNEL(name, ret, params) vt_kernel_##name##_fn *name;
#include "entries.def"
#undef VT_KERNEL
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
/* The level's name as VT_ISA spells it ("scalar", "avx2", ...). */
const char *vt_kernels_isa_name(vt_isa isa);

#endif
