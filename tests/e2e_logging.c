/* e2e_logging.c - what a run shows a person, through the built binary ($VT_BIN, default
 * ./vitrain; run from the repository root) on configs/synthetic_tiny.json for 40 steps
 * (one epoch of 32 and 8 steps of the next):
 *   - the start summary, line for line (the numbers from the library: parameters, FLOPs,
 *     kernel level), without the resolved config unless --verbose; the end summary:
 *     final and best top-1 with epoch and step as metrics.jsonl has them, time, images/s,
 *     peak memory, the paths of last and best
 *   - summary.csv: the header, one row per epoch with the eval cells of its evaluation
 *     and the epoch's mean loss and training top-1 as the per-step records give them
 *   - a run killed after its checkpoint at step 32 had logged steps 33..36 (simulated:
 *     `latest` moved back to the step-32 pair) and resumed: metrics.jsonl and summary.csv
 *     equal the uninterrupted run's but for timings, and TensorBoard's own reader
 *     (tests/tensorboard_check.py with the python of scripts/tensorboard_venv.sh:
 *     $VT_TB_PYTHON, else .venv-tensorboard/bin/python; skipped with a line when neither
 *     has tensorboard) finds every scalar once per step, equal to metrics.jsonl
 *   - two ranks (mpirun): the start summary counts them, and rank 0's exposed
 *     communication time per step is the train/comm_s scalar
 *   - scripts/plot_runs.py draws both runs into a PNG, and refuses a directory that is
 *     not a run (skipped without /usr/bin/python3 and matplotlib)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"
#include "test_util.h"
#include "tfevents_read.h"

#include "config.h"
#include "kernels.h"
#include "resolve.h"
#include "vit.h"

#define CFG "configs/synthetic_tiny.json"
#define SETS "--set train.steps=40 --set train.keep_checkpoints=2 --threads 2"

static char bin[1024];
static char tmp[64];
static int skipped;

/* The line of a log that starts with prefix (malloc'd, without its newline), or NULL. */
static char *line_of(const char *log, const char *prefix) {
    char *s = test_read_file(log, NULL);
    char *out = NULL;
    for (char *p = s; p && *p;) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (!strncmp(p, prefix, strlen(prefix))) {
            out = strndup(p, len);
            break;
        }
        p += len + (nl ? 1 : 0);
    }
    free(s);
    return out;
}

static void check_line(const char *log, const char *want) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%.17s", want);
    char *got = line_of(log, prefix);
    CHECK(got && !strcmp(got, want), "%s: line\n  %s\nexpected\n  %s", log, got ? got : "(missing)", want);
    free(got);
}

/* Raw text of "key": value in a JSON line. */
static int json_num(const char *line, const char *key, double *out) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return 0;
    *out = atof(p + strlen(pat));
    return 1;
}

typedef struct {
    double loss_sum, top1_sum;
    int steps;
    double eval_top1[3], eval_top5[3], eval_loss[3]; /* at steps 32 and 40: [1], [2] */
    double best_top1;
    int best_step;
} run_facts;

/* The records of metrics.jsonl per epoch (1, 2). */
static void facts_of(const char *dir, run_facts f[3]) {
    memset(f, 0, 3 * sizeof *f);
    f[0].best_top1 = -1;
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *s = test_read_file(path, NULL);
    for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        double step, v;
        json_num(line, "step", &step);
        int e = step <= 32 ? 1 : 2;
        if (strstr(line, "\"kind\":\"train\"")) {
            json_num(line, "loss", &v);
            f[e].loss_sum += v;
            json_num(line, "top1", &v);
            f[e].top1_sum += v;
            f[e].steps++;
        } else if (strstr(line, "\"kind\":\"eval\"")) {
            json_num(line, "top1", &f[e].eval_top1[e]);
            json_num(line, "top5", &f[e].eval_top5[e]);
            json_num(line, "loss", &f[e].eval_loss[e]);
            if (f[e].eval_top1[e] > f[0].best_top1) {
                f[0].best_top1 = f[e].eval_top1[e];
                f[0].best_step = (int)step;
            }
        }
    }
    free(s);
}

/* Remove the field ,"key":value from a JSON line. */
static void drop_field(char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, ",\"%s\":", key);
    char *p = strstr(line, pat);
    if (!p) return;
    char *end = p + 1 + strcspn(p + 1, ",}");
    memmove(p, end, strlen(end) + 1);
}

/* A file's lines with the columns/fields of timing removed: summary.csv's last two
 * columns, metrics.jsonl's img_per_s, wall_s and seconds. */
static char *untimed(const char *path) {
    char *s = test_read_file(path, NULL);
    if (!s) return NULL;
    char *out = calloc(strlen(s) + 1, 1);
    size_t o = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        if (strchr(line, '{')) {
            drop_field(line, "img_per_s");
            drop_field(line, "wall_s");
            drop_field(line, "seconds");
        } else { /* csv: drop the last two cells */
            for (int k = 0; k < 2; k++) {
                char *c = strrchr(line, ',');
                if (c) *c = '\0';
            }
        }
        o += (size_t)sprintf(out + o, "%s\n", line);
    }
    free(s);
    return out;
}

static void test_summaries(const char *dir) {
    char log[600], path[600], want[1024];
    snprintf(log, sizeof log, "%s.log", dir);
    int rc = run("%s " CFG " " SETS " --set train.log_every=1 --run-dir %s 2>%s", bin, dir, log);
    CHECK(rc == 0, "run exit %d (log %s)", rc, log);

    vt_config c;
    CHECK(vt_resolve_file(&c, CFG, NULL, 0) == VT_OK, "config: %s", vt_last_error());
    vt_vit m;
    vt_model_spec ms;
    CHECK(vt_vit_plan(&m, vt_resolve_model_spec(&c, &ms)) == VT_OK, "plan");
    snprintf(want, sizeof want, "vitrain: model    custom: width 32, depth 2, heads 2, patch 4, image 16, "
             "4 classes, pe ape; %.3g k parameters, %.3g GFLOPs per image (forward)",
             (double)m.n_params / 1e3, vt_vit_flops(&m, 16) / 1e9);
    vt_vit_free(&m);
    check_line(log, want);
    check_line(log, "vitrain: data     synthetic (generated): train 1024, val 256 images, 4 classes");
    snprintf(want, sizeof want, "vitrain: compute  fp32, kernels %s (GEMM context %s), 2 threads x 1 rank",
             vt_k.name, vt_gemm_ctx.name);
    check_line(log, want);
    check_line(log, "vitrain: schedule 2 epochs of 32 steps = 40 steps (global batch 32)");
    snprintf(want, sizeof want, "vitrain: run      %s (full config: %s/config.json; --verbose prints it)",
             dir, dir);
    check_line(log, want);
    char *text = test_read_file(log, NULL);
    CHECK(text && !strstr(text, "resolved config"), "no resolved config without --verbose");
    free(text);

    run_facts f[3];
    facts_of(dir, f);
    snprintf(want, sizeof want, "final: top-1 %.2f%% top-5 %.2f%% (val, 256 images) at epoch 2, step 40",
             f[2].eval_top1[2], f[2].eval_top5[2]);
    check_line(log, want);
    snprintf(want, sizeof want, "best:  top-1 %.2f%% at epoch %d, step %d", f[0].best_top1,
             f[0].best_step <= 32 ? 1 : 2, f[0].best_step);
    check_line(log, want);
    char *t = line_of(log, "time:  ");
    double w = 0, ips = 0, mib = 0;
    int ok = t && sscanf(t, "time:  %lf s, %lf img/s, peak memory %lf MiB (resident set of rank 0)", &w, &ips,
                         &mib) == 3 && strstr(t, "MiB (resident set of rank 0)");
    CHECK(ok && w > 0 && ips > 0 && mib > 1, "time line: %s", t ? t : "(missing)");
    free(t);
    snprintf(want, sizeof want, "files: %s/last.safetensors (last), %s/best.safetensors (best)", dir, dir);
    check_line(log, want);

    /* summary.csv against the per-step records */
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    char *csv = test_read_file(path, NULL);
    const char *header = "epoch,step,train_loss,train_top1,eval_loss,eval_top1,eval_top5,lr,img_per_s,wall_s\n";
    size_t hl = strlen(header);
    int header_ok = csv && !strncmp(csv, header, hl);
    CHECK(header_ok, "summary.csv header: %.90s", csv ? csv : "(missing)");
    int rows = 0;
    for (char *line = header_ok ? strtok(csv + hl, "\n") : NULL; line; line = strtok(NULL, "\n"), rows++) {
        int ep, step;
        double tl, tt, el, e1, e5, lr;
        int n = sscanf(line, "%d,%d,%lf,%lf,%lf,%lf,%lf,%lf,", &ep, &step, &tl, &tt, &el, &e1, &e5, &lr);
        CHECK(n == 8 && ep == rows + 1 && step == (ep == 1 ? 32 : 40), "row %d: %s", rows + 1, line);
        if (n != 8 || ep < 1 || ep > 2) continue;
        CHECK(f[ep].steps == (ep == 1 ? 32 : 8), "epoch %d: %d train records", ep, f[ep].steps);
        CHECK_CLOSE(tl, f[ep].loss_sum / f[ep].steps, 1e-6, 1e-6, "epoch %d mean loss", ep);
        CHECK_CLOSE(tt, f[ep].top1_sum / f[ep].steps, 1e-3, 0, "epoch %d training top-1", ep);
        CHECK_CLOSE(e1, f[ep].eval_top1[ep], 1e-4, 0, "epoch %d eval top-1", ep);
        CHECK_CLOSE(e5, f[ep].eval_top5[ep], 1e-4, 0, "epoch %d eval top-5", ep);
        CHECK_CLOSE(el, f[ep].eval_loss[ep], 1e-6, 1e-6, "epoch %d eval loss", ep);
    }
    CHECK(rows == 2, "summary.csv: %d rows, expected 2", rows);
    free(csv);
}

/* Where TensorBoard's reader is: $VT_TB_PYTHON or .venv-tensorboard/bin/python, if it
 * imports tensorboard. */
static const char *tensorboard_python(void) {
    static char py[1024];
    const char *env = getenv("VT_TB_PYTHON");
    snprintf(py, sizeof py, "%s", env && *env ? env : ".venv-tensorboard/bin/python");
    if (run("%s -c 'import tensorboard' >/dev/null 2>&1", py) != 0) return NULL;
    return py;
}

static void test_resume_and_tensorboard(const char *straight, const char *dir) {
    char log[600], path[600];
    snprintf(log, sizeof log, "%s.log", dir);
    int rc = run("%s " CFG " " SETS " --set train.log_every=1 --run-dir %s --stop-after 36 --verbose 2>%s", bin,
                 dir, log);
    CHECK(rc == 0, "run to step 36: exit %d (log %s)", rc, log);
    CHECK(file_contains(log, "vitrain: resolved config:\n{"), "--verbose prints the resolved config");
    /* a kill after step 36's records, before its checkpoint: `latest` still names step 32 */
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *fl = fopen(path, "w");
    fputs("step_00000032\n", fl);
    fclose(fl);
    rc = run("%s " CFG " " SETS " --set train.log_every=1 --resume %s 2>%s.2", bin, dir, log);
    CHECK(rc == 0, "resume at step 32: exit %d (log %s.2)", rc, log);
    char log2[620];
    snprintf(log2, sizeof log2, "%s.2", log);
    check_line(log2, "vitrain: schedule 2 epochs of 32 steps = 40 steps (global batch 32), resumed at step 32");

    const char *logs[] = {"metrics.jsonl", "summary.csv"};
    for (int i = 0; i < 2; i++) {
        char a[600], b[600];
        snprintf(a, sizeof a, "%s/%s", straight, logs[i]);
        snprintf(b, sizeof b, "%s/%s", dir, logs[i]);
        char *x = untimed(a), *y = untimed(b);
        CHECK(x && y && !strcmp(x, y), "%s of the resumed run equals the uninterrupted run's but for "
              "timings:\n%s\nvs\n%s", logs[i], y ? y : "(missing)", x ? x : "(missing)");
        free(x);
        free(y);
    }

    /* the event files themselves: the first kept steps <= 32, the second starts at 33 */
    char names[4][256], ev[900];
    int nf = event_files(dir, names), clean, start;
    static int64_t steps[2048];
    CHECK(nf == 2, "%s: 2 event files after the resume, found %d", dir, nf);
    if (nf == 2) {
        snprintf(ev, sizeof ev, "%s/%s", dir, names[0]);
        int k = file_steps(ev, steps, 2048, &clean, &start);
        int64_t top = 0;
        for (int i = 0; i < k; i++) top = steps[i] > top ? steps[i] : top;
        CHECK(clean && k > 100 && top == 32, "%s: %d records up to step %lld, expected up to 32", ev, k,
              (long long)top);
        snprintf(ev, sizeof ev, "%s/%s", dir, names[1]);
        k = file_steps(ev, steps, 2048, &clean, &start);
        CHECK(clean && k > 2 && start == 1 && steps[1] == 33 && steps[k - 1] == 40, "%s: version, START at "
              "33, records to step 40: %d records, START at %d", ev, k, start);
    }

    const char *py = tensorboard_python();
    if (!py) {
        printf("skipped: TensorBoard reader check (no python with tensorboard: set VT_TB_PYTHON or run "
               "scripts/tensorboard_venv.sh)\n");
        skipped++;
        return;
    }
    const char *dirs[] = {straight, dir};
    for (int i = 0; i < 2; i++) {
        char out[700];
        snprintf(out, sizeof out, "%s.tb%d", dir, i);
        rc = run("%s tests/tensorboard_check.py %s >%s 2>&1", py, dirs[i], out);
        CHECK(rc == 0 && file_contains(out, ", ok"), "TensorBoard reads %s as metrics.jsonl says (exit %d, "
              "output %s)", dirs[i], rc, out);
    }
}

static void test_two_ranks(void) {
    char dir[600], log[620];
    snprintf(dir, sizeof dir, "%s/ranks", tmp);
    snprintf(log, sizeof log, "%s.log", dir);
    int rc = run("mpirun -np 2 --oversubscribe%s %s " CFG " --set train.steps=8 --set train.log_every=4 "
                 "--threads 1 --run-dir %s 2>%s", geteuid() == 0 ? " --allow-run-as-root" : "", bin, dir, log);
    CHECK(rc == 0, "2 ranks: exit %d (log %s)", rc, log);
    char want[256];
    snprintf(want, sizeof want, "vitrain: compute  fp32, kernels %s (GEMM context %s), 1 thread x 2 ranks",
             vt_k.name, vt_gemm_ctx.name);
    check_line(log, want);
    char path[640];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    CHECK(file_contains(path, "\"ranks\":2,\"comm_s\":"), "train records carry comm_s");
    const char *py = tensorboard_python();
    if (!py) return; /* reported by test_resume_and_tensorboard */
    char out[640];
    snprintf(out, sizeof out, "%s.tb", dir);
    rc = run("%s tests/tensorboard_check.py %s >%s 2>&1", py, dir, out);
    CHECK(rc == 0 && file_contains(out, "12 tags") && file_contains(out, ", ok"),
          "TensorBoard reads the 2-rank run, train/comm_s included (exit %d, output %s)", rc, out);
}

static void test_plot(const char *a, const char *b) {
    if (run("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
        printf("skipped: plot check (no /usr/bin/python3 with matplotlib: scripts/deps.sh installs it)\n");
        skipped++;
        return;
    }
    char png[600], out[600];
    snprintf(png, sizeof png, "%s/curves.png", tmp);
    snprintf(out, sizeof out, "%s/plot.out", tmp);
    int rc = run("scripts/plot_runs.py %s %s -o %s >%s 2>&1", a, b, png, out);
    char *s = test_read_file(png, NULL);
    CHECK(rc == 0 && s && !memcmp(s, "\x89PNG", 4), "plot_runs.py draws a PNG (exit %d, %s)", rc, out);
    free(s);
    CHECK(file_contains(out, "plot_runs: 2 runs drawn to "), "plot_runs.py says what it drew");
    rc = run("scripts/plot_runs.py %s/nothing -o %s >%s 2>&1", tmp, png, out);
    char want[600];
    snprintf(want, sizeof want, "plot_runs: %s/nothing: no metrics.jsonl (not a vitrain run directory?)", tmp);
    CHECK(rc == 2 && file_contains(out, want), "a directory without a run: exit %d", rc);
}

int main(void) {
    if (test_kernels_init()) return 1;
    if (e2e_start("e2e_logging", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    char a[300], c[300];
    snprintf(a, sizeof a, "%s/straight", tmp);
    snprintf(c, sizeof c, "%s/resumed", tmp);
    test_summaries(a);
    test_resume_and_tensorboard(a, c);
    test_two_ranks();
    test_plot(a, c);
    int rc = test_failed_count ? 1 : 0;
    if (skipped) printf("%d passed, %d failed, %d skipped\n", test_passed_count, test_failed_count, skipped);
    else test_summary();
    if (rc == 0) run("rm -rf %s", tmp);
    else fprintf(stderr, "run directories kept in %s\n", tmp);
    return rc;
}
