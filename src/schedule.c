/* schedule.c - scheduled delivery (see schedule.h): the schedule headers,
 * the heap of waiting messages, and their firing through route.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eft/address.h"
#include "eft/backend.h"
#include "eft/broker.h"
#include "eft/le.h"
#include "eft/log.h"
#include "eft/msg.h"
#include "eft/route.h"
#include "eft/schedule.h"

/* Firings per call of schedule_fire, so that a million due at once do
 * not stall the loop: the rest go on next turn. */
#define FIRE_CHUNK 1024

/* ---- the headers ---- */

/* A header that must be a number of at most max: 0, or -1 with err. */
static int
read_number(const struct header *h, uint64_t max, uint64_t *out, char *err, size_t errlen)
{
	if (frame_parse_u64(h->value, h->value_len, out) != 0 || *out > max) {
		snprintf(err, errlen, "%.*s must be a whole number from 0 to %llu; got '%.*s'.",
		    (int)h->name_len, h->name, (unsigned long long)max,
		    (int)(h->value_len > 100 ? 100 : h->value_len), h->value);
		return -1;
	}
	return 0;
}

int
schedule_read(const struct frame *f, uint64_t now_ms, struct schedule_spec *spec,
    const char **bad, char *err, size_t errlen)
{
	static const char *const names[] = { "AMQ_SCHEDULED_DELAY", "x-delay",
		"AMQ_SCHEDULED_PERIOD", "AMQ_SCHEDULED_REPEAT", "AMQ_SCHEDULED_CRON" };
	memset(spec, 0, sizeof(*spec));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct header *h = frame_find(f, names[i]);
		if (h == NULL)
			continue;
		*bad = names[i];
		uint64_t n = 0;
		switch (i) {
		case 0:
		case 1:
			if (read_number(h, SCHEDULE_MAX_MS, &n, err, errlen) != 0)
				return -1;
			if (i == 0 || spec->delay_ms == 0)
				spec->delay_ms = n; /* AMQ_SCHEDULED_DELAY wins over x-delay */
			break;
		case 2:
			if (read_number(h, SCHEDULE_MAX_MS, &spec->period_ms, err, errlen) != 0)
				return -1;
			break;
		case 3:
			if (read_number(h, SCHEDULE_MAX_REPEAT, &n, err, errlen) != 0)
				return -1;
			spec->repeat = (uint32_t)n;
			break;
		default: {
			char why[160];
			if (cron_parse(h->value, h->value_len, &spec->cron, why, sizeof(why)) != 0) {
				snprintf(err, errlen, "AMQ_SCHEDULED_CRON '%.*s': %s (five fields: minute "
				    "hour day-of-month month day-of-week, in UTC).",
				    (int)(h->value_len > 100 ? 100 : h->value_len), h->value, why);
				return -1;
			}
			if (cron_next(&spec->cron, now_ms) == 0) {
				snprintf(err, errlen, "AMQ_SCHEDULED_CRON '%.*s' matches no time in the "
				    "next eight years.", (int)(h->value_len > 100 ? 100 : h->value_len),
				    h->value);
				return -1;
			}
			spec->has_cron = true;
		}
		}
	}
	*bad = NULL;
	return 0;
}

/* ---- the heap ---- */

static inline bool
earlier(const struct schedule_entry *a, const struct schedule_entry *b)
{
	/* Equal times in the order they were sent. */
	return a->due_ms < b->due_ms || (a->due_ms == b->due_ms && a->id < b->id);
}

static void
sift_up(struct schedule_entry **h, size_t i)
{
	struct schedule_entry *e = h[i];
	while (i > 0 && earlier(e, h[(i - 1) / 2])) {
		h[i] = h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h[i] = e;
}

static void
sift_down(struct schedule_entry **h, size_t n, size_t i)
{
	struct schedule_entry *e = h[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && earlier(h[c + 1], h[c]))
			c++;
		if (!earlier(h[c], e))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = e;
}

int
schedule_heap_push(struct schedule *s, struct schedule_entry *e)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct schedule_entry **h = realloc(s->heap, cap * sizeof(*h));
		if (h == NULL)
			return -1;
		s->heap = h;
		s->cap = cap;
	}
	s->heap[s->n] = e;
	sift_up(s->heap, s->n++);
	return 0;
}

struct schedule_entry *
schedule_heap_pop(struct schedule *s)
{
	if (s->n == 0)
		return NULL;
	struct schedule_entry *top = s->heap[0];
	s->heap[0] = s->heap[--s->n];
	if (s->n > 0)
		sift_down(s->heap, s->n, 0);
	return top;
}

/* ---- the schedule ---- */

void
schedule_init(struct schedule *s, struct broker *b, struct session *ss, size_t max)
{
	memset(s, 0, sizeof(*s));
	s->b = b;
	s->ss = ss;
	s->max = max;
}

void
schedule_fini(struct schedule *s)
{
	struct schedule_entry *e;
	while ((e = schedule_heap_pop(s)) != NULL) {
		if (e->m != NULL)
			msg_unref(e->m);
		free(e);
	}
	free(s->heap);
	memset(s, 0, sizeof(*s));
}

void
schedule_set_timer(struct schedule *s, void (*arm)(void *arg, uint64_t due_ms), void *arg)
{
	s->arm = arm;
	s->arm_arg = arg;
}

/* Set the timer for the earliest, if that changed. */
static void
rearm(struct schedule *s)
{
	uint64_t due = s->n > 0 ? s->heap[0]->due_ms : 0;
	if (due == s->armed_ms || s->arm == NULL)
		return;
	s->armed_ms = due;
	if (due != 0)
		s->arm(s->arm_arg, due);
}

/* ---- what the backend keeps ---- */

/* The state of an entry, as kept beside its message (version 1, 72 bytes,
 * little-endian): u8 version, u8 address kind, u8 has cron, u8 cron flags
 * (1: day-of-month '*', 2: day-of-week '*'), u32 firings left, u32
 * repeat, u32 0, u64 due, u64 round, u64 delay, u64 period, u64 cron
 * minutes, u32 hours, u32 days, u16 months, u8 weekdays, u8 0, u32 0. */
#define STATE_VERSION 1
#define STATE_LEN 72

static void
state_encode(const struct schedule_entry *e, uint8_t *p)
{
	const struct schedule_spec *sp = &e->spec;
	memset(p, 0, STATE_LEN);
	p[0] = STATE_VERSION;
	p[1] = (uint8_t)e->kind;
	p[2] = sp->has_cron;
	p[3] = (uint8_t)(sp->cron.days_any | sp->cron.weekdays_any << 1);
	le_put32(p + 4, e->left);
	le_put32(p + 8, sp->repeat);
	le_put64(p + 16, e->due_ms);
	le_put64(p + 24, e->round_ms);
	le_put64(p + 32, sp->delay_ms);
	le_put64(p + 40, sp->period_ms);
	le_put64(p + 48, sp->cron.minutes);
	le_put32(p + 56, sp->cron.hours);
	le_put32(p + 60, sp->cron.days);
	le_put16(p + 64, sp->cron.months);
	p[66] = sp->cron.weekdays;
}

static bool
persistent(const struct schedule *s, const struct schedule_entry *e)
{
	return e->m->persistent && s->b != NULL && s->b->backend != NULL &&
	    s->b->backend->ops->schedule != NULL;
}

/* Keep e's message and state in the backend (again): -1 if out of memory. */
static int
keep(struct schedule *s, const struct schedule_entry *e)
{
	uint8_t state[STATE_LEN];
	state_encode(e, state);
	const struct backend *be = s->b->backend;
	return be->ops->schedule(be->impl, e->m, e->dest, e->dest_len, state, sizeof(state));
}

int
schedule_restore(struct schedule *s, struct msg *m, const char *name, size_t len,
    const void *state, size_t state_len)
{
	const uint8_t *p = state;
	if (state_len != STATE_LEN || p[0] != STATE_VERSION || p[1] > ADDR_TOPIC || p[2] > 1 ||
	    le_get32(p + 4) == 0)
		return -1;
	struct schedule_entry *e = malloc(sizeof(*e) + len);
	if (e == NULL)
		return -1;
	*e = (struct schedule_entry){
		.kind = (enum address_kind)p[1],
		.left = le_get32(p + 4),
		.due_ms = le_get64(p + 16),
		.round_ms = le_get64(p + 24),
		.id = m->id,
		.m = m,
		.size = m->size,
		.dest_len = len,
		.spec = {
			.has_cron = p[2],
			.repeat = le_get32(p + 8),
			.delay_ms = le_get64(p + 32),
			.period_ms = le_get64(p + 40),
			.cron = {
				.minutes = le_get64(p + 48),
				.hours = le_get32(p + 56),
				.days = le_get32(p + 60),
				.months = le_get16(p + 64),
				.weekdays = p[66],
				.days_any = p[3] & 1,
				.weekdays_any = (p[3] & 2) != 0,
			},
		},
	};
	memcpy(e->dest, name, len);
	if (schedule_heap_push(s, e) != 0) {
		free(e);
		return -1;
	}
	rearm(s);
	return 0;
}

bool
schedule_has_room(const struct schedule *s, size_t n)
{
	return s->n + n <= s->max;
}

static inline uint64_t
add_ms(uint64_t a, uint64_t b)
{
	return a < UINT64_MAX - b ? a + b : UINT64_MAX - 1;
}

int
schedule_add(struct schedule *s, const struct schedule_spec *spec, struct msg *m, const char *name,
    size_t len, enum address_kind kind, uint64_t now_ms)
{
	if (!schedule_has_room(s, 1))
		return SCHEDULE_FULL;
	struct schedule_entry *e = malloc(sizeof(*e) + len);
	if (e == NULL)
		return -1;
	e->spec = *spec;
	e->round_ms = spec->has_cron ? cron_next(&spec->cron, now_ms) : now_ms;
	e->due_ms = add_ms(e->round_ms, spec->delay_ms);
	e->left = spec->repeat + 1;
	e->id = m->id;
	e->m = m;
	e->kind = kind;
	e->size = m->size;
	e->dest_len = len;
	memcpy(e->dest, name, len);
	if (e->round_ms == 0 || (persistent(s, e) && keep(s, e) != 0)) {
		free(e);
		return -1;
	}
	if (schedule_heap_push(s, e) != 0) {
		if (e->m->kept != NULL)
			s->b->backend->ops->unschedule(s->b->backend->impl, e->m);
		free(e);
		return -1;
	}
	rearm(s);
	return 0;
}

/* After a firing of e at now_ms: its next due time, or false when it is
 * done.  A cron entry's next round starts after the later of this round's
 * last delivery and now: rounds missed while eftd was down are not made up. */
static bool
advance(struct schedule_entry *e, uint64_t now_ms)
{
	if (--e->left > 0) {
		e->due_ms = add_ms(e->due_ms, e->spec.period_ms);
		return true;
	}
	if (!e->spec.has_cron)
		return false;
	uint64_t last = e->due_ms > e->round_ms ? e->due_ms : e->round_ms;
	uint64_t next = cron_next(&e->spec.cron, last > now_ms ? last : now_ms);
	if (next == 0)
		return false;
	e->round_ms = next;
	e->due_ms = add_ms(next, e->spec.delay_ms);
	e->left = e->spec.repeat + 1;
	return true;
}

/* One delivery of e: a copy under a new message-id, or e's message on its
 * last firing. */
static void
publish(struct schedule *s, struct schedule_entry *e, bool last)
{
	struct broker *b = s->b;
	struct msg *m = last ? e->m : msg_clone(&b->msg_pool, e->m, b->next_msg_id++);
	if (last)
		e->m = NULL;
	if (m == NULL || route_send(s->ss, e->dest, e->dest_len, e->kind, m, NULL) != 0) {
		if (m != NULL)
			msg_unref(m);
		b->stats.dropped[STAT_DROP_NO_MEMORY]++;
		log_error("out of memory: a scheduled delivery of message %llu to %.*s was dropped",
		    (unsigned long long)e->id, (int)(e->dest_len > 200 ? 200 : e->dest_len), e->dest);
		return;
	}
	s->fired++;
}

void
schedule_fire(struct schedule *s, uint64_t now_ms)
{
	s->armed_ms = 0; /* the timer went off */
	for (int i = 0; i < FIRE_CHUNK && s->n > 0 && s->heap[0]->due_ms <= now_ms; i++) {
		struct schedule_entry *e = s->heap[0];
		bool again = advance(e, now_ms);
		/* Kept: the new state (or its end) and this delivery are one
		 * batch, so that after a crash it happened once or not at all. */
		const struct backend *be = e->m->kept != NULL ? s->b->backend : NULL;
		if (be != NULL) {
			backend_batch_begin(be, 0);
			if (!again)
				be->ops->unschedule(be->impl, e->m);
			else if (keep(s, e) != 0)
				log_error("out of memory: the state of scheduled message %llu was not "
				    "kept: after a restart it is delivered again from its last kept "
				    "state", (unsigned long long)e->id);
		}
		publish(s, e, !again);
		if (be != NULL)
			backend_batch_end(be);
		if (again) {
			sift_down(s->heap, s->n, 0);
			continue;
		}
		schedule_heap_pop(s);
		free(e);
	}
	rearm(s);
}

/* ---- the admin page ---- */

size_t
schedule_soonest(const struct schedule *s, const struct schedule_entry **out, size_t max)
{
	/* The max smallest of a heap: a list of candidates, starting with the
	 * root; each one taken adds its children (at most max + 1 wait). */
	if (max == 0 || s->n == 0)
		return 0;
	size_t *cand = malloc((max + 2) * sizeof(*cand)), nc = 0, k = 0;
	if (cand == NULL)
		return SIZE_MAX;
	cand[nc++] = 0;
	while (k < max && nc > 0) {
		size_t best = 0;
		for (size_t i = 1; i < nc; i++) /* at most max + 1: a page, not the heap */
			if (earlier(s->heap[cand[i]], s->heap[cand[best]]))
				best = i;
		size_t at = cand[best];
		cand[best] = cand[--nc];
		out[k++] = s->heap[at];
		for (size_t c = 2 * at + 1; c <= 2 * at + 2 && c < s->n; c++)
			cand[nc++] = c;
	}
	free(cand);
	return k;
}
