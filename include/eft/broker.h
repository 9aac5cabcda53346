/* broker.h - the broker's state: destinations, message and session ids,
 * statistics, the memory limit and the backend (broker.c).  The server
 * (server.h: listeners, the once-per-loop output flush) and its set of
 * connections (conn.h) are apart: the broker only points at them.
 *
 * eftd is single-threaded: everything here is touched only from the libevent
 * loop, so nothing is locked. */
#ifndef EFT_BROKER_H
#define EFT_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include <event2/event.h>

#include "eft/address.h"
#include "eft/backend.h"
#include "eft/config.h"
#include "eft/dest.h"
#include "eft/frame.h"
#include "eft/msg.h"
#include "eft/schedule.h"
#include "eft/sub.h"
#include "eft/trim.h"

struct event_base;
struct event;
struct conn;
struct listener;
struct auth;
struct tls_server;
struct store;
struct http_server;
struct cluster;
struct conn_set;
struct server;
struct session;

/* Frames eftd sends, by command (MESSAGE is stats.subs.deliveries). */
enum stat_out { STAT_OUT_CONNECTED, STAT_OUT_RECEIPT, STAT_OUT_ERROR, STAT_OUT_COUNT };
/* Why a message went nowhere. */
enum stat_drop {
	STAT_DROP_NO_SUBSCRIBER,     /* sent to a topic nobody subscribes to */
	STAT_DROP_NO_MEMORY,         /* a topic or durable delivery lost for want of memory */
	STAT_DROP_REPLY_OWNER_GONE,  /* sent to a temp-queue whose owner had gone */
	STAT_DROP_PURGED,            /* an administrator purged its queue */
	STAT_DROP_DELETED,           /* an administrator deleted its queue */
	/* Died (dest.h's enum dest_death, in its order) with no dead-letter
	 * queue to go to, or already a dead letter: */
	STAT_DROP_EXPIRED,
	STAT_DROP_REJECTED,
	STAT_DROP_MAX_REDELIVERIES,
	STAT_DROP_OVERFLOW,
	STAT_DROP_COUNT
};
/* Why a connection was turned away. */
enum stat_reject { STAT_REJECT_LIMIT, STAT_REJECT_LOGIN, STAT_REJECT_COUNT };

/* Counters since start, for the log and the admin listener.  The hot path
 * only increments them; everything else is computed when asked for. */
struct broker_stats {
	uint64_t frames_in[CMD_COUNT];        /* by command (CMD_UNKNOWN: not a command) */
	uint64_t frames_out[STAT_OUT_COUNT];
	uint64_t msgs_in;                     /* SENDs applied (at COMMIT in a transaction) */
	struct sub_counts subs;               /* deliveries, redeliveries, acknowledgements */
	uint64_t dropped[STAT_DROP_COUNT];
	uint64_t dead_lettered[DEATH_COUNT];  /* died, and sent to a dead-letter queue */
	uint64_t connections;                 /* accepted */
	uint64_t rejected[STAT_REJECT_COUNT];
};

struct broker {
	/* ---- the broker's own state (broker.c and the core below it) ---- */
	struct event_base *base;
	const struct config *cfg;
	struct dests dests;
	uint64_t next_msg_id;
	uint64_t next_session;
	uint64_t started_ms;                 /* wall clock at broker_init */
	struct broker_stats stats;
	struct msg_pool msg_pool;
	size_t max_memory;                   /* message memory above which producers wait */
	bool memory_alarm;                   /* above max_memory, until below 90% of it */
	bool memory_told;                    /* ... this alarm was logged: log its end too */
	struct log_every memory_log;         /* "memory limit reached": first, then a count */
	struct auth *auth;                   /* users file, or NULL: anyone may connect */
	size_t durables;                     /* durable subscriptions (durable.c) */
	struct event *expiry_ev;             /* lets expired messages die (lifetime.c) */
	struct event *expiry_more_ev;        /* ... the rest of many, next turn */
	struct schedule sched;               /* scheduled SENDs waiting (schedule.h) */
	struct event *sched_ev;              /* ... the timer for the earliest */
	struct session *sched_session;       /* ... whose firings are its SENDs */
	struct trim trim;                    /* memory given back after a burst (trim.h) */
	struct event *memory_ev;             /* trim and the alarm's count, every 0.1 s */
	/* Where queue messages are kept besides memory (backend.h): the
	 * journal or the cluster, or NULL.  backend points at be when on. */
	const struct backend *backend;
	struct backend be;
	struct backend_events be_events;     /* how a backend reaches the core */
	struct store *store;                 /* the journal (data-dir), or NULL */
	struct event *store_ev;              /* everysec's fsync, and retries after a failure */
	struct cluster *cluster;             /* cluster mode (cluster.c), or NULL */
	/* What the backend has kept: everything up to this number of its own
	 * (broker_promised).  Output that waits for it is held (hold.h) on the
	 * connections listed in held. */
	uint64_t kept;

	/* ---- what the core knows of the server ---- */
	struct event *flush_ev;              /* the server's flush, woken by the backend */
	bool flushing;                       /* in server_flush: output added joins its walk */
	struct conn_set *set;                /* the connections (conn.h), the server's */
	struct server *server;               /* the rest of the server (server.h) */
};

/* The broker's own state in b (zeroed, its server parts made by
 * server_new): -1 if out of memory. */
int broker_init(struct broker *b, struct event_base *base, const struct config *cfg);
/* Free it: the backend, destinations and their messages (after the
 * connections are gone). */
void broker_fini(struct broker *b);
/* The wall clock as of this loop turn, ms since the epoch. */
static inline uint64_t
broker_now_ms(const struct broker *b)
{
	struct timeval tv;
	event_base_gettimeofday_cached(b->base, &tv);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* Open the journal in cfg->data_dir and put back the messages it holds;
 * -1 with a one-line reason in err. */
int broker_open_store(struct broker *b, char *err, size_t errlen);
/* Cluster mode: connect to NATS (in the background if it cannot be
 * reached yet); -1 with a one-line reason in err. */
int broker_start_cluster(struct broker *b, char *err, size_t errlen);
/* Give back what this node holds and leave NATS (nothing if not started). */
void broker_stop_cluster(struct broker *b);
/* Have the backend keep what this turn asked of it (the journal's group
 * commit), before any output that depends on it.  False if it cannot
 * just now: the output held for it waits, and it is tried again. */
bool broker_commit(struct broker *b);

/* The backend's promises.  broker_promised is the backend's number for
 * everything asked of it so far (journal bytes gathered, JetStream SENDs
 * published); once b->kept reaches it, all of that is kept.  Without a
 * backend both are 0. */
uint64_t broker_promised(const struct broker *b);
/* How the backend copes (BACKEND_OK without one). */
enum backend_pressure broker_pressure(struct broker *b);
/* The backend's figures into *out; false if it has none (memory only,
 * or a backend without them). */
bool broker_backend_stats(const struct broker *b, struct backend_stats *out);
/* A queue that waits in the backend (the cluster) with no destination
 * here, and how many messages wait for it there. */
struct waiting_queue {
	const char *name;     /* /queue/NAME, the backend's: valid until the loop turns */
	size_t len;
	uint64_t count;
};
/* Those, sorted by name as dests_sorted sorts, in an array to free; *n
 * of them.  NULL if out of memory. */
struct waiting_queue *broker_waiting_elsewhere(struct broker *b, size_t *n);
/* Put the backend in place: the journal or the cluster, opened with
 * b->be_events, through which it tells the core what it kept. */
void broker_set_backend(struct broker *b, const struct backend_ops *ops, void *impl);

/* Is message memory over max-memory?  (Logs the alarm when it starts.) */
bool broker_memory_full(struct broker *b);
/* Ends the memory alarm once message memory is below 90% of max-memory;
 * true while it lasts. */
bool broker_memory_alarm(struct broker *b);

#endif
