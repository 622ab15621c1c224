/* tfevents.h - TensorBoard event files, written natively (no TensorFlow, no protobuf
 * library).
 *
 * Owns the bytes of an event file. A file is a sequence of records, each
 *   uint64  length of data, little-endian
 *   uint32  masked CRC-32C of those 8 length bytes, little-endian
 *   data    length bytes: one Event protobuf
 *   uint32  masked CRC-32C of data, little-endian
 * with masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32), CRC-32C the
 * Castagnoli CRC (reflected polynomial 0x82f63b78, as TensorFlow's record writer).
 * The Event messages written, encoded by hand (field numbers from TensorFlow's
 * event.proto and summary.proto):
 *   Event      { double wall_time = 1; int64 step = 2; string file_version = 3;
 *                Summary summary = 5; SessionLog session_log = 7; }
 *   Summary    { repeated Value value = 1; }
 *   Value      { string tag = 1; float simple_value = 2; }
 *   SessionLog { SessionStatus status = 1; }   (START = 1)
 * The first record of every file is the Event {wall_time, file_version "brain.Event:2"}.
 *
 * Does not own which scalars a run logs, their tags, the files' names or how they are
 * written (run_log.h).
 */
#ifndef VT_TFEVENTS_H
#define VT_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* CRC-32C (Castagnoli) of n bytes; vt_crc32c("123456789", 9) = 0xe3069283. */
uint32_t vt_crc32c(const void *data, size_t n);
/* The record format's masking of a CRC. */
uint32_t vt_tfevents_mask_crc(uint32_t crc);
/* Protobuf base-128 varint of v into out (at most 10 bytes); returns its length. */
size_t vt_pb_varint(uint8_t *out, uint64_t v);

/* Longest tag accepted (bytes). */
#define VT_TFEVENTS_TAG_MAX 128
/* Capacity one record of this file needs: 16 bytes of framing, the Event, its Summary,
 * Value and tag. */
#define VT_TFEVENTS_RECORD_MAX (16 + 64 + VT_TFEVENTS_TAG_MAX)

/* Each of these writes one whole framed record into out (capacity VT_TFEVENTS_RECORD_MAX)
 * and returns its length:
 *   file_version    Event {wall_time, file_version "brain.Event:2"}, a file's first record
 *   session_start   Event {wall_time, step, session_log {status START}}: TensorBoard (its
 *                   purge of orphaned data) drops the points it has at and after step
 *   scalar          Event {wall_time, step, summary {value {tag, simple_value}}}; tag is
 *                   1..VT_TFEVENTS_TAG_MAX bytes (asserted) */
size_t vt_tfevents_file_version(uint8_t *out, double wall_time);
size_t vt_tfevents_session_start(uint8_t *out, double wall_time, int64_t step);
size_t vt_tfevents_scalar(uint8_t *out, double wall_time, int64_t step, const char *tag,
                          float value);

/* One pass over a file's records: *data and *n of the record at *pos, *pos moved past it.
 * Returns 1 for a record, 0 at the clean end of the buffer, -1 for a truncated record or
 * a CRC mismatch (a file cut short by a crash ends in one). */
int vt_tfevents_next(const uint8_t *buf, size_t len, size_t *pos, const uint8_t **data,
                     size_t *n);
/* The step of an Event (0 when absent, as protobuf defaults it); -1 if the bytes are not
 * a well-formed protobuf message. */
int64_t vt_tfevents_event_step(const uint8_t *data, size_t n);
/* The tag of an Event's first summary value into out (len > 0, cut to len - 1 bytes); ""
 * for an Event without one (file_version, session_log) or bytes that are not well formed. */
void vt_tfevents_event_tag(const uint8_t *data, size_t n, char *out, size_t len);

#endif
