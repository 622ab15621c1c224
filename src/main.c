/* main.c - the vitrain command line: argv -> subcommand, status -> exit code. The only
 * exit() of the program (exit codes: 0 ok, 2 usage or config error, 1 runtime failure).
 *
 *   vitrain [train] CONFIG [--set k=v ...] [--threads N] [--resume RUN_DIR] [--run-dir DIR]
 *                          [--stop-after STEPS]
 *   vitrain eval CONFIG --checkpoint FILE [--logits OUT.npy] [--set k=v ...] [--threads N]
 *   vitrain info CONFIG [--set k=v ...]
 *   vitrain help-config [--markdown]
 *
 * Flags take their value as the next argument or after '=' (--threads=2).
 */
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "config.h"
#include "eval.h"
#include "kernels.h"
#include "status.h"
#include "train.h"
#include "vit.h"

#define MAX_SETS 256

enum { F_SET = 1, F_THREADS = 2, F_RESUME = 4, F_RUNDIR = 8, F_CKPT = 16, F_LOGITS = 32,
       F_MARKDOWN = 64, F_STOP = 128 };

typedef struct {
    const char *cmd;
    const char *config;
    const char *sets[MAX_SETS];
    int n_sets;
    int threads;            /* -1: not given */
    const char *resume, *run_dir, *checkpoint, *logits;
    long long stop_after;
    int markdown, help;
} cli_args;

static const char *USAGE_TRAIN =
    "usage: vitrain [train] CONFIG [--set section.key=value ...] [--threads N]\n"
    "                      [--resume RUN_DIR] [--run-dir DIR] [--stop-after STEPS]\n"
    "Train the model of CONFIG (JSON). The run directory (default train.run_dir, else\n"
    "runs/<config stem>) receives config.json, metrics.jsonl, last.safetensors,\n"
    "last.state.safetensors and best.safetensors.\n"
    "  --set k=v         override one config key (repeatable; value parsed as JSON if it parses)\n"
    "  --threads N       OpenMP threads (default train.threads; 0 = all cores)\n"
    "  --resume RUN_DIR  continue the run saved in RUN_DIR exactly where it stopped\n"
    "  --run-dir DIR     write the run to DIR\n"
    "  --stop-after N    stop after optimizer step N (checkpoint + state written, resumable)\n";
static const char *USAGE_EVAL =
    "usage: vitrain eval CONFIG --checkpoint FILE [--logits OUT.npy] [--set k=v ...] [--threads N]\n"
    "Top-1/top-5 accuracy and mean cross-entropy of a checkpoint on the val split\n"
    "(data.val_split). Prints a JSON line on stdout and a readable line on stderr.\n"
    "  --checkpoint FILE  model weights (.safetensors written by vitrain)\n"
    "  --logits OUT.npy   also write the logits, float32 (N, num_classes), rows in dataset order\n"
    "  --set k=v          override one config key (repeatable)\n"
    "  --threads N        OpenMP threads (default train.threads; 0 = all cores)\n";
static const char *USAGE_INFO =
    "usage: vitrain info CONFIG [--set k=v ...]\n"
    "Parameter count, forward FLOPs per image, training-step FLOPs and a memory estimate\n"
    "for the model of CONFIG, readable and as a JSON line.\n";
static const char *USAGE_HELPCFG =
    "usage: vitrain help-config [--markdown]\n"
    "Every config key with its type, default, allowed values and meaning\n"
    "(--markdown: the text of configs/README.md).\n";
static const char *USAGE_MAIN =
    "usage: vitrain [train] CONFIG [options]     train (see vitrain train --help)\n"
    "       vitrain eval CONFIG --checkpoint FILE evaluate a checkpoint\n"
    "       vitrain info CONFIG                   model size, FLOPs and memory\n"
    "       vitrain help-config [--markdown]      every config key\n"
    "Environment: VT_ISA=scalar|avx2|avx512 forces a kernel level.\n";

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
    fputs("vitrain: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s", usage_of(cmd));
    return 2;
}

static int fail_exit(vt_status st) {
    fprintf(stderr, "vitrain: error: %s\n", vt_last_error());
    return st == VT_ERR_USAGE ? 2 : 1;
}

/* Parse argv[first..] for subcommand cmd allowing the flags in `allowed`. Returns 0 or
 * the exit code of a usage error. */
static int parse_args(cli_args *a, const char *cmd, int argc, char **argv, int first, int allowed) {
    static const struct { const char *name; int flag; } flags[] = {
        {"--set", F_SET}, {"--threads", F_THREADS}, {"--resume", F_RESUME},
        {"--run-dir", F_RUNDIR}, {"--checkpoint", F_CKPT}, {"--logits", F_LOGITS},
        {"--markdown", F_MARKDOWN}, {"--stop-after", F_STOP}};
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->threads = -1;
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
        case F_RESUME: a->resume = val; break;
        case F_RUNDIR: a->run_dir = val; break;
        case F_CKPT: a->checkpoint = val; break;
        case F_LOGITS: a->logits = val; break;
        default: break;
        }
    }
    return 0;
}

/* Config file + --set overrides, validated. Any failure here is a config error (2). */
static int load_config(vt_config *cfg, const cli_args *a) {
    if (!a->config) return usage_error(a->cmd, "missing CONFIG (a JSON config file)");
    /* The file, then every --set, then one validation: an override may repair a file
     * that is invalid on its own. */
    vt_status st = vt_config_load_overrides(cfg, a->config, (const char *const *)a->sets, a->n_sets);
    if (st != VT_OK) {
        fprintf(stderr, "vitrain: config error: %s\n", vt_last_error());
        return 2;
    }
    return 0;
}

/* Kernel table and thread count; logs the choice once. */
static int start_runtime(const vt_config *cfg, const cli_args *a) {
    char err[256];
    if (vt_kernels_init(err, sizeof err)) {
        fprintf(stderr, "vitrain: %s\n", err);
        return 2;
    }
    int n = a->threads >= 0 ? a->threads : cfg->train.threads;
    if (n == 0) n = omp_get_num_procs();
    omp_set_num_threads(n);
    fprintf(stderr, "vitrain: kernels %s, %d thread%s\n", vt_k.name, n, n == 1 ? "" : "s");
    return 0;
}

static int cmd_train(const cli_args *a) {
    if (a->resume && a->run_dir && strcmp(a->resume, a->run_dir) != 0)
        return usage_error("train", "--resume %s and --run-dir %s name different directories",
                           a->resume, a->run_dir);
    vt_config cfg;
    int rc = load_config(&cfg, a);
    if (rc) return rc;
    if ((rc = start_runtime(&cfg, a))) return rc;
    char *json = vt_config_to_json(&cfg);
    fprintf(stderr, "vitrain: resolved config:\n%s\n", json);
    free(json);
    vt_train_opts opts = {a->run_dir, a->resume, a->stop_after};
    vt_train_result res;
    vt_status st = vt_train_run(&cfg, &opts, &res);
    if (st != VT_OK) return fail_exit(st);
    return 0;
}

static int cmd_eval(const cli_args *a) {
    if (!a->checkpoint) {
        if (!a->config) return usage_error("eval", "missing CONFIG (a JSON config file)");
        return usage_error("eval", "missing --checkpoint FILE");
    }
    vt_config cfg;
    int rc = load_config(&cfg, a);
    if (rc) return rc;
    if ((rc = start_runtime(&cfg, a))) return rc;
    vt_vit m;
    vt_status st = vt_vit_init(&m, &cfg, (uint64_t)cfg.train.seed);
    if (st != VT_OK) return fail_exit(st);
    vt_evaluator ev;
    float *logits = NULL;
    st = vt_vit_load(&m, a->checkpoint);
    if (st == VT_OK) st = vt_eval_open(&ev, &cfg, cfg.model.img_size);
    if (st != VT_OK) { vt_vit_free(&m); return fail_exit(st); }
    if (a->logits) {
        logits = malloc((size_t)ev.n * ev.num_classes * sizeof(float));
        if (!logits) st = vt_fail(VT_ERR_RUNTIME, "out of memory: logits of %lld x %d floats",
                                  (long long)ev.n, ev.num_classes);
    }
    vt_eval_result r;
    if (st == VT_OK) st = vt_eval_run(&ev, &m, logits, &r);
    if (st == VT_OK && logits) {
        int64_t shape[2] = {ev.n, ev.num_classes};
        st = vt_npy_write(a->logits, logits, 2, shape);
    }
    if (st == VT_OK) {
        printf("{\"checkpoint\":\"%s\",\"split\":\"%s\",\"n\":%lld,\"resolution\":%d,\"top1\":%.4f,"
               "\"top5\":%.4f,\"loss\":%.9g}\n", a->checkpoint, cfg.data.val_split, (long long)r.n,
               r.img_size, r.top1, r.top5, r.loss);
        fflush(stdout);
        fprintf(stderr, "eval: top-1 %.2f%% top-5 %.2f%% loss %.4f (%s, %lld images, %dpx)\n", r.top1,
                r.top5, r.loss, cfg.data.val_split, (long long)r.n, r.img_size);
    }
    for (int i = 0; st == VT_OK && i < cfg.eval.n_resolutions; i++) {
        int S = cfg.eval.resolutions[i];
        if (S == cfg.model.img_size) continue;
        vt_evaluator e2;
        st = vt_eval_open(&e2, &cfg, S);
        if (st != VT_OK) break;
        st = vt_eval_run(&e2, &m, NULL, &r);
        vt_eval_close(&e2);
        if (st != VT_OK) break;
        printf("{\"checkpoint\":\"%s\",\"split\":\"%s\",\"n\":%lld,\"resolution\":%d,\"top1\":%.4f,"
               "\"top5\":%.4f,\"loss\":%.9g}\n", a->checkpoint, cfg.data.val_split, (long long)r.n,
               r.img_size, r.top1, r.top5, r.loss);
        fprintf(stderr, "eval: top-1 %.2f%% top-5 %.2f%% loss %.4f (%s, %lld images, %dpx)\n", r.top1,
                r.top5, r.loss, cfg.data.val_split, (long long)r.n, r.img_size);
    }
    free(logits);
    vt_eval_close(&ev);
    vt_vit_free(&m);
    return st == VT_OK ? 0 : fail_exit(st);
}

/* Activation floats kept for backward per image (analytic estimate): per block the
 * outputs of norm1, qkv (3), split q/k/v (3), attention probabilities (H N^2) and output,
 * merge, proj, residual, norm2, fc1 and gelu (mlp hidden each), fc2, residual = 14 N D
 * + 2 N Dh + H N^2; plus patch embedding, CLS concat and position add (3 N D) and the
 * image itself. Training doubles it (every activation gets a gradient buffer). Checked
 * against the step arena's measured use: 274 vs 269 MiB (configs/default.json, batch
 * 128), 5.5 vs 5.8 MiB (configs/synthetic_tiny.json); the dataset and the evaluation
 * buffers are not included. */
static double activation_floats(const vt_config *c, int S) {
    double P = c->model.patch_size, D = c->model.width, H = c->model.heads;
    double N = 1.0 + (S / P) * (S / P), Dh = c->model.mlp_ratio * D;
    double per_block = 14.0 * N * D + 2.0 * N * Dh + H * N * N;
    return c->model.depth * per_block + 3.0 * N * D + (double)c->model.in_chans * S * S;
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
    vt_vit m;
    vt_status st = vt_vit_init(&m, &cfg, (uint64_t)cfg.train.seed);
    if (st != VT_OK) return fail_exit(st);
    const int S = cfg.model.img_size;
    const int64_t gb = (int64_t)cfg.train.batch_size * (cfg.train.accum_steps > 0 ? cfg.train.accum_steps : 1);
    double fwd = vt_vit_flops(&m, S);
    double step_flops = 3.0 * fwd * (double)gb;
    double pbytes = 4.0 * (double)m.n_params;
    double state_bytes = 4.0 * pbytes; /* params + grads + 2 moments */
    double act_bytes = 2.0 * 4.0 * activation_floats(&cfg, S) * cfg.train.batch_size;
    double total = state_bytes + act_bytes;
    printf("model: width %d, depth %d, heads %d, patch %d, image %dx%d, %d classes, pe %s\n",
           cfg.model.width, cfg.model.depth, cfg.model.heads, cfg.model.patch_size, S, S,
           cfg.model.num_classes, vt_pe_kind_name(cfg.pe.kind));
    printf("parameters: %lld (%.2f M)\n", (long long)m.n_params, m.n_params / 1e6);
    printf("forward FLOPs per image: %.4g G\n", fwd / 1e9);
    printf("training step FLOPs: %.4g G (3 x forward x global batch %lld)\n", step_flops / 1e9,
           (long long)gb);
    printf("memory estimate: %.1f MiB = params + grads + 2 AdamW moments %.1f MiB + activations "
           "(batch %d) %.1f MiB\n", total / 1048576.0, state_bytes / 1048576.0, cfg.train.batch_size,
           act_bytes / 1048576.0);
    printf("{\"params\":%lld,\"forward_flops_per_image\":%.6g,\"train_step_flops\":%.6g,"
           "\"global_batch\":%lld,\"memory_bytes\":%.0f,\"param_state_bytes\":%.0f,"
           "\"activation_bytes\":%.0f,\"img_size\":%d}\n", (long long)m.n_params, fwd, step_flops,
           (long long)gb, total, state_bytes, act_bytes, S);
    vt_vit_free(&m);
    return 0;
}

static int cmd_help_config(const cli_args *a) {
    char *text = a->markdown ? vt_config_doc_markdown() : vt_config_doc_text();
    fputs(text, stdout);
    free(text);
    return 0;
}

/* A first argument that is neither a subcommand nor a config file. */
static int looks_like_config(const char *arg) {
    struct stat sb;
    return strchr(arg, '.') || strchr(arg, '/') || stat(arg, &sb) == 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage_error("", "missing subcommand or CONFIG");
    const char *first = argv[1];
    if (!strcmp(first, "--help") || !strcmp(first, "-h") || !strcmp(first, "help")) {
        fputs(USAGE_MAIN, stdout);
        return 0;
    }
    static const struct { const char *name; int flags; int (*run)(const cli_args *); } cmds[] = {
        {"train", F_SET | F_THREADS | F_RESUME | F_RUNDIR | F_STOP, cmd_train},
        {"eval", F_SET | F_THREADS | F_CKPT | F_LOGITS, cmd_eval},
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
