/* route.c - where a SEND goes.  Kept apart from the protocol handlers so that
 * a SEND inside a transaction is routed by the same code at COMMIT. */
#include <string.h>

#include "eft/backend.h"
#include "eft/broker.h"
#include "eft/dest.h"
#include "eft/log.h"
#include "eft/route.h"
#include "eft/session.h"
#include "eft/temp.h"

/* Producers mostly send to one destination: where the last SEND went, if
 * name is it and it still exists, found without the hash. */
static inline struct dest *
route_cached(const struct session *ss, const char *name, size_t len)
{
	if (ss->send_cache == NULL || ss->send_cache_gen != ss->broker->dests.freed ||
	    ss->send_cache_len != len || memcmp(ss->send_cache_name, name, len) != 0)
		return NULL;
	return ss->send_cache;
}

struct dest *
route_resolve(struct session *ss, const char *name, size_t len, enum address_kind kind, int *err)
{
	struct broker *b = ss->broker;
	struct dest *d;
	*err = 0;
	switch (kind) {
	case ADDR_QUEUE:
	case ADDR_TOPIC:
		if ((d = route_cached(ss, name, len)) != NULL)
			return d;
		d = dests_find(&b->dests, name, len);
		if (d == NULL && kind == ADDR_TOPIC)
			return NULL; /* nobody listens, and a topic keeps nothing */
		if (d == NULL && (d = dests_get(&b->dests, name, len, DEST_QUEUE)) == NULL) {
			*err = -1;
			return NULL;
		}
		ss->send_cache = d;
		ss->send_cache_gen = b->dests.freed;
		ss->send_cache_name = dest_name(d);
		ss->send_cache_len = dest_name_len(d);
		return d;
	case ADDR_TEMP_QUEUE: {
		struct temp *t = temp_get(ss, name, len);
		if (t == NULL)
			*err = -1;
		return t ? t->dest : NULL;
	}
	case ADDR_REPLY_QUEUE:
		d = dests_find(&b->dests, name, len);
		if (d == NULL || dest_temp(d) == NULL) {
			/* Its owner disconnected: nobody may have its replies. */
			b->stats.dropped[STAT_DROP_REPLY_OWNER_GONE]++;
			log_debug("%s: reply to %.*s dropped: no such temp-queue", session_peer(ss),
			    (int)len, name);
			return NULL;
		}
		return d;
	}
	return NULL;
}

/* m died as it came (expired, or expiration:0 with nobody to take it):
 * a queue made for it, that nothing else holds, is forgotten.  1 (see
 * publish). */
static __attribute__((noinline, cold)) int
publish_died(struct session *ss, struct dest *d)
{
	dests_release(&ss->broker->dests, d);
	return 1;
}

/* A publish that the journal or a durable subscription may keep: out of
 * the common path, which has neither. */
static __attribute__((noinline)) int
publish_kept(struct session *ss, struct dest *d, struct msg *m)
{
	struct broker *b = ss->broker;
	/* Expired already: it dies once, here, not once per copy.  (A
	 * now-or-never message goes on: durable subscribers may take it.) */
	if (m->expires_ms != 0 && !m->now_or_never && dest_msg_expired(d, m)) {
		b->stats.msgs_in++;
		dest_publish(d, m, &b->stats.dropped[STAT_DROP_NO_MEMORY]);
		return publish_died(ss, d);
	}
	/* A topic's durable subscriptions get copies of their own first (the
	 * topic's delivery may drop the last reference to m). */
	size_t nfeeds = 0;
	struct dest *const *feeds = dest_kind(d) == DEST_TOPIC ? dest_feeds(d, &nfeeds) : NULL;
	for (size_t i = 0; i < nfeeds; i++) {
		struct msg *copy = msg_clone(&b->msg_pool, m, b->next_msg_id++);
		if (copy == NULL || route_publish(ss, feeds[i], copy) != 0) {
			if (copy != NULL)
				msg_unref(copy);
			b->stats.dropped[STAT_DROP_NO_MEMORY]++;
			log_error("out of memory: a message for durable subscription %s was dropped",
			    dest_name(feeds[i]));
		}
	}
	/* A persistent message is kept when it reaches a queue (temp-queues
	 * live as their owner does, so they keep nothing), with the expiry the
	 * queue gives it. */
	if (m->persistent && b->backend != NULL && dest_kind(d) == DEST_QUEUE &&
	    dest_temp(d) == NULL) {
		dest_stamp(d, m);
		if (backend_keep(b->backend, d, m) != 0)
			return -1;
	}
	b->stats.msgs_in++;
	if (!dest_publish(d, m, &b->stats.dropped[STAT_DROP_NO_MEMORY]))
		return publish_died(ss, d);
	return 0;
}

/* 0: the reference is taken; -1: out of memory, the caller keeps it; 1:
 * the reference is taken, m died at once and d may be gone. */
static inline int
publish(struct session *ss, struct dest *d, struct msg *m)
{
	struct broker *b = ss->broker;
	if (d == NULL) {
		b->stats.msgs_in++;
		b->stats.dropped[STAT_DROP_NO_SUBSCRIBER]++;
		msg_unref(m);
		return 0;
	}
	if (b->backend != NULL || b->durables > 0)
		return publish_kept(ss, d, m);
	b->stats.msgs_in++;
	if (__builtin_expect(!dest_publish(d, m, &b->stats.dropped[STAT_DROP_NO_MEMORY]), 0))
		return publish_died(ss, d);
	return 0;
}

int
route_publish(struct session *ss, struct dest *d, struct msg *m)
{
	return publish(ss, d, m) < 0 ? -1 : 0;
}

__attribute__((noinline)) bool
route_carried(const struct session *ss, const char *name, size_t len, enum address_kind kind)
{
	return backend_carries(ss->broker->backend, (int)kind, name, len);
}

__attribute__((noinline, cold)) int
route_through_backend(struct session *ss, const char *name, size_t len, enum address_kind kind,
    struct msg *m)
{
	struct broker *b = ss->broker;
	const char *why = NULL;
	int rc = b->backend->ops->publish(b->backend->impl, (int)kind, name, len, m, &why);
	if (rc != 0) {
		log_info("%s: SEND to %.*s refused: %s", session_peer(ss), (int)(len > 200 ? 200 : len),
		    name, why);
		return rc;
	}
	if (kind != ADDR_TOPIC) {
		b->stats.msgs_in++;
		msg_unref(m);
		return 0;
	}
	/* A topic's subscribers here get it from here: NATS does not echo it. */
	struct dest *d = route_resolve(ss, name, len, kind, &rc);
	if (rc != 0 || publish(ss, d, m) < 0) {
		msg_unref(m);
		b->stats.dropped[STAT_DROP_NO_MEMORY]++;
	}
	return 0;
}

int
route_send(struct session *ss, const char *name, size_t len, enum address_kind kind, struct msg *m,
    struct dest **where)
{
	int err = 0;
	if (__builtin_expect(ss->broker->backend != NULL, 0) &&
	    route_carried(ss, name, len, kind)) {
		if (where != NULL)
			*where = NULL;
		return route_through_backend(ss, name, len, kind, m);
	}
	struct dest *d = kind <= ADDR_TOPIC ? route_cached(ss, name, len) : NULL;
	if (d == NULL)
		d = route_resolve(ss, name, len, kind, &err);
	if (where != NULL)
		*where = NULL;
	if (err != 0)
		return -1;
	int rc = publish(ss, d, m);
	if (__builtin_expect(rc != 0, 0)) {
		if (rc > 0)
			return 0; /* m died, and d with it if made for it */
		dests_release(&ss->broker->dests, d); /* a queue just made for m */
		return -1;
	}
	if (where != NULL && d != NULL && dest_kind(d) == DEST_QUEUE)
		*where = d;
	return 0;
}
