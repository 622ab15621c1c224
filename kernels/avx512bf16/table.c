/* avx512bf16/table.c - the AVX512-BF16 level: avx512's table with the bf16 entries on
 * VDPBF16PS and VCVTNEPS2BF16. */
#include "avx512bf16.h"

void vt_kernels_fill_avx512bf16(vt_kernels *t) { VT_AVX512BF16_ENTRIES(VT_LEVEL_SET) }
