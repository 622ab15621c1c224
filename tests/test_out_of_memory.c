/* test_out_of_memory.c - memory a step asks for past what was reserved before the first
 * one. Each allocation that grows during a step (an arena block, the tape's scratch, the
 * grad region, a thread's GEMM packing workspace) fails, in a child process whose
 * address space is capped (RLIMIT_AS, 1 GiB above its size) below the request (8 GiB;
 * not in sanitizer builds, whose allocator reserves more), with exit status 1 and the
 * message "vitrain: error: out of memory: WHAT of N bytes" naming the batch keys, never
 * an abort or an "internal error"; vt_gemm_reserve over the cap returns VT_ERR_RUNTIME
 * naming the GEMM buffers and the thread count; and after vt_gemm_reserve the largest
 * product's workspace is the reserved buffer (a step's products allocate nothing).
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "kernels.h"
#include "ops/par.h"
#include "status.h"
#include "tape.h"
#include "tensor.h"
#include "test_util.h"

#define ASK ((size_t)8 << 30) /* what a child asks for: more than the 1 GiB it has left */

/* fn run in a child with 1 GiB of address space left (test_cap_address_space) and its
 * stderr into err; the child's exit status, or 128 + the signal that ended it. */
static int in_capped_child(void (*fn)(void), char *err, size_t len) {
    int fd[2];
    err[0] = '\0';
    if (pipe(fd) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        struct rlimit old;
        if (test_cap_address_space(1ULL << 30, &old) != 0) _exit(99);
        fn();
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    for (ssize_t got; n + 1 < len && (got = read(fd[0], err + n, len - 1 - n)) > 0;) n += (size_t)got;
    err[n] = '\0';
    close(fd[0]);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void grow_arena(void) {
    vt_arena a;
    vt_arena_init(&a, 4096);
    if (vt_arena_reserve(&a, 1 << 20) != VT_OK) _exit(98);
    vt_arena_alloc(&a, 1000);
    vt_arena_alloc(&a, ASK);
}

static void grow_scratch(void) {
    vt_arena a;
    vt_arena_init(&a, 4096);
    vt_tape t;
    vt_tape_init(&t, &a);
    vt_tape_scratch(&t, ASK / sizeof(float));
}

static void grow_region(void) {
    vt_arena a;
    vt_arena_init(&a, 4096);
    vt_tape t;
    vt_tape_init(&t, &a);
    t.grad_enabled = 1;
    vt_tape_scope_reserve(&t, ASK);
    vt_tape_scope_begin(&t);
}

static void grow_workspace(void) { vt_gemm_workspace(ASK / sizeof(float)); }

/* vt_gemm_reserve's error on 2 threads: exit 3 with the message, 4 if it succeeded; for
 * the K split's partials, then for the shared packed operand. */
static void reserve_on_two(size_t partial, size_t operand) {
    omp_set_num_threads(2);
    vt_status st = vt_gemm_reserve(partial, operand);
    fprintf(stderr, "%s\n", vt_last_error());
    _exit(st == VT_ERR_RUNTIME ? 3 : 4);
}
static void reserve_partials(void) { reserve_on_two(ASK / sizeof(float), 0); }
static void reserve_shared_operand(void) { reserve_on_two(0, ASK / sizeof(float)); }

static void test_growth_fails_clearly(void) {
#if defined(__SANITIZE_ADDRESS__)
    printf("note: the growth checks need an address-space cap, which AddressSanitizer's allocator outgrows\n");
    return;
#endif
    static const struct {
        const char *name;
        void (*fn)(void);
        const char *what;
    } cases[] = {
        {"an arena block", grow_arena, "out of memory: an arena block (the step's activations) of "},
        {"the tape's scratch", grow_scratch, "out of memory: the tape's scratch buffer of 8589934592 bytes"},
        {"the grad region", grow_region, "out of memory: the gradient region of 8589934592 bytes"},
        {"a GEMM workspace", grow_workspace, "out of memory: a GEMM packing workspace of 8589934592 bytes"},
    };
    char err[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = in_capped_child(cases[i].fn, err, sizeof err);
        CHECK(rc == 1, "%s past the cap: exit %d, expected 1 (134: an abort)", cases[i].name, rc);
        CHECK(strstr(err, "vitrain: error: ") && strstr(err, cases[i].what) && strstr(err, "train.batch_size") &&
                  strstr(err, "eval.batch_size") && !strstr(err, "internal error"),
              "%s: the message names it, its size and the batch keys: %s", cases[i].name, err);
    }
    void (*reserves[2])(void) = {reserve_partials, reserve_shared_operand};
    for (int i = 0; i < 2; i++) {
        int rc = in_capped_child(reserves[i], err, sizeof err);
        CHECK(rc == 3 && strstr(err, "out of memory: the GEMM buffers of 2 threads") && strstr(err, "--threads") &&
                  strstr(err, "shared packed operands"),
              "vt_gemm_reserve past the cap (%s): exit %d, a status naming the buffers and the threads: %s",
              i ? "shared operand" : "partials", rc, err);
    }
}

static void test_reserve_covers_the_largest_product(void) {
    CHECK(vt_gemm_reserve(0, 0) == VT_OK, "vt_gemm_reserve(0, 0): %s", vt_last_error());
    float *reserved = vt_gemm_workspace(1);
    const int any = 1 << 30;
    size_t largest = vt_k.gemm_work_floats(any, any, any);
    CHECK(vt_gemm_workspace(largest) == reserved && vt_gemm_workspace(vt_k.gemm_bf16_work_floats(any, any, any)) ==
                                                        reserved,
          "the largest product's workspace (%zu floats) is the reserved buffer", largest);
}

int main(void) {
    if (test_kernels_init()) return 1;
    test_growth_fails_clearly();
    test_reserve_covers_the_largest_product();
    return test_summary();
}
