/* scalar/table.c - the scalar level of the dispatch table: every entry. */
#include "../kernels.h"
#include "scalar.h"

void vt_kernels_fill_scalar(vt_kernels *t) {
    t->isa = VT_ISA_SCALAR;
    t->name = "scalar";
    t->gemm = vt_scalar_gemm;
    t->gemm_bias = vt_scalar_gemm_bias;
    t->gemm_prefetch = vt_scalar_gemm_prefetch;
    t->gemm_work_floats = vt_scalar_gemm_work_floats;
    t->softmax_rows = vt_scalar_softmax_rows;
    t->softmax_bwd_rows = vt_scalar_softmax_bwd_rows;
    t->layernorm_fwd = vt_scalar_layernorm_fwd;
    t->layernorm_bwd = vt_scalar_layernorm_bwd;
    t->gelu_fwd = vt_scalar_gelu_fwd;
    t->gelu_bwd = vt_scalar_gelu_bwd;
    t->gelu_bwd_fwd = vt_scalar_gelu_bwd_fwd;
    t->add = vt_scalar_add;
    t->scale = vt_scalar_scale;
    t->zero_stream = vt_scalar_zero_stream;
    t->copy_stream = vt_scalar_copy_stream;
    t->axpy = vt_scalar_axpy;
    t->sum = vt_scalar_sum;
    t->dot = vt_scalar_dot;
    t->max = vt_scalar_max;
    t->rot_pairs = vt_scalar_rot_pairs;
    t->rot_pairs_bwd = vt_scalar_rot_pairs_bwd;
    t->rot_pairs_bwd_cs = vt_scalar_rot_pairs_bwd_cs;
    t->matmul_f64 = vt_scalar_matmul_f64;
    t->feature_exp = vt_scalar_feature_exp;
    t->feature_grad = vt_scalar_feature_grad;
    t->adamw = vt_scalar_adamw;
}
