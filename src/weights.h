/* weights.h - putting the tensors of a weights file into a built model.
 *
 * Owns: matching file tensors to model parameters by name and shape, the two policies
 * below, and their messages and log. The file is read by checkpoint.c (F32, BF16 and F16
 * data as float32) and translated from timm's layouts by checkpoint_timm.c, so every
 * mode reads our checkpoints, timm VisionTransformer files and timm Eva (RoPE-ViT) files
 * alike. Does not own the model's layout (vit.c) or the file format.
 *
 * Strict (vt_vit_load: `vitrain eval`, resume): every model tensor must be in the file
 * with its shape, and nothing else; a learned pos_embed of another square grid is
 * resampled bicubic (as timm's resample_abs_pos_embed, without antialiasing).
 *
 * Fine-tuning start (train.init): every model tensor whose name and shape match is
 * copied bitwise, and
 *   - pos_embed of another grid: resampled as above;
 *   - a shared PE tensor (pe.* with leading (L', H'), position-encodings.md 4) stored
 *     with L' = 1 or H' = 1 where the model has a set per layer or head: copied to each;
 *   - head.weight / head.bias of another shape (num_classes differs) or absent, and PE
 *     tensors (pos_embed, pe.*) the file lacks: keep their initial values (the model's
 *     init: timm's for the head, the kind's contract init for PE parameters);
 *   - Performer features absent from the file: keep the ones drawn at init;
 *   - file tensors the model has no parameter for: an error, unless
 *     allow_unexpected (train.init_allow_unexpected), then ignored.
 *   Anything else (a missing block tensor, another shape) is an error.
 * A file whose model has another width, depth, patch size, input channels or MLP width
 * than the config's (read from its tensors) is an error in every mode, naming each
 * difference ("width 192 here, 64 in the config (model.width)") before any tensor.
 * Every error names the file, the tensor (and its name in the file when a timm layout
 * was translated), the expected and found shapes, and leaves the model untouched. A
 * fine-tuning start logs one line per tensor that was resampled, expanded, re-initialised
 * or ignored, plus a summary of what was loaded.
 */
#ifndef VT_WEIGHTS_H
#define VT_WEIGHTS_H

#include <stdio.h>

#include "safetensors.h"
#include "status.h"
#include "vit.h"

typedef struct {
    int init;              /* 0: strict; 1: fine-tuning start */
    int allow_unexpected;  /* fine-tuning start: ignore file tensors the model lacks */
} vt_weights_opts;

/* Counts of model tensors (Performer features included) by what happened to them;
 * ignored counts file tensors. */
typedef struct {
    int loaded;       /* copied as stored (bitwise after exact widening) */
    int converted;    /* of loaded: translated from a timm layout */
    int widened;      /* of loaded: stored as BF16 or F16 */
    int resampled;    /* pos_embed to another grid */
    int expanded;     /* shared PE tensor copied to every layer / head */
    int reinit;       /* kept their initial values */
    int ignored;      /* file tensors without a model parameter */
} vt_weights_report;

/* Load path into m (initialised by vt_vit_init) under opts; rep (may be NULL) receives
 * the counts; log (may be NULL) the fine-tuning lines. Errors VT_ERR_RUNTIME. */
vt_status vt_weights_load(vt_vit *m, const char *path, const vt_weights_opts *opts,
                          vt_weights_report *rep, FILE *log);
/* The same from a file already read (st, read from path: named in messages), for callers
 * that read its metadata first (`vitrain eval` takes the model's config from it). */
vt_status vt_weights_apply(vt_vit *m, const vt_safetensors *st, const char *path,
                           const vt_weights_opts *opts, vt_weights_report *rep, FILE *log);

/* Load weights into an initialised model: every model tensor must be present with the
 * right shape (a learned pos_embed on another grid is resampled bicubic); unknown
 * tensors are errors; messages name the tensor. Reads our checkpoints and timm's layouts,
 * F32, BF16 or F16: the strict mode above. */
vt_status vt_vit_load(vt_vit *m, const char *path);

/* The rules vt_weights_apply follows with opts, checked against a planned model
 * (vt_vit_plan: its layout, no memory) before the model is allocated, with the same
 * errors. With exact, the model must also hold no value the file does not give it: its
 * value count at most the file's (checked first, before any tensor), and a pos_embed on
 * another grid is an error rather than resampled. For a model described by the file's
 * own config (`vitrain eval` without CONFIG), so a small file declaring a huge model is
 * refused at the cost of reading the file, not of building the model. */
vt_status vt_weights_check(vt_vit *planned, const vt_safetensors *st, const char *path,
                           const vt_weights_opts *opts, int exact);

#endif
