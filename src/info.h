/* info.h - the `vitrain info` report: what a resolved config trains, from the config
 * alone. The model (its shape, PE kind, classes and where they come from), its parameter
 * count, forward and training-step FLOPs, and the memory estimate of a training run
 * (footprint.h), as readable lines and one JSON line.
 *
 * Owns the report's lines and their order. Does not own the figures: the model's plan and
 * FLOPs are vit.h's (vt_vit_plan: no model is allocated, so any size answers at once),
 * the memory terms footprint.h's, the classes' origin resolve.h's. The command line, the
 * config's loading and the kernel table are main.c's, which calls this once they are
 * in place (the GEMM workspace term reads the kernel table).
 */
#ifndef VT_INFO_H
#define VT_INFO_H

#include <stdio.h>

#include "config.h"
#include "status.h"

/* Print the report of cfg (resolved) to out. Errors: the model's config checks
 * (vt_vit_plan) and the memory estimate's (vt_footprint_estimate); nothing is printed
 * then. */
vt_status vt_info_print(const vt_config *cfg, FILE *out);

#endif
