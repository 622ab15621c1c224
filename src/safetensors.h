/* safetensors.h - safetensors files: read (F32, BF16, F16 as float32) and verified,
 * written (F32) atomically and durably (durable.h).
 *
 * Format (huggingface safetensors): 8-byte little-endian header length n, then n
 * bytes of JSON {"name": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]},
 * ..., "__metadata__": {"key": "string value", ...}}, then the raw little-endian
 * data. Reading validates the header JSON, dtypes, shapes against offsets, offsets
 * against the file size, overlap and coverage, and reports the file and tensor name
 * on any violation.
 *
 * Integrity. Every file vt_st_write produces carries __metadata__["tensor_crc32"]: a
 * JSON object (as a string, like every metadata value) mapping each tensor name to the
 * CRC-32 of its data bytes as stored (BF16 and F16 ones before widening), as 8 lowercase
 * hex digits (the CRC of zlib.crc32 and binascii.crc32, so any tool can check it).
 * vt_st_read verifies it when present: a mismatch, a tensor without an entry or an entry
 * without a tensor is an error naming the file and the tensor; files without the key
 * (timm's, PyTorch's) load unchecked.
 * The key is consumed by the check: it is not among the metadata vt_st_read returns.
 * Reading costs time in proportion to the file's size (n log n in its tensor and metadata
 * counts at most) and memory a constant multiple of it, whatever the header holds.
 * Independently, a NaN or infinity in any tensor's data is an error naming the file,
 * the tensor and the element (a diverged run or a corrupt file must not load silently),
 * and vt_st_write refuses to write such a tensor the same way: nothing it writes fails
 * to load.
 */
#ifndef VT_SAFETENSORS_H
#define VT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct {
    char name[160];        /* first: the name index (name_index.h) reads it there */
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
    int *by_name;          /* read: tensor indices sorted by name (vt_st_find's index) */
} vt_safetensors;

/* Write n tensors plus metadata (n_meta key/value strings; may be 0) and the
 * tensor_crc32 entry. Atomic and durable (durable.h). A NaN or infinity in a tensor is
 * an error (VT_ERR_RUNTIME naming path, the tensor and the element) and nothing is
 * written. */
vt_status vt_st_write(const char *path, const vt_st_tensor *tensors, int n,
                      const char *const *meta_keys, const char *const *meta_values, int n_meta);
/* Read, validate and verify a whole file (checksums when present, finite values).
 * On error nothing is left allocated. */
vt_status vt_st_read(const char *path, vt_safetensors *out);
void vt_st_free(vt_safetensors *st);
/* Tensor by name, or NULL (a binary search after a read). */
const vt_st_tensor *vt_st_find(const vt_safetensors *st, const char *name);
/* Metadata value by key, or NULL. */
const char *vt_st_meta(const vt_safetensors *st, const char *key);
/* CRC-32 (zlib.crc32) of n bytes. */
uint32_t vt_crc32(const void *data, size_t n);

#endif
