/* backend.h - the seam between the broker core and where queue messages
 * are kept besides memory: the journal (store.c, data-dir) or NATS
 * JetStream (cluster.c, cluster).  At most one backend is on.
 *
 * The core calls only these operations; a backend reaches up only through
 * the events the core registers when it opens the backend (struct
 * backend_events).  Memory alone is no backend at all: b->backend is NULL
 * and the in-memory path makes no call.  Every operation may be NULL where
 * a backend has no use for it.  Modelled on nats-server's StreamStore: the
 * stream picks its store once, then only calls the interface.
 *
 * Promises: every operation that asks the backend to keep something moves
 * its `promised` number; the backend reports through events->kept how far
 * it has kept them, all up to a number.  Output that depends on them waits
 * for that (hold.h). */
#ifndef EFT_BACKEND_H
#define EFT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct dest;
struct dests;
struct event_base;
struct msg;
struct msg_pool;
struct sub;

/* How a message left for good: the one path every such end takes
 * (backend_gone). */
enum msg_fate {
	FATE_CONSUMED,   /* acknowledged, or handed to an auto-ack subscriber */
	FATE_DEAD,       /* expired, rejected, redelivered too often, pushed out */
	FATE_PURGED,     /* an administrator purged or deleted its queue */
	FATE_DROPPED,    /* its durable subscription ended or moved to another topic */
};

/* How the backend copes: producers wait while it is busy, and what needs
 * it is refused (an ERROR) while it is failing. */
enum backend_pressure { BACKEND_OK, BACKEND_BUSY, BACKEND_FAILING };

/* What a backend has to say for the metrics, the admin API and the log. */
struct backend_stats {
	uint64_t disk_bytes;      /* journal: bytes on disk */
	uint64_t disk_limit;      /* journal: max-disk, above which producers wait */
	uint64_t messages;        /* journal: persistent messages it keeps */
	bool alarm;               /* journal: over max-disk, or cannot be written */
	uint64_t syncs;           /* journal: fdatasyncs, their total and longest time */
	uint64_t sync_total_us, sync_max_us;
};

/* Why a backend did not take a SEND (publish, check) or a subscription. */
#define BACKEND_NOMEM (-1)  /* out of memory */
#define BACKEND_DOWN (-2)   /* it cannot be reached (NATS not connected, no stream yet) */
#define BACKEND_NAME (-3)   /* the name cannot be carried (too long for a NATS subject) */
#define BACKEND_SIZE (-4)   /* the message is too large for it (NATS's max_payload) */

struct backend_ops {
	const char *name;                      /* "journal", "cluster": for log lines */
	/* Destinations the backend carries itself (the cluster: queues,
	 * topics and other nodes' temp-queues), kind being address.h's: */
	bool (*carries)(const void *impl, int kind, const char *name, size_t len);
	/* Send m there: 0 (the caller keeps its reference; a topic's local
	 * subscribers are the caller's to serve), or a BACKEND_* code with
	 * *why in words.  check: could it ever be sent (BACKEND_NAME,
	 * BACKEND_SIZE), for a transaction that must not fail halfway. */
	int (*publish)(void *impl, int kind, const char *name, size_t len, const struct msg *m,
	    const char **why);
	int (*check)(const void *impl, int kind, const char *name, size_t len,
	    const struct msg *m, const char **why);
	/* Subscriber s joins d (0, or BACKEND_NOMEM, BACKEND_NAME). */
	int (*interest_added)(void *impl, struct dest *d, const struct sub *s);
	/* Durable subscriptions the backend keeps itself (the cluster): s
	 * subscribes to d (/durable/NAME, a local queue that buffers) on
	 * topic; and ending the one named name. */
	int (*durable_open)(void *impl, struct dest *d, const struct sub *s, const char *topic,
	    size_t topic_len);
	void (*durable_close)(void *impl, const char *name, size_t len);
	/* The broker-wide name of a new temp-queue here, from random: its
	 * length, 0 if it does not fit cap. */
	size_t (*temp_name)(const void *impl, char *out, size_t cap, const char *random);
	/* m (persistent) is queued at d: keep it.  -1 if out of memory (m is
	 * then not kept, and the caller refuses it). */
	int (*keep)(void *impl, struct dest *d, struct msg *m);
	/* m, kept, was handed to a consumer that must acknowledge it. */
	void (*delivered)(void *impl, struct msg *m);
	/* m, kept, left for good. */
	void (*gone)(void *impl, struct msg *m, enum msg_fate fate);
	/* m, kept elsewhere and handed out from d, comes back unacknowledged:
	 * takes the reference (another node may take it). */
	void (*give_back)(void *impl, struct dest *d, struct msg *m);
	/* d's subscribers may take more than d holds. */
	void (*refill)(void *impl, struct dest *d);
	/* Durable subscription queue is fed by topic from now on (-1 if out
	 * of memory), or no longer. */
	int (*bind)(void *impl, const struct dest *queue, const struct dest *topic);
	void (*unbind)(void *impl, const struct dest *queue);
	/* Persistent scheduled message m (schedule.h) waits for dest, with the
	 * schedule's state (opaque): keep it, or keep the new state of one
	 * kept (-1 if out of memory: nothing changed).  It waits no more:
	 * unschedule.  NULL where scheduled messages are not kept. */
	int (*schedule)(void *impl, struct msg *m, const char *dest, size_t dest_len,
	    const void *state, size_t state_len);
	void (*unschedule)(void *impl, struct msg *m);
	/* Subscriber s of d leaves. */
	void (*interest_removed)(void *impl, struct dest *d, const struct sub *s);
	/* What is kept between begin and end is kept whole or not at all;
	 * begin may be given the room it will need, and fails (-1) if it
	 * cannot be had.  Pairs nest. */
	int (*batch_begin)(void *impl, size_t room);
	void (*batch_end)(void *impl);
	/* The room keep needs for m queued at a destination named dest_len
	 * bytes long, and for a settled delivery (for batch_begin). */
	size_t (*keep_room)(const struct msg *m, size_t dest_len);
	size_t settle_room;
	/* The backend's number for everything asked of it so far. */
	uint64_t (*promised)(const void *impl);
	enum backend_pressure (*pressure)(void *impl);
	/* Once per loop turn, before output that waits for it: make what was
	 * asked this turn kept (the journal's group commit).  -1 while it
	 * cannot (the reason in error). */
	int (*flush)(void *impl, uint64_t now_ms, uint64_t next_msg_id);
	/* Why it is failing, for ERROR frames and the log. */
	const char *(*error)(const void *impl);
	void (*stats)(const void *impl, struct backend_stats *out);
	/* What waits in the backend for queue name (/queue/NAME), for the
	 * whole cluster, as last counted (the cluster: every cluster-stats-ms):
	 * a count, or -1 if unknown (not counted, not connected, not a queue
	 * it carries). */
	int64_t (*waiting)(const void *impl, const char *name, size_t len);
	/* fn on every queue with messages waiting, as last counted (nothing
	 * while unknown). */
	void (*each_waiting)(const void *impl, void (*fn)(const char *name, size_t len,
	    uint64_t count, void *arg), void *arg);
	/* How old that count is, in ms; -1 if unknown. */
	int64_t (*waiting_age_ms)(const void *impl);
};

/* What a backend may tell the core (registered when it is opened). */
struct backend_events {
	void *arg;
	/* Everything promised up to `kept` is kept now. */
	void (*kept)(void *arg, uint64_t kept);
	/* Something was asked that the next flush makes kept: make sure one
	 * follows this loop turn. */
	void (*wakeup)(void *arg);
	/* The wall clock, ms since the epoch. */
	uint64_t (*now_ms)(void *arg);
	/* fn on every message handed out and not yet acknowledged. */
	void (*each_unacked)(void *arg, void (*fn)(const struct msg *m, void *fnarg), void *fnarg);
	/* Forget every message handed out and not yet acknowledged of which
	 * revoke (given fnarg) says the backend let go: no longer pending, its
	 * subscriber's window freed, a later ACK of it does nothing.  Returns
	 * how many. */
	size_t (*revoke_unacked)(void *arg, bool (*revoke)(struct msg *m, void *fnarg),
	    void *fnarg);
	/* Durable subscription d (/durable/NAME) has a live subscriber on
	 * another node (the cluster's lease): end d's subscriber here with the
	 * ERROR a second subscriber gets on one node, cutting out its RECEIPTs
	 * not yet kept.  Its connection closes later, not during the call. */
	void (*durable_refused)(void *arg, struct dest *d);
};

/* What of the core's state a backend may use, given when it is opened. */
struct backend_env {
	struct event_base *base;
	const struct config *cfg;
	struct dests *dests;
	struct msg_pool *pool;
	uint64_t *next_msg_id;                /* message ids: take one with (*next_msg_id)++ */
	uint64_t *dropped_no_memory;          /* the broker's counts of messages dropped ... */
	uint64_t *dropped_reply_owner_gone;
	const struct backend_events *events;
};

struct backend {
	const struct backend_ops *ops;
	void *impl;
};

/* The core's calls: each does nothing where the backend has no such
 * operation.  be may not be NULL (the core checks that first). */
static inline int
backend_keep(const struct backend *be, struct dest *d, struct msg *m)
{
	return be->ops->keep ? be->ops->keep(be->impl, d, m) : 0;
}

static inline void
backend_delivered(const struct backend *be, struct msg *m)
{
	if (be->ops->delivered)
		be->ops->delivered(be->impl, m);
}

static inline void
backend_gone(const struct backend *be, struct msg *m, enum msg_fate fate)
{
	if (be->ops->gone)
		be->ops->gone(be->impl, m, fate);
}

static inline int
backend_bind(const struct backend *be, const struct dest *queue, const struct dest *topic)
{
	return be->ops->bind ? be->ops->bind(be->impl, queue, topic) : 0;
}

static inline void
backend_unbind(const struct backend *be, const struct dest *queue)
{
	if (be->ops->unbind)
		be->ops->unbind(be->impl, queue);
}

static inline int
backend_batch_begin(const struct backend *be, size_t room)
{
	return be->ops->batch_begin ? be->ops->batch_begin(be->impl, room) : 0;
}

static inline void
backend_batch_end(const struct backend *be)
{
	if (be->ops->batch_end)
		be->ops->batch_end(be->impl);
}

/* Does the backend carry SENDs to (kind, name) itself? */
static inline bool
backend_carries(const struct backend *be, int kind, const char *name, size_t len)
{
	return be != NULL && be->ops->carries != NULL && be->ops->carries(be->impl, kind, name, len);
}

/* The backend's count of what waits for queue name; -1 without a backend
 * that counts, or while unknown. */
static inline int64_t
backend_waiting(const struct backend *be, const char *name, size_t len)
{
	return be != NULL && be->ops->waiting ? be->ops->waiting(be->impl, name, len) : -1;
}

static inline void
backend_each_waiting(const struct backend *be, void (*fn)(const char *name, size_t len,
    uint64_t count, void *arg), void *arg)
{
	if (be != NULL && be->ops->each_waiting)
		be->ops->each_waiting(be->impl, fn, arg);
}

/* Does the backend count what waits (whether it knows now or not)? */
static inline bool
backend_counts_waiting(const struct backend *be)
{
	return be != NULL && be->ops->waiting_age_ms != NULL;
}

static inline int64_t
backend_waiting_age_ms(const struct backend *be)
{
	return backend_counts_waiting(be) ? be->ops->waiting_age_ms(be->impl) : -1;
}

static inline uint64_t
backend_promised(const struct backend *be)
{
	return be->ops->promised ? be->ops->promised(be->impl) : 0;
}

static inline enum backend_pressure
backend_pressure(const struct backend *be)
{
	return be->ops->pressure ? be->ops->pressure(be->impl) : BACKEND_OK;
}

static inline const char *
backend_error(const struct backend *be)
{
	return be->ops->error ? be->ops->error(be->impl) : "";
}

#endif
