/* route.c - where a SEND goes.  Kept apart from the protocol handlers so that
 * a SEND inside a transaction is routed by the same code at COMMIT. */
#include <string.h>

#include "eft/conn.h"
#include "eft/log.h"
#include "eft/route.h"
#include "eft/temp.h"

int
route_send(struct conn *c, const char *name, size_t len, enum address_kind kind, struct msg *m,
    struct dest **where)
{
	struct broker *b = c->broker;
	if (where != NULL)
		*where = NULL;
	switch (kind) {
	case ADDR_QUEUE:
	case ADDR_TOPIC: {
		/* Producers mostly send to one destination: skip the hash then. */
		struct dest *d = c->send_cache;
		if (d == NULL || c->send_cache_gen != b->dests_freed || d->name_len != len ||
		    memcmp(d->name, name, len) != 0) {
			d = broker_dest_find(b, name, len);
			if (d == NULL && kind == ADDR_TOPIC) {
				/* Nobody listens, and a topic keeps nothing. */
				b->stats.msgs_in++;
				msg_unref(m);
				return 0;
			}
			if (d == NULL)
				d = broker_dest_get(b, name, len, DEST_QUEUE);
			if (d == NULL) {
				msg_unref(m);
				return -1;
			}
			c->send_cache = d;
			c->send_cache_gen = b->dests_freed;
		}
		if (where != NULL && d->kind == DEST_QUEUE)
			*where = d;
		return broker_publish(b, d, m);
	}
	case ADDR_TEMP_QUEUE: {
		struct temp *t = temp_get(c, name, len);
		if (t == NULL) {
			msg_unref(m);
			return -1;
		}
		if (where != NULL)
			*where = t->dest;
		return broker_publish(b, t->dest, m);
	}
	case ADDR_REPLY_QUEUE: {
		struct dest *d = broker_dest_find(b, name, len);
		if (d == NULL || d->temp == NULL) {
			/* Its owner disconnected: nobody may have its replies. */
			b->stats.replies_dropped++;
			b->stats.msgs_in++;
			log_debug("%s: reply to %.*s dropped: no such temp-queue", c->peer, (int)len, name);
			msg_unref(m);
			return 0;
		}
		if (where != NULL)
			*where = d;
		return broker_publish(b, d, m);
	}
	}
	msg_unref(m);
	return 0;
}
