/* fma_peak.h - the FMA throughput the benchmarks measure "peak" with (bench only, not
 * part of vitrain; header-only, included by bench_kernels.c and bench_train.c).
 * peak_loop_avx512: 16 independent chains of 16-lane FMAs, 512 flops per iteration;
 * peak_loop_avx2: 12 independent chains of 8-lane FMAs, 192 flops per iteration. The asm
 * barriers keep the compiler from merging chains; the return value is a sink.
 * fma_peak_gflops: the loop on nt threads at once, GFLOP/s summed over the threads from
 * wall-clock time, best of 5 runs of ~40 ms after an untimed one (a single short run
 * can land on a moment the other core is busy or the thread team is not yet up). */
#ifndef VT_BENCH_FMA_PEAK_H
#define VT_BENCH_FMA_PEAK_H

#include <immintrin.h>
#include <omp.h>
#include <time.h>

/* Wall-clock seconds (CLOCK_MONOTONIC). */
static double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 16 independent chains of 16-lane FMAs: 512 flops per iteration. */
__attribute__((target("avx512f"), noinline)) static float peak_loop_avx512(long iters) {
    __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    /* distinct starting values and the asm barrier keep the compiler from merging chains */
    __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(1.0f), c2 = _mm512_set1_ps(2.0f),
           c3 = _mm512_set1_ps(3.0f), c4 = _mm512_set1_ps(4.0f), c5 = _mm512_set1_ps(5.0f),
           c6 = _mm512_set1_ps(6.0f), c7 = _mm512_set1_ps(7.0f), c8 = _mm512_set1_ps(8.0f),
           c9 = _mm512_set1_ps(9.0f), c10 = _mm512_set1_ps(10.0f), c11 = _mm512_set1_ps(11.0f),
           c12 = _mm512_set1_ps(12.0f), c13 = _mm512_set1_ps(13.0f), c14 = _mm512_set1_ps(14.0f),
           c15 = _mm512_set1_ps(15.0f);
    for (long i = 0; i < iters; i++) {
        c0 = _mm512_fmadd_ps(c0, a, b); c1 = _mm512_fmadd_ps(c1, a, b);
        c2 = _mm512_fmadd_ps(c2, a, b); c3 = _mm512_fmadd_ps(c3, a, b);
        c4 = _mm512_fmadd_ps(c4, a, b); c5 = _mm512_fmadd_ps(c5, a, b);
        c6 = _mm512_fmadd_ps(c6, a, b); c7 = _mm512_fmadd_ps(c7, a, b);
        c8 = _mm512_fmadd_ps(c8, a, b); c9 = _mm512_fmadd_ps(c9, a, b);
        c10 = _mm512_fmadd_ps(c10, a, b); c11 = _mm512_fmadd_ps(c11, a, b);
        c12 = _mm512_fmadd_ps(c12, a, b); c13 = _mm512_fmadd_ps(c13, a, b);
        c14 = _mm512_fmadd_ps(c14, a, b); c15 = _mm512_fmadd_ps(c15, a, b);
        __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6),
                         "+v"(c7));
        __asm__ volatile("" : "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13), "+v"(c14),
                         "+v"(c15));
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                                       _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));
    return _mm512_reduce_add_ps(s);
}

/* 12 independent chains of 8-lane FMAs: 192 flops per iteration. */
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

static double fma_peak_gflops(int avx512, int nt) {
    double best = 0;
    for (int r = -1; r < 5; r++) { /* r = -1: untimed, starts the thread team and the clocks */
        volatile float sink = 0;
        double t0 = bench_now();
        #pragma omp parallel num_threads(nt)
        {
            float s = avx512 ? peak_loop_avx512(FMA_PEAK_ITERS) : peak_loop_avx2(FMA_PEAK_ITERS);
            #pragma omp atomic
            sink += s;
        }
        double dt = bench_now() - t0;
        double gf = (double)nt * FMA_PEAK_ITERS * (avx512 ? 512.0 : 192.0) / dt * 1e-9;
        if (r >= 0 && gf > best) best = gf;
    }
    return best;
}

#endif
