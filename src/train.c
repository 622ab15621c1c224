/* train.c - the training loop, run directory, checkpoints, resume state, metrics and
 * progress display (contract in train.h). */
#include "train.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blocking.h"
#include "checkpoint.h"
#include "data/loader.h"
#include "dist.h"
#include "durable.h"
#include "input_file.h"
#include "kernels.h"
#include "ops/ops.h"
#include "ops/par.h"
#include "optim.h"
#include "precision.h"
#include "resolve.h"
#include "resume.h"
#include "rundir.h"
#include "rng.h"
#include "run_log.h"
#include "stop.h"
#include "tape.h"
#include "train_report.h"
#include "train_state.h"
#include "vit.h"
#include "weights.h"

/* ---- small file helpers ---------------------------------------------------------- */

vt_status vt_mkdir_p(const char *path) {
    char buf[VT_STR];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf)
        return vt_fail(VT_ERR_USAGE, "run directory '%s': expected a non-empty path shorter than "
                       "%d characters", path, VT_STR);
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return vt_fail(VT_ERR_RUNTIME, "cannot create directory '%s': %s", buf, strerror(errno));
        struct stat sb;
        if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return vt_fail(VT_ERR_RUNTIME, "cannot create directory '%s': a file of that name exists",
                           buf);
        buf[i] = saved;
    }
    return VT_OK;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static double now_s(void) { return omp_get_wtime(); }

void vt_train_run_dir(const vt_config *cfg, const char *override, char *out, size_t len) {
    if (override && override[0]) { snprintf(out, len, "%s", override); return; }
    if (cfg->train.run_dir[0]) { snprintf(out, len, "%s", cfg->train.run_dir); return; }
    const char *src = cfg->source;
    const char *base = strrchr(src, '/');
    base = base ? base + 1 : src;
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base) n = (size_t)(dot - base);
    if (n == 0) snprintf(out, len, "runs/run");
    else snprintf(out, len, "runs/%.*s", (int)n, base);
}

/* ---- the trainer ------------------------------------------------------------------- */

typedef struct {
    const vt_config *cfg;
    char dir[VT_STR];
    char last_path[VT_STR + 32], best_path[VT_STR + 32];
    vt_vit model;
    int model_ok;
    vt_optim opt;
    int opt_ok;
    vt_loader *loader;
    vt_evaluator ev;
    int ev_ok;
    vt_arena arena;
    vt_tape tape;
    int arena_ok;
    uint16_t *w16;           /* the weights' bf16 copies (train.precision = bf16), or NULL */
    vt_rng drop_rng;
    int root, ranks, local_bs; /* data parallel: rank 0 writes; batch_size / ranks per rank */
    vt_dist_grads *dg;       /* the gradient exchange, NULL with one rank */
    float *images, *soft;
    int *labels;
    vt_rundir_lock lock;     /* rank 0: the run directory's lock, held for the whole run */
    int move_aside;          /* rank 0, start_over: the directory holds a run to move aside */
    char old_run[1024];      /* what that run is (rundir.h vt_rundir_inspect) */
    vt_run_log log;          /* rank 0: metrics.jsonl, event files, summary.csv */
    int log_ok;
    vt_epoch_stats ep;       /* the current epoch's running sums */
    int64_t train_n;         /* samples of the train split (all ranks) */
    double step_seconds;     /* this process's time in optimizer steps, and their images */
    int64_t step_images;
    int live;                /* redraw a progress line with \r */
    int line_open;           /* a live line is on screen (newline before other output) */
    int64_t spe, T, W, step; /* steps per epoch, total, warmup, steps done */
    int64_t saved_step;      /* step of the checkpoint pair `latest` names; -1: none */
    int accum, bs;
    double best_top1;
    int64_t best_step;       /* step of best_top1; -1: none (or unknown, resumed from an older state) */
    double wall_offset, t_start;
    double t_ckpt;           /* when the newest pair was written (or the run started) */
    int64_t last_eval_step;
    int eval_pending;        /* a stop request ended the evaluation due at this step (and so
                                its epoch record): the pair records it, a resume runs them */
} trainer;

static double wall(const trainer *tr) { return tr->wall_offset + (now_s() - tr->t_start); }

static void end_live_line(trainer *tr) {
    if (tr->line_open) { fputc('\n', stderr); tr->line_open = 0; }
}

/* Epoch (0-based) and micro-batch index of optimizer step s (0-based). */
static int64_t step_epoch(const trainer *tr, int64_t s) { return s / tr->spe; }
static int64_t step_batch(const trainer *tr, int64_t s) { return (s % tr->spe) * tr->accum; }

/* The checkpoint pair of the current step (checkpoint.h protocol): weights, state,
 * then vt_ckpt_publish makes it the one `latest` names. A failure before that removes
 * the new files, leaving the previous pair current. Rank 0 writes. */
static vt_status save_state_files(trainer *tr) {
    vt_ckpt_pair p;
    vt_ckpt_pair_of(tr->dir, tr->step, &p);
    /* the records up to this step are durable before the pair that has seen them */
    vt_status st = vt_run_log_sync(&tr->log);
    if (st != VT_OK) return st;
    char *cfg_json = vt_config_to_json(tr->cfg);
    st = vt_vit_save(&tr->model, p.weights, cfg_json);
    if (st == VT_OK) {
        vt_train_state s = {
            .step = tr->step, .epoch = step_epoch(tr, tr->step), .batch = step_batch(tr, tr->step),
            .optim_t = tr->opt.t, .best_top1 = tr->best_top1, .wall_s = wall(tr),
            .params_hash = vt_train_params_hash(tr->model.params, tr->model.n_params),
            .best_step = tr->best_step, .epoch_stats = tr->ep, .eval_pending = tr->eval_pending};
        memcpy(s.rng, tr->drop_rng.s, sizeof s.rng);
        st = vt_train_state_write(p.state, &s, tr->opt.m, tr->opt.v, tr->opt.n, cfg_json);
        if (st != VT_OK) vt_ckpt_discard(&p);
    }
    free(cfg_json);
    int committed = 0;
    if (st == VT_OK) st = vt_ckpt_publish(tr->dir, &p, tr->cfg->train.keep_checkpoints, &committed);
    if (committed) tr->saved_step = tr->step;
    if (st != VT_OK && committed)
        return vt_fail_context(st, "checkpoint at step %lld (saved and current; the run stops "
                               "on this error)", (long long)tr->step);
    if (st != VT_OK && tr->saved_step < 0)
        return vt_fail_context(st, "checkpoint at step %lld (not saved; no checkpoint was saved "
                               "before it)", (long long)tr->step);
    if (st != VT_OK)
        return vt_fail_context(st, "checkpoint at step %lld (not saved; the previous checkpoint "
                               "is intact: step %lld, which --resume %s continues from)",
                               (long long)tr->step, (long long)tr->saved_step, tr->dir);
    return VT_OK;
}

/* The metrics record of the pair just written: its bytes and the seconds it took. */
static vt_status log_checkpoint(trainer *tr, double seconds) {
    vt_ckpt_pair p;
    vt_ckpt_pair_of(tr->dir, tr->step, &p);
    struct stat a, b;
    long long bytes = stat(p.weights, &a) == 0 && stat(p.state, &b) == 0 ? (long long)(a.st_size + b.st_size) : -1;
    return vt_run_log_checkpoint(&tr->log, tr->step, bytes, seconds, wall(tr));
}

/* Every rank checks that the ranks still hold the same weights; rank 0 writes the pair. */
static vt_status save_state(trainer *tr) {
    if (tr->step == tr->saved_step) return VT_OK; /* this step's pair is already current */
    double t0 = now_s();
    vt_status st = vt_dist_check_same("the model parameters (the ranks diverged)", tr->model.params,
                                      (size_t)tr->model.n_params * sizeof(float));
    if (st == VT_OK) st = vt_dist_agree(tr->root ? save_state_files(tr) : VT_OK);
    if (st == VT_OK) tr->saved_step = tr->step;
    tr->t_ckpt = now_s();
    if (st == VT_OK) st = vt_dist_agree(tr->root ? log_checkpoint(tr, tr->t_ckpt - t0) : VT_OK);
    return st;
}

/* Restore model, moments, step, RNG and best accuracy from the run directory's current
 * checkpoint pair. */
static vt_status load_state(trainer *tr) {
    vt_ckpt_pair p;
    vt_status st = vt_ckpt_current(tr->dir, &p);
    if (st != VT_OK) return vt_fail_context(st, "cannot resume");
    if ((st = vt_vit_load(&tr->model, p.weights)) != VT_OK) return st;
    vt_train_state s;
    if ((st = vt_train_state_read(p.state, tr->opt.n, tr->opt.m, tr->opt.v, &s)) != VT_OK) return st;
    const char *path = p.state;
    if (s.epoch != s.step / tr->spe || s.batch != (s.step % tr->spe) * tr->accum) {
        st = vt_fail(VT_ERR_USAGE, "%s: saved at step %lld = epoch %lld, micro-batch %lld, but this "
                     "config has %lld optimizer steps per epoch of %d micro-batches (did "
                     "train.batch_size, train.accum_steps or the dataset change?)", path,
                     (long long)s.step, (long long)s.epoch, (long long)s.batch, (long long)tr->spe,
                     tr->accum);
        goto out;
    }
    if (p.step >= 0 && s.step != p.step) {
        st = vt_fail(VT_ERR_RUNTIME, "%s: records step %lld, but its name says step %lld (a file "
                     "renamed by hand?)", path, (long long)s.step, (long long)p.step);
        goto out;
    }
    uint64_t have = vt_train_params_hash(tr->model.params, tr->model.n_params);
    if (s.params_hash != have) {
        st = vt_fail(VT_ERR_RUNTIME, "%s was written for other weights than %s holds "
                     "(params_hash %016llx, the weights hash to %016llx): the two files were not "
                     "written by one save (two processes writing this run directory at once, or "
                     "a file replaced or copied from elsewhere)", path, p.weights,
                     (unsigned long long)s.params_hash, (unsigned long long)have);
        goto out;
    }
    memcpy(tr->drop_rng.s, s.rng, sizeof s.rng);
    tr->best_top1 = s.best_top1;
    tr->best_step = s.best_step;
    tr->ep = s.epoch_stats;
    tr->eval_pending = s.eval_pending;
    tr->wall_offset = s.wall_s;
    tr->opt.t = s.optim_t;
    tr->step = s.step;
    tr->saved_step = s.step;
    /* A kill after the commit point of a save left it unfinished: rank 0 finishes it (the
     * other ranks only read the run directory). */
    if (p.step >= 0 && tr->root) st = vt_ckpt_tidy(tr->dir, &p, tr->cfg->train.keep_checkpoints);
out:
    free(s.config);
    return st;
}

static void fmt_duration(double s, char *buf, size_t len) {
    long t = s < 0 ? 0 : (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60) snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, len, "%lds", t);
}

static void show_progress(trainer *tr, float loss, double lr, double img_s, double sec_per_step,
                          int force_plain) {
    char eta[32];
    fmt_duration(sec_per_step * (double)(tr->T - tr->step), eta, sizeof eta);
    int64_t ep = step_epoch(tr, tr->step - 1) + 1;
    int64_t n_ep = (tr->T + tr->spe - 1) / tr->spe;
    char line[256];
    snprintf(line, sizeof line, "epoch %lld/%lld step %lld/%lld loss %.4f lr %.3e %.0f img/s ETA %s",
             (long long)ep, (long long)n_ep, (long long)tr->step, (long long)tr->T, loss, lr, img_s,
             eta);
    if (tr->live && !force_plain) {
        fprintf(stderr, "\r%s\033[K", line);
        tr->line_open = 1;
    } else {
        end_live_line(tr);
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

/* Evaluate with ev; rank 0 prints and logs the result (a failure to log stops every rank).
 * A stop request ends it early (ev->stopped, eval.h): nothing is printed or logged. */
static vt_status evaluate(trainer *tr, vt_evaluator *ev, vt_eval_result *r) {
    ev->stop_signal = vt_stop_signal;
    vt_status st = vt_eval_run(ev, &tr->model, NULL, r);
    if (st != VT_OK || ev->stopped) return st;
    int64_t ep = tr->step > 0 ? step_epoch(tr, tr->step - 1) + 1 : 0;
    if (tr->root) {
        end_live_line(tr);
        fprintf(stderr, "eval  epoch %lld step %lld: top-1 %.2f%% top-5 %.2f%% loss %.4f (%lld images, "
                "%dpx)\n", (long long)ep, (long long)tr->step, r->top1, r->top5, r->loss, (long long)r->n,
                r->img_size);
        st = vt_run_log_eval(&tr->log, tr->step, ep, r, wall(tr));
    }
    return vt_dist_agree(st);
}

/* Evaluate at the training resolution, update best.safetensors. */
static vt_status evaluate_main(trainer *tr, vt_eval_result *r) {
    vt_status st = evaluate(tr, &tr->ev, r);
    if (st != VT_OK || tr->ev.stopped) return st;
    tr->last_eval_step = tr->step;
    if (r->top1 > tr->best_top1) {
        tr->best_top1 = r->top1;
        tr->best_step = tr->step;
        char *cfg_json = tr->root ? vt_config_to_json(tr->cfg) : NULL;
        st = vt_dist_agree(tr->root ? vt_vit_save(&tr->model, tr->best_path, cfg_json) : VT_OK);
        free(cfg_json);
    }
    return st;
}

static vt_status nonfinite_stop(trainer *tr, const char *what, double value) {
    char hint[VT_STR + 64];
    if (file_exists(tr->last_path)) snprintf(hint, sizeof hint, "last good checkpoint: %s", tr->last_path);
    else snprintf(hint, sizeof hint, "no checkpoint was written yet");
    end_live_line(tr);
    /* the loss and the gradient norm are the global ones: every rank stops here */
    return vt_dist_everywhere(vt_fail(VT_ERR_RUNTIME, "%s is %s at step %lld (epoch %lld); %s (lower "
                                      "optim.lr or set optim.clip_grad)", what,
                                      isnan(value) ? "NaN" : "Inf", (long long)(tr->step + 1),
                                      (long long)step_epoch(tr, tr->step) + 1, hint));
}

/* The GEMM buffers of a step of this rank's batch (ops/par.h vt_gemm_reserve): the K
 * split's partial C of the largest weight gradient, and the shared packing of the
 * largest op(B) cut over rows: a weight, or a weight gradient's input activations (B N
 * rows of at most max(D, Dh) columns: the fused ops' scratch size). */
static vt_status reserve_gemm(const trainer *tr) {
    double arena, scratch;
    vt_vit_batch_memory(&tr->model, tr->cfg->model.img_size, tr->local_bs, 0.0, &arena, &scratch);
    size_t param = vt_vit_largest_param(&tr->model);
    return vt_gemm_reserve(param, scratch > (double)param ? (size_t)scratch : param);
}

/* The memory a training step of this rank's batch needs, allocated before the first step
 * (the arena, vit.h vt_vit_activation_floats, the grad region, the tape scratch and the
 * GEMM buffers): a batch too large for this machine is an error naming it here, not an
 * abort inside the first forward. */
static vt_status reserve_step_memory(trainer *tr) {
    const vt_vit *m = &tr->model;
    const int S = tr->cfg->model.img_size;
    double region_f, arena, scratch;
    double arena_f = vt_vit_activation_floats(m, S, tr->cfg->train.precision == VT_PRECISION_BF16, &region_f);
    vt_vit_batch_memory(m, S, tr->local_bs, arena_f, &arena, &scratch);
    double region = (double)vt_vit_grad_region_bytes(m, tr->local_bs, S, 1);
    double total = arena + region + scratch * sizeof(float);
    vt_status st = total < 0.5 * (double)SIZE_MAX ? vt_arena_reserve(&tr->arena, (size_t)arena) : VT_ERR_RUNTIME;
    if (st == VT_OK) st = vt_tape_reserve(&tr->tape, (size_t)region, (size_t)scratch);
    if (st == VT_OK) return reserve_gemm(tr); /* its error names the GEMM buffers */
    char per_rank[64] = "";
    if (tr->ranks > 1) snprintf(per_rank, sizeof per_rank, " (%d per rank)", tr->local_bs);
    return vt_fail(VT_ERR_RUNTIME, "out of memory: a training step of train.batch_size %d images%s at "
                   "%dpx needs %.2f GiB (activations %.2f, gradient region %.2f, scratch %.2f GiB), "
                   "which this process cannot allocate; lower train.batch_size (raising "
                   "train.accum_steps as much keeps the global batch of %d images; `vitrain info "
                   "CONFIG` estimates the memory of a config)", tr->bs, per_rank, S, total / 1073741824.0,
                   arena / 1073741824.0, region / 1073741824.0, scratch * sizeof(float) / 1073741824.0,
                   tr->bs * tr->accum);
}

/* Rank 0 makes the run directory this run's own, touching nothing in it yet: the
 * directory (created when missing) and its lock, then, for a new run, a directory that
 * holds no other run (rundir.h), or, with start_over, one whose run take_run_dir moves
 * aside once everything else has been checked. */
static vt_status lock_run_dir(trainer *tr, const vt_train_opts *opts) {
    vt_status st = vt_rundir_lock_take(&tr->lock, tr->dir);
    if (st != VT_OK || opts->resume_dir) return st;
    if (vt_rundir_inspect(tr->dir, tr->old_run, sizeof tr->old_run) != VT_RUNDIR_RUN) return VT_OK;
    if (!opts->start_over)
        return vt_fail(VT_ERR_USAGE, "%s holds another run (%s); a new run there would overwrite "
                       "it. To continue it: vitrain --resume %s; to keep it and start elsewhere: "
                       "--run-dir OTHER_DIR; to move it aside to %s.old-N and start here: "
                       "--start-over", tr->dir, tr->old_run, tr->dir, tr->dir);
    tr->move_aside = 1;
    return VT_OK;
}

/* Everything that only reads or allocates, on every rank, before anything in the run
 * directory changes (vt_train_run agrees on the outcome across ranks, then runs
 * take_run_dir): the options against the ranks, the run directory's lock and what it
 * holds, the data, the model and its train.init weights (read before a --start-over moves
 * them aside with the old run), the optimizer and the memory of a step and of an
 * evaluation. A failure here leaves the run directory as it was (a new one: empty but for
 * its lock). */
static vt_status prepare(trainer *tr, const vt_train_opts *opts) {
    const vt_config *cfg = tr->cfg;
    vt_status st;
    tr->root = vt_dist_root();
    tr->ranks = vt_dist_size();
    if ((st = vt_dist_split_batch(cfg->train.batch_size, "train.batch_size", &tr->local_bs)) != VT_OK)
        return st;
    if (opts->resume_dir) {
        struct stat sb;
        if (stat(tr->dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return vt_fail(VT_ERR_USAGE, "--resume %s: no such run directory", tr->dir);
    } else if (tr->root && (st = vt_mkdir_p(tr->dir)) != VT_OK) {
        return st;
    }
    if (tr->root && (st = lock_run_dir(tr, opts)) != VT_OK) return st;
    snprintf(tr->last_path, sizeof tr->last_path, "%s/last.safetensors", tr->dir);
    snprintf(tr->best_path, sizeof tr->best_path, "%s/best.safetensors", tr->dir);

    tr->bs = cfg->train.batch_size;
    tr->accum = cfg->train.accum_steps; /* >= 1: the schema bounds it */
    const int S = cfg->model.img_size, C = cfg->model.in_chans, K = cfg->model.num_classes;
    vt_data_spec spec;
    vt_resolve_data_spec(cfg, &spec);
    spec.quiet = !vt_dist_root();
    if ((st = vt_loader_open(&tr->loader, &spec, VT_SPLIT_TRAIN, S)) != VT_OK) return st;
    /* The head trains on exactly the data's classes (evaluation may see fewer). */
    int dk = vt_loader_num_classes(tr->loader);
    if (dk != K)
        return vt_fail(VT_ERR_USAGE, "data split '%s' has %d classes but model.num_classes is %d: "
                       "leave model.num_classes out to take the data's count, or set it to %d",
                       cfg->data.train_split, dk, K, dk);
    int64_t nb = vt_loader_batches(tr->loader, tr->bs);
    tr->spe = nb / tr->accum;
    if (tr->spe <= 0)
        return vt_fail(VT_ERR_USAGE, "data split '%s' has %lld samples: fewer than one global batch "
                       "(train.batch_size %d x train.accum_steps %d)", cfg->data.train_split,
                       (long long)vt_loader_size(tr->loader), tr->bs, tr->accum);
    tr->T = cfg->train.steps > 0 ? cfg->train.steps : (int64_t)cfg->train.epochs * tr->spe;
    tr->W = cfg->optim.warmup_steps > 0 ? cfg->optim.warmup_steps
                                        : llround(cfg->optim.warmup_epochs * (double)tr->spe);
    if (tr->T < tr->W && tr->root) {
        char t_from[96], w_from[96];
        if (cfg->train.steps > 0) snprintf(t_from, sizeof t_from, "train.steps = %d", cfg->train.steps);
        else snprintf(t_from, sizeof t_from, "train.epochs = %d x %lld steps per epoch", cfg->train.epochs,
                      (long long)tr->spe);
        if (cfg->optim.warmup_steps > 0) snprintf(w_from, sizeof w_from, "optim.warmup_steps = %d",
                                                  cfg->optim.warmup_steps);
        else snprintf(w_from, sizeof w_from, "optim.warmup_epochs = %g x %lld steps per epoch",
                      cfg->optim.warmup_epochs, (long long)tr->spe);
        fprintf(stderr, "vitrain: warning: the run ends inside the warm-up: %lld optimizer steps (%s) but "
                "%lld warm-up steps (%s); the learning rate rises to %.3g, never reaching optim.lr = %g, "
                "and never decays\n", (long long)tr->T, t_from, (long long)tr->W, w_from,
                vt_lr_at(&cfg->optim, tr->T - 1, tr->T, tr->W), cfg->optim.lr);
    }
    /* this rank's local_bs of every global batch; the steps per epoch stay the same:
     * floor(floor(n / R) / (B / R)) = floor(n / B) */
    tr->train_n = vt_loader_size(tr->loader);
    vt_loader_set_shard(tr->loader, vt_dist_rank(), tr->ranks);

    size_t img_floats = (size_t)tr->local_bs * C * S * S;
    tr->images = vt_aligned_alloc(img_floats * sizeof(float));
    tr->labels = vt_aligned_alloc((size_t)tr->local_bs * sizeof(int));
    tr->soft = vt_aligned_alloc((size_t)tr->local_bs * K * sizeof(float));
    if (!tr->images || !tr->labels || !tr->soft)
        return vt_fail(VT_ERR_RUNTIME, "out of memory: training batch of %d images at %dx%d", tr->bs,
                       S, S);

    if ((st = vt_eval_open(&tr->ev, cfg, S)) != VT_OK) return st;
    tr->ev_ok = 1;
    vt_model_spec ms;
    if ((st = vt_vit_init(&tr->model, vt_resolve_model_spec(cfg, &ms), (uint64_t)cfg->train.seed)) != VT_OK)
        return st;
    tr->model_ok = 1;
    if (cfg->train.init[0] && !opts->resume_dir) {
        vt_weights_opts wo = {1, cfg->train.init_allow_unexpected};
        char moved[VT_STR + 64];
        if ((st = vt_weights_load(&tr->model, cfg->train.init, &wo, NULL, stderr)) != VT_OK &&
            vt_rundir_moved_copy(tr->dir, cfg->train.init, moved, sizeof moved))
            return vt_fail(st, "train.init %s does not exist: an earlier --start-over in the run directory %s "
                           "moved it, with the run it belonged to, to %s (the run started then had read it "
                           "before the move); to start this run again from the same weights, set train.init=%s",
                           cfg->train.init, tr->dir, moved, moved);
        if (st != VT_OK) return vt_fail_context(st, "train.init");
    }
    if ((st = vt_optim_init(&tr->opt, &cfg->optim, tr->model.n_params)) != VT_OK) return st;
    tr->opt_ok = 1;
    vt_rng_seed(&tr->drop_rng, vt_rng_derive((uint64_t)cfg->train.seed, 0xd50u, 0));
    tr->best_top1 = -1.0;
    tr->best_step = -1;
    tr->last_eval_step = -1;
    tr->saved_step = -1;

    vt_arena_init(&tr->arena, (size_t)1 << 20);
    vt_tape_init(&tr->tape, &tr->arena);
    tr->arena_ok = 1;
    tr->tape.grad_enabled = 1;
    tr->tape.training = 1;
    tr->tape.rng = &tr->drop_rng;
    if ((st = reserve_step_memory(tr)) != VT_OK) return st;
    if ((st = vt_eval_reserve(&tr->ev, &tr->model)) != VT_OK) return st;
    if (cfg->train.precision == VT_PRECISION_BF16) {
        tr->tape.bf16 = 1;
        if ((st = vt_precision_select(cfg->train.precision)) != VT_OK) return st;
    }
    int tty = isatty(fileno(stderr));
    tr->live = tr->root && (cfg->runtime.progress == VT_PROGRESS_ALWAYS ||
                            (cfg->runtime.progress == VT_PROGRESS_AUTO && tty));
    return VT_OK;
}

/* Once every rank prepared: rank 0 moves an old run aside (start_over) and writes
 * config.json, a resume reads the pair, rank 0 opens the logs, and under bf16 the
 * weights (initial or resumed) get their copies. */
static vt_status take_run_dir(trainer *tr, const vt_train_opts *opts) {
    const vt_config *cfg = tr->cfg;
    vt_status st;
    if (tr->root && tr->move_aside) {
        char moved[VT_STR + 32];
        if ((st = vt_rundir_move_aside(tr->dir, moved, sizeof moved)) != VT_OK) return st;
        vt_rundir_lock old = tr->lock;
        st = vt_rundir_lock_take(&tr->lock, tr->dir);
        vt_rundir_lock_release(&old);
        if (st != VT_OK) return st;
        fprintf(stderr, "vitrain: --start-over: moved the run in %s (%s) to %s\n", tr->dir, tr->old_run,
                moved);
    }
    /* config.json records the directory the run is in: `vitrain --resume DIR` reads it */
    char cpath[VT_STR + 32];
    snprintf(cpath, sizeof cpath, "%s/config.json", tr->dir);
    vt_config recorded = *cfg;
    snprintf(recorded.train.run_dir, sizeof recorded.train.run_dir, "%s", tr->dir);
    char *json = vt_config_to_json(&recorded);
    st = tr->root ? vt_durable_write_file(cpath, json, strlen(json)) : VT_OK;
    free(json);
    if (st != VT_OK) return st;
    if (opts->resume_dir) {
        if ((st = load_state(tr)) != VT_OK) return st;
        if (tr->root)
            fprintf(stderr, "vitrain: resuming %s at step %lld (epoch %lld, micro-batch %lld)\n",
                    tr->dir, (long long)tr->step, (long long)step_epoch(tr, tr->step) + 1,
                    (long long)step_batch(tr, tr->step));
    }
    if (tr->root) {
        /* the evaluations a resume makes again: a stop cut them short, or they are the
         * final ones of a run whose training had finished */
        if (opts->resume_dir && (tr->eval_pending || tr->step >= tr->T) &&
            (st = vt_run_log_drop_evals(tr->dir, tr->step)) != VT_OK)
            return st;
        if ((st = vt_run_log_open(&tr->log, tr->dir, cfg->model.img_size, opts->resume_dir ? tr->step : -1)) != VT_OK)
            return st;
        tr->log_ok = 1;
    }
    /* after any resume load: copies of those weights */
    if (cfg->train.precision == VT_PRECISION_BF16 && (st = vt_bf16_weights_attach(&tr->model, &tr->w16)) != VT_OK)
        return st;
    return VT_OK;
}

/* With several ranks, after every rank's setup succeeded: the same start on every rank
 * (rank 0's initial weights broadcast; resumed state compared), each rank's sample keys
 * and the gradient exchange hooked into backward. */
static vt_status setup_ranks(trainer *tr, const vt_train_opts *opts) {
    vt_vit *m = &tr->model;
    vt_status st = VT_OK;
    if (opts->resume_dir) {
        st = vt_dist_check_same("the resumed weights (is the run directory on a file system "
                                "every rank reads?)", m->params, (size_t)m->n_params * sizeof(float));
        if (st == VT_OK && tr->opt.m)
            st = vt_dist_check_same("the resumed optimizer moments", tr->opt.m,
                                    (size_t)tr->opt.n * sizeof(float));
    } else {
        vt_dist_bcast(m->params, (size_t)m->n_params * sizeof(float));
    }
    tr->tape.sample0 = vt_dist_rank();
    tr->tape.sample_stride = tr->ranks;
    tr->dg = vt_dist_grads_new(m->grads, m->n_params, 0);
    if (tr->dg) {
        tr->tape.hook = vt_dist_grads_ready;
        tr->tape.hook_ctx = tr->dg;
    }
    return st;
}

static void teardown(trainer *tr) {
    end_live_line(tr);
    if (tr->log_ok) vt_run_log_close(&tr->log);
    if (tr->arena_ok) { vt_tape_free(&tr->tape); vt_arena_free(&tr->arena); }
    if (tr->opt_ok) vt_optim_free(&tr->opt);
    if (tr->w16) vt_bf16_weights_detach(&tr->model, tr->w16);
    if (tr->model_ok) vt_vit_free(&tr->model);
    if (tr->ev_ok) vt_eval_close(&tr->ev);
    if (tr->loader) vt_loader_close(tr->loader);
    vt_dist_grads_free(tr->dg);
    free(tr->images);
    free(tr->labels);
    free(tr->soft);
}

/* Labels of a hard-label batch within the model's classes. */
static vt_status check_labels(const trainer *tr, int count) {
    for (int i = 0; i < count; i++)
        if (tr->labels[i] < 0 || tr->labels[i] >= tr->model.num_classes)
            return vt_fail(VT_ERR_RUNTIME, "training sample with label %d: expected 0..%d "
                           "(model.num_classes %d)", tr->labels[i], tr->model.num_classes - 1,
                           tr->model.num_classes);
    return VT_OK;
}

/* Samples of a hard-label batch whose largest logit (the first, on ties) is their label. */
static int64_t count_correct(const float *logits, const int *labels, int count, int K) {
    int64_t correct = 0;
    for (int i = 0; i < count; i++) {
        const float *row = logits + (size_t)i * K;
        int best = 0;
        for (int k = 1; k < K; k++)
            if (row[k] > row[best]) best = k;
        correct += best == labels[i];
    }
    return correct;
}

/* One optimizer step: accum micro-batches, averaged gradients, clip, update. With R
 * ranks each micro-batch is this rank's local_bs samples; the last micro-batch's backward
 * sums the gradients over the ranks (dist.h buckets), so the mean over the global batch
 * is the sum / (accum R), and every rank steps identically. *correct and *counted: the
 * step's training top-1 over its hard-labelled samples (all ranks). */
static vt_status train_step(trainer *tr, float *loss_out, double *gn_out, double lr,
                            int64_t *correct, int64_t *counted) {
    const vt_config *cfg = tr->cfg;
    const int S = cfg->model.img_size, C = cfg->model.in_chans;
    vt_vit *m = &tr->model;
    vt_vit_zero_grad(m);
    double sums[3] = {0.0, 0.0, 0.0}; /* loss, correct, counted */
    for (int a = 0; a < tr->accum; a++) {
        int count = 0, soft_used = 0;
        vt_status st = vt_loader_next(tr->loader, tr->images, tr->labels, tr->soft, &soft_used, &count);
        if (st == VT_OK && !soft_used) st = check_labels(tr, count);
        if ((st = vt_dist_agree(st)) != VT_OK) return st;
        VT_ASSERT(count == tr->local_bs, "train loader returned %d samples, expected %d (epoch %lld)",
                  count, tr->local_bs, (long long)step_epoch(tr, tr->step) + 1);
        vt_arena_reset(&tr->arena);
        vt_tape_clear(&tr->tape);
        int64_t shape[4] = {count, C, S, S};
        vt_tensor *x = vt_tensor_wrap(&tr->arena, tr->images, 4, shape);
        vt_tensor *logits = vt_vit_forward(m, &tr->tape, x);
        vt_tensor *loss = soft_used
            ? vt_op_cross_entropy(&tr->tape, logits, NULL, tr->soft, 0.0f)
            : vt_op_cross_entropy(&tr->tape, logits, tr->labels, NULL,
                                  (float)cfg->train.label_smoothing);
        float lv = loss->data[0];
        if (!soft_used) {
            sums[1] += (double)count_correct(logits->data, tr->labels, count, m->num_classes);
            sums[2] += count;
        }
        if (tr->dg && a == tr->accum - 1) vt_dist_grads_begin(tr->dg);
        vt_tape_backward(&tr->tape, loss);
        if (tr->dg && a == tr->accum - 1) vt_dist_grads_finish(tr->dg);
        sums[0] += lv;
    }
    /* the loss and its check after the exchange: every rank decides alike */
    vt_dist_sum_f64(sums, 3);
    double loss_sum = sums[0] / tr->ranks;
    if (!isfinite(loss_sum)) return nonfinite_stop(tr, "loss", loss_sum);
    int div = tr->accum * tr->ranks;
    if (div > 1) vt_k.scale(m->grads, 1.0f / (float)div, (size_t)m->n_params);
    double gn = vt_clip_grad_norm(m, cfg->optim.clip_grad);
    if (!isfinite(gn)) return nonfinite_stop(tr, "gradient norm", gn);
    vt_optim_step(&tr->opt, m, (float)lr);
    *loss_out = (float)(loss_sum / tr->accum);
    *gn_out = gn;
    *correct = (int64_t)sums[1];
    *counted = (int64_t)sums[2];
    return VT_OK;
}

/* The record of the epoch the last step ended (rank 0 writes; a failure stops every
 * rank), then a fresh epoch's sums. */
static vt_status log_epoch(trainer *tr, double lr) {
    vt_status st = VT_OK;
    if (tr->root)
        st = vt_run_log_epoch(&tr->log, tr->step, step_epoch(tr, tr->step - 1) + 1, &tr->ep, lr, wall(tr));
    memset(&tr->ep, 0, sizeof tr->ep);
    return vt_dist_agree(st);
}

/* What the ranks agree on at a step boundary, in one small reduction: the stop signal
 * any rank received (0: none) and whether train.ckpt_every_minutes have passed since the
 * newest pair by rank 0's clock (the ranks' clocks may disagree). */
static void step_boundary(trainer *tr, int *stop_signal, int *timed_ckpt) {
    double minutes = tr->cfg->train.ckpt_every_minutes;
    int v[2] = {vt_stop_signal(), tr->root && minutes > 0 && now_s() - tr->t_ckpt >= 60.0 * minutes};
    vt_dist_max_int(v, 2);
    *stop_signal = v[0];
    *timed_ckpt = v[1];
}

/* What follows optimizer step tr->step before the last: the evaluation when due, then the
 * epoch record at an epoch's end. A stop request during the evaluation leaves both to do
 * (tr->eval_pending): the pair the stop writes records that, and a resume runs them
 * before its first step. */
static vt_status step_tail(trainer *tr, vt_eval_result *r, vt_train_result *res) {
    const vt_config *cfg = tr->cfg;
    vt_status st;
    int epoch_end = tr->step % tr->spe == 0;
    int64_t ep_done = tr->step / tr->spe;
    int do_eval = (cfg->train.eval_every_steps > 0 && tr->step % cfg->train.eval_every_steps == 0) ||
                  (epoch_end && cfg->train.eval_every > 0 && ep_done % cfg->train.eval_every == 0);
    tr->eval_pending = 0;
    if (do_eval) {
        if ((st = evaluate_main(tr, r)) != VT_OK) return st;
        if (tr->ev.stopped) {
            tr->eval_pending = 1;
            return VT_OK;
        }
        res->final = *r;
    }
    return epoch_end ? log_epoch(tr, vt_lr_at(&cfg->optim, tr->step - 1, tr->T, tr->W)) : VT_OK;
}

/* The end of a run stopped before its last step (stop_after, a signal), or by a signal
 * during its final evaluations: the pair of this step (already written when training had
 * finished), and what main.c reports. */
static vt_status stop_run(trainer *tr, int stop_signal, vt_train_result *res) {
    vt_status st = save_state(tr);
    if (st != VT_OK) return st;
    end_live_line(tr);
    res->stopped = 1;
    res->stop_signal = stop_signal;
    res->eval_cut = tr->eval_pending || tr->step >= tr->T;
    return VT_OK;
}

static vt_status run_loop(trainer *tr, const vt_train_opts *opts, vt_train_result *res) {
    const vt_config *cfg = tr->cfg;
    vt_status st;
    const int64_t gbatch = (int64_t)tr->bs * tr->accum;
    const int log_every = cfg->train.log_every > 0 ? cfg->train.log_every : 1;
    const int64_t stop = opts->stop_after > 0 && opts->stop_after < tr->T ? opts->stop_after : tr->T;
    int64_t cur_epoch = -1;
    const int64_t step0 = tr->step;
    double t_loop = now_s(), t_log = t_loop, t_draw = 0.0;
    int64_t log_from = tr->step;
    double comm_from = vt_dist_comm_seconds();
    vt_eval_result r;
    memset(&r, 0, sizeof r);
    memset(&res->final, 0, sizeof res->final);

    tr->t_ckpt = now_s();
    int stop_signal = 0;
    if (tr->eval_pending && tr->step < tr->T) { /* resumed after a stop cut this step's evaluation */
        if ((st = step_tail(tr, &r, res)) != VT_OK) return st;
        if (tr->eval_pending) return stop_run(tr, tr->ev.stopped, res);
        t_loop = t_log = now_s(); /* the steps' figures leave that evaluation out */
    }
    for (;;) {
        int timed_ckpt = 0;
        step_boundary(tr, &stop_signal, &timed_ckpt);
        if (stop_signal || tr->step >= stop) break;
        if (timed_ckpt && (st = save_state(tr)) != VT_OK) return st;
        double t_step = now_s();
        int64_t s = tr->step;
        int64_t ep = step_epoch(tr, s);
        if (ep != cur_epoch) {
            vt_loader_seek(tr->loader, (int)ep, step_batch(tr, s), tr->local_bs);
            cur_epoch = ep;
        }
        double lr = vt_lr_at(&cfg->optim, s, tr->T, tr->W);
        vt_vit_performer_step(&tr->model, s); /* Performer feature redraw (every redraw_every) */
        float loss = 0.0f;
        double gn = 0.0;
        int64_t correct = 0, counted = 0;
        if ((st = train_step(tr, &loss, &gn, lr, &correct, &counted)) != VT_OK) return st;
        tr->step++;

        double t = now_s();
        tr->ep.loss_sum += loss;
        tr->ep.steps++;
        tr->ep.correct += correct;
        tr->ep.counted += counted;
        tr->ep.seconds += t - t_step;
        tr->ep.images += gbatch;
        tr->step_seconds += t - t_step;
        tr->step_images += gbatch;
        double sec_per_step = (t - t_loop) / (double)(tr->step - step0);
        if (tr->step % log_every == 0 || tr->step == stop) { /* rank 0 logs; every rank agrees */
            vt_log_train rec = {
                .step = tr->step, .epoch = ep + 1, .loss = loss, .lr = lr, .grad_norm = gn,
                .img_per_s = (double)(gbatch * (tr->step - log_from)) / fmax(t - t_log, 1e-9),
                .wall_s = wall(tr), .top1 = counted == gbatch ? 100.0 * (double)correct / (double)gbatch : NAN,
                .ranks = tr->ranks};
            if (tr->ranks > 1) { /* per step: rank 0's time in MPI calls, not overlapped */
                double c = vt_dist_comm_seconds();
                rec.comm_s = (c - comm_from) / (double)(tr->step - log_from);
                comm_from = c;
            }
            if ((st = vt_dist_agree(tr->root ? vt_run_log_train(&tr->log, &rec) : VT_OK)) != VT_OK) return st;
            if (tr->root && !tr->live) show_progress(tr, loss, lr, rec.img_per_s, sec_per_step, 1);
            t_log = t;
            log_from = tr->step;
        }
        if (tr->live && (t - t_draw >= 0.1 || tr->step == stop)) { /* redraw at most 10 Hz */
            show_progress(tr, loss, lr, (double)gbatch / fmax(sec_per_step, 1e-9), sec_per_step, 0);
            t_draw = t;
        }

        if (tr->step < tr->T) {
            if ((st = step_tail(tr, &r, res)) != VT_OK) return st;
            if (tr->eval_pending) {
                stop_signal = tr->ev.stopped;
                break;
            }
        }
        int epoch_end = tr->step % tr->spe == 0;
        int64_t ep_done = tr->step / tr->spe;
        int ckpt_due = (epoch_end && cfg->train.ckpt_every > 0 && ep_done % cfg->train.ckpt_every == 0) ||
                       (cfg->train.ckpt_every_steps > 0 && tr->step % cfg->train.ckpt_every_steps == 0);
        if (ckpt_due && tr->step < stop)
            if ((st = save_state(tr)) != VT_OK) return st;
    }

    if (tr->step < tr->T || stop_signal) /* stopped early: --stop-after or a signal */
        return stop_run(tr, stop_signal, res);
    /* The last pair before the final evaluations: a stop request during them ends them and
     * the run as a stopped one (exit 75), a kill loses no training, and a resume of this
     * pair makes them all again (run_log.h drops the records of those that were made). */
    if ((st = save_state(tr)) != VT_OK) return st;
    if (tr->last_eval_step != tr->step) {
        if ((st = evaluate_main(tr, &r)) != VT_OK) return st;
        if (tr->ev.stopped) return stop_run(tr, tr->ev.stopped, res);
        res->final = r;
    }
    if (tr->ep.steps > 0 && (st = log_epoch(tr, vt_lr_at(&cfg->optim, tr->step - 1, tr->T, tr->W))) != VT_OK)
        return st;
    for (int i = 0; i < cfg->eval.n_resolutions; i++) {
        int S = cfg->eval.resolutions[i];
        if (S == cfg->model.img_size) continue;
        vt_evaluator ev;
        st = vt_eval_open(&ev, cfg, S);
        if ((st = vt_dist_agree(st == VT_OK ? vt_eval_reserve(&ev, &tr->model) : st)) != VT_OK) {
            vt_eval_close(&ev);
            return st;
        }
        vt_eval_result rr;
        st = evaluate(tr, &ev, &rr);
        int stopped = ev.stopped;
        vt_eval_close(&ev);
        if (st != VT_OK) return st;
        if (stopped) return stop_run(tr, stopped, res);
    }
    return VT_OK;
}

/* The start summary (train_report.h), and with opts->verbose the resolved config. */
static void print_start(trainer *tr, const vt_train_opts *opts) {
    end_live_line(tr);
    if (opts->verbose) {
        char *json = vt_config_to_json(tr->cfg);
        fprintf(stderr, "vitrain: resolved config:\n%s\n", json);
        free(json);
    }
    vt_report_start r = {
        .cfg = tr->cfg, .run_dir = tr->dir, .params = tr->model.n_params,
        .forward_flops = vt_vit_flops(&tr->model, tr->cfg->model.img_size), .train_n = tr->train_n,
        .val_n = tr->ev.n, .classes = vt_loader_num_classes(tr->loader), .steps_per_epoch = tr->spe,
        .total_steps = tr->T, .resume_step = opts->resume_dir ? tr->step : -1,
        .threads = omp_get_max_threads(), .ranks = tr->ranks, .kernels = vt_k.name,
        .gemm_context = vt_gemm_ctx.name};
    vt_report_print_start(stderr, &r);
}

/* The end summary of a run that reached its last step. */
static void print_end(trainer *tr, const vt_train_result *res) {
    end_live_line(tr);
    vt_report_end r = {
        .final = res->final, .final_step = tr->last_eval_step,
        .final_epoch = step_epoch(tr, tr->last_eval_step - 1) + 1, .best_top1 = tr->best_top1,
        .best_step = tr->best_step, .best_epoch = step_epoch(tr, tr->best_step - 1) + 1,
        .wall_s = res->wall_s, .img_per_s = tr->step_images / fmax(tr->step_seconds, 1e-9),
        .peak_mib = vt_report_peak_mib(), .last_path = tr->last_path, .best_path = tr->best_path};
    vt_report_print_end(stderr, &r);
}

/* resume_or_start: whether the run directory holds a run to continue (*resume = 1: a
 * checkpoint, or a `latest` that does not resolve, which the resume then reports rather
 * than silently restarting) or nothing to continue (0), as rank 0 sees it (rundir.h). */
static void find_resume_point(const char *dir, int *resume) {
    *resume = vt_dist_root() && vt_rundir_inspect(dir, NULL, 0) == VT_RUNDIR_RUN;
    vt_dist_bcast(resume, sizeof *resume);
    if (!*resume && vt_dist_root())
        fprintf(stderr, "vitrain: %s holds no checkpoint: starting the run\n", dir);
}

vt_status vt_train_run(const vt_config *cfg, const vt_train_opts *opts_in, vt_train_result *res) {
    memset(res, 0, sizeof *res);
    trainer tr;
    memset(&tr, 0, sizeof tr);
    tr.cfg = cfg;
    tr.lock.fd = -1;
    vt_train_opts o = *opts_in;
    const vt_train_opts *opts = &o;
    vt_train_run_dir(cfg, o.resume_dir ? o.resume_dir : o.run_dir, tr.dir, sizeof tr.dir);
    /* The config the checkpoints carry: without the run directory, which is where the
     * files are, not what they hold (config.json records it). */
    vt_config own = *cfg;
    own.train.run_dir[0] = '\0';
    tr.cfg = &own;
    snprintf(res->run_dir, sizeof res->run_dir, "%s", tr.dir);
    tr.t_start = now_s();
    vt_stop_install(vt_dist_root());
    vt_status st = VT_OK;
    if (o.resume_or_start && !o.resume_dir) {
        int resume = 0;
        find_resume_point(tr.dir, &resume);
        if (resume) { /* the command's config against the run's, as --resume compares them */
            o.resume_dir = tr.dir;
            st = vt_dist_agree(vt_dist_root() ? vt_resume_check(cfg, tr.dir) : VT_OK);
        }
    }
    if (st == VT_OK) st = vt_dist_agree(prepare(&tr, opts));
    if (st == VT_OK) st = vt_dist_agree(take_run_dir(&tr, opts));
    if (st == VT_OK) st = vt_blocking_for_run(tr.cfg, tr.dir, opts->resume_dir != NULL); /* before any step */
    if (st == VT_OK) st = vt_dist_agree(reserve_gemm(&tr)); /* for that blocking */
    if (st == VT_OK) st = setup_ranks(&tr, opts);
    if (st == VT_OK) {
        if (tr.root) print_start(&tr, opts);
        res->total_steps = tr.T;
        st = run_loop(&tr, opts, res);
    }
    res->steps = tr.step;
    res->best_top1 = tr.best_top1;
    res->wall_s = wall(&tr);
    if (st == VT_OK && !res->stopped && tr.root) print_end(&tr, res);
    teardown(&tr);
    vt_rundir_lock_release(&tr.lock); /* last: the run directory is complete */
    return st;
}
