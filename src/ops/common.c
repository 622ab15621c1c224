/* common.c - helpers shared by the op files: row-wise adds (vt_op_add and the fused
 * residual adds) and deterministic column reductions over rows (bias, gamma,
 * broadcast-add gradients). Not an op, records nothing. Plain column
 * sums go through vt_k.axpy with a = 1 (an FMA by 1 rounds exactly like the add, so the
 * result does not depend on the ISA). */
#include <string.h>

#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"

#define ADD_CHUNK 16384 /* elements per parallel work item of vt_par_rows_add */

void vt_par_rows_add(const float *x, const float *z, float *y, int copy, int64_t outer, int64_t inner) {
    int64_t nc = (inner + ADD_CHUNK - 1) / ADD_CHUNK;
    #pragma omp parallel for schedule(static) if (outer * inner > ADD_CHUNK)
    for (int64_t w = 0; w < outer * nc; w++) {
        int64_t o = w / nc, s = (w % nc) * ADD_CHUNK, e = s + ADD_CHUNK < inner ? s + ADD_CHUNK : inner;
        if (z) vt_k.add(x + o * inner + s, z + s, y + o * inner + s, (size_t)(e - s));
        else if (copy) memcpy(y + o * inner + s, x + o * inner + s, (size_t)(e - s) * sizeof(float));
        else vt_k.axpy(1.0f, x + o * inner + s, y + o * inner + s, (size_t)(e - s));
    }
}

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
