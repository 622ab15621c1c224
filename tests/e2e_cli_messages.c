/* e2e_cli_messages.c - messages of the command line a first-day user meets (issue 39
 * item 7), through the built binary ($VT_BIN, default ./vitrain; run from the repository
 * root, as scripts/run_tests.sh does):
 *   - a bad option value names the option and points at --help, without the usage text;
 *     --help names the environment variables that steer the kernels;
 *   - a rule broken by a --set value says the value came from --set and suggests sizes;
 *   - `help-config SECTION` and `help-config SECTION.KEY` show only those, an unknown name
 *     gets the nearest one suggested;
 *   - a run that ends inside the learning-rate warm-up is warned about, one that does not
 *     is not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"
#include "harness.h"

#define CFG "configs/synthetic_tiny.json"

static char bin[1024];
static char tmp[64];

/* Run "bin ARGS > out 2>&1"; the exit code, the output in *text (caller frees). */
static int run_out(char **text, const char *args) {
    char out[128];
    snprintf(out, sizeof out, "%s/out.txt", tmp);
    int rc = run("%s %s > %s 2>&1", bin, args, out);
    *text = test_read_file(out, NULL);
    if (!*text) *text = calloc(1, 1);
    return rc;
}

static void test_bad_values(void) {
    char *t;
    int rc = run_out(&t, CFG " --threads abc");
    CHECK(rc == 2 && strstr(t, "--threads 'abc': expected an integer") && strstr(t, "vitrain train --help") &&
              !strstr(t, "usage:"),
          "a bad --threads value: exit %d, named, no usage text:\n%s", rc, t);
    free(t);
    rc = run_out(&t, "eval --checkpoint x.safetensors --resolutions 8,x");
    CHECK(rc == 2 && strstr(t, "--resolutions '8,x'") && !strstr(t, "usage:"), "a bad --resolutions: exit %d:\n%s",
          rc, t);
    free(t);
    rc = run_out(&t, "");
    CHECK(rc == 2 && strstr(t, "missing subcommand or CONFIG") && strstr(t, "usage:"),
          "no arguments at all still print the usage: exit %d", rc);
    free(t);
    /* every environment variable a user sets to steer the kernels is named by --help */
    rc = run_out(&t, "--help");
    CHECK(rc == 0 && strstr(t, "VT_ISA=") && strstr(t, "VT_GEMM_CONTEXT=") && strstr(t, "VT_BF16_PATH=amx|dpbf16|fma"),
          "--help names VT_ISA, VT_GEMM_CONTEXT and VT_BF16_PATH: exit %d:\n%s", rc, t);
    free(t);
}

static void test_set_attribution(void) {
    char *t;
    int rc = run_out(&t, CFG " --set model.patch_size=6 --threads 1");
    CHECK(rc == 2 && strstr(t, CFG ": model.img_size = 16 is not a multiple of model.patch_size = 6 (--set); "
                               "the nearest valid sizes are 12 and 18"),
          "patch size from --set: exit %d:\n%s", rc, t);
    free(t);
    rc = run_out(&t, CFG " --set model.heads=3 --threads 1");
    CHECK(rc == 2 && strstr(t, CFG ": model.heads = 3 (--set) does not divide model.width = 32"),
          "heads from --set: exit %d:\n%s", rc, t);
    free(t);
}

static void test_help_config(void) {
    char *t;
    int rc = run_out(&t, "help-config optim.lr");
    CHECK(rc == 0 && strstr(t, "optim.lr ") && strstr(t, "Peak learning rate") && !strstr(t, "optim.min_lr") &&
              !strstr(t, "model.width"),
          "help-config optim.lr shows that key only: exit %d:\n%s", rc, t);
    free(t);
    rc = run_out(&t, "help-config optim");
    CHECK(rc == 0 && strstr(t, "optim.lr ") && strstr(t, "optim.min_lr") && !strstr(t, "model.width") &&
              !strstr(t, "train.epochs"),
          "help-config optim shows the section: exit %d", rc);
    free(t);
    rc = run_out(&t, "help-config optim.lrr");
    CHECK(rc == 2 && strstr(t, "unknown key \"optim.lrr\"; did you mean \"optim.lr\"?"),
          "an unknown key: exit %d:\n%s", rc, t);
    free(t);
    rc = run_out(&t, "help-config optm");
    CHECK(rc == 2 && strstr(t, "unknown section \"optm\"; did you mean \"optim\"?"),
          "an unknown section: exit %d:\n%s", rc, t);
    free(t);
}

static void test_warmup(void) {
    char *t, args[512];
    snprintf(args, sizeof args, CFG " --set train.steps=3 --set runtime.progress=never --set train.eval_every=0 "
             "--set train.ckpt_every=0 --threads 1 --run-dir %s/short", tmp);
    int rc = run_out(&t, args);
    CHECK(rc == 0 && strstr(t, "warning: the run ends inside the warm-up: 3 optimizer steps (train.steps = 3) "
                               "but 8 warm-up steps (optim.warmup_steps = 8)"),
          "train.steps inside the warm-up is warned about: exit %d:\n%s", rc, t);
    free(t);
    snprintf(args, sizeof args, CFG " --set train.steps=9 --set runtime.progress=never --set train.eval_every=0 "
             "--set train.ckpt_every=0 --threads 1 --run-dir %s/long", tmp);
    rc = run_out(&t, args);
    CHECK(rc == 0 && !strstr(t, "warm-up"), "a run past the warm-up is not: exit %d", rc);
    free(t);
}

int main(void) {
    if (e2e_start("msg", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    test_bad_values();
    test_set_attribution();
    test_help_config();
    test_warmup();
    return e2e_finish(tmp);
}
