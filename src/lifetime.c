/* lifetime.c - dead letters and the expiry timer (see lifetime.h).
 *
 * A dead message goes to the dead-letter queue of its queue's policy as a
 * copy that says why (x-death-reason), where it was (x-original-destination)
 * and when (x-death-time), under a new message-id.  A dead letter never dies
 * into a dead-letter queue again, and a queue is never its own: either way
 * it is dropped and counted, so nothing can loop.  With the journal, the
 * copy's MSG record and the original's CONSUMED are one BATCH: after a
 * crash the message is in one place or the other, never both or neither. */
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "eft/backend.h"
#include "eft/broker.h"
#include "eft/config.h"
#include "eft/lifetime.h"
#include "eft/log.h"
#include "eft/msg.h"
#include "eft/policy.h"

/* Expired messages are looked for this often; the issue asks for their
 * memory back within a second. */
#define EXPIRY_TICK_MS 100
/* Messages die in chunks of this many, for at most EXPIRY_TURN_US of one
 * loop turn, so that a million expiring at once do not stall the loop: the
 * rest wait for the next turn. */
#define EXPIRY_CHUNK 1024
#define EXPIRY_TURN_US 2000
/* What they free goes back to the message pool and malloc, for the next
 * messages, and beyond message-cache to the system after a while, as after
 * any burst (trim.h): never here, in the middle of it. */

_Static_assert(STAT_DROP_OVERFLOW == STAT_DROP_EXPIRED + DEATH_OVERFLOW,
    "broker.h's dropped reasons follow dest.h's deaths");

static uint64_t
clock_ms(void *arg)
{
	return broker_now_ms(arg);
}

static const struct dest_policy *
policy_of(void *arg, const char *name, size_t len)
{
	const struct broker *b = arg;
	return config_policy(b->cfg, name, len);
}

static void
dead(void *arg, struct dest *d, struct msg *m, enum dest_death why)
{
	struct broker *b = arg;
	const char *dlq_name = dest_policy(d)->dead_letter_queue;
	size_t dlq_len = strlen(dlq_name);
	struct dest *dlq = NULL;
	struct msg *copy = NULL;
	if (dlq_len > 0 && !m->dead && !dest_is(d, dlq_name, dlq_len) &&
	    (dlq = dests_get(&b->dests, dlq_name, dlq_len, DEST_QUEUE)) != NULL) {
		copy = msg_dead_letter(&b->msg_pool, m, b->next_msg_id++, dlq_name, dlq_len,
		    dest_death_name(why), b->dests.hooks.now_ms(b->dests.hooks.arg));
		if (copy == NULL) {
			log_error("out of memory: a message of %s that died (%s) was dropped, not sent "
			    "to %s", dest_name(d), dest_death_name(why), dlq_name);
			dests_release(&b->dests, dlq);
		}
	}
	/* Its death and its dead letter are kept together (one journal record). */
	const struct backend *be = b->backend;
	bool keep = copy != NULL && copy->persistent && be != NULL && dest_temp(dlq) == NULL;
	if (keep || m->kept != NULL) {
		backend_batch_begin(be, 0);
		if (keep && backend_keep(be, dlq, copy) != 0)
			log_error("out of memory: dead letter %llu in %s not stored",
			    (unsigned long long)copy->id, dlq_name);
		if (m->kept != NULL)
			backend_gone(be, m, FATE_DEAD);
		backend_batch_end(be);
	}
	msg_unref(m);
	if (copy == NULL) {
		b->stats.dropped[STAT_DROP_EXPIRED + why]++;
		return;
	}
	b->stats.dead_lettered[why]++;
	if (dest_temp(dlq) == NULL && backend_carries(be, ADDR_QUEUE, dlq_name, dlq_len)) {
		/* In a cluster the dead-letter queue is a clustered queue too. */
		const char *refused;
		if (be->ops->publish(be->impl, ADDR_QUEUE, dlq_name, dlq_len, copy, &refused) != 0) {
			log_error("%s: a dead letter for %s was dropped: %s", be->ops->name, dlq_name,
			    refused);
			b->stats.dead_lettered[why]--;
			b->stats.dropped[STAT_DROP_EXPIRED + why]++;
		}
		msg_unref(copy);
		dests_release(&b->dests, dlq);
		return;
	}
	dest_publish(dlq, copy, &b->stats.dropped[STAT_DROP_NO_MEMORY]);
}

static uint64_t
monotonic_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* A message of a queue that expired unused: the backend forgets it. */
static void
forget_kept(struct msg *m, void *arg)
{
	const struct broker *b = arg;
	if (m->kept != NULL)
		backend_gone(b->backend, m, FATE_DROPPED);
}

/* Queues unused for their x-expires (RabbitMQ's) are deleted with what they
 * hold. */
static void
expire_idle_queues(struct broker *b, uint64_t now)
{
	struct dest *q;
	while ((q = dests_idle_expired(&b->dests, now)) != NULL) {
		log_info("queue %s deleted: unused for its x-expires (%zu message%s dropped)",
		    dest_name(q), dest_depth(q), dest_depth(q) == 1 ? "" : "s");
		struct dest *topic = dest_bound_topic(q);
		dest_purge(q, b->backend != NULL ? forget_kept : NULL, b);
		dests_delete(&b->dests, q);
		if (topic != NULL)
			dests_release(&b->dests, topic);
	}
}

static void
expiry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct broker *b = arg;
	uint64_t now = b->dests.hooks.now_ms(b->dests.hooks.arg), start = monotonic_us();
	if (b->dests.idle_head != NULL)
		expire_idle_queues(b, now);
	bool more;
	while ((more = dests_expire(&b->dests, now, EXPIRY_CHUNK) == EXPIRY_CHUNK) &&
	    monotonic_us() - start < EXPIRY_TURN_US)
		;
	/* The rest after the loop has looked at sockets again: a timer, since
	 * libevent runs an event made active from its own callback again in the
	 * same turn. */
	static const struct timeval now_tv = { 0, 0 };
	if (more)
		evtimer_add(b->expiry_more_ev, &now_tv);
}

int
lifetime_start(struct broker *b)
{
	const struct dests_hooks hooks = {
		.arg = b,
		.now_ms = clock_ms,
		.policy = policy_of,
		.dead = dead,
	};
	if (dests_set_hooks(&b->dests, &hooks) != 0)
		return -1;
	struct timeval tv = { 0, EXPIRY_TICK_MS * 1000 };
	b->expiry_ev = event_new(b->base, -1, EV_PERSIST, expiry_cb, b);
	b->expiry_more_ev = evtimer_new(b->base, expiry_cb, b);
	if (b->expiry_ev == NULL || b->expiry_more_ev == NULL || event_add(b->expiry_ev, &tv) != 0)
		return -1;
	return 0;
}
