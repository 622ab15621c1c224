/* common.c - helpers shared by the op files: deterministic column reductions over
 * rows (bias, gamma, broadcast-add gradients). Not an op, records nothing. Plain column
 * sums go through vt_k.axpy with a = 1 (an FMA by 1 rounds exactly like the add, so the
 * result does not depend on the ISA). */
#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"

int vt_par_nchunks(int64_t rows) {
    return rows < VT_PAR_MAX_CHUNKS ? (int)(rows > 0 ? rows : 1) : VT_PAR_MAX_CHUNKS;
}

int64_t vt_par_chunk_begin(int64_t rows, int nchunks, int c) {
    return rows * c / nchunks;
}

void vt_par_colsum_chunk(const float *x, const float *y, int64_t r0, int64_t r1, int64_t cols, float *p) {
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * cols;
        if (y) {
            const float *yr = y + r * cols;
            for (int64_t j = 0; j < cols; j++) p[j] += xr[j] * yr[j];
        } else {
            vt_k.axpy(1.0f, xr, p, (size_t)cols);
        }
    }
}

void vt_par_colsum_finish(const float *part, int nc, int64_t cols, float *out) {
    #pragma omp parallel for schedule(static) if (nc * cols > VT_PAR_MIN)
    for (int64_t j = 0; j < cols; j++) {
        float s = 0.0f;
        for (int c = 0; c < nc; c++) s += part[(size_t)c * cols + j];
        out[j] += s;
    }
}

void vt_par_colsum_acc(vt_arena *arena, const float *x, const float *y,
                       int64_t rows, int64_t cols, float *out) {
    if (rows <= 0 || cols <= 0) return;
    int nc = vt_par_nchunks(rows);
    float *part = vt_arena_calloc(arena, (size_t)nc * (size_t)cols * sizeof(float));
    #pragma omp parallel for schedule(static) if (rows * cols > VT_PAR_MIN)
    for (int c = 0; c < nc; c++)
        vt_par_colsum_chunk(x, y, vt_par_chunk_begin(rows, nc, c), vt_par_chunk_begin(rows, nc, c + 1), cols,
                            part + (size_t)c * cols);
    vt_par_colsum_finish(part, nc, cols, out);
}
