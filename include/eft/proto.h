/* proto.h - the STOMP protocol handlers: one per client command, in a table.
 * They act on a connection's session and the broker and write replies to the
 * connection's output; no socket is touched here. */
#ifndef EFT_PROTO_H
#define EFT_PROTO_H

#include "eft/conn.h"
#include "eft/frame.h"

/* Handle one frame from c; may move c to CONN_CLOSING. */
void proto_handle(struct conn *c, struct frame *f);
/* Send ERROR (with receipt-id if f asked for a receipt) and close after it is written. */
void proto_error(struct conn *c, const struct frame *f, const char *message, const char *detail);

#endif
