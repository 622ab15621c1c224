/* rng.c - xoshiro256** (Blackman & Vigna) with splitmix64 seeding. */
#include "rng.h"

#include <math.h>

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
