/* avx512/table.c - the AVX-512 level: overrides the entries its header lists. */
#include "avx512.h"

void vt_kernels_fill_avx512(vt_kernels *t) { VT_AVX512_ENTRIES(VT_LEVEL_SET) }
