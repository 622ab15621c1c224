/* level.h - private to kernels/: how a level declares the entries it implements and
 * fills its part of the table, both made from one list.
 * A level that overrides every entry (scalar, avx2, avx512) walks entries.def itself:
 *   #define VT_KERNEL(name, ret, params) VT_LEVEL_PROTOTYPE(avx2, name)   (its header)
 *   #define VT_KERNEL(name, ret, params) VT_LEVEL_SET(avx2, name)         (its table.c)
 *   #include "../entries.def"
 * A level that overrides a few lists them once in its header,
 *   #define VT_AMX_ENTRIES(X) X(amx, gemm_bf16) X(amx, gemm_bf16_work_floats)
 * and expands the list with VT_LEVEL_PROTOTYPE there and VT_LEVEL_SET in its table.c.
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
