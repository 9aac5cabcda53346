/* session.h - a client's STOMP session: what CONNECT negotiated, who logged
 * in, and what the session holds in the broker (subscriptions with their
 * unacknowledged deliveries, open transactions, temp-queues).
 *
 * It lives as long as its connection but apart from the connection's bytes,
 * timers and transport: the connection only points at it, and knows its
 * endpoint (sub.h), through which deliveries reach the connection's
 * output.  session_end gives back everything it holds. */
#ifndef EFT_SESSION_H
#define EFT_SESSION_H

#include <stdint.h>

#include "eft/frame.h"
#include "eft/sub.h"

struct auth_user;
struct broker;
struct delivery;
struct dest;
struct sub;
struct temp;
struct tx;

struct session {
	struct broker *broker;
	enum stomp_version version;    /* 1.0 until CONNECT says otherwise */
	uint64_t id;                   /* "session:eft-ID" in CONNECTED; 0 before */
	const struct auth_user *user;  /* who logged in; NULL: anonymous, may do anything */
	char *client_id;               /* CONNECT's client-id (ActiveMQ durable subscriptions), or NULL */
	struct endpoint ep;            /* its subscriptions and unacked deliveries (sub.h) */
	const char *peer;              /* the connection's name for log lines */
	struct tx *txs;                /* open transactions, by name */
	struct temp *temps;            /* temp-queues, by /temp-queue/NAME */
	struct dest *send_cache;       /* where the last SEND went, valid while */
	uint64_t send_cache_gen;       /* ... the broker's dests.freed is still this */
	const char *send_cache_name;   /* its name, compared without a call */
	size_t send_cache_len;
};

/* A new session in broker b for a connection named peer in log lines,
 * whose deliveries are written to out; output_added(arg) is called when a
 * delivery added output.  NULL if out of memory. */
struct session *session_new(struct broker *b, const char *peer, struct outbuf *out,
    void (*output_added)(void *arg), void *arg);
/* session_end, then free it. */
void session_free(struct session *s);
/* Give back everything: subscriptions end (their unacknowledged messages go
 * back to the head of their queues), open transactions are dropped, and
 * temp-queues are deleted with their messages.  The session stays usable
 * as an empty one. */
void session_end(struct session *s);
/* The connection's name for log lines ("tcp 127.0.0.1:5000"). */
static inline const char *
session_peer(const struct session *s)
{
	return s->peer;
}
/* CONNECT negotiated version v. */
static inline void
session_set_version(struct session *s, enum stomp_version v)
{
	s->version = v;
	s->ep.version = v;
}

#endif
