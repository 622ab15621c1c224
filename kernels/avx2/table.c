/* avx2/table.c - the AVX2+FMA level: overrides every entry of the table. */
#include "../kernels.h"
#include "avx2.h"

void vt_kernels_fill_avx2(vt_kernels *t) {
    t->isa = VT_ISA_AVX2;
    t->name = "avx2";
    t->gemm = vt_avx2_gemm;
    t->gemm_bias = vt_avx2_gemm_bias;
    t->gemm_prefetch = vt_avx2_gemm_prefetch;
    t->gemm_work_floats = vt_avx2_gemm_work_floats;
    t->softmax_rows = vt_avx2_softmax_rows;
    t->softmax_bwd_rows = vt_avx2_softmax_bwd_rows;
    t->layernorm_fwd = vt_avx2_layernorm_fwd;
    t->layernorm_bwd = vt_avx2_layernorm_bwd;
    t->gelu_fwd = vt_avx2_gelu_fwd;
    t->gelu_bwd = vt_avx2_gelu_bwd;
    t->gelu_bwd_fwd = vt_avx2_gelu_bwd_fwd;
    t->add = vt_avx2_add;
    t->scale = vt_avx2_scale;
    t->zero_stream = vt_avx2_zero_stream;
    t->copy_stream = vt_avx2_copy_stream;
    t->axpy = vt_avx2_axpy;
    t->sum = vt_avx2_sum;
    t->dot = vt_avx2_dot;
    t->max = vt_avx2_max;
    t->rot_pairs = vt_avx2_rot_pairs;
    t->rot_pairs_bwd = vt_avx2_rot_pairs_bwd;
    t->rot_pairs_bwd_cs = vt_avx2_rot_pairs_bwd_cs;
    t->matmul_f64 = vt_avx2_matmul_f64;
    t->feature_exp = vt_avx2_feature_exp;
    t->feature_grad = vt_avx2_feature_grad;
    t->adamw = vt_avx2_adamw;
}
