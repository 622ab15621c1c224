/* gemm_tiles.h - private to kernels/: the register tile (MR rows x NR columns) of each
 * level's GEMM microkernel, owned here so that the kernels and the rules a blocking
 * context must keep (gemm_context.c: mc a multiple of MR, nc of NR) read one value. */
#ifndef VT_KERNELS_GEMM_TILES_H
#define VT_KERNELS_GEMM_TILES_H

#define VT_AVX2_MR 6        /* avx2/gemm.c: 12 ymm accumulators */
#define VT_AVX2_NR 16
/* avx512/gemm.c's shapes X(MR, NV, NR), NR = 16 NV columns, MR NV zmm accumulators
 * (at most 28: with NV of B and a broadcast, at most the 32 zmm); a CPU's context
 * picks one (gemm_context.c: avx512.mr, avx512.nr). */
#define VT_AVX512_SHAPES(X) X(14, 2, 32) X(12, 2, 32) X(9, 3, 48) X(8, 3, 48) X(6, 4, 64)
#define VT_AVX512BF16_MR 14 /* avx512bf16/gemm.c: 28 zmm accumulators */
#define VT_AMX_MR 32        /* amx/gemm.c: two 16-row A tiles */
#define VT_BF16_NR 32       /* both bf16 kernels: two 16-column vectors / B tiles */

#endif
