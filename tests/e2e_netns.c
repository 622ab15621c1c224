/* e2e_netns.c - two hosts in the test suite: 2 ranks in two network namespaces joined
 * by a veth pair (tests/cluster/netns.sh: each "host" has its own address, its own host
 * name and its own TCP stack; traffic stays on the namespaces' addresses), launched by
 * Open MPI's mpirun in the first namespace through an rsh agent that runs
 * `ip netns exec` (the way ssh starts orted on another machine), over TCP alone
 * (--mca btl tcp,self). Run from the repository root with the built binary ($VT_BIN,
 * default ./vitrain) on configs/synthetic_tiny.json with every random element on:
 *   - 2 ranks across the namespaces equal 1 process over 24 steps (per-step losses and
 *     gradient norms, final weights: float summation order only), and the start-up line
 *     names both hosts and their ranks;
 *   - the second host's rank killed with SIGKILL mid-run: the job ends within 30 s,
 *     non-zero, naming the rank and its host; --resume (2 ranks again) reaches the
 *     uninterrupted run's final weights bit for bit;
 *   - the second host's link taken down mid-run: with runtime.comm_timeout 5 the
 *     watchdog (dist.h) ends the job within 60 s, non-zero, its message naming rank 0,
 *     its host, the unanswered exchange and rank 1 on the second host; after the link
 *     is back up --resume reaches the uninterrupted run's weights bit for bit.
 * Needs root, `ip`, `unshare` and mpirun; where the namespaces cannot be made it prints
 * why and skips. The namespaces are named vtc-PID-a/-b and removed at exit (also on
 * SIGINT, SIGTERM, SIGHUP); every launch runs under `timeout`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist_runs.h"
#include "e2e_util.h"
#include "harness.h"

#define CFG "configs/synthetic_tiny.json"
/* 256 samples / 32 = 8 steps per epoch; a checkpoint every epoch */
#define RECIPE                                                                                    \
    "--set data.train_size=256 --set train.epochs=12 --set model.drop_rate=0.1 "                  \
    "--set model.attn_drop_rate=0.1 --set model.drop_path=0.2 --set data.mixup=0.8 "              \
    "--set data.cutmix=1.0 --set data.reprob=0.25 --set train.label_smoothing=0.1 "               \
    "--set data.hflip=0.5 --set train.log_every=1 --set train.eval_every=1 "                      \
    "--set runtime.progress=never --threads 1"
#define NET "10.231.17" /* inside the namespaces only */

static char bin[1024], tmp[256], prefix[32], netns_sh[1100], hostfile[300], launch[4096];

static void cleanup(void) {
    if (prefix[0]) run("%s down %s >/dev/null 2>&1", netns_sh, prefix);
}

static void on_signal(int sig) {
    cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The two hosts, or the reason they cannot be made (returned as a message). */
static const char *make_hosts(void) {
    if (geteuid() != 0) return "not root (network namespaces need CAP_NET_ADMIN)";
    if (run("{ command -v ip && command -v unshare && command -v mpirun && command -v timeout; } >/dev/null") != 0)
        return "one of ip, unshare, mpirun, timeout is missing";
    snprintf(prefix, sizeof prefix, "vtc-%d", (int)getpid() % 10000000);
    atexit(cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    if (run("%s up %s " NET " >%s/netns.log 2>&1", netns_sh, prefix, tmp) != 0)
        return "`ip netns add` or the veth pair failed (see the log above)";
    return NULL;
}

/* Wait until PREFIX-b's end of the link is up again with its carrier (Open MPI skips
 * interfaces that are down), for up to 10 s. */
static int link_back_up(void) {
    run("%s link %s up", netns_sh, prefix);
    for (int i = 0; i < 100; i++) {
        if (run("ip -n %s-b link show %s-vb | grep -q LOWER_UP", prefix, prefix) == 0) return 1;
        usleep(100000);
    }
    return 0;
}

/* Start `cmd` in the background (a shell of its own); its pid. */
static pid_t start(const char *cmd) {
    pid_t p = fork();
    if (p == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return p;
}

/* Wait for pid for up to limit seconds; its exit code (-1 if it did not exit normally
 * or is still running, then it is killed). */
static int finish(pid_t pid, double limit, double *took) {
    double t0 = now_s();
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (now_s() - t0 > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            *took = now_s() - t0;
            return -1;
        }
        usleep(20000);
    }
    *took = now_s() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Wait until the run directory names a checkpoint pair (its file `latest`), up to 60 s. */
static int await_checkpoint(const char *dir) {
    char p[600];
    snprintf(p, sizeof p, "%s/latest", dir);
    struct stat st;
    for (int i = 0; i < 3000; i++) {
        if (stat(p, &st) == 0) return 1;
        usleep(20000);
    }
    return 0;
}

/* Train into dir on the two hosts in the background (extra: more options). */
static pid_t start_two(const char *dir, const char *extra) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s " CFG " " RECIPE " %s --run-dir %s >%s.log 2>&1", launch, bin,
             extra, dir, dir);
    return start(cmd);
}

static int run_two(const char *dir, const char *extra) {
    double took;
    return finish(start_two(dir, extra), 120, &took);
}

static int same_weights(const char *a, const char *b) {
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/last.safetensors", a);
    snprintf(pb, sizeof pb, "%s/last.safetensors", b);
    int bitwise = 0;
    double d = weights_diff(pa, pb, &bitwise);
    if (!bitwise) fprintf(stderr, "--- %s vs %s: largest weight difference %.3g\n", pa, pb, d);
    return bitwise;
}

/* the uninterrupted run on the two hosts: the reference of the resumed ones */
static char two[512];

/* The first PARITY_STEPS steps (the tolerances of dist_runs.h hold for as many steps
 * as e2e_dist compares), then the uninterrupted run. */
#define PARITY_STEPS 24
static void test_parity(void) {
    char one[512], short_two[512];
    snprintf(one, sizeof one, "%s/one", tmp);
    snprintf(short_two, sizeof short_two, "%s/two_%d", tmp, PARITY_STEPS);
    snprintf(two, sizeof two, "%s/two", tmp);
    int rc = run("timeout -k 5 120 %s " CFG " " RECIPE " --stop-after %d --run-dir %s >%s.log 2>&1", bin,
                 PARITY_STEPS, one, one);
    CHECK(rc == 0, "single-process run exit %d", rc);
    char stop[64];
    snprintf(stop, sizeof stop, "--stop-after %d", PARITY_STEPS);
    rc = run_two(short_two, stop);
    CHECK(rc == 0, "2 ranks on the two hosts: exit %d", rc);
    check_same_run(one, short_two, PARITY_STEPS, "2 ranks on two hosts over TCP vs 1 process");
    rc = run_two(two, "");
    CHECK(rc == 0, "2 ranks on the two hosts, uninterrupted: exit %d", rc);
    char log[600], layout[200];
    snprintf(log, sizeof log, "%s.log", two);
    snprintf(layout, sizeof layout, "2 ranks on 2 hosts (started by mpirun): %s-a rank 0, %s-b rank 1",
             prefix, prefix);
    CHECK(file_contains(log, layout), "the start-up line names both hosts and their ranks");
}

/* The pid of vitrain in namespace PREFIX-b (0: none). */
static pid_t remote_rank(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "for p in $(ip netns pids %s-b); do "
             "[ \"$(cat /proc/$p/comm 2>/dev/null)\" = vitrain ] && echo $p; done", prefix);
    FILE *f = popen(cmd, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1) pid = 0;
        pclose(f);
    }
    return (pid_t)pid;
}

static void test_kill(void) {
    char dir[512], log[600], again[600];
    snprintf(dir, sizeof dir, "%s/killed", tmp);
    snprintf(log, sizeof log, "%s.log", dir);
    pid_t job = start_two(dir, "");
    int ckpt = await_checkpoint(dir);
    CHECK(ckpt, "the run wrote a checkpoint");
    pid_t victim = remote_rank();
    CHECK(victim > 0, "rank 1's process found in %s-b", prefix);
    if (victim > 0) kill(victim, SIGKILL);
    double took;
    int rc = finish(job, 30, &took);
    CHECK(rc > 0, "a killed rank ends the job non-zero (exit %d after %.1f s)", rc, took);
    CHECK(took < 30, "the job ended within 30 s of the kill (%.1f s)", took);
    char host[64];
    snprintf(host, sizeof host, "%s-b", prefix);
    CHECK(file_contains(log, "rank 1") && file_contains(log, host), "the message names rank 1 and host %s",
          host);
    printf("note: rank 1 killed: the job ended %.1f s later\n", took);
    snprintf(again, sizeof again, "--resume %s", dir);
    rc = run_two(dir, again);
    CHECK(rc == 0, "--resume after the kill: exit %d", rc);
    CHECK(same_weights(two, dir), "the resumed run's final weights equal the uninterrupted run's");
}

static void test_link_down(void) {
    char dir[512], log[600], again[600], want[200];
    snprintf(dir, sizeof dir, "%s/cut", tmp);
    snprintf(log, sizeof log, "%s.log", dir);
    pid_t job = start_two(dir, "--set runtime.comm_timeout=5");
    CHECK(await_checkpoint(dir), "the run wrote a checkpoint");
    run("%s link %s down", netns_sh, prefix);
    double took;
    int rc = finish(job, 60, &took);
    CHECK(rc > 0, "a link down ends the job non-zero (exit %d after %.1f s)", rc, took);
    CHECK(took < 60, "the job ended within 60 s of the link going down (%.1f s)", took);
    snprintf(want, sizeof want, "rank 0 of 2 (host %s-a", prefix);
    CHECK(file_contains(log, want), "the watchdog names rank 0 and its host");
    snprintf(want, sizeof want, "rank 1 on %s-b", prefix);
    CHECK(file_contains(log, want) && file_contains(log, "with no answer from the other ranks"),
          "the message says what it waited for and names rank 1 on its host");
    printf("note: link down: the job ended %.1f s later (runtime.comm_timeout 5 s)\n", took);
    CHECK(link_back_up(), "the link is up again");
    snprintf(again, sizeof again, "--resume %s", dir);
    rc = run_two(dir, again);
    CHECK(rc == 0, "--resume after the link came back: exit %d", rc);
    CHECK(same_weights(two, dir), "the resumed run's final weights equal the uninterrupted run's");
}

int main(void) {
    char given[1024];
    e2e_bin(given, sizeof given);
    if (!realpath(given, bin)) {
        fprintf(stderr, "e2e_netns: no vitrain binary ($VT_BIN or ./vitrain)\n");
        return 1;
    }
    if (!realpath("tests/cluster/netns.sh", netns_sh)) {
        fprintf(stderr, "e2e_netns: run from the repository root (tests/cluster/netns.sh)\n");
        return 1;
    }
    snprintf(tmp, sizeof tmp, "/tmp/vt_e2e_netns_%d", (int)getpid());
    run("rm -rf %s && mkdir -p %s", tmp, tmp);
    const char *why = make_hosts();
    if (why) {
        char reason[512];
        snprintf(reason, sizeof reason, "two network namespaces cannot be made here: %s", why);
        run("cat %s/netns.log 2>/dev/null; rm -rf %s", tmp, tmp);
        return test_skip("e2e_netns", reason);
    }
    snprintf(hostfile, sizeof hostfile, "%s/hosts", tmp);
    FILE *f = fopen(hostfile, "w");
    fprintf(f, "%s-a slots=1\n%s-b slots=1\n", prefix, prefix);
    fclose(f);
    /* mpirun in the first host; the rsh agent starts orted in the second; TCP on the
     * veth subnet only, for both the ranks' data (btl) and Open MPI's own (oob) */
    snprintf(launch, sizeof launch, "timeout -k 5 120 %s on %s-a mpirun --allow-run-as-root -np 2 "
             "--hostfile %s --mca plm_rsh_agent '%s rsh' --mca btl tcp,self --mca btl_tcp_if_include "
             NET ".0/24 --mca oob_tcp_if_include " NET ".0/24 --bind-to none", netns_sh, prefix, hostfile,
             netns_sh);
    test_parity();
    test_kill();
    test_link_down();
    cleanup();
    char left[64];
    snprintf(left, sizeof left, "ip netns list | grep -q '^%s-'", prefix);
    CHECK(run("%s", left) != 0, "the namespaces are gone");
    prefix[0] = '\0';
    if (!test_failed_count) run("rm -rf %s", tmp);
    return test_summary();
}
