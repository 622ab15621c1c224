/* test_checkpoint.c - safetensors and .npy files (src/checkpoint.c).
 *
 * Covers: bitwise round trip of names, shapes, values and metadata in the given order;
 * the header layout (length multiple of 8, space padding); atomic writes (an existing
 * file survives a failed write, no tmp file is left behind); every validation error on
 * read names the file and the offending tensor/offset (a directory given as a file
 * too); the per-tensor CRC-32 (a flipped bit, entries that do not match the tensors)
 * and non-finite values as errors naming the tensor; a file in the layout Python's
 * safetensors writes, and ours byte-exact with the checksums added; .npy header bytes
 * identical to numpy 1.24's; the checkpoint pair protocol (pointer, last.safetensors,
 * keeping and pruning, a failure before the commit point, the older layout).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "npz.h"
#include "safetensors.h"
#include "harness.h"
#include "test_util.h"

static char dir[64];

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void spit(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, len, f);
    fclose(f);
}

/* A raw safetensors file: header length (hlen_override if >= 0), JSON, data bytes. */
static void write_raw(const char *path, const char *json, size_t data_bytes, int64_t hlen_override) {
    size_t jl = strlen(json);
    uint64_t hlen = hlen_override >= 0 ? (uint64_t)hlen_override : jl;
    unsigned char *buf = calloc(8 + jl + data_bytes + 1, 1);
    for (int b = 0; b < 8; b++) buf[b] = (unsigned char)(hlen >> (8 * b));
    memcpy(buf + 8, json, jl);
    for (size_t i = 0; i < data_bytes; i++) buf[8 + jl + i] = (unsigned char)(i * 7 + 1);
    spit(path, buf, 8 + jl + data_bytes);
    free(buf);
}

/* A raw safetensors file: JSON header, then the given data bytes. */
static void write_raw_data(const char *path, const char *json, const void *data, size_t bytes) {
    size_t jl = strlen(json);
    unsigned char *buf = calloc(8 + jl + bytes + 1, 1);
    for (int b = 0; b < 8; b++) buf[b] = (unsigned char)((uint64_t)jl >> (8 * b));
    memcpy(buf + 8, json, jl);
    memcpy(buf + 8 + jl, data, bytes);
    spit(path, buf, 8 + jl + bytes);
    free(buf);
}

static vt_st_tensor make_tensor(const char *name, int ndim, const int64_t *shape, float *data) {
    vt_st_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.ndim = ndim;
    t.size = 1;
    for (int d = 0; d < ndim; d++) {
        t.shape[d] = shape[d];
        t.size *= shape[d];
    }
    t.data = data;
    return t;
}

static void test_round_trip(void) {
    float a[6], b[4], c[2] = {1.5f, -2.25f}, s[1] = {42.0f};
    uint32_t special[4] = {0x80000000u /* -0 */, 0x00000001u /* denormal */,
                           0x7f7fffffu /* FLT_MAX */, 0x80800000u /* -FLT_MIN */};
    for (int i = 0; i < 6; i++) a[i] = (float)i * 0.1f - 0.3f;
    memcpy(b, special, sizeof b);
    int64_t sa[2] = {2, 3}, sb[1] = {4}, sc[3] = {1, 1, 2};
    vt_st_tensor ts[4] = {make_tensor("zeta.weight", 2, sa, a), make_tensor("alpha", 1, sb, b),
                          make_tensor("blocks.0.mid", 3, sc, c), make_tensor("scalar", 0, NULL, s)};
    const char *keys[2] = {"config", "note"};
    const char *vals[2] = {"{\"model\": {\"width\": 16}}", "quotes \" backslash \\ newline\n tab\t utf8 \xc3\xa9"};
    const char *path = test_path(dir, "rt.safetensors");
    vt_status st = vt_st_write(path, ts, 4, keys, vals, 2);
    CHECK(st == VT_OK, "write failed: %s", vt_last_error());
    CHECK(!file_exists(test_path(dir, "rt.safetensors.tmp")), "tmp file left behind");

    size_t len;
    unsigned char *raw = (unsigned char *)test_read_file(path, &len);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)raw[i] << (8 * i);
    CHECK(hlen % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)hlen);
    CHECK(8 + hlen + 4 * (6 + 4 + 2 + 1) == len, "file size %zu, header %llu", len,
          (unsigned long long)hlen);
    CHECK(raw[8] == '{' && (raw[8 + hlen - 1] == ' ' || raw[8 + hlen - 1] == '}'),
          "header does not start with '{' / end with '}' or padding");
    /* Data in the given order: zeta.weight first, then alpha. */
    CHECK(memcmp(raw + 8 + hlen, a, sizeof a) == 0, "first data block is not zeta.weight");
    CHECK(memcmp(raw + 8 + hlen + sizeof a, b, sizeof b) == 0, "second data block is not alpha");
    /* Header key order follows the given order too. */
    char *hdr = calloc(hlen + 1, 1);
    memcpy(hdr, raw + 8, hlen);
    char *pz = strstr(hdr, "\"zeta.weight\""), *pa = strstr(hdr, "\"alpha\"");
    CHECK(pz && pa && pz < pa, "header order: zeta.weight should precede alpha");
    free(hdr);
    free(raw);

    vt_safetensors in;
    st = vt_st_read(path, &in);
    CHECK(st == VT_OK, "read failed: %s", vt_last_error());
    if (st != VT_OK) return;
    CHECK(in.n == 4, "n = %d", in.n);
    const char *names[4] = {"zeta.weight", "alpha", "blocks.0.mid", "scalar"};
    for (int i = 0; i < 4 && i < in.n; i++) {
        CHECK(strcmp(in.tensors[i].name, names[i]) == 0, "tensor %d is %s", i, in.tensors[i].name);
        CHECK(((uintptr_t)in.tensors[i].data & 3) == 0, "tensor %s data misaligned", names[i]);
    }
    const vt_st_tensor *t = vt_st_find(&in, "zeta.weight");
    CHECK(t && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->size == 6, "zeta shape");
    if (t) CHECK(memcmp(t->data, a, sizeof a) == 0, "zeta values differ");
    t = vt_st_find(&in, "alpha");
    CHECK(t && t->ndim == 1 && t->shape[0] == 4, "alpha shape");
    if (t) CHECK(memcmp(t->data, special, sizeof special) == 0, "special values not bitwise equal");
    t = vt_st_find(&in, "blocks.0.mid");
    CHECK(t && t->ndim == 3 && t->shape[2] == 2 && t->data[1] == -2.25f, "blocks.0.mid");
    t = vt_st_find(&in, "scalar");
    CHECK(t && t->ndim == 0 && t->size == 1 && t->data[0] == 42.0f, "0-d tensor");
    CHECK(vt_st_find(&in, "missing") == NULL, "find of a missing name");
    CHECK(in.n_meta == 2, "n_meta %d (the checksum key is consumed by the read)", in.n_meta);
    CHECK(vt_st_meta(&in, "config") && strcmp(vt_st_meta(&in, "config"), vals[0]) == 0,
          "config metadata");
    CHECK(vt_st_meta(&in, "note") && strcmp(vt_st_meta(&in, "note"), vals[1]) == 0,
          "escaped metadata");
    CHECK(vt_st_meta(&in, "nope") == NULL, "missing metadata key");
    vt_st_free(&in);
    CHECK(in.n == 0 && in.buffer == NULL && in.tensors == NULL, "free resets the struct");

    /* No tensors, no metadata: header "{}" padded to 8. */
    path = test_path(dir, "empty.safetensors");
    CHECK(vt_st_write(path, NULL, 0, NULL, NULL, 0) == VT_OK, "empty write: %s", vt_last_error());
    raw = (unsigned char *)test_read_file(path, &len);
    CHECK(len == 16 && raw[0] == 8 && memcmp(raw + 8, "{}      ", 8) == 0, "empty file layout");
    free(raw);
    CHECK(vt_st_read(path, &in) == VT_OK && in.n == 0 && in.n_meta == 0, "empty read: %s",
          vt_last_error());
    vt_st_free(&in);
}

static void test_atomic(void) {
    float v1[3] = {1, 2, 3}, v2[3] = {7, 8, 9};
    int64_t sh[1] = {3};
    vt_st_tensor t1 = make_tensor("w", 1, sh, v1), t2 = make_tensor("w", 1, sh, v2);
    char path[256], tmp[256];
    snprintf(path, sizeof path, "%s", test_path(dir, "keep.safetensors"));
    snprintf(tmp, sizeof tmp, "%s", test_path(dir, "keep.safetensors.tmp"));
    CHECK(vt_st_write(path, &t1, 1, NULL, NULL, 0) == VT_OK, "first write: %s", vt_last_error());
    size_t len0, len1;
    unsigned char *before = (unsigned char *)test_read_file(path, &len0);

    /* The tmp file cannot be created (a directory is in the way). */
    mkdir(tmp, 0700);
    vt_status st = vt_st_write(path, &t2, 1, NULL, NULL, 0);
    CHECK(st == VT_ERR_RUNTIME, "write over a blocked tmp returned %d", st);
    CHECK(strstr(vt_last_error(), path) && strstr(vt_last_error(), "temporary"),
          "message: %s", vt_last_error());
    rmdir(tmp);
    unsigned char *after = (unsigned char *)test_read_file(path, &len1);
    CHECK(len0 == len1 && len0 > 0 && memcmp(before, after, (size_t)len0) == 0,
          "old file changed by a failed write");
    free(after);

    /* The rename fails (the target is a non-empty directory): tmp removed. */
    const char *dpath = test_path(dir, "isdir.safetensors");
    mkdir(dpath, 0700);
    char inner[300];
    snprintf(inner, sizeof inner, "%s/x", dpath);
    spit(inner, "x", 1);
    st = vt_st_write(dpath, &t2, 1, NULL, NULL, 0);
    CHECK(st == VT_ERR_RUNTIME && strstr(vt_last_error(), "renam"), "rename failure: %d %s", st,
          vt_last_error());
    CHECK(!file_exists(test_path(dir, "isdir.safetensors.tmp")), "tmp left after failed rename");
    unlink(inner);
    rmdir(dpath);

    /* The directory does not exist. */
    st = vt_st_write(test_path(dir, "nodir/x.safetensors"), &t2, 1, NULL, NULL, 0);
    CHECK(st == VT_ERR_RUNTIME && strstr(vt_last_error(), "nodir/x.safetensors"),
          "missing dir: %d %s", st, vt_last_error());

    /* npy through the same protocol. */
    const char *npy = test_path(dir, "keep.npy"), *npy_tmp = test_path(dir, "keep.npy.tmp");
    CHECK(vt_npy_write(npy, v1, 1, sh) == VT_OK, "npy write: %s", vt_last_error());
    size_t ln0, ln1;
    unsigned char *nb = (unsigned char *)test_read_file(npy, &ln0);
    mkdir(npy_tmp, 0700);
    CHECK(vt_npy_write(npy, v2, 1, sh) == VT_ERR_RUNTIME, "npy over blocked tmp succeeded");
    rmdir(npy_tmp);
    unsigned char *na = (unsigned char *)test_read_file(npy, &ln1);
    CHECK(ln0 == ln1 && memcmp(nb, na, (size_t)ln0) == 0, "old npy changed by a failed write");
    free(nb);
    free(na);

    /* A NaN or infinity is never written: the message names the tensor and the element,
     * the old file stays, no temporary file is left. */
    float bad_v[3] = {1, NAN, 3};
    vt_st_tensor tbad = make_tensor("optim.v", 1, sh, bad_v);
    st = vt_st_write(path, &tbad, 1, NULL, NULL, 0);
    CHECK(st == VT_ERR_RUNTIME && strstr(vt_last_error(), path) &&
              strstr(vt_last_error(), "tensor \"optim.v\" holds NaN at element 1") &&
              strstr(vt_last_error(), "not written"),
          "a NaN is refused: %d %s", st, vt_last_error());
    bad_v[1] = -INFINITY;
    st = vt_st_write(path, &tbad, 1, NULL, NULL, 0);
    CHECK(st == VT_ERR_RUNTIME && strstr(vt_last_error(), "holds -Inf at element 1"),
          "an infinity is refused: %d %s", st, vt_last_error());
    after = (unsigned char *)test_read_file(path, &len1);
    CHECK(len0 == len1 && memcmp(before, after, (size_t)len0) == 0 && !file_exists(tmp),
          "a refused write leaves the old file and no temporary file");
    free(after);

    /* A symbolic link planted at the temporary name is replaced, never written through:
     * its target keeps its contents and the file written is a regular file. */
    const char *victim = test_path(dir, "victim.txt");
    spit(victim, "precious", 8);
    CHECK(symlink(victim, tmp) == 0, "plant %s -> %s", tmp, victim);
    CHECK(vt_st_write(path, &t1, 1, NULL, NULL, 0) == VT_OK, "write past a planted link: %s",
          vt_last_error());
    size_t vlen;
    unsigned char *v = (unsigned char *)test_read_file(victim, &vlen);
    struct stat lsb;
    CHECK(vlen == 8 && memcmp(v, "precious", 8) == 0, "the link's target is untouched");
    CHECK(lstat(path, &lsb) == 0 && S_ISREG(lsb.st_mode) && lstat(tmp, &lsb) != 0,
          "the file written is a regular file and the link is gone");
    free(v);
    free(before);

    /* A successful overwrite replaces the contents. */
    CHECK(vt_st_write(path, &t2, 1, NULL, NULL, 0) == VT_OK, "overwrite: %s", vt_last_error());
    vt_safetensors in;
    CHECK(vt_st_read(path, &in) == VT_OK && in.n == 1 && in.tensors[0].data[2] == 9.0f,
          "overwrite content");
    vt_st_free(&in);
}

/* Expect a read of path to fail with VT_ERR_RUNTIME and a message containing the path
 * and each of the (up to two) words; the output struct must be left empty. */
static void expect_bad(const char *path, const char *w1, const char *w2, const char *what) {
    vt_safetensors in;
    memset(&in, 0x5a, sizeof in);
    vt_status st = vt_st_read(path, &in);
    const char *msg = vt_last_error();
    CHECK(st == VT_ERR_RUNTIME, "%s: status %d (msg %s)", what, st, msg);
    CHECK(strstr(msg, path) != NULL, "%s: message lacks the path: %s", what, msg);
    CHECK(strstr(msg, w1) != NULL, "%s: message lacks '%s': %s", what, w1, msg);
    if (w2) CHECK(strstr(msg, w2) != NULL, "%s: message lacks '%s': %s", what, w2, msg);
    CHECK(in.n == 0 && in.tensors == NULL && in.buffer == NULL && in.meta_keys == NULL,
          "%s: output not cleared", what);
    if (st == VT_OK) vt_st_free(&in);
}

#define T_A "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}"
#define T_B "\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[16,28]}"

static void test_corrupt(void) {
    const char *p = test_path(dir, "bad.safetensors");

    /* Sanity: the raw builder makes a valid file, so each failure below is its edit. */
    write_raw(p, "{" T_A "," T_B "}", 28, -1);
    vt_safetensors in;
    CHECK(vt_st_read(p, &in) == VT_OK && in.n == 2, "raw baseline: %s", vt_last_error());
    vt_st_free(&in);

    spit(p, "\x10\0\0\0\0", 5);
    expect_bad(p, "shorter than the 8-byte", NULL, "5-byte file");

    write_raw(p, "{" T_A "," T_B "}", 28, 1000000);
    expect_bad(p, "header length 1000000", "larger", "flipped header length");

    /* A good file truncated in its data, then in its header. */
    {
        write_raw(p, "{" T_A "," T_B "}", 28, -1);
        size_t len;
        unsigned char *raw = (unsigned char *)test_read_file(p, &len);
        spit(p, raw, (size_t)len - 6);
        expect_bad(p, "\"b\"", "out of range", "data truncated by 6 bytes");
        spit(p, raw, 20);
        expect_bad(p, "header length", "larger", "truncated inside the header");
        free(raw);
    }

    /* Header edits: JSON text, data bytes, the words the message must hold, the case. */
    static const struct {
        const char *json;
        size_t data;
        const char *w1, *w2, *what;
    } cases[] = {
        {"{" T_A "," T_B, 28,
         "not valid JSON", NULL, "unterminated JSON"},
        {"{" T_A ",, " T_B "}", 28,
         "not valid JSON", "offset", "double comma"},
        {"[1, 2]", 0,
         "not a JSON object", NULL, "array header"},
        {"{\"a\":{\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
         "\"a\"", "missing \"dtype\"", "no dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", 16,
         "\"a\"", "missing \"shape\"", "no shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2]}}", 16,
         "\"a\"", "missing \"data_offsets\"", "no data_offsets"},
        {"{" T_A ",\"h\":{\"dtype\":\"F64\",\"shape\":[6],\"data_offsets\":[16,28]}}", 28,
         "\"h\"", "dtype F64", "F64 tensor"},
        {"{" T_A ",\"h\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[16,28]}}", 28,
         "\"h\"", "4 BF16 values (8 bytes)", "BF16 size"},
        {"{" T_A ",\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,28]}}", 28,
         "\"b\"", "span 12 bytes", "shape product != offsets"},
        {"{" T_A ",\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,36]}}", 28,
         "\"b\"", "out of range", "end past the data section"},
        {"{" T_A ",\"b\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[20,16]}}", 16,
         "\"b\"", "out of range", "begin > end"},
        {"{" T_A ",\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[-4,8]}}", 16,
         "\"b\"", "non-negative", "negative offset"},
        {"{" T_A ",\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[12,24]}}", 28,
         "overlap", "offset 16", "overlapping tensors"},
        {"{" T_A ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[20,28]}}", 28,
         "\"b\"", "gap at offset 16", "gap between tensors"},
        {"{\"b\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[4,16]}}", 16,
         "\"b\"", "gap at offset 0", "data not starting at 0"},
        {"{" T_A "," T_B "}", 32,
         "trailing", "28", "uncovered trailing bytes"},
        {"{" T_A ",\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[16,28]}}", 28,
         "duplicate tensor name", "\"a\"", "duplicate names"},
        {"{\"__metadata__\":{\"format\":\"pt\",\"step\":5}," T_A "}", 16,
         "__metadata__[\"step\"]", "must be a string", "numeric metadata"},
        {"{\"__metadata__\":[\"x\"]," T_A "}", 16,
         "__metadata__", "not a JSON object", "metadata array"},
        {"{" T_A ",\"b\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[16,28]}}", 28,
         "\"b\"", "shape[0]", "fractional shape"},
        {"{" T_A ",\"b\":[1]}", 16,
         "\"b\"", "not a JSON object", "tensor entry is an array"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_raw(p, cases[i].json, cases[i].data, -1);
        expect_bad(p, cases[i].w1, cases[i].w2, cases[i].what);
    }

    expect_bad(test_path(dir, "does_not_exist.safetensors"), "cannot open", NULL, "missing file");
    /* A directory given as a checkpoint (it opens, and used to report its size as 2^63 - 1). */
    expect_bad(dir, "is a directory", "checkpoint (.safetensors file)", "not a regular file");
}

/* Write tensors a (2 x 2) and b (3) to path with vt_st_write. */
static void write_ab(const char *path, const float *a, const float *b) {
    int64_t sa[2] = {2, 2}, sb[1] = {3};
    vt_st_tensor ts[2] = {make_tensor("a", 2, sa, (float *)a), make_tensor("b", 1, sb, (float *)b)};
    const char *k[1] = {"format"}, *v[1] = {"pt"};
    CHECK(vt_st_write(path, ts, 2, k, v, 1) == VT_OK, "write %s: %s", path, vt_last_error());
}

/* The per-tensor CRC-32 and the finite-values check of vt_st_read. */
static void test_integrity(void) {
    CHECK(vt_crc32("123456789", 9) == 0xcbf43926u, "CRC-32 check value (zlib.crc32)");
    const char *p = test_path(dir, "crc.safetensors");
    float a[4] = {1, 2, 3, 4}, b[3] = {5, 6, 7};
    write_ab(p, a, b);
    size_t len;
    unsigned char *raw = (unsigned char *)test_read_file(p, &len);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)raw[i] << (8 * i);
    char *hdr = calloc(hlen + 1, 1);
    memcpy(hdr, raw + 8, hlen);
    CHECK(strstr(hdr, "\"tensor_crc32\":\"{\\\"a\\\":\\\"") != NULL,
          "header carries the checksums: %s", hdr);
    free(hdr);

    /* One flipped bit in b's data: the read names the file, b and both checksums. */
    unsigned char *bad = malloc((size_t)len);
    memcpy(bad, raw, (size_t)len);
    bad[8 + hlen + 16 + 5] ^= 0x10;
    spit(p, bad, (size_t)len);
    expect_bad(p, "tensor \"b\": data checksum mismatch", "corrupt", "a flipped bit");
    /* The same flip in a's data. */
    memcpy(bad, raw, (size_t)len);
    bad[8 + hlen + 2] ^= 0x01;
    spit(p, bad, (size_t)len);
    expect_bad(p, "tensor \"a\": data checksum mismatch", NULL, "a flipped bit in a");
    free(bad);
    free(raw);

    /* Checksum entries that do not match the tensors. */
    static const struct {
        const char *meta, *w1, *w2, *what;
    } cases[] = {
        {"{\\\"a\\\":\\\"00000000\\\"}", "\"b\" has no entry", NULL, "a tensor without a checksum"},
        {"{\\\"a\\\":\\\"00000000\\\",\\\"b\\\":\\\"0\\\"}", "\"b\" is not an 8-digit hex", NULL,
         "a short checksum"},
        {"[1]", "not a JSON object", NULL, "checksums as an array"},
        {"{\\\"zz\\\":\\\"00000000\\\"}", "tensor \"zz\"", "does not contain", "a checksum of no tensor"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[512];
        snprintf(json, sizeof json, "{\"__metadata__\":{\"tensor_crc32\":\"%s\"}," T_A "," T_B "}",
                 cases[i].meta);
        write_raw(p, json, 28, -1);
        expect_bad(p, cases[i].w1, cases[i].w2, cases[i].what);
    }

    /* Non-finite values are errors naming the tensor and the element, checksum or not
     * (written raw: vt_st_write refuses them). */
    float nan_a[4] = {1, 2, NAN, 4}, inf_b[3] = {5, -INFINITY, 7}, ab[7];
    memcpy(ab, nan_a, sizeof nan_a);
    memcpy(ab + 4, b, sizeof b);
    write_raw_data(p, "{" T_A "," T_B "}", ab, sizeof ab);
    expect_bad(p, "tensor \"a\" holds NaN at element 2 (index [1, 0])", NULL, "a NaN");
    memcpy(ab, a, sizeof a);
    memcpy(ab + 4, inf_b, sizeof inf_b);
    write_raw_data(p, "{" T_A "," T_B "}", ab, sizeof ab);
    expect_bad(p, "tensor \"b\" holds -Inf at element 1", NULL, "an infinity");

    /* The checksum key does not come back: metadata read from one file writes another. */
    write_ab(p, a, b);
    vt_safetensors in;
    CHECK(vt_st_read(p, &in) == VT_OK, "read: %s", vt_last_error());
    CHECK(in.n_meta == 1 && vt_st_meta(&in, "tensor_crc32") == NULL, "checksum key consumed");
    CHECK(vt_st_write(test_path(dir, "copy.safetensors"), in.tensors, in.n, (const char *const *)in.meta_keys,
                      (const char *const *)in.meta_values, in.n_meta) == VT_OK,
          "rewrite with the read metadata: %s", vt_last_error());
    vt_st_free(&in);
}

/* Write a pair's two files for step `step`: weights "w" = {step} and state "m" = {-step}. */
static void write_pair(const vt_ckpt_pair *p) {
    float w[1] = {(float)p->step}, m[1] = {-(float)p->step};
    int64_t sh[1] = {1};
    vt_st_tensor tw = make_tensor("w", 1, sh, w), tm = make_tensor("m", 1, sh, m);
    CHECK(vt_st_write(p->weights, &tw, 1, NULL, NULL, 0) == VT_OK, "weights: %s", vt_last_error());
    CHECK(vt_st_write(p->state, &tm, 1, NULL, NULL, 0) == VT_OK, "state: %s", vt_last_error());
}

static ino_t inode_of(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_ino : 0;
}

static int pair_exists(const char *d, int64_t step) {
    vt_ckpt_pair p;
    vt_ckpt_pair_of(d, step, &p);
    return file_exists(p.weights) + file_exists(p.state);
}

/* The checkpoint pair protocol (checkpoint.h): names, the pointer, last.safetensors,
 * keeping, pruning leftovers, failures before the commit point, the older layout. */
static void test_pairs(void) {
    char d[300], path[400], last[400];
    snprintf(d, sizeof d, "%s/run", dir);
    mkdir(d, 0700);
    snprintf(last, sizeof last, "%s/last.safetensors", d);
    vt_ckpt_pair cur, p;
    CHECK(vt_ckpt_current(d, &cur) == VT_ERR_USAGE && strstr(vt_last_error(), "latest") &&
              strstr(vt_last_error(), d),
          "no checkpoint yet: %s", vt_last_error());
    vt_ckpt_pair_of(d, 24, &p);
    CHECK(strstr(p.weights, "/run/step_00000024.safetensors") &&
              strstr(p.state, "/run/step_00000024.state.safetensors"), "names %s %s", p.weights,
          p.state);
    for (int64_t step = 8; step <= 32; step += 8) {
        vt_ckpt_pair_of(d, step, &p);
        write_pair(&p);
        CHECK(vt_ckpt_publish(d, &p, 2, NULL) == VT_OK, "publish %lld: %s", (long long)step,
              vt_last_error());
        CHECK(vt_ckpt_current(d, &cur) == VT_OK && cur.step == step &&
                  strcmp(cur.weights, p.weights) == 0 && strcmp(cur.state, p.state) == 0,
              "current after step %lld: %lld", (long long)step, (long long)cur.step);
        CHECK(inode_of(last) != 0 && inode_of(last) == inode_of(p.weights),
              "last.safetensors is the step %lld weights", (long long)step);
    }
    snprintf(path, sizeof path, "%s/latest", d);
    size_t len;
    unsigned char *txt = (unsigned char *)test_read_file(path, &len);
    CHECK(txt && len == 14 && memcmp(txt, "step_00000032\n", 14) == 0, "latest reads %.*s",
          (int)len, txt ? (char *)txt : "");
    free(txt);
    CHECK(pair_exists(d, 8) == 0 && pair_exists(d, 16) == 0 && pair_exists(d, 24) == 2 &&
              pair_exists(d, 32) == 2, "keep 2: %d %d %d %d", pair_exists(d, 8),
          pair_exists(d, 16), pair_exists(d, 24), pair_exists(d, 32));

    /* Leftovers of killed saves: temporaries, a newer orphan, an incomplete older pair. */
    const char *junk[] = {"step_00000040.safetensors", "step_00000032.state.safetensors.tmp",
                          "latest.tmp", "last.safetensors.tmp", "step_00000020.safetensors",
                          "last.state.safetensors"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", d, junk[i]);
        spit(path, "x", 1);
    }
    snprintf(path, sizeof path, "%s/notes.txt", d);
    spit(path, "mine", 4);
    vt_ckpt_pair_of(d, 36, &p);
    write_pair(&p);
    CHECK(vt_ckpt_publish(d, &p, 2, NULL) == VT_OK, "publish 36: %s", vt_last_error());
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", d, junk[i]);
        CHECK(!file_exists(path), "leftover %s removed", junk[i]);
    }
    snprintf(path, sizeof path, "%s/notes.txt", d);
    CHECK(file_exists(path), "a file that is not ours stays");
    CHECK(pair_exists(d, 24) == 0 && pair_exists(d, 32) == 2 && pair_exists(d, 36) == 2,
          "after 36: %d %d %d", pair_exists(d, 24), pair_exists(d, 32), pair_exists(d, 36));

    /* A failure before the commit point (latest.tmp cannot be created): the new pair is
     * removed, latest and last.safetensors still name step 36. */
    snprintf(path, sizeof path, "%s/latest.tmp", d);
    mkdir(path, 0700);
    vt_ckpt_pair_of(d, 44, &p);
    write_pair(&p);
    int committed = -1;
    vt_status st = vt_ckpt_publish(d, &p, 2, &committed);
    CHECK(st == VT_ERR_RUNTIME && strstr(vt_last_error(), "latest") && committed == 0,
          "blocked pointer: %s", vt_last_error());
    rmdir(path);
    CHECK(pair_exists(d, 44) == 0, "the unpublished pair is removed");
    vt_ckpt_pair_of(d, 36, &p);
    CHECK(vt_ckpt_current(d, &cur) == VT_OK && cur.step == 36, "still step 36: %s",
          vt_last_error());
    CHECK(inode_of(last) == inode_of(p.weights), "last.safetensors still step 36");

    /* A pointer that is not ours, or names a missing file. */
    snprintf(path, sizeof path, "%s/latest", d);
    spit(path, "../../etc/passwd\n", 17);
    CHECK(vt_ckpt_current(d, &cur) == VT_ERR_RUNTIME && strstr(vt_last_error(), "expected one line"),
          "malformed latest: %s", vt_last_error());
    spit(path, "step_00000036\n", 14);
    unlink(p.state);
    CHECK(vt_ckpt_current(d, &cur) == VT_ERR_RUNTIME && strstr(vt_last_error(), p.state) &&
              strstr(vt_last_error(), "missing"), "latest naming a missing state: %s",
          vt_last_error());

    /* The older layout: last.safetensors + last.state.safetensors, no latest. */
    char old[300];
    snprintf(old, sizeof old, "%s/old", dir);
    mkdir(old, 0700);
    snprintf(path, sizeof path, "%s/last.safetensors", old);
    spit(path, "x", 1);
    snprintf(path, sizeof path, "%s/last.state.safetensors", old);
    spit(path, "x", 1);
    CHECK(vt_ckpt_current(old, &cur) == VT_OK && cur.step == -1 &&
              strstr(cur.state, "/old/last.state.safetensors"), "older layout: %s", vt_last_error());
}

/* A file in the layout Python's safetensors (save_file({"b": [1, 2], "a": [[0, 0]]},
 * metadata={"format": "pt"})) writes: compact JSON, metadata first, tensors sorted by
 * name with data in that order, header padded with spaces to a multiple of 8. */
static void test_python_layout(void) {
    static const char json[] =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}   ";
    unsigned char file[8 + 144 + 16];
    CHECK(sizeof json - 1 == 144, "fixture header is %zu bytes", sizeof json - 1);
    memcpy(file, "\x90\0\0\0\0\0\0\0", 8);
    memcpy(file + 8, json, 144);
    static const unsigned char data[16] = {0, 0, 0, 0, 0, 0, 0, 0x80, /* 0, -0 */
                                           0, 0, 0x80, 0x3f, 0, 0, 0, 0x40 /* 1, 2 */};
    memcpy(file + 152, data, 16);
    const char *p = test_path(dir, "python.safetensors");
    spit(p, file, sizeof file);
    vt_safetensors in;
    vt_status st = vt_st_read(p, &in);
    CHECK(st == VT_OK, "python-layout read: %s", vt_last_error());
    if (st != VT_OK) return;
    const vt_st_tensor *a = vt_st_find(&in, "a"), *b = vt_st_find(&in, "b");
    CHECK(a && a->ndim == 2 && a->shape[0] == 1 && a->shape[1] == 2, "a shape");
    CHECK(a && a->data[0] == 0.0f && signbit(a->data[1]), "a values");
    CHECK(b && b->ndim == 1 && b->shape[0] == 2 && b->data[0] == 1.0f && b->data[1] == 2.0f,
          "b values");
    CHECK(vt_st_meta(&in, "format") && strcmp(vt_st_meta(&in, "format"), "pt") == 0, "format");

    /* Our writer produces the same layout plus the checksums (values from Python's
     * zlib.crc32 of each tensor's 8 data bytes), the header padded to 200 bytes. */
    static const char ours_json[] =
        "{\"__metadata__\":{\"format\":\"pt\",\"tensor_crc32\":"
        "\"{\\\"a\\\":\\\"889a5c49\\\",\\\"b\\\":\\\"2e3fa576\\\"}\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}  ";
    unsigned char want[8 + 200 + 16];
    CHECK(sizeof ours_json - 1 == 200, "expected header is %zu bytes", sizeof ours_json - 1);
    memcpy(want, "\xc8\0\0\0\0\0\0\0", 8);
    memcpy(want + 8, ours_json, 200);
    memcpy(want + 208, data, 16);
    float av[2], bv[2] = {1, 2};
    memcpy(av, data, 8);
    int64_t sa[2] = {1, 2}, sb[1] = {2};
    vt_st_tensor ts[2] = {make_tensor("a", 2, sa, av), make_tensor("b", 1, sb, bv)};
    const char *k[1] = {"format"}, *v[1] = {"pt"};
    const char *q = test_path(dir, "ours.safetensors");
    CHECK(vt_st_write(q, ts, 2, k, v, 1) == VT_OK, "write: %s", vt_last_error());
    size_t len;
    unsigned char *ours = (unsigned char *)test_read_file(q, &len);
    CHECK(len == sizeof want && memcmp(ours, want, sizeof want) == 0,
          "writer output differs from the Python layout with checksums (len %zu)", len);
    free(ours);
    vt_st_free(&in);
}

static void test_npy(void) {
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i - 5.5f;
    int64_t shape[2] = {3, 4};
    const char *p = test_path(dir, "x.npy");
    CHECK(vt_npy_write(p, x, 2, shape) == VT_OK, "npy write: %s", vt_last_error());
    /* numpy 1.24 np.save of a (3, 4) float32 array: 128 header bytes. */
    unsigned char want[128];
    static const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
    memcpy(want, "\x93NUMPY\x01\x00\x76\x00", 10);
    memset(want + 10, ' ', sizeof want - 10);
    memcpy(want + 10, dict, sizeof dict - 1);
    want[127] = '\n';
    size_t len;
    unsigned char *got = (unsigned char *)test_read_file(p, &len);
    CHECK(len == 128 + 48, "npy size %zu", len);
    if (len == 128 + 48) {
        CHECK(memcmp(got, want, 128) == 0, "npy header differs: %.118s", (const char *)got + 10);
        CHECK(memcmp(got + 128, x, 48) == 0, "npy data differs");
    }
    free(got);

    /* 1-d: "(5,)"; and a 16-d empty array whose spare growth spaces push the header
     * past 128 bytes (numpy 1.24's np.save output: 192 bytes, length field 182). */
    int64_t s1[1] = {5}, s16[16] = {1, 0, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10};
    float y[5] = {0};
    p = test_path(dir, "y.npy");
    CHECK(vt_npy_write(p, y, 1, s1) == VT_OK, "npy 1-d");
    got = (unsigned char *)test_read_file(p, &len);
    CHECK(len == 128 + 20 && memcmp(got + 10, "{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (5,), }", 56) == 0, "1-d header");
    free(got);
    p = test_path(dir, "z.npy");
    CHECK(vt_npy_write(p, NULL, 16, s16) == VT_OK, "npy 16-d");
    got = (unsigned char *)test_read_file(p, &len);
    static const char d16[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 0, 10, 10, "
                              "10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10), }";
    int ok = len == 192 && got[8] == 182 && got[9] == 0 && got[191] == '\n' &&
             memcmp(got + 10, d16, sizeof d16 - 1) == 0;
    for (long i = 10 + (long)sizeof d16 - 1; ok && i < 191; i++) ok = got[i] == ' ';
    CHECK(ok, "16-d header (file length %ld)", len);
    free(got);
}

int main(void) {
    if (test_tmpdir(dir, sizeof dir, "ckpt")) return 1;
    test_round_trip();
    test_atomic();
    test_corrupt();
    test_integrity();
    test_python_layout();
    test_npy();
    test_pairs();
    test_rm_rf(dir);
    return test_summary();
}
