/* test_tape_protocol.c - the tape holds its callers to the grad-scope protocol (tape.h):
 * each rule broken on purpose must abort with a message that says which rule broke and
 * where; the same graphs with the rule kept run through with the gradients of a run
 * without scopes, bit for bit.
 *
 * Each case runs in a child process (this binary, run again with the case's name), so
 * that an abort ends only the child: the parent checks its exit (SIGABRT, or a status)
 * and its stderr. The graph of every case is two blocks like a model's, each one grad
 * scope
 *   h = linear(x, W); ...case...; s = add(a, r)   (inside the scope)
 *   x = add(x, s)                                 (after vt_tape_scope_end)
 * with an op "probe" that keeps or breaks the rules in block 0 (whose fresh gradients
 * hold block 1's stale values when its backward begins) and keeps them in block 1. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ops/ops.h"
#include "rng.h"
#include "tape.h"
#include "tape_fixture.h"
#include "tensor.h"

enum { ROWS = 6, D = 8 };

/* What probe(x) does: y = 2 x, with dx from its backward. */
typedef enum {
    PROBE_COUNTED,       /* counts x, accumulates dx += 2 dy: keeps the rules */
    PROBE_OVERWRITES,    /* counts x, says can_overwrite, writes dx = 2 dy when fresh: keeps them */
    PROBE_UNCOUNTED,     /* does not count x, accumulates into all of dx */
    PROBE_UNCOUNTED_MID, /* does not count x, accumulates into one middle element of dx */
    PROBE_READS,         /* says can_overwrite, but accumulates (reads the stale gradient) */
    PROBE_PARTIAL,       /* says can_overwrite, writes only the first half of dx when fresh */
    PROBE_NO_RECORD      /* counts x and records nothing */
} probe_mode;

typedef struct {
    probe_mode mode;
    vt_tensor *x;
    float *dx;
    const float *dy;
} probe_ctx;

static void probe_bwd(void *p) {
    probe_ctx *c = p;
    int64_t n = c->x->size;
    int fresh = vt_tape_grad_fresh(c->x);
    if (c->mode == PROBE_UNCOUNTED_MID) {
        c->dx[n / 2] += 2.0f * c->dy[n / 2];
        return;
    }
    if (c->mode == PROBE_PARTIAL && fresh) n /= 2;
    for (int64_t i = 0; i < n; i++) {
        if (fresh && c->mode != PROBE_READS) c->dx[i] = 2.0f * c->dy[i];
        else c->dx[i] += 2.0f * c->dy[i];
    }
}

static vt_tensor *probe(vt_tape *t, vt_tensor *x, probe_mode mode) {
    int counts = mode != PROBE_UNCOUNTED && mode != PROBE_UNCOUNTED_MID;
    int g = counts ? vt_tape_wants_grad(t, x, NULL, NULL) : x->grad != NULL;
    if (mode == PROBE_NO_RECORD) g = 0;
    vt_tensor *y = vt_tape_new(t, g, x->ndim, x->shape);
    for (int64_t i = 0; i < x->size; i++) y->data[i] = 2.0f * x->data[i];
    if (g) {
        probe_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (probe_ctx){mode, x, x->grad, y->grad};
        if (mode == PROBE_OVERWRITES || mode == PROBE_READS || mode == PROBE_PARTIAL) vt_tape_can_overwrite(x);
        vt_tape_record(t, "probe", probe_bwd, c);
    }
    return y;
}

typedef enum {
    GRAPH_SIDE,        /* a = linear(h, W) (overwrites dh), r = probe(h) recorded after it */
    GRAPH_CHAIN,       /* r = probe(h), its only consumer; a = linear(r, W) */
    GRAPH_NEXT_SCOPE   /* h made in one scope, linear(h, W) recorded in the next */
} graph_kind;

static vt_tensor *x0, *w0;

static vt_tensor *block(vt_tensor *x, graph_kind g, probe_mode mode) {
    vt_tape_scope_begin(&tape);
    vt_tensor *h = vt_op_linear(&tape, x, w0, NULL), *a, *r;
    if (g == GRAPH_NEXT_SCOPE) {
        vt_tape_scope_end(&tape);
        vt_tape_scope_begin(&tape);
    }
    if (g == GRAPH_CHAIN) {
        r = probe(&tape, h, mode);
        a = vt_op_linear(&tape, r, w0, NULL);
    } else {
        a = vt_op_linear(&tape, h, w0, NULL);
        r = probe(&tape, h, mode);
    }
    vt_tensor *s = vt_op_add(&tape, a, r);
    vt_tape_scope_end(&tape);
    return vt_tape_scope_result(&tape, vt_op_add(&tape, x, s));
}

/* One forward and backward of the case's graph (tail: a last probe that counts the
 * output and records nothing); x0's and w0's gradients are left. */
static void run_graph(graph_kind g, probe_mode mode, int tail, int scopes) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = 1;
    tape.scopes_enabled = scopes;
    memset(x0->grad, 0, sizeof(float) * ROWS * D);
    memset(w0->grad, 0, sizeof(float) * D * D);
    vt_tape_scope_reserve(&tape, 1 << 14); /* room for block 0's gradients in the region */
    vt_tensor *y = block(block(x0, g, mode), g == GRAPH_NEXT_SCOPE ? GRAPH_SIDE : g, PROBE_COUNTED);
    if (tail) probe(&tape, y, PROBE_NO_RECORD);
    for (int64_t i = 0; i < y->size; i++) y->grad[i] = (float)(i % 5) - 2.0f;
    vt_tape_replay(&tape);
}

/* The child: run the case; exit 0 if its gradients equal those without scopes, 3 if
 * they differ (a break the tape let through), or die on an assertion. */
static int child(const char *name) {
    static const struct {
        const char *name;
        graph_kind g;
        probe_mode mode;
        int tail;
    } cases[] = {
        {"counted", GRAPH_SIDE, PROBE_COUNTED, 0},
        {"overwrites", GRAPH_CHAIN, PROBE_OVERWRITES, 0},
        {"uncounted", GRAPH_SIDE, PROBE_UNCOUNTED, 0},
        {"uncounted_mid", GRAPH_SIDE, PROBE_UNCOUNTED_MID, 0},
        {"reads", GRAPH_CHAIN, PROBE_READS, 0},
        {"partial", GRAPH_CHAIN, PROBE_PARTIAL, 0},
        {"no_record", GRAPH_SIDE, PROBE_COUNTED, 1},
        {"next_scope", GRAPH_NEXT_SCOPE, PROBE_COUNTED, 0},
    };
    int c = -1;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
        if (strcmp(cases[i].name, name) == 0) c = i;
    if (c < 0 || tape_fixture_init() != 0) return 2;
    vt_rng r;
    vt_rng_seed(&r, 5);
    int64_t xs[2] = {ROWS, D}, ws[2] = {D, D};
    x0 = vt_tensor_new(&store, 1, 2, xs);
    w0 = vt_tensor_new(&store, 1, 2, ws);
    for (int i = 0; i < ROWS * D; i++) x0->data[i] = (float)(vt_rng_uniform(&r) - 0.5);
    for (int i = 0; i < D * D; i++) w0->data[i] = (float)(vt_rng_uniform(&r) - 0.5);
    float ref[ROWS * D + D * D];
    run_graph(cases[c].g, cases[c].mode, cases[c].tail, 0);
    memcpy(ref, x0->grad, sizeof(float) * ROWS * D);
    memcpy(ref + ROWS * D, w0->grad, sizeof(float) * D * D);
    run_graph(cases[c].g, cases[c].mode, cases[c].tail, 1);
    int same = memcmp(ref, x0->grad, sizeof(float) * ROWS * D) == 0 &&
               memcmp(ref + ROWS * D, w0->grad, sizeof(float) * D * D) == 0;
    tape_fixture_done();
    return same ? 0 : 3;
}

/* Runs the case in a child with VT_TAPE_CHECK=check; returns its stderr (static) and
 * sets *died (killed by SIGABRT) and *status (exit status, or -1). */
static const char *run_child(const char *exe, const char *name, const char *check, int *died, int *status) {
    static char out[8192];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "VT_TAPE_CHECK=%s OMP_NUM_THREADS=1 exec '%s' %s 2>&1", check, exe, name);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    int w = p ? pclose(p) : -1;
    *died = w != -1 && WIFSIGNALED(w) && WTERMSIG(w) == SIGABRT;
    *status = w != -1 && WIFEXITED(w) ? WEXITSTATUS(w) : -1;
    return out;
}

/* The case must die with a message holding each of the given phrases. */
static void expect_abort(const char *exe, const char *name, const char *check, const char *const *phrases,
                         int n) {
    int died, status;
    const char *msg = run_child(exe, name, check, &died, &status);
    CHECK(died, "case '%s' (VT_TAPE_CHECK=%s) should abort; exit status %d, output:\n%s", name, check, status, msg);
    for (int i = 0; i < n; i++)
        CHECK(strstr(msg, phrases[i]) != NULL, "case '%s': message lacks \"%s\":\n%s", name, phrases[i], msg);
}

/* The case must run through with exit status `want`. */
static void expect_exit(const char *exe, const char *name, const char *check, int want, const char *what) {
    int died, status;
    const char *msg = run_child(exe, name, check, &died, &status);
    CHECK(!died && status == want, "case '%s' (VT_TAPE_CHECK=%s): %s; died %d, exit status %d, output:\n%s", name,
          check, what, died, status, msg);
}

int main(int argc, char **argv) {
    if (argc == 2) return child(argv[1]);
    char exe[1024];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        fprintf(stderr, "cannot read /proc/self/exe\n");
        return 1;
    }
    exe[len] = '\0';

    /* The rules kept: through in checking mode, gradients as without scopes. */
    expect_exit(exe, "counted", "1", 0, "a second counted consumer: accumulated, same gradients");
    expect_exit(exe, "overwrites", "1", 0, "an overwriting consumer: same gradients");
    expect_exit(exe, "overwrites", "0", 0, "an overwriting consumer without checking: same gradients");

    /* Rule 1, always checked: where the op counts its inputs, with the op's file:line. */
    const char *next_scope[] = {"src/ops/linear.c:", "tape protocol", "made in grad scope 1",
                                "after grad scope 2 began", "rule 1"};
    expect_abort(exe, "next_scope", "1", next_scope, 5);
    expect_abort(exe, "next_scope", "0", next_scope, 5);

    /* Rule 2, in checking mode. Without it the same breaks corrupt the gradients. */
    expect_exit(exe, "uncounted", "0", 3, "an uncounted writer, unchecked, gives other gradients");
    const char *uncounted[] = {"src/tape.c:", "tape protocol", "the backward of 'probe' wrote the fresh gradient",
                               "(6, 8)", "one counted consumer is 'linear'", "rule 2"};
    expect_abort(exe, "uncounted", "1", uncounted, 6);
    const char *mid[] = {"src/tape.c:", "changed before the backward of 'linear'", "element 24",
                         "without counting it with vt_tape_wants_grad"};
    expect_abort(exe, "uncounted_mid", "1", mid, 4);
    expect_exit(exe, "reads", "0", 3, "a consumer that reads a fresh gradient, unchecked, gives other gradients");
    const char *reads[] = {"src/tape.c:", "'probe' said vt_tape_can_overwrite", "read the stale value of element 0"};
    expect_abort(exe, "reads", "1", reads, 3);
    const char *partial[] = {"src/tape.c:", "'probe' said vt_tape_can_overwrite", "did not write element 24"};
    expect_abort(exe, "partial", "1", partial, 3);
    const char *no_record[] = {"tape protocol: the op at tests/test_tape_protocol.c:",
                               "counted inputs with vt_tape_wants_grad but recorded no entry"};
    expect_abort(exe, "no_record", "0", no_record, 2);

    /* A VT_TAPE_CHECK that is neither 0 nor 1. */
    const char *bad_env[] = {"VT_TAPE_CHECK: expected 0 or 1, found 'yes'"};
    expect_abort(exe, "counted", "yes", bad_env, 1);
    return test_summary();
}
