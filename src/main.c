/* main.c - the vitrain command line: argv -> subcommand, status -> exit code. The only
 * exit() of the program. Exit codes: 0 done, 2 usage or config error, 1 runtime failure,
 * 75 (VT_EXIT_STOPPED, stop.h) training stopped by SIGINT, SIGTERM or SIGUSR1 after
 * writing a checkpoint pair: continue it with the command printed (a job script tells
 * "stopped, to be continued" from "done" and "failed" by this code); 130 a second SIGINT
 * ended it at once. Two ends bypass main, where no status can travel: a second SIGINT
 * (stop.c, 130) and memory a step cannot get past its reservation (status.h
 * vt_out_of_memory, 1).
 *
 *   vitrain [train] CONFIG [--set k=v ...] [--threads N] [--resume RUN_DIR] [--run-dir DIR]
 *                          [--resume-or-start] [--stop-after STEPS] [--verbose]
 *   vitrain --resume RUN_DIR [CONFIG] [--set k=v ...] [--threads N] [--stop-after STEPS]
 *   vitrain eval [CONFIG] --checkpoint FILE [--resolutions S1,S2,...] [--patch-shuffle] [--seed N]
 *                       [--logits OUT.npz] [--precision fp32|bf16] [--set k=v ...] [--threads N]
 *   vitrain info CONFIG [--set k=v ...]
 *   vitrain tune CONFIG [--set k=v ...] [--threads N] [--ranks R]
 *   vitrain help-config [--markdown]
 *   vitrain kinds [--rotary | --data]
 *
 * Flags take their value as the next argument or after '=' (--threads=2).
 * Under mpirun (dist.h) every rank runs the same command line; rank 0 prints.
 */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "config.h"
#include "data/formats.h"
#include "dist.h"
#include "eval_checkpoint.h"
#include "info.h"
#include "kernels.h"
#include "pe/kinds.h"
#include "precision.h"
#include "resolve.h"
#include "resume.h"
#include "status.h"
#include "stop.h"
#include "train.h"
#include "tune.h"

#define MAX_SETS 256

enum { F_SET = 1, F_THREADS = 2, F_RESUME = 4, F_RUNDIR = 8, F_CKPT = 16, F_LOGITS = 32,
       F_MARKDOWN = 64, F_STOP = 128, F_RES = 256, F_SHUFFLE = 512, F_SEED = 1024, F_PRECISION = 2048,
       F_ROTARY = 4096, F_DATA = 8192, F_START_OVER = 16384, F_RESUME_OR_START = 32768,
       F_VERBOSE = 65536, F_RANKS = 131072 };
/* The flags that take no value. */
enum { F_SWITCHES = F_MARKDOWN | F_SHUFFLE | F_ROTARY | F_DATA | F_START_OVER | F_RESUME_OR_START |
                    F_VERBOSE };

typedef struct {
    const char *cmd;
    const char *config;
    const char *sets[MAX_SETS];
    int n_sets;
    int threads;            /* -1: not given */
    int ranks;              /* tune --ranks: 1 unless given */
    const char *resume, *run_dir, *checkpoint, *logits;
    long long stop_after;
    int markdown, help, verbose;
    int rotary, data;       /* kinds --rotary, --data */
    int resume_or_start;    /* --resume-or-start */
    int argc;               /* the command line as given (the command to continue a run) */
    char **argv;
    int resolutions[VT_MAX_RES], n_resolutions; /* --resolutions; 0 = not given */
    int patch_shuffle;
    int start_over;
    int seed_given;
    unsigned long long seed; /* --seed: patch-shuffle permutations */
    char precision_set[32];  /* --precision P as the override train.precision=P */
} cli_args;

static const char *USAGE_TRAIN =
    "usage: vitrain [train] CONFIG [--set section.key=value ...] [--threads N]\n"
    "                      [--resume RUN_DIR] [--run-dir DIR] [--stop-after STEPS]\n"
    "                      [--start-over | --resume-or-start] [--verbose]\n"
    "       vitrain --resume RUN_DIR [CONFIG] [--set ...] [--threads N] [--stop-after STEPS]\n"
    "Train the model of CONFIG (JSON). The run directory (default train.run_dir, else\n"
    "runs/<config stem>) receives config.json, metrics.jsonl, summary.csv (per epoch),\n"
    "TensorBoard event files (tensorboard --logdir DIR), the checkpoint pairs\n"
    "step_N.safetensors + step_N.state.safetensors (`latest` names the newest),\n"
    "last.safetensors (the newest weights) and best.safetensors. One process owns a run\n"
    "directory at a time (DIR/lock), and a new run never overwrites another's checkpoints.\n"
    "  --set k=v         override one config key (repeatable; value parsed as JSON if it parses)\n"
    "  --threads N       OpenMP threads (default train.threads; 0 = all cores)\n"
    "  --resume RUN_DIR  continue the run saved in RUN_DIR exactly where it stopped, with its\n"
    "                    own config (RUN_DIR/config.json); a CONFIG or --set given as well may\n"
    "                    change only threads, logging, progress, checkpointing and extend\n"
    "                    train.epochs / train.steps (each difference is named)\n"
    "  --run-dir DIR     write the run to DIR\n"
    "  --stop-after N    stop after optimizer step N (checkpoint + state written, resumable)\n"
    "  --start-over      move a run already in the run directory aside to DIR.old-N and\n"
    "                    start a new one there (nothing is deleted)\n"
    "  --resume-or-start continue the run in the run directory if it holds a checkpoint,\n"
    "                    else start it there (one command for a job that may be requeued)\n"
    "  --verbose         also print the resolved config at start (saved as DIR/config.json)\n"
    "SIGINT, SIGTERM or SIGUSR1 stop training after the current step (during an evaluation:\n"
    "after its current batch; the resume redoes it): a checkpoint pair is written, the\n"
    "command to continue printed, and the exit status is 75 (a second SIGINT exits at once,\n"
    "status 130, writing nothing).\n";
static const char *USAGE_EVAL =
    "usage: vitrain eval [CONFIG] --checkpoint FILE [--resolutions S1,S2,...] [--patch-shuffle]\n"
    "                    [--seed N] [--logits OUT.npz] [--precision fp32|bf16] [--set k=v ...]\n"
    "                    [--threads N]\n"
    "Top-1/top-5 accuracy and mean cross-entropy of a checkpoint on the val split\n"
    "(data.val_split), at each image size without fine-tuning. Prints one JSON line per\n"
    "size on stdout, a readable line per size and a closing table on stderr.\n"
    "Without CONFIG the model, PE and data settings are the checkpoint's own (the config\n"
    "vitrain stores in it); with CONFIG, keys that define the model or its PE must agree\n"
    "with the checkpoint's (an error names each that differs); data and eval keys may differ.\n"
    "  --checkpoint FILE  model weights (.safetensors: vitrain's, or timm's with a CONFIG)\n"
    "  --resolutions L    comma-separated image sizes (multiples of model.patch_size); default\n"
    "                     model.img_size, then eval.resolutions\n"
    "  --patch-shuffle    also evaluate with each image's patches permuted (a fixed permutation\n"
    "                     per image): accuracy before, after and the relative top-1 drop\n"
    "  --seed N           seed of the patch permutations (default 0)\n"
    "  --logits OUT.npz   also write a NumPy archive (numpy.load(OUT)): logits_S (N, num_classes)\n"
    "                     float32 for every size S, rows in dataset order (shuffled_logits_S\n"
    "                     with --patch-shuffle), labels (N,) int64, resolutions (R,) int64 and,\n"
    "                     for image folders, paths (N,) and class_names (num_classes,) strings\n"
    "  --precision P      fp32, or bf16: GEMM operands rounded to bfloat16 (train.precision)\n"
    "  --set k=v          override one config key (repeatable)\n"
    "  --threads N        OpenMP threads (default train.threads; 0 = all cores)\n";
static const char *USAGE_INFO =
    "usage: vitrain info CONFIG [--set k=v ...]\n"
    "Parameter count, forward FLOPs per image, training-step FLOPs and an estimate of the\n"
    "peak memory of training CONFIG, readable and as a JSON line, from the config alone\n"
    "(no model is allocated, no data read but file sizes).\n";
static const char *USAGE_TUNE =
    "usage: vitrain tune CONFIG [--set k=v ...] [--threads N] [--ranks R]\n"
    "Tune the GEMM blocking (cache blocks and register tile) for the products of CONFIG's\n"
    "training step on this CPU, at N threads (default train.threads), starting from the\n"
    "built-in table's entry for the CPU (or VT_GEMM_CONTEXT), and store the result in the\n"
    "tuning cache ($XDG_CACHE_HOME/vitrain, else ~/.cache/vitrain), where a new run of\n"
    "that config at that thread count finds it (runtime.gemm_tune = on). Takes seconds;\n"
    "prints the timings and the blocking, and a JSON line on stdout.\n"
    "  --set k=v    override one config key (repeatable)\n"
    "  --threads N  OpenMP threads (default train.threads; 0 = all cores)\n"
    "  --ranks R    tune the products of one of R MPI ranks (train.batch_size / R samples\n"
    "               each), for runs under mpirun -np R; it runs as one process (default 1)\n";
static const char *USAGE_HELPCFG =
    "usage: vitrain help-config [SECTION | SECTION.KEY] [--markdown]\n"
    "Every config key with its type, default, allowed values and meaning, or those of one\n"
    "section (optim) or key (optim.lr) (--markdown: the text of configs/README.md).\n";
static const char *USAGE_KINDS =
    "usage: vitrain kinds [--rotary | --data]\n"
    "The pe.kind values, one per line, from the registry of PE kinds (src/pe/kinds.h).\n"
    "  --rotary  only the rotary kinds\n"
    "  --data    the data.kind values instead (src/data/formats.h)\n";
static const char *USAGE_MAIN =
    "usage: vitrain [train] CONFIG [options]     train (see vitrain train --help)\n"
    "       vitrain --resume RUN_DIR              continue a stopped run\n"
    "       vitrain eval [CONFIG] --checkpoint FILE evaluate a checkpoint\n"
    "       vitrain info CONFIG                   model size, FLOPs and memory\n"
    "       vitrain tune CONFIG                   tune the GEMM blocking for CONFIG\n"
    "       vitrain help-config [KEY|SECTION]     every config key, or one\n"
    "       vitrain kinds [--rotary | --data]     the PE kinds (or dataset formats)\n"
    "Environment: VT_ISA=LEVEL forces a kernel level (an unknown LEVEL lists them);\n"
    "VT_GEMM_CONTEXT=[NAME,]level.field=value,... sets the GEMM blocking;\n"
    "VT_BF16_PATH=amx|dpbf16|fma picks the bf16 product path (default: a probe).\n";

static const char *usage_of(const char *cmd) {
    if (!strcmp(cmd, "train")) return USAGE_TRAIN;
    if (!strcmp(cmd, "eval")) return USAGE_EVAL;
    if (!strcmp(cmd, "info")) return USAGE_INFO;
    if (!strcmp(cmd, "tune")) return USAGE_TUNE;
    if (!strcmp(cmd, "help-config")) return USAGE_HELPCFG;
    if (!strcmp(cmd, "kinds")) return USAGE_KINDS;
    return USAGE_MAIN;
}

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vitrain: ", vt_dist_msg());
    vfprintf(vt_dist_msg(), fmt, ap);
    va_end(ap);
    fprintf(vt_dist_msg(), "\n(vitrain %s%s--help lists the options)\n", cmd, cmd[0] ? " " : "");
    return 2;
}

static int fail_exit(vt_status st) {
    if (vt_dist_reports_error())
        fprintf(vt_dist_msg(), "vitrain: %serror: %s\n", vt_dist_who(), vt_last_error());
    return st == VT_ERR_USAGE ? 2 : 1;
}

/* Parse argv[first..] for subcommand cmd allowing the flags in `allowed`. Returns 0 or
 * the exit code of a usage error. */
static int parse_args(cli_args *a, const char *cmd, int argc, char **argv, int first, int allowed) {
    static const struct { const char *name; int flag; } flags[] = {
        {"--set", F_SET}, {"--threads", F_THREADS}, {"--resume", F_RESUME},
        {"--run-dir", F_RUNDIR}, {"--checkpoint", F_CKPT}, {"--logits", F_LOGITS},
        {"--markdown", F_MARKDOWN}, {"--stop-after", F_STOP}, {"--resolutions", F_RES},
        {"--patch-shuffle", F_SHUFFLE}, {"--seed", F_SEED}, {"--precision", F_PRECISION},
        {"--rotary", F_ROTARY}, {"--data", F_DATA}, {"--start-over", F_START_OVER},
        {"--resume-or-start", F_RESUME_OR_START}, {"--verbose", F_VERBOSE}, {"--ranks", F_RANKS}};
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->threads = -1;
    a->ranks = 1;
    a->argc = argc;
    a->argv = argv;
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) { a->help = 1; return 0; }
        if (arg[0] != '-' || arg[1] == '\0') {
            if (a->config || !strcmp(cmd, "kinds")) return usage_error(cmd, "unexpected argument '%s'", arg);
            a->config = arg;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        int flag = 0;
        for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
            if (strlen(flags[k].name) == nlen && !strncmp(arg, flags[k].name, nlen)) flag = flags[k].flag;
        if (!flag || !(allowed & flag))
            return usage_error(cmd, "unknown option '%.*s' for 'vitrain %s'", (int)nlen, arg, cmd);
        if (flag & F_SWITCHES) {
            if (eq) return usage_error(cmd, "option %.*s takes no value", (int)nlen, arg);
            *(flag == F_MARKDOWN ? &a->markdown : flag == F_SHUFFLE ? &a->patch_shuffle
              : flag == F_ROTARY ? &a->rotary : flag == F_DATA ? &a->data
              : flag == F_START_OVER ? &a->start_over : flag == F_RESUME_OR_START ? &a->resume_or_start
              : &a->verbose) = 1;
            continue;
        }
        const char *val;
        if (eq) val = eq + 1;
        else if (i + 1 < argc) val = argv[++i];
        else return usage_error(cmd, "option '%s' needs a value", arg);
        char *end;
        switch (flag) {
        case F_SET:
            if (a->n_sets == MAX_SETS) return usage_error(cmd, "more than %d --set options", MAX_SETS);
            a->sets[a->n_sets++] = val;
            break;
        case F_THREADS: {
            long n = strtol(val, &end, 10);
            if (end == val || *end || n < 0 || n > 4096)
                return usage_error(cmd, "--threads '%s': expected an integer 0..4096 (0 = all cores)", val);
            a->threads = (int)n;
            break;
        }
        case F_RANKS: {
            long n = strtol(val, &end, 10);
            if (end == val || *end || n < 1 || n > 65536)
                return usage_error(cmd, "--ranks '%s': expected an integer 1..65536 (the MPI ranks of the run "
                                   "to tune for)", val);
            a->ranks = (int)n;
            break;
        }
        case F_STOP: {
            long long n = strtoll(val, &end, 10);
            if (end == val || *end || n <= 0)
                return usage_error(cmd, "--stop-after '%s': expected a positive step count", val);
            a->stop_after = n;
            break;
        }
        case F_RES: {
            const char *p = val;
            a->n_resolutions = 0;
            for (;;) {
                long n = strtol(p, &end, 10);
                if (end == p || n <= 0 || n > 16384 || (*end && *end != ','))
                    return usage_error(cmd, "--resolutions '%s': expected comma-separated image sizes "
                                       "1..16384, e.g. 224,288,384", val);
                if (a->n_resolutions == VT_MAX_RES)
                    return usage_error(cmd, "--resolutions '%s': more than %d sizes", val, VT_MAX_RES);
                a->resolutions[a->n_resolutions++] = (int)n;
                if (!*end) break;
                p = end + 1;
            }
            break;
        }
        case F_SEED: {
            unsigned long long n = strtoull(val, &end, 10);
            if (end == val || *end || val[0] == '-')
                return usage_error(cmd, "--seed '%s': expected a non-negative integer", val);
            a->seed = n;
            a->seed_given = 1;
            break;
        }
        case F_PRECISION:
            if (strcmp(val, "fp32") && strcmp(val, "bf16"))
                return usage_error(cmd, "--precision '%s': expected fp32 or bf16", val);
            if (a->n_sets == MAX_SETS) return usage_error(cmd, "more than %d --set options", MAX_SETS);
            snprintf(a->precision_set, sizeof a->precision_set, "train.precision=%s", val);
            a->sets[a->n_sets++] = a->precision_set;
            break;
        case F_RESUME: a->resume = val; break;
        case F_RUNDIR: a->run_dir = val; break;
        case F_CKPT: a->checkpoint = val; break;
        case F_LOGITS: a->logits = val; break;
        default: break;
        }
    }
    return 0;
}

/* The last error, reported as a config error (2). */
static int config_error(void) {
    fprintf(vt_dist_msg(), "vitrain: config error: %s\n", vt_last_error());
    return 2;
}

/* Config file + --set overrides, resolved. Any failure here is a config error (2). */
static int load_config(vt_config *cfg, const cli_args *a) {
    if (!a->config) return usage_error(a->cmd, "missing CONFIG (a JSON config file)");
    /* The file, then every --set, then one resolution: an override may repair a file
     * that is invalid on its own. */
    if (vt_resolve_file(cfg, a->config, (const char *const *)a->sets, a->n_sets) != VT_OK)
        return config_error();
    return 0;
}

/* The start-up agreement of the ranks (dist.h) on the loaded config (rc: 0 if it
 * loaded) and the options that shape the job (not --threads: hosts may differ). */
static int start_job(int rc, const cli_args *a, const vt_config *cfg) {
    char *job = NULL;
    if (!rc) {
        vt_dist_set_timeout(cfg->runtime.comm_timeout);
        char *json = vt_config_to_json(cfg);
        char opts[2048];
        int o = snprintf(opts, sizeof opts, "cmd=%s resume=%s run_dir=%s resume_or_start=%d "
                         "stop_after=%lld checkpoint=%s logits=%s shuffle=%d seed=%llu resolutions=",
                         a->cmd, a->resume ? a->resume : "", a->run_dir ? a->run_dir : "",
                         a->resume_or_start, a->stop_after,
                         a->checkpoint ? a->checkpoint : "", a->logits ? a->logits : "",
                         a->patch_shuffle, a->seed);
        for (int i = 0; i < a->n_resolutions && o > 0 && o < (int)sizeof opts; i++)
            o += snprintf(opts + o, sizeof opts - (size_t)o, "%d,", a->resolutions[i]);
        job = vt_xmalloc(strlen(json) + strlen(opts) + 2);
        sprintf(job, "%s\n%s", opts, json);
        free(json);
    }
    rc = vt_dist_start(rc, job);
    free(job);
    return rc;
}

/* Kernel table and thread count; logs the choice once (train does in its start summary). */
static int start_runtime(const vt_config *cfg, const cli_args *a) {
    char err[256];
    int bad = vt_kernels_init(err, sizeof err);
    if (vt_dist_agree(bad ? vt_fail(VT_ERR_USAGE, "%s", err) : VT_OK) != VT_OK) {
        if (vt_dist_reports_error()) fprintf(stderr, "vitrain: %s\n", vt_last_error());
        return 2;
    }
    /* the bf16 path (every rank rank 0's), and a bad VT_BF16_PATH, before the run writes anything */
    vt_status st = vt_precision_select(cfg->train.precision);
    if (st != VT_OK) return fail_exit(st);
    int n = a->threads >= 0 ? a->threads : cfg->train.threads;
    if (n == 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    int logs = vt_dist_root() && strcmp(a->cmd, "train") != 0;
    char ctx[128] = ""; /* eval names its GEMM blocking once it has chosen it (blocking.h) */
    if (strcmp(a->cmd, "eval") != 0) snprintf(ctx, sizeof ctx, "GEMM context %s, ", vt_gemm_ctx.name);
    if (logs)
        fprintf(stderr, "vitrain: kernels %s, %s%d thread%s%s\n", vt_k.name, ctx, n, n == 1 ? "" : "s",
                vt_dist_size() > 1 ? " per rank" : "");
    vt_dist_check_placement(n);
    return 0;
}

/* The config of `--resume DIR` (resume.h): the run's own, or CONFIG / --set compared
 * with it. Returns 0 or the exit code. */
static int resume_config(vt_config *cfg, const cli_args *a) {
    vt_status st = vt_resume_config(cfg, a->resume, a->config, (const char *const *)a->sets, a->n_sets);
    if (st == VT_OK) return 0;
    fprintf(vt_dist_msg(), "vitrain: config error: %s\n", vt_last_error());
    return 2;
}

/* Append arg to buf (capacity cap) quoted for a POSIX shell where it needs quoting. */
static void append_shell_word(char *buf, size_t cap, const char *arg) {
    size_t o = strlen(buf);
    int plain = arg[0] != '\0';
    for (const char *p = arg; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,@%+-", *p) != NULL;
    if (o + 1 < cap && o > 0) buf[o++] = ' ';
    if (!plain && o + 1 < cap) buf[o++] = '\'';
    for (const char *p = arg; *p && o + 5 < cap; p++) {
        if (*p == '\'' && !plain) { memcpy(buf + o, "'\\''", 4); o += 4; }
        else buf[o++] = *p;
    }
    if (!plain && o + 1 < cap) buf[o++] = '\'';
    buf[o] = '\0';
}

/* The command that continues a stopped run in dir: the command line as given, with
 * --run-dir and --resume replaced by --resume dir (with --resume-or-start: as given),
 * without --start-over (it would move the run aside) and without --stop-after when that
 * was what stopped it (drop_stop). */
static void continue_command(const cli_args *a, const char *dir, int drop_stop, char *buf, size_t cap) {
    buf[0] = '\0';
    for (int i = 0; i < a->argc; i++) {
        const char *arg = a->argv[i];
        int pair = !strcmp(arg, "--run-dir") || !strcmp(arg, "--resume");
        int joined = !strncmp(arg, "--run-dir=", 10) || !strncmp(arg, "--resume=", 9);
        int stop = !strcmp(arg, "--stop-after"), stop_joined = !strncmp(arg, "--stop-after=", 13);
        if (drop_stop && (stop || stop_joined)) {
            i += stop;
            continue;
        }
        if (!strcmp(arg, "--start-over")) continue;
        if (!a->resume_or_start && (pair || joined)) {
            i += pair;
            continue;
        }
        append_shell_word(buf, cap, arg);
    }
    if (!a->resume_or_start) {
        append_shell_word(buf, cap, "--resume");
        append_shell_word(buf, cap, dir);
    }
}

/* Rank 0's report of a run that stopped before its last step. */
static void report_stop(const cli_args *a, const vt_train_result *res) {
    vt_ckpt_pair p;
    vt_ckpt_pair_of(res->run_dir, res->steps, &p);
    char why[64] = "--stop-after";
    if (res->stop_signal) snprintf(why, sizeof why, "%s", vt_stop_signal_name(res->stop_signal));
    fprintf(stderr, "vitrain: stopped by %s after step %lld of %lld; checkpoint pair %s and %s\n", why,
            (long long)res->steps, (long long)res->total_steps, p.weights, p.state);
    if (res->eval_cut)
        fprintf(stderr, "vitrain: the stop cut the evaluation%s of step %lld short: the continued run "
                "makes %s first\n", res->steps >= res->total_steps ? "s" : "", (long long)res->steps,
                res->steps >= res->total_steps ? "them" : "it");
    char cmd[8192];
    continue_command(a, res->run_dir, !res->stop_signal, cmd, sizeof cmd);
    fprintf(stderr, "vitrain: continue with: %s\n", cmd);
    if (vt_dist_size() > 1)
        fprintf(stderr, "vitrain: (run it under the same launcher, e.g. mpirun, with a rank count "
                "that divides train.batch_size)\n");
}

static int cmd_train(const cli_args *a) {
    if (a->resume && a->run_dir && strcmp(a->resume, a->run_dir) != 0)
        return usage_error("train", "--resume %s and --run-dir %s name different directories",
                           a->resume, a->run_dir);
    if (a->resume && a->start_over)
        return usage_error("train", "--resume continues the run in %s, --start-over moves it "
                           "aside: give one of them", a->resume);
    if ((a->resume || a->start_over) && a->resume_or_start)
        return usage_error("train", "%s and --resume-or-start: give one (--resume-or-start "
                           "continues the run directory when it holds a checkpoint, else starts it)",
                           a->resume ? "--resume" : "--start-over");
    vt_config cfg;
    int rc = start_job(a->resume ? resume_config(&cfg, a) : load_config(&cfg, a), a, &cfg);
    if (rc) return rc;
    if ((rc = start_runtime(&cfg, a))) return rc;
    vt_train_opts opts = {.run_dir = a->run_dir, .resume_dir = a->resume, .stop_after = a->stop_after,
                          .start_over = a->start_over, .resume_or_start = a->resume_or_start,
                          .verbose = a->verbose};
    vt_train_result res;
    vt_status st = vt_train_run(&cfg, &opts, &res);
    if (st != VT_OK) return fail_exit(st);
    if (res.stopped && vt_dist_root()) report_stop(a, &res);
    return res.stop_signal ? vt_dist_exit_everywhere(VT_EXIT_STOPPED) : 0; /* the ranks agreed on the stop */
}

static int cmd_eval(const cli_args *a) {
    if (!a->checkpoint) return usage_error("eval", "missing --checkpoint FILE");
    if (a->seed_given && !a->patch_shuffle)
        return usage_error("eval", "--seed only seeds the --patch-shuffle permutations");
    if (a->logits) {
        size_t ll = strlen(a->logits);
        if (ll < 5 || strcmp(a->logits + ll - 4, ".npz") != 0)
            return usage_error("eval", "--logits %s: expected a .npz path (a NumPy archive of the logits "
                               "of every size, the labels and, for image folders, the file paths)",
                               a->logits);
    }
    vt_eval_opts opts = {a->checkpoint, a->config, (const char *const *)a->sets, a->n_sets, a->resolutions,
                         a->n_resolutions, a->patch_shuffle, a->seed, a->logits};
    vt_eval_checkpoint ec;
    vt_eval_failure failed;
    int rc = 0;
    vt_status st = vt_eval_checkpoint_open(&ec, &opts, &failed);
    if (st != VT_OK) {
        if (failed == VT_EVAL_FAILED_FILE) rc = fail_exit(st);
        else if (failed == VT_EVAL_FAILED_CONFIG) rc = config_error();
        else rc = usage_error("eval", "%s", vt_last_error());
    }
    if ((rc = start_job(rc, a, &ec.cfg)) == 0) rc = start_runtime(&ec.cfg, a);
    if (rc) {
        vt_eval_checkpoint_close(&ec);
        return rc;
    }
    st = vt_eval_checkpoint_run(&ec);
    return st == VT_OK ? 0 : fail_exit(st);
}

static int cmd_info(const cli_args *a) {
    vt_config cfg;
    int rc = load_config(&cfg, a);
    if (rc) return rc;
    char err[256];
    if (vt_kernels_init(err, sizeof err)) {
        fprintf(stderr, "vitrain: %s\n", err);
        return 2;
    }
    vt_status st = vt_info_print(&cfg, stdout);
    return st == VT_OK ? 0 : fail_exit(st);
}

static int cmd_tune(const cli_args *a) {
    vt_config cfg;
    int rc = start_job(load_config(&cfg, a), a, &cfg);
    if (rc || (rc = start_runtime(&cfg, a))) return rc;
    vt_status st = vt_dist_agree(vt_tune_command(&cfg, a->ranks)); /* refuses several ranks on each */
    return st == VT_OK ? 0 : fail_exit(st);
}

static int cmd_help_config(const cli_args *a) {
    if (a->config && a->markdown) return usage_error("help-config", "--markdown prints every key; give no KEY");
    char *text = NULL;
    if (a->config && vt_config_doc_one(a->config, &text) != VT_OK) {
        fprintf(stderr, "vitrain: %s\n", vt_last_error());
        return 2;
    }
    if (!text) text = a->markdown ? vt_resolve_doc_markdown() : vt_config_doc_text();
    fputs(text, stdout);
    free(text);
    return 0;
}

static int cmd_kinds(const cli_args *a) {
    if (a->rotary && a->data) return usage_error("kinds", "--rotary is a property of PE kinds, not of --data");
    if (a->data) {
        for (int k = 0; k < VT_DATA_KIND_COUNT; k++) printf("%s\n", vt_data_kind_name((vt_data_kind)k));
        return 0;
    }
    for (int k = 0; k < VT_PE_KIND_COUNT; k++)
        if (!a->rotary || vt_pe_kind_entry((vt_pe_kind)k)->rotary) printf("%s\n", vt_pe_kind_name((vt_pe_kind)k));
    return 0;
}

/* A first argument that is neither a subcommand nor a config file. */
static int looks_like_config(const char *arg) {
    struct stat sb;
    return strchr(arg, '.') || strchr(arg, '/') || stat(arg, &sb) == 0;
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "vitrain: missing subcommand or CONFIG\n%s", USAGE_MAIN);
        return 2;
    }
    const char *first = argv[1];
    if (!strcmp(first, "--help") || !strcmp(first, "-h") || !strcmp(first, "help")) {
        fputs(USAGE_MAIN, stdout);
        return 0;
    }
    static const struct { const char *name; int flags; int (*run)(const cli_args *); } cmds[] = {
        {"train", F_SET | F_THREADS | F_RESUME | F_RUNDIR | F_STOP | F_START_OVER | F_RESUME_OR_START |
                      F_VERBOSE, cmd_train},
        {"eval", F_SET | F_THREADS | F_CKPT | F_LOGITS | F_RES | F_SHUFFLE | F_SEED | F_PRECISION, cmd_eval},
        {"info", F_SET, cmd_info},
        {"tune", F_SET | F_THREADS | F_RANKS, cmd_tune},
        {"help-config", F_MARKDOWN, cmd_help_config},
        {"kinds", F_ROTARY | F_DATA, cmd_kinds}};
    int ci = -1, argi = 2;
    for (int k = 0; k < (int)(sizeof cmds / sizeof cmds[0]); k++)
        if (!strcmp(first, cmds[k].name)) ci = k;
    if (ci < 0 && !strncmp(first, "--resume", 8) && (first[8] == '\0' || first[8] == '=')) {
        ci = 0; /* vitrain --resume DIR: train, continuing that run */
        argi = 1;
    }
    if (ci < 0) {
        if (first[0] == '-') return usage_error("", "unknown option '%s' (expected a subcommand or CONFIG first)", first);
        if (!looks_like_config(first))
            return usage_error("", "unknown subcommand '%s' (expected train, eval, info, tune, "
                               "help-config, kinds or a CONFIG file)", first);
        ci = 0;
        argi = 1;
    }
    cli_args a;
    int rc = parse_args(&a, cmds[ci].name, argc, argv, argi, cmds[ci].flags);
    if (rc) return rc;
    if (a.help) {
        fputs(usage_of(cmds[ci].name), stdout);
        return 0;
    }
    rc = cmds[ci].run(&a);
    return rc;
}

int main(int argc, char **argv) {
    vt_alloc_policy();
    if (vt_dist_init(&argc, &argv) != VT_OK) {
        fprintf(stderr, "vitrain: error: %s\n", vt_last_error());
        return 2;
    }
    return vt_dist_exit(run(argc, argv));
}
