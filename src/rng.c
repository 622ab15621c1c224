/* rng.c - xoshiro256** (Blackman & Vigna) with splitmix64 seeding. */
#include "rng.h"

#include <math.h>

#include "status.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void vt_rng_seed(vt_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t vt_rng_u64(vt_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double vt_rng_uniform(vt_rng *r) { return (double)(vt_rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t vt_rng_below(vt_rng *r, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = vt_rng_u64(r); while (x >= limit);
    return x % n;
}

double vt_rng_normal(vt_rng *r) {
    double u1 = 1.0 - vt_rng_uniform(r); /* (0, 1]: log is finite */
    double u2 = vt_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double vt_rng_trunc_normal(vt_rng *r, double std, double lo, double hi) {
    for (;;) {
        double x = std * vt_rng_normal(r);
        if (x >= lo && x <= hi) return x;
    }
}

uint64_t vt_rng_derive(uint64_t seed, uint64_t a, uint64_t b) {
    uint64_t x = seed ^ 0x5851F42D4C957F2Dull;
    uint64_t h = splitmix64(&x);
    x = h ^ (a * 0xD6E8FEB86659FD93ull);
    h = splitmix64(&x);
    x = h ^ (b * 0xA0761D6478BD642Full);
    return splitmix64(&x);
}

/* The Feistel round function: a splitmix64 finalizer of (key, round, half). */
static uint64_t feistel_round(uint64_t key, int round, uint64_t half) {
    uint64_t z = key ^ ((uint64_t)(round + 1) * 0x9E3779B97F4A7C15ull) ^ (half * 0xD6E8FEB86659FD93ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int64_t vt_rng_permute(uint64_t key, int64_t n, int64_t pos) {
    VT_ASSERT(n >= 1 && n <= ((int64_t)1 << 62) && pos >= 0 && pos < n,
              "permutation position %lld of %lld", (long long)pos, (long long)n);
    int h = 1;
    while (h < 31 && ((int64_t)1 << (2 * h)) < n) h++;
    const uint64_t mask = ((uint64_t)1 << h) - 1;
    uint64_t x = (uint64_t)pos;
    do {
        uint64_t l = x >> h, r = x & mask;
        for (int round = 0; round < 6; round++) {
            uint64_t t = l ^ (feistel_round(key, round, r) & mask);
            l = r;
            r = t;
        }
        x = l << h | r;
    } while (x >= (uint64_t)n);
    return (int64_t)x;
}
