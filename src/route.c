/* route.c - where a SEND goes.  Kept apart from the protocol handlers so that
 * a SEND inside a transaction is routed by the same code at COMMIT. */
#include "eft/conn.h"
#include "eft/log.h"
#include "eft/route.h"
#include "eft/temp.h"

int
route_send(struct conn *c, const char *name, size_t len, enum address_kind kind, struct msg *m)
{
	struct broker *b = c->broker;
	switch (kind) {
	case ADDR_QUEUE:
		return broker_send(b, name, len, DEST_QUEUE, m);
	case ADDR_TOPIC:
		return broker_send(b, name, len, DEST_TOPIC, m);
	case ADDR_TEMP_QUEUE: {
		struct temp *t = temp_get(c, name, len);
		if (t == NULL) {
			msg_unref(m);
			return -1;
		}
		return broker_publish(b, t->dest, m);
	}
	case ADDR_REPLY_QUEUE: {
		struct dest *d = broker_dest_find(b, name, len);
		if (d == NULL || d->temp == NULL) {
			/* Its owner disconnected: nobody may have its replies. */
			b->stats.replies_dropped++;
			log_debug("%s: reply to %.*s dropped: no such temp-queue", c->peer, (int)len, name);
			msg_unref(m);
			return 0;
		}
		return broker_publish(b, d, m);
	}
	}
	msg_unref(m);
	return 0;
}
