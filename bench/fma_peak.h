/* fma_peak.h - the throughputs the benchmarks measure "peak" with (bench only, not part of
 * vitrain; header-only, included by bench_kernels.c and bench_train.c, with the helpers
 * of bench_util.h).
 * peak_loop_avx512: 16 independent chains of 16-lane FMAs, 512 flops per iteration;
 * peak_loop_avx2: 12 independent chains of 8-lane FMAs, 192 flops per iteration;
 * peak_loop_dpbf16: 16 independent chains of VDPBF16PS (16 lanes x 2 multiply-adds),
 * 1024 flops per iteration: the bf16 peak of AVX512-BF16. Distinct starting values and
 * the asm barriers keep the compiler from merging chains; the return value is a sink.
 * fma_peak_gflops / bf16_peak_gflops: the loop on nt threads at once, GFLOP/s summed
 * over the threads from wall-clock time, best of 5 runs of ~40 ms after an untimed one
 * (a single short run can land on a moment the other core is busy or the thread team
 * is not yet up). */
#ifndef VT_BENCH_FMA_PEAK_H
#define VT_BENCH_FMA_PEAK_H

#include <immintrin.h>
#include <omp.h>

#include "bench_util.h"

/* The 512-bit peak loops' 16 chains c[0..15]: their start (0, 1, ..., 15), the barrier
 * that keeps them apart after each step, and their sum. */
__attribute__((target("avx512f"), always_inline)) static inline void peak_start16(__m512 c[16]) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) c[j] = _mm512_set1_ps((float)j);
}
#define PEAK_BARRIER16(c)                                                                                      \
    do {                                                                                                       \
        __asm__ volatile("" : "+v"(c[0]), "+v"(c[1]), "+v"(c[2]), "+v"(c[3]), "+v"(c[4]), "+v"(c[5]),           \
                         "+v"(c[6]), "+v"(c[7]));                                                              \
        __asm__ volatile("" : "+v"(c[8]), "+v"(c[9]), "+v"(c[10]), "+v"(c[11]), "+v"(c[12]), "+v"(c[13]),       \
                         "+v"(c[14]), "+v"(c[15]));                                                            \
    } while (0)
__attribute__((target("avx512f"), always_inline)) static inline float peak_sum16(const __m512 c[16]) {
    __m512 s = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) s = _mm512_add_ps(s, c[j]);
    return _mm512_reduce_add_ps(s);
}

/* A 512-bit peak loop `name` (compiled for target isa): c[j] = STEP(c[j], a, b) on the
 * 16 chains per iteration, a and b the constant operands A0 and B0. */
#define PEAK_LOOP16(name, isa, A0, B0, STEP)                                                                   \
    __attribute__((target(isa), noinline)) static float name(long iters) {                                   \
        const __typeof__(A0) a = A0, b = B0;                                                                   \
        __m512 c[16];                                                                                          \
        peak_start16(c);                                                                                       \
        for (long i = 0; i < iters; i++) {                                                                     \
            _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) c[j] = STEP(c[j], a, b);                      \
            PEAK_BARRIER16(c);                                                                                 \
        }                                                                                                      \
        return peak_sum16(c);                                                                                  \
    }

__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline __m512 peak_dpbf16(__m512 c, __m512i a,
                                                                                            __m512i b) {
    return _mm512_dpbf16_ps(c, (__m512bh)a, (__m512bh)b);
}

PEAK_LOOP16(peak_loop_avx512, "avx512f", _mm512_set1_ps(0.999999f), _mm512_set1_ps(1e-7f), _mm512_fmadd_ps)
PEAK_LOOP16(peak_loop_dpbf16, "avx512f,avx512bf16", _mm512_set1_epi32(0x3f803f80), _mm512_set1_epi32(0x3c003c00),
            peak_dpbf16)

/* 12 independent chains of 8-lane FMAs (16 would not fit the 16 ymm registers with a, b). */
__attribute__((target("avx2,fma"), noinline)) static float peak_loop_avx2(long iters) {
    __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    __m256 c0 = _mm256_set1_ps(0.0f), c1 = _mm256_set1_ps(1.0f), c2 = _mm256_set1_ps(2.0f),
           c3 = _mm256_set1_ps(3.0f), c4 = _mm256_set1_ps(4.0f), c5 = _mm256_set1_ps(5.0f),
           c6 = _mm256_set1_ps(6.0f), c7 = _mm256_set1_ps(7.0f), c8 = _mm256_set1_ps(8.0f),
           c9 = _mm256_set1_ps(9.0f), c10 = _mm256_set1_ps(10.0f), c11 = _mm256_set1_ps(11.0f);
    for (long i = 0; i < iters; i++) {
        c0 = _mm256_fmadd_ps(c0, a, b); c1 = _mm256_fmadd_ps(c1, a, b);
        c2 = _mm256_fmadd_ps(c2, a, b); c3 = _mm256_fmadd_ps(c3, a, b);
        c4 = _mm256_fmadd_ps(c4, a, b); c5 = _mm256_fmadd_ps(c5, a, b);
        c6 = _mm256_fmadd_ps(c6, a, b); c7 = _mm256_fmadd_ps(c7, a, b);
        c8 = _mm256_fmadd_ps(c8, a, b); c9 = _mm256_fmadd_ps(c9, a, b);
        c10 = _mm256_fmadd_ps(c10, a, b); c11 = _mm256_fmadd_ps(c11, a, b);
        __asm__ volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5), "+x"(c6),
                         "+x"(c7), "+x"(c8), "+x"(c9), "+x"(c10), "+x"(c11));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[7];
}

#define FMA_PEAK_ITERS 20000000L

/* The best GFLOP/s of loop (flops per iteration) on nt threads over 5 runs. */
static double peak_of(float (*loop)(long), double flops, int nt) {
    double best = 0;
    for (int r = -1; r < 5; r++) { /* r = -1: untimed, starts the thread team and the clocks */
        volatile float sink = 0;
        double t0 = bench_now();
        #pragma omp parallel num_threads(nt)
        {
            float s = loop(FMA_PEAK_ITERS);
            #pragma omp atomic
            sink += s;
        }
        double dt = bench_now() - t0;
        double gf = (double)nt * FMA_PEAK_ITERS * flops / dt * 1e-9;
        if (r >= 0 && gf > best) best = gf;
    }
    return best;
}

/* The bf16 (VDPBF16PS) peak on nt threads; call only where the CPU has AVX512-BF16. */
static double bf16_peak_gflops(int nt) { return peak_of(peak_loop_dpbf16, 1024.0, nt); }

static double fma_peak_gflops(int avx512, int nt) {
    return avx512 ? peak_of(peak_loop_avx512, 512.0, nt) : peak_of(peak_loop_avx2, 192.0, nt);
}

#endif
