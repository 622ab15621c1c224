/* avx2/table.c - the AVX2+FMA level: overrides the entries its header lists. */
#include "avx2.h"

void vt_kernels_fill_avx2(vt_kernels *t) { VT_AVX2_ENTRIES(VT_LEVEL_SET) }
