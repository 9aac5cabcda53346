/* route.h - where a SEND goes, for every kind of destination name. */
#ifndef EFT_ROUTE_H
#define EFT_ROUTE_H

#include <stddef.h>

#include "eft/broker.h"

struct conn;

/* Deliver m (the reference passes) to what name means for connection c:
 * a queue or topic, c's own temp-queue, or another connection's temp-queue
 * by its reply name (dropped and counted if that connection has gone).
 * *where (if not NULL) is the queue it went to, or NULL for a topic or a drop.
 * -1 if out of memory. */
int route_send(struct conn *c, const char *name, size_t len, enum address_kind kind, struct msg *m,
    struct dest **where);

#endif
