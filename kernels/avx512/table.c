/* avx512/table.c - the AVX-512 level: overrides every entry of the table. */
#include "avx512.h"

void vt_kernels_fill_avx512(vt_kernels *t) {
#define VT_KERNEL(name, ret, params) VT_LEVEL_SET(avx512, name)
#include "../entries.def"
#undef VT_KERNEL
}
