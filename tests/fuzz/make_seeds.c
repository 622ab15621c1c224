/* make_seeds.c - writes the seed corpora of tests/fuzz/corpus/<target>/ (run by
 * `scripts/fuzz.sh --seeds`, which rewrites the committed seeds; the fuzzers and the
 * replay test read them). Small valid inputs of each format, so the fuzzers start deep
 * inside the parsers instead of at their first check:
 *   safetensors  a tiny model's checkpoint (FUZZ_MODEL_JSON, with checksums), the same
 *                layout without checksums (as Python's safetensors writes), BF16 and F16
 *                tensors, an empty file; hostile headers (issue 38): an escaped NUL in a
 *                tensor name, a duplicate metadata key last among many, many checksum
 *                entries, a timm Eva "blocks.00" bias beside block 0's, a config declaring
 *                a model far larger than the file
 *   config       configs/synthetic_tiny.json's text, the defaults as printed, a config
 *                followed by --set assignments; an escaped NUL in a value and a key, an
 *                mlp_ratio whose hidden width is 0
 *   image        JPEGs (gray, color, Adobe CMYK, a CMYK scan cut inside a code) and PNGs
 *                (gray, RGB, 16-bit, 1-bit, palette with tRNS, gray+alpha, interlaced)
 *   cifar        two-record CIFAR-10, CIFAR-100 fine and coarse files
 *   idx          raw and gzip pairs of 3 images of 4 x 4 and their labels
 *   state        AdamW and SGD resume states of FUZZ_STATE_N moments
 *   tfevents     the step to resume at, then an event file: version, scalars of steps 1..6
 *                and a START; the same cut inside its last record
 */
#include <png.h>
#include <zlib.h>

#include "config.h"
#include "fuzz_util.h"
#include "image_fixtures.h"
#include "resolve.h"
#include "tfevents.h"
#include "train_state.h"
#include "vit.h"
#include "vit_fixture.h"

static char root[512];

static const char *seed_path(const char *target, const char *name) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", root, target);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/%s/%s", root, target, name);
    return p;
}

static void put_bytes(const char *target, const char *name, const void *data, size_t len) {
    FUZZ_CHECK(fx_write_bytes(seed_path(target, name), data, len) == 0, "write %s/%s", target, name);
}

static void seeds_safetensors(void) {
    vt_config cfg;
    vt_vit m;
    FUZZ_CHECK(vt_resolve_json(&cfg, FUZZ_MODEL_JSON, "seeds") == VT_OK, "%s", vt_last_error());
    FUZZ_CHECK(vit_init_config(&m, &cfg, 3) == VT_OK, "%s", vt_last_error());
    FUZZ_CHECK(vit_save_config(&m, &cfg, seed_path("safetensors", "model.safetensors")) == VT_OK, "%s",
               vt_last_error());
    vt_vit_free(&m);
    static const char json[] =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}   ";
    uint8_t file[8 + 144 + 16] = {0x90};
    memcpy(file + 8, json, 144);
    static const uint8_t data[16] = {0, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40};
    memcpy(file + 152, data, 16);
    put_bytes("safetensors", "python_layout.safetensors", file, sizeof file);
    put_bytes("safetensors", "empty.safetensors", "\x08\0\0\0\0\0\0\0{}      ", 16);
    /* BF16 and F16 tensors (the reader widens them to float32) */
    static const char half[] =
        "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[1,2],\"data_offsets\":[4,8]}}  ";
    uint8_t hf[8 + 112 + 8] = {112};
    FUZZ_CHECK(sizeof half - 1 == 112, "half header %zu bytes", sizeof half - 1);
    memcpy(hf + 8, half, 112);
    static const uint8_t hd[8] = {0x80, 0x3f, 0x00, 0xc0, 0x00, 0x3c, 0x01, 0x00}; /* 1, -2; 1, 2^-24 */
    memcpy(hf + 120, hd, 8);
    put_bytes("safetensors", "half.safetensors", hf, sizeof hf);
}

/* A safetensors file of header json (padded to 8) and data_bytes zero bytes. */
static void put_safetensors(const char *name, const char *json, size_t data_bytes) {
    size_t len = strlen(json), padded = (len + 7) / 8 * 8;
    uint8_t *f = calloc(8 + padded + data_bytes, 1);
    for (int b = 0; b < 8; b++) f[b] = (uint8_t)(padded >> (8 * b));
    memcpy(f + 8, json, len);
    memset(f + 8 + len, ' ', padded - len);
    put_bytes("safetensors", name, f, 8 + padded + data_bytes);
    free(f);
}

/* Headers built to make the reader slow or to slip a name past it (issue 38). */
static void seeds_hostile_safetensors(void) {
    put_safetensors("nul_name.safetensors",
                    "{\"head.bias\\u0000evil\":{\"dtype\":\"F32\",\"shape\":[1],"
                    "\"data_offsets\":[0,4]}}", 4);
    enum { N = 512 };
    char *j = malloc(N * 96 + 256);
    size_t at = (size_t)sprintf(j, "{\"__metadata__\":{");
    for (int i = 0; i < N; i++) at += (size_t)sprintf(j + at, "%s\"k%d\":\"v\"", i ? "," : "", i % (N - 1));
    sprintf(j + at, "},\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}");
    put_safetensors("duplicate_key_last.safetensors", j, 4);
    at = (size_t)sprintf(j, "{\"__metadata__\":{\"tensor_crc32\":\"{");
    for (int i = 0; i < N; i++) at += (size_t)sprintf(j + at, "%s\\\"t%d\\\":\\\"00000000\\\"", i ? "," : "", i);
    at += (size_t)sprintf(j + at, "}\"}");
    for (int i = 0; i < N; i++)
        at += (size_t)sprintf(j + at, ",\"t%d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", i);
    sprintf(j + at, "}");
    put_safetensors("many_checksums.safetensors", j, 0);
    free(j);
    put_safetensors("eva_block_00.safetensors",
                    "{\"blocks.0.attn.q_bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"blocks.0.attn.v_bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                    "\"blocks.00.attn.v_bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                    12);
    put_safetensors("declares_huge_model.safetensors",
                    "{\"__metadata__\":{\"config\":\"{\\\"model\\\":{\\\"width\\\":4096,"
                    "\\\"heads\\\":32,\\\"depth\\\":1024}}\"},"
                    "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
}

static void seeds_config(void) {
    size_t len;
    uint8_t *t = (uint8_t *)test_read_file("configs/synthetic_tiny.json", &len);
    FUZZ_CHECK(t != NULL, "configs/synthetic_tiny.json (run from the repository root)");
    put_bytes("config", "synthetic_tiny.json", t, len);
    /* the same config, then a NUL and --set assignments */
    static const char sets[] = "model.depth=1\npe.kind=rope_mixed\ntrain.keep_checkpoints=2\n"
                               "data.max_image_pixels=1000000\neval.resolutions=[8, 24]";
    uint8_t *both = malloc(len + 1 + sizeof sets);
    memcpy(both, t, len);
    both[len] = 0;
    memcpy(both + len + 1, sets, sizeof sets - 1);
    put_bytes("config", "with_sets", both, len + sizeof sets);
    free(both);
    free(t);
    vt_config c;
    vt_config_defaults(&c);
    char *j = vt_config_to_json(&c);
    put_bytes("config", "defaults.json", j, strlen(j));
    free(j);
    static const char preset[] = "{\"model\": {\"preset\": \"vit_tiny\", \"num_classes\": 10, "
                                 "\"attention\": \"performer\"}, \"pe\": {\"kind\": \"cayley\"}, "
                                 "\"data\": {\"kind\": \"cifar10\", \"root\": \"x\"}}";
    put_bytes("config", "preset.json", preset, sizeof preset - 1);
    static const char nul_value[] = "{\"train\": {\"run_dir\": \"runs/a\\u0000b\"}}";
    put_bytes("config", "nul_value.json", nul_value, sizeof nul_value - 1);
    static const char nul_key[] = "{\"train\": {\"run_dir\\u0000x\": \"a\"}}";
    put_bytes("config", "nul_key.json", nul_key, sizeof nul_key - 1);
    static const char mlp[] = "{\"model\": {\"width\": 32, \"heads\": 2, \"mlp_ratio\": 0.01}}";
    put_bytes("config", "mlp_ratio_zero_hidden.json", mlp, sizeof mlp - 1);
}

static void seeds_image(void) {
    fx_jpeg_pattern(seed_path("image", "gray.jpg"), 9, 7, 1, 50);
    fx_jpeg_pattern(seed_path("image", "color.jpg"), 17, 9, 3, 50);
    uint8_t cmyk[16 * 16 * 4];
    unsigned r = 1;
    for (int i = 0; i < 16 * 16 * 4; i++) {
        r = r * 1103515245u + 12345u;
        cmyk[i] = (r >> 16) & 1 ? 255 : 0;
    }
    const char *p = seed_path("image", "cmyk.jpg");
    FUZZ_CHECK(fx_write_jpeg(p, 16, 16, 4, cmyk, 100) == 0, "cmyk.jpg");
    size_t len;
    uint8_t *j = (uint8_t *)test_read_file(p, &len);
    size_t sos = 2;
    while (sos + 4 < len && !(j[sos] == 0xFF && j[sos + 1] == 0xDA)) sos++;
    size_t cut = sos + 2 + ((size_t)j[sos + 2] << 8 | j[sos + 3]) + 48;
    FUZZ_CHECK(cut + 2 < len, "cmyk scan");
    j[cut] = 0xFF;
    j[cut + 1] = 0xD9;
    put_bytes("image", "cmyk_cut.jpg", j, cut + 2);
    free(j);
    fx_png_pattern(seed_path("image", "gray.png"), 9, 7, 1);
    fx_png_pattern(seed_path("image", "rgb.png"), 9, 7, 3);
    uint16_t s16[6 * 5 * 3];
    for (int i = 0; i < 6 * 5 * 3; i++) s16[i] = (uint16_t)(i * 2011);
    fx_write_png(seed_path("image", "rgb16.png"), 6, 5, PNG_COLOR_TYPE_RGB, 16, s16, NULL, 0, NULL, 0, 0);
    uint8_t bits[11 * 4];
    for (int i = 0; i < 11 * 4; i++) bits[i] = (uint8_t)(i % 3 == 0);
    fx_write_png(seed_path("image", "gray1.png"), 11, 4, PNG_COLOR_TYPE_GRAY, 1, bits, NULL, 0, NULL, 0, 0);
    png_color pal[3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
    uint8_t idx[5 * 3], trns[1] = {128};
    for (int i = 0; i < 15; i++) idx[i] = (uint8_t)(i % 3);
    fx_write_png(seed_path("image", "palette.png"), 5, 3, PNG_COLOR_TYPE_PALETTE, 8, idx, pal, 3, trns, 1, 0);
    uint8_t ga[4 * 4 * 2];
    for (int i = 0; i < 32; i++) ga[i] = (uint8_t)(i * 9);
    fx_write_png(seed_path("image", "gray_alpha.png"), 4, 4, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga, NULL, 0, NULL, 0, 0);
    uint8_t rgb[9 * 9 * 3];
    fx_fill(rgb, 9, 9, 3);
    fx_write_png(seed_path("image", "interlaced.png"), 9, 9, PNG_COLOR_TYPE_RGB, 8, rgb, NULL, 0, NULL, 0, 1);
}

static void seeds_cifar(void) {
    for (int k = 0; k < 3; k++) {
        int c100 = k > 0, rec = c100 ? 3074 : 3073;
        size_t len = 1 + 2 * (size_t)rec;
        uint8_t *b = malloc(len);
        b[0] = (uint8_t)(k == 0 ? 0 : k == 1 ? 1 : 3); /* cifar10, cifar100 fine, coarse */
        for (size_t i = 1; i < len; i++) b[i] = (uint8_t)(i * 13);
        for (int r = 0; r < 2; r++) {
            b[1 + (size_t)r * rec] = (uint8_t)(r + 1);
            if (c100) b[2 + (size_t)r * rec] = (uint8_t)(r + 42);
        }
        put_bytes("cifar", k == 0 ? "cifar10" : k == 1 ? "cifar100_fine" : "cifar100_coarse", b, len);
        free(b);
    }
}

/* gzip of len bytes (malloc'd, *out_len). */
static uint8_t *gzip_bytes(const uint8_t *data, size_t len, size_t *out_len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    FUZZ_CHECK(deflateInit2(&z, 9, Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY) == Z_OK, "deflateInit2");
    size_t cap = deflateBound(&z, (uLong)len) + 32;
    uint8_t *out = malloc(cap);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    FUZZ_CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate");
    *out_len = z.total_out;
    deflateEnd(&z);
    return out;
}

static void seeds_idx(void) {
    uint8_t images[16 + 3 * 16] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 4};
    for (int i = 0; i < 48; i++) images[16 + i] = (uint8_t)(i * 5);
    uint8_t labels[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 2, 0, 9};
    for (int gz = 0; gz < 2; gz++) {
        size_t il = sizeof images, ll = sizeof labels;
        uint8_t *ib = images, *lb = labels;
        if (gz) {
            ib = gzip_bytes(images, sizeof images, &il);
            lb = gzip_bytes(labels, sizeof labels, &ll);
        }
        uint8_t *b = malloc(2 + il + ll);
        b[0] = (uint8_t)(il >> 8);
        b[1] = (uint8_t)il;
        memcpy(b + 2, ib, il);
        memcpy(b + 2 + il, lb, ll);
        put_bytes("idx", gz ? "gzip" : "raw", b, 2 + il + ll);
        free(b);
        if (gz) {
            free(ib);
            free(lb);
        }
    }
}

static void seeds_state(void) {
    float m[FUZZ_STATE_N], v[FUZZ_STATE_N];
    for (int i = 0; i < FUZZ_STATE_N; i++) {
        m[i] = 0.01f * (float)(i - 3);
        v[i] = 1e-4f * (float)(i + 1);
    }
    vt_train_state s = {.step = 12, .epoch = 1, .batch = 4, .optim_t = 12, .rng = {1, 2, 3, 4},
                        .best_top1 = 50.0, .wall_s = 3.5, .params_hash = 0x0123456789abcdefull,
                        .best_step = 8, .epoch_stats = {.loss_sum = 4.25, .steps = 4, .correct = 30,
                                                        .counted = 64, .seconds = 1.5, .images = 64}};
    FUZZ_CHECK(vt_train_state_write(seed_path("state", "adamw.safetensors"), &s, m, v, FUZZ_STATE_N,
                                    "{\"train\": {}}") == VT_OK, "%s", vt_last_error());
    FUZZ_CHECK(vt_train_state_write(seed_path("state", "sgd.safetensors"), &s, m, NULL, FUZZ_STATE_N,
                                    "{}") == VT_OK, "%s", vt_last_error());
}

static void seeds_tfevents(void) {
    uint8_t b[1 + 16 * VT_TFEVENTS_RECORD_MAX];
    size_t n = 1;
    b[0] = 3; /* resume at step 3 */
    n += vt_tfevents_file_version(b + n, 1.0e9);
    for (int step = 1; step <= 6; step++) {
        n += vt_tfevents_scalar(b + n, 1.0e9 + step, step, "train/loss", 1.0f / (float)step);
        n += vt_tfevents_scalar(b + n, 1.0e9 + step, step, "eval_32px/top1", 10.0f * (float)step);
        if (step == 4) n += vt_tfevents_session_start(b + n, 1.0e9 + step, 4);
    }
    put_bytes("tfevents", "run.bin", b, n);
    put_bytes("tfevents", "cut.bin", b, n - 5);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds OUT_DIR (run from the repository root)\n");
        return 2;
    }
    snprintf(root, sizeof root, "%s", argv[1]);
    mkdir(root, 0777);
    seeds_safetensors();
    seeds_hostile_safetensors();
    seeds_config();
    seeds_image();
    seeds_cifar();
    seeds_idx();
    seeds_state();
    seeds_tfevents();
    return 0;
}
