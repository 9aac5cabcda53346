/* dest.h - destinations: queues and topics, by name.
 *
 * A queue keeps its messages on one list per priority, linked through the
 * messages themselves, and hands each to one subscriber, taking ready
 * subscribers in turn from a list, so choosing one costs O(1) however many
 * there are.  A subscriber with a selector looks at the first
 * DEST_SELECTOR_WINDOW messages for one it wants.  A topic hands each
 * message to every current subscriber (whose selector matches) and keeps
 * nothing.  The structures are private to dest.c.
 *
 * Consumer priorities (ActiveMQ's activemq.priority, RabbitMQ's
 * x-priority): while a queue has subscribers of more than one priority
 * (any but 0), its ready list is kept in order, highest priority first,
 * and each priority present has a level (a short list, highest first,
 * with the last ready subscriber of that priority), so that a subscriber
 * ready again goes in behind the others of its priority in O(1) once its
 * level has any ready, else after walking up the levels (there are few).
 * Taking the head of the list is then still the one O(1) choice: the
 * highest priority with room, in turn among equals; a lower one gets a
 * message only when no higher one is ready (its prefetch or its
 * connection's output is full).  Without priorities a queue has no levels
 * and the list is the plain round-robin it was.  A subscriber with a
 * selector that is waiting for a match (starved) is offered a new message
 * that matches whatever its priority.
 *
 * Exclusive consumers (ActiveMQ's activemq.exclusive, RabbitMQ's
 * x-single-active-consumer): the first subscriber of a queue that asks is
 * its active consumer and gets every message; the others, exclusive or
 * not, stand by, off the ready list.  A later one with a higher priority
 * takes over at once (as ActiveMQ does); one of the same priority waits.
 * When the active one leaves, the exclusive subscriber standing by with
 * the highest priority, the earliest of those, takes over; if none is left
 * the others share the queue again.  Its unacknowledged messages go back
 * to the queue as they always do, so the next one gets them, redelivered.
 *
 * RabbitMQ's exclusive queues (exclusive:true on SUBSCRIBE): the queue is
 * locked to the connection of the subscription that asked while any such
 * subscription of it lasts; another connection's SUBSCRIBE is refused
 * (dest_lock_check).  All of this is in memory and per node.
 *
 * Messages that expire, are rejected, come back too often or are pushed out
 * of a full drop-head queue die: dest.c hands them to the dests' `dead`
 * hook (the broker dead-letters or drops them).  Expiring messages are also
 * kept in a heap by time, so that a timer finds them wherever they are in
 * their queue.
 *
 * Wildcard queue consumers (ActiveMQ's): SUBSCRIBE /queue/orders.* makes a
 * pattern queue (dests_get_queue_pattern), which holds no messages and is
 * not in the table by name (a SEND to /queue/orders.* goes, as it always
 * did, to the plain queue of that name, which the pattern also matches).
 * Its subscriptions take from every plain /queue/ queue whose name the
 * pattern matches through a child subscription on each (sub.h): attached
 * to the queues there are at SUBSCRIBE, and to a queue made later when it
 * is made (one look in the tree of queue patterns, t->queue_patterns,
 * never on a publish; at SUBSCRIBE only the
 * queues whose first element is the pattern's, when that is a name, else
 * every queue).  A child is one more
 * consumer of its queue, so each message still goes to one consumer.
 * Temp-queues, reply queues and durable subscriptions' queues are named
 * otherwise (not /queue/) and are never matched.  A queue with a child on
 * it is kept while the wildcard subscription lasts, as with any consumer.
 *
 * Message references: a function that takes a message (dest_publish,
 * dest_give_back, dest_restore) takes the caller's reference.  Queuing never
 * allocates (the lists are in the messages), so a message given back is
 * never lost for want of memory. */
#ifndef EFT_DEST_H
#define EFT_DEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct backend;
struct dest;
struct endpoint;
struct queue_group;
struct dest_policy;
struct msg;
struct subjects;
struct sub;
struct temp;

enum dest_kind { DEST_QUEUE, DEST_TOPIC };

/* How far into a queue a subscriber with a selector looks for a message it
 * wants (like ActiveMQ's maxPageSize); messages further back wait until
 * those ahead are consumed. */
#define DEST_SELECTOR_WINDOW 1000

/* Why a queue message died. */
enum dest_death {
	DEATH_EXPIRED,            /* its expiry time passed */
	DEATH_REJECTED,           /* NACK requeue:false */
	DEATH_MAX_REDELIVERIES,   /* given back more than max-redeliveries times */
	DEATH_OVERFLOW,           /* pushed out of a full drop-head queue */
	DEATH_COUNT
};
const char *dest_death_name(enum dest_death why);   /* "expired", "max-redeliveries", ... */

/* What dest.c asks of its owner (the broker); any may be NULL: no clock
 * (nothing expires), the all-default policy, dead messages dropped. */
struct dests_hooks {
	void *arg;
	uint64_t (*now_ms)(void *arg);      /* wall clock, ms since the epoch */
	const struct dest_policy *(*policy)(void *arg, const char *name, size_t len);
	/* m, taken off queue d, died: takes the reference. */
	void (*dead)(void *arg, struct dest *d, struct msg *m, enum dest_death why);
};

/* An expiring queued message, in the heap by time. */
struct dest_expiry {
	uint64_t at;
	struct msg *msg;
	struct dest *dest;
};

/* Every destination, by name. */
struct dests {
	struct dest *by_name;
	uint64_t freed;      /* bumped whenever a destination is freed (caches check it) */
	uint64_t next_sub_seq; /* names the next subscription (sub.c): unique broker-wide */
	size_t count;
	struct dests_hooks hooks;     /* set with dests_set_hooks */
	/* Where messages are kept besides memory (backend.h), or NULL: a
	 * message it keeps (m->kept) given back goes to it (give_back), and a
	 * remote queue (dest_remote) is refilled from it. */
	const struct backend *backend;
	struct dest_expiry *expiry;  /* a min-heap of the queued messages that expire */
	size_t nexpiry, expiry_cap;
	/* Every /topic/ topic by its name after /topic/ (subject.h), NULL
	 * until the first: while some are wildcard patterns (npatterns), a
	 * publish to a topic goes to every topic the tree matches.  nodd:
	 * topics whose name is a malformed pattern, kept out of the tree. */
	struct subjects *topics;
	size_t npatterns, nodd;
	/* Wildcard queue consumers: the pattern queues, by name and in a tree
	 * by their name after /queue/ (NULL until the first). */
	struct dest *queue_patterns_by_name;
	struct subjects *queue_patterns;
	size_t nqueue_patterns;
	/* ... and while there are any, the plain /queue/ queues grouped by
	 * their first element, so that a pattern beginning with a name looks
	 * only at the queues that begin with it (dest.c). */
	struct queue_group *queue_groups;
	size_t nbound;       /* queues fed by a topic (dest_bind): publishes look for them */
	struct dest *idle_head; /* queues that expire unused (x-expires) with no subscriber */
};

/* The owner's hooks, registered once at start (lifetime.c): -1 if some
 * were registered already, so that no start-up order can lose them. */
int dests_set_hooks(struct dests *t, const struct dests_hooks *hooks);
struct dest *dests_find(struct dests *t, const char *name, size_t len);
/* Find or create; NULL if out of memory. */
struct dest *dests_get(struct dests *t, const char *name, size_t len, enum dest_kind kind);
/* Forget d if nothing holds it: no subscribers, no messages, not a temp-queue,
 * no policy of its own (dest_set_policy); an auto-delete queue goes as soon
 * as it has no subscriber, with its messages. */
void dests_release(struct dests *t, struct dest *d);
/* Delete d (it has no subscribers) with its messages. */
void dests_delete(struct dests *t, struct dest *d);
void dests_free(struct dests *t);
/* Are there wildcard topics (dests_topic_matches has something to find)? */
static inline bool
dests_have_patterns(const struct dests *t)
{
	return t->npatterns > 0;
}
/* The topics a publish to topic name (all of it, "/topic/...") goes to:
 * the topic of that name, if any, and every wildcard topic that matches
 * it.  The first cap of them into out, and how many there are (more than
 * cap: call again with room for all); SIZE_MAX if out of memory. */
size_t dests_topic_matches(struct dests *t, const char *name, size_t len, struct dest **out,
    size_t cap);
/* The pattern queue for a wildcard /queue/ SUBSCRIBE (name whole, its part
 * after /queue/ a well-formed pattern): found or made; NULL if out of
 * memory.  It is released as any destination is (dests_release). */
struct dest *dests_get_queue_pattern(struct dests *t, const char *name, size_t len);
/* Attach root, a new subscription to pattern queue pq, to every plain queue
 * its pattern matches (sub_attach): 0, or -1 if out of memory (some may be
 * attached: the caller ends root). */
int dests_attach_pattern(struct dests *t, struct dest *pq, struct sub *root);
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
/* The same, for a fn that may change the destination (not free it). */
void dests_foreach_mutable(struct dests *t, void (*fn)(struct dest *d, void *arg), void *arg);
/* Take up to budget queued messages whose time has come (at or before now)
 * off their queues, to the dead hook; returns how many.  The caller frees
 * destinations nothing holds any more (dests_prune is not needed: a queue
 * emptied here is released). */
size_t dests_expire(struct dests *t, uint64_t now, size_t budget);
/* A queue whose policy's expires_ms has passed since it last had a
 * subscriber (RabbitMQ's x-expires), with nothing handed out: the caller
 * deletes it (dests_delete) and asks again; NULL if none.  Walks the
 * queues without subscribers that have such a policy, only those. */
struct dest *dests_idle_expired(const struct dests *t, uint64_t now);
/* When the next queued message expires; 0 if none does. */
uint64_t dests_next_expiry(const struct dests *t);

const char *dest_name(const struct dest *d);
size_t dest_name_len(const struct dest *d);
bool dest_is(const struct dest *d, const char *name, size_t len);
enum dest_kind dest_kind(const struct dest *d);
/* A wildcard topic: its name after /topic/ is a pattern (subject.h), and it
 * gets what is published to the topics it matches; or a pattern queue. */
bool dest_is_pattern(const struct dest *d);
size_t dest_depth(const struct dest *d);       /* messages queued */
size_t dest_bytes(const struct dest *d);       /* their memory */
size_t dest_subscribers(const struct dest *d);
size_t dest_unacked(const struct dest *d);     /* handed out, not yet acknowledged */
uint64_t dest_published(const struct dest *d); /* messages published to it since it was made */
struct temp *dest_temp(const struct dest *d);  /* the temp-queue it is, or NULL */
const struct dest_policy *dest_policy(const struct dest *d);
/* Give d a policy of its own, a copy of p, instead of the one it was made
 * with (RabbitMQ's x- arguments, qargs.h): for a queue just made, before
 * it holds anything.  Such a queue is kept while empty and unused, as a
 * declared RabbitMQ queue is.  -1 if out of memory (d is unchanged). */
int dest_set_policy(struct dest *d, const struct dest_policy *p);
/* Has d a policy of its own (dest_set_policy), so that it is kept empty? */
bool dest_has_own_policy(const struct dest *d);
size_t dest_by_priority(const struct dest *d, unsigned priority); /* queued at it (walks them) */
void dest_set_temp(struct dest *d, struct temp *t);
/* The backend of d's destinations, or NULL. */
const struct backend *dest_backend(const struct dest *d);
/* Cluster mode: what cluster.c knows d by, or NULL (not pulled from NATS). */
void *dest_remote(const struct dest *d);
void dest_set_remote(struct dest *d, void *remote);

/* Subscribers come and go (sub.c keeps the links in struct sub; s->selector,
 * priority, exclusive, locks and seq are set before dest_sub_add, which
 * returns -1, having changed nothing, if out of memory). */
int dest_sub_add(struct dest *d, struct sub *s);
void dest_sub_remove(struct dest *d, struct sub *s);
/* May a subscription of ep (locks: one asking for the queue to itself, as
 * RabbitMQ's exclusive:true) be added to d? */
enum dest_lock {
	DEST_LOCK_OK,
	DEST_LOCK_HELD,       /* d is locked to another connection */
	DEST_LOCK_SHARED,     /* the lock is asked for while another connection consumes */
};
enum dest_lock dest_lock_check(const struct dest *d, const struct endpoint *ep, bool locks);
/* A queue's ready list: subscribers that may be given a message now. */
void dest_ready_add(struct dest *d, struct sub *s);
void dest_ready_remove(struct dest *d, struct sub *s);

/* Keep d while a COMMIT prepares and applies (dests_release leaves it). */
void dest_hold(struct dest *d);
void dest_unhold(struct dest *d);
/* When m, about to be published to d, expires: its own time, or d's
 * message-ttl from now if that is sooner.  Call before the journal stores m. */
void dest_stamp(struct dest *d, struct msg *m);
/* Has m's time come (by d's clock)? */
bool dest_msg_expired(const struct dest *d, const struct msg *m);
/* Queue m (and hand it to a ready subscriber), or, for a topic, deliver it
 * to every subscriber whose selector matches.  Takes the reference.  A full
 * drop-head queue first lets its oldest lowest-priority message die.  A
 * topic delivery that fails for want of memory is dropped for that
 * subscriber and counted in *dropped.  A message already expired dies; so
 * does a now-or-never one (m->now_or_never) that no subscriber of a queue
 * can take at once (d may then hold nothing). */
void dest_publish(struct dest *d, struct msg *m, uint64_t *dropped);
/* Is queue d at a limit of its policy that makes producers wait (overflow
 * block, max-queue-messages or max-queue-bytes)? */
bool dest_full(const struct dest *d);
/* A queue message handed out comes back unacknowledged.  Whoever keeps it
 * decides: a backend that keeps it elsewhere (the cluster) takes it back
 * (another node may have it); otherwise it goes to the head of its
 * priority, marked redelivered, or dies if it came back more than
 * max-redeliveries times.  Takes the reference. */
void dest_give_back(struct dest *d, struct msg *m);
/* A queue message handed out was rejected (NACK requeue:false): it dies. */
void dest_reject(struct dest *d, struct msg *m);
/* Put a message read back from the journal at the tail of queue d, without
 * handing it out (nobody is subscribed yet).  Takes the reference. */
void dest_restore(struct dest *d, struct msg *m, bool redelivered);
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
/* An auto-delete queue (a subscription queue, durable.h, or RabbitMQ's
 * auto-delete:true): dests_release deletes it, with what it holds, once it
 * has no subscriber and nothing handed out. */
void dest_set_auto_delete(struct dest *queue, bool on);
bool dest_auto_delete(const struct dest *queue);
/* A transient queue (RabbitMQ's durable:false, and every auto-delete one):
 * the journal keeps none of its messages, so none outlives a restart. */
void dest_set_transient(struct dest *queue, bool on);
bool dest_transient(const struct dest *queue);
/* The durable queues a topic feeds, *n of them. */
struct dest *const *dest_feeds(const struct dest *topic, size_t *n);
/* Take every queued message off d: fn (if not NULL) sees each before its
 * reference is dropped. */
void dest_purge(struct dest *d, void (*fn)(struct msg *m, void *arg), void *arg);

/* For tests and fuzzers: call fn on every queued message, in the order
 * they would be handed out (highest priority first). */
void dest_foreach_queued(const struct dest *d, void (*fn)(const struct msg *m, bool redelivered,
    void *arg), void *arg);
/* For tests and fuzzers, with the broker at rest (between loop turns): NULL
 * if d's bookkeeping holds (counts, lists, room kept for what was handed
 * out, no empty destination kept, no message waiting while a subscriber
 * could take it), else what does not. */
const char *dest_check(const struct dest *d);

#endif
