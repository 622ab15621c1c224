/* avx512/table.c - the AVX-512 level: overrides every entry of the table. Its name is
 * "avx512-emulated" in the SIMDe test build (VT_AVX512_EMULATED, see emulated.h). */
#include "../kernels.h"
#include "avx512.h"

void vt_kernels_fill_avx512(vt_kernels *t) {
    t->isa = VT_ISA_AVX512;
#ifdef VT_AVX512_EMULATED
    t->name = "avx512-emulated";
#else
    t->name = "avx512";
#endif
    t->gemm = vt_avx512_gemm;
    t->gemm_bias = vt_avx512_gemm_bias;
    t->gemm_prefetch = vt_avx512_gemm_prefetch;
    t->gemm_work_floats = vt_avx512_gemm_work_floats;
    t->softmax_rows = vt_avx512_softmax_rows;
    t->softmax_bwd_rows = vt_avx512_softmax_bwd_rows;
    t->layernorm_fwd = vt_avx512_layernorm_fwd;
    t->layernorm_bwd = vt_avx512_layernorm_bwd;
    t->gelu_fwd = vt_avx512_gelu_fwd;
    t->gelu_bwd = vt_avx512_gelu_bwd;
    t->gelu_bwd_fwd = vt_avx512_gelu_bwd_fwd;
    t->add = vt_avx512_add;
    t->scale = vt_avx512_scale;
    t->zero_stream = vt_avx512_zero_stream;
    t->copy_stream = vt_avx512_copy_stream;
    t->axpy = vt_avx512_axpy;
    t->sum = vt_avx512_sum;
    t->dot = vt_avx512_dot;
    t->max = vt_avx512_max;
    t->rot_pairs = vt_avx512_rot_pairs;
    t->rot_pairs_bwd = vt_avx512_rot_pairs_bwd;
    t->rot_pairs_bwd_cs = vt_avx512_rot_pairs_bwd_cs;
    t->matmul_f64 = vt_avx512_matmul_f64;
    t->feature_exp = vt_avx512_feature_exp;
    t->feature_grad = vt_avx512_feature_grad;
    t->adamw = vt_avx512_adamw;
}
