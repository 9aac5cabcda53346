/* durable.c - durable topic subscriptions (see durable.h). */
#include <stdio.h>
#include <string.h>

#include "eft/backend.h"
#include "eft/broker.h"
#include "eft/durable.h"
#include "eft/frame.h"
#include "eft/log.h"
#include "eft/session.h"

bool
durable_name(const struct session *ss, const struct frame *f, char *out, size_t outlen,
    size_t *len)
{
	const struct header *name = frame_find(f, "activemq.subscriptionName");
	const struct header *id = frame_get(f, HDR_ID);
	int n;
	if (name != NULL && ss->client_id != NULL) {
		n = snprintf(out, outlen, DURABLE_PREFIX "activemq:%s:%.*s", ss->client_id,
		    (int)name->value_len, name->value);
	} else if (id != NULL && (f->cmd == CMD_UNSUBSCRIBE ||
	    frame_header_is_nocase(f, "auto-delete", "false")) &&
	    (frame_header_is_nocase(f, "durable", "true") || frame_header_is_nocase(f, "persistent", "true"))) {
		/* RabbitMQ: SUBSCRIBE with durable:true and auto-delete:false
		 * makes one (auto-delete alone would delete it at the
		 * UNSUBSCRIBE); UNSUBSCRIBE with durable:true (or the legacy
		 * persistent:true) ends it, a plain one only leaves it. */
		const struct header *xq = frame_find(f, "x-queue-name");
		const struct backend *be = ss->broker->backend;
		if (xq != NULL && (be == NULL || be->ops->durable_open == NULL))
			n = snprintf(out, outlen, QUEUE_PREFIX "%.*s", (int)xq->value_len,
			    xq->value);
		else
			n = snprintf(out, outlen, DURABLE_PREFIX "rabbitmq:%.*s",
			    (int)id->value_len, id->value);
	} else {
		return false;
	}
	if (n < 0 || (size_t)n >= outlen)
		return false;
	*len = (size_t)n;
	return true;
}

/* A message of a durable subscription that ends or moves: the backend
 * forgets it. */
static void
forget_kept(struct msg *m, void *arg)
{
	const struct broker *b = arg;
	if (m->kept != NULL)
		backend_gone(b->backend, m, FATE_DROPPED);
}

struct dest *
durable_open(struct broker *b, const char *name, size_t len, const char *topic, size_t topic_len,
    enum durable_open_error *why)
{
	struct dest *q = dests_find(&b->dests, name, len);
	if (q != NULL && dest_subscribers(q) > 0) {
		*why = DURABLE_IN_USE;
		return NULL;
	}
	struct dest *t = dests_get(&b->dests, topic, topic_len, DEST_TOPIC);
	if (t == NULL || (q == NULL && (q = dests_get(&b->dests, name, len, DEST_QUEUE)) == NULL)) {
		if (t != NULL)
			dests_release(&b->dests, t);
		*why = DURABLE_NOMEM;
		return NULL;
	}
	struct dest *was = dest_bound_topic(q);
	if (was == t)
		return q;
	if (was != NULL) {
		/* Another topic now: what it kept was for the old one (JMS does the same). */
		log_info("durable subscription %s moves from %s to %s", name, dest_name(was), topic);
		dest_purge(q, b->backend ? forget_kept : NULL, b);
		dest_unbind(q);
		dests_release(&b->dests, was);
	}
	if (dest_bind(q, t) != 0 || (b->backend != NULL && backend_bind(b->backend, q, t) != 0)) {
		dest_unbind(q);
		dests_release(&b->dests, q);
		dests_release(&b->dests, t);
		*why = DURABLE_NOMEM;
		return NULL;
	}
	if (was == NULL)
		b->durables++;
	log_info("durable subscription %s on %s created", name, topic);
	return q;
}

void
durable_remove(struct broker *b, struct dest *q)
{
	struct dest *t = dest_bound_topic(q);
	log_info("durable subscription %s ended (%zu message%s dropped)", dest_name(q), dest_depth(q),
	    dest_depth(q) == 1 ? "" : "s");
	dest_purge(q, b->backend ? forget_kept : NULL, b);
	if (b->backend != NULL)
		backend_unbind(b->backend, q);
	dest_unbind(q);
	b->durables--;
	dests_release(&b->dests, q);
	if (t != NULL)
		dests_release(&b->dests, t);
}

const char *
durable_shown(const char *name)
{
	size_t plen = strlen(DURABLE_PREFIX);
	return strncmp(name, DURABLE_PREFIX, plen) == 0 ? name + plen : name;
}

struct dest *
subscription_queue_open(struct broker *b, const char *name, size_t len, const char *topic,
    size_t topic_len, enum durable_open_error *why)
{
	struct dest *q = dests_find(&b->dests, name, len);
	if (q != NULL) {
		const struct dest *t = dest_bound_topic(q);
		if (dest_auto_delete(q) && t != NULL && dest_is(t, topic, topic_len))
			return q;   /* shared: its subscribers compete */
		*why = DURABLE_TAKEN;
		return NULL;
	}
	struct dest *t = dests_get(&b->dests, topic, topic_len, DEST_TOPIC);
	if (t == NULL || (q = dests_get(&b->dests, name, len, DEST_QUEUE)) == NULL) {
		if (t != NULL)
			dests_release(&b->dests, t);
		*why = DURABLE_NOMEM;
		return NULL;
	}
	if (dest_bind(q, t) != 0) {
		dests_release(&b->dests, q);
		dests_release(&b->dests, t);
		*why = DURABLE_NOMEM;
		return NULL;
	}
	dest_set_auto_delete(q, true);
	dest_set_transient(q, true);
	log_debug("subscription queue %s on %s created", name, topic);
	return q;
}
