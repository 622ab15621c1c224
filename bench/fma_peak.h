/* fma_peak.h - the throughputs the benchmarks measure "peak" with, and the CPU's name
 * (bench only, not part of vitrain; header-only, included by bench_kernels.c and
 * bench_train.c).
 * peak_loop_avx512: 16 independent chains of 16-lane FMAs, 512 flops per iteration;
 * peak_loop_avx2: 12 independent chains of 8-lane FMAs, 192 flops per iteration;
 * peak_loop_dpbf16: 16 independent chains of VDPBF16PS (16 lanes x 2 multiply-adds),
 * 1024 flops per iteration: the bf16 peak of AVX512-BF16. The asm barriers keep the
 * compiler from merging chains; the return value is a sink.
 * fma_peak_gflops / bf16_peak_gflops: the loop on nt threads at once, GFLOP/s summed
 * over the threads from wall-clock time, best of 5 runs of ~40 ms after an untimed one
 * (a single short run can land on a moment the other core is busy or the thread team
 * is not yet up).
 * bench_cpu: "model name (family F, model M)" from /proc/cpuinfo, for every JSON line. */
#ifndef VT_BENCH_FMA_PEAK_H
#define VT_BENCH_FMA_PEAK_H

#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* 16 independent chains of VDPBF16PS: 1024 flops per iteration. */
__attribute__((target("avx512f,avx512bf16"), noinline)) static float peak_loop_dpbf16(long iters) {
    __m512i a = _mm512_set1_epi32(0x3f803f80), b = _mm512_set1_epi32(0x3c003c00);
    __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(1.0f), c2 = _mm512_set1_ps(2.0f),
           c3 = _mm512_set1_ps(3.0f), c4 = _mm512_set1_ps(4.0f), c5 = _mm512_set1_ps(5.0f),
           c6 = _mm512_set1_ps(6.0f), c7 = _mm512_set1_ps(7.0f), c8 = _mm512_set1_ps(8.0f),
           c9 = _mm512_set1_ps(9.0f), c10 = _mm512_set1_ps(10.0f), c11 = _mm512_set1_ps(11.0f),
           c12 = _mm512_set1_ps(12.0f), c13 = _mm512_set1_ps(13.0f), c14 = _mm512_set1_ps(14.0f),
           c15 = _mm512_set1_ps(15.0f);
#define PEAK_DP(c) c = _mm512_dpbf16_ps(c, (__m512bh)a, (__m512bh)b)
    for (long i = 0; i < iters; i++) {
        PEAK_DP(c0); PEAK_DP(c1); PEAK_DP(c2); PEAK_DP(c3); PEAK_DP(c4); PEAK_DP(c5); PEAK_DP(c6); PEAK_DP(c7);
        PEAK_DP(c8); PEAK_DP(c9); PEAK_DP(c10); PEAK_DP(c11); PEAK_DP(c12); PEAK_DP(c13); PEAK_DP(c14); PEAK_DP(c15);
        __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6),
                         "+v"(c7));
        __asm__ volatile("" : "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13), "+v"(c14),
                         "+v"(c15));
    }
#undef PEAK_DP
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                             _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                                       _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));
    return _mm512_reduce_add_ps(s);
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

static void bench_cpu(char *out, size_t len) {
    char name[128] = "unknown", line[256];
    int family = -1, model = -1;
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *v = strchr(line, ':');
        if (!v) continue;
        v += 1 + (v[1] == ' ');
        v[strcspn(v, "\n")] = '\0';
        if (!strncmp(line, "model name", 10) && !strcmp(name, "unknown")) snprintf(name, sizeof name, "%s", v);
        else if (!strncmp(line, "cpu family", 10) && family < 0) family = atoi(v);
        else if (!strncmp(line, "model\t", 6) && model < 0) model = atoi(v);
    }
    if (f) fclose(f);
    for (char *c = name; *c; c++)
        if (*c == '"' || *c == '\\') *c = ' ';
    snprintf(out, len, "%s (family %d, model %d)", name, family, model);
}

static double fma_peak_gflops(int avx512, int nt) {
    return avx512 ? peak_of(peak_loop_avx512, 512.0, nt) : peak_of(peak_loop_avx2, 192.0, nt);
}

#endif
