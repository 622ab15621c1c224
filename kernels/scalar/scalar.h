/* scalar/scalar.h - the scalar reference kernels, vt_scalar_<entry> for every entry of
 * ../entries.def (each entry's contract is there). Private to kernels/. */
#ifndef VT_KERNELS_SCALAR_H
#define VT_KERNELS_SCALAR_H

#include <stddef.h>

#include "../level.h"

#define VT_KERNEL(name, ret, params) VT_LEVEL_PROTOTYPE(scalar, name)
#include "../entries.def"
#undef VT_KERNEL

#endif
