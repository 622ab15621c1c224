/* blocking.c - which GEMM blocking a run computes with (contract in blocking.h). */
#include "blocking.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dist.h"
#include "durable.h"
#include "gemm_cache.h"
#include "input_file.h"
#include "kernels.h"
#include "precision.h"

#define RECORD_MAGIC "vitrain-gemm-blocking 1"

static const char *const source_names[] = {"table", "cache", "tuned", "recorded", "env"};
enum { SRC_TABLE, SRC_CACHE, SRC_TUNED, SRC_RECORDED, SRC_ENV };

/* c with its name set to "<base>/<suffix>" (the table entry it started from). */
static void name_as(vt_gemm_context *c, const char *base, const char *suffix) {
    char b[sizeof c->name];
    snprintf(b, sizeof b, "%s", base);
    char *plus = strchr(b, '/');
    if (plus) *plus = '\0';
    snprintf(c->name, sizeof c->name, "%.60s/%s", b, suffix);
}

vt_status vt_blocking_tune(const vt_config *cfg, int ranks, const vt_gemm_context *start, vt_blocking_tuning *t) {
    memset(t, 0, sizeof *t);
    t->target = vt_tune_target_of(cfg);
    vt_tune_shape s[VT_TUNE_MAX_SHAPES];
    int n = vt_tune_shapes(cfg, ranks, s);
    double t0 = omp_get_wtime();
    vt_status st = vt_tune_run(start, &t->target, s, n, &t->r);
    if (st != VT_OK) return st;
    t->seconds = omp_get_wtime() - t0;
    name_as(&t->r.best, start->name, "tuned");
    char dir[4096], note[512];
    if (vt_gemm_cache_dir(dir, sizeof dir)) {
        snprintf(t->cache_warn, sizeof t->cache_warn, "not cached: neither XDG_CACHE_HOME nor HOME is set");
        return VT_OK;
    }
    vt_gemm_cache_key k;
    vt_gemm_cache_key_make(&k, &t->target, s, n, omp_get_max_threads());
    snprintf(note, sizeof note, "%s.* tuned from %s in %.1f s: %.4f s -> %.4f s on the %s products",
             vt_tune_blocking_name(&t->target), start->name, t->seconds, t->r.t_start, t->r.t_best,
             vt_tune_target_name(&t->target));
    if (vt_gemm_cache_store(dir, &k, &t->r.best, note, t->cache_path, sizeof t->cache_path) != VT_OK) {
        snprintf(t->cache_warn, sizeof t->cache_warn, "not cached: %s", vt_last_error());
        vt_clear_error();
        t->cache_path[0] = '\0';
    }
    return VT_OK;
}

void vt_blocking_tuning_text(const vt_blocking_tuning *t, const char *start_name, char *buf, size_t len) {
    const vt_tune_result *r = &t->r;
    snprintf(buf, len, "in %.1f s (%d timings of the %s.* fields): the step's %s products %.4f s with %s, %.4f s "
             "tuned (%.3fx); %s", t->seconds, r->timed, vt_tune_blocking_name(&t->target),
             vt_tune_target_name(&t->target), r->t_start, start_name, r->t_best,
             r->t_best > 0 ? r->t_start / r->t_best : 1.0,
             r->changed ? r->changes : "no change beat it by the noise margin");
}

/* The run record: the blocking, its name and source, and a bf16 run's product path
 * (bf16_path: a vt_bf16_path, -1 for none). */
static vt_status record_write(const char *path, const vt_gemm_context *c, int source, int bf16_path) {
    char items[1024], text[1400];
    VT_ASSERT(vt_gemm_context_format(c, items, sizeof items) == 0, "GEMM context fields too long");
    int n = snprintf(text, sizeof text, RECORD_MAGIC "\nsource %s\nname %s\nblocking %s\n", source_names[source],
                     c->name, items);
    if (bf16_path >= 0)
        n += snprintf(text + n, sizeof text - (size_t)n, "bf16_path %s\n", vt_bf16_path_name((vt_bf16_path)bf16_path));
    return vt_durable_write_file(path, text, (size_t)n);
}

/* Read the record at path into *c and *bf16_path (-1: none recorded): 1 read, 0 no such
 * file; errors name the file and say what reads it (needs: "a bit-exact resume", ...). */
static vt_status record_read(const char *path, const char *needs, vt_gemm_context *c, int *bf16_path,
                             int *found) {
    struct stat sb;
    *found = 0;
    *bf16_path = -1;
    if (stat(path, &sb) != 0 && errno == ENOENT) return VT_OK;
    char *text = NULL;
    size_t len = 0;
    vt_status st = vt_input_read(path, "GEMM blocking record", 8192, &text, &len);
    if (st != VT_OK) return st;
    char items[1024] = "", name[sizeof c->name] = "", why[256] = "";
    const char *b = strstr(text, "\nblocking "), *nm = strstr(text, "\nname ");
    int ok = strlen(text) == len && !strncmp(text, RECORD_MAGIC "\n", strlen(RECORD_MAGIC) + 1) && b && nm;
    if (ok) {
        size_t bl = strcspn(b + 10, "\n"), nl = strcspn(nm + 6, "\n");
        ok = bl < sizeof items && nl < sizeof name;
        if (ok) {
            memcpy(items, b + 10, bl);
            memcpy(name, nm + 6, nl);
        } else {
            snprintf(why, sizeof why, "a line is too long");
        }
    } else {
        snprintf(why, sizeof why, "expected the lines '" RECORD_MAGIC "', 'name ...' and 'blocking ...'");
    }
    if (ok && vt_gemm_blocking_parse(items, c, why, sizeof why)) ok = 0;
    const char *bp = strstr(text, "\nbf16_path ");
    if (ok && bp) {
        char name[16] = "";
        size_t pl = strcspn(bp + 11, "\n");
        if (pl < sizeof name) memcpy(name, bp + 11, pl);
        *bf16_path = vt_bf16_path_parse(name);
        if (*bf16_path < 0) {
            snprintf(why, sizeof why, "bf16_path '%.*s' is not a bf16 path (amx, dpbf16 or fma)", (int)(pl < 16 ? pl : 16),
                     bp + 11);
            ok = 0;
        }
    }
    free(text);
    if (!ok)
        return vt_fail(VT_ERR_USAGE, "%s: not a valid GEMM blocking record (%s); it holds the blocking this run "
                       "computed with, which %s needs: restore it, or set VT_GEMM_CONTEXT to compute with "
                       "another blocking (the sums then differ from the run's)", path, why, needs);
    snprintf(c->name, sizeof c->name, "%s", name);
    *found = 1;
    return VT_OK;
}

/* What the blocking is chosen for: a new run, a resumed one, or an evaluation of a
 * checkpoint (whose run directory's record, when there is one, it computes with). */
typedef enum { FOR_NEW_RUN, FOR_RESUME, FOR_EVAL } purpose;

/* Rank 0's choice (blocking.h), into *c, with the line that says why, and the bf16 path
 * the record names in *bf16_path (-1: none, or not read). cfg: a new run's config (NULL
 * otherwise); record: the run directory's record. */
static vt_status choose(const vt_config *cfg, const char *record, purpose p, vt_gemm_context *c, int *source,
                        int *bf16_path, char *line, size_t len) {
    const vt_gemm_context *table = vt_gemm_context_detect();
    const char *env = getenv("VT_GEMM_CONTEXT");
    *c = vt_gemm_ctx; /* the table's entry, with VT_GEMM_CONTEXT's changes (vt_kernels_init) */
    *bf16_path = -1;
    vt_gemm_context recorded;
    int found = 0;
    vt_status rst = p == FOR_NEW_RUN ? VT_OK
                                     : record_read(record, p == FOR_RESUME ? "a bit-exact resume"
                                                                           : "an evaluation that sums as the run's own did",
                                                   &recorded, bf16_path, &found);
    if (env && *env) { /* env's blocking; the record only for its bf16 path, when it reads */
        if (rst != VT_OK) vt_clear_error();
        *source = SRC_ENV;
        snprintf(line, len, "GEMM blocking %s from VT_GEMM_CONTEXT (it overrides the %s)", c->name,
                 p == FOR_RESUME ? "blocking the run recorded"
                 : p == FOR_EVAL ? "blocking the checkpoint's run recorded and the table"
                                 : "tuning cache and the table");
        return VT_OK;
    }
    if (p != FOR_NEW_RUN) {
        if (rst != VT_OK) return rst;
        if (found) *c = recorded;
        *source = found ? SRC_RECORDED : SRC_TABLE;
        if (found && p == FOR_RESUME)
            snprintf(line, len, "GEMM blocking %s, as the run recorded it (%s): the resumed run sums as it did",
                     c->name, record);
        else if (found)
            snprintf(line, len, "GEMM blocking %s, as the checkpoint's run recorded it (%s): the evaluation sums "
                     "as the run's own evaluations did", c->name, record);
        else if (p == FOR_RESUME)
            snprintf(line, len, "GEMM blocking %s, the table's entry for this CPU: the run directory records no "
                     "blocking (%s missing: a run of an older vitrain, which ran with the table's)", c->name,
                     record);
        else
            snprintf(line, len, "GEMM blocking %s, the table's entry for this CPU (no %s beside the checkpoint: "
                     "not in a run directory, or a run of an older vitrain)", c->name, VT_BLOCKING_RECORD);
        return VT_OK;
    }
    *source = SRC_TABLE;
    if (cfg->runtime.gemm_tune == VT_GEMM_TUNE_OFF) {
        snprintf(line, len, "GEMM blocking %s, the table's entry for this CPU (runtime.gemm_tune = off)", c->name);
        return VT_OK;
    }
    vt_tune_shape s[VT_TUNE_MAX_SHAPES];
    const int ranks = vt_dist_size(), n = vt_tune_shapes(cfg, ranks, s);
    const vt_tune_target target = vt_tune_target_of(cfg);
    char dir[4096], note[512] = "", why[4400] = "";
    const char *reason = NULL;
    if (vt_gemm_cache_dir(dir, sizeof dir) == 0) {
        vt_gemm_cache_key k;
        vt_gemm_cache_key_make(&k, &target, s, n, omp_get_max_threads());
        vt_gemm_context cached;
        vt_gemm_cache_found f = vt_gemm_cache_load(dir, &k, &cached, note, sizeof note, why, sizeof why);
        if (f == VT_GEMM_CACHE_HIT) {
            name_as(&cached, table->name, "cache");
            *c = cached;
            *source = SRC_CACHE;
            snprintf(line, len, "GEMM blocking %s from the tuning cache (%s/%s: %s)", c->name, dir, k.file, note);
            return VT_OK;
        }
        if (f == VT_GEMM_CACHE_IGNORED) fprintf(stderr, "vitrain: warning: ignoring a GEMM cache file: %s\n", why);
    } else {
        reason = "no cache directory (neither XDG_CACHE_HOME nor HOME is set)";
    }
    if (!reason && vt_k.isa < VT_ISA_AVX2) reason = "the scalar level has no blocking to tune";
    if (!reason && ranks > 1)
        reason = "under MPI no rank tunes (the others' waiting would skew the timings): `vitrain tune CONFIG "
                 "--ranks R --threads T`, run once as one process, fills the cache for R ranks of T threads";
    if (!reason && vt_tune_linear_flops(s, n) < VT_TUNE_MIN_FLOPS)
        reason = "the model's products are too small for the blocking to matter";
    if (reason) {
        snprintf(line, len, "GEMM blocking %s, the table's entry for this CPU (no tuning cached: %s)", c->name,
                 reason);
        return VT_OK;
    }
    fprintf(stderr, "vitrain: tuning the GEMM blocking for this CPU and model (once: the result is cached; "
            "runtime.gemm_tune = off skips it)\n");
    vt_blocking_tuning t;
    vt_status st = vt_blocking_tune(cfg, ranks, c, &t);
    if (st != VT_OK) return st;
    char figures[1024];
    vt_blocking_tuning_text(&t, c->name, figures, sizeof figures);
    *c = t.r.best;
    *source = SRC_TUNED;
    snprintf(line, len, "GEMM blocking %s, tuned now %s; %s%s", c->name, figures,
             t.cache_path[0] ? "cached in " : "", t.cache_path[0] ? t.cache_path : t.cache_warn);
    return VT_OK;
}

/* Rank 0 chooses for p (choose), logs why and, for a new run, writes the record (with
 * the bf16 path of a bf16 run); every rank then sets rank 0's blocking and, when the
 * process computes in bf16 (bf16), runs the path the record names (precision.h).
 * Collective under MPI. */
static vt_status set_rank0_choice(const vt_config *cfg, const char *record, purpose p, int bf16) {
    struct {
        char items[1024], name[96];
        int source, bf16_path;
    } chosen;
    memset(&chosen, 0, sizeof chosen);
    vt_status st = VT_OK;
    if (vt_dist_root()) {
        vt_gemm_context c;
        char line[6000];
        st = choose(cfg, record, p, &c, &chosen.source, &chosen.bf16_path, line, sizeof line);
        if (st == VT_OK) {
            VT_ASSERT(vt_gemm_context_format(&c, chosen.items, sizeof chosen.items) == 0, "GEMM context too long");
            snprintf(chosen.name, sizeof chosen.name, "%s", c.name);
            fprintf(stderr, "vitrain: %s\n", line);
            if (p == FOR_NEW_RUN) st = record_write(record, &c, chosen.source, bf16 ? vt_kernels_bf16_path() : -1);
        }
    }
    if ((st = vt_dist_agree(st)) != VT_OK) return st;
    vt_dist_bcast(&chosen, sizeof chosen);
    vt_gemm_context c;
    char why[256];
    VT_ASSERT(vt_gemm_blocking_parse(chosen.items, &c, why, sizeof why) == 0, "rank 0's GEMM blocking: %s", why);
    snprintf(c.name, sizeof c.name, "%s", chosen.name);
    vt_gemm_context_set(&c);
    return bf16 && p != FOR_NEW_RUN ? vt_precision_adopt_recorded(chosen.bf16_path, record) : VT_OK;
}

vt_status vt_blocking_for_run(const vt_config *cfg, const char *dir, int resume) {
    char record[4200];
    snprintf(record, sizeof record, "%s/" VT_BLOCKING_RECORD, dir);
    return set_rank0_choice(resume ? NULL : cfg, record, resume ? FOR_RESUME : FOR_NEW_RUN,
                            cfg->train.precision == VT_PRECISION_BF16);
}

vt_status vt_blocking_for_eval(const char *checkpoint, int bf16) {
    char record[4200];
    const char *slash = strrchr(checkpoint, '/');
    if (slash) snprintf(record, sizeof record, "%.*s/" VT_BLOCKING_RECORD, (int)(slash - checkpoint), checkpoint);
    else snprintf(record, sizeof record, VT_BLOCKING_RECORD);
    return set_rank0_choice(NULL, record, FOR_EVAL, bf16);
}
