/* test_timm.c - timm's own models load directly and give timm's logits.
 *
 * Fixtures (tests/fixtures/timm, made by scripts/make_timm_fixtures.py with timm; see
 * there): NAME.safetensors is a timm state_dict as safetensors.torch.save_file writes it,
 * NAME.ref.safetensors holds images and timm's logits at each evaluated size and, in
 * __metadata__["config"], the vitrain config of the same model. For each fixture with a
 * config: the model built from it loads NAME.safetensors strictly (timm names and layouts:
 * VisionTransformer, Eva with gamma_1/gamma_2, q_bias/v_bias, rope.freqs, pos_embed without
 * class-token row; BF16 and F16 data) and its logits equal timm's at every size (16 px, the
 * training grid, and 24 px: RoPE extrapolation). The 'ij' fixtures (Eva's default
 * indexing) are readable only through scripts/timm_convert.py (tests/e2e_timm.c): loaded
 * directly under our 'xy' convention their logits must differ, which shows the fixture
 * tells the conventions apart.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "config.h"
#include "resolve.h"
#include "harness.h"
#include "test_util.h"
#include "kernels.h"
#include "tape.h"
#include "tensor.h"
#include "vit.h"
#include "vit_fixture.h"
#include "weights.h"

#define DIR "tests/fixtures/timm/"
#define ATOL 2e-5
#define RTOL 2e-5

static double worst_rel = 0.0;

/* Max |a - b| over n, and whether every element is within ATOL + RTOL |b|. */
static int close_all(const float *a, const float *b, int64_t n, double *maxd) {
    int ok = 1;
    *maxd = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > *maxd) *maxd = d;
        if (!(d <= ATOL + RTOL * fabs((double)b[i]))) ok = 0;
    }
    return ok;
}

/* Logits of m against every output.logits_S of ref; returns the max |diff| seen. */
static double compare_sizes(const char *name, vt_vit *m, const vt_safetensors *ref, int expect_equal) {
    double worst = 0;
    int sizes = 0;
    for (int i = 0; i < ref->n; i++) {
        const vt_st_tensor *want = &ref->tensors[i];
        int S;
        if (sscanf(want->name, "output.logits_%d", &S) != 1) continue;
        char iname[64];
        snprintf(iname, sizeof iname, "input.images_%d", S);
        const vt_st_tensor *img = vt_st_find(ref, iname);
        CHECK(img && img->ndim == 4 && img->shape[3] == S, "%s: %s present", name, iname);
        if (!img) continue;
        float *got = vit_infer(m, img->data, img->shape, NULL);
        double d;
        int ok = close_all(got, want->data, want->size, &d);
        double scale = 0;
        for (int64_t k = 0; k < want->size; k++) scale = fmax(scale, fabs(want->data[k]));
        if (expect_equal) {
            CHECK(ok, "%s at %d px: logits differ from timm's by up to %.3g (max |logit| %.3g)", name, S, d, scale);
            worst_rel = fmax(worst_rel, d / scale);
            fprintf(stderr, "  %s at %d px: max |vitrain - timm| %.3g (max |logit| %.3g)\n", name, S, d, scale);
        }
        worst = fmax(worst, d);
        sizes++;
        free(got);
    }
    CHECK(sizes >= 1, "%s: reference has logits", name);
    return worst;
}

static void check_fixture(const char *name, const char *want_dtype) {
    char path[256], rpath[256];
    snprintf(path, sizeof path, DIR "%s.safetensors", name);
    snprintf(rpath, sizeof rpath, DIR "%s.ref.safetensors", name);
    vt_safetensors ref, st;
    if (vt_st_read(rpath, &ref) != VT_OK) {
        CHECK(0, "%s: %s", name, vt_last_error());
        return;
    }
    CHECK(vt_st_read(path, &st) == VT_OK, "%s: %s", name, vt_last_error());
    int dtype_ok = st.n > 0;
    for (int i = 0; i < st.n; i++) dtype_ok &= strcmp(st.tensors[i].dtype, want_dtype) == 0;
    CHECK(dtype_ok, "%s: stored as %s", name, want_dtype);
    CHECK(vt_st_find(&st, "pos_embed") || vt_st_find(&st, "rope.freqs") || strstr(name, "axial"),
          "%s: has its PE tensors", name);
    vt_st_free(&st);
    const char *cfg_json = vt_st_meta(&ref, "config");
    CHECK(cfg_json != NULL, "%s: reference names the vitrain config", name);
    vt_config cfg;
    vt_vit m;
    if (cfg_json && vt_resolve_json(&cfg, cfg_json, rpath) == VT_OK && vit_init_config(&m, &cfg, 1) == VT_OK) {
        vt_status s = vt_vit_load(&m, path);
        CHECK(s == VT_OK, "%s: timm file loads directly: %s", name, vt_last_error());
        if (s == VT_OK) compare_sizes(name, &m, &ref, 1);
        vt_vit_free(&m);
    } else {
        CHECK(0, "%s: config: %s", name, vt_last_error());
    }
    vt_st_free(&ref);
}

/* An Eva model with 'ij' indexing loaded under our 'xy' convention: wrong logits. */
static void check_ij_differs(const char *name, const char *config_json) {
    char path[256], rpath[256];
    snprintf(path, sizeof path, DIR "%s.safetensors", name);
    snprintf(rpath, sizeof rpath, DIR "%s.ref.safetensors", name);
    vt_safetensors ref;
    vt_config cfg;
    vt_vit m;
    if (vt_st_read(rpath, &ref) != VT_OK || vt_resolve_json(&cfg, config_json, name) != VT_OK ||
        vit_init_config(&m, &cfg, 1) != VT_OK) {
        CHECK(0, "%s: %s", name, vt_last_error());
        return;
    }
    CHECK(vt_st_meta(&ref, "config") == NULL, "%s: no direct config ('ij' needs the converter)", name);
    CHECK(vt_vit_load(&m, path) == VT_OK, "%s: loads (names and shapes match): %s", name, vt_last_error());
    double d = compare_sizes(name, &m, &ref, 0);
    CHECK(d > 1e-2, "%s: 'ij' weights under 'xy' give other logits (max diff %.3g)", name, d);
    vt_vit_free(&m);
    vt_st_free(&ref);
}

int main(void) {
    if (test_kernels_init()) return 1;
    check_fixture("vit_ape", "F32");
    check_fixture("vit_ape_avg_bf16", "BF16");
    check_fixture("eva_rope_axial", "F32");
    check_fixture("eva_rope_mixed_f16", "F16");
    check_fixture("eva_rope_mixed_ape", "F32");
    check_ij_differs("eva_rope_axial_ij",
                     "{\"model\": {\"width\": 32, \"depth\": 2, \"heads\": 2, \"mlp_ratio\": 2, \"patch_size\": 4, "
                     "\"img_size\": 16, \"in_chans\": 3, \"num_classes\": 5, \"pool\": \"avg\"}, "
                     "\"pe\": {\"kind\": \"rope_axial\", \"theta\": 10000}}");
    check_ij_differs("eva_rope_mixed_ij",
                     "{\"model\": {\"width\": 32, \"depth\": 2, \"heads\": 2, \"mlp_ratio\": 2, \"patch_size\": 4, "
                     "\"img_size\": 16, \"in_chans\": 3, \"num_classes\": 5}, "
                     "\"pe\": {\"kind\": \"rope_mixed\", \"share\": \"none\"}}");
    fprintf(stderr, "  worst relative logit difference vitrain vs timm: %.3g\n", worst_rel);
    return test_summary();
}
