/* broker.h - the broker's state: destinations by name, message ids, the list
 * of connections, and the once-per-loop output flush.
 *
 * eftd is single-threaded: everything here is touched only from the libevent
 * loop, so nothing is locked. */
#ifndef EFT_BROKER_H
#define EFT_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uthash.h>

#include "eft/config.h"
#include "eft/msg.h"

struct event_base;
struct event;
struct evconnlistener;
struct conn;
struct sub;
struct temp;
struct auth;

enum dest_kind { DEST_QUEUE, DEST_TOPIC };

/* What a destination name given by a client means. */
enum address_kind {
	ADDR_QUEUE,       /* /queue/NAME */
	ADDR_TOPIC,       /* /topic/NAME */
	ADDR_TEMP_QUEUE,  /* /temp-queue/NAME: the connection's own temp-queue */
	ADDR_REPLY_QUEUE, /* /reply-queue/...: someone's temp-queue, by its broker-wide name */
};

/* A FIFO ring of queued messages; redelivered marks what a consumer had. */
struct qentry {
	struct msg *msg;
	bool redelivered;
};

struct msgq {
	struct qentry *e;
	size_t head, count, cap;
	size_t bytes;  /* message memory queued */
};

struct dest {
	UT_hash_handle hh;
	char *name;
	size_t name_len;
	enum dest_kind kind;
	struct msgq q;                        /* queues only */
	struct sub *subs;                     /* every subscription, linked by dest_next */
	size_t nsubs;
	struct sub *ready_head, *ready_tail;  /* queues: who may take a message now, in turn */
	struct temp *temp;                    /* set for a temp-queue: it lives as its owner does */
};

struct broker_stats {
	uint64_t frames_in;
	uint64_t msgs_in;
	uint64_t deliveries;
	uint64_t connections;
	uint64_t replies_dropped;             /* sent to a temp-queue whose owner had gone */
};

struct broker {
	struct event_base *base;
	const struct config *cfg;
	struct dest *dests;
	uint64_t next_msg_id;
	uint64_t next_sub_seq;
	uint64_t next_session;
	struct conn *conns;                  /* all connections, linked by next */
	struct conn *flush_head;             /* connections with output to write */
	struct event *flush_ev;
	struct evconnlistener *listener;
	struct broker_stats stats;
	uint64_t dests_freed;                /* bumped whenever a destination is freed */
	struct msg_pool msg_pool;
	size_t max_memory;                   /* message memory above which producers wait */
	bool memory_alarm;                   /* above max_memory, until below 90% of it */
	struct conn *paused;                 /* producers not being read, linked by paused_next */
	struct event *paused_ev;             /* looks at them every PAUSE_CHECK_MS */
	size_t nconns;
	size_t max_conns;                    /* more are refused */
	uint64_t refused;                    /* connections refused since the limit was hit */
	struct event *relisten_ev;           /* re-enables accept after EMFILE */
	struct auth *auth;                   /* users file, or NULL: anyone may connect */
	size_t refusing;                     /* refused connections still getting their ERROR */
	bool stopping;                       /* shutting down: the loop ends when conns do */
	struct event *stop_ev;               /* ends the loop if they take too long */
};

/* NULL if out of memory. */
struct broker *broker_new(struct event_base *base, const struct config *cfg);
void broker_free(struct broker *b);
/* Start listening on cfg->bind:cfg->port; -1 with a reason in err. */
int broker_listen(struct broker *b, char *err, size_t errlen);
/* Begin a clean stop: accept nothing more, tell every client and close every
 * connection; the loop ends when they are gone or after grace_ms. */
void broker_shutdown(struct broker *b, unsigned grace_ms);
/* Close whatever connections are left, at once. */
void broker_close_all(struct broker *b);
/* Messages waiting in queues, and on how many queues (*ndests). */
size_t broker_queued(const struct broker *b, size_t *ndests);

/* Is name a destination eftd serves?  Fills kind. */
bool broker_address_kind(const char *name, size_t len, enum address_kind *kind);
struct dest *broker_dest_find(struct broker *b, const char *name, size_t len);
/* Find or create; NULL if out of memory. */
struct dest *broker_dest_get(struct broker *b, const char *name, size_t len, enum dest_kind kind);
/* Forget a destination that has no subscribers and no messages (temp-queues stay). */
void broker_dest_release(struct broker *b, struct dest *d);
/* Delete a destination that has no subscribers, with its messages. */
void broker_dest_delete(struct broker *b, struct dest *d);

/* Route a message (the caller's reference passes to the broker); -1 if out of memory. */
int broker_publish(struct broker *b, struct dest *d, struct msg *m);
/* Hand queued messages to ready subscribers, in turn. */
void broker_dispatch(struct broker *b, struct dest *d);
/* Put messages a consumer gave back at the head of the queue, in order. */
int broker_requeue(struct broker *b, struct dest *d, struct msg *m);

/* Ready list of a queue: subscribers that may be given a message. */
void broker_ready_add(struct dest *d, struct sub *s);
void broker_ready_remove(struct dest *d, struct sub *s);

/* Would another message for d break a limit?  (max-queue-*, max-memory) */
bool broker_queue_full(const struct broker *b, const struct dest *d);
bool broker_memory_full(struct broker *b);
/* A producer was paused: make sure somebody looks at it again. */
void broker_paused_added(struct broker *b);
/* Resume paused producers whose reason has gone. */
void broker_check_paused(struct broker *b);

/* Write c's output before the loop next waits. */
void broker_want_flush(struct broker *b, struct conn *c);
void broker_flush_remove(struct broker *b, struct conn *c);


#endif
