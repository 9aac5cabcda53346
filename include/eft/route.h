/* route.h - where a SEND goes, for every kind of destination name. */
#ifndef EFT_ROUTE_H
#define EFT_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "eft/address.h"
#include "eft/backend.h"

struct session;

/* The destination a SEND to name means for session ss: a queue or topic, the
 * session's own temp-queue (made on first use), or another session's
 * temp-queue by its reply name.  NULL with *err 0 when the message goes
 * nowhere (a topic nobody subscribes to, a reply whose temp-queue's owner
 * has gone); NULL with *err -1 when out of memory. */
struct dest *route_resolve(struct session *ss, const char *name, size_t len,
    enum address_kind kind, int *err);
/* Publish m to d (from route_resolve; NULL drops it, counted).  0: the
 * reference is taken; -1: out of memory, the caller keeps it. */
int route_publish(struct session *ss, struct dest *d, struct msg *m);
/* route_publish for a SEND to name of kind, resolved to d before (a
 * transaction's COMMIT): a topic's message also goes to the wildcard topics
 * that match name. */
int route_publish_named(struct session *ss, struct dest *d, const char *name, size_t len,
    enum address_kind kind, struct msg *m);
/* Does a SEND to name go through the backend (the cluster: a queue, a
 * topic, or another node's temp-queue)? */
bool route_carried(const struct session *ss, const char *name, size_t len,
    enum address_kind kind);
/* Send m there: 0 with the reference taken; -1 (out of memory) or a
 * BACKEND_* code with the caller keeping it. */
int route_through_backend(struct session *ss, const char *name, size_t len,
    enum address_kind kind, struct msg *m);
/* Both at once.  *where (if not NULL) is the queue m went to, or NULL for a
 * topic, a drop, the backend, or a queue made for m that m died in as it
 * came (expired, or expiration:0 with nobody to take it): not kept.  0: the
 * reference is taken; -1: out of memory, or a BACKEND_* code, the caller
 * keeps it. */
int route_send(struct session *ss, const char *name, size_t len, enum address_kind kind,
    struct msg *m, struct dest **where);

#endif
