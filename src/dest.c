/* dest.c - destinations by name, the queue ring, and handing messages to
 * subscribers.
 *
 * A queue's ring always has room for its queued messages, every message it
 * handed out that is not yet acknowledged, and what a COMMIT reserved
 * (count + out + reserved <= cap): the room is made when a message is
 * published, when failing is still harmless, so that a message given back
 * (NACK, a subscriber gone) is never lost for want of memory. */
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "eft/dest.h"
#include "eft/log.h"
#include "eft/msg.h"
#include "eft/sub.h"

/* A queued message; redelivered marks one a consumer had before. */
struct qentry {
	struct msg *msg;
	bool redelivered;
};

struct msgq {
	struct qentry *e;
	size_t head, count, cap;
	size_t out;      /* handed out, not yet acknowledged: room is kept for them */
	size_t reserved; /* room promised to a COMMIT being applied */
	size_t bytes;    /* message memory queued */
};

struct dest {
	UT_hash_handle hh;                    /* in dests->by_name */
	char *name;
	size_t name_len;
	enum dest_kind kind;
	struct msgq q;                        /* queues only */
	struct sub *subs;                     /* every subscription, linked by dest_next */
	size_t nsubs;
	struct sub *ready_head, *ready_tail;  /* queues: who may take a message now, in turn */
	struct temp *temp;                    /* set for a temp-queue: it lives as its owner does */
	struct dest *fed_by;                  /* a durable subscription's queue: its topic */
	struct dest **feeds;                  /* a topic: the durable queues it feeds */
	size_t nfeeds, feeds_cap;
	uint64_t published;                   /* messages published to it (the admin API) */
};

/* ---- the ring ---- */

/* Room for `extra` more than what is queued and handed out. */
static int
msgq_reserve(struct msgq *q, size_t extra)
{
	size_t need = q->count + q->out + q->reserved + extra;
	if (need <= q->cap)
		return 0;
	size_t cap = q->cap ? q->cap : 16;
	while (cap < need)
		cap *= 2;
	struct qentry *e = malloc(cap * sizeof(*e));
	if (e == NULL)
		return -1;
	for (size_t i = 0; i < q->count; i++)
		e[i] = q->e[(q->head + i) % q->cap];
	free(q->e);
	q->e = e;
	q->head = 0;
	q->cap = cap;
	return 0;
}

/* The caller made room (msgq_reserve). */
static void
msgq_push_back(struct msgq *q, struct msg *m, bool redelivered)
{
	q->e[(q->head + q->count) % q->cap] = (struct qentry){ m, redelivered };
	q->count++;
	q->bytes += m->size;
}

static void
msgq_push_front(struct msgq *q, struct msg *m, bool redelivered)
{
	q->head = (q->head + q->cap - 1) % q->cap;
	q->e[q->head] = (struct qentry){ m, redelivered };
	q->count++;
	q->bytes += m->size;
}

static bool
msgq_pop(struct msgq *q, struct qentry *out)
{
	if (q->count == 0)
		return false;
	*out = q->e[q->head];
	q->head = (q->head + 1) % q->cap;
	q->count--;
	q->bytes -= out->msg->size;
	return true;
}

static void
msgq_free(struct msgq *q)
{
	struct qentry e;
	while (msgq_pop(q, &e))
		msg_unref(e.msg);
	free(q->e);
	memset(q, 0, sizeof(*q));
}

/* ---- the table ---- */

struct dest *
dests_find(struct dests *t, const char *name, size_t len)
{
	struct dest *d;
	HASH_FIND(hh, t->by_name, name, len, d);
	return d;
}

struct dest *
dests_get(struct dests *t, const char *name, size_t len, enum dest_kind kind)
{
	struct dest *d = dests_find(t, name, len);
	if (d != NULL)
		return d;
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return NULL;
	d->name = malloc(len + 1);
	if (d->name == NULL) {
		free(d);
		return NULL;
	}
	memcpy(d->name, name, len);
	d->name[len] = '\0';
	d->name_len = len;
	d->kind = kind;
	HASH_ADD_KEYPTR(hh, t->by_name, d->name, d->name_len, d);
	t->count++;
	log_debug("destination %s created", d->name);
	return d;
}

static void
dest_free(struct dests *t, struct dest *d)
{
	HASH_DEL(t->by_name, d);
	t->count--;
	t->freed++; /* invalidates the sessions' last-destination caches */
	if (d->fed_by != NULL)
		dest_unbind(d);
	while (d->nfeeds > 0)
		dest_unbind(d->feeds[0]);
	msgq_free(&d->q);
	free(d->feeds);
	free(d->name);
	free(d);
}

void
dests_release(struct dests *t, struct dest *d)
{
	if (d->nsubs > 0 || d->q.count > 0 || d->q.out > 0 || d->q.reserved > 0 || d->temp != NULL ||
	    d->fed_by != NULL || d->nfeeds > 0)
		return;
	log_debug("destination %s removed", d->name);
	dest_free(t, d);
}

void
dests_delete(struct dests *t, struct dest *d)
{
	log_debug("destination %s deleted", d->name);
	dest_free(t, d);
}

void
dests_free(struct dests *t)
{
	struct dest *d, *tmp;
	HASH_ITER(hh, t->by_name, d, tmp) {
		dest_free(t, d);
	}
}

void
dests_prune(struct dests *t)
{
	struct dest *d, *tmp;
	HASH_ITER(hh, t->by_name, d, tmp) {
		dests_release(t, d);
	}
}

size_t
dests_queued(const struct dests *t, size_t *nqueues)
{
	size_t msgs = 0;
	*nqueues = 0;
	for (const struct dest *d = t->by_name; d != NULL; d = d->hh.next) {
		if (d->q.count > 0) {
			msgs += d->q.count;
			(*nqueues)++;
		}
	}
	return msgs;
}

void
dests_totals(const struct dests *t, struct dests_totals *out)
{
	memset(out, 0, sizeof(*out));
	for (const struct dest *d = t->by_name; d != NULL; d = d->hh.next) {
		if (d->kind == DEST_TOPIC) {
			out->topics++;
			continue;
		}
		out->queues++;
		out->temp_queues += d->temp != NULL;
		out->queued += d->q.count;
		out->unacked += d->q.out;
	}
}

static int
dest_cmp_name(const void *a, const void *b)
{
	const struct dest *x = *(const struct dest *const *)a, *y = *(const struct dest *const *)b;
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(x->name, y->name, n);
	return c != 0 ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

struct dest **
dests_sorted(const struct dests *t, size_t *n)
{
	*n = HASH_COUNT(t->by_name);
	struct dest **all = malloc((*n ? *n : 1) * sizeof(*all));
	if (all == NULL)
		return NULL;
	size_t i = 0;
	for (struct dest *d = t->by_name; d != NULL; d = d->hh.next)
		all[i++] = d;
	qsort(all, *n, sizeof(*all), dest_cmp_name);
	return all;
}

void
dests_foreach(const struct dests *t, void (*fn)(const struct dest *d, void *arg), void *arg)
{
	for (const struct dest *d = t->by_name; d != NULL; d = d->hh.next)
		fn(d, arg);
}

/* ---- one destination ---- */

const char *
dest_name(const struct dest *d)
{
	return d->name;
}

size_t
dest_name_len(const struct dest *d)
{
	return d->name_len;
}

bool
dest_is(const struct dest *d, const char *name, size_t len)
{
	return d->name_len == len && memcmp(d->name, name, len) == 0;
}

enum dest_kind
dest_kind(const struct dest *d)
{
	return d->kind;
}

size_t
dest_depth(const struct dest *d)
{
	return d->q.count;
}

size_t
dest_bytes(const struct dest *d)
{
	return d->q.bytes;
}

size_t
dest_unacked(const struct dest *d)
{
	return d->q.out;
}

uint64_t
dest_published(const struct dest *d)
{
	return d->published;
}

size_t
dest_subscribers(const struct dest *d)
{
	return d->nsubs;
}

struct temp *
dest_temp(const struct dest *d)
{
	return d->temp;
}

void
dest_set_temp(struct dest *d, struct temp *t)
{
	d->temp = t;
}

void
dest_sub_add(struct dest *d, struct sub *s)
{
	s->dest_prev = NULL;
	s->dest_next = d->subs;
	if (d->subs)
		d->subs->dest_prev = s;
	d->subs = s;
	d->nsubs++;
}

void
dest_sub_remove(struct dest *d, struct sub *s)
{
	dest_ready_remove(d, s);
	if (s->dest_prev)
		s->dest_prev->dest_next = s->dest_next;
	else
		d->subs = s->dest_next;
	if (s->dest_next)
		s->dest_next->dest_prev = s->dest_prev;
	s->dest_prev = s->dest_next = NULL;
	d->nsubs--;
}

void
dest_ready_add(struct dest *d, struct sub *s)
{
	if (s->in_ready)
		return;
	s->in_ready = true;
	s->ready_next = NULL;
	s->ready_prev = d->ready_tail;
	if (d->ready_tail)
		d->ready_tail->ready_next = s;
	else
		d->ready_head = s;
	d->ready_tail = s;
}

void
dest_ready_remove(struct dest *d, struct sub *s)
{
	if (!s->in_ready)
		return;
	if (s->ready_prev)
		s->ready_prev->ready_next = s->ready_next;
	else
		d->ready_head = s->ready_next;
	if (s->ready_next)
		s->ready_next->ready_prev = s->ready_prev;
	else
		d->ready_tail = s->ready_prev;
	s->ready_prev = s->ready_next = NULL;
	s->in_ready = false;
}

int
dest_reserve(struct dest *d, size_t n)
{
	if (d->kind != DEST_QUEUE)
		return 0;
	if (msgq_reserve(&d->q, n) != 0)
		return -1;
	d->q.reserved += n;
	return 0;
}

void
dest_unreserve(struct dest *d, size_t n)
{
	if (d->kind == DEST_QUEUE)
		d->q.reserved -= n;
}

void
dest_dispatch(struct dest *d)
{
	while (d->q.count > 0 && d->ready_head != NULL) {
		struct sub *s = d->ready_head;
		dest_ready_remove(d, s);
		/* Readiness is checked lazily: a subscriber whose connection
		 * became blocked since it was listed just drops out here. */
		if (!sub_can_take(s))
			continue;
		struct qentry e = { NULL, false };
		msgq_pop(&d->q, &e); /* count > 0: it pops one */
		if (sub_deliver(s, e.msg, e.redelivered) != 0) {
			msgq_push_front(&d->q, e.msg, e.redelivered); /* its slot is still free */
			log_error("out of memory delivering to %s", d->name);
			return;
		}
		if (s->ack != ACK_AUTO)
			d->q.out++;
		if (sub_can_take(s))
			dest_ready_add(d, s);
	}
}

int
dest_publish(struct dest *d, struct msg *m, uint64_t *dropped)
{
	if (d->kind == DEST_TOPIC) {
		d->published++;
		for (struct sub *s = d->subs; s != NULL; s = s->dest_next) {
			if (sub_deliver(s, msg_ref(m), false) != 0) {
				msg_unref(m);
				(*dropped)++;
				log_error("out of memory delivering to %s", d->name);
			}
		}
		msg_unref(m);
		return 0;
	}
	/* A COMMIT being applied made room beforehand; else make it now (the
	 * ring is mostly big enough: check that before calling). */
	if (d->q.reserved > 0)
		d->q.reserved--;
	else if (d->q.count + d->q.out >= d->q.cap && msgq_reserve(&d->q, 1) != 0)
		return -1;
	msgq_push_back(&d->q, m, false);
	d->published++;
	dest_dispatch(d);
	return 0;
}

int
dest_bind(struct dest *queue, struct dest *topic)
{
	if (topic->nfeeds == topic->feeds_cap) {
		size_t cap = topic->feeds_cap ? topic->feeds_cap * 2 : 4;
		struct dest **f = realloc(topic->feeds, cap * sizeof(*f));
		if (f == NULL)
			return -1;
		topic->feeds = f;
		topic->feeds_cap = cap;
	}
	topic->feeds[topic->nfeeds++] = queue;
	queue->fed_by = topic;
	return 0;
}

void
dest_unbind(struct dest *queue)
{
	struct dest *topic = queue->fed_by;
	if (topic == NULL)
		return;
	for (size_t i = 0; i < topic->nfeeds; i++) {
		if (topic->feeds[i] == queue) {
			topic->feeds[i] = topic->feeds[--topic->nfeeds];
			break;
		}
	}
	queue->fed_by = NULL;
}

struct dest *
dest_bound_topic(const struct dest *queue)
{
	return queue->fed_by;
}

struct dest *const *
dest_feeds(const struct dest *topic, size_t *n)
{
	*n = topic->nfeeds;
	return topic->feeds;
}

void
dest_purge(struct dest *d, void (*fn)(struct msg *m, void *arg), void *arg)
{
	struct qentry e;
	while (msgq_pop(&d->q, &e)) {
		if (fn != NULL)
			fn(e.msg, arg);
		msg_unref(e.msg);
	}
}

int
dest_restore(struct dest *d, struct msg *m, bool redelivered)
{
	if (msgq_reserve(&d->q, 1) != 0)
		return -1;
	msgq_push_back(&d->q, m, redelivered);
	return 0;
}

void
dest_requeue(struct dest *d, struct msg *m)
{
	d->q.out--;
	msgq_push_front(&d->q, m, true);
}

void
dest_settled(struct dest *d)
{
	d->q.out--;
}

void
dest_foreach_queued(const struct dest *d, void (*fn)(const struct msg *m, bool redelivered,
    void *arg), void *arg)
{
	for (size_t i = 0; i < d->q.count; i++) {
		const struct qentry *e = &d->q.e[(d->q.head + i) % d->q.cap];
		fn(e->msg, e->redelivered, arg);
	}
}

const char *
dest_check(const struct dest *d)
{
	size_t bytes = 0, nsubs = 0;
	bool could_take = false;
	for (size_t i = 0; i < d->q.count; i++) {
		const struct msg *m = d->q.e[(d->q.head + i) % d->q.cap].msg;
		if (m->refs == 0)
			return "a queued message has no reference";
		bytes += m->size;
	}
	if (bytes != d->q.bytes)
		return "queued bytes miscounted";
	if (d->q.count + d->q.out + d->q.reserved > d->q.cap)
		return "no room kept for the messages handed out";
	for (const struct sub *s = d->subs; s != NULL; s = s->dest_next) {
		if (s->dest != d || (s->dest_next != NULL && s->dest_next->dest_prev != s))
			return "subscriber list broken";
		could_take |= sub_can_take(s);
		nsubs++;
	}
	if (nsubs != d->nsubs)
		return "subscribers miscounted";
	if (d->kind == DEST_TOPIC && (d->q.count > 0 || d->q.out > 0 || d->ready_head != NULL))
		return "a topic holds messages";
	const struct sub *prev = NULL;
	for (const struct sub *s = d->ready_head; s != NULL; prev = s, s = s->ready_next)
		if (!s->in_ready || s->dest != d || s->ready_prev != prev)
			return "ready list broken";
	if (d->ready_tail != prev)
		return "ready list tail broken";
	if (d->nsubs == 0 && d->q.count == 0 && d->temp == NULL && d->fed_by == NULL &&
	    d->nfeeds == 0)
		return "an empty destination is kept";
	if (d->fed_by != NULL && (d->kind != DEST_QUEUE || d->fed_by->kind != DEST_TOPIC))
		return "a durable subscription is not a queue fed by a topic";
	if (d->q.reserved > 0)
		return "room reserved outside a COMMIT";
	if (d->q.count > 0 && could_take)
		return "messages wait while a subscriber could take one";
	return NULL;
}
