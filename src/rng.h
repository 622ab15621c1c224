/* rng.h - the one random number generator of vitrain.
 *
 * xoshiro256** seeded through splitmix64. The state is four uint64 words, so it is
 * saved in training state and a resumed run continues the exact stream.
 * vt_rng_derive() hashes (seed, a, b) into an independent seed: per-sample and
 * per-epoch streams come from it so results never depend on thread timing.
 */
#ifndef VT_RNG_H
#define VT_RNG_H

#include <stdint.h>

typedef struct { uint64_t s[4]; } vt_rng;

void vt_rng_seed(vt_rng *r, uint64_t seed);
uint64_t vt_rng_u64(vt_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double vt_rng_uniform(vt_rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t vt_rng_below(vt_rng *r, uint64_t n);
/* Standard normal (Box-Muller, no cached spare, so the state alone defines the stream). */
double vt_rng_normal(vt_rng *r);
/* Normal(0, std^2) truncated to [lo, hi] by rejection (timm's trunc_normal_ bounds are
 * absolute: lo = -2, hi = 2 for std 0.02). */
double vt_rng_trunc_normal(vt_rng *r, double std, double lo, double hi);
/* A seed derived from (seed, a, b) by hashing: independent streams per epoch/sample. */
uint64_t vt_rng_derive(uint64_t seed, uint64_t a, uint64_t b);
/* Position pos (0 <= pos < n) of a pseudo-random permutation of [0, n) chosen by key,
 * computed alone in O(1) memory: a 6-round balanced Feistel network over the smallest
 * 4^h >= n values, walking the cycle until it lands below n (fewer than 4 steps on
 * average). A bijection of [0, n) for every key and n >= 1. */
int64_t vt_rng_permute(uint64_t key, int64_t n, int64_t pos);

#endif
