/* test_attention_bf16.c - vt_op_attention in bf16 on every bf16 product path the CPU
 * offers (amx, dpbf16, fma), each set in turn: bitwise the results of the same products
 * through that path's gemm_bf16, computed here step by step as the op specifies them for
 * one row block, every N x N block with rows N floats apart and the scale as the scores'
 * alpha: S = scale q k^T, P = softmax(S), out = P v; dv += P^T dout, dP = dout v^T,
 * dS = softmax_bwd(P, dP), dq += scale dS k, dk += scale dS^T q. The op differs from
 * that in layout only (attention.c): on the fma path it rounds q, k, v, the output
 * gradient, Pd and dS once and multiplies them with the float32 GEMM; on the amx and
 * dpbf16 paths its P and dP rows are padded to 64 bytes and the scale moves into the
 * softmax. Shapes: ViT's head (N 197, hd 64: rows that straddle cache lines) and ragged
 * ones (N 37 and 70, hd 16 and 24; N 64: rows without padding). Also: on 2 and 3 threads
 * the 1-thread bits; P kept gives the bits of P recomputed; and each path's keep_probs rule
 * (ops.h: the fma path keeps what float32 keeps, amx and dpbf16 recompute). A level
 * without bf16 paths (scalar) skips. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "rng.h"
#include "status.h"
#include "tape.h"
#include "test_runtime.h"

static vt_arena arena;
static vt_tape tape;

/* The reference for one (b, h) block: q, k, v, dq, dk, dv N x hd (stride hd); out and dout
 * rows H hd floats apart. */
static void reference(int N, int hd, int H, float scale, const float *q, const float *k, const float *v,
                      const float *dout, float *out, float *dq, float *dk, float *dv) {
    float *P = calloc((size_t)N * N, sizeof(float)), *dP = calloc((size_t)N * N, sizeof(float));
    size_t wf = vt_k.gemm_bf16_work_floats(N, N, N > hd ? N : hd);
    float *w = aligned_alloc(64, (wf + 16) * sizeof(float));
    int ldo = H * hd;
    vt_k.gemm_bf16(0, 1, N, N, hd, scale, q, hd, k, NULL, hd, 0.0f, NULL, P, N, w, NULL);
    vt_k.softmax_rows(P, P, N, N, N, 1.0f);
    vt_k.gemm_bf16(0, 0, N, hd, N, 1.0f, P, N, v, NULL, hd, 0.0f, NULL, out, ldo, w, NULL);
    vt_k.gemm_bf16(1, 0, N, hd, N, 1.0f, P, N, dout, NULL, ldo, 1.0f, NULL, dv, hd, w, NULL);
    vt_k.gemm_bf16(0, 1, N, N, hd, 1.0f, dout, ldo, v, NULL, hd, 0.0f, NULL, dP, N, w, NULL);
    vt_k.softmax_bwd_rows(P, dP, dP, N, N, N);
    vt_k.gemm_bf16(0, 0, N, hd, N, scale, dP, N, k, NULL, hd, 1.0f, NULL, dq, hd, w, NULL);
    vt_k.gemm_bf16(1, 0, N, hd, N, scale, dP, N, q, NULL, hd, 1.0f, NULL, dk, hd, w, NULL);
    free(P);
    free(dP);
    free(w);
}

/* One forward + backward of the op in bf16 on H heads of N x hd from src (q, k, v, then
 * the output gradient, n floats each): res[0..3] = out, dq, dk, dv (in the arena). keep:
 * the forward keeps P for the backward, which bf16 training never asks for but the op
 * accepts. */
static void run_op(int H, int N, int hd, float scale, const float *src, size_t n, int keep, const float *res[4]) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = 1;
    tape.training = 1;
    tape.bf16 = 1;
    int64_t shape[4] = {1, H, N, hd};
    vt_tensor *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = vt_tensor_new(&arena, 1, 4, shape);
        memcpy(in[i]->data, src + i * n, n * sizeof(float));
    }
    vt_tensor *o = vt_op_attention(&tape, in[0], in[1], in[2], scale, 0.0f, keep);
    memcpy(o->grad, src + 3 * n, n * sizeof(float));
    vt_tape_replay(&tape);
    res[0] = o->data;
    for (int i = 0; i < 3; i++) res[i + 1] = in[i]->grad;
}

static void check_shape(vt_bf16_path path, int H, int N, int hd) {
    VT_ASSERT(vt_attention_row_block(N) == N, "test shape N %d must be one row block", N);
    const size_t n = (size_t)H * N * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    vt_rng r;
    vt_rng_seed(&r, (uint64_t)(N * 131 + hd));
    float *src = malloc(4 * n * sizeof(float)); /* q, k, v (H, N, hd), dout (N, H hd) */
    for (size_t i = 0; i < 4 * n; i++) src[i] = 2.0f * (float)vt_rng_uniform(&r) - 1.0f;
    const int max_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const float *got[4];
    run_op(H, N, hd, scale, src, n, 0, got); /* P recomputed in the backward */
    float *got1 = malloc(4 * n * sizeof(float)); /* the 1-thread results, for the runs on 2 and 3 */

    float *ref = calloc(4 * n, sizeof(float)); /* out (N, H hd), dq, dk, dv (H, N, hd) */
    for (int h = 0; h < H; h++) {
        size_t bo = (size_t)h * N * hd;
        reference(N, hd, H, scale, src + bo, src + n + bo, src + 2 * n + bo, src + 3 * n + (size_t)h * hd,
                  ref + (size_t)h * hd, ref + n + bo, ref + 2 * n + bo, ref + 3 * n + bo);
    }
    static const char *const what[4] = {"out", "dq", "dk", "dv"};
    for (int t = 0; t < 4; t++) {
        long bad = -1;
        for (size_t i = 0; i < n && bad < 0; i++)
            if (memcmp(&got[t][i], &ref[t * n + i], sizeof(float))) bad = (long)i;
        CHECK(bad < 0, "%s path, H %d N %d hd %d: %s[%ld] = %a, its gemm_bf16 step by step gives %a",
              vt_bf16_path_name(path), H, N, hd, what[t], bad, bad < 0 ? 0.0 : got[t][bad],
              bad < 0 ? 0.0 : ref[t * n + bad]);
        memcpy(got1 + t * n, got[t], n * sizeof(float));
    }
    for (int nt = 2; nt <= 3; nt++) {
        omp_set_num_threads(nt);
        const float *again[4];
        run_op(H, N, hd, scale, src, n, 0, again);
        int same = 1;
        for (int t = 0; t < 4; t++) same &= memcmp(again[t], got1 + t * n, n * sizeof(float)) == 0;
        CHECK(same, "%s path, H %d N %d hd %d: %d threads differ from 1 thread", vt_bf16_path_name(path), H, N, hd,
              nt);
    }
    /* P kept in the arena in the scratch's row layout, then read by the backward: the same bits */
    const float *kept[4];
    run_op(H, N, hd, scale, src, n, 1, kept);
    int same = 1;
    for (int t = 0; t < 4; t++) same &= memcmp(kept[t], got1 + t * n, n * sizeof(float)) == 0;
    CHECK(same, "%s path, H %d N %d hd %d: keeping P changes the results", vt_bf16_path_name(path), H, N, hd);
    omp_set_num_threads(max_threads);
    free(got1);
    free(src);
    free(ref);
}

int main(void) {
    if (test_runtime_init(&arena, 1 << 20, &tape) != 0) return 1;
    int paths = 0;
    for (int p = 0; p < VT_BF16_PATH_COUNT; p++) {
        char why[256];
        if (vt_kernels_set_bf16_path((vt_bf16_path)p, why, sizeof why) != 0) {
            printf("test_attention_bf16: the %s path skipped (%s)\n", vt_bf16_path_name((vt_bf16_path)p), why);
            continue;
        }
        paths++;
        CHECK(vt_kernels_bf16_path() == p, "the %s path is set but the table reports %d",
              vt_bf16_path_name((vt_bf16_path)p), vt_kernels_bf16_path());
        int fma = p == VT_BF16_FMA;
        CHECK(vt_attention_keep_probs(197, 64, 1) == fma && vt_attention_keep_probs(197, 64, 0) == 1 &&
                  vt_attention_keep_probs(785, 64, 1) == 0 && vt_attention_keep_probs(785, 64, 0) == 0,
              "%s path: P kept at 197 tokens %s, at 785 never", vt_bf16_path_name((vt_bf16_path)p),
              fma ? "as in float32" : "only in float32");
        check_shape((vt_bf16_path)p, 2, 197, 64);
        check_shape((vt_bf16_path)p, 3, 37, 16);
        check_shape((vt_bf16_path)p, 1, 70, 24);
        check_shape((vt_bf16_path)p, 2, 64, 8);
    }
    if (!paths) printf("test_attention_bf16: skipped (the %s level has no bf16 product path)\n", vt_k.name);
    test_runtime_done(&arena, &tape);
    return test_summary();
}
