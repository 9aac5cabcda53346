/* proto.h - the STOMP protocol handlers: one per client command, in a table.
 * They act on a connection's session and the broker and write replies to the
 * connection's output; no socket is touched here. */
#ifndef EFT_PROTO_H
#define EFT_PROTO_H

#include <stddef.h>

#include "eft/conn.h"
#include "eft/frame.h"

struct auth;

/* Handle one frame from c; may move c to CONN_CLOSING. */
void proto_handle(struct conn *c, struct frame *f);
/* Send ERROR (with receipt-id if f asked for a receipt) and close after it is written. */
void proto_error(struct conn *c, const struct frame *f, const char *message, const char *detail);
/* End c for a reason that is no protocol error (an administrator closed
 * it, its user was removed): the ERROR with message and detail, then the
 * close once it is written.  Nothing is logged: the caller says why. */
void proto_end(struct conn *c, const char *message, const char *detail);
/* Use a reloaded users file: sessions of users still in it take their new
 * permissions, those of removed users get an ERROR and are closed (returns
 * how many).  The old file's users are freed. */
size_t proto_replace_users(struct broker *b, struct auth *users);

#endif
