/* npz.h - NumPy .npy files, archives (.npz) written in one pass, and the .npy header.
 *
 * Owns: the .npy header (format version 1.0, as numpy 1.24 writes it: the dict with
 * sorted keys, spare spaces so the first axis can grow, '\n'-terminated padding to a
 * multiple of 64 bytes) for any dtype descr, and the .npz container: a ZIP archive of
 * NAME.npy entries, stored (not compressed), CRC-32 from zlib, which numpy.load reads
 * as a mapping NAME -> array (no pickle needed: float32 '<f4', int64 '<i8' and fixed-width
 * unicode '<U<n>' arrays only). Entries are written as they are added to PATH.tmp,
 * which vt_npz_close commits to PATH (durable.h: a crash never leaves a half-written
 * file); vt_npz_abort removes it. Without ZIP64 an archive is limited to
 * 4 GiB (an error beyond). Does not own what the arrays mean (main.c's eval).
 */
#ifndef VT_NPZ_H
#define VT_NPZ_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Write a float32 C-order NumPy .npy file (version 1.0), atomically and durably. */
vt_status vt_npy_write(const char *path, const float *data, int ndim, const int64_t *shape);

/* The .npy header (magic, version 1.0, length, dict, padding) of a C-order array of
 * dtype descr ("<f4") and shape; malloc'd, its byte count in *len. */
unsigned char *vt_npy_header(const char *descr, int ndim, const int64_t *shape, size_t *len);

typedef struct vt_npz vt_npz;

/* Start PATH (as PATH.tmp). Errors (VT_ERR_RUNTIME) name the file. */
vt_status vt_npz_open(vt_npz **out, const char *path);
/* Add NAME.npy: float32 / int64 data in C order. */
vt_status vt_npz_add_f32(vt_npz *z, const char *name, const float *data, int ndim, const int64_t *shape);
vt_status vt_npz_add_i64(vt_npz *z, const char *name, const int64_t *data, int ndim, const int64_t *shape);
/* Add NAME.npy: n UTF-8 strings as a 1-D '<U<w>' array, w the longest in code points
 * (numpy's str arrays are UTF-32; invalid UTF-8 bytes become U+FFFD). */
vt_status vt_npz_add_str(vt_npz *z, const char *name, const char *const *strs, int64_t n);
/* Write the central directory and commit PATH; frees z in every case. */
vt_status vt_npz_close(vt_npz *z);
/* Remove PATH.tmp and free z (NULL is fine). */
void vt_npz_abort(vt_npz *z);

#endif
