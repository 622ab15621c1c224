/* e2e_train.c - end-to-end tests of training, evaluation and the CLI through the built
 * binary ($VT_BIN, default ./vitrain; run from the repository root, as
 * scripts/run_tests.sh does) on configs/synthetic_tiny.json:
 *   - a synthetic run learns (val top-1 well above chance) and writes its run directory
 *   - `vitrain eval` on the checkpoint reproduces the training's final accuracy; the
 *     --logits .npz holds logits_16 (256, 4) float32 and the labels, whose argmax gives
 *     the same top-1
 *   - exact resume: stop mid-epoch, resume, per-step losses equal the straight run's bit
 *     for bit (with dropout on), and so do the final weights; in fp32 and in bf16
 *   - a NaN in the saved AdamW moment, or a flipped bit in the state or the weights, is
 *     refused on resume; a NaN loss (a huge saved moment overflows the update) stops
 *     with exit 1 and a message, leaving last.safetensors intact
 *   - usage and config errors exit 2 with a message naming the problem
 *   - gradient accumulation equals one big batch; step-based evaluation cadence
 *   - `vitrain info` reports the parameter count of the model
 * Links the library for the val labels (vt_loader) and the model size (vt_vit).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"
#include "npz_read.h"
#include "st_poke.h"

#include "safetensors.h"
#include "config.h"
#include "data/loader.h"
#include "eval.h"
#include "kernels.h"
#include "resolve.h"
#include "vit.h"
#include "vit_fixture.h"

#define CFG "configs/synthetic_tiny.json"

static char bin[1024];
static char tmp[64];

/* The last eval record's top1 in metrics.jsonl (-1 if none). */
static double last_eval_top1(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *s = test_read_file(path, NULL);
    double v = -1;
    if (!s) return v;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        char t[64];
        if (strstr(line, "\"kind\":\"eval\"") && json_raw(line, "top1", t, sizeof t)) v = atof(t);
    }
    free(s);
    return v;
}

static void test_learns_and_eval(void) {
    char dir[512], log[512], npy[512], out[512];
    snprintf(dir, sizeof dir, "%s/syn", tmp);
    snprintf(log, sizeof log, "%s/syn.log", tmp);
    int rc = run("%s " CFG " --run-dir %s --threads 1 2>%s", bin, dir, log);
    CHECK(rc == 0, "synthetic run exit %d (log %s)", rc, log);
    double top1 = final_top1(log);
    CHECK(top1 >= 70.0, "synthetic val top-1 %.2f%%, expected >= 70%% (chance 25%%)", top1);
    CHECK(file_contains(log, "vitrain: compute  fp32, kernels "), "kernel level logged");
    const char *files[] = {"config.json", "metrics.jsonl", "last.safetensors", "latest",
                           "step_00000128.safetensors", "step_00000128.state.safetensors",
                           "best.safetensors"};
    for (int i = 0; i < 7; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        CHECK(access(p, R_OK) == 0, "run directory has %s", files[i]);
    }
    char older[600];
    snprintf(older, sizeof older, "%s/step_00000096.safetensors", dir);
    CHECK(access(older, F_OK) != 0, "train.keep_checkpoints 1 keeps only the newest pair");
    int n = 0;
    char *rec = train_records_text(dir, &n);
    CHECK(n == 128, "metrics.jsonl has %d train records, expected 128 (4 epochs x 32 steps)", n);
    CHECK(rec && strncmp(rec, "1 ", 2) == 0, "first train record is step 1");
    free(rec);
    CHECK_CLOSE(last_eval_top1(dir), top1, 0.006, 0, "final line matches the last eval record");

    /* vitrain eval reproduces the final accuracy, writes the logits */
    snprintf(npy, sizeof npy, "%s/logits.npz", tmp);
    snprintf(out, sizeof out, "%s/eval.json", tmp);
    rc = run("%s eval " CFG " --checkpoint %s/last.safetensors --logits %s --threads 1 >%s 2>%s.err",
             bin, dir, npy, out, out);
    CHECK(rc == 0, "vitrain eval exit %d", rc);
    char *js = test_read_file(out, NULL);
    char t[64] = "";
    CHECK(js && json_raw(js, "top1", t, sizeof t), "eval prints a JSON line with top1: %s", js ? js : "");
    CHECK_CLOSE(atof(t), top1, 0.006, 0, "vitrain eval top-1 equals the training's final top-1");
    CHECK(js && json_raw(js, "n", t, sizeof t) && atoi(t) == 256, "eval over 256 val images");
    free(js);

    size_t len = 0;
    unsigned char *b = (unsigned char *)test_read_file(npy, &len);
    npz_array lgz, lbz;
    int ok = b && npz_find(b, len, "logits_16", &lgz) && npz_find(b, len, "labels", &lbz);
    CHECK(ok, "npz has logits_16 and labels");
    if (ok) {
        CHECK(!strcmp(lgz.descr, "<f4") && lgz.ndim == 2 && lgz.shape[0] == 256 && lgz.shape[1] == 4 &&
                  lgz.bytes == 256 * 4 * sizeof(float),
              "logits_16 float32 (256, 4): %s ndim %d", lgz.descr, lgz.ndim);
        CHECK(!strcmp(lbz.descr, "<i8") && lbz.ndim == 1 && lbz.shape[0] == 256, "labels int64 (256,)");
        if (lgz.bytes == 256 * 4 * sizeof(float) && lbz.bytes == 256 * 8) {
            /* top-1 from the logits and the stored labels, which are the loader's */
            float *lg = malloc(256 * 4 * sizeof(float));
            int64_t lab[256];
            memcpy(lg, lgz.data, 256 * 4 * sizeof(float));
            memcpy(lab, lbz.data, sizeof lab);
            vt_config cfg;
            vt_config_defaults(&cfg);
            CHECK(vt_resolve_file(&cfg, CFG, NULL, 0) == VT_OK, "load " CFG ": %s", vt_last_error());
            vt_loader *L = NULL;
            vt_data_spec spec;
            vt_resolve_data_spec(&cfg, &spec);
            if (vt_loader_open(&L, &spec, VT_SPLIT_VAL, cfg.model.img_size) == VT_OK) {
                int64_t sz = (int64_t)cfg.model.in_chans * cfg.model.img_size * cfg.model.img_size;
                float *img = malloc(256 * sz * sizeof(float));
                float *soft = malloc(256 * 4 * sizeof(float));
                int labels[256], cnt = 0, su = 0, correct = 0, same = 1;
                vt_loader_seek(L, 0, 0, 256);
                CHECK(vt_loader_next(L, img, labels, soft, &su, &cnt) == VT_OK && cnt == 256,
                      "val labels read (%d)", cnt);
                for (int i = 0; i < cnt; i++) {
                    correct += vt_eval_rank(lg + i * 4, 4, labels[i]) == 0;
                    same &= lab[i] == labels[i];
                }
                CHECK(same, "stored labels are the val labels in dataset order");
                CHECK_CLOSE(100.0 * correct / 256.0, top1, 0.006, 0, "top-1 recomputed from the .npz");
                free(img);
                free(soft);
                vt_loader_close(L);
            } else {
                CHECK(0, "open val loader: %s", vt_last_error());
            }
            free(lg);
        }
    }
    free(b);
}

static void test_resume_exact(const char *precision) {
    /* 256 train samples / batch 32 = 8 steps per epoch, 3 epochs; dropout on so the
     * dropout stream must be restored too. Stop at step 11 (epoch 2, batch 3). */
    char sets[256];
    snprintf(sets, sizeof sets, "--set data.train_size=256 --set train.epochs=3 --set model.drop_rate=0.1 "
             "--set train.log_every=1 --set train.eval_every=1 --set train.precision=%s", precision);
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/straight_%s", tmp, precision);
    snprintf(b, sizeof b, "%s/resumed_%s", tmp, precision);
    int rc = run("%s " CFG " %s --threads 2 --run-dir %s 2>%s.log", bin, sets, a, a);
    CHECK(rc == 0, "straight run exit %d", rc);
    rc = run("%s " CFG " %s --threads 2 --run-dir %s --stop-after 11 2>%s.log1", bin, sets, b, b);
    CHECK(rc == 0, "interrupted run exit %d", rc);
    int n1 = 0;
    free(train_records_text(b, &n1));
    CHECK(n1 == 11, "interrupted run logged %d steps, expected 11", n1);
    char logp[600];
    snprintf(logp, sizeof logp, "%s.log1", b);
    CHECK(file_contains(logp, "--resume"), "stop message tells how to resume");
    rc = run("%s " CFG " %s --threads 2 --resume %s 2>%s.log2", bin, sets, b, b);
    CHECK(rc == 0, "resumed run exit %d", rc);
    int na = 0, nb = 0;
    char *ra = train_records_text(a, &na), *rb = train_records_text(b, &nb);
    CHECK(na == 24 && nb == 24, "24 steps each (straight %d, resumed %d)", na, nb);
    int same = ra && rb && strcmp(ra, rb) == 0;
    CHECK(same, "per-step losses and grad norms equal bit for bit");
    if (!same && ra && rb) fprintf(stderr, "--- straight:\n%s--- resumed:\n%s", ra, rb);
    free(ra);
    free(rb);
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/last.safetensors", a);
    snprintf(pb, sizeof pb, "%s/last.safetensors", b);
    CHECK(same_bytes(pa, pb), "final weights identical");
    snprintf(pa, sizeof pa, "%s.log", a);
    snprintf(pb, sizeof pb, "%s.log2", b);
    CHECK_CLOSE(final_top1(pb), final_top1(pa), 0, 0, "same final accuracy");
    CHECK(final_top1(pa) >= 0, "straight run printed its final line");
}

static void test_nan_stop(void) {
    /* One epoch (8 steps) trains and checkpoints. A huge finite value put into the saved
     * AdamW moment overflows the first resumed update, so the loss of step 10 is NaN:
     * exit 1, a message naming it, last.safetensors untouched. A NaN put there instead is
     * refused on resume, naming the file, the tensor and the element. */
    char d[512], keep[600], last[600], state[600], log[600];
    snprintf(d, sizeof d, "%s/nan", tmp);
    snprintf(last, sizeof last, "%s/last.safetensors", d);
    snprintf(state, sizeof state, "%s/step_00000008.state.safetensors", d);
    snprintf(keep, sizeof keep, "%s/nan_last_copy", tmp);
    snprintf(log, sizeof log, "%s/nan.log", tmp);
    const char *sets = "--set data.train_size=256 --set train.epochs=3";
    int rc = run("%s " CFG " %s --threads 1 --run-dir %s --stop-after 8 2>/dev/null", bin, sets, d);
    CHECK(rc == 0, "first epoch exit %d", rc);
    run("cp %s %s", last, keep);
    CHECK(poke_tensor(state, "optim.m", 3.0e38f), "huge moment put into %s: %s", state,
          vt_last_error());
    rc = run("%s " CFG " %s --threads 1 --resume %s 2>%s", bin, sets, d, log);
    CHECK(rc == 1, "NaN run exits 1, got %d", rc);
    CHECK(file_contains(log, "loss is NaN at step 10 (epoch 2)"), "message names NaN, step and epoch");
    char want[700];
    snprintf(want, sizeof want, "last good checkpoint: %s", last);
    CHECK(file_contains(log, want), "message names the last good checkpoint");
    char good_state[700];
    snprintf(good_state, sizeof good_state, "%s.good", state);
    run("cp %s %s", state, good_state);
    CHECK(poke_tensor(state, "optim.m", NAN), "NaN put into %s", state);
    rc = run("%s " CFG " %s --threads 1 --resume %s 2>%s", bin, sets, d, log);
    CHECK(rc == 1, "a NaN moment is refused with exit 1, got %d", rc);
    snprintf(want, sizeof want, "%s: tensor \"optim.m\" holds NaN at element 0", state);
    CHECK(file_contains(log, want), "message names the state file, the tensor and the element");
    CHECK(same_bytes(last, keep), "last.safetensors left intact");

    /* One flipped bit (the mantissa's lowest of the last value) in the state file, then
     * (the state restored) in the weights of the pair: --resume refuses each, naming the
     * file and a checksum mismatch. */
    char weights[600];
    snprintf(weights, sizeof weights, "%s/step_00000008.safetensors", d);
    const char *files[2] = {state, weights};
    for (int i = 0; i < 2; i++) {
        run("cp %s %s", good_state, state);
        size_t n = 0;
        char *b = test_read_file(files[i], &n);
        CHECK(b && n > 8, "read %s", files[i]);
        if (!b || n <= 8) continue;
        b[n - 4] ^= 1;
        FILE *f = fopen(files[i], "wb");
        CHECK(f && fwrite(b, 1, n, f) == n && fclose(f) == 0, "rewrite %s", files[i]);
        free(b);
        rc = run("%s " CFG " %s --threads 1 --resume %s 2>%s", bin, sets, d, log);
        snprintf(want, sizeof want, "%s: tensor \"", files[i]);
        CHECK(rc == 1 && file_contains(log, want) && file_contains(log, "data checksum mismatch"),
              "a flipped bit in %s: exit %d, message names the file and the checksum", files[i],
              rc);
    }
}

/* Gradient accumulation averages: 2 micro-batches of 16 give the losses and gradient
 * norms of 1 batch of 32 (same samples in the same order) up to rounding. Step-based
 * evaluation cadence: eval_every_steps 3 over 8 steps evaluates at 3, 6 and the end. */
static void test_accum_and_cadence(void) {
    const char *sets = "--set data.train_size=256 --set train.epochs=1 --set train.log_every=1 "
                       "--set train.eval_every=0";
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/acc1", tmp);
    snprintf(b, sizeof b, "%s/acc2", tmp);
    int rc = run("%s " CFG " %s --set train.eval_every_steps=3 --threads 1 --run-dir %s 2>/dev/null",
                 bin, sets, a);
    CHECK(rc == 0, "batch 32 run exit %d", rc);
    rc = run("%s " CFG " %s --set train.batch_size=16 --set train.accum_steps=2 --threads 1 "
             "--run-dir %s 2>/dev/null", bin, sets, b);
    CHECK(rc == 0, "accumulated run exit %d", rc);
    int na = 0, nb = 0;
    char *ra = train_records_text(a, &na), *rb = train_records_text(b, &nb);
    CHECK(na == 8 && nb == 8, "8 optimizer steps each (%d, %d)", na, nb);
    char *pa = ra, *pb = rb;
    for (int i = 0; i < 8 && na == 8 && nb == 8; i++) {
        int sa, sb;
        double la, lb, ga, gb;
        CHECK(sscanf(pa, "%d %lf %lf", &sa, &la, &ga) == 3 && sscanf(pb, "%d %lf %lf", &sb, &lb, &gb) == 3,
              "parse records");
        CHECK(sa == i + 1 && sb == i + 1, "step numbers %d %d", sa, sb);
        CHECK_CLOSE(lb, la, 1e-6, 1e-4, "step %d loss, accumulated vs one batch", i + 1);
        CHECK_CLOSE(gb, ga, 1e-6, 1e-3, "step %d grad norm, accumulated vs one batch", i + 1);
        pa = strchr(pa, '\n') + 1;
        pb = strchr(pb, '\n') + 1;
    }
    free(ra);
    free(rb);
    char path[1024];
    snprintf(path, sizeof path, "%s/metrics.jsonl", a);
    char *m = test_read_file(path, NULL);
    int evals = 0;
    char steps[64] = "";
    for (char *line = m ? strtok(m, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char st[32];
        if (strstr(line, "\"kind\":\"eval\"") && json_raw(line, "step", st, sizeof st)) {
            evals++;
            strncat(steps, st, sizeof steps - strlen(steps) - 2);
            strcat(steps, " ");
        }
    }
    free(m);
    CHECK(evals == 3 && strcmp(steps, "3 6 8 ") == 0, "evaluations at steps '%s', expected '3 6 8 '", steps);
}

static void test_usage_errors(void) {
    char e[512];
    snprintf(e, sizeof e, "%s/err.txt", tmp);
    struct { const char *args; const char *needle; } cases[] = {
        {"", "missing"},
        {"train", "missing CONFIG"},
        {"trian " CFG, "unknown subcommand 'trian'"},
        {CFG " --bogus", "--bogus"},
        {CFG " --threads", "needs a value"},
        {CFG " --threads abc", "--threads"},
        {CFG " --set model.no_such_key=1", "model.no_such_key"},
        {CFG " --set model.heads=3", "heads"},
        {"eval " CFG, "--checkpoint"},
        {"eval --checkpoint tests/fixtures/timm/vit_ape.safetensors", "give the CONFIG"},
        {"info " CFG " --resume x", "--resume"},
        {"no_such_config.json", "no_such_config.json"},
        {CFG " --resume /nonexistent/run/dir", "/nonexistent/run/dir"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = run("%s %s >/dev/null 2>%s", bin, cases[i].args, e);
        CHECK(rc == 2, "'vitrain %s' exits 2, got %d", cases[i].args, rc);
        CHECK(file_contains(e, cases[i].needle), "'vitrain %s' message names '%s'", cases[i].args,
              cases[i].needle);
    }
    int rc = run("VT_ISA=bogus %s info " CFG " >/dev/null 2>%s", bin, e);
    CHECK(rc == 2, "bad VT_ISA exits 2, got %d", rc);
    rc = run("%s train --help >%s 2>/dev/null", bin, e);
    CHECK(rc == 0 && file_contains(e, "--resume"), "train --help exits 0 with usage");
    rc = run("%s help-config >%s 2>/dev/null", bin, e);
    CHECK(rc == 0 && file_contains(e, "model.width"), "help-config lists keys");
}

static void test_info(void) {
    char o[512];
    snprintf(o, sizeof o, "%s/info.txt", tmp);
    int rc = run("%s info " CFG " >%s 2>/dev/null", bin, o);
    CHECK(rc == 0, "info exit %d", rc);
    vt_config cfg;
    vt_config_defaults(&cfg);
    vt_vit m;
    if (vt_resolve_file(&cfg, CFG, NULL, 0) == VT_OK && vit_init_config(&m, &cfg, 1) == VT_OK) {
        char want[64];
        snprintf(want, sizeof want, "\"params\":%lld,", (long long)m.n_params);
        CHECK(file_contains(o, want), "info reports %s", want);
        vt_vit_free(&m);
    } else {
        CHECK(0, "build model of " CFG ": %s", vt_last_error());
    }
    rc = run("%s info configs/default.json >%s 2>/dev/null", bin, o);
    CHECK(rc == 0 && file_contains(o, "\"forward_flops_per_image\":"), "info on the default config");
}

static void test_rank_ties(void) {
    float row[5] = {1.0f, 3.0f, 3.0f, -2.0f, 0.5f};
    CHECK(vt_eval_rank(row, 5, 1) == 0, "highest, tie broken to the lower index");
    CHECK(vt_eval_rank(row, 5, 2) == 1, "tied with a lower index ranks after it");
    CHECK(vt_eval_rank(row, 5, 3) == 4, "lowest");
    float nanrow[3] = {0.0f, NAN, 1.0f};
    CHECK(vt_eval_rank(nanrow, 3, 1) == 3, "NaN logit for the label counts as wrong");
}

int main(void) {
    if (test_kernels_init()) return 1;
    if (e2e_start("e2e_train", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    test_rank_ties();
    test_usage_errors();
    test_info();
    test_learns_and_eval();
    test_resume_exact("fp32");
    test_resume_exact("bf16");
    test_accum_and_cadence();
    test_nan_stop();
    return e2e_finish(tmp);
}
