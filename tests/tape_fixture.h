/* tape_fixture.h - test helper: the runtime shared by test_ops_grad.c and test_tape.c
 * (header-only; include from exactly one file per test binary).
 *
 * Provides the binary's step arena (arena, 64 KiB blocks, reset per step), the arena for
 * parameters and scratch that live across steps (store, 1 MiB blocks), the tape on the
 * step arena with its own rng for dropout-type ops (tape, tape_rng), tape_fixture_init
 * (kernel dispatch first) and tape_fixture_done.
 */
#ifndef VT_TEST_TAPE_FIXTURE_H
#define VT_TEST_TAPE_FIXTURE_H

#include "rng.h"
#include "tape.h"
#include "tensor.h"
#include "test_runtime.h"

static vt_arena arena, store;
static vt_tape tape;
static vt_rng tape_rng;

/* 0 on success, 1 (message printed) when the kernels cannot be initialised. */
static int tape_fixture_init(void) {
    if (test_runtime_init(&arena, 1 << 16, &tape) != 0) return 1;
    vt_arena_init(&store, 1 << 20);
    tape.rng = &tape_rng;
    return 0;
}

/* Frees what tape_fixture_init set up. */
static void tape_fixture_done(void) {
    test_runtime_done(&arena, &tape);
    vt_arena_free(&store);
}

#endif
