/* bf16_path.h - which bf16 product path (kernels.h: "bf16 product paths": AMX tiles,
 * VDPBF16PS, float32 FMA on rounded operands) runs train.precision = bf16 and
 * `vitrain eval --precision bf16`: VT_BF16_PATH=amx|dpbf16|fma when set, else the
 * fastest in a start-up throughput probe of every path the active level offers. Owns
 * the probe, the rule that picks from its figures and the line that reports the choice;
 * the paths themselves are kernels/'s. */
#ifndef VT_BF16_PATH_H
#define VT_BF16_PATH_H

#include <stddef.h>

#include "kernels.h"
#include "status.h"

/* A path other than the level's own is chosen only when the probe finds it this much
 * faster: where two paths are close, the choice stays the level's from run to run, so
 * that runs (and resumed runs) on one machine sum in one order. */
#define VT_BF16_PATH_MARGIN 1.25

/* Probe figures: GFLOP/s of each path on the probe's product, 0 for a path the active
 * level does not offer. */
typedef struct {
    double gflops[VT_BF16_PATH_COUNT];
} vt_bf16_probe;

/* Time every path the active level offers on one ViT-sized product (a forward GEMM of
 * 256 tokens x 768 x 768 from a weight's bf16 copy), best of three, the paths taking
 * turns, after one warm-up round. Errors: out of memory. */
vt_status vt_bf16_path_probe(vt_bf16_probe *pr);
/* The path to run from probe figures, own being the level's own path: the fastest,
 * unless own is offered and the fastest is less than VT_BF16_PATH_MARGIN times own's
 * figure. -1 when no path is offered. */
int vt_bf16_path_pick(const vt_bf16_probe *pr, vt_bf16_path own);
/* VT_BF16_PATH's path in *path (-1: unset or empty), checked against the active level
 * without changing the kernel table. Errors (VT_ERR_USAGE): a name that is no path (the
 * message lists the valid ones), or a path this CPU/OS or VT_ISA does not offer (the
 * message says why). */
vt_status vt_bf16_path_env(int *path);
/* Choose the path (VT_BF16_PATH, else probe and pick), put it in the kernel table and
 * describe the choice and the figures that made it in line (for the log). Errors
 * (VT_ERR_USAGE): VT_BF16_PATH names no path, or one this CPU/OS or VT_ISA does not
 * offer (the message says why); VT_ERR_RUNTIME: out of memory. */
vt_status vt_bf16_path_select(char *line, size_t linelen);

#endif
