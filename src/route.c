/* route.c - where a SEND goes.  Kept apart from the protocol handlers so that
 * a SEND inside a transaction is routed by the same code at COMMIT. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eft/backend.h"
#include "eft/broker.h"
#include "eft/dest.h"
#include "eft/log.h"
#include "eft/msg.h"
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

/* A publish that the journal or a durable subscription may keep: out of
 * the common path, which has neither. */
static __attribute__((noinline)) int
publish_kept(struct session *ss, struct dest *d, struct msg *m)
{
	struct broker *b = ss->broker;
	/* Expired already: it dies once, here, not once per copy.  (Not a
	 * now-or-never one: durable subscribers may take it now.) */
	if (m->expires_ms != 0 && !m->now_or_never && dest_msg_expired(d, m)) {
		dest_publish(d, m, &b->stats.dropped[STAT_DROP_NO_MEMORY]);
		return 0;
	}
	/* A topic's durable subscriptions and subscription queues get copies
	 * of their own first (the
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
	 * live as their owner does, and transient queues, subscription queues
	 * among them, are lost at a restart, so they keep nothing), with the
	 * expiry the queue gives it. */
	if (m->persistent && b->backend != NULL && dest_kind(d) == DEST_QUEUE &&
	    dest_temp(d) == NULL && !dest_transient(d)) {
		dest_stamp(d, m);
		if (backend_keep(b->backend, d, m) != 0)
			return -1;
	}
	dest_publish(d, m, &b->stats.dropped[STAT_DROP_NO_MEMORY]);
	return 0;
}

/* m to d, not counted (publish counts). */
static inline int
deliver(struct session *ss, struct dest *d, struct msg *m)
{
	struct broker *b = ss->broker;
	if (b->backend != NULL || b->dests.nbound > 0)
		return publish_kept(ss, d, m);
	dest_publish(d, m, &b->stats.dropped[STAT_DROP_NO_MEMORY]);
	return 0;
}

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
	if (deliver(ss, d, m) != 0)
		return -1;
	b->stats.msgs_in++;
	return 0;
}

/* A publish to topic name while wildcard topics exist: to every topic the
 * subject tree finds for the name, its own and each pattern that matches
 * (dests_topic_matches), counted as one message.  The targets are copied
 * and held first: a delivery may end a subscription, and a wildcard topic
 * with it. */
static __attribute__((noinline)) int
publish_to_patterns(struct session *ss, const char *name, size_t len, struct msg *m)
{
	struct broker *b = ss->broker;
	struct dests *t = &b->dests;
	struct dest *room[16], **to = room;
	size_t n = dests_topic_matches(t, name, len, room, 16);
	if (n == SIZE_MAX)
		return -1;
	if (n > 16) {
		if ((to = malloc(n * sizeof(*to))) == NULL)
			return -1;
		if (dests_topic_matches(t, name, len, to, n) != n) {
			free(to);
			return -1;
		}
	}
	if (n == 0)
		return publish(ss, NULL, m);
	/* Expired already: it dies once, not once per topic. */
	if (m->expires_ms != 0 && !m->now_or_never && dest_msg_expired(to[0], m))
		n = 1;
	for (size_t i = 0; i < n; i++)
		dest_hold(to[i]);
	for (size_t i = 0; i < n; i++) {
		if (i + 1 < n)
			msg_ref(m);
		if (deliver(ss, to[i], m) != 0) {
			msg_unref(m);
			b->stats.dropped[STAT_DROP_NO_MEMORY]++;
		}
	}
	b->stats.msgs_in++;
	for (size_t i = 0; i < n; i++) {
		dest_unhold(to[i]);
		dests_release(t, to[i]);
	}
	if (to != room)
		free(to);
	return 0;
}

int
route_publish(struct session *ss, struct dest *d, struct msg *m)
{
	return publish(ss, d, m);
}

int
route_publish_named(struct session *ss, struct dest *d, const char *name, size_t len,
    enum address_kind kind, struct msg *m)
{
	if (kind == ADDR_TOPIC && dests_have_patterns(&ss->broker->dests))
		return publish_to_patterns(ss, name, len, m); /* d is among what it finds */
	return publish(ss, d, m);
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
	if (rc != 0 || route_publish_named(ss, d, name, len, kind, m) != 0) {
		msg_unref(m);
		b->stats.dropped[STAT_DROP_NO_MEMORY]++;
	}
	return 0;
}

/* route_send to a destination not in the send cache.  A queue made for a
 * message that dies as it comes (expired, or expiration:0 with nobody to
 * take it) is not kept: it holds nothing.  (One found in the cache was
 * holding something before, so it still does.) */
static inline int
send_uncached(struct session *ss, const char *name, size_t len, enum address_kind kind,
    struct msg *m, struct dest **where)
{
	struct dests *t = &ss->broker->dests;
	int err = 0;
	struct dest *d = route_resolve(ss, name, len, kind, &err);
	if (err != 0)
		return -1;
	bool may_die = m->expires_ms != 0;
	if (publish(ss, d, m) != 0) {
		dests_release(t, d); /* a queue just made for m */
		return -1;
	}
	if (__builtin_expect(may_die, 0) && d != NULL) {
		uint64_t freed = t->freed;
		dests_release(t, d);
		if (t->freed != freed)
			return 0;
	}
	if (where != NULL && d != NULL && dest_kind(d) == DEST_QUEUE)
		*where = d;
	return 0;
}

int
route_send(struct session *ss, const char *name, size_t len, enum address_kind kind, struct msg *m,
    struct dest **where)
{
	if (where != NULL)
		*where = NULL;
	if (__builtin_expect(ss->broker->backend != NULL, 0) &&
	    route_carried(ss, name, len, kind))
		return route_through_backend(ss, name, len, kind, m);
	/* With wildcard topics, a topic SEND goes to each that matches too. */
	if (__builtin_expect(kind == ADDR_TOPIC && dests_have_patterns(&ss->broker->dests), 0))
		return publish_to_patterns(ss, name, len, m);
	struct dest *d = kind <= ADDR_TOPIC ? route_cached(ss, name, len) : NULL;
	if (d == NULL)
		return send_uncached(ss, name, len, kind, m, where);
	if (publish(ss, d, m) != 0)
		return -1;
	if (where != NULL && dest_kind(d) == DEST_QUEUE)
		*where = d;
	return 0;
}
