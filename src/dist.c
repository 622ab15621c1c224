/* dist.c - MPI data parallelism: launch detection, start-up agreement, error agreement,
 * gradient buckets and small collectives (contract in dist.h). The only MPI user. */
#include "dist.h"

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "version.h"

/* Bucket size: PyTorch DDP's default bucket_cap_mb, large enough that a bucket runs at
 * the link's bandwidth, small enough that the first buckets start while most of backward
 * is left; but at least VT_DIST_MIN_BUCKETS buckets (down to 1 MiB, below which the
 * per-message latency dominates), or a model under 25 MiB (ViT-Ti: 23 MB) would send
 * everything after backward. */
#define VT_DIST_BUCKET_BYTES ((int64_t)25 << 20)
#define VT_DIST_MIN_BUCKET_BYTES ((int64_t)1 << 20)
#define VT_DIST_MIN_BUCKETS 8
#define MSG_BYTES 2048

/* This build's identity (scripts/version.sh), compared across the ranks at start-up. */
static const char build_id[] = VT_SOURCE_HASH;

static struct {
    int on;             /* MPI initialised */
    int rank, size;
    int started;        /* vt_dist_start ran */
    int agreed;         /* the error being returned is known to every rank */
    FILE *buffer;       /* messages of a non-root rank before the start-up agreement */
    char *buffer_text;
    size_t buffer_len;
    double comm_s;
    char who[32];
} D = {.size = 1};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int launched(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return 1;
    }
    return 0;
}

void vt_dist_init(int *argc, char ***argv) {
    if (D.on || !launched()) return;
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    VT_ASSERT(provided >= MPI_THREAD_FUNNELED, "MPI provides thread level %d, vitrain needs "
              "MPI_THREAD_FUNNELED (%d)", provided, MPI_THREAD_FUNNELED);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_rank(MPI_COMM_WORLD, &D.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &D.size);
    D.on = 1;
    if (D.rank > 0) {
        D.buffer = open_memstream(&D.buffer_text, &D.buffer_len);
        /* stdout carries results (eval JSON lines, info): rank 0's */
        if (!freopen("/dev/null", "w", stdout)) fclose(stdout);
    }
}

int vt_dist_rank(void) { return D.rank; }
int vt_dist_size(void) { return D.size; }

FILE *vt_dist_msg(void) { return D.buffer ? D.buffer : stderr; }

/* Distributed collectives run only with more than one rank: one rank under mpirun
 * takes exactly the single-process path. */
static int multi(void) { return D.on && D.size > 1; }

static uint64_t hash_bytes(const void *data, size_t bytes) {
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ULL;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) { /* FNV-1a over 64-bit words: fast on 100s of MB */
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ULL;
    }
    for (; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return (h ^ bytes) * 1099511628211ULL;
}

static void close_buffer(int print_it) {
    if (!D.buffer) return;
    fclose(D.buffer);
    D.buffer = NULL;
    if (print_it && D.buffer_len) fprintf(stderr, "vitrain: rank %d:\n%s", D.rank, D.buffer_text);
    free(D.buffer_text);
    D.buffer_text = NULL;
    D.buffer_len = 0;
}

/* The lowest rank with a non-zero flag, or INT_MAX. */
static int lowest_failing(int failed) {
    int mine = failed ? D.rank : INT_MAX, low = INT_MAX;
    double t = now();
    MPI_Allreduce(&mine, &low, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    D.comm_s += now() - t;
    return low;
}

int vt_dist_start(int rc, const char *job) {
    if (D.started) return rc;
    D.started = 1;
    if (!multi()) {
        close_buffer(0);
        return rc;
    }
    int f = lowest_failing(rc != 0);
    if (f != INT_MAX) {
        close_buffer(D.rank == f);
        MPI_Bcast(&rc, 1, MPI_INT, f, MPI_COMM_WORLD);
        D.agreed = 1;
        return rc;
    }
    close_buffer(0);
    /* the build's identity goes over the wire from the binary's own bytes (not a hash the
     * compiler may fold), so two binaries differ here exactly when their sources do */
    enum { ID = sizeof build_id };
    char *ids = vt_xmalloc(ID * (size_t)D.size);
    MPI_Allgather(build_id, ID, MPI_CHAR, ids, ID, MPI_CHAR, MPI_COMM_WORLD);
    uint64_t mine = job ? hash_bytes(job, strlen(job)) : 0;
    uint64_t *all = vt_xmalloc(sizeof mine * (size_t)D.size);
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    rc = 0;
    for (int r = 1; r < D.size && !rc; r++) {
        const char *other = ids + (size_t)r * ID;
        if (memcmp(other, build_id, ID) != 0) {
            rc = 2;
            if (D.rank == 0)
                fprintf(stderr, "vitrain: error: rank %d of %d runs a different build of vitrain (its "
                        "sources' hash %.*s, rank 0's %s, version %s); run the same vitrain binary with "
                        "the same config and flags on every rank\n", r, D.size, (int)strnlen(other, ID), other,
                        build_id, VT_VERSION);
        } else if (all[r] != all[0]) {
            rc = 2;
            if (D.rank == 0)
                fprintf(stderr, "vitrain: error: rank %d of %d runs a different config or options (the "
                        "resolved config and the train/eval options must be identical on every rank); run "
                        "the same vitrain binary with the same config and flags on every rank\n", r, D.size);
        }
    }
    free(ids);
    free(all);
    D.agreed = rc != 0;
    return rc;
}

const char *vt_dist_build_id(void) { return build_id; }

int vt_dist_exit(int rc) {
    if (!D.on) return rc;
    if (!D.started) rc = vt_dist_start(rc, NULL);
    if (rc != 0 && !D.agreed && multi()) {
        fprintf(stderr, "vitrain: rank %d of %d failed alone; ending every rank (MPI_Abort)\n", D.rank,
                D.size);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
    MPI_Finalize();
    D.on = 0;
    return rc;
}

vt_status vt_dist_agree(vt_status st) {
    if (!multi()) return st;
    int f = lowest_failing(st != VT_OK);
    if (f == INT_MAX) return VT_OK;
    struct {
        int code;
        char msg[MSG_BYTES];
    } m;
    memset(&m, 0, sizeof m);
    if (D.rank == f) {
        m.code = (int)st;
        snprintf(m.msg, sizeof m.msg, "%s", vt_last_error());
    }
    double t = now();
    MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, f, MPI_COMM_WORLD);
    D.comm_s += now() - t;
    D.agreed = 1;
    if (f == 0) return vt_fail((vt_status)m.code, "%s", m.msg);
    return vt_fail((vt_status)m.code, "rank %d: %s", f, m.msg);
}

vt_status vt_dist_everywhere(vt_status st) {
    if (st != VT_OK) D.agreed = 1;
    return st;
}

int vt_dist_exit_everywhere(int rc) {
    D.agreed = 1;
    return rc;
}

int vt_dist_reports_error(void) { return !multi() || !D.agreed || D.rank == 0; }

const char *vt_dist_who(void) {
    if (!multi() || D.agreed) return "";
    snprintf(D.who, sizeof D.who, "rank %d: ", D.rank);
    return D.who;
}

vt_status vt_dist_split_batch(int global, const char *key, int *local) {
    *local = global / D.size;
    if (global % D.size == 0) return VT_OK;
    D.agreed = 1;
    return vt_fail(VT_ERR_USAGE, "%s %d is not divisible by the %d ranks: the global batch is split "
                   "evenly, %s / ranks samples per rank (use a multiple of %d, or a rank count that "
                   "divides %d)", key, global, D.size, key, D.size, global);
}

vt_status vt_dist_check_same(const char *what, const void *data, size_t bytes) {
    if (!multi()) return VT_OK;
    uint64_t h = hash_bytes(data, bytes);
    uint64_t *all = vt_xmalloc(sizeof h * (size_t)D.size);
    double t = now();
    MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    D.comm_s += now() - t;
    int bad = 0;
    for (int r = 1; r < D.size && !bad; r++)
        if (all[r] != all[0]) bad = r;
    free(all);
    if (!bad) return VT_OK;
    D.agreed = 1;
    return vt_fail(VT_ERR_RUNTIME, "%s differs between rank 0 and rank %d (of %d)", what, bad, D.size);
}

/* MPI counts are ints: large buffers go in chunks. */
#define CHUNK ((size_t)1 << 30)

void vt_dist_bcast(void *data, size_t bytes) {
    if (!multi()) return;
    double t = now();
    for (size_t o = 0; o < bytes; o += CHUNK) {
        size_t n = bytes - o < CHUNK ? bytes - o : CHUNK;
        MPI_Bcast((char *)data + o, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
    D.comm_s += now() - t;
}

void vt_dist_sum_f64(double *v, int n) {
    if (!multi()) return;
    double t = now();
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    D.comm_s += now() - t;
}

void vt_dist_sum_i64(int64_t *v, int n) {
    if (!multi()) return;
    double t = now();
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    D.comm_s += now() - t;
}

void vt_dist_max_int(int *v, int n) {
    if (!multi()) return;
    double t = now();
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    D.comm_s += now() - t;
}

void vt_dist_gather_strided(const void *mine, int64_t n, size_t row_bytes, void *full) {
    const int R = D.size, me = D.rank;
    if (!multi()) {
        if (full != mine) memcpy(full, mine, (size_t)n * row_bytes);
        return;
    }
    VT_ASSERT((double)n * row_bytes < (double)INT_MAX, "gather of %lld rows of %zu bytes exceeds MPI's "
              "int counts", (long long)n, row_bytes);
    int *counts = vt_xmalloc(sizeof(int) * (size_t)R), *displs = vt_xmalloc(sizeof(int) * (size_t)R);
    for (int r = 0, at = 0; r < R; r++) {
        int64_t rows = (n - r + R - 1) / R;
        counts[r] = (int)(rows * (int64_t)row_bytes);
        displs[r] = at;
        at += counts[r];
    }
    char *packed = me == 0 ? vt_xmalloc((size_t)n * row_bytes + 1) : NULL;
    double t = now();
    MPI_Gatherv(mine, counts[me], MPI_BYTE, packed, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    D.comm_s += now() - t;
    if (me == 0)
        for (int r = 0; r < R; r++)
            for (int64_t i = 0; i < counts[r] / (int64_t)row_bytes; i++)
                memcpy((char *)full + ((size_t)i * R + r) * row_bytes,
                       packed + displs[r] + (size_t)i * row_bytes, row_bytes);
    free(packed);
    free(counts);
    free(displs);
}

double vt_dist_comm_seconds(void) { return D.comm_s; }

void vt_dist_check_placement(int threads) {
    if (!D.on) return; /* also one rank: mpirun binds it to one core by default */
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : threads;
    MPI_Comm node; /* the ranks of this host */
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, D.rank, MPI_INFO_NULL, &node);
    int local = 1, local_rank = 0, node_threads = threads;
    MPI_Comm_size(node, &local);
    MPI_Comm_rank(node, &local_rank);
    MPI_Allreduce(MPI_IN_PLACE, &node_threads, 1, MPI_INT, MPI_SUM, node);
    MPI_Comm_free(&node);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int flags[2] = {cpus < threads, local_rank == 0 && online > 0 && node_threads > online};
    /* the first offending rank of each kind (INT_MAX: none), whose numbers the warning
     * shows: rank 0 may well be fine when another rank is not */
    int first[2] = {flags[0] ? D.rank : INT_MAX, flags[1] ? D.rank : INT_MAX};
    MPI_Allreduce(MPI_IN_PLACE, flags, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, first, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    int bound[1] = {cpus}, host[2] = {local, (int)online};
    if (flags[0]) MPI_Bcast(bound, 1, MPI_INT, first[0], MPI_COMM_WORLD);
    if (flags[1]) MPI_Bcast(host, 2, MPI_INT, first[1], MPI_COMM_WORLD);
    if (D.rank != 0) return;
    if (flags[0])
        fprintf(stderr, "vitrain: warning: %d of %d ranks are bound to fewer CPUs than their %d OpenMP "
                "threads (rank %d: %d CPU%s), so the threads share CPUs; give each rank its cores, "
                "e.g. mpirun --map-by slot:PE=%d --bind-to core (or --bind-to none)\n", flags[0],
                D.size, threads, first[0], bound[0], bound[0] == 1 ? "" : "s", threads);
    if (flags[1])
        fprintf(stderr, "vitrain: warning: on %d host%s the ranks run more OpenMP threads in all than "
                "the host has CPUs (rank %d's host: %d ranks x %d thread%s, %d CPUs), so they share "
                "CPUs: lower --threads or the ranks per host\n", flags[1], flags[1] == 1 ? "" : "s",
                first[1], host[0], threads, threads == 1 ? "" : "s", host[1]);
}

/* ---- gradient buckets -------------------------------------------------------------- */

struct vt_dist_grads {
    float *g;
    int64_t n;
    int nb;              /* buckets; bucket b covers [lo[b], hi[b]), b = 0 the highest */
    int64_t *lo, *hi;
    MPI_Request *req;
    int armed, next;     /* next: the next bucket to start */
};

vt_dist_grads *vt_dist_grads_new(float *grads, int64_t n, int64_t bucket_floats) {
    if (!multi()) return NULL;
    vt_dist_grads *g = vt_xcalloc(1, sizeof *g);
    int64_t cap = bucket_floats;
    if (cap <= 0) {
        int64_t bytes = (int64_t)sizeof(float) * n / VT_DIST_MIN_BUCKETS;
        bytes = bytes > VT_DIST_BUCKET_BYTES ? VT_DIST_BUCKET_BYTES
                : bytes < VT_DIST_MIN_BUCKET_BYTES ? VT_DIST_MIN_BUCKET_BYTES : bytes;
        cap = bytes / (int64_t)sizeof(float);
    }
    g->g = grads;
    g->n = n;
    g->nb = (int)((n + cap - 1) / cap);
    g->lo = vt_xmalloc(sizeof(int64_t) * (size_t)g->nb);
    g->hi = vt_xmalloc(sizeof(int64_t) * (size_t)g->nb);
    g->req = vt_xmalloc(sizeof(MPI_Request) * (size_t)g->nb);
    for (int b = 0; b < g->nb; b++) {
        g->hi[b] = n - (int64_t)b * cap;
        g->lo[b] = g->hi[b] - cap > 0 ? g->hi[b] - cap : 0;
        g->req[b] = MPI_REQUEST_NULL;
    }
    return g;
}

void vt_dist_grads_free(vt_dist_grads *g) {
    if (!g) return;
    free(g->lo);
    free(g->hi);
    free(g->req);
    free(g);
}

void vt_dist_grads_begin(vt_dist_grads *g) {
    VT_ASSERT(!g->armed, "vt_dist_grads_begin twice without finish");
    g->armed = 1;
    g->next = 0;
}

static void start_bucket(vt_dist_grads *g, int b) {
    MPI_Iallreduce(MPI_IN_PLACE, g->g + g->lo[b], (int)(g->hi[b] - g->lo[b]), MPI_FLOAT, MPI_SUM,
                   MPI_COMM_WORLD, &g->req[b]);
}

void vt_dist_grads_ready(void *ctx, int64_t from) {
    vt_dist_grads *g = ctx;
    if (!g->armed) return;
    if (from < 0 && g->next == 0) return; /* nothing in flight yet */
    double t = now();
    while (from >= 0 && g->next < g->nb && g->lo[g->next] >= from) start_bucket(g, g->next++);
    int done = 0;
    MPI_Testall(g->next, g->req, &done, MPI_STATUSES_IGNORE);
    D.comm_s += now() - t;
}

void vt_dist_grads_finish(vt_dist_grads *g) {
    VT_ASSERT(g->armed, "vt_dist_grads_finish without begin");
    double t = now();
    while (g->next < g->nb) start_bucket(g, g->next++);
    MPI_Waitall(g->nb, g->req, MPI_STATUSES_IGNORE);
    D.comm_s += now() - t;
    g->armed = 0;
}
