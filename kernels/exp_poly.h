/* exp_poly.h - the constants of the vector exp of avx2/avx2.h (vt256_exp) and
 * avx512/avx512.h (vt512_exp): one approximation at two widths, so the two give bitwise
 * the same values. e^x for x in [VT_EXP_LO, VT_EXP_HI]; below VT_EXP_LO (incl. -inf) 0,
 * above VT_EXP_HI e^88, NaN stays NaN. Cephes-style: n = round(x log2 e), r = x - n ln2
 * (ln2 in two parts, the high one exact in float), e^r = 1 + r + r^2 p(r) with p the
 * degree-5 polynomial of vt_exp_coef (highest power first, Horner), times 2^n. Max
 * relative error 1.2e-7 in range (test_kernels' softmax tolerance allows for it). The two
 * functions stay written out per width, line for line alike: their clamp masks and 2^n
 * differ (AVX-512 mask registers and scalef, AVX2 blends and the exponent field), and a
 * macro over both intrinsic families would hide that. Private to kernels/. */
#ifndef VT_KERNELS_EXP_POLY_H
#define VT_KERNELS_EXP_POLY_H

#define VT_EXP_HI 88.0f
#define VT_EXP_LO -87.33f /* just above ln(FLT_MIN) = -87.3365: below, 0 */
#define VT_EXP_LOG2E 1.44269504088896341f
#define VT_EXP_LN2_HI 0.693359375f
#define VT_EXP_LN2_LO -2.12194440e-4f

static const float vt_exp_coef[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                     4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

#endif
