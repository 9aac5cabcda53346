/* dest.c - destinations by name, the queues' priority lists, the expiry
 * heap, and handing messages to subscribers (see dest.h).
 *
 * Plain traffic (one priority, no selector, no expiry) costs what a ring
 * did: a push at the tail, a pop at the head, and a ready subscriber taken
 * in turn.  Priorities add a bit test, expiry a heap entry per expiring
 * message, and selectors a bounded look along the queue.  Consumer
 * priorities and exclusive consumers cost nothing to a queue whose
 * subscribers ask for neither: a NULL level and a false standby. */
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

/* One consumer priority present on a queue (see dest.h): the levels are
 * linked highest first. */
struct dest_level {
	int32_t priority;
	size_t nsubs;                         /* subscribers of this priority */
	struct sub *ready_tail;               /* the last of them on the ready list, or NULL */
	struct dest_level *higher, *lower;
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
	struct dest_level *levels;            /* queues: consumer priorities, highest first;
	                                         NULL while every subscriber has 0 */
	size_t nprio;                         /* subscribers whose priority is not 0 */
	struct sub *active;                   /* queues: the exclusive consumer, or NULL */
	struct sub *standby_head, *standby_tail; /* the other exclusive ones, the next first */
	const struct endpoint *locked_by;     /* RabbitMQ's exclusive: the connection, or NULL */
	size_t nlocks;                        /* ... its subscriptions that locked it */
	struct temp *temp;                    /* set for a temp-queue: it lives as its owner does */
	void *remote;                         /* cluster mode: fed from NATS (cluster.c) */
	struct dest_policy *own_policy;       /* set by dest_set_policy (policy points at it) */
	/* A queue whose policy has expires_ms, while it has no subscriber:
	 * in owner->idle_head's list, since idle_since (dests_idle_expired). */
	bool in_idle;
	uint64_t idle_since;
	struct dest *idle_prev, *idle_next;
	struct dest *fed_by;                  /* a durable subscription's queue: its topic */
	bool auto_delete;                     /* deleted with its last subscriber
	                                         (dest_set_auto_delete) */
	bool transient;                       /* the journal keeps none of its messages */
	struct dest **feeds;                  /* a topic: the durable queues it feeds */
	size_t nfeeds, feeds_cap;
	uint64_t published;                   /* messages published to it (the admin API) */
	struct queue_group *group;            /* while there are queue patterns (dest.h) */
	struct dest *group_prev, *group_next;
};

/* The plain /queue/ queues whose name after /queue/ begins with one element. */
struct queue_group {
	UT_hash_handle hh;                    /* in dests->queue_groups, by elem */
	struct dest *head;
	size_t len;
	char elem[];
};

static const struct dest_policy default_policy; /* no limits, nothing expires, no DLQ */

static void level_free(struct dest *d, struct dest_level *l);

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

/* Does a queue of policy p take a message as it is (no lifetime to stamp,
 * no room to make, no priority to cap)? */
static bool
policy_plain(const struct dest_policy *p)
{
	return p->message_ttl_ms == 0 && p->overflow == OVERFLOW_BLOCK && p->max_priority == 0;
}

/* The first element of a /queue/ name (after the prefix), *len long. */
static const char *
first_element(const char *name, size_t name_len, size_t *len)
{
	const char *s = name + QUEUE_PREFIX_LEN;
	size_t n = name_len - QUEUE_PREFIX_LEN;
	const char *dot = memchr(s, '.', n);
	*len = dot ? (size_t)(dot - s) : n;
	return s;
}

/* Put plain /queue/ queue d in the group of its first element: 0, or -1
 * if out of memory. */
static int
group_add(struct dests *t, struct dest *d)
{
	if (!address_has_prefix(d->name, d->name_len, QUEUE_PREFIX, QUEUE_PREFIX_LEN))
		return 0;
	size_t len;
	const char *e = first_element(d->name, d->name_len, &len);
	struct queue_group *g;
	HASH_FIND(hh, t->queue_groups, e, len, g);
	if (g == NULL) {
		if ((g = malloc(sizeof(*g) + len + 1)) == NULL)
			return -1;
		g->head = NULL;
		g->len = len;
		memcpy(g->elem, e, len);
		g->elem[len] = '\0';
		HASH_ADD(hh, t->queue_groups, elem[0], len, g);
	}
	d->group = g;
	d->group_prev = NULL;
	d->group_next = g->head;
	if (g->head != NULL)
		g->head->group_prev = d;
	g->head = d;
	return 0;
}

static void
group_remove(struct dests *t, struct dest *d)
{
	struct queue_group *g = d->group;
	if (g == NULL)
		return;
	if (d->group_prev != NULL)
		d->group_prev->group_next = d->group_next;
	else
		g->head = d->group_next;
	if (d->group_next != NULL)
		d->group_next->group_prev = d->group_prev;
	d->group = NULL;
	if (g->head == NULL) {
		HASH_DEL(t->queue_groups, g);
		free(g);
	}
}

/* The groups are kept only while there are queue patterns. */
static void
groups_drop(struct dests *t)
{
	struct queue_group *g, *tmp;
	HASH_ITER(hh, t->queue_groups, g, tmp) {
		for (struct dest *d = g->head; d != NULL; d = d->group_next)
			d->group = NULL;
		HASH_DEL(t->queue_groups, g);
		free(g);
	}
}

static int
groups_build(struct dests *t)
{
	struct dest *d, *tmp;
	HASH_ITER(hh, t->by_name, d, tmp) {
		if (d->kind == DEST_QUEUE && group_add(t, d) != 0) {
			groups_drop(t);
			return -1;
		}
	}
	return 0;
}

/* A plain /queue/ queue just made: every wildcard queue subscription whose
 * pattern matches its name takes from it too, through a child (sub.h).
 * One look in the tree per queue made, none per publish.  Out of memory,
 * a subscription misses this queue, and the log says so. */
static __attribute__((noinline)) void
queue_attach_patterns(struct dests *t, struct dest *d)
{
	if (!address_has_prefix(d->name, d->name_len, QUEUE_PREFIX, QUEUE_PREFIX_LEN))
		return;
	size_t n;
	void *const *found = subjects_match(t->queue_patterns, d->name + QUEUE_PREFIX_LEN,
	    d->name_len - QUEUE_PREFIX_LEN, &n);
	if (found == NULL && n == SIZE_MAX) {
		log_error("out of memory: wildcard queue subscriptions miss %s", d->name);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct dest *pq = found[i];
		for (struct sub *root = pq->subs; root != NULL; root = root->dest_next)
			if (sub_attach(root, d) != 0)
				log_error("out of memory: subscription '%s' to %s misses %s", root->id,
				    pq->name, d->name);
	}
}

static struct dest *
dest_new(struct dests *t, const char *name, size_t len, enum dest_kind kind)
{
	struct dest *d = calloc(1, sizeof(*d));
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
	d->plain = policy_plain(d->policy);
	return d;
}

struct dest *
dests_get(struct dests *t, const char *name, size_t len, enum dest_kind kind)
{
	struct dest *d = dests_find(t, name, len);
	if (d != NULL)
		return d;
	if ((d = dest_new(t, name, len, kind)) == NULL)
		return NULL;
	if ((kind == DEST_TOPIC && topic_index(t, d) != 0) ||
	    (kind == DEST_QUEUE && t->nqueue_patterns > 0 && group_add(t, d) != 0)) {
		free(d->name);
		free(d);
		return NULL;
	}
	HASH_ADD_KEYPTR(hh, t->by_name, d->name, d->name_len, d);
	t->count++;
	log_debug("destination %s created", d->name);
	if (kind == DEST_QUEUE && t->nqueue_patterns > 0)
		queue_attach_patterns(t, d);
	return d;
}

struct dest *
dests_get_queue_pattern(struct dests *t, const char *name, size_t len)
{
	struct dest *d;
	HASH_FIND(hh, t->queue_patterns_by_name, name, len, d);
	if (d != NULL)
		return d;
	if ((d = dest_new(t, name, len, DEST_QUEUE)) == NULL)
		return NULL;
	if ((t->nqueue_patterns == 0 && groups_build(t) != 0) ||
	    (t->queue_patterns == NULL && (t->queue_patterns = subjects_new()) == NULL) ||
	    subjects_add(t->queue_patterns, name + QUEUE_PREFIX_LEN, len - QUEUE_PREFIX_LEN, d) != 0) {
		if (t->nqueue_patterns == 0)
			groups_drop(t);
		free(d->name);
		free(d);
		return NULL;
	}
	d->pattern = true;
	HASH_ADD_KEYPTR(hh, t->queue_patterns_by_name, d->name, d->name_len, d);
	t->nqueue_patterns++;
	log_debug("wildcard queue %s created", d->name);
	return d;
}

/* May a wildcard queue subscription take from queue d?  A plain /queue/
 * queue, not a temp-queue's or a durable subscription's. */
static bool
queue_matchable(const struct dest *d)
{
	return d->kind == DEST_QUEUE && !d->pattern && d->temp == NULL && d->fed_by == NULL &&
	    address_has_prefix(d->name, d->name_len, QUEUE_PREFIX, QUEUE_PREFIX_LEN);
}

int
dests_attach_pattern(struct dests *t, struct dest *pq, struct sub *root)
{
	const char *pat = pq->name + QUEUE_PREFIX_LEN;
	size_t plen = pq->name_len - QUEUE_PREFIX_LEN;
	size_t elen;
	const char *e = first_element(pq->name, pq->name_len, &elen);
	if (subject_parse(e, elen, NULL) == 0) {
		/* A name first: only the queues that begin with it. */
		struct queue_group *g;
		HASH_FIND(hh, t->queue_groups, e, elen, g);
		for (struct dest *d = g ? g->head : NULL; d != NULL; d = d->group_next)
			if (queue_matchable(d) && subject_match(pat, plen, d->name + QUEUE_PREFIX_LEN,
			    d->name_len - QUEUE_PREFIX_LEN) && sub_attach(root, d) != 0)
				return -1;
		return 0;
	}
	/* A wildcard first: one pass over the table (measured in BENCHMARKS.md). */
	struct dest *d, *tmp;
	HASH_ITER(hh, t->by_name, d, tmp) {
		if (queue_matchable(d) && subject_match(pat, plen, d->name + QUEUE_PREFIX_LEN,
		    d->name_len - QUEUE_PREFIX_LEN) && sub_attach(root, d) != 0)
			return -1;
	}
	return 0;
}

static void
idle_unlink(struct dest *d)
{
	if (!d->in_idle)
		return;
	if (d->idle_prev != NULL)
		d->idle_prev->idle_next = d->idle_next;
	else
		d->owner->idle_head = d->idle_next;
	if (d->idle_next != NULL)
		d->idle_next->idle_prev = d->idle_prev;
	d->idle_prev = d->idle_next = NULL;
	d->in_idle = false;
}

/* Keep d in the idle list while it is a queue that expires unused (x-expires)
 * and has no subscriber, from when it became so. */
static void
idle_update(struct dest *d)
{
	struct dests *t = d->owner;
	bool idle = d->kind == DEST_QUEUE && d->policy->expires_ms != 0 && d->nsubs == 0;
	if (!idle) {
		idle_unlink(d);
		return;
	}
	if (d->in_idle)
		return;
	d->idle_since = t->hooks.now_ms != NULL ? t->hooks.now_ms(t->hooks.arg) : 0;
	d->idle_prev = NULL;
	d->idle_next = t->idle_head;
	if (t->idle_head != NULL)
		t->idle_head->idle_prev = d;
	t->idle_head = d;
	d->in_idle = true;
}

struct dest *
dests_idle_expired(const struct dests *t, uint64_t now)
{
	for (struct dest *d = t->idle_head; d != NULL; d = d->idle_next)
		if (now >= d->idle_since + d->policy->expires_ms && d->holds == 0 && d->q.out == 0)
			return d;
	return NULL;
}

static void
dest_free(struct dests *t, struct dest *d)
{
	if (d->kind == DEST_QUEUE && d->pattern) {
		HASH_DELETE(hh, t->queue_patterns_by_name, d);
		subjects_remove(t->queue_patterns, d->name + QUEUE_PREFIX_LEN,
		    d->name_len - QUEUE_PREFIX_LEN, d);
		if (--t->nqueue_patterns == 0)
			groups_drop(t);
	} else {
		HASH_DEL(t->by_name, d);
		t->count--;
		group_remove(t, d);
		idle_unlink(d);
	}
	t->freed++; /* invalidates the sessions' last-destination caches */
	if (d->fed_by != NULL)
		dest_unbind(d);
	while (d->nfeeds > 0)
		dest_unbind(d->feeds[0]);
	q_free(d);
	while (d->levels != NULL) /* only if subscribers outlived it, as at exit */
		level_free(d, d->levels);
	if (d->kind == DEST_TOPIC)
		topic_unindex(t, d);
	free(d->feeds);
	free(d->own_policy);
	free(d->name);
	free(d);
}

void
dests_release(struct dests *t, struct dest *d)
{
	if (d->auto_delete && d->nsubs == 0 && d->holds == 0 && d->q.out == 0) {
		/* Its last subscriber left: it goes, with what it holds, and
		 * its topic is released in turn. */
		struct dest *topic = d->fed_by;
		log_debug("auto-delete queue %s deleted (%zu message%s dropped)", d->name,
		    d->q.count, d->q.count == 1 ? "" : "s");
		dest_purge(d, NULL, NULL);
		dest_free(t, d);
		if (topic != NULL)
			dests_release(t, topic);
		return;
	}
	/* A queue with a policy of its own (x- arguments) stays, as RabbitMQ's
	 * declared queues do, unless it is an auto-delete one (above). */
	if (d->nsubs > 0 || d->q.count > 0 || d->q.out > 0 || d->holds > 0 || d->temp != NULL ||
	    d->fed_by != NULL || d->nfeeds > 0 || d->own_policy != NULL)
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
	HASH_ITER(hh, t->queue_patterns_by_name, d, tmp) {
		dest_free(t, d);
	}
	if (t->queue_patterns != NULL)
		subjects_free(t->queue_patterns);
	t->queue_patterns = NULL;
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

bool
dest_has_own_policy(const struct dest *d)
{
	return d->own_policy != NULL;
}

int
dest_set_policy(struct dest *d, const struct dest_policy *p)
{
	if (d->own_policy == NULL && (d->own_policy = malloc(sizeof(*d->own_policy))) == NULL)
		return -1;
	*d->own_policy = *p;
	d->policy = d->own_policy;
	d->plain = policy_plain(d->policy);
	idle_update(d);
	return 0;
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

/* ---- consumer priorities: the levels ---- */

/* s->ready_slow says whether any of these is so, so that the ready list's
 * common path tests one flag (dest_ready_add). */
static inline void
ready_slow_update(struct sub *s)
{
	s->ready_slow = s->starved || s->standby || s->level != NULL;
}

/* The level of priority p, made (in its place) if there is none; NULL if
 * out of memory. */
static struct dest_level *
level_get(struct dest *d, int32_t p)
{
	struct dest_level *above = NULL, *l = d->levels;
	while (l != NULL && l->priority > p) {
		above = l;
		l = l->lower;
	}
	if (l != NULL && l->priority == p)
		return l;
	struct dest_level *n = calloc(1, sizeof(*n));
	if (n == NULL)
		return NULL;
	n->priority = p;
	n->higher = above;
	n->lower = l;
	if (above != NULL)
		above->lower = n;
	else
		d->levels = n;
	if (l != NULL)
		l->higher = n;
	return n;
}

static void
level_free(struct dest *d, struct dest_level *l)
{
	if (l->higher != NULL)
		l->higher->lower = l->lower;
	else
		d->levels = l->lower;
	if (l->lower != NULL)
		l->lower->higher = l->higher;
	free(l);
}

/* No subscriber has a priority but 0 any more: back to the plain list
 * (it is in order already: every one on it has 0). */
static void
levels_stop(struct dest *d)
{
	for (struct sub *s = d->subs; s != NULL; s = s->dest_next) {
		s->level = NULL;
		ready_slow_update(s);
	}
	while (d->levels != NULL)
		level_free(d, d->levels);
}

/* s joins its priority's level; the first subscriber with a priority
 * other than 0 puts those already there on a level 0 first.  -1 if out of
 * memory (nothing changed). */
static int
level_join(struct dest *d, struct sub *s)
{
	if (d->levels == NULL && d->nsubs > 0) {
		struct dest_level *zero = level_get(d, 0);
		if (zero == NULL)
			return -1;
		for (struct sub *o = d->subs; o != NULL; o = o->dest_next) {
			o->level = zero;
			o->ready_slow = true;
		}
		zero->nsubs = d->nsubs;
		zero->ready_tail = d->ready_tail; /* all of priority 0 */
	}
	struct dest_level *l = level_get(d, s->priority);
	if (l == NULL) {
		if (d->nprio == 0)
			levels_stop(d);
		return -1;
	}
	s->level = l;
	s->ready_slow = true;
	l->nsubs++;
	d->nprio += s->priority != 0;
	return 0;
}

static void
level_leave(struct dest *d, struct sub *s)
{
	struct dest_level *l = s->level;
	if (l->ready_tail == s)
		l->ready_tail = NULL; /* not listed any more, not to be looked at */
	s->level = NULL;
	ready_slow_update(s);
	d->nprio -= s->priority != 0;
	if (--l->nsubs == 0)
		level_free(d, l);
	if (d->nprio == 0 && d->levels != NULL)
		levels_stop(d);
}

/* The last subscriber of level l on the ready list, or NULL.  The list's
 * head is taken off without a look at its level (ready_pop), so a level
 * may still point at one no longer listed: it had no other ready then. */
static inline struct sub *
level_last_ready(const struct dest_level *l)
{
	return l->ready_tail != NULL && l->ready_tail->in_ready ? l->ready_tail : NULL;
}

/* s goes on the ready list behind the others of its priority: after its
 * level's last ready one, or else the last ready one of the nearest
 * higher level, or first. */
static void
ready_insert_level(struct dest *d, struct sub *s)
{
	struct sub *after = level_last_ready(s->level);
	for (struct dest_level *l = s->level->higher; after == NULL && l != NULL; l = l->higher)
		after = level_last_ready(l);
	s->in_ready = true;
	s->ready_prev = after;
	s->ready_next = after != NULL ? after->ready_next : d->ready_head;
	if (s->ready_next != NULL)
		s->ready_next->ready_prev = s;
	else
		d->ready_tail = s;
	if (after != NULL)
		after->ready_next = s;
	else
		d->ready_head = s;
	s->level->ready_tail = s;
}

/* ---- exclusive consumers ---- */

/* s waits in the standby list: by priority, highest first, then by
 * arrival (seq). */
static void
standby_insert(struct dest *d, struct sub *s)
{
	struct sub *after = d->standby_tail;
	while (after != NULL && (after->priority < s->priority ||
	    (after->priority == s->priority && after->seq > s->seq)))
		after = after->standby_prev;
	s->standby_prev = after;
	s->standby_next = after != NULL ? after->standby_next : d->standby_head;
	if (s->standby_next != NULL)
		s->standby_next->standby_prev = s;
	else
		d->standby_tail = s;
	if (after != NULL)
		after->standby_next = s;
	else
		d->standby_head = s;
}

static void
standby_unlink(struct dest *d, struct sub *s)
{
	if (s->standby_prev)
		s->standby_prev->standby_next = s->standby_next;
	else
		d->standby_head = s->standby_next;
	if (s->standby_next)
		s->standby_next->standby_prev = s->standby_prev;
	else
		d->standby_tail = s->standby_prev;
	s->standby_prev = s->standby_next = NULL;
}

static void starved_remove(struct dest *d, struct sub *s);

/* s stops taking messages: another is the active consumer. */
static void
stand_by(struct dest *d, struct sub *s)
{
	dest_ready_remove(d, s);
	starved_remove(d, s);
	s->standby = true;
	s->ready_slow = true;
	if (s->exclusive)
		standby_insert(d, s);
}

/* Exclusive s arrives: the first is the active consumer (the others stand
 * by); a later one takes over only with a higher priority. */
static void
exclusive_join(struct dest *d, struct sub *s)
{
	if (d->active == NULL) {
		for (struct sub *o = d->subs; o != NULL; o = o->dest_next)
			if (o != s)
				stand_by(d, o);
		d->active = s;
	} else if (s->priority > d->active->priority) {
		stand_by(d, d->active);
		d->active = s;
	} else {
		stand_by(d, s);
	}
}

/* The active consumer left: the next exclusive one takes over, or, with
 * none left, every other subscriber shares the queue again. */
static void
exclusive_next(struct dest *d)
{
	struct sub *next = d->standby_head;
	d->active = next;
	if (next != NULL) {
		standby_unlink(d, next);
		next->standby = false;
		ready_slow_update(next);
		if (sub_can_take(next))
			dest_ready_add(d, next);
		return;
	}
	for (struct sub *o = d->subs; o != NULL; o = o->dest_next) {
		o->standby = false;
		ready_slow_update(o);
		if (sub_can_take(o))
			dest_ready_add(d, o);
	}
}

enum dest_lock
dest_lock_check(const struct dest *d, const struct endpoint *ep, bool locks)
{
	if (d->locked_by != NULL && d->locked_by != ep)
		return DEST_LOCK_HELD;
	if (locks && d->locked_by == NULL)
		for (const struct sub *s = d->subs; s != NULL; s = s->dest_next)
			if (s->ep != ep)
				return DEST_LOCK_SHARED;
	return DEST_LOCK_OK;
}

/* ---- subscribers ---- */

int
dest_sub_add(struct dest *d, struct sub *s)
{
	if ((s->priority != 0 || d->levels != NULL) && level_join(d, s) != 0)
		return -1;
	s->dest_prev = NULL;
	s->dest_next = d->subs;
	if (d->subs)
		d->subs->dest_prev = s;
	d->subs = s;
	d->nsubs++;
	if (__builtin_expect(d->in_idle, 0))
		idle_update(d);
	d->nselective += s->selector != NULL;
	if (s->exclusive)
		exclusive_join(d, s);
	else if (d->active != NULL)
		stand_by(d, s);
	if (s->locks) {
		d->locked_by = s->ep;
		d->nlocks++;
	}
	return 0;
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
	ready_slow_update(s);
}

static void
starved_append(struct dest *d, struct sub *s)
{
	s->starved = true;
	s->ready_slow = true;
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
	if (__builtin_expect(d->policy->expires_ms != 0, 0))
		idle_update(d);
	d->nselective -= s->selector != NULL;
	if (s->standby && s->exclusive)
		standby_unlink(d, s);
	s->standby = false;
	ready_slow_update(s);
	if (s == d->active)
		exclusive_next(d);
	if (s->locks && --d->nlocks == 0)
		d->locked_by = NULL;
	if (s->level != NULL)
		level_leave(d, s);
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

/* s leaves its level's place on the ready list (kept out of line: only
 * queues with consumer priorities have levels). */
static __attribute__((noinline)) void
ready_level_leave(struct sub *s)
{
	if (s->level->ready_tail == s)
		s->level->ready_tail = s->ready_prev != NULL && s->ready_prev->level == s->level ?
		    s->ready_prev : NULL;
}

static inline __attribute__((always_inline)) void
ready_append(struct dest *d, struct sub *s)
{
	s->in_ready = true;
	s->ready_next = NULL;
	s->ready_prev = d->ready_tail;
	if (d->ready_tail)
		d->ready_tail->ready_next = s;
	else
		d->ready_head = s;
	d->ready_tail = s;
}

/* ready_add for a subscriber starved, standing by or on a level. */
static __attribute__((noinline)) void
ready_add_slow(struct dest *d, struct sub *s)
{
	if (s->standby || (s->starved && !unstarve(d, s)))
		return;
	if (s->level != NULL)
		ready_insert_level(d, s);
	else
		ready_append(d, s);
}

/* dest_ready_add and dest_ready_remove, inlined where a message is handed
 * out: the plain case tests two flags, as it did before priorities. */
static inline __attribute__((always_inline)) void
ready_add(struct dest *d, struct sub *s)
{
	if (s->in_ready)
		return;
	if (__builtin_expect(s->ready_slow, 0))
		ready_add_slow(d, s);
	else
		ready_append(d, s);
}

static inline __attribute__((always_inline)) void
ready_remove(struct dest *d, struct sub *s)
{
	if (!s->in_ready)
		return;
	if (__builtin_expect(s->level != NULL, 0))
		ready_level_leave(s);
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

/* Take the first subscriber off the ready list (there is one).  Its level,
 * if it has one, may go on pointing at it: see level_last_ready. */
static inline __attribute__((always_inline)) struct sub *
ready_pop(struct dest *d)
{
	struct sub *s = d->ready_head;
	d->ready_head = s->ready_next;
	if (s->ready_next)
		s->ready_next->ready_prev = NULL;
	else
		d->ready_tail = NULL;
	s->ready_next = NULL;
	s->in_ready = false;
	return s;
}

void
dest_ready_add(struct dest *d, struct sub *s)
{
	ready_add(d, s);
}

void
dest_ready_remove(struct dest *d, struct sub *s)
{
	ready_remove(d, s);
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
		ready_add(d, s);
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
			struct sub *s = ready_pop(d);
			if (!sub_can_take(s))
				continue;
			bool part;
			struct msg *m = find_for(d, s, &part);
			if (m == NULL && s->selector == NULL) {
				ready_add(d, s); /* only expired messages were left */
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
				ready_add(d, s);
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
		struct sub *s = ready_pop(d);
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
			ready_remove(d, s); /* listed before it filled up: as in dispatch */
			continue;
		}
		if (s->selector != NULL && !sub_matches(s, m))
			continue;
		ready_remove(d, s);
		if (deliver(d, s, m) != 0) {
			ready_add(d, s);
			break;
		}
		if (sub_can_take(s))
			ready_add(d, s); /* to the back, in turn */
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
		if (d->policy->max_priority != 0 && m->priority > d->policy->max_priority)
			m->priority = d->policy->max_priority; /* the queue's own is its own copy */
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
	queue->owner->nbound++;
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
	queue->owner->nbound--;
}

void
dest_set_auto_delete(struct dest *queue, bool on)
{
	queue->auto_delete = on;
}

bool
dest_auto_delete(const struct dest *queue)
{
	return queue->auto_delete;
}

void
dest_set_transient(struct dest *queue, bool on)
{
	queue->transient = on;
}

bool
dest_transient(const struct dest *queue)
{
	return queue->transient;
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
	if (m->returns < MSG_RETURNS_MAX) /* max-redeliveries is at most 1,000,000 */
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

/* The levels are in order and counted, and the ready list is in
 * priority order with each level's last ready subscriber known. */
static const char *
check_levels(const struct dest *d)
{
	size_t nprio = 0;
	for (const struct sub *s = d->subs; s != NULL; s = s->dest_next) {
		nprio += s->priority != 0;
		if ((s->level == NULL) != (d->levels == NULL) ||
		    (s->level != NULL && s->level->priority != s->priority))
			return "a subscriber is not on its priority's level";
	}
	if (nprio != d->nprio || (d->levels == NULL) != (nprio == 0))
		return "priorities miscounted";
	for (const struct dest_level *l = d->levels; l != NULL; l = l->lower) {
		size_t n = 0;
		const struct sub *last = NULL;
		if (l->lower != NULL && (l->lower->priority >= l->priority || l->lower->higher != l))
			return "the priority levels are out of order";
		for (const struct sub *s = d->subs; s != NULL; s = s->dest_next)
			n += s->level == l;
		for (const struct sub *s = d->ready_head; s != NULL; s = s->ready_next)
			if (s->level == l)
				last = s;
		if (n == 0 || n != l->nsubs)
			return "a priority level is miscounted";
		if (last != level_last_ready(l))
			return "a priority level has lost its last ready subscriber";
	}
	for (const struct sub *s = d->ready_head; s != NULL && s->ready_next != NULL; s = s->ready_next)
		if (s->priority < s->ready_next->priority)
			return "the ready list is out of priority order";
	return NULL;
}

/* One active exclusive consumer, the others standing by (the exclusive
 * ones in order), and the lock held by one connection's subscriptions. */
static const char *
check_exclusive(const struct dest *d)
{
	size_t nexclusive = 0, nstandby = 0, nlocks = 0;
	for (const struct sub *s = d->subs; s != NULL; s = s->dest_next) {
		nexclusive += s->exclusive;
		nlocks += s->locks;
		if (s->standby != (d->active != NULL && s != d->active))
			return "a subscriber stands by wrongly";
		if (s->standby && (s->in_ready || s->starved))
			return "a subscriber standing by could be given messages";
		if (s->locks && s->ep != d->locked_by)
			return "a lock is held by another connection";
		if (d->locked_by != NULL && s->ep != d->locked_by)
			return "a locked queue has another connection's subscriber";
	}
	if ((d->active != NULL) != (nexclusive > 0) || (d->active != NULL && !d->active->exclusive))
		return "no exclusive consumer is active, or the wrong one";
	const struct sub *prev = NULL;
	for (const struct sub *s = d->standby_head; s != NULL; prev = s, s = s->standby_next) {
		if (!s->standby || !s->exclusive || s->dest != d || s->standby_prev != prev)
			return "standby list broken";
		if (prev != NULL && (prev->priority < s->priority ||
		    (prev->priority == s->priority && prev->seq > s->seq)))
			return "standby list out of order";
		nstandby++;
	}
	if (d->standby_tail != prev || (nexclusive > 0 && nstandby != nexclusive - 1))
		return "standby list miscounted";
	if (nlocks != d->nlocks || (d->locked_by == NULL) != (nlocks == 0))
		return "locks miscounted";
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
		if (s->ready_slow != (s->starved || s->standby || s->level != NULL))
			return "a subscriber's ready_slow is wrong";
		could_take |= sub_can_take(s) && !s->starved && !s->standby;
		nselective += s->selector != NULL;
		nsubs++;
	}
	if (nsubs != d->nsubs || nselective != d->nselective)
		return "subscribers miscounted";
	if ((why = check_levels(d)) != NULL || (why = check_exclusive(d)) != NULL)
		return why;
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
	    d->nfeeds == 0 && d->own_policy == NULL)
		return "an empty destination is kept";
	if (d->fed_by != NULL && (d->kind != DEST_QUEUE || d->fed_by->kind != DEST_TOPIC))
		return "a durable subscription is not a queue fed by a topic";
	if (d->auto_delete && d->nsubs == 0 && d->q.out == 0)
		return "an auto-delete queue outlives its subscribers";
	if (d->holds > 0)
		return "held outside a COMMIT";
	if (d->q.count > 0 && could_take)
		return "messages wait while a subscriber could take one";
	return NULL;
}
