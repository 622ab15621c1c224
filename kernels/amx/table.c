/* amx/table.c - the AMX level: avx512bf16's table with gemm_bf16 on the tile unit. */
#include "amx.h"

void vt_kernels_fill_amx(vt_kernels *t) { VT_AMX_ENTRIES(VT_LEVEL_SET) }
