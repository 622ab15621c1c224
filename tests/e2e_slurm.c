/* e2e_slurm.c - vitrain under a real one-node Slurm (tests/cluster/slurm.sh: Debian's
 * munged, slurmctld and slurmd configured under a temporary directory, in a network
 * namespace of their own, stopped by their PIDs at the end), through the job script
 * users submit, scripts/slurm/vitrain.sbatch (2 ranks by srun --mpi=pmix, 1 thread
 * each), from the repository root with the built binary ($VT_BIN, default ./vitrain):
 *   - an uninterrupted job trains to the end and its log names the rank layout and
 *     the launcher (srun --mpi=pmix);
 *   - a second job with the same arguments, sent SIGUSR1 mid-run as `--signal=B:USR1`
 *     would (scancel --batch), stops at a checkpoint (exit 75), requeues itself (Slurm
 *     starts it again after the test cluster's cred_expire, 10 s),
 *     continues by --resume-or-start when it runs again, and ends with the same final
 *     weights as the uninterrupted job, bit for bit;
 *   - `srun -n 2 vitrain` without --mpi (no PMI in the tasks) is an error naming
 *     --mpi=pmix, exit 2, and writes no run directory.
 * Where Slurm cannot start (not root, a daemon missing, no namespaces) it prints why
 * and skips. Every Slurm command runs under `timeout`; the daemons and the namespace
 * are removed at exit (also on SIGINT, SIGTERM, SIGHUP). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist_runs.h"
#include "e2e_util.h"
#include "harness.h"

#define CFG "configs/synthetic_tiny.json"
/* 256 samples / 32 = 8 steps per epoch, 10 epochs; a model large enough that the run lasts
 * seconds, so the signal sent after its 8th step arrives before its last */
#define STEPS 80
#define ARGS                                                                                      \
    "--set data.train_size=256 --set train.epochs=10 --set train.log_every=1 "                    \
    "--set train.eval_every=0 --set runtime.progress=never --set model.img_size=32 "              \
    "--set model.width=96 --set model.depth=4 --set model.heads=4"

static char bin[1024], tmp[256], name[32], slurm_sh[1100], script[1100];

static void cleanup(void) {
    if (name[0]) run("%s stop %s %s >/dev/null 2>&1", slurm_sh, tmp, name);
}

static void on_signal(int sig) {
    cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Start Slurm, or the reason it cannot start. */
static const char *start_slurm(void) {
    if (geteuid() != 0) return "not root (slurmd and the namespace need root)";
    if (run("{ command -v ip && command -v unshare && command -v munged && command -v slurmctld && "
            "command -v slurmd && command -v sbatch && command -v timeout; } >/dev/null") != 0)
        return "one of ip, unshare, munged, slurmctld, slurmd, sbatch, timeout is missing "
               "(scripts/deps.sh --slurm installs them)";
    snprintf(name, sizeof name, "vtc-%d-s", (int)getpid() % 10000000);
    atexit(cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    if (run("timeout -k 5 90 %s start %s %s >%s/start.log 2>&1", slurm_sh, tmp, name, tmp) != 0)
        return "the daemons did not start (their logs follow)";
    return NULL;
}

/* A Slurm command's output (malloc'd; "" on failure). */
static char *slurm_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *slurm_out(const char *fmt, ...) {
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "timeout -k 5 30 %s run %s %s %s 2>&1", slurm_sh, tmp, name, args);
    FILE *f = popen(cmd, "r");
    size_t cap = 1 << 16, n = 0;
    char *out = calloc(cap, 1);
    if (f) {
        n = fread(out, 1, cap - 1, f);
        pclose(f);
    }
    out[n] = '\0';
    return out;
}

/* Submit the job script for run directory dir; the job id (0: submission failed). */
static int submit(const char *dir) {
    char *out = slurm_out("sbatch --parsable -N1 --ntasks-per-node=2 --cpus-per-task=1 --time=10 -o %s.out "
                          "--export=ALL,VT_BIN=%s,VT_CONFIG=" CFG ",VT_RUN_DIR=%s %s " ARGS,
                          dir, bin, dir, script);
    int id = atoi(out);
    if (id <= 0) fprintf(stderr, "--- sbatch said: %s\n", out);
    free(out);
    return id;
}

/* The job's JobState ("COMPLETED", "PENDING", ...) into state and its Restarts count. */
static void job_state(int id, char *state, size_t len, int *restarts) {
    char *out = slurm_out("scontrol show job %d", id);
    const char *s = strstr(out, "JobState="), *r = strstr(out, "Restarts=");
    snprintf(state, len, "%.*s", s ? (int)strcspn(s + 9, " \n") : 0, s ? s + 9 : "");
    *restarts = r ? atoi(r + 9) : -1;
    free(out);
}

/* Wait (up to limit s) until the job is in `want` (or has ended), with at least
 * min_restarts; 1 when it got there. */
static int await_job(int id, const char *want, int min_restarts, int limit, char *state, size_t len) {
    int restarts = 0;
    for (int i = 0; i < 4 * limit; i++) {
        job_state(id, state, len, &restarts);
        if (restarts >= min_restarts && !strcmp(state, want)) return 1;
        if (!strcmp(state, "FAILED") || !strcmp(state, "CANCELLED") || !strcmp(state, "TIMEOUT")) return 0;
        usleep(250000);
    }
    return 0;
}

/* Train records in dir's metrics.jsonl. */
static int records(const char *dir) {
    char p[600];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    char *s = test_read_file(p, NULL);
    int n = 0;
    for (const char *q = s; q && (q = strstr(q, "\"kind\":\"train\"")); q++) n++;
    free(s);
    return n;
}

static char whole[512];

static void test_uninterrupted(void) {
    snprintf(whole, sizeof whole, "%s/whole", tmp);
    int id = submit(whole);
    CHECK(id > 0, "sbatch accepted the job script");
    char state[64] = "";
    CHECK(await_job(id, "COMPLETED", 0, 180, state, sizeof state), "the job completed (state %s)", state);
    char log[600], layout[200];
    snprintf(log, sizeof log, "%s.out", whole);
    snprintf(layout, sizeof layout, "2 ranks on 1 host (started by srun --mpi=pmix): %s ranks 0-1", name);
    CHECK(file_contains(log, layout), "the log names the rank layout and the launcher once");
    CHECK(count_in_file(log, "ranks on") == 1, "the layout is printed once");
    CHECK(records(whole) == STEPS, "%d train records (%d)", STEPS, records(whole));
}

static void test_requeue(void) {
    char dir[512], log[600];
    snprintf(dir, sizeof dir, "%s/requeued", tmp);
    snprintf(log, sizeof log, "%s.out", dir);
    int id = submit(dir);
    CHECK(id > 0, "sbatch accepted the job script");
    int i = 0;
    for (; i < 600 && records(dir) < 8; i++) usleep(100000);
    CHECK(records(dir) >= 8 && records(dir) < STEPS, "the job is training (%d records)", records(dir));
    char *out = slurm_out("scancel --batch --signal=USR1 %d", id);
    free(out);
    char state[64] = "";
    int requeued = await_job(id, "PENDING", 1, 120, state, sizeof state);
    CHECK(requeued, "the signalled job requeued itself (state %s)", state);
    /* it becomes eligible again once the killed run's credentials expire: cred_expire
     * (10 s) in tests/cluster/slurm.sh */
    CHECK(await_job(id, "COMPLETED", 1, 180, state, sizeof state), "the requeued job completed (state %s)",
          state);
    CHECK(file_contains(log, "stopped by SIGUSR1") && file_contains(log, "requeueing job"),
          "the log says it stopped at a checkpoint and requeued");
    CHECK(file_contains(log, "(restart 1)") && file_contains(log, "resuming"),
          "the second run resumed the run directory");
    train_log t;
    double top1;
    read_log(dir, &t, &top1);
    CHECK(t.last_step == STEPS, "the run reached step %d (%d)", STEPS, t.last_step);
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/last.safetensors", whole);
    snprintf(pb, sizeof pb, "%s/last.safetensors", dir);
    int bitwise = 0;
    double d = weights_diff(pa, pb, &bitwise);
    CHECK(bitwise, "final weights equal the uninterrupted job's bit for bit (largest difference %.3g)", d);
}

static void test_no_pmi(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/no_pmi", tmp);
    char *out = slurm_out("srun -N1 -n 2 --mpi=none %s " CFG " --run-dir %s " ARGS, bin, dir);
    CHECK(strstr(out, "srun --mpi=pmix") != NULL, "srun without PMI: the error names srun --mpi=pmix");
    CHECK(strstr(out, "exit code 2") != NULL, "srun without PMI: the tasks exit 2");
    if (!strstr(out, "srun --mpi=pmix")) fprintf(stderr, "--- srun said:\n%s\n", out);
    free(out);
    CHECK(access(dir, F_OK) != 0, "srun without PMI: no run directory written");
}

int main(void) {
    char given[1024];
    e2e_bin(given, sizeof given);
    if (!realpath(given, bin) || !realpath("tests/cluster/slurm.sh", slurm_sh) ||
        !realpath("scripts/slurm/vitrain.sbatch", script)) {
        fprintf(stderr, "e2e_slurm: run from the repository root with vitrain built ($VT_BIN)\n");
        return 1;
    }
    snprintf(tmp, sizeof tmp, "/tmp/vt_e2e_slurm_%d", (int)getpid());
    run("rm -rf %s && mkdir -p %s", tmp, tmp);
    const char *why = start_slurm();
    if (why) {
        char reason[512];
        snprintf(reason, sizeof reason, "Slurm cannot start here: %s", why);
        run("cat %s/start.log 2>/dev/null; rm -rf %s", tmp, tmp);
        return test_skip("e2e_slurm", reason);
    }
    test_no_pmi();
    test_uninterrupted();
    test_requeue();
    cleanup();
    name[0] = '\0';
    if (!test_failed_count) run("rm -rf %s", tmp);
    return test_summary();
}
