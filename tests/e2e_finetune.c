/* e2e_finetune.c - starting training from weights (train.init) through the built binary
 * ($VT_BIN, default ./vitrain; run from the repository root) on configs/synthetic_tiny.json:
 *   - a 3-class run's checkpoint starts a 10-class run: the log names the re-initialised
 *     head and counts the rest as loaded as stored; the run trains, and ends far above
 *     both chance and a from-scratch run of the same length (the weights were used);
 *     test_weights.c checks the loading itself bitwise;
 *   - an APE checkpoint starts a Cayley-STRING run (pe.ape learned keeps the table): the
 *     Cayley and inner RoPE parameters are re-initialised (contract init), it trains;
 *   - without pe.ape the APE table is unexpected: exit 1 naming the tensor and
 *     train.init_allow_unexpected; with that key it is ignored and logged;
 *   - a missing file exits 1 naming train.init and the path; a bad allow value exits 2;
 *   - --resume of a run started from weights continues from its own checkpoint and does
 *     not load the init file again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"
#include "harness.h"

#define CFG "configs/synthetic_tiny.json"
#define QUIET "--threads 1 --set runtime.progress=never"

static char bin[1024];
static char tmp[64];

int main(void) {
    if (e2e_start("ft", bin, sizeof bin, tmp, sizeof tmp)) return 1;

    /* A 3-class checkpoint. */
    int rc = run("%s " CFG " --set model.num_classes=3 --set train.epochs=2 --run-dir %s/three " QUIET
                 " 2>%s/three.log", bin, tmp, tmp);
    CHECK(rc == 0, "3-class run exit %d", rc);

    /* Into a 10-class model. */
    char log[256];
    char *text;
    snprintf(log, sizeof log, "%s/ten.log", tmp);
    rc = run("%s " CFG " --set model.num_classes=10 --set train.epochs=2 --set train.init=%s/three/last.safetensors "
             "--run-dir %s/ten " QUIET " 2>%s", bin, tmp, tmp, log);
    CHECK(rc == 0, "10-class run from the 3-class checkpoint: exit %d", rc);
    CHECK(file_contains(log, "re-initialised head.weight (10, 32): the file has (3, 32)") &&
              file_contains(log, "re-initialised head.bias (10): the file has (3)") &&
              file_contains(log, "30 of 32 model tensors loaded as stored"),
          "the log names the new head and counts the rest as loaded");
    double tuned = final_top1(log);
    char slog[256];
    snprintf(slog, sizeof slog, "%s/scratch.log", tmp);
    rc = run("%s " CFG " --set model.num_classes=10 --set train.epochs=2 --run-dir %s/scratch " QUIET " 2>%s",
             bin, tmp, slog);
    double scratch = final_top1(slog);
    CHECK(rc == 0 && tuned >= 40.0 && tuned >= scratch + 15.0,
          "fine-tuned 10-class top-1 %.2f%% (chance 10%%), from scratch %.2f%%", tuned, scratch);
    fprintf(stderr, "  10 classes after 2 epochs: from the 3-class weights %.2f%%, from scratch %.2f%%\n", tuned,
            scratch);

    /* APE -> Cayley-STRING, keeping the learned table. */
    snprintf(log, sizeof log, "%s/cayley.log", tmp);
    rc = run("%s " CFG " --set model.num_classes=3 --set pe.kind=cayley --set pe.ape=learned "
             "--set train.init=%s/three/last.safetensors --run-dir %s/cayley " QUIET " 2>%s", bin, tmp, tmp, log);
    CHECK(rc == 0, "cayley from the APE checkpoint: exit %d", rc);
    CHECK(file_contains(log, "re-initialised pe.cayley_u (2, 2, 16, 16): not in the file (the kind's init)") &&
              file_contains(log, "re-initialised pe.freqs (2, 2, 8, 2): not in the file") &&
              file_contains(log, "32 of 34 model tensors loaded as stored"),
          "the STRING parameters start at their init, every APE-model tensor loads");
    double cay = final_top1(log);
    CHECK(cay >= 70.0, "the Cayley run trains: top-1 %.2f%% (chance 33%%)", cay);

    /* Without pe.ape the table is unexpected. */
    snprintf(log, sizeof log, "%s/unexpected.log", tmp);
    rc = run("%s " CFG " --set model.num_classes=3 --set pe.kind=cayley --set train.init=%s/three/last.safetensors "
             "--run-dir %s/unexpected " QUIET " 2>%s", bin, tmp, tmp, log);
    CHECK(rc == 1 && file_contains(log, "vitrain: error: train.init: ") &&
              file_contains(log, "unexpected tensor 'pos_embed' (1, 17, 32)") &&
              file_contains(log, "train.init_allow_unexpected = true"),
          "unexpected pos_embed: exit %d", rc);
    rc = run("%s " CFG " --set model.num_classes=3 --set pe.kind=cayley --set train.init=%s/three/last.safetensors "
             "--set train.init_allow_unexpected=true --set train.steps=4 --run-dir %s/unexpected " QUIET " 2>%s",
             bin, tmp, tmp, log);
    CHECK(rc == 0 && file_contains(log, "ignored 'pos_embed' (1, 17, 32)"), "allowed: ignored and logged (exit %d)", rc);

    /* Bad values. */
    snprintf(log, sizeof log, "%s/bad.log", tmp);
    rc = run("%s " CFG " --set train.init=%s/nope.safetensors --run-dir %s/bad " QUIET " 2>%s", bin, tmp, tmp, log);
    CHECK(rc == 1 && file_contains(log, "train.init: ") && file_contains(log, "nope.safetensors: cannot open"),
          "missing file: exit %d", rc);
    rc = run("%s " CFG " --set train.init_allow_unexpected=maybe --run-dir %s/bad " QUIET " 2>%s", bin, tmp, log);
    CHECK(rc == 2 && file_contains(log, "train.init_allow_unexpected"), "non-boolean allow key: exit %d", rc);

    /* A file of another width and depth: the first and only error names both differences
     * (issue 39 item 6), not a consequence (an unexpected block tensor, a shape). */
    snprintf(log, sizeof log, "%s/wide.log", tmp);
    rc = run("%s " CFG " --set model.num_classes=3 --set model.width=64 --set model.depth=1 --set "
             "train.init=%s/three/last.safetensors --set train.init_allow_unexpected=true --run-dir %s/wide "
             QUIET " 2>%s", bin, tmp, tmp, log);
    text = test_read_file(log, NULL);
    CHECK(rc == 1 && file_contains(log, "three/last.safetensors holds another model than the config's: "
                                        "width 32 here, 64 in the config (model.width); depth 2 here, 1 in "
                                        "the config (model.depth). Set those keys") &&
              text && !strstr(text, "ignored") && !strstr(text, "expected shape"),
          "train.init from a model of another width and depth: exit %d, both named first", rc);
    free(text);
    rc = run("%s " CFG " --set model.num_classes=3 --set model.mlp_ratio=4 --set train.init=%s/three/last.safetensors "
             "--run-dir %s/mlp " QUIET " 2>%s", bin, tmp, tmp, log);
    CHECK(rc == 1 && file_contains(log, "MLP hidden width 64 here, 128 in the config (model.mlp_ratio). Set that key"),
          "train.init from a file of another MLP width names it: exit %d", rc);

    /* Resume does not load the init file again. */
    snprintf(log, sizeof log, "%s/resume.log", tmp);
    rc = run("%s " CFG " --set model.num_classes=10 --set train.init=%s/three/last.safetensors --run-dir %s/res "
             "--stop-after 5 " QUIET " 2>%s", bin, tmp, tmp, log);
    CHECK(rc == 0, "stop after 5: exit %d", rc);
    rc = run("mv %s/three %s/three.moved", tmp, tmp);
    rc = run("%s " CFG " --set model.num_classes=10 --set train.init=%s/three/last.safetensors --resume %s/res "
             QUIET " 2>%s", bin, tmp, tmp, log);
    text = test_read_file(log, NULL);
    CHECK(rc == 0 && text && !strstr(text, "train.init "), "resume ignores train.init (exit %d)", rc);
    free(text);

    return e2e_finish(tmp);
}
