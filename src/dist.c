/* dist.c - MPI data parallelism: launch detection, start-up agreement, error agreement,
 * gradient buckets and small collectives (contract in dist.h). The only MPI user. */
#include "dist.h"

#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
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
#define HOST_BYTES 64
/* The watchdog's limit is at least this many times the longest stretch of work seen
 * between two exchanges (see dist.h), and MPI_Abort gets this many seconds to end the
 * job before the process ends itself (SIGALRM). */
#define VT_DIST_WATCH_FACTOR 4.0
#define VT_DIST_ABORT_GRACE_S 30

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
    char host[HOST_BYTES];  /* this host's name */
    char *hosts;            /* every rank's host name, HOST_BYTES each (after vt_dist_start) */
    const char *launcher;   /* what started the ranks, for the layout line */
    double timeout_s;       /* the watchdog's floor; 0: off */
    double longest_work;    /* longest time between the end of one wait and the next wait */
    double last_done;       /* when the last wait ended (0: none yet) */
} D = {.size = 1, .timeout_s = VT_DIST_DEFAULT_TIMEOUT_S};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int set(const char *var) {
    const char *v = getenv(var);
    return v && *v;
}

/* The launcher that started this process (NULL: none), by the variables it sets. */
static const char *launcher(void) {
    int srun = set("SLURM_STEP_ID");
    if (set("OMPI_COMM_WORLD_SIZE")) return "mpirun";
    if (set("PMIX_RANK")) return srun ? "srun --mpi=pmix" : "a PMIx launcher";
    if (set("PMI_SIZE")) return srun ? "srun (PMI)" : "a PMI launcher";
    return NULL;
}

vt_status vt_dist_init(int *argc, char ***argv) {
    if (D.on) return VT_OK;
    D.launcher = launcher();
    if (!D.launcher) {
        /* srun started several tasks of this step but gave them no way to find each
         * other: each would train alone, all in one run directory */
        const char *tasks = getenv("SLURM_STEP_NUM_TASKS");
        if (tasks && atoi(tasks) > 1)
            return vt_fail(VT_ERR_USAGE, "srun started %s tasks (SLURM_STEP_NUM_TASKS) without an MPI "
                           "launch interface (no PMIX_RANK, PMI_SIZE or OMPI_COMM_WORLD_SIZE), so each "
                           "would train alone in the same run directory; use `srun --mpi=pmix` (Debian's "
                           "Open MPI has PMIx, not PMI-2), or mpirun inside the allocation", tasks);
        return VT_OK;
    }
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    VT_ASSERT(provided >= MPI_THREAD_FUNNELED, "MPI provides thread level %d, vitrain needs "
              "MPI_THREAD_FUNNELED (%d)", provided, MPI_THREAD_FUNNELED);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_rank(MPI_COMM_WORLD, &D.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &D.size);
    D.on = 1;
    if (gethostname(D.host, sizeof D.host) != 0) snprintf(D.host, sizeof D.host, "?");
    D.host[sizeof D.host - 1] = '\0';
    if (D.rank > 0) {
        D.buffer = open_memstream(&D.buffer_text, &D.buffer_len);
        /* stdout carries results (eval JSON lines, info): rank 0's */
        if (!freopen("/dev/null", "w", stdout)) fclose(stdout);
    }
    return VT_OK;
}

int vt_dist_rank(void) { return D.rank; }
int vt_dist_size(void) { return D.size; }

FILE *vt_dist_msg(void) { return D.buffer ? D.buffer : stderr; }

/* Distributed collectives run only with more than one rank: one rank under mpirun
 * takes exactly the single-process path. */
static int multi(void) { return D.on && D.size > 1; }

/* ---- the watchdog ------------------------------------------------------------------ */

void vt_dist_set_timeout(double seconds) { D.timeout_s = seconds > 0 ? seconds : 0; }

/* "rank 1 on hostb" for up to a few other ranks, then how many more. */
static void others(char *out, size_t len) {
    size_t o = 0;
    int shown = 0;
    out[0] = '\0';
    for (int r = 0; r < D.size && o < len; r++) {
        if (r == D.rank) continue;
        if (shown == 4) {
            snprintf(out + o, len - o, " and %d more", D.size - 1 - shown);
            return;
        }
        int n = snprintf(out + o, len - o, "%srank %d on %s", shown ? ", " : "", r,
                         D.hosts ? D.hosts + (size_t)r * HOST_BYTES : "?");
        o += n > 0 ? (size_t)n : 0;
        shown++;
    }
}

/* Past the limit: name this rank, its host, what it waited for and whom, then end
 * every rank. MPI_Abort needs the launcher; should it not answer (the link to it is
 * down too), SIGALRM's default action ends this process, which its launcher sees. */
static _Noreturn void give_up(double waited, double limit, const char *fmt, va_list ap) {
    char what[256], peers[512];
    vsnprintf(what, sizeof what, fmt, ap);
    others(peers, sizeof peers);
    fprintf(stderr, "vitrain: error: rank %d of %d (host %s, pid %ld) waited %.0f s for %s with no "
            "answer from the other ranks (%s): a rank died, hangs or is cut off from this host. "
            "Ending every rank (MPI_Abort); --resume continues from the last checkpoint. (The limit, "
            "%.0f s, is runtime.comm_timeout or %.0f x the longest work between two exchanges, "
            "whichever is larger.)\n", D.rank, D.size, D.host, (long)getpid(), waited, what, peers,
            limit, VT_DIST_WATCH_FACTOR);
    fflush(stderr);
    signal(SIGALRM, SIG_DFL);
    alarm(VT_DIST_ABORT_GRACE_S);
    MPI_Abort(MPI_COMM_WORLD, 1);
    for (;;) pause();
}

/* Wait for n requests like MPI_Waitall, but for at most the watchdog's limit: the
 * larger of runtime.comm_timeout and VT_DIST_WATCH_FACTOR times the longest work this
 * rank did between two waits (the one just ended included), so ranks that are slow but
 * alive never trip it. fmt names what is awaited (formatted only when it trips). */
static void wait_all(int n, MPI_Request *req, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void wait_all(int n, MPI_Request *req, const char *fmt, ...) {
    double t0 = now();
    if (D.last_done > 0 && t0 - D.last_done > D.longest_work) D.longest_work = t0 - D.last_done;
    double limit = fmax(D.timeout_s, VT_DIST_WATCH_FACTOR * D.longest_work);
    for (int done = 0;;) {
        MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
        if (done) break;
        double t = now();
        if (D.timeout_s > 0 && t - t0 > limit) {
            va_list ap;
            va_start(ap, fmt);
            give_up(t - t0, limit, fmt, ap);
        }
    }
    D.last_done = now();
}

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

/* v = op over the ranks of v, in place (n elements of type); `what` names the exchange. */
static void allreduce(void *v, int n, MPI_Datatype type, MPI_Op op, const char *what) {
    double t = now();
    MPI_Request r;
    MPI_Iallreduce(MPI_IN_PLACE, v, n, type, op, MPI_COMM_WORLD, &r);
    wait_all(1, &r, "%s", what);
    D.comm_s += now() - t;
}

/* The lowest rank with a non-zero flag, or INT_MAX; `what` names the exchange. */
static int lowest_failing(int failed, const char *what) {
    int low = failed ? D.rank : INT_MAX;
    allreduce(&low, 1, MPI_INT, MPI_MIN, what);
    return low;
}

/* Rank root's bytes to every rank (one message: count fits an int). */
static void bcast_from(void *data, int bytes, int root, const char *what) {
    MPI_Request r;
    MPI_Ibcast(data, bytes, MPI_BYTE, root, MPI_COMM_WORLD, &r);
    wait_all(1, &r, "%s (%d bytes from rank %d)", what, bytes, root);
}

/* Every rank's bytes (the same count) to every rank, in rank order. */
static void allgather(const void *mine, int bytes, void *all, const char *what) {
    MPI_Request r;
    MPI_Iallgather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, MPI_COMM_WORLD, &r);
    wait_all(1, &r, "%s", what);
}

int vt_dist_start(int rc, const char *job) {
    if (D.started) return rc;
    D.started = 1;
    if (!multi()) {
        close_buffer(0);
        return rc;
    }
    int f = lowest_failing(rc != 0, "the start-up agreement");
    if (f != INT_MAX) {
        close_buffer(D.rank == f);
        bcast_from(&rc, sizeof rc, f, "the start-up agreement's exit code");
        D.agreed = 1;
        return rc;
    }
    close_buffer(0);
    /* the build's identity goes over the wire from the binary's own bytes (not a hash the
     * compiler may fold), so two binaries differ here exactly when their sources do */
    enum { ID = sizeof build_id };
    char *ids = vt_xmalloc(ID * (size_t)D.size);
    allgather(build_id, ID, ids, "the start-up comparison of builds");
    uint64_t mine = job ? hash_bytes(job, strlen(job)) : 0;
    uint64_t *all = vt_xmalloc(sizeof mine * (size_t)D.size);
    allgather(&mine, sizeof mine, all, "the start-up comparison of configs");
    D.hosts = vt_xmalloc(HOST_BYTES * (size_t)D.size);
    allgather(D.host, HOST_BYTES, D.hosts, "the start-up exchange of host names");
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
    free(D.hosts);
    D.hosts = NULL;
    D.on = 0;
    return rc;
}

vt_status vt_dist_agree(vt_status st) {
    if (!multi()) return st;
    int f = lowest_failing(st != VT_OK, "the agreement on errors");
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
    bcast_from(&m, (int)sizeof m, f, "the failing rank's error message");
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
    char awaited[160];
    snprintf(awaited, sizeof awaited, "the comparison of %.120s", what);
    allgather(&h, sizeof h, all, awaited);
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
        bcast_from((char *)data + o, (int)n, 0, "a broadcast");
    }
    D.comm_s += now() - t;
}

void vt_dist_sum_f64(double *v, int n) {
    if (multi()) allreduce(v, n, MPI_DOUBLE, MPI_SUM, "a sum of numbers over the ranks");
}

void vt_dist_sum_i64(int64_t *v, int n) {
    if (multi()) allreduce(v, n, MPI_INT64_T, MPI_SUM, "a sum of counts over the ranks");
}

void vt_dist_max_int(int *v, int n) {
    if (multi()) allreduce(v, n, MPI_INT, MPI_MAX, "the step's agreement on stopping");
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
    MPI_Request r;
    MPI_Igatherv(mine, counts[me], MPI_BYTE, packed, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD, &r);
    wait_all(1, &r, "the gather of %lld rows on rank 0", (long long)n);
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

/* The first rank on rank r's host. */
static int first_on_host(int r) {
    if (!D.hosts) return 0;
    for (int q = 0;; q++)
        if (!strcmp(D.hosts + (size_t)q * HOST_BYTES, D.hosts + (size_t)r * HOST_BYTES)) return q;
}

/* "hostA ranks 0-1, hostB ranks 2-3" (ranges of consecutive ranks), up to 8 hosts. */
static void print_layout(void) {
    int hosts = 0;
    for (int r = 0; r < D.size; r++) hosts += first_on_host(r) == r;
    fprintf(stderr, "vitrain: %d ranks on %d host%s (started by %s):", D.size, hosts, hosts == 1 ? "" : "s",
            D.launcher);
    int shown = 0;
    for (int h = 0; h < D.size; h++) {
        if (first_on_host(h) != h) continue;
        if (shown++ == 8) {
            fprintf(stderr, " and %d more hosts", hosts - 8);
            break;
        }
        fprintf(stderr, "%s %s rank%s ", shown > 1 ? "," : "", D.hosts + (size_t)h * HOST_BYTES,
                h + 1 < D.size && first_on_host(h + 1) == h ? "s" : "");
        for (int r = h, sep = 0; r < D.size; r++) {
            if (first_on_host(r) != h) continue;
            int e = r;
            while (e + 1 < D.size && first_on_host(e + 1) == h) e++;
            fprintf(stderr, e > r ? "%s%d-%d" : "%s%d", sep++ ? " " : "", r, e);
            r = e;
        }
    }
    fputc('\n', stderr);
}

void vt_dist_check_placement(int threads) {
    if (!D.on) return; /* also one rank: mpirun binds it to one core by default */
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : threads;
    enum { THREADS, CPUS, ONLINE, N };
    int mine[N] = {threads, cpus, (int)sysconf(_SC_NPROCESSORS_ONLN)};
    int *all = vt_xmalloc(sizeof mine * (size_t)D.size);
    if (multi())
        allgather(mine, sizeof mine, all, "the start-up placement check");
    else
        memcpy(all, mine, sizeof mine);
    if (D.rank == 0) {
        if (multi()) print_layout();
        /* each warning shows the first offending rank's numbers: rank 0 may well be fine
         * when another rank is not */
        int starved = 0, crowded = 0, first_starved = -1, first_crowded = -1, crowded_ranks = 0;
        for (int r = 0; r < D.size; r++) {
            if (all[r * N + CPUS] < all[r * N + THREADS] && starved++ == 0) first_starved = r;
            if (first_on_host(r) != r) continue;
            int sum = 0, ranks = 0;
            for (int q = r; q < D.size; q++)
                if (first_on_host(q) == r) sum += all[q * N + THREADS], ranks++;
            if (all[r * N + ONLINE] > 0 && sum > all[r * N + ONLINE] && crowded++ == 0) {
                first_crowded = r;
                crowded_ranks = ranks;
            }
        }
        if (starved) {
            int c = all[first_starved * N + CPUS];
            fprintf(stderr, "vitrain: warning: %d of %d ranks are bound to fewer CPUs than their %d OpenMP "
                    "threads (rank %d: %d CPU%s), so the threads share CPUs; give each rank its cores, "
                    "e.g. mpirun --map-by slot:PE=%d --bind-to core (or --bind-to none)\n", starved,
                    D.size, threads, first_starved, c, c == 1 ? "" : "s", threads);
        }
        if (crowded)
            fprintf(stderr, "vitrain: warning: on %d host%s the ranks run more OpenMP threads in all than "
                    "the host has CPUs (rank %d's host: %d ranks x %d thread%s, %d CPUs), so they share "
                    "CPUs: lower --threads or the ranks per host\n", crowded, crowded == 1 ? "" : "s",
                    first_crowded, crowded_ranks, threads, threads == 1 ? "" : "s",
                    all[first_crowded * N + ONLINE]);
    }
    free(all);
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
    wait_all(g->nb, g->req, "the gradient all-reduce (%d bucket%s)", g->nb, g->nb == 1 ? "" : "s");
    D.comm_s += now() - t;
    g->armed = 0;
}
