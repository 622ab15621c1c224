/* scalar/table.c - the scalar level of the dispatch table: every entry. */
#include "scalar.h"

void vt_kernels_fill_scalar(vt_kernels *t) {
#define VT_KERNEL(name, ret, params) VT_LEVEL_SET(scalar, name)
#include "../entries.def"
#undef VT_KERNEL
}
