/* avx512bf16/bf16.c - bf16_round on VCVTNEPS2BF16 (kernels.h: bf16 rounding), 16 floats a
 * step, the tail under a mask, prefetching ahead (../prefetch.h: the weights' copies
 * stream every parameter once per optimizer step). */
#include "avx512bf16.h"
#include "../prefetch.h"

void vt_avx512bf16_bf16_round(const float *x, vt_bf16 *y, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        vt_storeu_bf16(y + i, k, vt_cvtneps(_mm512_maskz_loadu_ps(k, x + i)));
    }
}
