/* dest.h - destinations: queues and topics, by name.
 *
 * A queue keeps messages in a ring and hands each to one subscriber, taking
 * ready subscribers in turn from a list, so choosing one costs O(1) however
 * many there are.  A topic hands each message to every current subscriber and
 * keeps nothing.  The structures are private to dest.c.
 *
 * Message references: a function that takes a message (dest_publish) takes
 * the caller's reference when it returns 0; when it fails (-1) the caller
 * still owns it.  dest_requeue cannot fail: a queue's ring always has room
 * for every message it has handed out and not had acknowledged (see
 * dest_reserve), so a message given back is never lost. */
#ifndef EFT_DEST_H
#define EFT_DEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dest;
struct msg;
struct sub;
struct temp;

enum dest_kind { DEST_QUEUE, DEST_TOPIC };

/* Every destination, by name. */
struct dests {
	struct dest *by_name;
	uint64_t freed;      /* bumped whenever a destination is freed (caches check it) */
	size_t count;
};

struct dest *dests_find(struct dests *t, const char *name, size_t len);
/* Find or create; NULL if out of memory. */
struct dest *dests_get(struct dests *t, const char *name, size_t len, enum dest_kind kind);
/* Forget d if nothing holds it: no subscribers, no messages, not a temp-queue. */
void dests_release(struct dests *t, struct dest *d);
/* Delete d (it has no subscribers) with its messages. */
void dests_delete(struct dests *t, struct dest *d);
void dests_free(struct dests *t);
/* Forget every destination nothing holds (after the journal is read). */
void dests_prune(struct dests *t);
/* How many of each, and the messages they hold (the admin API, metrics). */
struct dests_totals {
	size_t queues, topics, temp_queues;
	size_t queued, unacked;           /* messages waiting, and handed out unacknowledged */
};
void dests_totals(const struct dests *t, struct dests_totals *out);
/* Messages waiting in queues, and on how many queues (*nqueues). */
size_t dests_queued(const struct dests *t, size_t *nqueues);
/* Every destination, sorted by name, in an array to free (*n of them);
 * NULL if out of memory. */
struct dest **dests_sorted(const struct dests *t, size_t *n);
/* Call fn on every destination (fn must not free any). */
void dests_foreach(const struct dests *t, void (*fn)(const struct dest *d, void *arg), void *arg);

const char *dest_name(const struct dest *d);
size_t dest_name_len(const struct dest *d);
bool dest_is(const struct dest *d, const char *name, size_t len);
enum dest_kind dest_kind(const struct dest *d);
size_t dest_depth(const struct dest *d);       /* messages queued */
size_t dest_bytes(const struct dest *d);       /* their memory */
size_t dest_subscribers(const struct dest *d);
size_t dest_unacked(const struct dest *d);     /* handed out, not yet acknowledged */
uint64_t dest_published(const struct dest *d); /* messages published to it since it was made */
struct temp *dest_temp(const struct dest *d);  /* the temp-queue it is, or NULL */
void dest_set_temp(struct dest *d, struct temp *t);

/* Subscribers come and go (sub.c keeps the links in struct sub). */
void dest_sub_add(struct dest *d, struct sub *s);
void dest_sub_remove(struct dest *d, struct sub *s);
/* A queue's ready list: subscribers that may be given a message now. */
void dest_ready_add(struct dest *d, struct sub *s);
void dest_ready_remove(struct dest *d, struct sub *s);

/* Make sure n more messages can be queued without allocating (a COMMIT
 * reserves before it applies anything).  -1 if out of memory. */
int dest_reserve(struct dest *d, size_t n);
/* Give back room reserved and not used (a COMMIT that could not prepare). */
void dest_unreserve(struct dest *d, size_t n);
/* Queue m (and hand it to a ready subscriber), or, for a topic, deliver it
 * to every subscriber.  0: the reference is taken; -1: out of memory, the
 * caller keeps it.  A topic delivery that fails for want of memory is
 * dropped for that subscriber and counted in *dropped. */
int dest_publish(struct dest *d, struct msg *m, uint64_t *dropped);
/* A queue message handed out comes back unacknowledged: it goes to the head
 * of the queue, marked redelivered.  Takes the reference; cannot fail. */
void dest_requeue(struct dest *d, struct msg *m);
/* Put a message read back from the journal at the tail of queue d, without
 * handing it out (nobody is subscribed yet).  -1 if out of memory. */
int dest_restore(struct dest *d, struct msg *m, bool redelivered);
/* A queue message handed out was acknowledged (or dropped with its copy). */
void dest_settled(struct dest *d);
/* Hand queued messages to ready subscribers, in turn. */
void dest_dispatch(struct dest *d);

/* Durable topic subscriptions: a queue of its own, fed by the topic with a
 * copy of every message, kept while nobody is subscribed (durable.c).
 * dest_bind makes queue durable and fed by topic (-1 if out of memory);
 * dest_unbind makes it an ordinary queue again. */
int dest_bind(struct dest *queue, struct dest *topic);
void dest_unbind(struct dest *queue);
struct dest *dest_bound_topic(const struct dest *queue);   /* NULL: not durable */
/* The durable queues a topic feeds, *n of them. */
struct dest *const *dest_feeds(const struct dest *topic, size_t *n);
/* Take every queued message off d: fn (if not NULL) sees each before its
 * reference is dropped. */
void dest_purge(struct dest *d, void (*fn)(struct msg *m, void *arg), void *arg);

/* For tests and fuzzers: call fn on every queued message, head first. */
void dest_foreach_queued(const struct dest *d, void (*fn)(const struct msg *m, bool redelivered,
    void *arg), void *arg);
/* For tests and fuzzers, with the broker at rest (between loop turns): NULL
 * if d's bookkeeping holds (counts, lists, room kept for what was handed
 * out, no empty destination kept, no message waiting while a subscriber
 * could take it), else what does not. */
const char *dest_check(const struct dest *d);

#endif
