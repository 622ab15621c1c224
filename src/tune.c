/* tune.c - the `vitrain tune` command (contract in tune.h). */
#include "tune.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "blocking.h"
#include "dist.h"
#include "gemm_cache.h"
#include "kernels.h"

vt_status vt_tune_command(const vt_config *cfg, int ranks) {
    if (vt_dist_size() > 1)
        return vt_fail(VT_ERR_USAGE, "vitrain tune runs as one process, not under mpirun: the other ranks' "
                       "waiting would skew its timings (every rank of a later run reads the cache rank 0 finds)");
    if (cfg->train.batch_size % ranks)
        return vt_fail(VT_ERR_USAGE, "vitrain tune --ranks %d: train.batch_size %d is not a multiple of it", ranks,
                       cfg->train.batch_size);
    if (vt_k.isa < VT_ISA_AVX2)
        return vt_fail(VT_ERR_USAGE, "vitrain tune: the %s level has no blocked GEMM to tune", vt_k.name);
    char dir[4096];
    if (vt_gemm_cache_dir(dir, sizeof dir))
        return vt_fail(VT_ERR_USAGE, "vitrain tune: no cache directory to store the result in (set "
                       "XDG_CACHE_HOME or HOME)");
    const vt_gemm_context start = vt_gemm_ctx;
    const char *env = getenv("VT_GEMM_CONTEXT"), *path_env = getenv("VT_BF16_PATH");
    if (cfg->train.precision != VT_PRECISION_BF16 && path_env && *path_env)
        fprintf(stderr, "vitrain: warning: VT_BF16_PATH=%s is ignored: the config trains in fp32, so its float32 "
                "blocking is tuned (--set train.precision=bf16 tunes the blocking of that bf16 path)\n", path_env);
    const vt_tune_target target = vt_tune_target_of(cfg);
    vt_cpu_ident id;
    vt_cpu_ident_read(&id);
    const int threads = omp_get_max_threads();
    fprintf(stderr, "vitrain: tuning the GEMM blocking of %s (its %s products: the %s.* fields) on %s family %d "
            "model %d stepping %d, level %s, %d thread%s x %d rank%s, from %s%s\n",
            cfg->source[0] ? cfg->source : "the config", vt_tune_target_name(&target),
            vt_tune_blocking_name(&target), id.vendor, id.family, id.model, id.stepping, vt_k.name, threads,
            threads == 1 ? "" : "s", ranks, ranks == 1 ? "" : "s", start.name,
            env && *env ? " (VT_GEMM_CONTEXT)" : " (the table's entry for this CPU)");
    vt_blocking_tuning t;
    vt_status st = vt_blocking_tune(cfg, ranks, &start, &t);
    if (st != VT_OK) return st;
    if (!t.cache_path[0]) return vt_fail(VT_ERR_RUNTIME, "vitrain tune: %s", t.cache_warn);
    char figures[1024], items[1024];
    vt_blocking_tuning_text(&t, start.name, figures, sizeof figures);
    vt_gemm_context_format(&t.r.best, items, sizeof items);
    printf("tuned %s\nblocking %s\ncached in %s\n", figures, items, t.cache_path);
    printf("{\"tune\":\"gemm\",\"cpu\":\"%s/%d/%d/%d\",\"isa\":\"%s\",\"products\":\"%s\",\"blocking_tuned\":\"%s\","
           "\"threads\":%d,\"start\":\"%s\",\"seconds\":%.2f,"
           "\"timings\":%d,\"t_start\":%.5f,\"t_tuned\":%.5f,\"speedup\":%.4f,\"changes\":\"%s\",\"blocking\":\"%s\","
           "\"cache\":\"%s\"}\n", id.vendor, id.family, id.model, id.stepping, vt_k.name, vt_tune_target_name(&target),
           vt_tune_blocking_name(&target), threads, start.name,
           t.seconds, t.r.timed, t.r.t_start, t.r.t_best, t.r.t_best > 0 ? t.r.t_start / t.r.t_best : 1.0,
           t.r.changes, items, t.cache_path);
    return VT_OK;
}
