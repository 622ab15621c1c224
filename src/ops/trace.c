/* trace.c - the timed record of products (trace.h). */
#include "trace.h"

#include <omp.h>
#include <time.h>

static vt_trace_call *trace_calls; /* NULL: off */
static int trace_cap, trace_n, in_after;
static vt_trace_after_fn trace_after;
static void *trace_ctx;

void vt_trace_start(vt_trace_call *calls, int cap, vt_trace_after_fn after, void *ctx) {
    trace_cap = cap;
    trace_n = 0;
    trace_after = after;
    trace_ctx = ctx;
    trace_calls = calls;
}

int vt_trace_stop(void) {
    trace_calls = NULL;
    return trace_n;
}

int vt_trace_active(void) { return trace_calls != NULL && !in_after && !omp_in_parallel(); }

double vt_trace_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void vt_trace_add(const vt_trace_call *c) {
    if (!vt_trace_active()) return;
    if (trace_n < trace_cap) trace_calls[trace_n] = *c;
    trace_n++;
    if (trace_after) {
        in_after = 1;
        trace_after(c, trace_ctx);
        in_after = 0;
    }
}
