/* amx/amx.h - private to kernels/amx/: the AMX level's entries (gemm_bf16 and gemm_sums
 * on the tile unit, over avx512bf16's table) and the tile intrinsics: the native ones
 * (compiled with -mamx-tile -mamx-bf16), or in the emulation build (VT_AVX512_EMULATED)
 * the C tiles of emulated.h. The process's permission to use tile data (Linux arch_prctl)
 * is requested by the CPU probe, kernels/dispatch.c. */
#ifndef VT_KERNELS_AMX_H
#define VT_KERNELS_AMX_H

#include "../avx512bf16/avx512bf16.h"

#ifdef VT_AVX512_EMULATED
#include "emulated.h"
#endif

#define VT_AMX_ENTRIES(X)                                                                                    \
    X(amx, gemm_bf16) X(amx, gemm_bf16_work_floats) X(amx, gemm_bf16_packed_b_floats) X(amx, gemm_bf16_pack_b) \
        X(amx, gemm_bf16_packed_b) X(amx, gemm_bf16_packed_a_floats) X(amx, gemm_bf16_pack_a)                 \
        X(amx, gemm_bf16_packed_a) X(amx, gemm_sums)
VT_AMX_ENTRIES(VT_LEVEL_PROTOTYPE)

#endif
