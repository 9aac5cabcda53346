/* sub.h - subscriptions, their deliveries and acknowledgements.
 *
 * A delivery in client or client-individual mode is kept until it is ACKed,
 * NACKed or its subscription ends; then the message is released or goes back
 * to the head of its queue, marked redelivered.
 *
 * A wildcard queue subscription (dest.h) is a root subscription on its
 * pattern queue, the one the client knows (by id, in ep->subs), with a
 * child subscription on every queue it takes from.  A child is an ordinary
 * consumer of its queue (ready list, priority, selector, exclusive), but
 * its deliveries are the root's: they are keyed by the root's seq and kept
 * on the root's unacked list, so that ACK/NACK by any of the three names,
 * a cumulative ACK in client mode and the prefetch window work across all
 * its queues as on one.  A plain subscription is its own root and has no
 * children.  Children end only with their root: its unacked messages go
 * back, each to its own queue, redelivered. */
#ifndef EFT_SUB_H
#define EFT_SUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uthash.h>

#include "eft/dest.h"
#include "eft/msg.h"

struct outbuf;

/* Counts of what subscriptions did, kept by the broker (its statistics). */
struct sub_counts {
	uint64_t deliveries;                  /* MESSAGE frames */
	uint64_t redelivered;                 /* ... of messages a consumer had before */
	uint64_t acked;                       /* queue deliveries acknowledged */
};

/* Where one session's subscriptions deliver, and what they hold.  The
 * connection fills it in and keeps `open` and `blocked` up to date; sub.c
 * knows no connection and no session, only this. */
struct endpoint {
	struct outbuf *out;                   /* MESSAGE frames are written here */
	enum stomp_version version;
	bool open;                            /* the session is open (CONNECTed, not closing) */
	bool blocked;                         /* output above the high-water mark: no queue
	                                         deliveries until it drains */
	void (*output_added)(void *arg);      /* output was added: write it (and check limits) */
	void *arg;
	struct sub *subs;                     /* by id */
	struct delivery *deliveries;          /* unacked, by key */
	struct dests *dests;
	struct sub_counts *counts;
	bool redelivered_false;               /* first deliveries say redelivered:false
	                                         (redelivered-always = yes, as RabbitMQ) */
};

enum ack_mode { ACK_AUTO, ACK_CLIENT, ACK_CLIENT_INDIVIDUAL };

/* What an ACK or NACK does with a delivery. */
enum settle {
	SETTLE_ACK,      /* done with it */
	SETTLE_NACK,     /* give it back to its queue */
	SETTLE_REJECT,   /* NACK requeue:false (RabbitMQ): it dies (dead-letter queue) */
};

struct selector;
struct dest_level;

/* What a SUBSCRIBE asks of its subscription besides the destination.
 * priority, exclusive and locks mean something on queues only (dest.h). */
struct sub_options {
	enum ack_mode ack;
	uint32_t prefetch;                 /* most unacked deliveries; 0 = no limit */
	int32_t priority;                  /* consumer priority: higher is served first */
	bool exclusive;                    /* wants to be the queue's single active consumer
	                                      (activemq.exclusive, x-single-active-consumer) */
	bool locks;                        /* the queue is its connection's alone while it lasts
	                                      (RabbitMQ's exclusive) */
};

struct delivery_key {
	uint64_t sub_seq;
	uint64_t msg_id;
};

struct delivery {
	UT_hash_handle hh;                 /* in ep->deliveries */
	struct delivery_key key;
	struct msg *msg;
	struct sub *sub;
	struct delivery *prev, *next;      /* sub's unacked list, oldest first */
	bool redelivered;
};

struct sub {
	UT_hash_handle hh;                 /* in ep->subs, keyed by id */
	char *id;                          /* the client's id (1.0 without id: the destination) */
	size_t id_len;
	char *sub_line;                    /* "subscription:ID\n", encoded; "" when the client gave no id;
	                                      after "redelivered:false\n" if ep->redelivered_false */
	size_t sub_line_len;
	size_t first_len;                  /* the length of that "redelivered:false\n", or 0: a
	                                      redelivery writes the rest of sub_line (wire.c) */
	struct endpoint *ep;
	struct dest *dest;
	struct sub **owner_ref;            /* if not NULL, set to NULL when it ends (a temp-queue's
	                                      auto_sub) */
	enum ack_mode ack;
	uint64_t seq;                      /* broker-unique, names deliveries */
	uint32_t prefetch;                 /* most unacked deliveries; 0 = no limit */
	int32_t priority;                  /* consumer priority (queues) */
	bool exclusive;                    /* see struct sub_options */
	bool locks;
	struct sub *dest_prev, *dest_next; /* the destination's subscribers (dest.c) */
	struct sub *ready_prev, *ready_next; /* its ready list (dest.c) */
	bool in_ready;
	/* The queue has an active exclusive consumer and it is another: off
	 * the ready list until that one leaves (dest.c).  An exclusive one
	 * waits in the queue's standby list. */
	bool standby;
	struct sub *standby_prev, *standby_next;
	struct dest_level *level;          /* its priority's level while the queue has several (dest.c) */
	bool ready_slow;                   /* starved, standby or level: dest.c's ready list
	                                      takes the long way for it (dest.c) */
	struct selector *selector;         /* compiled at SUBSCRIBE, or NULL: every message */
	/* A queue subscriber whose selector matched nothing in the window is
	 * "starved": off the ready list, offered each new message instead
	 * (dest.c). */
	bool starved;
	bool missed;                       /* ... a match came while it could not take it */
	bool scanned_part;                 /* ... the queue was longer than the window */
	uint64_t scan_pops;                /* ... the queue's pops when it looked */
	struct sub *starved_prev, *starved_next;
	/* The root's only (see above): its deliveries, on all its queues. */
	struct delivery *unacked_head, *unacked_tail;
	size_t n_unacked;
	struct sub *root;                  /* itself, or the wildcard subscription it serves */
	struct sub *children;              /* a wildcard queue subscription's, linked by sibling */
	struct sub *sibling;
	struct sub *wake_next;             /* sub_settle's list of children to look at again */
	bool waking;                       /* ... it is on it */
};

int sub_ack_mode_parse(const char *s, size_t len, enum ack_mode *out);

/* Subscribe ep to d; NULL if out of memory.  has_id: the client named the
 * subscription.  The subscription takes sel (may be NULL) either way.  A
 * queue's lock (opt->locks) is checked first (dest_lock_check). */
struct sub *sub_new(struct endpoint *ep, struct dest *d, const char *id, size_t id_len,
    bool has_id, const struct sub_options *opt, struct selector *sel);
/* Make root, a wildcard queue subscription, take from queue d as well
 * (dest.c calls it when such a queue is made, or at SUBSCRIBE): 0, or -1
 * if out of memory.  A queue locked to another connection is left out. */
int sub_attach(struct sub *root, struct dest *d);
/* s may take messages again (its connection's output drained, or it was
 * just made): list it, or each of its children, as ready and dispatch. */
void sub_wake(struct sub *s);
/* Does s's selector (if any) want m? */
bool sub_matches(const struct sub *s, const struct msg *m);
/* End a subscription (a root: with its children): its unacked queue
 * messages are given back (dest_give_back), the backend hears that its
 * interest is gone, and the destination hands what it holds to its other
 * subscribers. */
void sub_end(struct sub *s);

/* May s be given another message now? */
bool sub_can_take(const struct sub *s);
/* Write m to the subscriber's connection (whole, or not at all).  0: the
 * reference is taken; -1: out of memory, the caller keeps it. */
int sub_deliver(struct sub *s, struct msg *m, bool redelivered);

/* The ack header value for a delivery ("SEQ-MSGID"); returns its length. */
size_t sub_ack_id(char *buf, size_t size, uint64_t sub_seq, uint64_t msg_id);
int sub_ack_id_parse(const char *s, size_t len, struct delivery_key *out);

/* Settle the delivery with key k as `how` says: in client mode it and every
 * older delivery of its subscription.  Returns false if no such delivery is
 * pending. */
bool sub_settle(struct endpoint *ep, const struct delivery_key *k, enum settle how);
/* Forget every pending delivery of ep whose message revoke says is no
 * longer this broker's (revoke has let go of it: the cluster, cut off past
 * its ack wait): no ACK, no give back, the subscriber's window freed.  A
 * later ACK or NACK of one finds nothing pending.  Returns how many; the
 * caller then wakes ep's subscriptions (sub_wake), which may take more. */
size_t sub_revoke(struct endpoint *ep, bool (*revoke)(struct msg *m, void *arg), void *arg);
/* The pending delivery with key k, or NULL. */
struct delivery *sub_find_delivery(struct endpoint *ep, const struct delivery_key *k);

#endif
