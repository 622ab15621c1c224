/* e2e_hostile_inputs.c - the built binary ($VT_BIN, run from the repository root) given
 * inputs that must cost what they weigh and fail with a message that says what is wrong.
 *
 * Covers (issue 38 items 5, 7, 9, 10):
 *   - a FIFO as CONFIG, --checkpoint, train.init, the run directory's `latest` and a new
 *     run's metrics.jsonl: an
 *     error naming the FIFO, never a hang (each command runs under `timeout`, whose exit
 *     status 124 fails the check);
 *   - CONFIG = /dev/zero under a 1 GiB address-space limit: an error at once, not a read
 *     that grows until the limit;
 *   - model.mlp_ratio = 0.01 (inside its documented range, hidden width 0) in info, train
 *     and eval: a config error (exit 2), never the internal-error abort (exit 134);
 *   - `vitrain info` on a circulant model of head dim 32768 under a 1 GiB limit;
 *   - `vitrain eval` without CONFIG on a 700-byte file whose config declares width 4096:
 *     refused under a 256 MiB address-space limit, before the model is built;
 *   - a checkpoint pair whose weights come from another run's save of the same step: the
 *     message says the two files were not written by one save;
 *   - under mpirun (when present, with 2 or more CPUs), a rank other than 0 bound to one
 *     CPU: the placement warning names that rank and its CPU count.
 * Time is never measured: `timeout` only turns a hang into a failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"

static char bin[512], tmp[64];

#define TINY "configs/synthetic_tiny.json --threads 1 --set data.train_size=64 --set data.val_size=32"

/* Run cmd (stderr and stdout to tmp/name.log) under `timeout 120`; the exit code. */
static int run_logged(const char *name, const char *cmd) {
    return run("timeout 120 sh -c '%s' >%s/%s.log 2>&1", cmd, tmp, name);
}

/* 1 if the log lacks needle (quietly: the log is printed only when a needle is missing). */
static int log_lacks(const char *name, const char *needle) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s.log", tmp, name);
    char *s = test_read_file(path, NULL);
    int r = s && !strstr(s, needle);
    free(s);
    return r;
}

static int log_has(const char *name, const char *needle) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s.log", tmp, name);
    return file_contains(path, needle);
}

static void test_fifos(void) {
    char fifo[128], cmd[4096];
    snprintf(fifo, sizeof fifo, "%s/pipe", tmp);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);

    snprintf(cmd, sizeof cmd, "%s %s", bin, fifo);
    int rc = run_logged("fifo_config", cmd);
    CHECK(rc == 2 && log_has("fifo_config", "the config file is a FIFO (named pipe)"),
          "CONFIG FIFO: exit %d (124: it hung)", rc);

    snprintf(cmd, sizeof cmd, "%s eval --checkpoint %s", bin, fifo);
    rc = run_logged("fifo_eval", cmd);
    CHECK(rc == 1 && log_has("fifo_eval", "is a FIFO (named pipe), not a regular file"),
          "--checkpoint FIFO: exit %d (124: it hung)", rc);

    snprintf(cmd, sizeof cmd, "%s " TINY " --set train.init=%s --run-dir %s/init_run", bin, fifo, tmp);
    rc = run_logged("fifo_init", cmd);
    CHECK(rc == 1 && log_has("fifo_init", "is a FIFO (named pipe), not a regular file"),
          "train.init FIFO: exit %d (124: it hung)", rc);

    /* a FIFO where a new run's metrics.jsonl goes: refused, not opened for writing */
    snprintf(cmd, sizeof cmd, "mkdir %s/metrics_run && mkfifo %s/metrics_run/metrics.jsonl && %s " TINY
             " --stop-after 1 --run-dir %s/metrics_run", tmp, tmp, bin, tmp);
    rc = run_logged("fifo_metrics", cmd);
    CHECK(rc == 1 && log_has("fifo_metrics", "metrics.jsonl: cannot open for appending") &&
              log_has("fifo_metrics", "FIFO"),
          "metrics.jsonl FIFO: exit %d (124: it hung)", rc);

    /* a finished pair, then `latest` replaced by a FIFO */
    snprintf(cmd, sizeof cmd, "%s " TINY " --stop-after 2 --run-dir %s/latest_run", bin, tmp);
    rc = run_logged("latest_first", cmd);
    CHECK(rc == 0, "first run: exit %d", rc);
    char latest[256];
    snprintf(latest, sizeof latest, "%s/latest_run/latest", tmp);
    CHECK(unlink(latest) == 0 && mkfifo(latest, 0600) == 0, "latest replaced by a FIFO");
    snprintf(cmd, sizeof cmd, "%s " TINY " --resume %s/latest_run", bin, tmp);
    rc = run_logged("fifo_latest", cmd);
    CHECK(rc != 0 && rc != 124 && log_has("fifo_latest", "latest: the checkpoint pointer is a FIFO"),
          "latest FIFO: exit %d (124: it hung)", rc);
}

static void test_dev_zero(void) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "ulimit -v 1048576; %s /dev/zero", bin);
    int rc = run_logged("dev_zero", cmd);
    CHECK(rc == 2 && log_has("dev_zero", "/dev/zero: the config file is a character device"),
          "CONFIG=/dev/zero: exit %d", rc);
}

static void test_mlp_ratio(void) {
    char cmd[4096];
    const char *need = "model.mlp_ratio = 0.01 gives an MLP hidden width of int(32 x 0.01) = 0";
    snprintf(cmd, sizeof cmd, "%s info configs/synthetic_tiny.json --set model.mlp_ratio=0.01", bin);
    int rc = run_logged("mlp_info", cmd);
    CHECK(rc == 2 && log_has("mlp_info", need), "info: exit %d (134: the abort)", rc);
    snprintf(cmd, sizeof cmd, "%s " TINY " --set model.mlp_ratio=0.01 --run-dir %s/mlp_run", bin, tmp);
    rc = run_logged("mlp_train", cmd);
    CHECK(rc == 2 && log_has("mlp_train", need), "train: exit %d (134: the abort)", rc);
    /* eval of a good checkpoint with the ratio overridden: the override is the error */
    snprintf(cmd, sizeof cmd, "%s " TINY " --stop-after 1 --run-dir %s/mlp_ok", bin, tmp);
    rc = run_logged("mlp_ok", cmd);
    CHECK(rc == 0, "a checkpoint to evaluate: exit %d", rc);
    snprintf(cmd, sizeof cmd, "%s eval --checkpoint %s/mlp_ok/last.safetensors --set model.mlp_ratio=0.01",
             bin, tmp);
    rc = run_logged("mlp_eval", cmd);
    CHECK(rc == 2 && log_has("mlp_eval", need), "eval: exit %d (134: the abort)", rc);
}

/* `vitrain info` allocates no model: a circulant PE of head dim 32768 (width 65536, the
 * documented maximum, over 2 heads) is planned under a 1 GiB limit; its fused basis of
 * hd^2 floats (4 GiB) was built when the PE was created and aborted there. */
static void test_info_circulant(void) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "ulimit -v 1048576; %s info configs/synthetic_tiny.json --set "
             "pe.kind=circulant --set model.width=65536", bin);
    int rc = run_logged("info_circulant", cmd);
    CHECK(rc == 0 && log_has("info_circulant", "\"params\":"), "info, circulant, width 65536: exit %d", rc);
}

/* A safetensors file of one float whose __metadata__ config declares a model of width
 * 4096 (1.6e9 parameters): refused before that model exists. */
static void test_eval_declared_model(void) {
    char path[256], cmd[4096];
    snprintf(path, sizeof path, "%s/wide.safetensors", tmp);
    const char *json =
        "{\"__metadata__\":{\"config\":\"{\\\"model\\\":{\\\"width\\\":4096,\\\"depth\\\":12,"
        "\\\"heads\\\":32,\\\"patch_size\\\":4,\\\"img_size\\\":16,\\\"in_chans\\\":1,"
        "\\\"num_classes\\\":4},\\\"data\\\":{\\\"kind\\\":\\\"synthetic\\\"}}\"},"
        "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    size_t len = strlen(json), padded = (len + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create %s", path);
    if (!f) return;
    for (int i = 0; i < 8; i++) fputc((int)((padded >> (8 * i)) & 0xff), f);
    fwrite(json, 1, len, f);
    for (size_t i = len; i < padded; i++) fputc(' ', f);
    for (int i = 0; i < 4; i++) fputc(0, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "ulimit -v 262144; %s eval --checkpoint %s", bin, path);
    int rc = run_logged("wide", cmd);
    CHECK(rc == 1 && log_has("wide", "the model its config describes has") &&
              log_has("wide", "more than the 1 values of the file's 1 tensors can fill"),
          "eval of a declared width-4096 model: exit %d", rc);
}

/* Run B's weights of step 2 copied over run A's: the pair was not written by one save. */
static void test_mixed_pair(void) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s " TINY " --stop-after 2 --run-dir %s/pair_a && %s " TINY
             " --set train.seed=5 --stop-after 2 --run-dir %s/pair_b && cp %s/pair_b/step_00000002.safetensors "
             "%s/pair_a/step_00000002.safetensors", bin, tmp, bin, tmp, tmp, tmp);
    int rc = run_logged("pairs", cmd);
    CHECK(rc == 0, "two runs and the copy: exit %d", rc);
    snprintf(cmd, sizeof cmd, "%s " TINY " --resume %s/pair_a", bin, tmp);
    rc = run_logged("mixed", cmd);
    CHECK(rc == 1 && log_has("mixed", "the two files were not written by one save") &&
              log_lacks("mixed", "from different steps"),
          "resume of a mixed pair: exit %d", rc);
}

/* Rank 1 alone bound to one CPU (taskset), rank 0 free: the warning names rank 1. */
static void test_binding_warning(void) {
    if (run("command -v mpirun >/dev/null 2>&1 && command -v taskset >/dev/null 2>&1") != 0 ||
        sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        printf("skipped: MPI placement warning (needs mpirun, taskset and 2 CPUs)\n");
        return;
    }
    char wrap[256], cmd[4096];
    snprintf(wrap, sizeof wrap, "%s/rank1_one_cpu.sh", tmp);
    FILE *f = fopen(wrap, "w");
    CHECK(f != NULL, "create %s", wrap);
    if (!f) return;
    fprintf(f, "#!/bin/sh\n"
               "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exec taskset -c 0 \"$@\"; fi\n"
               "exec \"$@\"\n");
    fclose(f);
    chmod(wrap, 0755);
    snprintf(cmd, sizeof cmd, "mpirun -np 2 --oversubscribe --bind-to none%s %s %s "
             "configs/synthetic_tiny.json --threads 2 --set data.train_size=64 --set data.val_size=32 "
             "--stop-after 1 --run-dir %s/mpi_run",
             geteuid() == 0 ? " --allow-run-as-root" : "", wrap, bin, tmp);
    int rc = run_logged("binding", cmd);
    CHECK(rc == 0 && log_has("binding", "1 of 2 ranks are bound to fewer CPUs than their 2 OpenMP "
                                        "threads (rank 1: 1 CPU)"),
          "placement warning: exit %d", rc);
}

int main(void) {
    if (e2e_start("e2e_hostile", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    test_fifos();
    test_dev_zero();
    test_mlp_ratio();
    test_eval_declared_model();
    test_info_circulant();
    test_mixed_pair();
    test_binding_warning();
    return e2e_finish(tmp);
}
