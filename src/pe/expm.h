/* expm.h - the matrix exponential in float64 and its exact backward (LieRE,
 * position-encodings.md 2.6; also the dense oracle of the circulant tests).
 *
 * Owns: scaling and squaring with a Taylor series whose length is chosen from the
 * norm (evaluated by Paterson-Stockmeyer: about 2 sqrt(m) products for degree m), the
 * Frechet derivative by the same scaling and squaring on the block matrix
 * [[X, E], [0, X]] (done blockwise, never forming the 2n x 2n matrix), and the
 * gradient dL/dA = L(A^T, dL/dexpm(A)). Does not own any tensor, tape or thread: the
 * caller passes workspace and runs these per matrix (they are safe to call from many
 * threads on disjoint workspaces). Row-major n x n matrices.
 *
 * Error bound. s = the smallest integer >= 0 with ||A||_1 / 2^s <= 1/2; X = A / 2^s.
 * The Taylor sum of exp(X) stops at the first degree m with ||X||^(m+1) / (m+1)! <=
 * 2^-56 (m <= 15); since ||X|| <= 1/2 the omitted tail is below 2^-55, i.e. under the
 * float64 rounding of the result. s squarings follow. For the skew-symmetric matrices
 * of LieRE (orthogonal exponentials, every power of norm 1 in the 2-norm) the total error is
 * about (2^s + n) * 2^-52 relative; with ||A||_1 up to 1e3 (s = 11) that is below 1e-12,
 * far under the float32 the results are used in. The Frechet series is cut the same way
 * (its k-th term is bounded by ||E|| ||X||^(k-1) / (k-1)!, stopped at 2^-56 ||E||;
 * m <= 16).
 */
#ifndef VT_PE_EXPM_H
#define VT_PE_EXPM_H

#include <stddef.h>

/* Doubles of workspace vt_expm needs for an n x n matrix. */
size_t vt_expm_work_doubles(int n);

/* E = expm(A), A and E n x n (E must not alias A). work: vt_expm_work_doubles(n). */
void vt_expm(const double *A, int n, double *E, double *work);

/* Doubles of workspace vt_expm_frechet / vt_expm_backward need. */
size_t vt_expm_frechet_work_doubles(int n);

/* The Frechet derivative of expm at A in direction Edir:
 * Lout = d/dt expm(A + t Edir) at t = 0 (upper-right block of expm([[A, Edir], [0, A]])).
 * If expA is not NULL it also receives expm(A). No aliasing between outputs and inputs. */
void vt_expm_frechet(const double *A, const double *Edir, int n, double *Lout, double *expA,
                     double *work);

/* Gradient of a scalar loss through F = expm(A): given G = dL/dF, dA = dL/dA =
 * L(A^T, G) (the upper-right block of expm([[A^T, G], [0, A^T]])). dA is overwritten. */
void vt_expm_backward(const double *A, const double *G, int n, double *dA, double *work);

#endif
