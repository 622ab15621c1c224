/* run_log.c - metrics.jsonl, TensorBoard event files and summary.csv of a run directory
 * (contract in run_log.h). */
#include "run_log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "tfevents.h"

#define EVENTS_PREFIX "events.out.tfevents."
#define SUMMARY_HEADER "epoch,step,train_loss,train_top1,eval_loss,eval_top1,eval_top5,lr,img_per_s,wall_s\n"

static double unix_time(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

/* ---- whole files ------------------------------------------------------------------------ */

/* Whole file as a malloc'd buffer (NUL-terminated) and its length; NULL with *len = 0 if
 * it does not exist. */
static vt_status read_whole(const char *path, char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return VT_OK;
        return vt_fail(VT_ERR_RUNTIME, "cannot read '%s': %s", path, strerror(errno));
    }
    size_t cap = 1 << 16, n = 0;
    char *b = vt_xmalloc(cap + 1);
    size_t got;
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) b = vt_xrealloc(b, (cap *= 2) + 1);
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b);
        return vt_fail(VT_ERR_RUNTIME, "cannot read '%s': read error", path);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return VT_OK;
}

/* ---- trimming on resume ------------------------------------------------------------------ */

/* The step of a text record: metrics.jsonl's "step": value, or summary.csv's second
 * column; -1 for a line without one (a header). */
typedef int64_t (*line_step_fn)(const char *line, size_t len);

static int64_t jsonl_step(const char *line, size_t len) {
    const char *p = memmem(line, len, "\"step\":", 7);
    return p ? strtoll(p + 7, NULL, 10) : -1;
}

static int64_t csv_step(const char *line, size_t len) {
    const char *c = memchr(line, ',', len);
    if (!c || c[1] < '0' || c[1] > '9') return -1;
    return strtoll(c + 1, NULL, 10);
}

/* Whether a text record is one of an evaluation or an epoch's end (metrics.jsonl's eval and
 * epoch records; every row of summary.csv). */
typedef int (*line_drop_fn)(const char *line, size_t len);

static int jsonl_eval_or_epoch(const char *line, size_t len) {
    return memmem(line, len, "{\"kind\":\"eval\",", 15) == line || memmem(line, len, "{\"kind\":\"epoch\",", 16) == line;
}

static int csv_row(const char *line, size_t len) {
    (void)line;
    (void)len;
    return 1;
}

/* Whether an event's tag is one of an evaluation (eval/..., eval_Spx/...) or an epoch's
 * end (train/..._epoch). */
static int tag_eval_or_epoch(const char *tag) {
    size_t n = strlen(tag);
    return strncmp(tag, "eval", 4) == 0 || (n > 6 && strcmp(tag + n - 6, "_epoch") == 0);
}

/* Keep the complete lines of a text file whose step is <= step (and lines without a step:
 * the header), but those at step that drop_at (non-NULL) says are an evaluation's or an
 * epoch end's; a last line without its newline (cut by a crash) is dropped. */
static vt_status trim_text(const char *path, int64_t step, line_step_fn step_of, line_drop_fn drop_at) {
    char *buf;
    size_t n;
    vt_status st = read_whole(path, &buf, &n);
    if (st != VT_OK || !buf) return st;
    char *out = vt_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        char *nl = memchr(buf + i, '\n', n - i);
        if (!nl) break;
        size_t len = (size_t)(nl - (buf + i)) + 1;
        int64_t at = step_of(buf + i, len);
        if (at <= step && !(drop_at && at == step && drop_at(buf + i, len))) {
            memcpy(out + o, buf + i, len);
            o += len;
        }
        i += len;
    }
    if (o != n) st = vt_durable_write_file(path, out, o);
    free(buf);
    free(out);
    return st;
}

/* Keep the records of an event file up to step (the file_version record has step 0), but
 * with drop_evals those of an evaluation or an epoch's end at step; a record cut short by a
 * crash ends the file. */
static vt_status trim_events(const char *path, int64_t step, int drop_evals) {
    char *buf;
    size_t n;
    vt_status st = read_whole(path, &buf, &n);
    if (st != VT_OK || !buf) return st;
    uint8_t *out = vt_xmalloc(n + 1);
    size_t o = 0, pos = 0, dn, start = 0;
    const uint8_t *data;
    const uint8_t *b = (const uint8_t *)buf;
    while (vt_tfevents_next(b, n, &pos, &data, &dn) == 1) {
        int64_t s = vt_tfevents_event_step(data, dn);
        char tag[VT_TFEVENTS_TAG_MAX + 1] = "";
        if (drop_evals && s == step) vt_tfevents_event_tag(data, dn, tag, sizeof tag);
        if (s >= 0 && s <= step && !tag_eval_or_epoch(tag)) {
            memcpy(out + o, b + start, pos - start);
            o += pos - start;
        }
        start = pos;
    }
    if (o != n) st = vt_durable_write_file(path, out, o);
    free(buf);
    free(out);
    return st;
}

/* Every event file of dir: trimmed to step (step >= 0; drop_evals as trim_events), or
 * removed (step < 0). The latest start time in their names into *latest (0 if none). */
static vt_status each_events_file(const char *dir, int64_t step, int drop_evals, long long *latest) {
    *latest = 0;
    DIR *d = opendir(dir);
    if (!d) return vt_fail(VT_ERR_RUNTIME, "cannot list '%s': %s", dir, strerror(errno));
    vt_status st = VT_OK;
    struct dirent *e;
    while (st == VT_OK && (e = readdir(d))) {
        size_t pl = strlen(EVENTS_PREFIX), nl = strlen(e->d_name);
        if (strncmp(e->d_name, EVENTS_PREFIX, pl) != 0 || (nl > 4 && !strcmp(e->d_name + nl - 4, ".tmp")))
            continue;
        long long t = strtoll(e->d_name + pl, NULL, 10);
        if (t > *latest) *latest = t;
        char path[4096 + 256];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (step >= 0) st = trim_events(path, step, drop_evals);
        else if (vt_durable_unlink(path) != 0)
            st = vt_fail(VT_ERR_RUNTIME, "cannot remove the earlier event file '%s': %s", path,
                         strerror(errno));
    }
    closedir(d);
    return st;
}

/* ---- writing --------------------------------------------------------------------------- */

/* One record, formatted, in one write. */
static vt_status log_printf(vt_durable_log *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static vt_status log_printf(vt_durable_log *f, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    VT_ASSERT(n > 0 && n < (int)sizeof buf, "log record of %d bytes", n);
    return vt_durable_log_write(f, buf, (size_t)n);
}

/* Scalars of one step, written together. */
typedef struct {
    const char *tag;
    double value;          /* NaN: not logged */
} scalar;

static vt_status events_scalars(vt_run_log *l, int64_t step, const scalar *s, int n) {
    uint8_t rec[8 * VT_TFEVENTS_RECORD_MAX];
    VT_ASSERT(n <= 8, "%d scalars in one write", n);
    double t = unix_time();
    size_t len = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(s[i].value)) len += vt_tfevents_scalar(rec + len, t, step, s[i].tag, (float)s[i].value);
    return vt_durable_log_write(&l->events, rec, len);
}

/* A new event file named after the later of now and the latest earlier one's time + 1:
 * its file_version record, and after a resume at resume_step, START at resume_step + 1. */
static vt_status open_events(vt_run_log *l, long long after, int64_t resume_step) {
    double now = unix_time();
    long long t = (long long)now > after ? (long long)now : after + 1;
    char host[256] = "localhost", path[sizeof l->events.path];
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    snprintf(path, sizeof path, "%s/" EVENTS_PREFIX "%010lld.%s", l->dir, t, host);
    vt_status st = vt_durable_log_open(&l->events, path, 0);
    uint8_t rec[2 * VT_TFEVENTS_RECORD_MAX];
    size_t len = st == VT_OK ? vt_tfevents_file_version(rec, now) : 0;
    if (resume_step >= 0) len += vt_tfevents_session_start(rec + len, now, resume_step + 1);
    return st == VT_OK ? vt_durable_log_write(&l->events, rec, len) : st;
}

vt_status vt_run_log_drop_evals(const char *dir, int64_t step) {
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    vt_status st = trim_text(path, step, jsonl_step, jsonl_eval_or_epoch);
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    if (st == VT_OK) st = trim_text(path, step, csv_step, csv_row);
    long long latest;
    return st == VT_OK ? each_events_file(dir, step, 1, &latest) : st;
}

vt_status vt_run_log_open(vt_run_log *l, const char *dir, int train_size, int64_t resume_step) {
    memset(l, 0, sizeof *l);
    l->metrics.fd = l->summary.fd = l->events.fd = -1;
    VT_ASSERT(strlen(dir) < sizeof l->dir, "run directory name of %zu bytes", strlen(dir));
    snprintf(l->dir, sizeof l->dir, "%s", dir);
    l->train_size = train_size;
    l->last_eval_step = -1;
    int resume = resume_step >= 0;
    vt_status st = VT_OK;
    if (resume) {
        char path[4096 + 64];
        snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
        st = trim_text(path, resume_step, jsonl_step, NULL);
        snprintf(path, sizeof path, "%s/summary.csv", dir);
        if (st == VT_OK) st = trim_text(path, resume_step, csv_step, NULL);
    }
    long long latest = 0;
    if (st == VT_OK) st = each_events_file(dir, resume ? resume_step : -1, 0, &latest);
    char path[4096 + 64];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (st == VT_OK) st = vt_durable_log_open(&l->metrics, path, !resume);
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    if (st == VT_OK) st = vt_durable_log_open(&l->summary, path, !resume);
    if (st == VT_OK && lseek(l->summary.fd, 0, SEEK_END) == 0) /* new, or a crash left it empty */
        st = vt_durable_log_write(&l->summary, SUMMARY_HEADER, strlen(SUMMARY_HEADER));
    if (st == VT_OK) st = open_events(l, latest, resume_step);
    if (st != VT_OK) vt_run_log_close(l);
    return st;
}

vt_status vt_run_log_sync(vt_run_log *l) {
    vt_durable_log *files[] = {&l->metrics, &l->summary, &l->events};
    vt_status st = VT_OK;
    for (int i = 0; i < 3 && st == VT_OK; i++)
        if (files[i]->fd >= 0) st = vt_durable_log_sync(files[i]);
    return st;
}

void vt_run_log_close(vt_run_log *l) {
    vt_durable_log_close(&l->metrics);
    vt_durable_log_close(&l->summary);
    vt_durable_log_close(&l->events);
}

vt_status vt_run_log_train(vt_run_log *l, const vt_log_train *r) {
    char top1[40] = "", comm[64] = "";
    if (!isnan(r->top1)) snprintf(top1, sizeof top1, ",\"top1\":%.4f", r->top1);
    if (r->ranks > 1) snprintf(comm, sizeof comm, ",\"ranks\":%d,\"comm_s\":%.6f", r->ranks, r->comm_s);
    vt_status st = log_printf(&l->metrics, "{\"kind\":\"train\",\"step\":%lld,\"epoch\":%lld,\"loss\":%.9g,"
                             "\"lr\":%.9g,\"grad_norm\":%.9g,\"img_per_s\":%.2f,\"wall_s\":%.3f%s%s}\n",
                             (long long)r->step, (long long)r->epoch, r->loss, r->lr, r->grad_norm,
                             r->img_per_s, r->wall_s, top1, comm);
    scalar s[] = {{"train/loss", r->loss}, {"train/top1", r->top1}, {"train/lr", r->lr},
                  {"train/grad_norm", r->grad_norm}, {"train/img_per_s", r->img_per_s},
                  {"train/comm_s", r->ranks > 1 ? r->comm_s : NAN}};
    if (st == VT_OK) st = events_scalars(l, r->step, s, (int)(sizeof s / sizeof s[0]));
    return st;
}

vt_status vt_run_log_eval(vt_run_log *l, int64_t step, int64_t epoch, const vt_eval_result *r,
                          double wall_s) {
    vt_status st = log_printf(&l->metrics, "{\"kind\":\"eval\",\"step\":%lld,\"epoch\":%lld,\"top1\":%.4f,"
                             "\"top5\":%.4f,\"loss\":%.9g,\"resolution\":%d,\"n\":%lld,\"wall_s\":%.3f}\n",
                             (long long)step, (long long)epoch, r->top1, r->top5, r->loss, r->img_size,
                             (long long)r->n, wall_s);
    char group[32], t1[48], t5[48], tl[48];
    if (r->img_size == l->train_size) {
        snprintf(group, sizeof group, "eval");
        l->last_eval = *r;
        l->last_eval_step = step;
    } else {
        snprintf(group, sizeof group, "eval_%dpx", r->img_size);
    }
    snprintf(t1, sizeof t1, "%s/top1", group);
    snprintf(t5, sizeof t5, "%s/top5", group);
    snprintf(tl, sizeof tl, "%s/loss", group);
    scalar s[] = {{t1, r->top1}, {t5, r->top5}, {tl, r->loss}};
    if (st == VT_OK) st = events_scalars(l, step, s, 3);
    return st;
}

vt_status vt_run_log_checkpoint(vt_run_log *l, int64_t step, long long bytes, double seconds,
                                double wall_s) {
    return log_printf(&l->metrics, "{\"kind\":\"checkpoint\",\"step\":%lld,\"bytes\":%lld,\"seconds\":%.3f,"
                      "\"wall_s\":%.3f}\n", (long long)step, bytes, seconds, wall_s);
}

double vt_epoch_stats_loss(const vt_epoch_stats *e) {
    return e->steps > 0 ? e->loss_sum / (double)e->steps : NAN;
}

double vt_epoch_stats_top1(const vt_epoch_stats *e) {
    return e->counted > 0 ? 100.0 * (double)e->correct / (double)e->counted : NAN;
}

/* A number for a CSV cell or JSON value: "" / "null" when NaN. */
static const char *num(char *buf, size_t len, const char *fmt, double v, const char *none) {
    if (isnan(v)) return none;
    snprintf(buf, len, fmt, v);
    return buf;
}

vt_status vt_run_log_epoch(vt_run_log *l, int64_t step, int64_t epoch, const vt_epoch_stats *e,
                           double lr, double wall_s) {
    double loss = vt_epoch_stats_loss(e), top1 = vt_epoch_stats_top1(e);
    double img_s = e->seconds > 0 ? (double)e->images / e->seconds : NAN;
    char a[40], b[40], c[40], d[40], f[40], g[40];
    vt_status st = log_printf(&l->metrics, "{\"kind\":\"epoch\",\"step\":%lld,\"epoch\":%lld,\"loss\":%s,"
                             "\"top1\":%s,\"lr\":%.9g,\"img_per_s\":%s,\"wall_s\":%.3f}\n", (long long)step,
                             (long long)epoch, num(a, sizeof a, "%.9g", loss, "null"),
                             num(b, sizeof b, "%.4f", top1, "null"), lr,
                             num(c, sizeof c, "%.2f", img_s, "null"), wall_s);
    int ev = l->last_eval_step == step;
    if (st == VT_OK)
        st = log_printf(&l->summary, "%lld,%lld,%s,%s,%s,%s,%s,%.9g,%s,%.3f\n", (long long)epoch,
                       (long long)step, num(a, sizeof a, "%.9g", loss, ""), num(b, sizeof b, "%.4f", top1, ""),
                       num(d, sizeof d, "%.9g", ev ? l->last_eval.loss : NAN, ""),
                       num(f, sizeof f, "%.4f", ev ? l->last_eval.top1 : NAN, ""),
                       num(g, sizeof g, "%.4f", ev ? l->last_eval.top5 : NAN, ""), lr,
                       num(c, sizeof c, "%.2f", img_s, ""), wall_s);
    scalar s[] = {{"train/loss_epoch", loss}, {"train/top1_epoch", top1},
                  {"train/img_per_s_epoch", img_s}};
    if (st == VT_OK) st = events_scalars(l, step, s, 3);
    return st;
}
