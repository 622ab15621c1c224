/* test_runtime.h - test helper: the start-up every tape-based test binary does
 * (header-only). test_runtime_init selects the kernels (test_util.h) and puts a tape on a
 * fresh arena; test_runtime_done frees both.
 */
#ifndef VT_TEST_RUNTIME_H
#define VT_TEST_RUNTIME_H

#include <stddef.h>
#include <stdio.h>

#include "kernels.h"
#include "tape.h"
#include "tensor.h"
#include "test_util.h"

/* Kernels, then arena (blocks of `block` bytes) with tape on it. Returns 0, or 1 after
 * printing why when the kernels cannot be initialised. */
static int test_runtime_init(vt_arena *arena, size_t block, vt_tape *tape) {
    if (test_kernels_init()) return 1;
    vt_arena_init(arena, block);
    vt_tape_init(tape, arena);
    return 0;
}

/* Frees the tape and then its arena. */
static void test_runtime_done(vt_arena *arena, vt_tape *tape) {
    vt_tape_free(tape);
    vt_arena_free(arena);
}

#endif
