/* kernels.h - the SIMD primitives: the only kernel header the rest of vitrain uses.
 *
 * Kernels see raw pointers and sizes only: no tensors, no tape, no allocation, no
 * threads, no printing. The table's entries and their contracts are listed once, in
 * entries.def. Every entry exists as scalar C in kernels/scalar/ (the specification);
 * each higher level (kernels/<level>/) overrides the entries it lists. At start-up
 * vt_kernels_init() probes CPUID/XGETBV, fills the table scalar-first and overrides
 * level by level up to the chosen one; VT_ISA=<level> forces a level (an error if the
 * CPU or OS lacks it).
 */
#ifndef VT_KERNELS_H
#define VT_KERNELS_H

#include <stddef.h>

/* The levels, each including the ones below it. */
typedef enum { VT_ISA_SCALAR = 0, VT_ISA_AVX2 = 1, VT_ISA_AVX512 = 2 } vt_isa;
#define VT_ISA_COUNT 3

/* A rows x len block of floats at base, row stride ld floats (rows == 0: none). */
typedef struct {
    const float *base;
    size_t ld;
    int rows, len;
} vt_region;

/* vt_kernel_<name>_fn: the function type of each entry. */
#define VT_KERNEL(name, ret, params) typedef ret vt_kernel_##name##_fn params;
#include "entries.def"
#undef VT_KERNEL

typedef struct vt_kernels {
    vt_isa isa;
    const char *name; /* the level's name ("avx512-emulated" etc. in the emulation build) */
#define VT_KERNEL(name, ret, params) vt_kernel_##name##_fn *name;
#include "entries.def"
#undef VT_KERNEL
} vt_kernels;

/* The active table (valid after vt_kernels_init). */
extern vt_kernels vt_k;

/* Probe the CPU, honour VT_ISA, fill vt_k. Returns 0, or -1 with a message in
 * err (VT_ISA unknown or not supported by this CPU/OS). Idempotent. */
int vt_kernels_init(char *err, size_t errlen);
/* Highest level this CPU and OS support. */
vt_isa vt_kernels_best_isa(void);
/* Fill t with the table for a given level (for tests comparing levels);
 * returns -1 if the CPU lacks it. */
int vt_kernels_table(vt_isa isa, vt_kernels *t);
/* The level's name as VT_ISA spells it ("scalar", "avx2", ...). */
const char *vt_kernels_isa_name(vt_isa isa);

#endif
