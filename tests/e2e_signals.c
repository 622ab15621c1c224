/* e2e_signals.c - stopping on a signal, step and time checkpoints and --resume-or-start,
 * end to end through the built binary ($VT_BIN, default ./vitrain; run from the
 * repository root) on configs/synthetic_tiny.json with every random element of the
 * recipe on (dropout, attention dropout, drop-path, mixup + cutmix, random erasing, flips,
 * label smoothing) and no checkpoint but the one a stop writes (train.ckpt_every 0):
 *   - SIGTERM, SIGINT and SIGUSR1, one process: sent at random moments of the run (after
 *     its first step), again and again, each run continued with the command it printed,
 *     until one finishes: every stop exits 75 naming the signal and the pair it wrote,
 *     and the final weights and every step's loss equal an uninterrupted run's bit for
 *     bit; the SIGUSR1 runs use --resume-or-start (one command for every restart);
 *   - the same with 2 ranks under mpirun, each signal sent to a random rank, and SIGUSR1
 *     sent to mpirun (which forwards it), against an uninterrupted 2-rank run;
 *   - a second SIGINT exits at once (130) without writing a pair; the run directory then
 *     still resumes from its last pair to the same final weights;
 *   - SIGINT inherited as ignored (`trap '' INT`), and SIGTERM inherited as blocked, still
 *     stop the run with a checkpoint;
 *   - train.ckpt_every_steps writes pairs every N steps (mid-epoch) and keep_checkpoints
 *     still bounds them; a run resumed from a mid-epoch step pair ends bit-identical;
 *     train.ckpt_every_minutes writes pairs between the epoch boundaries;
 *   - a signal during an evaluation (mid-run, and the final one) ends it at its next batch
 *     with exit 75; the continued run makes it first, each evaluation is logged once and
 *     equals an uninterrupted run's;
 *   - --resume-or-start in a directory with a run's leftovers but no pair starts the run;
 *     in one whose `latest` names no pair it is an error, not a restart; --resume or
 *     --start-over with --resume-or-start is a usage error.
 * The random moments come from VT_TEST_SEED (default: the clock), printed for a rerun.
 * mpirun gets --oversubscribe (2 cores here) and --allow-run-as-root when run as root. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "safetensors.h"
#include "e2e_util.h"
#include "harness.h"
#include "mpi_launch.h"
#include "stop.h"

#define CFG "configs/synthetic_tiny.json"
/* 256 samples / 32 = 8 steps per epoch, 6 epochs = 48 steps */
#define RECIPE                                                                                    \
    "--set data.train_size=256 --set train.epochs=6 --set model.drop_rate=0.1 "                   \
    "--set model.attn_drop_rate=0.1 --set model.drop_path=0.2 --set data.mixup=0.8 "              \
    "--set data.cutmix=1.0 --set data.reprob=0.25 --set train.label_smoothing=0.1 "               \
    "--set data.hflip=0.5 --set train.log_every=1 --set train.eval_every=2 --set train.ckpt_every=0"
#define T_STEPS 48

static char bin[1024], tmp[256];
static uint64_t rng_state;

static double uniform(void) { /* xorshift64*, [0, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Start `cmd` (stderr to log) and return its PID: /bin/sh -c "exec cmd" (a `prefix` of
 * shell commands runs first), with signal `blocked` (0: none) blocked in the mask it
 * inherits. */
static pid_t start_blocked(const char *prefix, const char *cmd, const char *log, int blocked) {
    char line[8192 + 1024];
    snprintf(line, sizeof line, "%s exec %s 2>%s", prefix ? prefix : "", cmd, log);
    pid_t pid = fork();
    if (pid == 0) {
        if (blocked) {
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, blocked);
            sigprocmask(SIG_BLOCK, &set, NULL);
        }
        execl("/bin/sh", "sh", "-c", line, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static pid_t start(const char *prefix, const char *cmd, const char *log) {
    return start_blocked(prefix, cmd, log, 0);
}

/* Wait for pid (at most `limit` s, then SIGKILL); its exit code, 128 + N if signal N
 * ended it, -1 if it had to be killed. */
static int finish(pid_t pid, double limit) {
    double t0 = now_s();
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (now_s() - t0 > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(2000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Wait until `needle` appears in file (at most `limit` s, or until pid exits); 1 if it did. */
static int wait_for_text(const char *path, const char *needle, pid_t pid, double limit) {
    double t0 = now_s();
    while (now_s() - t0 < limit) {
        char *s = test_read_file(path, NULL);
        int found = s && strstr(s, needle);
        free(s);
        if (found) return 1;
        siginfo_t info;
        memset(&info, 0, sizeof info);
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid)
            return 0;
        usleep(2000);
    }
    return 0;
}

/* The text after "vitrain: continue with: " in log, to the end of its line ("" if none). */
static void continue_cmd(const char *log, char *out, size_t len) {
    char *s = test_read_file(log, NULL);
    const char *p = s ? strstr(s, "vitrain: continue with: ") : NULL;
    out[0] = '\0';
    if (p) {
        p += strlen("vitrain: continue with: ");
        snprintf(out, len, "%.*s", (int)strcspn(p, "\n"), p);
    }
    free(s);
}

/* The step N of "stopped by SIG after step N" in log, -1 if absent. */
static int stopped_step(const char *log, const char *signame) {
    char *s = test_read_file(log, NULL), pat[64];
    snprintf(pat, sizeof pat, "stopped by %s after step ", signame);
    const char *p = s ? strstr(s, pat) : NULL;
    int step = p ? atoi(p + strlen(pat)) : -1;
    free(s);
    return step;
}

/* Both files hold the same tensors with the same bits (their metadata, which records
 * the config, may differ). */
static int same_tensors(const char *a, const char *b) {
    vt_safetensors x, y;
    if (vt_st_read(a, &x) != VT_OK) return 0;
    if (vt_st_read(b, &y) != VT_OK) {
        vt_st_free(&x);
        return 0;
    }
    int same = x.n == y.n && x.n > 0;
    for (int i = 0; i < x.n && same; i++) {
        const vt_st_tensor *u = &x.tensors[i], *v = vt_st_find(&y, u->name);
        same = v && v->size == u->size && !memcmp(u->data, v->data, sizeof(float) * (size_t)u->size);
    }
    vt_st_free(&x);
    vt_st_free(&y);
    return same;
}

/* Run dir b ends like the uninterrupted run a: every step's loss and gradient norm and
 * the final weights bit for bit. */
static void check_same_as(const char *a, const char *b, const char *what) {
    int na = 0, nb = 0;
    char *ra = train_records_text(a, &na), *rb = train_records_text(b, &nb);
    CHECK(na == T_STEPS && nb == T_STEPS, "%s: %d steps logged (reference %d, this %d)", what, T_STEPS, na, nb);
    int same = ra && rb && strcmp(ra, rb) == 0;
    CHECK(same, "%s: every step's loss and gradient norm equal the uninterrupted run's bit for bit", what);
    if (!same && ra && rb) fprintf(stderr, "--- uninterrupted:\n%s--- %s:\n%s", ra, what, rb);
    free(ra);
    free(rb);
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/last.safetensors", a);
    snprintf(pb, sizeof pb, "%s/last.safetensors", b);
    CHECK(same_tensors(pa, pb), "%s: final weights identical to the uninterrupted run's", what);
}

/* The uninterrupted run of np ranks (0: no mpirun) into tmp/name; the seconds from its
 * first progress line to its exit. */
static double reference(const char *name, int np, char *dir, size_t len) {
    snprintf(dir, len, "%s/%s", tmp, name);
    char cmd[4096], log[600];
    snprintf(cmd, sizeof cmd, "%s %s " CFG " " RECIPE " --threads 1 --run-dir %s", np ? mpirun(np, NULL) : "",
             bin, dir);
    snprintf(log, sizeof log, "%s.log", dir);
    pid_t pid = start(NULL, cmd, log);
    wait_for_text(log, " loss ", pid, 120);
    double t0 = now_s();
    int rc = finish(pid, 300);
    CHECK(rc == 0, "%s: uninterrupted run exit %d", name, rc);
    return now_s() - t0;
}

/* Signal `sig` at random moments of the run in tmp/name (np ranks, 0: no mpirun; rank -1:
 * the process, or mpirun itself; -2: a random rank), continuing each stopped run with the
 * command it printed, until a run finishes. */
static void interrupt_until_done(const char *name, int np, int sig, int rank, int resume_or_start,
                                 const char *ref, double ref_s) {
    char dir[512], log[600], cmd[8192];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    snprintf(cmd, sizeof cmd, "%s %s " CFG " " RECIPE " --threads 1 %s %s", np ? mpirun(np, NULL) : "", bin,
             resume_or_start ? "--resume-or-start --run-dir" : "--run-dir", dir);
    const char *signame = vt_stop_signal_name(sig);
    int stops = 0, mid = 0, done = 0, bad = 0, last_step = 0;
    char steps[256] = "";
    for (int round = 0; round < 6 && !done && !bad; round++) {
        snprintf(log, sizeof log, "%s.log%d", dir, round);
        pid_t pid = start(NULL, cmd, log);
        /* the progress line of a random step K after the last stop (every rank is past
         * its set-up, the handlers installed), then a random delay of up to 3 steps' time:
         * the signal lands in a step, an evaluation or a checkpoint write */
        int from = last_step + 1, to = last_step + 12 < T_STEPS - 2 ? last_step + 12 : T_STEPS - 2;
        int signal_it = round < 4 && from <= to;
        char at[32];
        snprintf(at, sizeof at, " step %d/", signal_it ? from + (int)(uniform() * (to - from + 1)) : 1);
        int ready = wait_for_text(log, at, pid, 120);
        int signalled = 0;
        if (ready && signal_it) {
            usleep((useconds_t)(1e6 * 3.0 * ref_s / T_STEPS * uniform()));
            pid_t target = pid;
            int r = rank == -2 ? (int)(uniform() * np) : rank;
            if (np && r >= 0) target = rank_pid(pid, r);
            signalled = target > 0 && kill(target, sig) == 0;
        }
        int rc = finish(pid, 300);
        if (rc == 0) {
            done = 1;
            break;
        }
        if (rc != VT_EXIT_STOPPED || !signalled) {
            char *s = test_read_file(log, NULL);
            fprintf(stderr, "--- %s round %d: exit %d (signalled %d); log:\n%s\n", name, round, rc, signalled,
                    s ? s : "(none)");
            free(s);
            bad = 1;
            break;
        }
        int step = stopped_step(log, signame);
        last_step = step;
        stops++;
        mid += step > 0 && step < T_STEPS;
        size_t o = strlen(steps);
        snprintf(steps + o, sizeof steps - o, "%s%d", o ? "," : "", step);
        CHECK(step >= 0, "%s: the stop names %s and the step (%s)", name, signame, log);
        char want[600];
        snprintf(want, sizeof want, "%s/step_%08d.safetensors", dir, step);
        CHECK(exists(want) && file_contains(log, want), "%s: the stop wrote and named %s", name, want);
        char next[8192];
        continue_cmd(log, next, sizeof next);
        CHECK(next[0] && (resume_or_start ? strstr(next, "--resume-or-start") != NULL
                                          : strstr(next, "--resume") != NULL),
              "%s: the stop printed the command to continue: '%s'", name, next);
        if (!next[0]) { bad = 1; break; }
        snprintf(cmd, sizeof cmd, "%s %s", np ? mpirun(np, NULL) : "", next);
    }
    CHECK(done && !bad, "%s: every stop exited %d and the run finished", name, VT_EXIT_STOPPED);
    CHECK(mid >= 1, "%s: at least one stop between the first and the last step (stops at %s)", name, steps);
    if (done) check_same_as(ref, dir, name);
    printf("note: %s: %d stop%s, after steps %s\n", name, stops, stops == 1 ? "" : "s", stops ? steps : "-");
}

/* A second SIGINT during the stop exits 130 without writing; the run then resumes from
 * its last pair (step 8, --stop-after) to the reference weights. */
static void test_second_sigint(const char *ref) {
    char dir[512], log[600];
    snprintf(dir, sizeof dir, "%s/twice", tmp);
    snprintf(log, sizeof log, "%s.log", dir);
    int rc = run("%s " CFG " " RECIPE " --threads 1 --run-dir %s --stop-after 8 2>%s.log0", bin, dir, dir);
    CHECK(rc == 0, "twice: first 8 steps exit %d", rc);
    char latest[600];
    snprintf(latest, sizeof latest, "%s/latest", dir);
    char *before = test_read_file(latest, NULL);
    int got130 = 0, attempts = 0;
    for (; attempts < 4 && !got130; attempts++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "%s " CFG " " RECIPE " --threads 1 --resume %s", bin, dir);
        pid_t pid = start(NULL, cmd, log);
        int ready = wait_for_text(log, " loss ", pid, 120);
        if (ready) kill(pid, SIGINT);
        int acked = ready && wait_for_text(log, "SIGINT: stopping", pid, 60);
        if (acked) kill(pid, SIGINT);
        rc = finish(pid, 120);
        got130 = acked && rc == 128 + SIGINT;
        if (!got130 && rc != VT_EXIT_STOPPED) break; /* 75: the stop finished before the second */
        if (rc == VT_EXIT_STOPPED) break;          /* a pair was written: the test is void */
    }
    CHECK(got130, "twice: a second SIGINT exits 130 at once (exit %d after %d attempts)", rc, attempts);
    CHECK(file_contains(log, "second SIGINT"), "twice: the exit says why");
    char *after = test_read_file(latest, NULL);
    CHECK(before && after && !strcmp(before, after), "twice: no pair was written (latest still %s)",
          before ? before : "(none)");
    free(before);
    free(after);
    rc = run("%s " CFG " " RECIPE " --threads 1 --resume %s 2>%s.log2", bin, dir, dir);
    CHECK(rc == 0, "twice: resume exit %d", rc);
    check_same_as(ref, dir, "twice");
}

/* Started with SIGINT ignored (as `&` in a non-interactive shell leaves it), or with
 * SIGTERM blocked, the run still stops on that signal with a checkpoint. */
static void test_inherited_ignore(void) {
    char dir[512], log[600], cmd[4096];
    snprintf(dir, sizeof dir, "%s/ignored", tmp);
    snprintf(log, sizeof log, "%s.log", dir);
    snprintf(cmd, sizeof cmd, "%s " CFG " " RECIPE " --threads 1 --run-dir %s", bin, dir);
    pid_t pid = start("trap '' INT;", cmd, log);
    int ready = wait_for_text(log, " loss ", pid, 120);
    if (ready) kill(pid, SIGINT);
    int rc = finish(pid, 120);
    CHECK(ready && rc == VT_EXIT_STOPPED, "ignored: SIGINT inherited as ignored still stops the run "
          "(exit %d, want %d)", rc, VT_EXIT_STOPPED);
    CHECK(stopped_step(log, "SIGINT") > 0, "ignored: the stop names SIGINT and a step");

    /* the same for SIGTERM blocked in the inherited signal mask */
    snprintf(dir, sizeof dir, "%s/blocked", tmp);
    snprintf(log, sizeof log, "%s.log", dir);
    snprintf(cmd, sizeof cmd, "%s " CFG " " RECIPE " --threads 1 --run-dir %s", bin, dir);
    pid = start_blocked(NULL, cmd, log, SIGTERM);
    ready = wait_for_text(log, " loss ", pid, 120);
    if (ready) kill(pid, SIGTERM);
    rc = finish(pid, 120);
    CHECK(ready && rc == VT_EXIT_STOPPED, "blocked: SIGTERM blocked in the inherited mask still stops the "
          "run (exit %d, want %d)", rc, VT_EXIT_STOPPED);
    CHECK(stopped_step(log, "SIGTERM") > 0, "blocked: the stop names SIGTERM and a step");
}

static int count_pairs(const char *dir, char *list, size_t len) {
    int n = 0;
    list[0] = '\0';
    for (int s = 0; s <= T_STEPS; s++) {
        char p[600];
        snprintf(p, sizeof p, "%s/step_%08d.state.safetensors", dir, s);
        if (!exists(p)) continue;
        n++;
        size_t o = strlen(list);
        snprintf(list + o, len - o, "%s%d", o ? "," : "", s);
    }
    return n;
}

static void test_cadence(const char *ref) {
    char dir[512], list[512];
    /* every 5 steps, 2 kept: 45 and the final 48 */
    snprintf(dir, sizeof dir, "%s/steps", tmp);
    int rc = run("%s " CFG " " RECIPE " --set train.ckpt_every_steps=5 --set train.keep_checkpoints=2 "
                 "--threads 1 --run-dir %s 2>%s.log", bin, dir, dir);
    CHECK(rc == 0, "ckpt_every_steps: exit %d", rc);
    count_pairs(dir, list, sizeof list);
    CHECK(!strcmp(list, "45,48"), "ckpt_every_steps 5, keep 2: pairs of steps 45,48 (found %s)", list);
    check_same_as(ref, dir, "ckpt_every_steps");

    /* stopped at 13 with 3 kept: 5, 10, 13; resumed from the mid-epoch pair of step 10
     * (epoch 2, micro-batch 2) */
    snprintf(dir, sizeof dir, "%s/steps_mid", tmp);
    rc = run("%s " CFG " " RECIPE " --set train.ckpt_every_steps=5 --set train.keep_checkpoints=3 "
             "--threads 1 --run-dir %s --stop-after 13 2>%s.log", bin, dir, dir);
    CHECK(rc == 0, "steps_mid: exit %d", rc);
    count_pairs(dir, list, sizeof list);
    CHECK(!strcmp(list, "5,10,13"), "steps_mid: pairs 5,10,13 (found %s)", list);
    run("rm -f %s/step_00000013.safetensors %s/step_00000013.state.safetensors && "
        "printf 'step_00000010\\n' > %s/latest", dir, dir, dir);
    rc = run("%s " CFG " " RECIPE " --set train.ckpt_every_steps=5 --set train.keep_checkpoints=3 "
             "--threads 1 --resume %s 2>%s.log2", bin, dir, dir);
    CHECK(rc == 0, "steps_mid: resume from step 10 exit %d", rc);
    char log2[600];
    snprintf(log2, sizeof log2, "%s.log2", dir);
    CHECK(file_contains(log2, "at step 10 (epoch 2, micro-batch 2)"), "steps_mid: resumed mid-epoch");
    check_same_as(ref, dir, "steps_mid");

    /* every 0.0005 minutes (30 ms) of a run of 48 steps: pairs between the epoch ends */
    snprintf(dir, sizeof dir, "%s/minutes", tmp);
    rc = run("%s " CFG " " RECIPE " --set train.ckpt_every_minutes=0.0005 --set train.keep_checkpoints=1000 "
             "--threads 1 --run-dir %s 2>%s.log", bin, dir, dir);
    CHECK(rc == 0, "ckpt_every_minutes: exit %d", rc);
    int n = count_pairs(dir, list, sizeof list);
    CHECK(n >= 3, "ckpt_every_minutes: pairs written during the run (found %s)", list);
    check_same_as(ref, dir, "ckpt_every_minutes");
    rc = run("%s " CFG " --set train.ckpt_every_minutes=-1 --run-dir %s/neg 2>%s.neg", bin, tmp, dir);
    char neg[600];
    snprintf(neg, sizeof neg, "%s.neg", dir);
    CHECK(rc == 2 && file_contains(neg, "train.ckpt_every_minutes"), "a negative interval is a config "
          "error naming the key (exit %d)", rc);
}

/* --resume-or-start in a directory a run left before its first pair (config.json and
 * metrics.jsonl, no `latest`) starts the run there, and it ends like the reference. */
static void test_resume_or_start_leftovers(const char *ref) {
    char dir[512], log[600];
    snprintf(dir, sizeof dir, "%s/leftovers", tmp);
    snprintf(log, sizeof log, "%s.log", dir);
    run("mkdir -p %s && cp %s/config.json %s/ && head -n 3 %s/metrics.jsonl > %s/metrics.jsonl", dir, ref, dir,
        ref, dir);
    int rc = run("%s " CFG " " RECIPE " --threads 1 --resume-or-start --run-dir %s 2>%s", bin, dir, log);
    CHECK(rc == 0 && file_contains(log, "holds no checkpoint: starting the run"),
          "--resume-or-start: leftovers without a pair start the run (exit %d)", rc);
    check_same_as(ref, dir, "leftovers");
}

/* The eval and epoch records of dir/metrics.jsonl without their timings (img_per_s,
 * wall_s), joined by '\n'. */
static char *eval_records(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *s = test_read_file(path, NULL), *out = calloc(1, s ? strlen(s) + 1 : 1);
    size_t o = 0;
    for (char *line = s ? strtok(s, "\n") : NULL; line && out; line = strtok(NULL, "\n")) {
        if (strncmp(line, "{\"kind\":\"eval\"", 14) != 0 && strncmp(line, "{\"kind\":\"epoch\"", 15) != 0)
            continue;
        char *w = strstr(line, ",\"img_per_s\""); /* the epoch record's timing, then wall_s */
        if (!w) w = strstr(line, ",\"wall_s\"");
        size_t n = w ? (size_t)(w - line) : strlen(line);
        memcpy(out + o, line, n);
        o += n;
        out[o++] = '\n';
    }
    free(s);
    return out;
}

/* A signal during an evaluation (a val split of 100k images, several seconds here): during
 * the one due at step 2 it exits 75 with step 2's pair and no eval record, and the continued
 * run makes that evaluation first; during the final one (after step 4's pair) it exits 75
 * too, and --resume-or-start makes it and exits 0. The evaluations are logged once each and
 * equal an uninterrupted run's, and so do the weights. */
static void test_stop_in_eval(void) {
#define EVAL_RUN CFG " --threads 1 --set train.steps=4 --set train.eval_every_steps=2 " \
                 "--set data.val_size=100000 --set eval.batch_size=500"
    char ref[512], dir[512], log[600], cmd[2048];
    snprintf(ref, sizeof ref, "%s/eval_ref", tmp);
    snprintf(dir, sizeof dir, "%s/eval_cut", tmp);
    snprintf(log, sizeof log, "%s.log", dir);
    int rc = run("%s " EVAL_RUN " --run-dir %s 2>/dev/null", bin, ref);
    CHECK(rc == 0, "uninterrupted run with long evaluations: exit %d", rc);

    snprintf(cmd, sizeof cmd, "%s " EVAL_RUN " --resume-or-start --run-dir %s", bin, dir);
    pid_t pid = start(NULL, cmd, log);
    int seen = wait_for_text(log, "step 2/4", pid, 120);
    kill(pid, SIGTERM);
    rc = finish(pid, 120);
    CHECK(seen && rc == VT_EXIT_STOPPED && stopped_step(log, "SIGTERM") == 2 &&
              file_contains(log, "cut the evaluation of step 2 short"),
          "SIGTERM during the evaluation of step 2: exit %d, expected %d, stopped after step 2", rc,
          VT_EXIT_STOPPED);
    char *e = eval_records(dir);
    CHECK(e && !strstr(e, "\"kind\":\"eval\""), "no eval record from the cut evaluation");
    free(e);

    pid = start(NULL, cmd, log);
    seen = wait_for_text(log, "step 4/4", pid, 120);
    kill(pid, SIGUSR1);
    rc = finish(pid, 120);
    CHECK(seen && rc == VT_EXIT_STOPPED && file_contains(log, "eval  epoch 1 step 2") &&
              file_contains(log, "cut the evaluations of step 4 short"),
          "SIGUSR1 during the final evaluation: exit %d (expected %d), step 2's evaluation made first",
          rc, VT_EXIT_STOPPED);

    rc = run("%s 2>%s", cmd, log);
    CHECK(rc == 0 && file_contains(log, "final: top-1"), "--resume-or-start makes the final evaluation: exit %d", rc);
    char *a = eval_records(ref), *b = eval_records(dir);
    int same = a && b && *a && strcmp(a, b) == 0;
    CHECK(same, "each evaluation and epoch record once, equal to the uninterrupted run's");
    if (!same) fprintf(stderr, "--- uninterrupted:\n%s--- cut twice:\n%s", a ? a : "", b ? b : "");
    free(a);
    free(b);
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/last.safetensors", ref);
    snprintf(pb, sizeof pb, "%s/last.safetensors", dir);
    CHECK(same_tensors(pa, pb), "the weights equal the uninterrupted run's");
#undef EVAL_RUN
}

static void test_resume_or_start_errors(void) {
    char dir[512], log[600];
    snprintf(dir, sizeof dir, "%s/broken", tmp);
    snprintf(log, sizeof log, "%s.log", dir);
    run("mkdir -p %s && printf 'step_00000007\\n' > %s/latest", dir, dir);
    int rc = run("%s " CFG " " RECIPE " --threads 1 --resume-or-start --run-dir %s 2>%s", bin, dir, log);
    CHECK(rc == 1 && file_contains(log, "latest") && file_contains(log, "is missing"),
          "--resume-or-start: a `latest` naming no pair is an error (exit %d)", rc);
    char mp[600];
    snprintf(mp, sizeof mp, "%s/metrics.jsonl", dir);
    CHECK(!exists(mp), "--resume-or-start: no run started in the broken directory");
    rc = run("%s " CFG " --resume %s --resume-or-start 2>%s", bin, dir, log);
    CHECK(rc == 2 && file_contains(log, "--resume-or-start"), "--resume with --resume-or-start: usage "
          "error (exit %d)", rc);
    rc = run("%s " CFG " --start-over --resume-or-start 2>%s", bin, log);
    CHECK(rc == 2 && file_contains(log, "--start-over and --resume-or-start"), "--start-over with "
          "--resume-or-start: usage error (exit %d)", rc);
    rc = run("%s " CFG " --resume-or-start=yes 2>%s", bin, log);
    CHECK(rc == 2 && file_contains(log, "takes no value"), "--resume-or-start=yes: usage error (exit %d)", rc);
}

int main(void) {
    e2e_bin(bin, sizeof bin);
    const char *seed = getenv("VT_TEST_SEED");
    rng_state = seed && *seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (!rng_state) rng_state = 1;
    printf("note: VT_TEST_SEED=%llu\n", (unsigned long long)rng_state);
    if (test_tmpdir(tmp, sizeof tmp, "e2e_signals")) return 1;
    char ref[512], ref2[512];
    double ref_s = reference("one", 0, ref, sizeof ref);
    interrupt_until_done("term", 0, SIGTERM, -1, 0, ref, ref_s);
    interrupt_until_done("int", 0, SIGINT, -1, 0, ref, ref_s);
    interrupt_until_done("usr1", 0, SIGUSR1, -1, 1, ref, ref_s);
    test_second_sigint(ref);
    test_inherited_ignore();
    test_cadence(ref);
    test_resume_or_start_leftovers(ref);
    test_resume_or_start_errors();
    test_stop_in_eval();
    if (run("mpirun --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "mpirun not found: install openmpi-bin (scripts/deps.sh)\n");
        return 1;
    }
    double ref2_s = reference("two", 2, ref2, sizeof ref2);
    interrupt_until_done("np2_term", 2, SIGTERM, -2, 0, ref2, ref2_s);
    interrupt_until_done("np2_int", 2, SIGINT, -2, 0, ref2, ref2_s);
    interrupt_until_done("np2_usr1", 2, SIGUSR1, -2, 1, ref2, ref2_s);
    interrupt_until_done("np2_usr1_mpirun", 2, SIGUSR1, -1, 0, ref2, ref2_s);
    return e2e_finish(tmp);
}
