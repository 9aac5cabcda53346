/* session.c - a client's STOMP session and what it holds in the broker. */
#include <stdlib.h>
#include <string.h>

#include "eft/conn.h"
#include "eft/session.h"
#include "eft/sub.h"
#include "eft/temp.h"
#include "eft/tx.h"

void
session_init(struct session *s, struct conn *c, struct broker *b)
{
	memset(s, 0, sizeof(*s));
	s->conn = c;
	s->broker = b;
	s->version = STOMP_1_0;
}

void
session_end(struct session *s)
{
	struct sub *sub, *stmp;
	HASH_ITER(hh, s->subs, sub, stmp) {
		sub_free(sub);
	}
	struct tx *t, *ttmp;
	HASH_ITER(hh, s->txs, t, ttmp) {
		tx_abort(s, t);
	}
	/* After the subscriptions: a temp-queue is deleted with nobody on it. */
	temp_free_all(s);
	s->send_cache = NULL;
	free(s->client_id);
	s->client_id = NULL;
}

const char *
session_peer(const struct session *s)
{
	return s->conn->peer;
}
