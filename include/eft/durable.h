/* durable.h - durable topic subscriptions, in ActiveMQ's and RabbitMQ's
 * dialects.
 *
 * A durable subscription is a queue of its own, named after the
 * subscription, that its topic feeds with a copy of every message.  While
 * its subscriber is away the queue keeps them (in the journal when they are
 * persistent); the subscriber that comes back reads them like any queue.
 *
 *   ActiveMQ:  client-id on CONNECT, activemq.subscriptionName on SUBSCRIBE
 *   RabbitMQ:  durable:true (or persistent:true), auto-delete:false and the
 *              subscription's id on SUBSCRIBE (true and false in any case)
 *
 * An UNSUBSCRIBE with the same headers (RabbitMQ: its id and durable:true or
 * persistent:true, auto-delete aside) ends the durable subscription and
 * drops what it kept; one without them only disconnects the subscriber. */
#ifndef EFT_DURABLE_H
#define EFT_DURABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "eft/address.h"

struct broker;
struct dest;
struct frame;
struct session;


/* The queue name of the durable subscription a SUBSCRIBE or UNSUBSCRIBE
 * frame names (in either dialect), in out; false if it names none. */
bool durable_name(const struct session *ss, const struct frame *f, char *out, size_t outlen,
    size_t *len);

enum durable_open_error { DURABLE_OK, DURABLE_IN_USE, DURABLE_NOMEM };

/* The queue of durable subscription `name` on topic (made, and written to
 * the journal, if new; moved if it was on another topic, dropping what it
 * kept), ready for a subscriber; NULL with *why. */
struct dest *durable_open(struct broker *b, const char *name, size_t len, const char *topic,
    size_t topic_len, enum durable_open_error *why);
/* End durable subscription q (nobody subscribed): its messages are dropped. */
void durable_remove(struct broker *b, struct dest *q);

#endif
