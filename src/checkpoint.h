/* checkpoint.h - safetensors files (read: F32, BF16, F16 as float32; written: F32), atomic.
 *
 * Format (huggingface safetensors): 8-byte little-endian header length n, then n
 * bytes of JSON {"name": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]},
 * ..., "__metadata__": {"key": "string value", ...}}, then the raw little-endian
 * data. Reading validates the header JSON, dtypes, shapes against offsets, offsets
 * against the file size, overlap and coverage, and reports the file and tensor name
 * on any violation. Writing goes to PATH.tmp, is flushed and fsynced, then renamed.
 */
#ifndef VT_CHECKPOINT_H
#define VT_CHECKPOINT_H

#include <stdint.h>

#include "status.h"

typedef struct {
    char name[160];
    int ndim;
    int64_t shape[8];
    int64_t size;          /* elements */
    char dtype[8];         /* read: the dtype stored in the file (F32, BF16, F16); data is
                              float32 whatever it is (checkpoint_dtype.h). write: ignored */
    float *data;           /* read: points into the file buffer; write: caller's */
} vt_st_tensor;

typedef struct {
    int n;
    vt_st_tensor *tensors;
    int n_meta;
    char **meta_keys, **meta_values;
    void *buffer;          /* owns tensor data after a read */
} vt_safetensors;

/* Write n tensors plus metadata (n_meta key/value strings; may be 0). Atomic. */
vt_status vt_st_write(const char *path, const vt_st_tensor *tensors, int n,
                      const char *const *meta_keys, const char *const *meta_values, int n_meta);
/* Read and validate a whole file. On error nothing is left allocated. */
vt_status vt_st_read(const char *path, vt_safetensors *out);
void vt_st_free(vt_safetensors *st);
/* Tensor by name, or NULL. */
const vt_st_tensor *vt_st_find(const vt_safetensors *st, const char *name);
/* Metadata value by key, or NULL. */
const char *vt_st_meta(const vt_safetensors *st, const char *key);

/* Write a float32 C-order NumPy .npy file (version 1.0), atomically. */
vt_status vt_npy_write(const char *path, const float *data, int ndim, const int64_t *shape);

#endif
