/* avx2/table.c - the AVX2+FMA level: overrides every entry of the table. */
#include "avx2.h"

void vt_kernels_fill_avx2(vt_kernels *t) {
#define VT_KERNEL(name, ret, params) VT_LEVEL_SET(avx2, name)
#include "../entries.def"
#undef VT_KERNEL
}
