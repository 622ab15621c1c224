/* level.h - private to kernels/: how a level declares the entries it implements and
 * fills its part of the table, both made from one list.
 * The scalar level is the specification and implements every entry: it walks entries.def,
 *   #define VT_KERNEL(name, ret, params) VT_LEVEL_PROTOTYPE(scalar, name)   (its header)
 *   #define VT_KERNEL(name, ret, params) VT_LEVEL_SET(scalar, name)         (its table.c)
 *   #include "../entries.def"
 * so an entry without a scalar version does not link. Every other level lists the entries
 * it implements, once, in its header,
 *   #define VT_AMX_ENTRIES(X) X(amx, gemm_bf16) X(amx, gemm_bf16_work_floats)
 * and expands the list with VT_LEVEL_PROTOTYPE there and VT_LEVEL_SET in its table.c:
 * a listed entry without its implementation does not link, and an entry it does not list
 * keeps the level below's. A new entry needs its entries.def line and its scalar version;
 * a SIMD version is added to a level, and to its list, where it pays.
 * vt_kernels_fill_<level>(vt_kernels *t) sets the listed entries of t, nothing else;
 * kernels/dispatch.c calls the fills level by level. */
#ifndef VT_KERNELS_LEVEL_H
#define VT_KERNELS_LEVEL_H

#include "kernels.h"

/* The declaration of level's implementation of entry: vt_<level>_<entry>. */
#define VT_LEVEL_PROTOTYPE(level, entry) vt_kernel_##entry##_fn vt_##level##_##entry;
/* Inside vt_kernels_fill_<level>: t's entry points at the level's implementation. */
#define VT_LEVEL_SET(level, entry) t->entry = vt_##level##_##entry;

void vt_kernels_fill_scalar(vt_kernels *t);
void vt_kernels_fill_avx2(vt_kernels *t);
void vt_kernels_fill_avx512(vt_kernels *t);
void vt_kernels_fill_avx512bf16(vt_kernels *t);
void vt_kernels_fill_amx(vt_kernels *t);

#endif
