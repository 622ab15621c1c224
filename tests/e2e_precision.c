/* e2e_precision.c - train.precision = bf16 end to end, through the built binary ($VT_BIN,
 * default ./vitrain; run from the repository root) on configs/synthetic_tiny.json, at the
 * default kernel level (the emulation build's amx under `make emu`):
 *   - a bf16 run learns, and lands within 5 points of the float32 run's top-1 (same
 *     seed and threads; 256 val images: one image is 0.39 points);
 *   - its checkpoint holds float32 weights (dtype F32, never BF16);
 *   - `vitrain eval --precision bf16` on it reproduces the run's final top-1 (the
 *     evaluator's weight copies are the trainer's), `--precision fp32` evaluates too;
 *   - the run says once which bf16 product path it runs and the probe's figures; on the
 *     avx2 level, the fma path (the float32 kernels on rounded operands);
 *   - VT_BF16_PATH: an unknown name or a path the level lacks is a usage error saying
 *     which, before anything is written (no run directory), a path it has is run and
 *     said to be the override's.
 * The bitwise resume of a bf16 run is e2e_train's resume test, run for both precisions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"

#define CFG "configs/synthetic_tiny.json"

static char bin[1024];
static char tmp[64];

/* How many times needle occurs in the file at path. */
static int count_in(const char *path, const char *needle) {
    char *s = test_read_file(path, NULL);
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, needle)) != NULL; p++) n++;
    free(s);
    return n;
}

/* The JSON header of a safetensors file (after its 8-byte length), or NULL. */
static char *st_header(const char *path) {
    size_t len = 0;
    char *s = test_read_file(path, &len);
    if (!s || len < 8) { free(s); return NULL; }
    unsigned long long n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | (unsigned char)s[i];
    char *h = n <= len - 8 ? malloc(n + 1) : NULL;
    if (h) { memcpy(h, s + 8, n); h[n] = '\0'; }
    free(s);
    return h;
}

static void test_bf16_run(void) {
    char d32[512], d16[512], l32[600], l16[600];
    snprintf(d32, sizeof d32, "%s/fp32", tmp);
    snprintf(d16, sizeof d16, "%s/bf16", tmp);
    snprintf(l32, sizeof l32, "%s.log", d32);
    snprintf(l16, sizeof l16, "%s.log", d16);
    int rc = run("%s " CFG " --threads 2 --run-dir %s 2>%s", bin, d32, l32);
    CHECK(rc == 0, "fp32 run exit %d (log %s)", rc, l32);
    rc = run("%s " CFG " --set train.precision=bf16 --threads 2 --run-dir %s 2>%s", bin, d16, l16);
    CHECK(rc == 0, "bf16 run exit %d (log %s)", rc, l16);
    double t32 = final_top1(l32), t16 = final_top1(l16);
    CHECK(t16 >= 70.0, "bf16 synthetic val top-1 %.2f%%, expected >= 70%% (chance 25%%)", t16);
    CHECK(t32 >= 0 && t16 >= 0 && (t16 - t32 <= 5.0 && t32 - t16 <= 5.0),
          "bf16 top-1 %.2f%% within 5 points of fp32's %.2f%%", t16, t32);
    CHECK(count_in(l16, "vitrain: precision bf16 on the ") == 1 && count_in(l16, "probe GFLOP/s:") == 1,
          "the bf16 run says once how it runs bf16 and the probe's figures");
    CHECK(count_in(l32, "precision bf16") == 0, "the fp32 run says nothing of bf16");

    /* the checkpoint stays float32 */
    char ck[600];
    snprintf(ck, sizeof ck, "%s/last.safetensors", d16);
    char *hdr = st_header(ck);
    CHECK(hdr && strstr(hdr, "\"dtype\":\"F32\"") && !strstr(hdr, "BF16"), "bf16 run's checkpoint is F32: %.200s",
          hdr ? hdr : "(unreadable)");
    free(hdr);

    /* vitrain eval in bf16 reproduces the final accuracy; in fp32 it runs as well */
    char out[600];
    snprintf(out, sizeof out, "%s/eval16.json", tmp);
    rc = run("%s eval " CFG " --checkpoint %s --precision bf16 --threads 2 >%s 2>%s.err", bin, ck, out, out);
    CHECK(rc == 0, "vitrain eval --precision bf16 exit %d", rc);
    char *js = test_read_file(out, NULL);
    const char *p = js ? strstr(js, "\"top1\":") : NULL;
    CHECK(p && atof(p + 7) - t16 <= 0.006 && t16 - atof(p + 7) <= 0.006,
          "eval --precision bf16 top-1 %.4f, the run's final %.2f", p ? atof(p + 7) : -1.0, t16);
    free(js);
    snprintf(out, sizeof out, "%s/eval32.json", tmp);
    rc = run("%s eval " CFG " --checkpoint %s --precision fp32 --threads 2 >%s 2>%s.err", bin, ck, out, out);
    CHECK(rc == 0 && count_in(out, "\"top1\":") == 1, "vitrain eval --precision fp32 exit %d", rc);
    rc = run("%s eval " CFG " --checkpoint %s --precision fp16 >%s 2>%s.err", bin, ck, out, out);
    snprintf(out, sizeof out, "%s/eval32.json.err", tmp);
    CHECK(rc == 2 && count_in(out, "--precision 'fp16': expected fp32 or bf16") == 1,
          "a bad --precision is a usage error (exit %d)", rc);
}

/* A short bf16 training run under the environment settings env, in run directory
 * tmp/name, its stderr to log (tmp/name.log); its exit code. */
static int short_bf16_run(const char *env, const char *name, char *log, size_t loglen) {
    char d[512];
    snprintf(d, sizeof d, "%s/%s", tmp, name);
    snprintf(log, loglen, "%s.log", d);
    return run("%s %s " CFG " --set train.precision=bf16 --set train.steps=2 --threads 1 --run-dir %s 2>%s", env, bin,
               d, log);
}

/* On a level without bf16 instructions: the note says so, once. */
static void test_note_without_bf16(void) {
    char l[600];
    int rc = short_bf16_run("VT_ISA=avx2", "avx2", l, sizeof l);
    if (rc != 0 && count_in(l, "supports at most") > 0) {
        fprintf(stderr, "e2e_precision: this CPU lacks avx2; the note on a level without bf16 is not tested\n");
        return;
    }
    CHECK(rc == 0, "VT_ISA=avx2 bf16 run exit %d (log %s)", rc, l);
    CHECK(count_in(l, "bf16 products on the fma path (float32 FMA on operands rounded to bf16)") == 1,
          "the avx2 level says once that it runs bf16 through the float32 kernels");
    CHECK(count_in(l, "the avx2 level has no bf16 instructions: float32's products plus the rounding, so slower "
                      "than float32 here, in the same memory") == 1,
          "the avx2 level says once that bf16 is slower there (log %s)", l);
}

/* VT_BF16_PATH: a name that is no path, and a path the level lacks, are usage errors
 * saying so before the run directory is made; a path it has runs and is said to be the
 * override's. */
static void test_path_override(void) {
    char l[600], d[512];
    snprintf(d, sizeof d, "%s/path", tmp);
    int rc = short_bf16_run("VT_BF16_PATH=tiles", "path", l, sizeof l);
    CHECK(rc == 2 && count_in(l, "VT_BF16_PATH=tiles is not a bf16 path (use amx, dpbf16 or fma)") == 1,
          "an unknown VT_BF16_PATH is a usage error (exit %d, log %s)", rc, l);
    CHECK(access(d, F_OK) != 0, "an unknown VT_BF16_PATH fails before the run directory %s is made", d);
    rc = short_bf16_run("VT_ISA=avx2 VT_BF16_PATH=dpbf16", "path", l, sizeof l);
    if (count_in(l, "supports at most") == 0) {
        CHECK(rc == 2 && count_in(l, "VT_BF16_PATH=dpbf16 cannot run here: the dpbf16 path (VDPBF16PS) needs the "
                                     "avx512bf16 level") == 1,
              "a path above the level is a usage error naming it (exit %d, log %s)", rc, l);
        CHECK(access(d, F_OK) != 0, "a path above the level fails before the run directory %s is made", d);
    }
    rc = short_bf16_run("VT_BF16_PATH=fma", "path_fma", l, sizeof l);
    if (count_in(l, "supports at most") == 0)
        CHECK(rc == 0 && count_in(l, "bf16 products on the fma path") == 1 && count_in(l, "as VT_BF16_PATH asks") == 1,
              "VT_BF16_PATH=fma trains on the fma path (exit %d, log %s)", rc, l);
}

int main(void) {
    if (e2e_start("e2e_precision", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    test_bf16_run();
    test_note_without_bf16();
    test_path_override();
    return e2e_finish(tmp);
}
