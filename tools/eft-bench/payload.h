/* payload.h - the body of every message eft-bench sends, built so that the
 * receiver can check it alone, with no table of what was sent:
 *
 *   bytes  0..7   sequence number, 8 lowercase hex digits
 *   bytes  8..23  send time, CLOCK_MONOTONIC ns, 16 hex digits
 *   bytes 24..31  check value of bytes 0..23 (a multiplicative hash), 8 hex digits
 *   bytes 32..    filler: a printable pattern whose phase depends on the
 *                 sequence number, so a body cut, padded, or swapped with
 *                 another message's does not match.
 *
 * All printable ASCII, so brokers that treat bodies as text pass it intact. */
#ifndef EFT_BENCH_PAYLOAD_H
#define EFT_BENCH_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

#define PAYLOAD_MIN 32

/* Prepare the filler pattern for bodies up to max_size bytes. */
void payload_init(size_t max_size);
void payload_write(char *dst, size_t size, uint64_t seq, uint64_t sent_ns);
/* 0 when p[0, len) is an intact body of size bytes; then *seq and *sent_ns
 * are what the sender put there. */
int payload_read(const char *p, size_t len, size_t size, uint64_t *seq, uint64_t *sent_ns);

#endif
