/* checkpoint_timm.h - the tensors of a weights file in vitrain's names and layouts.
 *
 * Owns: reading the layouts timm publishes that differ from ours (position-encodings.md
 * section 4 is ours) into ours, exactly (moves and a zero row, no arithmetic):
 *   blocks.{i}.gamma_1, gamma_2 (timm Eva)       -> blocks.{i}.ls1.gamma, ls2.gamma
 *   blocks.{i}.attn.q_bias + v_bias (Eva, attn_type 'eva'; its k bias is fixed 0)
 *                                                -> blocks.{i}.attn.qkv.bias = (q, 0, v)
 *   rope.freqs (2, L, H, hd/2) (Eva rope_type 'mixed': [0] the x, [1] the y frequencies)
 *                                                -> pe.freqs (L, H, hd/2, 2)
 *   pos_embed (1, N, D), N a square grid, no class-token row (timm no_embed_class=True:
 *   the table is added to the patch tokens only, before the CLS token is prepended)
 *                                                -> pos_embed (1, 1 + N, D), CLS row 0
 * Files we write pass through unchanged. A pos_embed whose token count is neither a square
 * nor 1 + a square is an error here (the file names no grid). Does not own which tensors
 * a model needs (weights.c) nor the file format (checkpoint.c).
 *
 * What cannot be read from the file: the rotary grid indexing. timm's 'xy' indexing is
 * ours (x = column on the first half of the pairs / freqs[0]); an Eva model built with
 * 'ij' (its default) has the axes swapped and needs scripts/timm_convert.py, which also
 * states every constructor argument.
 */
#ifndef VT_CHECKPOINT_TIMM_H
#define VT_CHECKPOINT_TIMM_H

#include <stdint.h>

#include "safetensors.h"
#include "status.h"

/* One tensor of a weights file under its vitrain name. */
typedef struct {
    char name[160];        /* vitrain name; first: the name index (name_index.h) reads it there */
    char file_name[160];   /* name in the file ("rope.freqs"; q_bias for a merged qkv.bias) */
    const char *dtype;     /* as stored: "F32", "BF16", "F16" */
    const char *layout;    /* NULL: stored as is; else how it was converted (for logs) */
    int ndim;
    int64_t shape[8];
    int64_t size;
    int file_ndim;         /* the shape as stored (differs from shape when converted) */
    int64_t file_shape[8];
    const float *data;     /* into the vt_safetensors buffer, or owned */
    float *owned;
} vt_wtensor;

typedef struct {
    vt_wtensor *t;
    int n;
    int *by_name;          /* indices into t sorted by name (vt_wfile_find's index) */
} vt_wfile;

/* Translate the tensors of st (read from path) into out, in file order (a merged tensor
 * at its first part's place). Errors (VT_ERR_RUNTIME, naming path and tensor): two file
 * tensors that land on one name, q_bias without v_bias (or the reverse) or of another
 * shape, a rope.freqs not (2, L, H, P), a pos_embed not (1, N, D) with N or N - 1 a
 * square. out is valid until vt_wfile_free and st must outlive it. */
vt_status vt_wfile_from_st(const vt_safetensors *st, const char *path, vt_wfile *out);
void vt_wfile_free(vt_wfile *f);
/* Tensor by vitrain name, or NULL (a binary search). */
const vt_wtensor *vt_wfile_find(const vt_wfile *f, const char *name);

/* "(2, 3, 4)" into buf. */
void vt_shape_format(int ndim, const int64_t *shape, char *buf, size_t len);

#endif
