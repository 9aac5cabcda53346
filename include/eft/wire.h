/* wire.h - encoding the frames the server sends into a connection's output.
 *
 * Each call writes one whole frame or, when memory runs out, nothing at all
 * (-1): a half-written frame would corrupt the stream for the client. */
#ifndef EFT_WIRE_H
#define EFT_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#include "eft/frame.h"
#include "eft/msg.h"
#include "eft/outbuf.h"

struct sub;

/* Bodies at least this long are added to output by reference, not copied. */
#define WIRE_REFERENCE_MIN 2048

/* MESSAGE for subscription s.  The caller keeps its reference to m either
 * way (a body sent by reference takes one of its own). */
int wire_message(struct outbuf *out, enum stomp_version v, const struct sub *s, struct msg *m,
    const char *ack_id, size_t ack_len, bool redelivered);
int wire_receipt(struct outbuf *out, enum stomp_version v, const char *receipt_id, size_t len);
/* ERROR with a `message` header, `receipt-id` when known, an optional
 * ready-made header line ("name:value\n"), and a text body. */
int wire_error(struct outbuf *out, enum stomp_version v, const char *message,
    const char *receipt_id, size_t receipt_len, const char *extra_line, const char *detail);

#endif
