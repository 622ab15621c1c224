/* synthetic.h - what the synthetic format (synthetic.c) offers beyond its descriptor in
 * the registry (formats.h): the class patterns its samples are drawn from.
 */
#ifndef VT_DATA_SYNTHETIC_H
#define VT_DATA_SYNTHETIC_H

#include <stdint.h>

/* The synthetic class pattern k, channel ch: p x p floats, zero mean and unit standard
 * deviation (for tests, and to see what the generator draws). */
void vt_synthetic_pattern(uint64_t seed, int k, int ch, int p, float *out);

#endif
