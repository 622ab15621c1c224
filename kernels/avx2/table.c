/* avx2/table.c - the AVX2+FMA level: overrides the entries it implements. */
#include "../kernels.h"

void vt_kernels_fill_avx2(vt_kernels *t) {
    t->isa = VT_ISA_AVX2;
    t->name = "avx2";
}
