/* broker.c - what the broker as a whole owns: destinations, connections,
 * listeners, flow control (queue and memory limits), the output flush once
 * per loop turn, and starting and stopping.  Destinations themselves are in
 * dest.c, connections in conn.c, accepting in listener.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/time.h>

#include <event2/event.h>

#include "eft/auth.h"
#include "eft/broker.h"
#include "eft/cluster.h"
#include "eft/conn.h"
#include "eft/hold.h"
#include "eft/http.h"
#include "eft/listener.h"
#include "eft/lifetime.h"
#include "eft/log.h"
#include "eft/policy.h"
#include "eft/store.h"
#include "eft/tls.h"

/* ---- output flushing ---- */

void
broker_want_flush(struct broker *b, struct conn *c)
{
	if (c->in_flush)
		return;
	c->in_flush = true;
	c->flush_prev = NULL;
	c->flush_next = b->flush_head;
	if (b->flush_head)
		b->flush_head->flush_prev = c;
	b->flush_head = c;
	event_active(b->flush_ev, EV_WRITE, 0);
}

void
broker_flush_remove(struct broker *b, struct conn *c)
{
	if (!c->in_flush)
		return;
	if (c->flush_prev)
		c->flush_prev->flush_next = c->flush_next;
	else
		b->flush_head = c->flush_next;
	if (c->flush_next)
		c->flush_next->flush_prev = c->flush_prev;
	c->flush_prev = c->flush_next = NULL;
	c->in_flush = false;
}

uint64_t
broker_now_ms(const struct broker *b)
{
	struct timeval tv;
	event_base_gettimeofday_cached(b->base, &tv);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

bool
broker_commit(struct broker *b)
{
	const struct backend *be = b->backend;
	if (be == NULL || be->ops->flush == NULL)
		return true;
	return be->ops->flush(be->impl, broker_now_ms(b), b->next_msg_id) == 0;
}

uint64_t
broker_promised(const struct broker *b)
{
	return b->backend != NULL ? backend_promised(b->backend) : 0;
}

enum backend_pressure
broker_pressure(struct broker *b)
{
	return b->backend != NULL ? backend_pressure(b->backend) : BACKEND_OK;
}

bool
broker_backend_stats(const struct broker *b, struct backend_stats *out)
{
	*out = (struct backend_stats){ 0 };
	if (b->backend == NULL || b->backend->ops->stats == NULL)
		return false;
	b->backend->ops->stats(b->backend->impl, out);
	return true;
}

/* ---- what the backend tells the core ---- */

static void
backend_kept(void *arg, uint64_t kept)
{
	struct broker *b = arg;
	b->kept = kept;
	if (!b->flushing)
		event_active(b->flush_ev, EV_WRITE, 0); /* release what waited for it */
}

static void
backend_wakeup(void *arg)
{
	struct broker *b = arg;
	event_active(b->flush_ev, EV_WRITE, 0);
}

static uint64_t
backend_now_ms(void *arg)
{
	return broker_now_ms(arg);
}

static void
backend_each_unacked(void *arg, void (*fn)(const struct msg *m, void *fnarg), void *fnarg)
{
	const struct broker *b = arg;
	for (const struct conn *c = b->conns; c != NULL; c = c->next)
		for (const struct delivery *dl = c->session.ep.deliveries; dl != NULL;
		    dl = dl->hh.next)
			fn(dl->msg, fnarg);
}

void
broker_set_backend(struct broker *b, const struct backend_ops *ops, void *impl)
{
	b->be = (struct backend){ .ops = ops, .impl = impl };
	b->backend = &b->be;
	b->dests.backend = &b->be;
	b->kept = 0;
	b->kept_released = 0;
}

void
broker_hold(struct broker *b, struct conn *c)
{
	if (c->held)
		return;
	c->held = true;
	c->held_prev = NULL;
	c->held_next = b->held;
	if (b->held)
		b->held->held_prev = c;
	b->held = c;
}

void
broker_unhold(struct broker *b, struct conn *c)
{
	if (!c->held)
		return;
	if (c->held_prev)
		c->held_prev->held_next = c->held_next;
	else
		b->held = c->held_next;
	if (c->held_next)
		c->held_next->held_prev = c->held_prev;
	c->held_prev = c->held_next = NULL;
	c->held = false;
}

/* The backend kept more since the last look: the connections whose first
 * hold it reached write this turn (conn_flush releases their holds). */
static void
release_held(struct broker *b)
{
	b->kept_released = b->kept;
	for (struct conn *c = b->held; c != NULL; c = c->held_next)
		if (hold_first_seq(&c->holds) <= b->kept)
			broker_want_flush(b, c);
}

void
broker_flush(struct broker *b)
{
	/* Group commit: one write (and fsync) for the turn, before the RECEIPTs
	 * that wait for it.  If it fails, they go on waiting (held), and the
	 * rest of every connection's output is written all the same. */
	b->flushing = true;
	broker_commit(b);
	b->flushing = false;
	if (b->held != NULL && b->kept != b->kept_released)
		release_held(b);
	while (b->flush_head != NULL) {
		struct conn *c = b->flush_head;
		broker_flush_remove(b, c);
		conn_flush(c);
	}
	if (b->paused != NULL)
		broker_check_paused(b);
}

/* Runs after the callbacks of one loop turn: one write per connection for
 * everything the turn produced. */
static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	broker_flush(arg);
}

/* ---- flow control: limits on queues and on memory ---- */

#define PAUSE_CHECK_MS 50

bool
broker_memory_full(struct broker *b)
{
	if (b->msg_pool.live_bytes < b->max_memory)
		return false;
	if (!b->memory_alarm) {
		b->memory_alarm = true;
		log_warn("memory limit reached: %zu MB held by messages (max-memory %zu MB); "
		    "producers wait until consumers drain it", b->msg_pool.live_bytes >> 20,
		    b->max_memory >> 20);
	}
	return true;
}

/* Hysteresis: resume below 90% of a limit, so producers do not flap. */
static bool
below(size_t value, size_t limit)
{
	return limit == 0 || value < limit - limit / 10;
}

static bool
may_resume(struct broker *b, const struct conn *c)
{
	/* A failing backend does not keep producers waiting: their SENDs that
	 * need it are refused with an ERROR, the others go on. */
	enum backend_pressure p = broker_pressure(b);
	if (b->memory_alarm || p == BACKEND_BUSY)
		return false;
	if (p == BACKEND_OK && conn_held_full(c))
		return false;
	const struct dest *d = c->paused_on;
	/* If any destination was freed since, paused_on may be gone: resume, and
	 * the next SEND to a still-full queue pauses again. */
	if (d == NULL || c->paused_gen != b->dests.freed)
		return true;
	const struct dest_policy *pol = dest_policy(d);
	return below(dest_depth(d), pol->max_queue_messages) &&
	    below(dest_bytes(d), pol->max_queue_bytes);
}

size_t
broker_paused_count(const struct broker *b)
{
	size_t n = 0;
	for (const struct conn *c = b->paused; c != NULL; c = c->paused_next)
		n++;
	return n;
}

void
broker_check_paused(struct broker *b)
{
	if (b->memory_alarm && below(b->msg_pool.live_bytes, b->max_memory)) {
		b->memory_alarm = false;
		log_info("memory below 90%% of max-memory again (%zu MB): producers resume",
		    b->msg_pool.live_bytes >> 20);
	}
	broker_pressure(b); /* ends a backend's alarm when it is over */
	/* Take the list: resuming runs buffered frames, which may pause again. */
	struct conn *list = b->paused;
	b->paused = NULL;
	while (list != NULL) {
		struct conn *c = list;
		list = c->paused_next;
		c->paused_next = NULL;
		if (may_resume(b, c)) {
			conn_resume(c);
		} else {
			c->paused_next = b->paused;
			b->paused = c;
		}
	}
	if (b->paused != NULL)
		broker_paused_added(b);
}

static void
paused_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	broker_check_paused(arg);
}

void
broker_paused_added(struct broker *b)
{
	if (b->paused_ev == NULL || evtimer_pending(b->paused_ev, NULL))
		return;
	struct timeval tv = { 0, PAUSE_CHECK_MS * 1000 };
	evtimer_add(b->paused_ev, &tv);
}

/* ---- the journal ---- */

#define STORE_TICK_MS 200

/* Every STORE_TICK_MS: everysec's fsync; after a failed write, try again,
 * and when it works let every connection write what waited. */
static void
store_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct broker *b = arg;
	if (!store_failing(b->store))
		store_tick(b->store, broker_now_ms(b)); /* a failure is logged there */
	else
		broker_flush(b); /* writes, releases what waited, resumes the producers */
}

static void
count_durable(const struct dest *d, void *arg)
{
	if (dest_bound_topic(d) != NULL)
		(*(size_t *)arg)++;
}

int
broker_open_store(struct broker *b, char *err, size_t errlen)
{
	const struct config *cfg = b->cfg;
	struct store_options opt = {
		.dir = cfg->data_dir,
		.fsync = strcmp(cfg->fsync, "always") == 0 ? JOURNAL_FSYNC_ALWAYS :
		    strcmp(cfg->fsync, "no") == 0 ? JOURNAL_FSYNC_NO : JOURNAL_FSYNC_EVERYSEC,
		.recover = cfg->recover,
		.segment_size = cfg->journal_segment_size,
		.max_disk = cfg->max_disk,
	};
	struct store_recovered rec;
	b->store = store_open(&opt, &b->dests, &b->msg_pool, &b->next_msg_id, &rec, err, errlen);
	if (b->store == NULL)
		return -1;
	broker_set_backend(b, &store_backend_ops, b->store);
	store_set_events(b->store, &b->be_events);
	dests_foreach(&b->dests, count_durable, &b->durables);
	struct timeval tv = { 0, STORE_TICK_MS * 1000 };
	b->store_ev = event_new(b->base, -1, EV_PERSIST, store_tick_cb, b);
	if (b->store_ev == NULL || event_add(b->store_ev, &tv) != 0) {
		snprintf(err, errlen, "cannot start the journal timer");
		return -1;
	}
	struct backend_stats st = { 0 };
	store_backend_ops.stats(b->store, &st);
	const struct journal_open_stats *js = &rec.journal;
	if (js->torn_bytes > 0)
		log_warn("journal: cut %llu bytes of a record torn by a crash off the end",
		    (unsigned long long)js->torn_bytes);
	if (js->skipped > 0)
		log_warn("journal: --recover skipped %llu damaged record%s",
		    (unsigned long long)js->skipped, js->skipped == 1 ? "" : "s");
	log_info("journal %s: %u segment%s, %llu MB, %llu records read; %llu message%s back on %llu "
	    "queue%s (%llu redelivered); fsync %s, max-disk %llu MB", cfg->data_dir, js->segments,
	    js->segments == 1 ? "" : "s", (unsigned long long)(js->bytes >> 20),
	    (unsigned long long)js->records, (unsigned long long)rec.messages,
	    rec.messages == 1 ? "" : "s", (unsigned long long)rec.queues,
	    rec.queues == 1 ? "" : "s", (unsigned long long)rec.redelivered, cfg->fsync,
	    (unsigned long long)(st.disk_limit >> 20));
	return 0;
}

int
broker_start_cluster(struct broker *b, char *err, size_t errlen)
{
	struct backend_env env = {
		.base = b->base,
		.cfg = b->cfg,
		.dests = &b->dests,
		.pool = &b->msg_pool,
		.next_msg_id = &b->next_msg_id,
		.dropped_no_memory = &b->stats.dropped[STAT_DROP_NO_MEMORY],
		.dropped_reply_owner_gone = &b->stats.dropped[STAT_DROP_REPLY_OWNER_GONE],
		.events = &b->be_events,
	};
	b->cluster = cluster_start(&env, err, errlen);
	if (b->cluster == NULL)
		return -1;
	broker_set_backend(b, &cluster_backend_ops, b->cluster);
	return 0;
}

void
broker_stop_cluster(struct broker *b)
{
	if (b->cluster == NULL)
		return;
	cluster_stop(b->cluster);
	b->cluster = NULL;
	b->backend = NULL;
	b->dests.backend = NULL;
}

/* ---- life cycle ---- */

static void
stop_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct broker *b = arg;
	log_warn("%zu connections still open at the end of the shutdown grace period; "
	    "closing them", b->nconns + b->refusing);
	event_base_loopexit(b->base, NULL);
}

void
broker_shutdown(struct broker *b, unsigned grace_ms)
{
	b->stopping = true;
	http_server_free(b->http);
	b->http = NULL;
	while (b->listeners != NULL) {
		struct listener *l = b->listeners;
		b->listeners = l->next;
		listener_close(l);
	}
	/* No message moves to another connection while they all close: what a
	 * subscriber had goes back to its queue and stays there. */
	for (struct conn *c = b->conns; c != NULL; c = c->next)
		c->session.ep.blocked = true;
	for (struct conn *c = b->conns, *next; c != NULL; c = next) {
		next = c->next;
		conn_shutdown(c);
	}
	if (b->conns == NULL) {
		event_base_loopexit(b->base, NULL);
		return;
	}
	struct timeval tv = { .tv_sec = grace_ms / 1000, .tv_usec = (grace_ms % 1000) * 1000 };
	if (b->stop_ev == NULL || evtimer_add(b->stop_ev, &tv) != 0)
		event_base_loopexit(b->base, NULL);
}

void
broker_close_all(struct broker *b)
{
	while (b->conns != NULL)
		conn_free(b->conns);
}


/* Like RabbitMQ's default memory watermark: 40% of physical memory. */
static size_t
broker_default_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || page <= 0)
		return (size_t)1 << 30;
	return (size_t)pages / 10 * 4 * (size_t)page;
}

struct broker *
broker_new(struct event_base *base, const struct config *cfg)
{
	struct broker *b = calloc(1, sizeof(*b));
	if (b == NULL)
		return NULL;
	b->base = base;
	b->cfg = cfg;
	b->next_msg_id = 1;
	b->dests.next_sub_seq = 1;
	b->next_session = 1;
	struct timeval now;
	gettimeofday(&now, NULL);
	b->started_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_usec / 1000;
	msg_pool_init(&b->msg_pool, cfg->message_cache);
	b->max_memory = cfg->max_memory ? cfg->max_memory : broker_default_memory();
	b->max_conns = SIZE_MAX;
	b->be_events = (struct backend_events){
		.arg = b,
		.kept = backend_kept,
		.wakeup = backend_wakeup,
		.now_ms = backend_now_ms,
		.each_unacked = backend_each_unacked,
	};
	b->flush_ev = event_new(base, -1, 0, flush_cb, b);
	b->paused_ev = evtimer_new(base, paused_cb, b);
	b->stop_ev = evtimer_new(base, stop_timeout_cb, b);
	if (b->flush_ev == NULL || b->paused_ev == NULL || b->stop_ev == NULL ||
	    lifetime_start(b) != 0) {
		broker_free(b);
		return NULL;
	}
	return b;
}

void
broker_free(struct broker *b)
{
	if (b == NULL)
		return;
	while (b->listeners != NULL) {
		struct listener *l = b->listeners;
		b->listeners = l->next;
		listener_close(l);
	}
	http_server_free(b->http);
	broker_close_all(b);
	store_close(b->store); /* while the messages it keeps are alive */
	b->backend = b->dests.backend = NULL;
	dests_free(&b->dests);
	if (b->flush_ev)
		event_free(b->flush_ev);
	if (b->paused_ev)
		event_free(b->paused_ev);
	if (b->stop_ev)
		event_free(b->stop_ev);
	if (b->store_ev)
		event_free(b->store_ev);
	if (b->expiry_ev)
		event_free(b->expiry_ev);
	if (b->expiry_more_ev)
		event_free(b->expiry_more_ev);
	msg_pool_drain(&b->msg_pool);
	auth_free(b->auth);
	tls_server_free(b->tls);
	free(b);
}

int
broker_listen(struct broker *b, char *err, size_t errlen)
{
	const struct config *cfg = b->cfg;
	struct listener **tail = &b->listeners;
	for (size_t i = 0; i < cfg->nlisten; i++) {
		const struct config_listen *where = &cfg->listen[i];
		if (config_listen_is_http(where)) {
			if (b->http == NULL && (b->http = http_server_new(b)) == NULL) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			if (http_server_bind(b->http, where, err, errlen) != 0)
				return -1;
			continue;
		}
		bool tls = strcmp(where->scheme, "tls") == 0 || strcmp(where->scheme, "wss") == 0;
		if (tls && b->tls == NULL && (b->tls = tls_server_new(cfg, err, errlen)) == NULL)
			return -1;
		struct listener *l = listener_open(b, where, tls ? b->tls : NULL, err, errlen);
		if (l == NULL)
			return -1;
		l->idx = (unsigned)i;
		*tail = l;
		tail = &l->next;
	}
	return 0;
}
