/* schedule.h - scheduled delivery: SENDs that carry ActiveMQ's
 * AMQ_SCHEDULED_DELAY, AMQ_SCHEDULED_PERIOD, AMQ_SCHEDULED_REPEAT and
 * AMQ_SCHEDULED_CRON headers, or RabbitMQ's x-delay, wait here and are
 * published to their destination at their time, once per firing, as a
 * plain SEND would be (route.h).
 *
 * The waiting messages are a min-heap by due time; the broker registers one
 * timer (schedule_set_timer), set to the earliest.  Adding one and firing
 * one cost O(log n); nothing is scanned.  Firings before the last publish
 * a copy under a new message-id; the last publishes the message itself.
 *
 * A persistent one (persistent:true, or persistent-default, with a
 * data-dir) is kept by the backend while it waits (backend.h's schedule:
 * the journal's SCHED record, with the state schedule_state_encode writes)
 * and its state kept again at each firing, in one batch with that
 * firing's delivery; at a start schedule_restore takes it back.  Others
 * are in memory only. */
#ifndef EFT_SCHEDULE_H
#define EFT_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eft/address.h"
#include "eft/cron.h"
#include "eft/frame.h"

struct broker;
struct msg;
struct session;

/* When a SEND asked to be delivered.  Without cron: after delay_ms, then
 * repeat more times every period_ms (repeat + 1 deliveries in all).  With
 * cron (ActiveMQ's combination): each time the cron entry fires, a round of
 * repeat + 1 deliveries, the first delay_ms after it and the rest every
 * period_ms; rounds go on for as long as eftd runs. */
struct schedule_spec {
	uint64_t delay_ms;
	uint64_t period_ms;
	uint32_t repeat;
	bool has_cron;
	struct cron cron;
};

/* The longest delay or period taken (ten years): a due time never overflows. */
#define SCHEDULE_MAX_MS (10ull * 366 * 24 * 3600 * 1000)
/* The most repeats one SEND may ask for. */
#define SCHEDULE_MAX_REPEAT 1000000000u

/* A SEND's schedule headers into *spec.  0: the frame has some and they are
 * good; -1: one is bad, *bad names it and err says why (nothing else read
 * counts).  The caller looks first (frame_get(f, HDR_SCHEDULED)). */
int schedule_read(const struct frame *f, uint64_t now_ms, struct schedule_spec *spec,
    const char **bad, char *err, size_t errlen);

/* One waiting message. */
struct schedule_entry {
	uint64_t due_ms;           /* its next firing, wall clock */
	uint64_t round_ms;         /* cron: when this round's entry fired */
	uint64_t id;               /* the SEND's message-id */
	uint32_t left;             /* firings left (in this round, with cron) */
	struct schedule_spec spec;
	struct msg *m;
	enum address_kind kind;
	size_t size;               /* the message's bytes, for the admin API */
	size_t dest_len;
	char dest[];               /* the SEND's destination, as routed */
};

struct schedule {
	struct schedule_entry **heap;
	size_t n, cap;
	size_t max;                /* max-scheduled-messages */
	uint64_t fired;            /* deliveries published, since start */
	struct broker *b;
	struct session *ss;        /* the broker's session for it, to route through */
	/* The broker's timer: arm(arg, due_ms) sets it to due_ms (replacing
	 * what was set); called whenever the earliest due time changes. */
	void (*arm)(void *arg, uint64_t due_ms);
	void *arm_arg;
	uint64_t armed_ms;         /* what arm was last given (0: nothing) */
};

/* Empty, with room for max messages, firing through session ss of b (the
 * broker's own, made for it).  b and ss may be NULL: the heap alone, in
 * tests. */
void schedule_init(struct schedule *s, struct broker *b, struct session *ss, size_t max);
/* Drop what waits, and free it all (not the session). */
void schedule_fini(struct schedule *s);
void schedule_set_timer(struct schedule *s, void (*arm)(void *arg, uint64_t due_ms), void *arg);

#define SCHEDULE_FULL (-5) /* apart from backend.h's BACKEND_* codes */
/* Hold m (the reference is taken on 0) for a SEND to (name, len) of kind,
 * as spec says, from now_ms.  -1 out of memory, SCHEDULE_FULL at max: the
 * caller keeps the reference. */
int schedule_add(struct schedule *s, const struct schedule_spec *spec, struct msg *m,
    const char *name, size_t len, enum address_kind kind, uint64_t now_ms);
/* Publish everything due at now_ms (at most a bounded number: the timer is
 * set again for the rest), and set the timer for the next. */
void schedule_fire(struct schedule *s, uint64_t now_ms);
/* A scheduled message the backend kept, found at a start: m (the reference
 * is taken on 0) for (name, len), with the state it was kept with.  One
 * whose time passed is due at once.  -1 if the state cannot be read or
 * out of memory. */
int schedule_restore(struct schedule *s, struct msg *m, const char *name, size_t len,
    const void *state, size_t state_len);
/* Can n more be added? */
bool schedule_has_room(const struct schedule *s, size_t n);

/* The heap itself (tests use it directly).  push: -1 if out of memory. */
int schedule_heap_push(struct schedule *s, struct schedule_entry *e);
struct schedule_entry *schedule_heap_pop(struct schedule *s);
/* The earliest, or NULL. */
static inline struct schedule_entry *
schedule_heap_top(const struct schedule *s)
{
	return s->n > 0 ? s->heap[0] : NULL;
}

/* The soonest up to max entries, in due order, into out (an admin page:
 * O(max * max) whatever the number waiting, never on the message path);
 * returns how many, SIZE_MAX if out of memory. */
size_t schedule_soonest(const struct schedule *s, const struct schedule_entry **out, size_t max);

#endif
