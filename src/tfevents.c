/* tfevents.c - TensorBoard event records, encoded by hand (format in tfevents.h). */
#include "tfevents.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* ---- CRC-32C ----------------------------------------------------------------------- */

static uint32_t crc32c_table[256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc32c_table[i] = c;
    }
}

uint32_t vt_crc32c(const void *data, size_t n) {
    pthread_once(&crc32c_once, crc32c_init);
    const uint8_t *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = crc32c_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t vt_tfevents_mask_crc(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ---- protobuf encoding --------------------------------------------------------------- */

size_t vt_pb_varint(uint8_t *out, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

static size_t put_le(uint8_t *out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) out[i] = (uint8_t)(v >> (8 * i));
    return (size_t)bytes;
}

/* Field key: field number and wire type (0 varint, 1 fixed64, 2 length-delimited,
 * 5 fixed32). */
static size_t put_key(uint8_t *out, unsigned field, unsigned wire) {
    return vt_pb_varint(out, (uint64_t)(field << 3 | wire));
}

static size_t put_bytes(uint8_t *out, unsigned field, const void *data, size_t n) {
    size_t o = put_key(out, field, 2);
    o += vt_pb_varint(out + o, n);
    memcpy(out + o, data, n);
    return o + n;
}

static size_t put_double(uint8_t *out, unsigned field, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    size_t o = put_key(out, field, 1);
    return o + put_le(out + o, bits, 8);
}

/* Event fields 1 (wall_time) and 2 (step). */
static size_t put_event_head(uint8_t *out, double wall_time, int64_t step) {
    size_t o = put_double(out, 1, wall_time);
    o += put_key(out + o, 2, 0);
    return o + vt_pb_varint(out + o, (uint64_t)step);
}

/* ---- records ------------------------------------------------------------------------- */

/* Frame the n bytes already at out + 12 as a record: length and its CRC before them, the
 * data's CRC after. Returns the record's length. */
static size_t frame_in_place(uint8_t *out, size_t n) {
    put_le(out, n, 8);
    put_le(out + 8, vt_tfevents_mask_crc(vt_crc32c(out, 8)), 4);
    put_le(out + 12 + n, vt_tfevents_mask_crc(vt_crc32c(out + 12, n)), 4);
    return n + 16;
}

size_t vt_tfevents_file_version(uint8_t *out, double wall_time) {
    static const char version[] = "brain.Event:2";
    uint8_t *ev = out + 12;
    size_t n = put_double(ev, 1, wall_time);
    n += put_bytes(ev + n, 3, version, sizeof version - 1);
    return frame_in_place(out, n);
}

size_t vt_tfevents_session_start(uint8_t *out, double wall_time, int64_t step) {
    uint8_t *ev = out + 12, log[4];
    size_t n = put_event_head(ev, wall_time, step);
    size_t ln = put_key(log, 1, 0);
    ln += vt_pb_varint(log + ln, 1); /* SessionLog.START */
    n += put_bytes(ev + n, 7, log, ln);
    return frame_in_place(out, n);
}

size_t vt_tfevents_scalar(uint8_t *out, double wall_time, int64_t step, const char *tag,
                          float value) {
    size_t tl = strlen(tag);
    VT_ASSERT(tl >= 1 && tl <= VT_TFEVENTS_TAG_MAX, "scalar tag '%s': expected 1..%d bytes", tag,
              VT_TFEVENTS_TAG_MAX);
    uint8_t val[VT_TFEVENTS_TAG_MAX + 16], sum[VT_TFEVENTS_TAG_MAX + 24];
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    size_t vn = put_bytes(val, 1, tag, tl);
    vn += put_key(val + vn, 2, 5);
    vn += put_le(val + vn, bits, 4);
    size_t sn = put_bytes(sum, 1, val, vn);
    uint8_t *ev = out + 12;
    size_t n = put_event_head(ev, wall_time, step);
    n += put_bytes(ev + n, 5, sum, sn);
    return frame_in_place(out, n);
}

/* ---- reading ------------------------------------------------------------------------- */

static uint64_t get_le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int vt_tfevents_next(const uint8_t *buf, size_t len, size_t *pos, const uint8_t **data,
                     size_t *n) {
    size_t p = *pos;
    if (p == len) return 0;
    if (len - p < 12) return -1;
    uint64_t dn = get_le(buf + p, 8);
    if ((uint32_t)get_le(buf + p + 8, 4) != vt_tfevents_mask_crc(vt_crc32c(buf + p, 8))) return -1;
    if (dn > len - p - 12 || len - p - 12 - dn < 4) return -1;
    const uint8_t *d = buf + p + 12;
    if ((uint32_t)get_le(d + dn, 4) != vt_tfevents_mask_crc(vt_crc32c(d, (size_t)dn))) return -1;
    *data = d;
    *n = (size_t)dn;
    *pos = p + 16 + (size_t)dn;
    return 1;
}

/* A varint at *p (before end) into *v; 0 if it runs past end or over 10 bytes. */
static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

int64_t vt_tfevents_event_step(const uint8_t *data, size_t n) {
    const uint8_t *p = data, *end = data + n;
    int64_t step = 0;
    while (p < end) {
        uint64_t key, v;
        if (!get_varint(&p, end, &key)) return -1;
        switch (key & 7) {
        case 0:
            if (!get_varint(&p, end, &v)) return -1;
            if (key >> 3 == 2) step = (int64_t)v;
            break;
        case 1:
            if (end - p < 8) return -1;
            p += 8;
            break;
        case 2:
            if (!get_varint(&p, end, &v) || v > (uint64_t)(end - p)) return -1;
            p += v;
            break;
        case 5:
            if (end - p < 4) return -1;
            p += 4;
            break;
        default: return -1;
        }
    }
    return step;
}

/* The first length-delimited field `field` of the message [p, end) into *sub and *n; 0 if
 * absent or the bytes are not well-formed. */
static int find_bytes(const uint8_t *p, const uint8_t *end, uint64_t field, const uint8_t **sub, size_t *n) {
    while (p < end) {
        uint64_t key, v;
        if (!get_varint(&p, end, &key)) return 0;
        switch (key & 7) {
        case 0:
            if (!get_varint(&p, end, &v)) return 0;
            break;
        case 1:
            if (end - p < 8) return 0;
            p += 8;
            break;
        case 2:
            if (!get_varint(&p, end, &v) || v > (uint64_t)(end - p)) return 0;
            if (key >> 3 == field) {
                *sub = p;
                *n = (size_t)v;
                return 1;
            }
            p += v;
            break;
        case 5:
            if (end - p < 4) return 0;
            p += 4;
            break;
        default: return 0;
        }
    }
    return 0;
}

void vt_tfevents_event_tag(const uint8_t *data, size_t n, char *out, size_t len) {
    const uint8_t *sum, *val, *tag;
    size_t sn, vn, tn;
    out[0] = '\0';
    if (find_bytes(data, data + n, 5, &sum, &sn) && find_bytes(sum, sum + sn, 1, &val, &vn) &&
        find_bytes(val, val + vn, 1, &tag, &tn))
        snprintf(out, len, "%.*s", (int)(tn < len ? tn : len - 1), (const char *)tag);
}
