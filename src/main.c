/* main.c - the vitrain command line: argv -> subcommand, status -> exit code. The only
 * exit() of the program. Exit codes: 0 done, 2 usage or config error, 1 runtime failure,
 * 75 (VT_EXIT_STOPPED, stop.h) training stopped by SIGINT, SIGTERM or SIGUSR1 after
 * writing a checkpoint pair: continue it with the command printed (a job script tells
 * "stopped, to be continued" from "done" and "failed" by this code); 130 a second SIGINT
 * ended it at once.
 *
 *   vitrain [train] CONFIG [--set k=v ...] [--threads N] [--resume RUN_DIR] [--run-dir DIR]
 *                          [--resume-or-start] [--stop-after STEPS]
 *   vitrain eval [CONFIG] --checkpoint FILE [--resolutions S1,S2,...] [--patch-shuffle] [--seed N]
 *                       [--logits OUT.npz] [--precision fp32|bf16] [--set k=v ...] [--threads N]
 *   vitrain info CONFIG [--set k=v ...]
 *   vitrain help-config [--markdown]
 *
 * Flags take their value as the next argument or after '=' (--threads=2).
 * Under mpirun (dist.h) every rank runs the same command line; rank 0 prints.
 */
#include <malloc.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "config.h"
#include "data/loader.h"
#include "dist.h"
#include "eval.h"
#include "footprint.h"
#include "kernels.h"
#include "npz.h"
#include "resolve.h"
#include "status.h"
#include "stop.h"
#include "train.h"
#include "vit.h"
#include "weights.h"

#define MAX_SETS 256

enum { F_SET = 1, F_THREADS = 2, F_RESUME = 4, F_RUNDIR = 8, F_CKPT = 16, F_LOGITS = 32,
       F_MARKDOWN = 64, F_STOP = 128, F_RES = 256, F_SHUFFLE = 512, F_SEED = 1024, F_PRECISION = 2048,
       F_RESUME_OR_START = 4096 };

typedef struct {
    const char *cmd;
    const char *config;
    const char *sets[MAX_SETS];
    int n_sets;
    int threads;            /* -1: not given */
    const char *resume, *run_dir, *checkpoint, *logits;
    long long stop_after;
    int markdown, help;
    int resume_or_start;    /* --resume-or-start */
    int argc;               /* the command line as given (the command to continue a run) */
    char **argv;
    int resolutions[VT_MAX_RES], n_resolutions; /* --resolutions; 0 = not given */
    int patch_shuffle;
    int seed_given;
    unsigned long long seed; /* --seed: patch-shuffle permutations */
    char precision_set[32];  /* --precision P as the override train.precision=P */
} cli_args;

static const char *USAGE_TRAIN =
    "usage: vitrain [train] CONFIG [--set section.key=value ...] [--threads N]\n"
    "                      [--resume RUN_DIR] [--run-dir DIR] [--resume-or-start]\n"
    "                      [--stop-after STEPS]\n"
    "Train the model of CONFIG (JSON). The run directory (default train.run_dir, else\n"
    "runs/<config stem>) receives config.json, metrics.jsonl, the checkpoint pairs\n"
    "step_N.safetensors + step_N.state.safetensors (`latest` names the newest),\n"
    "last.safetensors (the newest weights) and best.safetensors.\n"
    "  --set k=v         override one config key (repeatable; value parsed as JSON if it parses)\n"
    "  --threads N       OpenMP threads (default train.threads; 0 = all cores)\n"
    "  --resume RUN_DIR  continue the run saved in RUN_DIR exactly where it stopped\n"
    "  --run-dir DIR     write the run to DIR\n"
    "  --resume-or-start continue the run in the run directory if it holds a checkpoint,\n"
    "                    else start it there (one command for a job that may be requeued)\n"
    "  --stop-after N    stop after optimizer step N (checkpoint + state written, resumable)\n"
    "SIGINT, SIGTERM or SIGUSR1 stop training after the current step: a checkpoint pair is\n"
    "written, the command to continue printed, and the exit status is 75 (a second SIGINT\n"
    "exits at once, status 130, writing nothing).\n";
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
static const char *USAGE_HELPCFG =
    "usage: vitrain help-config [--markdown]\n"
    "Every config key with its type, default, allowed values and meaning\n"
    "(--markdown: the text of configs/README.md).\n";
static const char *USAGE_MAIN =
    "usage: vitrain [train] CONFIG [options]     train (see vitrain train --help)\n"
    "       vitrain eval [CONFIG] --checkpoint FILE evaluate a checkpoint\n"
    "       vitrain info CONFIG                   model size, FLOPs and memory\n"
    "       vitrain help-config [--markdown]      every config key\n"
    "Environment: VT_ISA=LEVEL forces a kernel level (an unknown LEVEL lists them).\n";

static const char *usage_of(const char *cmd) {
    if (!strcmp(cmd, "train")) return USAGE_TRAIN;
    if (!strcmp(cmd, "eval")) return USAGE_EVAL;
    if (!strcmp(cmd, "info")) return USAGE_INFO;
    if (!strcmp(cmd, "help-config")) return USAGE_HELPCFG;
    return USAGE_MAIN;
}

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("vitrain: ", vt_dist_msg());
    vfprintf(vt_dist_msg(), fmt, ap);
    va_end(ap);
    fprintf(vt_dist_msg(), "\n%s", usage_of(cmd));
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
        {"--resume-or-start", F_RESUME_OR_START}};
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->threads = -1;
    a->argc = argc;
    a->argv = argv;
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) { a->help = 1; return 0; }
        if (arg[0] != '-' || arg[1] == '\0') {
            if (a->config || !strcmp(cmd, "help-config"))
                return usage_error(cmd, "unexpected argument '%s'", arg);
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
        if (flag == F_MARKDOWN) {
            if (eq) return usage_error(cmd, "option --markdown takes no value");
            a->markdown = 1;
            continue;
        }
        if (flag == F_SHUFFLE) {
            if (eq) return usage_error(cmd, "option --patch-shuffle takes no value");
            a->patch_shuffle = 1;
            continue;
        }
        if (flag == F_RESUME_OR_START) {
            if (eq) return usage_error(cmd, "option --resume-or-start takes no value");
            a->resume_or_start = 1;
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

/* Config file + --set overrides, resolved. Any failure here is a config error (2). */
static int load_config(vt_config *cfg, const cli_args *a) {
    if (!a->config) return usage_error(a->cmd, "missing CONFIG (a JSON config file)");
    /* The file, then every --set, then one resolution: an override may repair a file
     * that is invalid on its own. */
    vt_status st = vt_resolve_file(cfg, a->config, (const char *const *)a->sets, a->n_sets);
    if (st != VT_OK) {
        fprintf(vt_dist_msg(), "vitrain: config error: %s\n", vt_last_error());
        return 2;
    }
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

/* Kernel table and thread count; logs the choice once. */
static int start_runtime(const vt_config *cfg, const cli_args *a) {
    char err[256];
    int bad = vt_kernels_init(err, sizeof err);
    if (vt_dist_agree(bad ? vt_fail(VT_ERR_USAGE, "%s", err) : VT_OK) != VT_OK) {
        if (vt_dist_reports_error()) fprintf(stderr, "vitrain: %s\n", vt_last_error());
        return 2;
    }
    int n = a->threads >= 0 ? a->threads : cfg->train.threads;
    if (n == 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    if (vt_dist_root())
        fprintf(stderr, "vitrain: kernels %s, GEMM context %s, %d thread%s%s\n", vt_k.name, vt_gemm_ctx.name, n,
                n == 1 ? "" : "s", vt_dist_size() > 1 ? " per rank" : "");
    vt_dist_check_placement(n);
    return 0;
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
 * and without --stop-after when that was what stopped it (drop_stop). */
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
    if (a->resume && a->resume_or_start)
        return usage_error("train", "--resume and --resume-or-start: give one (--resume-or-start "
                           "continues the run directory when it holds a checkpoint, else starts it)");
    vt_config cfg;
    int rc = start_job(load_config(&cfg, a), a, &cfg);
    if (rc) return rc;
    if ((rc = start_runtime(&cfg, a))) return rc;
    char *json = vt_config_to_json(&cfg);
    if (vt_dist_root()) fprintf(stderr, "vitrain: resolved config:\n%s\n", json);
    free(json);
    vt_train_opts opts = {.run_dir = a->run_dir, .resume_dir = a->resume, .stop_after = a->stop_after,
                          .resume_or_start = a->resume_or_start};
    vt_train_result res;
    vt_status st = vt_train_run(&cfg, &opts, &res);
    if (st != VT_OK) return fail_exit(st);
    if (res.stopped && vt_dist_root()) report_stop(a, &res);
    return res.stop_signal ? vt_dist_exit_everywhere(VT_EXIT_STOPPED) : 0; /* the ranks agreed on the stop */
}

/* One evaluation of m at image size S (plain, then patch-shuffled when asked). */
typedef struct {
    vt_eval_result plain, shuf;
} eval_row;

/* What --logits collects: the archive and whether the per-sample arrays (labels,
 * paths) are in it yet. */
typedef struct {
    vt_npz *z;
    int have_samples;
} logits_out;

/* The labels (int64) and, for image folders, paths and class names of the split. */
static vt_status add_samples(logits_out *lo, vt_evaluator *ev, const int *labels) {
    int64_t n = ev->n, K = ev->num_classes;
    int64_t *l64 = malloc((size_t)n * sizeof *l64 + 1);
    if (!l64) return vt_fail(VT_ERR_RUNTIME, "out of memory: %lld labels", (long long)n);
    for (int64_t i = 0; i < n; i++) l64[i] = labels[i];
    vt_status st = vt_npz_add_i64(lo->z, "labels", l64, 1, &n);
    free(l64);
    char buf[4096];
    if (st == VT_OK && n > 0 && vt_loader_sample_path(ev->loader, 0, buf, sizeof buf)) {
        char **paths = vt_xcalloc((size_t)n, sizeof *paths);
        for (int64_t i = 0; i < n; i++) paths[i] = strdup(vt_loader_sample_path(ev->loader, i, buf, sizeof buf));
        st = vt_npz_add_str(lo->z, "paths", (const char *const *)paths, n);
        for (int64_t i = 0; i < n; i++) free(paths[i]);
        free(paths);
        const char **names = vt_xcalloc((size_t)K, sizeof *names);
        int k = 0, dk = vt_loader_num_classes(ev->loader); /* dk <= K (vt_eval_open) */
        for (; k < dk && (names[k] = vt_loader_class_name(ev->loader, k)); k++) {}
        if (st == VT_OK) st = vt_npz_add_str(lo->z, "class_names", names, k);
        free(names);
    }
    lo->have_samples = st == VT_OK;
    return st;
}

static vt_status eval_at(const vt_config *cfg, vt_vit *m, int S, const cli_args *a, logits_out *lo,
                         eval_row *row) {
    vt_evaluator ev;
    vt_status st = vt_dist_agree(vt_eval_open(&ev, cfg, S));
    if (st != VT_OK) {
        vt_eval_close(&ev);
        return st;
    }
    float *logits = NULL;
    int *labels = NULL;
    if (lo) { /* every rank asks for them; rank 0's buffers receive all rows (eval.h) */
        size_t rows = vt_dist_root() ? (size_t)ev.n : 0;
        logits = malloc(rows * ev.num_classes * sizeof(float) + 1);
        labels = malloc(rows * sizeof(int) + 1);
        if (!logits || !labels) st = vt_fail(VT_ERR_RUNTIME, "out of memory: logits of %lld x %d floats",
                                             (long long)ev.n, ev.num_classes);
        ev.labels_out = labels;
    }
    char name[64];
    int64_t shape[2] = {ev.n, ev.num_classes};
    if ((st = vt_dist_agree(st)) == VT_OK) st = vt_eval_run(&ev, m, logits, &row->plain);
    if (st == VT_OK && lo && vt_dist_root()) {
        snprintf(name, sizeof name, "logits_%d", S);
        st = vt_npz_add_f32(lo->z, name, logits, 2, shape);
        if (st == VT_OK && !lo->have_samples) st = add_samples(lo, &ev, labels);
    }
    if (lo) st = vt_dist_agree(st);
    if (st == VT_OK && a->patch_shuffle) {
        ev.shuffle = 1;
        ev.shuffle_seed = a->seed;
        st = vt_eval_run(&ev, m, logits, &row->shuf);
        if (st == VT_OK && lo && vt_dist_root()) {
            snprintf(name, sizeof name, "shuffled_logits_%d", S);
            st = vt_npz_add_f32(lo->z, name, logits, 2, shape);
        }
        if (lo) st = vt_dist_agree(st);
    }
    free(logits);
    free(labels);
    vt_eval_close(&ev);
    return st;
}

/* Relative top-1 drop of the shuffled evaluation (0 when the plain top-1 is 0). */
static double shuffle_drop(const eval_row *r) {
    return r->plain.top1 > 0 ? (r->plain.top1 - r->shuf.top1) / r->plain.top1 : 0.0;
}

/* The config of `vitrain eval`: CONFIG and --set, or without CONFIG the checkpoint's own
 * (its __metadata__["config"], the resolved config it was trained with) and --set. Keys
 * that define the model or its PE must agree with the checkpoint's; data and eval keys
 * may differ. Returns 0 or the exit code. */
static int eval_config(vt_config *cfg, const vt_safetensors *st, const cli_args *a) {
    const char *meta = vt_st_meta(st, "config");
    vt_config ck;
    if (meta) {
        char src[VT_STR + 64];
        snprintf(src, sizeof src, "%s __metadata__[\"config\"]", a->checkpoint);
        if (vt_resolve_json(&ck, meta, src) != VT_OK) {
            fprintf(vt_dist_msg(), "vitrain: config error: %s\n", vt_last_error());
            return 2;
        }
    }
    if (a->config) {
        int rc = load_config(cfg, a);
        if (rc) return rc;
    } else if (meta) {
        *cfg = ck;
        vt_status st_ = VT_OK;
        for (int i = 0; i < a->n_sets && st_ == VT_OK; i++) st_ = vt_config_set(cfg, a->sets[i]);
        if (st_ == VT_OK) st_ = vt_resolve(cfg);
        if (st_ != VT_OK) {
            fprintf(vt_dist_msg(), "vitrain: config error: %s\n", vt_last_error());
            return 2;
        }
    } else {
        return usage_error("eval", "%s has no __metadata__[\"config\"] (not written by vitrain, e.g. a timm "
                           "file): give the CONFIG of its model, or convert it with scripts/timm_convert.py "
                           "from-timm", a->checkpoint);
    }
    char report[2048];
    int n = meta ? vt_config_model_keys_differ(cfg, &ck, report, sizeof report) : 0;
    if (n > 0) {
        fprintf(vt_dist_msg(), "vitrain: config error: %s: %d key%s that define%s the model differ%s from the "
                "checkpoint's config (%s value vs checkpoint value): %s. Data and eval keys may differ; "
                "without CONFIG eval takes the checkpoint's own config\n",
                a->config ? a->config : "--set", n, n == 1 ? "" : "s", n == 1 ? "s" : "", n == 1 ? "s" : "",
                a->config ? "config" : "--set", report);
        return 2;
    }
    return 0;
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
    vt_safetensors ckpt;
    vt_status st = vt_st_read(a->checkpoint, &ckpt);
    if (st != VT_OK) return fail_exit(st);
    vt_config cfg;
    int rc = eval_config(&cfg, &ckpt, a);
    if (rc) {
        vt_st_free(&ckpt);
        return rc;
    }
    int sizes[VT_MAX_RES + 1], n_sizes = 0;
    if (a->n_resolutions) {
        for (int i = 0; i < a->n_resolutions; i++) sizes[n_sizes++] = a->resolutions[i];
    } else {
        sizes[n_sizes++] = cfg.model.img_size;
        for (int i = 0; i < cfg.eval.n_resolutions; i++)
            if (cfg.eval.resolutions[i] != cfg.model.img_size) sizes[n_sizes++] = cfg.eval.resolutions[i];
    }
    for (int i = 0; i < n_sizes && !rc; i++)
        if (vt_resolve_image_size(sizes[i], cfg.model.patch_size, "--resolutions: size") != VT_OK)
            rc = usage_error("eval", "%s", vt_last_error());
    if ((rc = start_job(rc, a, &cfg)) || (rc = start_runtime(&cfg, a))) {
        vt_st_free(&ckpt);
        return rc;
    }
    vt_vit m;
    vt_model_spec ms;
    st = vt_vit_init(&m, vt_resolve_model_spec(&cfg, &ms), (uint64_t)cfg.train.seed);
    if (st != VT_OK) {
        vt_st_free(&ckpt);
        return fail_exit(vt_dist_everywhere(st));
    }
    vt_weights_opts strict = {0, 0};
    st = vt_dist_agree(vt_weights_apply(&m, &ckpt, a->checkpoint, &strict, NULL, NULL));
    vt_st_free(&ckpt);
    logits_out lo = {NULL, 0};
    int want_logits = st == VT_OK && a->logits; /* rank 0 writes the archive */
    if (want_logits && vt_dist_root()) st = vt_npz_open(&lo.z, a->logits);
    if (want_logits) st = vt_dist_agree(st);
    eval_row rows[VT_MAX_RES + 1];
    int done = 0;
    for (; st == VT_OK && done < n_sizes; done++) {
        eval_row *r = &rows[done];
        st = eval_at(&cfg, &m, sizes[done], a, want_logits ? &lo : NULL, r);
        if (st != VT_OK) break;
        printf("{\"checkpoint\":\"%s\",\"split\":\"%s\",\"n\":%lld,\"resolution\":%d,\"top1\":%.4f,"
               "\"top5\":%.4f,\"loss\":%.9g", a->checkpoint, cfg.data.val_split, (long long)r->plain.n,
               r->plain.img_size, r->plain.top1, r->plain.top5, r->plain.loss);
        if (a->patch_shuffle)
            printf(",\"shuffle_seed\":%llu,\"shuffled_top1\":%.4f,\"shuffled_top5\":%.4f,"
                   "\"shuffled_loss\":%.9g,\"top1_drop_rel\":%.6f", a->seed, r->shuf.top1, r->shuf.top5,
                   r->shuf.loss, shuffle_drop(r));
        printf("}\n");
        fflush(stdout);
        if (vt_dist_root())
            fprintf(stderr, "eval: top-1 %.2f%% top-5 %.2f%% loss %.4f (%s, %lld images, %dpx)\n",
                r->plain.top1, r->plain.top5, r->plain.loss, cfg.data.val_split, (long long)r->plain.n,
                r->plain.img_size);
    }
    if (st == VT_OK && vt_dist_root()) {
        fprintf(stderr, "\n%-10s %8s %8s %9s", "resolution", "top-1", "top-5", "loss");
        if (a->patch_shuffle) fprintf(stderr, " %10s %10s %9s", "shuf top-1", "shuf top-5", "drop");
        fputc('\n', stderr);
        for (int i = 0; i < n_sizes; i++) {
            const eval_row *r = &rows[i];
            fprintf(stderr, "%-10d %7.2f%% %7.2f%% %9.4f", r->plain.img_size, r->plain.top1,
                    r->plain.top5, r->plain.loss);
            if (a->patch_shuffle)
                fprintf(stderr, " %9.2f%% %9.2f%% %8.1f%%", r->shuf.top1, r->shuf.top5,
                        100.0 * shuffle_drop(r));
            fputc('\n', stderr);
        }
    }
    if (lo.z && st == VT_OK) {
        int64_t res[VT_MAX_RES + 1], nr = n_sizes;
        for (int i = 0; i < n_sizes; i++) res[i] = sizes[i];
        st = vt_npz_add_i64(lo.z, "resolutions", res, 1, &nr);
        vt_status cs = vt_npz_close(lo.z);
        if (st == VT_OK) st = cs;
        if (st == VT_OK) fprintf(stderr, "eval: logits of %d size%s written to %s\n", n_sizes,
                                 n_sizes == 1 ? "" : "s", a->logits);
    } else {
        vt_npz_abort(lo.z);
    }
    if (want_logits) st = vt_dist_agree(st);
    vt_vit_free(&m);
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
    /* The model's plan, not the model: sizes of any magnitude answer at once. */
    vt_vit m;
    vt_model_spec ms;
    vt_status st = vt_vit_plan(&m, vt_resolve_model_spec(&cfg, &ms));
    if (st != VT_OK) return fail_exit(st);
    vt_footprint fp;
    st = vt_footprint_estimate(&cfg, vt_footprint_resident(), &fp);
    if (st != VT_OK) {
        vt_vit_free(&m);
        return fail_exit(st);
    }
    const int S = cfg.model.img_size;
    const int64_t gb = (int64_t)cfg.train.batch_size * cfg.train.accum_steps;
    double fwd = vt_vit_flops(&m, S);
    double step_flops = 3.0 * fwd * (double)gb;
    const double MiB = 1048576.0;
    printf("model: width %d, depth %d, heads %d, patch %d, image %dx%d, %d classes, pe %s\n",
           cfg.model.width, cfg.model.depth, cfg.model.heads, cfg.model.patch_size, S, S,
           cfg.model.num_classes, vt_pe_kind_name(cfg.pe.kind));
    printf("parameters: %lld (%.2f M)\n", (long long)m.n_params, m.n_params / 1e6);
    printf("forward FLOPs per image: %.4g G\n", fwd / 1e9);
    printf("training step FLOPs: %.4g G (3 x forward x global batch %lld)\n", step_flops / 1e9,
           (long long)gb);
    printf("memory estimate (peak resident set of training): %.1f MiB = model and optimizer %.1f "
           "+ activations (batch %d) %.1f + evaluation %.1f + data loaders %.1f + dataset %.1f + "
           "scratch %.1f + process %.1f MiB; --resume peaks at %.1f MiB while loading\n",
           fp.total / MiB, fp.model / MiB, cfg.train.batch_size, fp.activations / MiB, fp.eval / MiB,
           fp.loader / MiB, fp.dataset / MiB, fp.scratch / MiB, fp.baseline / MiB,
           fp.resume_peak / MiB);
    printf("{\"params\":%lld,\"forward_flops_per_image\":%.6g,\"train_step_flops\":%.6g,"
           "\"global_batch\":%lld,\"memory_bytes\":%.0f,\"param_state_bytes\":%.0f,"
           "\"activation_bytes\":%.0f,\"eval_bytes\":%.0f,\"loader_bytes\":%.0f,"
           "\"dataset_bytes\":%.0f,\"scratch_bytes\":%.0f,\"process_bytes\":%.0f,"
           "\"resume_peak_bytes\":%.0f,\"img_size\":%d}\n", (long long)m.n_params, fwd, step_flops,
           (long long)gb, fp.total, fp.model, fp.activations, fp.eval, fp.loader, fp.dataset,
           fp.scratch, fp.baseline, fp.resume_peak, S);
    vt_vit_free(&m);
    return 0;
}

static int cmd_help_config(const cli_args *a) {
    char *text = a->markdown ? vt_resolve_doc_markdown() : vt_config_doc_text();
    fputs(text, stdout);
    free(text);
    return 0;
}

/* A first argument that is neither a subcommand nor a config file. */
static int looks_like_config(const char *arg) {
    struct stat sb;
    return strchr(arg, '.') || strchr(arg, '/') || stat(arg, &sb) == 0;
}

static int run(int argc, char **argv) {
    if (argc < 2) return usage_error("", "missing subcommand or CONFIG");
    const char *first = argv[1];
    if (!strcmp(first, "--help") || !strcmp(first, "-h") || !strcmp(first, "help")) {
        fputs(USAGE_MAIN, stdout);
        return 0;
    }
    static const struct { const char *name; int flags; int (*run)(const cli_args *); } cmds[] = {
        {"train", F_SET | F_THREADS | F_RESUME | F_RUNDIR | F_STOP | F_RESUME_OR_START, cmd_train},
        {"eval", F_SET | F_THREADS | F_CKPT | F_LOGITS | F_RES | F_SHUFFLE | F_SEED | F_PRECISION, cmd_eval},
        {"info", F_SET, cmd_info},
        {"help-config", F_MARKDOWN, cmd_help_config}};
    int ci = -1, argi = 2;
    for (int k = 0; k < 4; k++)
        if (!strcmp(first, cmds[k].name)) ci = k;
    if (ci < 0) {
        if (first[0] == '-') return usage_error("", "unknown option '%s' (expected a subcommand or CONFIG first)", first);
        if (!looks_like_config(first))
            return usage_error("", "unknown subcommand '%s' (expected train, eval, info, help-config "
                               "or a CONFIG file)", first);
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
    /* Buffers of 1 MiB or more (model, optimizer, arenas, batches) are mappings of their
     * own, given back to the system when freed: glibc would raise its mmap threshold at
     * the first such free and then keep later large buffers, once freed, resident in its
     * heap (the first step's arena blocks), which the memory estimate of `info` and the
     * peak resident set of a run would both pay for. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    if (vt_dist_init(&argc, &argv) != VT_OK) {
        fprintf(stderr, "vitrain: error: %s\n", vt_last_error());
        return 2;
    }
    return vt_dist_exit(run(argc, argv));
}
