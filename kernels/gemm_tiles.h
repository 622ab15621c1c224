/* gemm_tiles.h - private to kernels/: the register tile (MR rows x NR columns) of each
 * level's GEMM microkernel, owned here so that the kernels and the rules a blocking
 * context must keep (gemm_context.c: mc a multiple of MR, nc of NR) read one value. */
#ifndef VT_KERNELS_GEMM_TILES_H
#define VT_KERNELS_GEMM_TILES_H

#define VT_AVX2_MR 6        /* avx2/gemm.c: 12 ymm accumulators */
#define VT_AVX2_NR 16
#define VT_AVX512_MR 14     /* avx512/gemm.c: 28 zmm accumulators */
#define VT_AVX512_NR 32
#define VT_AVX512BF16_MR 14 /* avx512bf16/gemm.c: 28 zmm accumulators */
#define VT_AMX_MR 32        /* amx/gemm.c: two 16-row A tiles */
#define VT_BF16_NR 32       /* both bf16 kernels: two 16-column vectors / B tiles */

#endif
