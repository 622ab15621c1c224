/* checkpoint_dtype.h - the element types a safetensors file may store and their exact
 * widening to float32.
 *
 * Owns: which dtypes the reader accepts (F32, BF16, F16: every value of each is exactly
 * representable in float32, so reading them loses nothing) and the conversion. Does not
 * own the file format (safetensors.c) nor what the tensors mean (weights.c, vit.c).
 * Every checkpoint tensor is float32 once read; files we write are float32.
 */
#ifndef VT_CHECKPOINT_DTYPE_H
#define VT_CHECKPOINT_DTYPE_H

#include <stdint.h>

#include "status.h"

/* Bytes per element of a safetensors dtype the reader accepts (F32 4, BF16 2, F16 2),
 * or 0 for any other ("F64", "I64", ...). */
int vt_st_dtype_size(const char *dtype);

/* Widen n elements of dtype (accepted by vt_st_dtype_size) at src (any alignment,
 * little-endian) to float32 at dst, exactly: BF16 is the high half of a float32; F16
 * normals, subnormals, zeros, infinities and NaNs (payload kept) map to the same value. */
void vt_st_widen(const char *dtype, const void *src, float *dst, int64_t n);

#endif
