/* broker.c - the broker's own state: destinations and their messages,
 * message ids, statistics, the memory limit, and the backend (the journal
 * or the cluster) with what it tells the core.  It knows no connection:
 * the server (server.c) runs connections, flushing and flow control. */
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
#include "eft/lifetime.h"
#include "eft/log.h"
#include "eft/session.h"
#include "eft/store.h"
#include "eft/trim.h"

/* ---- output flushing ---- */

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

struct waiting_list {
	struct broker *b;
	struct waiting_queue *all;
	size_t n, cap;
	bool failed;
};

static void
waiting_add(const char *name, size_t len, uint64_t count, void *arg)
{
	struct waiting_list *wl = arg;
	const struct dest *d = dests_find(&wl->b->dests, name, len);
	if (wl->failed || (d != NULL && dest_kind(d) == DEST_QUEUE))
		return;
	if (wl->n == wl->cap) {
		size_t cap = wl->cap ? 2 * wl->cap : 16;
		struct waiting_queue *all = realloc(wl->all, cap * sizeof(*all));
		if (all == NULL) {
			wl->failed = true;
			return;
		}
		wl->all = all;
		wl->cap = cap;
	}
	wl->all[wl->n++] = (struct waiting_queue){ name, len, count };
}

static int
waiting_cmp_name(const void *a, const void *b)
{
	const struct waiting_queue *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->name, y->name, n);
	return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

struct waiting_queue *
broker_waiting_elsewhere(struct broker *b, size_t *n)
{
	struct waiting_list wl = { .b = b };
	backend_each_waiting(b->backend, waiting_add, &wl);
	if (wl.failed || (wl.all == NULL && (wl.all = malloc(sizeof(*wl.all))) == NULL)) {
		free(wl.all);
		return NULL;
	}
	qsort(wl.all, wl.n, sizeof(*wl.all), waiting_cmp_name);
	*n = wl.n;
	return wl.all;
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

void
broker_set_backend(struct broker *b, const struct backend_ops *ops, void *impl)
{
	b->be = (struct backend){ .ops = ops, .impl = impl };
	b->backend = &b->be;
	b->dests.backend = &b->be;
	b->kept = 0;
}

/* ---- flow control: limits on queues and on memory ---- */

#define PAUSE_CHECK_MS 50

/* Under a load that keeps reaching max-memory the alarm starts and ends
 * about once a second: its first start is logged in full, then a count at
 * most once a minute (issue 23). */
#define MEMORY_LOG_MS 60000

static void
log_memory_summary(const struct broker *b, uint64_t times, uint64_t since_ms)
{
	log_warn("memory limit reached %llu more time%s in the last %llu s (producers waited each "
	    "time until message memory was below 90%% of max-memory); %zu MB held by messages, "
	    "max-memory %zu MB", (unsigned long long)times, times == 1 ? "" : "s",
	    (unsigned long long)(since_ms / 1000), b->msg_pool.live_bytes >> 20, b->max_memory >> 20);
}

/* Out of line: broker_memory_full runs for every SEND. */
static __attribute__((noinline, cold)) void
memory_alarm_start(struct broker *b)
{
	b->memory_alarm = true;
	uint64_t now = broker_now_ms(b);
	uint64_t times = 0, since_ms = now - b->memory_log.last_ms;
	switch (log_every_event(&b->memory_log, now, &times)) {
	case LOG_EVERY_FULL:
		log_warn("memory limit reached: %zu MB held by messages (max-memory %zu MB); "
		    "producers wait until consumers drain it", b->msg_pool.live_bytes >> 20,
		    b->max_memory >> 20);
		b->memory_told = true;
		break;
	case LOG_EVERY_SUMMARY:
		log_memory_summary(b, times, since_ms);
		break;
	case LOG_EVERY_QUIET:
		break;
	}
}

bool
broker_memory_full(struct broker *b)
{
	if (b->msg_pool.live_bytes < b->max_memory)
		return false;
	if (!b->memory_alarm)
		memory_alarm_start(b);
	return true;
}

bool
broker_memory_alarm(struct broker *b)
{
	size_t limit = b->max_memory;
	if (b->memory_alarm && b->msg_pool.live_bytes < limit - limit / 10) {
		b->memory_alarm = false;
		if (b->memory_told)
			log_info("memory below 90%% of max-memory again (%zu MB): producers resume",
			    b->msg_pool.live_bytes >> 20);
		b->memory_told = false;
	}
	return b->memory_alarm;
}

/* ---- memory given back after a burst (trim.h) ---- */

/* Memory's housekeeping: the memory alarm's count, and malloc_trim.
 * Often enough that memory is back within about a second of a drain, and
 * that a long drain's malloc_trim calls come in steps of about
 * TRIM_WHILE_FALLING_BYTES; a look costs a comparison, and a read of
 * /proc/self/statm only when message memory has fallen. */
#define MEMORY_TICK_MS 100

static void
memory_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct broker *b = arg;
	/* The memory alarm's count, when a load stopped reaching the limit. */
	uint64_t now = broker_now_ms(b), since_ms = now - b->memory_log.last_ms;
	uint64_t flaps = log_every_due(&b->memory_log, now);
	if (flaps > 0)
		log_memory_summary(b, flaps, since_ms);
	struct trim *t = &b->trim;
	size_t held = b->msg_pool.live_bytes + b->msg_pool.bytes;
	if (trim_tick(t, held))
		log_debug("memory: malloc_trim took %.1f ms; anonymous RSS %zu MB, was %zu MB; "
		    "message memory %zu MB", t->ms, t->anon_after >> 20, t->anon_before >> 20,
		    held >> 20);
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
	else /* the flush tries again, releases what waited, resumes the producers */
		event_active(b->flush_ev, EV_WRITE, 0);
}

static void
count_durable(const struct dest *d, void *arg)
{
	if (dest_bound_topic(d) != NULL)
		(*(size_t *)arg)++;
}

/* A persistent scheduled message the journal kept, back to the schedule. */
static int
store_scheduled(void *arg, struct msg *m, const char *dest, size_t dest_len, const void *state,
    size_t state_len)
{
	struct broker *b = arg;
	return schedule_restore(&b->sched, m, dest, dest_len, state, state_len);
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
		.scheduled = store_scheduled,
		.scheduled_arg = b,
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
	log_info("journal %s: %u segment%s, %llu MB, %llu records read; %llu message%s back on %llu "
	    "queue%s (%llu redelivered), %llu scheduled; fsync %s, max-disk %llu MB", cfg->data_dir,
	    js->segments, js->segments == 1 ? "" : "s", (unsigned long long)(js->bytes >> 20),
	    (unsigned long long)js->records, (unsigned long long)rec.messages,
	    rec.messages == 1 ? "" : "s", (unsigned long long)rec.queues,
	    rec.queues == 1 ? "" : "s", (unsigned long long)rec.redelivered,
	    (unsigned long long)rec.scheduled, cfg->fsync, (unsigned long long)(st.disk_limit >> 20));
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

/* ---- start and end ---- */


/* Like RabbitMQ's default memory watermark: 40% of physical memory. */
static size_t
broker_default_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || page <= 0)
		return (size_t)1 << 30;
	return (size_t)pages / 10 * 4 * (size_t)page;
}

/* The scheduler's timer (schedule.h), set for the earliest due time. */
static void
sched_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct broker *b = arg;
	schedule_fire(&b->sched, broker_now_ms(b));
}

static void
sched_arm(void *arg, uint64_t due_ms)
{
	struct broker *b = arg;
	uint64_t now = broker_now_ms(b), wait = due_ms > now ? due_ms - now : 0;
	struct timeval tv = { (time_t)(wait / 1000), (suseconds_t)(wait % 1000 * 1000) };
	evtimer_add(b->sched_ev, &tv);
}

int
broker_init(struct broker *b, struct event_base *base, const struct config *cfg)
{
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
	b->memory_log.interval_ms = MEMORY_LOG_MS;
	trim_init(&b->trim, 0);
	if (b->trim.anon_base == 0)
		log_warn("cannot read /proc/self/statm: memory freed after a burst stays with malloc, "
		    "not given back to the system");
	struct timeval tick = { 0, MEMORY_TICK_MS * 1000 };
	b->memory_ev = event_new(base, -1, EV_PERSIST, memory_tick_cb, b);
	if (b->memory_ev == NULL || event_add(b->memory_ev, &tick) != 0)
		return -1;
	b->be_events = (struct backend_events){
		.arg = b,
		.kept = backend_kept,
		.wakeup = backend_wakeup,
		.now_ms = backend_now_ms,
	};
	/* Scheduled messages are routed as a SEND of this session's. */
	b->sched_session = session_new(b, "scheduler", NULL, NULL, NULL);
	if (b->sched_session == NULL || (b->sched_ev = evtimer_new(base, sched_cb, b)) == NULL)
		return -1;
	schedule_init(&b->sched, b, b->sched_session, cfg->max_scheduled_messages);
	schedule_set_timer(&b->sched, sched_arm, b);
	return lifetime_start(b);
}

void
broker_fini(struct broker *b)
{
	store_close(b->store); /* while the messages it keeps are alive */
	b->store = NULL;
	schedule_fini(&b->sched); /* the journal keeps the persistent ones */
	session_free(b->sched_session);
	if (b->sched_ev)
		event_free(b->sched_ev);
	b->backend = b->dests.backend = NULL;
	dests_free(&b->dests);
	if (b->store_ev)
		event_free(b->store_ev);
	if (b->expiry_ev)
		event_free(b->expiry_ev);
	if (b->expiry_more_ev)
		event_free(b->expiry_more_ev);
	if (b->memory_ev)
		event_free(b->memory_ev);
	msg_pool_drain(&b->msg_pool);
	auth_free(b->auth);
}
