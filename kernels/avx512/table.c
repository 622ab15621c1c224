/* avx512/table.c - the AVX-512 level: overrides the entries it implements. */
#include "../kernels.h"

void vt_kernels_fill_avx512(vt_kernels *t) {
    t->isa = VT_ISA_AVX512;
    t->name = "avx512";
}
