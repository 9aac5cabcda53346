/* dest.c - destinations by name, the queues' priority lists, the expiry
 * heap, and handing messages to subscribers (see dest.h).
 *
 * Plain traffic (one priority, no selector, no expiry) costs what a ring
 * did: a push at the tail, a pop at the head, and a ready subscriber taken
 * in turn.  Priorities add a bit test, expiry a heap entry per expiring
 * message, and selectors a bounded look along the queue. */
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "eft/address.h"
#include "eft/backend.h"
#include "eft/dest.h"
#include "eft/log.h"
#include "eft/msg.h"
#include "eft/policy.h"
#include "eft/sub.h"
#include "eft/subject.h"

/* A queue's messages: one list per priority, linked through the messages,
 * and a bit per priority that has any, so the next one is found with one
 * instruction. */
struct msgq {
	struct {
		struct msg *head, *tail;
	} level[MSG_PRIORITIES];
	unsigned nonempty;       /* bit p: level[p] has messages */
	size_t count;
	size_t bytes;            /* message memory queued */
	size_t out;              /* handed out, not yet acknowledged */
};

struct dest {
	UT_hash_handle hh;                    /* in dests->by_name */
	char *name;
	size_t name_len;
	enum dest_kind kind;
	struct dests *owner;
	const struct dest_policy *policy;
	bool plain;                           /* no message-ttl, overflow blocks: the common path */
	bool pattern;                         /* a wildcard topic */
	bool in_tree;                         /* in owner->topics (a /topic/ name not odd) */
	struct msgq q;                        /* queues only */
	size_t holds;                         /* COMMITs being applied to it */
	uint64_t pops;                        /* messages taken off the queue, ever */
	struct sub *subs;                     /* every subscription, linked by dest_next */
	size_t nsubs;
	size_t nselective;                    /* ... of them with a selector */
	struct sub *ready_head, *ready_tail;  /* queues: who may take a message now, in turn */
	struct sub *starved_head, *starved_tail; /* queues: selectors that matched nothing */
	size_t nstarved_part;                 /* ... of them that saw only part of the queue */
	uint64_t part_checked;                /* pops when those were last looked at again */
	struct temp *temp;                    /* set for a temp-queue: it lives as its owner does */
	void *remote;                         /* cluster mode: fed from NATS (cluster.c) */
	struct dest *fed_by;                  /* a durable subscription's queue: its topic */
	struct dest **feeds;                  /* a topic: the durable queues it feeds */
	size_t nfeeds, feeds_cap;
	uint64_t published;                   /* messages published to it (the admin API) */
};

static const struct dest_policy default_policy; /* no limits, nothing expires, no DLQ */

static const char *const death_names[DEATH_COUNT] = {
	[DEATH_EXPIRED] = "expired",
	[DEATH_REJECTED] = "rejected",
	[DEATH_MAX_REDELIVERIES] = "max-redeliveries",
	[DEATH_OVERFLOW] = "overflow",
};

const char *
dest_death_name(enum dest_death why)
{
	return why < DEATH_COUNT ? death_names[why] : "?";
}

/* ---- the expiry heap (in struct dests): a binary min-heap by time; each
 * message knows its slot, so it leaves in O(log n) when it is taken ---- */

static void
heap_set(struct dests *t, size_t i, struct dest_expiry e)
{
	t->expiry[i] = e;
	e.msg->expiry_slot = (uint32_t)i + 1;
}

static void
heap_up(struct dests *t, size_t i)
{
	struct dest_expiry e = t->expiry[i];
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (t->expiry[parent].at <= e.at)
			break;
		heap_set(t, i, t->expiry[parent]);
		i = parent;
	}
	heap_set(t, i, e);
}

static void
heap_down(struct dests *t, size_t i)
{
	struct dest_expiry e = t->expiry[i];
	for (;;) {
		size_t child = 2 * i + 1;
		if (child >= t->nexpiry)
			break;
		if (child + 1 < t->nexpiry && t->expiry[child + 1].at < t->expiry[child].at)
			child++;
		if (t->expiry[child].at >= e.at)
			break;
		heap_set(t, i, t->expiry[child]);
		i = child;
	}
	heap_set(t, i, e);
}

/* Out of memory only costs promptness: the message still dies when it
 * reaches the head of its queue. */
static void
heap_add(struct dests *t, struct dest *d, struct msg *m)
{
	if (t->nexpiry == t->expiry_cap) {
		size_t cap = t->expiry_cap ? t->expiry_cap * 2 : 64;
		struct dest_expiry *e = cap < UINT32_MAX ? realloc(t->expiry, cap * sizeof(*e)) : NULL;
		if (e == NULL) {
			log_error("out of memory: message %llu of %s expires only at the head of its "
			    "queue", (unsigned long long)m->id, d->name);
			return;
		}
		t->expiry = e;
		t->expiry_cap = cap;
	}
	t->expiry[t->nexpiry] = (struct dest_expiry){ m->expires_ms, m, d };
	heap_up(t, t->nexpiry++);
}

static void
heap_remove(struct dests *t, struct msg *m)
{
	size_t i = m->expiry_slot - 1;
	m->expiry_slot = 0;
	if (--t->nexpiry == i)
		return;
	struct dest_expiry last = t->expiry[t->nexpiry];
	heap_set(t, i, last);
	if (i > 0 && t->expiry[(i - 1) / 2].at > last.at)
		heap_up(t, i);
	else
		heap_down(t, i);
}

/* ---- the lists ---- */

static inline void
q_push_back(struct dest *d, struct msg *m)
{
	struct msgq *q = &d->q;
	unsigned p = m->priority;
	m->qnext = NULL;
	m->qprev = q->level[p].tail;
	if (q->level[p].tail)
		q->level[p].tail->qnext = m;
	else
		q->level[p].head = m;
	q->level[p].tail = m;
	q->nonempty |= 1u << p;
	q->count++;
	q->bytes += m->size;
	m->queued = true;
	if (m->expires_ms != 0)
		heap_add(d->owner, d, m);
}

static void
q_push_front(struct dest *d, struct msg *m)
{
	struct msgq *q = &d->q;
	unsigned p = m->priority;
	m->qprev = NULL;
	m->qnext = q->level[p].head;
	if (q->level[p].head)
		q->level[p].head->qprev = m;
	else
		q->level[p].tail = m;
	q->level[p].head = m;
	q->nonempty |= 1u << p;
	q->count++;
	q->bytes += m->size;
	m->queued = true;
	if (m->expires_ms != 0)
		heap_add(d->owner, d, m);
}

/* Take m off the queue; the caller has its reference. */
static inline void
q_take(struct dest *d, struct msg *m)
{
	struct msgq *q = &d->q;
	unsigned p = m->priority;
	if (m->qprev)
		m->qprev->qnext = m->qnext;
	else
		q->level[p].head = m->qnext;
	if (m->qnext)
		m->qnext->qprev = m->qprev;
	else
		q->level[p].tail = m->qprev;
	if (q->level[p].head == NULL)
		q->nonempty &= ~(1u << p);
	m->qprev = m->qnext = NULL;
	m->queued = false;
	q->count--;
	q->bytes -= m->size;
	d->pops++;
	if (m->expiry_slot != 0)
		heap_remove(d->owner, m);
}

/* The next message to hand out: the oldest of the highest priority. */
static inline struct msg *
q_first(const struct msgq *q)
{
	return q->nonempty ? q->level[31 - __builtin_clz(q->nonempty)].head : NULL;
}

/* The one after m in that order. */
static struct msg *
q_next(const struct msgq *q, const struct msg *m)
{
	if (m->qnext != NULL)
		return m->qnext;
	unsigned below = q->nonempty & ((1u << m->priority) - 1);
	return below ? q->level[31 - __builtin_clz(below)].head : NULL;
}

/* What overflow pushes out: the oldest of the lowest priority. */
static struct msg *
q_least(const struct msgq *q)
{
	return q->nonempty ? q->level[__builtin_ctz(q->nonempty)].head : NULL;
}

static void
die(struct dest *d, struct msg *m, enum dest_death why)
{
	struct dests *t = d->owner;
	if (t->hooks.dead != NULL)
		t->hooks.dead(t->hooks.arg, d, m, why);
	else
		msg_unref(m);
}

static inline bool
expired(const struct dest *d, const struct msg *m)
{
	const struct dests *t = d->owner;
	return t->hooks.now_ms != NULL && m->expires_ms <= t->hooks.now_ms(t->hooks.arg);
}

bool
dest_msg_expired(const struct dest *d, const struct msg *m)
{
	return m->expires_ms != 0 && expired(d, m);
}

static void
q_free(struct dest *d)
{
	struct msg *m;
	while ((m = q_first(&d->q)) != NULL) {
		q_take(d, m);
		msg_unref(m);
	}
}

/* ---- the table ---- */

struct dest *
dests_find(struct dests *t, const char *name, size_t len)
{
	struct dest *d;
	HASH_FIND(hh, t->by_name, name, len, d);
	return d;
}

/* Every /topic/ topic is in the subject tree, by its name after /topic/:
 * a wildcard topic by its pattern, a plain one by its name, so that one
 * look in the tree finds every topic a publish goes to.  A name that is a
 * malformed pattern is neither (SUBSCRIBE refuses it, but a durable
 * subscription to such a name made before wildcards existed still works as
 * it did): it stays out of the tree and is found by name (t->nodd).  -1 if
 * out of memory. */
static int
topic_index(struct dests *t, struct dest *d)
{
	const char *subject = d->name + TOPIC_PREFIX_LEN;
	size_t len = d->name_len - TOPIC_PREFIX_LEN;
	struct subject_error err;
	int kind = address_has_prefix(d->name, d->name_len, TOPIC_PREFIX, TOPIC_PREFIX_LEN) ?
	    subject_parse(subject, len, &err) : -1;
	if (kind < 0) {
		t->nodd++;
		return 0;
	}
	if (t->topics == NULL && (t->topics = subjects_new()) == NULL)
		return -1;
	if (subjects_add(t->topics, subject, len, d) != 0)
		return -1;
	d->in_tree = true;
	d->pattern = kind == 1;
	t->npatterns += d->pattern;
	return 0;
}

static void
topic_unindex(struct dests *t, struct dest *d)
{
	if (!d->in_tree) {
		t->nodd--;
		return;
	}
	subjects_remove(t->topics, d->name + TOPIC_PREFIX_LEN, d->name_len - TOPIC_PREFIX_LEN, d);
	t->npatterns -= d->pattern;
}

size_t
dests_topic_matches(struct dests *t, const char *name, size_t len, struct dest **out, size_t cap)
{
	size_t n = 0;
	if (t->topics != NULL && address_has_prefix(name, len, TOPIC_PREFIX, TOPIC_PREFIX_LEN)) {
		void *const *found = subjects_match(t->topics, name + TOPIC_PREFIX_LEN,
		    len - TOPIC_PREFIX_LEN, &n);
		if (found == NULL && n == SIZE_MAX)
			return SIZE_MAX;
		for (size_t i = 0; i < n && i < cap; i++)
			out[i] = found[i];
	}
	if (t->nodd > 0) {
		struct dest *d = dests_find(t, name, len);
		if (d != NULL && d->kind == DEST_TOPIC && !d->in_tree) {
			if (n < cap)
				out[n] = d;
			n++;
		}
	}
	return n;
}

bool
dest_is_pattern(const struct dest *d)
{
	return d->pattern;
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
	d->owner = t;
	d->policy = t->hooks.policy ? t->hooks.policy(t->hooks.arg, d->name, len) : &default_policy;
	d->plain = d->policy->message_ttl_ms == 0 && d->policy->overflow == OVERFLOW_BLOCK;
	if (kind == DEST_TOPIC && topic_index(t, d) != 0) {
		free(d->name);
		free(d);
		return NULL;
	}
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
	q_free(d);
	if (d->kind == DEST_TOPIC)
		topic_unindex(t, d);
	free(d->feeds);
	free(d->name);
	free(d);
}

void
dests_release(struct dests *t, struct dest *d)
{
	if (d->nsubs > 0 || d->q.count > 0 || d->q.out > 0 || d->holds > 0 || d->temp != NULL ||
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
	free(t->expiry);
	t->expiry = NULL;
	t->nexpiry = t->expiry_cap = 0;
	if (t->topics != NULL)
		subjects_free(t->topics);
	t->topics = NULL;
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

void
dests_foreach_mutable(struct dests *t, void (*fn)(struct dest *d, void *arg), void *arg)
{
	for (struct dest *d = t->by_name; d != NULL; d = d->hh.next)
		fn(d, arg);
}

size_t
dests_expire(struct dests *t, uint64_t now, size_t budget)
{
	size_t n = 0;
	while (n < budget && t->nexpiry > 0 && t->expiry[0].at <= now) {
		struct dest *d = t->expiry[0].dest;
		struct msg *m = t->expiry[0].msg;
		q_take(d, m); /* and off the heap */
		die(d, m, DEATH_EXPIRED);
		dests_release(t, d);
		n++;
	}
	return n;
}

uint64_t
dests_next_expiry(const struct dests *t)
{
	return t->nexpiry > 0 ? t->expiry[0].at : 0;
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

int
dests_set_hooks(struct dests *t, const struct dests_hooks *hooks)
{
	if (t->hooks.arg != NULL)
		return -1;
	t->hooks = *hooks;
	return 0;
}

const struct backend *
dest_backend(const struct dest *d)
{
	return d->owner->backend;
}

void *
dest_remote(const struct dest *d)
{
	return d->remote;
}

void
dest_set_remote(struct dest *d, void *remote)
{
	d->remote = remote;
}

void
dest_set_temp(struct dest *d, struct temp *t)
{
	d->temp = t;
}

const struct dest_policy *
dest_policy(const struct dest *d)
{
	return d->policy;
}

size_t
dest_by_priority(const struct dest *d, unsigned priority)
{
	size_t n = 0;
	if (priority < MSG_PRIORITIES)
		for (const struct msg *m = d->q.level[priority].head; m != NULL; m = m->qnext)
			n++;
	return n;
}

/* ---- subscribers ---- */

void
dest_sub_add(struct dest *d, struct sub *s)
{
	s->dest_prev = NULL;
	s->dest_next = d->subs;
	if (d->subs)
		d->subs->dest_prev = s;
	d->subs = s;
	d->nsubs++;
	d->nselective += s->selector != NULL;
}

static void
starved_remove(struct dest *d, struct sub *s)
{
	if (!s->starved)
		return;
	if (s->starved_prev)
		s->starved_prev->starved_next = s->starved_next;
	else
		d->starved_head = s->starved_next;
	if (s->starved_next)
		s->starved_next->starved_prev = s->starved_prev;
	else
		d->starved_tail = s->starved_prev;
	s->starved_prev = s->starved_next = NULL;
	d->nstarved_part -= s->scanned_part;
	s->starved = false;
}

static void
starved_append(struct dest *d, struct sub *s)
{
	s->starved = true;
	s->starved_next = NULL;
	s->starved_prev = d->starved_tail;
	if (d->starved_tail)
		d->starved_tail->starved_next = s;
	else
		d->starved_head = s;
	d->starved_tail = s;
	d->nstarved_part += s->scanned_part;
}

/* s's selector matched nothing it looked at: off the ready list, it is
 * offered new messages as they come instead of looking again. */
static void
starve(struct dest *d, struct sub *s, bool part)
{
	s->missed = false;
	s->scanned_part = part;
	s->scan_pops = d->pops;
	starved_append(d, s);
}

/* Is there anything new for a starved subscriber to look at: a match came
 * while it was full, or the front of a long queue has moved on. */
static bool
worth_rescan(const struct dest *d, const struct sub *s)
{
	return s->missed || (s->scanned_part && d->pops - s->scan_pops >= DEST_SELECTOR_WINDOW / 2);
}

void
dest_sub_remove(struct dest *d, struct sub *s)
{
	dest_ready_remove(d, s);
	starved_remove(d, s);
	if (s->dest_prev)
		s->dest_prev->dest_next = s->dest_next;
	else
		d->subs = s->dest_next;
	if (s->dest_next)
		s->dest_next->dest_prev = s->dest_prev;
	s->dest_prev = s->dest_next = NULL;
	d->nsubs--;
	d->nselective -= s->selector != NULL;
}

/* A starved subscriber goes back on the ready list only if there is
 * something new for it to look at. */
static __attribute__((noinline)) bool
unstarve(struct dest *d, struct sub *s)
{
	if (!worth_rescan(d, s))
		return false;
	starved_remove(d, s);
	return true;
}

void
dest_ready_add(struct dest *d, struct sub *s)
{
	if (s->in_ready || (__builtin_expect(s->starved, 0) && !unstarve(d, s)))
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

void
dest_hold(struct dest *d)
{
	d->holds++;
}

void
dest_unhold(struct dest *d)
{
	d->holds--;
}

/* ---- handing out ---- */

/* 0, or -1 if out of memory (m is still the caller's). */
static int
deliver(struct dest *d, struct sub *s, struct msg *m)
{
	if (sub_deliver(s, m, m->redelivered) != 0) {
		log_error("out of memory delivering to %s", d->name);
		return -1;
	}
	if (s->ack != ACK_AUTO)
		d->q.out++;
	return 0;
}

/* Hand queued message m to s, and list s again if it may take more. */
static inline __attribute__((always_inline)) int
hand(struct dest *d, struct sub *s, struct msg *m)
{
	q_take(d, m);
	if (deliver(d, s, m) != 0) {
		q_push_front(d, m);
		return -1;
	}
	if (sub_can_take(s))
		dest_ready_add(d, s);
	return 0;
}

/* The first message s wants among the first DEST_SELECTOR_WINDOW, letting
 * the expired ones it passes die; NULL if none (*part: it did not see the
 * whole queue). */
static struct msg *
find_for(struct dest *d, const struct sub *s, bool *part)
{
	size_t seen = 0;
	*part = false;
	for (struct msg *m = q_first(&d->q), *next; m != NULL; m = next) {
		next = q_next(&d->q, m);
		if (m->expires_ms != 0 && expired(d, m)) {
			q_take(d, m);
			die(d, m, DEATH_EXPIRED); /* never into d itself: next stays queued */
			continue;
		}
		if (++seen > DEST_SELECTOR_WINDOW) {
			*part = true;
			return NULL;
		}
		if (s->selector == NULL || sub_matches(s, m))
			return m;
	}
	return NULL;
}

static void
dispatch_selective(struct dest *d)
{
	for (;;) {
		while (d->q.count > 0 && d->ready_head != NULL) {
			struct sub *s = d->ready_head;
			dest_ready_remove(d, s);
			if (!sub_can_take(s))
				continue;
			bool part;
			struct msg *m = find_for(d, s, &part);
			if (m == NULL && s->selector == NULL) {
				dest_ready_add(d, s); /* only expired messages were left */
				break;
			}
			if (m == NULL) {
				starve(d, s, part);
				continue;
			}
			if (hand(d, s, m) != 0)
				return;
		}
		/* Subscribers that saw only the front of a long queue look again
		 * once it has moved on by half a window. */
		if (d->nstarved_part == 0 || d->q.count == 0 ||
		    d->pops - d->part_checked < DEST_SELECTOR_WINDOW / 2)
			return;
		d->part_checked = d->pops;
		for (struct sub *s = d->starved_head, *next; s != NULL; s = next) {
			next = s->starved_next;
			if (s->scanned_part && sub_can_take(s)) {
				starved_remove(d, s);
				dest_ready_add(d, s);
			}
		}
		if (d->ready_head == NULL)
			return;
	}
}

static void dispatch_plain(struct dest *d);

void
dest_dispatch(struct dest *d)
{
	if (d->nselective > 0)
		dispatch_selective(d);
	else
		dispatch_plain(d);
	if (d->remote != NULL && d->owner->backend->ops->refill != NULL)
		d->owner->backend->ops->refill(d->owner->backend->impl, d);
}

static inline void
dispatch_plain(struct dest *d)
{
	while (d->q.count > 0 && d->ready_head != NULL) {
		struct msg *m = q_first(&d->q);
		if (m->expires_ms != 0 && expired(d, m)) {
			q_take(d, m);
			die(d, m, DEATH_EXPIRED);
			continue;
		}
		struct sub *s = d->ready_head;
		dest_ready_remove(d, s);
		/* Readiness is checked lazily: a subscriber whose connection
		 * became blocked since it was listed just drops out here. */
		if (!sub_can_take(s))
			continue;
		if (hand(d, s, m) != 0)
			return;
	}
}

/* A message just come (published or given back) goes straight to a starved
 * subscriber that wants it and can take it; one that wants it but cannot
 * take it now looks again when it can.  True if m was delivered. */
static bool
offer(struct dest *d, struct msg *m)
{
	for (struct sub *s = d->starved_head; s != NULL; s = s->starved_next) {
		if (!sub_matches(s, m))
			continue;
		if (!sub_can_take(s)) {
			s->missed = true;
			continue;
		}
		if (deliver(d, s, m) != 0)
			return false;
		/* Still starved (nothing queued is for it): to the back, in turn. */
		starved_remove(d, s);
		starved_append(d, s);
		return true;
	}
	return false;
}

void
dest_stamp(struct dest *d, struct msg *m)
{
	const struct dests *t = d->owner;
	uint64_t ttl = d->policy->message_ttl_ms;
	if (ttl == 0 || t->hooks.now_ms == NULL)
		return;
	uint64_t at = t->hooks.now_ms(t->hooks.arg) + ttl;
	if (m->expires_ms == 0 || at < m->expires_ms)
		m->expires_ms = at;
}

/* drop-head: make room for m by letting the oldest least urgent go. */
static void
make_room(struct dest *d, const struct msg *m)
{
	const struct dest_policy *p = d->policy;
	while (d->q.count > 0 && ((p->max_queue_messages && d->q.count >= p->max_queue_messages) ||
	    (p->max_queue_bytes && d->q.bytes + m->size > p->max_queue_bytes))) {
		struct msg *victim = q_least(&d->q);
		q_take(d, victim);
		die(d, victim, DEATH_OVERFLOW);
	}
}

/* Every current subscriber of topic d whose selector matches gets m. */
static inline void
topic_publish(struct dest *d, struct msg *m, uint64_t *dropped)
{
	for (struct sub *s = d->subs; s != NULL; s = s->dest_next) {
		if (s->selector != NULL && !sub_matches(s, m))
			continue;
		if (sub_deliver(s, msg_ref(m), false) != 0) {
			msg_unref(m);
			(*dropped)++;
			log_error("out of memory delivering to %s", d->name);
		}
	}
	msg_unref(m);
}

/* A now-or-never message (expiration:0): a topic's subscribers get it as
 * any other; on a queue it goes to a subscriber that can take it now (one
 * waiting with a selector that wants it, or the next ready one), or dies.
 * It never waits in the queue. */
static __attribute__((noinline, cold)) void
publish_now_or_never(struct dest *d, struct msg *m, uint64_t *dropped)
{
	if (d->kind == DEST_TOPIC) {
		topic_publish(d, m, dropped);
		return;
	}
	if (d->starved_head != NULL && offer(d, m))
		return;
	for (struct sub *s = d->ready_head, *next; s != NULL; s = next) {
		next = s->ready_next;
		if (!sub_can_take(s)) {
			dest_ready_remove(d, s); /* listed before it filled up: as in dispatch */
			continue;
		}
		if (s->selector != NULL && !sub_matches(s, m))
			continue;
		dest_ready_remove(d, s);
		if (deliver(d, s, m) != 0) {
			dest_ready_add(d, s);
			break;
		}
		if (sub_can_take(s))
			dest_ready_add(d, s); /* to the back, in turn */
		return;
	}
	die(d, m, DEATH_EXPIRED);
}

void
dest_publish(struct dest *d, struct msg *m, uint64_t *dropped)
{
	d->published++;
	if (m->expires_ms != 0 && (m->now_or_never || expired(d, m))) {
		if (m->now_or_never)
			publish_now_or_never(d, m, dropped);
		else
			die(d, m, DEATH_EXPIRED);
		return;
	}
	if (d->kind == DEST_TOPIC) {
		topic_publish(d, m, dropped);
		return;
	}
	if (__builtin_expect(!d->plain || d->starved_head != NULL, 0)) {
		if (d->policy->message_ttl_ms != 0)
			dest_stamp(d, m); /* later than now: it did not expire */
		if (d->starved_head != NULL && offer(d, m))
			return;
		if (d->policy->overflow == OVERFLOW_DROP_HEAD)
			make_room(d, m);
	}
	q_push_back(d, m);
	dest_dispatch(d);
}

bool
dest_full(const struct dest *d)
{
	const struct dest_policy *p = d->policy;
	return p->overflow == OVERFLOW_BLOCK &&
	    ((p->max_queue_messages && d->q.count >= p->max_queue_messages) ||
	    (p->max_queue_bytes && d->q.bytes >= p->max_queue_bytes));
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
	struct msg *m;
	while ((m = q_first(&d->q)) != NULL) {
		q_take(d, m);
		if (fn != NULL)
			fn(m, arg);
		msg_unref(m);
	}
}

void
dest_restore(struct dest *d, struct msg *m, bool redelivered)
{
	m->redelivered = redelivered;
	q_push_back(d, m);
}

void
dest_give_back(struct dest *d, struct msg *m)
{
	d->q.out--;
	const struct backend *be = d->owner->backend;
	if (m->kept != NULL && be != NULL && be->ops->give_back != NULL) {
		be->ops->give_back(be->impl, d, m);
		return;
	}
	m->returns++;
	uint32_t max = d->policy->max_redeliveries;
	if (max != 0 && m->returns > max) {
		die(d, m, DEATH_MAX_REDELIVERIES);
		return;
	}
	m->redelivered = true;
	if (d->starved_head != NULL && offer(d, m))
		return;
	q_push_front(d, m);
}

void
dest_reject(struct dest *d, struct msg *m)
{
	d->q.out--;
	die(d, m, DEATH_REJECTED);
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
	for (const struct msg *m = q_first(&d->q); m != NULL; m = q_next(&d->q, m))
		fn(m, m->redelivered, arg);
}

static const char *
check_queue(const struct dest *d)
{
	const struct msgq *q = &d->q;
	const struct dests *t = d->owner;
	size_t bytes = 0, count = 0;
	for (unsigned p = 0; p < MSG_PRIORITIES; p++) {
		size_t n = 0;
		const struct msg *prev = NULL;
		for (const struct msg *m = q->level[p].head; m != NULL; prev = m, m = m->qnext) {
			if (m->refs == 0)
				return "a queued message has no reference";
			if (!m->queued || m->priority != p || m->qprev != prev)
				return "a priority list is broken";
			if (m->expires_ms != 0 && m->expiry_slot != 0 &&
			    (m->expiry_slot > t->nexpiry || t->expiry[m->expiry_slot - 1].msg != m ||
			    t->expiry[m->expiry_slot - 1].dest != d ||
			    t->expiry[m->expiry_slot - 1].at != m->expires_ms))
				return "the expiry heap does not know a message where it is";
			if (m->expires_ms == 0 && m->expiry_slot != 0)
				return "a message that never expires is in the expiry heap";
			bytes += m->size;
			n++;
		}
		if (q->level[p].tail != prev || ((q->nonempty >> p) & 1) != (n > 0))
			return "a priority list is miscounted";
		count += n;
	}
	if (count != q->count)
		return "queued messages miscounted";
	if (bytes != q->bytes)
		return "queued bytes miscounted";
	return NULL;
}

const char *
dest_check(const struct dest *d)
{
	size_t nsubs = 0, nselective = 0, nstarved_part = 0;
	bool could_take = false;
	const char *why = check_queue(d);
	if (why != NULL)
		return why;
	for (const struct sub *s = d->subs; s != NULL; s = s->dest_next) {
		if (s->dest != d || (s->dest_next != NULL && s->dest_next->dest_prev != s))
			return "subscriber list broken";
		could_take |= sub_can_take(s) && !s->starved;
		nselective += s->selector != NULL;
		nsubs++;
	}
	if (nsubs != d->nsubs || nselective != d->nselective)
		return "subscribers miscounted";
	if (d->kind == DEST_TOPIC && (d->q.count > 0 || d->q.out > 0 || d->ready_head != NULL ||
	    d->starved_head != NULL))
		return "a topic holds messages";
	const struct sub *prev = NULL;
	for (const struct sub *s = d->ready_head; s != NULL; prev = s, s = s->ready_next)
		if (!s->in_ready || s->starved || s->dest != d || s->ready_prev != prev)
			return "ready list broken";
	if (d->ready_tail != prev)
		return "ready list tail broken";
	prev = NULL;
	for (const struct sub *s = d->starved_head; s != NULL; prev = s, s = s->starved_next) {
		if (!s->starved || s->in_ready || s->selector == NULL || s->dest != d ||
		    s->starved_prev != prev)
			return "starved list broken";
		nstarved_part += s->scanned_part;
	}
	if (d->starved_tail != prev || nstarved_part != d->nstarved_part)
		return "starved list miscounted";
	if (d->nsubs == 0 && d->q.count == 0 && d->temp == NULL && d->fed_by == NULL &&
	    d->nfeeds == 0)
		return "an empty destination is kept";
	if (d->fed_by != NULL && (d->kind != DEST_QUEUE || d->fed_by->kind != DEST_TOPIC))
		return "a durable subscription is not a queue fed by a topic";
	if (d->holds > 0)
		return "held outside a COMMIT";
	if (d->q.count > 0 && could_take)
		return "messages wait while a subscriber could take one";
	return NULL;
}
