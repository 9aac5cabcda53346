/* session.h - a client's STOMP session: what CONNECT negotiated, who logged
 * in, and what the session holds in the broker (subscriptions with their
 * unacknowledged deliveries, open transactions, temp-queues).
 *
 * It lives as long as its connection but apart from the connection's bytes,
 * timers and transport: the connection only carries it.  session_end gives
 * back everything it holds. */
#ifndef EFT_SESSION_H
#define EFT_SESSION_H

#include <stdint.h>

#include "eft/frame.h"

struct auth_user;
struct broker;
struct conn;
struct delivery;
struct dest;
struct sub;
struct temp;
struct tx;

struct session {
	struct conn *conn;             /* where its frames are written */
	struct broker *broker;
	enum stomp_version version;    /* 1.0 until CONNECT says otherwise */
	uint64_t id;                   /* "session:eft-ID" in CONNECTED; 0 before */
	const struct auth_user *user;  /* who logged in; NULL: anonymous, may do anything */
	char *client_id;               /* CONNECT's client-id (ActiveMQ durable subscriptions), or NULL */
	struct sub *subs;              /* by id */
	struct delivery *deliveries;   /* unacked, by key */
	struct tx *txs;                /* open transactions, by name */
	struct temp *temps;            /* temp-queues, by /temp-queue/NAME */
	struct dest *send_cache;       /* where the last SEND went, valid while */
	uint64_t send_cache_gen;       /* ... the broker's dests.freed is still this */
	const char *send_cache_name;   /* its name, compared without a call */
	size_t send_cache_len;
};

void session_init(struct session *s, struct conn *c, struct broker *b);
/* Give back everything: subscriptions end (their unacknowledged messages go
 * back to the head of their queues), open transactions are dropped, and
 * temp-queues are deleted with their messages.  The session stays usable
 * as an empty one. */
void session_end(struct session *s);
/* The connection's name for log lines ("tcp 127.0.0.1:5000"). */
const char *session_peer(const struct session *s);

#endif
