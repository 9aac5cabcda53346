/* session.c - a client's STOMP session and what it holds in the broker. */
#include <stdlib.h>
#include <string.h>

#include "eft/broker.h"
#include "eft/session.h"
#include "eft/sub.h"
#include "eft/temp.h"
#include "eft/tx.h"

struct session *
session_new(struct broker *b, const char *peer, struct outbuf *out,
    void (*output_added)(void *arg), void *arg)
{
	struct session *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	s->broker = b;
	s->peer = peer;
	s->ep = (struct endpoint){
		.out = out,
		.output_added = output_added,
		.arg = arg,
		.dests = &b->dests,
		.counts = &b->stats.subs,
		.redelivered_false = b->cfg->redelivered_always,
	};
	session_set_version(s, STOMP_1_0);
	return s;
}

void
session_free(struct session *s)
{
	if (s == NULL)
		return;
	session_end(s);
	free(s);
}

void
session_end(struct session *s)
{
	struct sub *sub, *stmp;
	s->ep.open = false;
	HASH_ITER(hh, s->ep.subs, sub, stmp) {
		sub_end(sub);
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
