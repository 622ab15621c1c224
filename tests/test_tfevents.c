/* test_tfevents.c - TensorBoard event records (tfevents.h) and the run log (run_log.h):
 *   - CRC-32C on the RFC 3720 vectors, the record format's masking, protobuf varints
 *   - the Event bytes of a scalar, of file_version and of a SessionLog START, byte for byte
 *     against those TensorBoard's own protobuf classes serialize (the expected hex was
 *     printed by tensorboard.compat.proto.event_pb2; tests/e2e_tensorboard.c reads whole
 *     files with TensorBoard's reader)
 *   - reading records back: steps, a flipped byte and a cut record are caught
 *   - the run log: the files of a fresh run, and a resume at step s keeping the records of
 *     steps <= s in metrics.jsonl, summary.csv and the event file, plus a new event file
 *     that sorts after it and starts with SessionLog START at s + 1
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"
#include "tfevents_read.h"

#include "run_log.h"
#include "tfevents.h"

static void to_hex(const uint8_t *b, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
    out[2 * n] = '\0';
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_crc32c(void) {
    CHECK(vt_crc32c("123456789", 9) == 0xe3069283u, "crc32c('123456789') = %08x", vt_crc32c("123456789", 9));
    uint8_t b[32];
    memset(b, 0, sizeof b);
    CHECK(vt_crc32c(b, 32) == 0x8a9136aau, "32 zero bytes: %08x", vt_crc32c(b, 32));
    memset(b, 0xff, sizeof b);
    CHECK(vt_crc32c(b, 32) == 0x62a8ab43u, "32 0xff bytes: %08x", vt_crc32c(b, 32));
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    CHECK(vt_crc32c(b, 32) == 0x46dd794eu, "bytes 0..31: %08x", vt_crc32c(b, 32));
    CHECK(vt_crc32c(b, 0) == 0, "empty: %08x", vt_crc32c(b, 0));
    /* TensorBoard's masked_crc32c of "123456789" and of the length 24 as 8 bytes */
    CHECK(vt_tfevents_mask_crc(vt_crc32c("123456789", 9)) == 0xc78ab0e5u, "masked");
    uint8_t len24[8] = {24, 0, 0, 0, 0, 0, 0, 0};
    CHECK(vt_tfevents_mask_crc(vt_crc32c(len24, 8)) == 0x224b7fa3u, "masked length 24");
}

static void test_varint(void) {
    static const struct { uint64_t v; const char *hex; } cases[] = {
        {0, "00"}, {1, "01"}, {127, "7f"}, {128, "8001"}, {300, "ac02"}, {16383, "ff7f"},
        {16384, "808001"}, {UINT64_MAX, "ffffffffffffffffff01"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t b[10];
        char hex[21];
        size_t n = vt_pb_varint(b, cases[i].v);
        to_hex(b, n, hex);
        CHECK(!strcmp(hex, cases[i].hex), "varint %llu: %s, expected %s",
              (unsigned long long)cases[i].v, hex, cases[i].hex);
    }
}

/* The record's framing around the Event whose hex is want. */
static void check_record(const uint8_t *rec, size_t n, const char *want, const char *what) {
    size_t dn = strlen(want) / 2;
    CHECK(n == dn + 16, "%s: record of %zu bytes, expected %zu", what, n, dn + 16);
    if (n != dn + 16) return;
    uint64_t len = 0;
    for (int i = 0; i < 8; i++) len |= (uint64_t)rec[i] << (8 * i);
    CHECK(len == dn, "%s: length field %llu", what, (unsigned long long)len);
    CHECK(le32(rec + 8) == vt_tfevents_mask_crc(vt_crc32c(rec, 8)), "%s: length CRC", what);
    char hex[2 * VT_TFEVENTS_RECORD_MAX + 1];
    to_hex(rec + 12, dn, hex);
    CHECK(!strcmp(hex, want), "%s: event %s, expected %s", what, hex, want);
    CHECK(le32(rec + 12 + dn) == vt_tfevents_mask_crc(vt_crc32c(rec + 12, dn)), "%s: data CRC", what);
}

static void test_events(void) {
    uint8_t rec[VT_TFEVENTS_RECORD_MAX];
    size_t n = vt_tfevents_scalar(rec, 1.0, 3, "a", 0.5f);
    check_record(rec, n, "09000000000000f03f10032a0a0a080a0161150000003f", "scalar");
    n = vt_tfevents_file_version(rec, 2.5);
    check_record(rec, n, "0900000000000004401a0d627261696e2e4576656e743a32", "file_version");
    n = vt_tfevents_session_start(rec, 2.5, 7);
    check_record(rec, n, "09000000000000044010073a020801", "session start");

    /* a file of three records read back; then damaged */
    uint8_t file[3 * VT_TFEVENTS_RECORD_MAX];
    size_t len = vt_tfevents_file_version(file, 1.0);
    len += vt_tfevents_scalar(file + len, 1.0, 5, "train/loss", 1.25f);
    size_t third = len;
    len += vt_tfevents_scalar(file + len, 1.0, 300, "eval_288px/top1", 50.0f);
    size_t pos = 0, dn;
    const uint8_t *d;
    int64_t steps[4];
    int k = 0, r;
    while ((r = vt_tfevents_next(file, len, &pos, &d, &dn)) == 1 && k < 4)
        steps[k++] = vt_tfevents_event_step(d, dn);
    CHECK(r == 0 && k == 3 && steps[0] == 0 && steps[1] == 5 && steps[2] == 300,
          "3 records, steps 0 5 300: r %d, k %d", r, k);
    file[third + 20] ^= 1;
    pos = third;
    CHECK(vt_tfevents_next(file, len, &pos, &d, &dn) == -1, "a flipped data byte fails its CRC");
    file[third + 20] ^= 1;
    file[third + 3] ^= 1;
    pos = third;
    CHECK(vt_tfevents_next(file, len, &pos, &d, &dn) == -1, "a flipped length byte fails its CRC");
    file[third + 3] ^= 1;
    pos = third;
    CHECK(vt_tfevents_next(file, len - 1, &pos, &d, &dn) == -1, "a record cut short");
    uint8_t bad[] = {0x10, 0x80}; /* step varint without its end */
    CHECK(vt_tfevents_event_step(bad, 2) == -1, "a cut varint is not an Event");
}

static int count_lines(const char *path) {
    char *s = test_read_file(path, NULL);
    int n = 0;
    for (char *p = s; p && *p; p++) n += *p == '\n';
    free(s);
    return n;
}

/* Steps 1..10 of a run: a train record each, an evaluation and an epoch row every 5. */
static void log_steps(vt_run_log *l, int from, int to) {
    for (int s = from; s <= to; s++) {
        vt_log_train t = {.step = s, .epoch = (s - 1) / 5 + 1, .loss = 1.0 / s, .lr = 0.1,
                          .grad_norm = 1, .img_per_s = 100, .wall_s = s, .top1 = 50, .ranks = 1};
        CHECK(vt_run_log_train(l, &t) == VT_OK, "train record %d: %s", s, vt_last_error());
        if (s % 5) continue;
        vt_eval_result r = {.top1 = 60, .top5 = 90, .loss = 0.5, .n = 10, .img_size = 16};
        CHECK(vt_run_log_eval(l, s, s / 5, &r, s) == VT_OK, "eval record");
        vt_epoch_stats e = {.loss_sum = 2.5, .steps = 5, .correct = 3, .counted = 4, .seconds = 2,
                            .images = 100};
        CHECK(vt_run_log_epoch(l, s, s / 5, &e, 0.1, s) == VT_OK, "epoch record");
    }
}

static void test_run_log(void) {
    char dir[256];
    CHECK(test_tmpdir(dir, sizeof dir, "test_runlog") == 0, "scratch directory");
    char path[512], names[4][256];
    vt_run_log l;
    CHECK(vt_run_log_open(&l, dir, 16, -1) == VT_OK, "fresh open: %s", vt_last_error());
    log_steps(&l, 1, 10);
    vt_run_log_close(&l);
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    CHECK(file_contains(path, "epoch,step,train_loss,train_top1,eval_loss,eval_top1,eval_top5,lr,img_per_s,wall_s\n"
                              "1,5,0.5,75.0000,0.5,60.0000,90.0000,0.1,50.00,5.000\n"),
          "summary.csv header and first row");
    CHECK(count_lines(path) == 3, "summary.csv: header + 2 rows");
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    CHECK(file_contains(path, "{\"kind\":\"epoch\",\"step\":5,\"epoch\":1,\"loss\":0.5,\"top1\":75.0000,"
                              "\"lr\":0.1,\"img_per_s\":50.00,\"wall_s\":5.000}"), "epoch record");
    CHECK(count_lines(path) == 14, "10 train + 2 eval + 2 epoch records");
    int nf = event_files(dir, names);
    CHECK(nf == 1, "one event file, found %d", nf);
    int64_t steps[64];
    int clean;
    snprintf(path, sizeof path, "%s/%s", dir, names[0]);
    int k = file_steps(path, steps, 64, &clean, NULL);
    /* file_version, 10 x (loss top1 lr grad_norm img_per_s), 2 x (3 eval + 3 epoch) */
    CHECK(clean && k == 1 + 50 + 12, "event records: %d (clean %d)", k, clean);

    /* a resume at step 5 after a crash left a half-written record */
    FILE *f = fopen(path, "ab");
    fwrite("\x20\x00\x00", 1, 3, f);
    fclose(f);
    CHECK(vt_run_log_open(&l, dir, 16, 5) == VT_OK, "resume open: %s", vt_last_error());
    log_steps(&l, 6, 7);
    vt_run_log_close(&l);
    k = file_steps(path, steps, 64, &clean, NULL);
    CHECK(clean && k == 1 + 25 + 6 && steps[k - 1] == 5, "first file kept steps <= 5: %d records, "
          "last step %lld", k, (long long)steps[k - 1]);
    nf = event_files(dir, names);
    CHECK(nf == 2, "a second event file, found %d", nf);
    snprintf(path, sizeof path, "%s/%s", dir, names[1]);
    int start;
    k = file_steps(path, steps, 64, &clean, &start);
    CHECK(clean && k == 2 + 10 && start == 1 && steps[1] == 6 && steps[2] == 6, "second file: version, "
          "START at 6, steps 6 and 7: %d records, START at record %d", k, start);
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    CHECK(count_lines(path) == 2, "summary.csv trimmed to the row of step 5");
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    CHECK(count_lines(path) == 5 + 2 + 2, "metrics.jsonl: steps 1..5, their eval and epoch, 6 and 7");
    test_rm_rf(dir);
}

int main(void) {
    test_crc32c();
    test_varint();
    test_events();
    test_run_log();
    return test_summary();
}
