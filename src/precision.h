/* precision.h - train.precision = bf16: the bf16 copies of a model's GEMM weights, and
 * the choice of the path that runs the bf16 products, said in one line.
 *
 * Under bf16 (config.h vt_precision; the numerics contract is kernels.h's "bf16
 * numerics") every GEMM of the model and every attention product rounds its operands to
 * bf16 as it packs them and sums in float32; master weights, gradients, AdamW moments,
 * LayerNorm, softmax, GELU, the position encodings' rotations and the loss stay
 * float32, and checkpoints hold the float32 weights. The ops read the tape's flag
 * (vt_tape.bf16). On the amx and dpbf16 paths the GEMM weights (the parameters with
 * weight decay: the linear and convolution weights) get a bf16 copy, rounded once per
 * optimizer step (vt_optim_step refreshes it after each update) instead of once per GEMM
 * call, which those paths' packs read at half the bytes; an op whose weight has no copy
 * rounds it as it packs it, to the same values. On the fma path the packs widen what they
 * read to float32 either way, so the weights keep no copies there: rounding as they pack
 * costs about what widening a copy does, and the copies' memory stays free (bf16 then
 * keeps what float32 keeps, ops.h: vt_attention_keep_probs). Performer's feature
 * products stay float32. */
#ifndef VT_PRECISION_H
#define VT_PRECISION_H

#include <stdint.h>

#include "config.h"
#include "status.h"
#include "vit.h"

/* Give every GEMM weight of m a bf16 copy (vt_tensor.bf16) in one buffer, rounded from
 * the current weights; *buf receives the buffer (for vt_bf16_weights_detach). On the fma
 * bf16 path (the kernel table's: vt_precision_select's choice) nothing: *buf = NULL.
 * Errors: out of memory. */
vt_status vt_bf16_weights_attach(vt_vit *m, uint16_t **buf);
/* Round the copies again from the weights (after m's weights change other than through
 * vt_optim_step, e.g. a checkpoint load). */
void vt_bf16_weights_update(vt_vit *m);
/* Whether m's GEMM weights have copies. */
int vt_bf16_weights_attached(const vt_vit *m);
/* Drop the copies (the tensors' bf16 pointers) and free buf. */
void vt_bf16_weights_detach(vt_vit *m, uint16_t *buf);

/* Under precision p = bf16, once per process: chooses the bf16 product path (bf16_path.h:
 * VT_BF16_PATH, else a start-up throughput probe), puts it in the kernel table and prints
 * the choice and the figures behind it to stderr. Nothing for fp32. Under MPI a
 * collective, made by main before the run starts (where every rank reaches it): every
 * rank checks its own VT_BF16_PATH, rank 0 chooses and prints, and every rank runs rank
 * 0's path, so the replicas sum their products in one order. Errors (VT_ERR_USAGE): a
 * VT_BF16_PATH that names no path or one this CPU cannot run (vt_bf16_path_env's
 * messages, with the rank), a rank that cannot run rank 0's path; as
 * vt_bf16_path_select's otherwise. */
vt_status vt_precision_select(vt_precision p);
/* After vt_precision_select, for a resumed bf16 run or a bf16 evaluation of a run's
 * checkpoint whose record (blocking.h) names the path the run's products ran on
 * (recorded: a vt_bf16_path, -1 when none is recorded; record: the file, for messages):
 * every rank runs that path again, so the products sum as the run's did, and rank 0 says
 * so when it differs from the one just chosen. Unless VT_BF16_PATH chose, or rank 0 cannot
 * run the recorded path (a different CPU, VT_ISA): then every rank keeps the chosen path
 * and rank 0 warns that the sums differ from the run's. Collective under MPI. Errors
 * (VT_ERR_USAGE): a rank that cannot run rank 0's path. */
vt_status vt_precision_adopt_recorded(int recorded, const char *record);

#endif
