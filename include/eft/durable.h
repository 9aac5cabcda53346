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
 * drops what it kept; one without them only disconnects the subscriber.
 * RabbitMQ's x-queue-name names the queue instead of the id: /queue/NAME
 * (so /queue/NAME and /amq/queue/NAME reach it), on the UNSUBSCRIBE too, as
 * RabbitMQ wants it there.  Not in cluster mode, where JetStream keeps
 * durable subscriptions by their id.
 *
 * Subscription queues.  In RabbitMQ every topic subscription reads from a
 * queue of its own that the exchange feeds, so prefetch-count limits what it
 * has unacknowledged and the rest waits in that queue.  eftd gives a topic
 * subscription such a queue only where it changes something: a client or
 * client-individual SUBSCRIBE with a prefetch-count (and no selector), or
 * one with x-queue-name.  It is a durable subscription's queue in memory:
 * fed by the topic, never journaled, and deleted with what it holds when
 * its last subscriber leaves (RabbitMQ's auto-delete, its default for
 * topics).  Generated names are /queue/stomp-subscription-N; with
 * x-queue-name it is /queue/NAME, and later subscribers to the same topic
 * with that name share it as competing consumers.  Every other topic
 * subscription, auto-ack ones above all, is delivered to directly, and a
 * publish to a topic costs what it did while no subscription queue or
 * durable subscription exists (dests.nbound is 0). */
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

enum durable_open_error {
	DURABLE_OK,
	DURABLE_IN_USE,       /* a durable subscription with a subscriber */
	DURABLE_NOMEM,
	DURABLE_TAKEN,        /* the name is a queue that is not this topic's subscription queue */
};

/* The queue of durable subscription `name` on topic (made, and written to
 * the journal, if new; moved if it was on another topic, dropping what it
 * kept), ready for a subscriber; NULL with *why. */
struct dest *durable_open(struct broker *b, const char *name, size_t len, const char *topic,
    size_t topic_len, enum durable_open_error *why);
/* End durable subscription q (nobody subscribed): its messages are dropped. */
void durable_remove(struct broker *b, struct dest *q);
/* The durable subscription's name as users know it: without /durable/. */
const char *durable_shown(const char *name);

/* The subscription queue `name` of topic (above): made and bound if new,
 * the one there if it is that topic's already; NULL with *why
 * (DURABLE_TAKEN, DURABLE_NOMEM). */
struct dest *subscription_queue_open(struct broker *b, const char *name, size_t len,
    const char *topic, size_t topic_len, enum durable_open_error *why);

#endif
