/* test_schedule.c - scheduled delivery's parts that need no loop: the cron
 * subset (good and bad entries; next times checked against a minute-by-
 * minute reference built on gmtime_r), the schedule headers of a SEND, the
 * heap's order (random pushes and pops against a sorted copy), the due
 * times schedule_add gives (delay; cron with ActiveMQ's delay and period),
 * the limit, and the admin page's soonest-first order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "eft/cron.h"
#include "eft/frame.h"
#include "eft/msg.h"
#include "eft/schedule.h"

/* ---- cron ---- */

static struct cron
parsed(const char *s)
{
	struct cron c;
	char err[200];
	if (cron_parse(s, strlen(s), &c, err, sizeof(err)) != 0) {
		print_error("'%s': %s\n", s, err);
		fail();
	}
	return c;
}

static uint64_t
utc_ms(int y, int mon, int d, int h, int mi, int s)
{
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mon - 1, .tm_mday = d, .tm_hour = h,
		.tm_min = mi, .tm_sec = s };
	return (uint64_t)timegm(&tm) * 1000;
}

static void
test_cron_parse_errors(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
		"* * * 0 *", "* * * 13 *", "* * * * 8", "a * * * *", "*/0 * * * *", "1- * * * *",
		"5-1 * * * *", "1,,2 * * * *", "1, * * * *", ",1 * * * *", "*/ * * * *", "1/x * * * *",
		"-1 * * * *", "1000 * * * *", "** * * * *", "1-2-3 * * * *", "JAN * * * *",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cron c;
		char err[200] = "";
		if (cron_parse(bad[i], strlen(bad[i]), &c, err, sizeof(err)) == 0) {
			print_error("'%s' should not parse\n", bad[i]);
			fail();
		}
		assert_true(err[0] != '\0');
	}
}

static void
test_cron_parse_fields(void **state)
{
	(void)state;
	struct cron c = parsed("*/15 0,12 1-3 */6 7");
	assert_true(c.minutes == (1ull << 0 | 1ull << 15 | 1ull << 30 | 1ull << 45));
	assert_int_equal(c.hours, 1u << 0 | 1u << 12);
	assert_int_equal(c.days, 1u << 1 | 1u << 2 | 1u << 3);
	assert_int_equal(c.months, 1u << 1 | 1u << 7);
	assert_int_equal(c.weekdays, 1u << 0); /* 7 is Sunday */
	assert_false(c.days_any);
	assert_false(c.weekdays_any);
	c = parsed("  0   9-17/4 * * 1-5 ");
	assert_true(c.minutes == 1);
	assert_int_equal(c.hours, 1u << 9 | 1u << 13 | 1u << 17);
	assert_true(c.days_any);
	assert_int_equal(c.weekdays, 0x3e);
}

static void
test_cron_next_examples(void **state)
{
	(void)state;
	struct cron c = parsed("* * * * *");
	/* The next whole minute, strictly after. */
	assert_true(cron_next(&c, utc_ms(2026, 11, 26, 9, 30, 0)) == utc_ms(2026, 11, 26, 9, 31, 0));
	assert_true(cron_next(&c, utc_ms(2026, 11, 26, 9, 30, 59) + 999) ==
	    utc_ms(2026, 11, 26, 9, 31, 0));
	c = parsed("0 * * * *"); /* ActiveMQ's example: every hour */
	assert_true(cron_next(&c, utc_ms(2026, 11, 26, 9, 30, 0)) == utc_ms(2026, 11, 26, 10, 0, 0));
	assert_true(cron_next(&c, utc_ms(2026, 12, 31, 23, 0, 0)) == utc_ms(2027, 1, 1, 0, 0, 0));
	c = parsed("30 2 29 2 *"); /* leap days only */
	assert_true(cron_next(&c, utc_ms(2026, 11, 26, 0, 0, 0)) == utc_ms(2028, 2, 29, 2, 30, 0));
	c = parsed("0 0 13 * 5"); /* the 13th or a Friday (both restricted: either) */
	assert_true(cron_next(&c, utc_ms(2026, 11, 26, 0, 0, 0)) == utc_ms(2026, 11, 27, 0, 0, 0));
	c = parsed("0 0 * * 5"); /* Fridays only (day-of-month '*') */
	assert_true(cron_next(&c, utc_ms(2026, 11, 27, 0, 0, 0)) == utc_ms(2026, 12, 4, 0, 0, 0));
	c = parsed("0 0 30 2 *"); /* never */
	assert_true(cron_next(&c, utc_ms(2026, 1, 1, 0, 0, 0)) == 0);
}

/* The reference: minute by minute, with the C library's calendar. */
static bool
ref_matches(const struct cron *c, time_t t)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	if (!(c->minutes >> tm.tm_min & 1) || !(c->hours >> tm.tm_hour & 1) ||
	    !(c->months >> (tm.tm_mon + 1) & 1))
		return false;
	bool dom = c->days >> tm.tm_mday & 1, dow = c->weekdays >> tm.tm_wday & 1;
	return c->days_any || c->weekdays_any ? dom && dow : dom || dow;
}

static void
test_cron_next_against_reference(void **state)
{
	(void)state;
	static const char *const entries[] = {
		"* * * * *", "*/7 * * * *", "5,35 */5 * * *", "0 0 1 * *", "59 23 31 * *",
		"0 12 * * 0", "15 3 10-12 3,9 *", "0 0 1 1 *", "*/20 6-8 * 2 1-3", "0 0 15 * 1",
		"1-59/29 1 * 4-6 6", "0 0 31 4 *", /* 31 April: never (within the bound) */
	};
	srand(25);
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
		struct cron c = parsed(entries[i]);
		for (int k = 0; k < 8; k++) {
			uint64_t after = utc_ms(2024 + rand() % 4, 1 + rand() % 12, 1 + rand() % 28,
			    rand() % 24, rand() % 60, rand() % 60) + (uint64_t)(rand() % 1000);
			time_t t = (time_t)(after / 60000 + 1) * 60, limit = t + 400 * 86400;
			while (t < limit && !ref_matches(&c, t))
				t += 60;
			uint64_t got = cron_next(&c, after);
			if (t == limit) {
				assert_true(got == 0 || got > (uint64_t)limit * 1000);
				continue;
			}
			if (got != (uint64_t)t * 1000) {
				print_error("'%s' after %llu: %llu, reference %llu\n", entries[i],
				    (unsigned long long)after, (unsigned long long)got,
				    (unsigned long long)t * 1000);
				fail();
			}
		}
	}
}

/* ---- the headers ---- */

static struct frame
send_frame(struct header *h, size_t n)
{
	struct frame f = { .cmd = CMD_SEND, .hdr = h, .nhdr = n };
	for (int i = 0; i < HDR_COUNT; i++)
		f.known[i] = -1;
	for (size_t i = 0; i < n; i++) {
		h[i].name_len = (uint32_t)strlen(h[i].name);
		h[i].value_len = (uint32_t)strlen(h[i].value);
		h[i].id = frame_hdr_lookup(h[i].name, h[i].name_len);
		if (h[i].id != HDR_OTHER && f.known[h[i].id] < 0)
			f.known[h[i].id] = (int32_t)i;
	}
	return f;
}

static void
test_headers(void **state)
{
	(void)state;
	const uint64_t now = utc_ms(2026, 11, 26, 9, 30, 10);
	struct schedule_spec spec;
	const char *bad;
	char err[400];
	struct header h[] = {
		{ .name = "destination", .value = "/queue/a" },
		{ .name = "AMQ_SCHEDULED_DELAY", .value = "250" },
		{ .name = "AMQ_SCHEDULED_PERIOD", .value = "100" },
		{ .name = "AMQ_SCHEDULED_REPEAT", .value = "3" },
	};
	struct frame f = send_frame(h, 4);
	assert_int_equal(f.known[HDR_SCHEDULED], 1);
	assert_int_equal(schedule_read(&f, now, &spec, &bad, err, sizeof(err)), 0);
	assert_true(spec.delay_ms == 250 && spec.period_ms == 100 && spec.repeat == 3);
	assert_false(spec.has_cron);

	struct header x[] = { { .name = "x-delay", .value = "1500" } };
	f = send_frame(x, 1);
	assert_int_equal(f.known[HDR_SCHEDULED], 0);
	assert_int_equal(schedule_read(&f, now, &spec, &bad, err, sizeof(err)), 0);
	assert_true(spec.delay_ms == 1500);

	struct header c[] = { { .name = "AMQ_SCHEDULED_CRON", .value = "0 * * * *" } };
	f = send_frame(c, 1);
	assert_int_equal(schedule_read(&f, now, &spec, &bad, err, sizeof(err)), 0);
	assert_true(spec.has_cron);

	/* Each bad value: named, and said why. */
	static const struct { const char *name, *value; } wrong[] = {
		{ "AMQ_SCHEDULED_DELAY", "-1" }, { "AMQ_SCHEDULED_DELAY", "soon" },
		{ "AMQ_SCHEDULED_DELAY", "" }, { "AMQ_SCHEDULED_DELAY", "1.5" },
		{ "AMQ_SCHEDULED_DELAY", "99999999999999999999" },
		{ "AMQ_SCHEDULED_DELAY", "316224000001" }, /* over ten years */
		{ "x-delay", "-100" }, { "AMQ_SCHEDULED_PERIOD", "x" },
		{ "AMQ_SCHEDULED_REPEAT", "-1" }, { "AMQ_SCHEDULED_REPEAT", "1000000001" },
		{ "AMQ_SCHEDULED_CRON", "* * *" }, { "AMQ_SCHEDULED_CRON", "0 0 30 2 *" },
	};
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		struct header w[] = {
			{ .name = "AMQ_SCHEDULED_DELAY", .value = "10" },
			{ .name = (char *)wrong[i].name, .value = (char *)wrong[i].value },
		};
		bool second = strcmp(wrong[i].name, "AMQ_SCHEDULED_DELAY") == 0;
		f = send_frame(second ? w + 1 : w, second ? 1 : 2);
		err[0] = '\0';
		assert_int_equal(schedule_read(&f, now, &spec, &bad, err, sizeof(err)), -1);
		assert_string_equal(bad, wrong[i].name);
		assert_non_null(strstr(err, wrong[i].name));
	}
}

/* ---- the heap ---- */

static struct schedule_entry *
entry(uint64_t due, uint64_t id)
{
	struct schedule_entry *e = calloc(1, sizeof(*e));
	assert_non_null(e);
	e->due_ms = due;
	e->id = id;
	return e;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static void
test_heap_order(void **state)
{
	(void)state;
	struct schedule s;
	schedule_init(&s, NULL, NULL, 100000);
	enum { N = 5000 };
	uint64_t *keys = malloc(N * sizeof(*keys)), *sorted = malloc(N * sizeof(*sorted));
	assert_non_null(keys);
	assert_non_null(sorted);
	size_t n = 0, popped = 0;
	srand(7);
	/* Pushes and pops mixed: every pop is the smallest still in. */
	for (int i = 0; i < N; i++) {
		keys[i] = (uint64_t)(rand() % 1000) * 1000 + (uint64_t)i; /* due*1000 + id: distinct */
		assert_int_equal(schedule_heap_push(&s, entry(keys[i] / 1000, keys[i])), 0);
		sorted[n++] = keys[i];
		if (rand() % 3 == 0) {
			qsort(sorted, n, sizeof(*sorted), cmp_u64);
			struct schedule_entry *e = schedule_heap_pop(&s);
			assert_true(e->id == sorted[0]);
			memmove(sorted, sorted + 1, --n * sizeof(*sorted));
			free(e);
			popped++;
		}
	}
	qsort(sorted, n, sizeof(*sorted), cmp_u64);
	assert_int_equal(s.n, n);
	/* The admin page: the soonest, in order, without taking them out. */
	const struct schedule_entry *page[100];
	assert_int_equal(schedule_soonest(&s, page, 100), 100);
	for (size_t i = 0; i < 100; i++)
		assert_true(page[i]->id == sorted[i]);
	assert_int_equal(s.n, n);
	for (size_t i = 0; i < n; i++) {
		struct schedule_entry *e = schedule_heap_pop(&s);
		assert_true(e->id == sorted[i]);
		free(e);
	}
	assert_null(schedule_heap_pop(&s));
	assert_true(popped > 0);
	free(keys);
	free(sorted);
	schedule_fini(&s);
}

/* ---- schedule_add's due times, and the limit ---- */

static struct msg *
message(struct msg_pool *pool, uint64_t id)
{
	struct header h[] = { { .name = "destination", .value = "/queue/a" } };
	struct frame f = send_frame(h, 1);
	f.body = "x";
	f.body_len = 1;
	struct msg_spec spec = { .pool = pool, .frame = &f, .dest = "/queue/a", .dest_len = 8,
		.id = id, .priority = MSG_PRIORITY_DEFAULT };
	struct msg *m = msg_new(&spec);
	assert_non_null(m);
	return m;
}

static uint64_t armed;

static void
arm(void *arg, uint64_t due)
{
	(void)arg;
	armed = due;
}

static void
test_add_due_times_and_limit(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 0);
	struct schedule s;
	schedule_init(&s, NULL, NULL, 3);
	schedule_set_timer(&s, arm, NULL);
	const uint64_t now = utc_ms(2026, 11, 26, 9, 30, 10);
	struct schedule_spec delay = { .delay_ms = 500 };
	assert_int_equal(schedule_add(&s, &delay, message(&pool, 1), "/queue/a", 8, ADDR_QUEUE, now), 0);
	assert_true(schedule_heap_top(&s)->due_ms == now + 500);
	assert_true(armed == now + 500);
	/* cron "0 * * * *" with delay 1000, period 1000, repeat 9 (ActiveMQ's
	 * example): the round starts at the next hour, first delivery a second
	 * after it, ten in the round. */
	struct schedule_spec cron = { .delay_ms = 1000, .period_ms = 1000, .repeat = 9,
		.has_cron = true, .cron = parsed("0 * * * *") };
	assert_int_equal(schedule_add(&s, &cron, message(&pool, 2), "/topic/t", 8, ADDR_TOPIC, now), 0);
	struct schedule_spec sooner = { .delay_ms = 100 };
	assert_int_equal(schedule_add(&s, &sooner, message(&pool, 3), "/queue/b", 8, ADDR_QUEUE, now),
	    0);
	assert_true(armed == now + 100); /* the timer follows the earliest */
	/* Full at max: the caller keeps its message. */
	struct msg *m = message(&pool, 4);
	assert_false(schedule_has_room(&s, 1));
	assert_int_equal(schedule_add(&s, &delay, m, "/queue/a", 8, ADDR_QUEUE, now), SCHEDULE_FULL);
	msg_unref(m);
	const struct schedule_entry *page[3];
	assert_int_equal(schedule_soonest(&s, page, 3), 3);
	assert_true(page[0]->id == 3 && page[1]->id == 1 && page[2]->id == 2);
	assert_true(page[2]->round_ms == utc_ms(2026, 11, 26, 10, 0, 0));
	assert_true(page[2]->due_ms == utc_ms(2026, 11, 26, 10, 0, 1));
	assert_int_equal(page[2]->left, 10);
	assert_int_equal(page[2]->dest_len, 8);
	assert_memory_equal(page[2]->dest, "/topic/t", 8);
	schedule_fini(&s); /* drops what waits */
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cron_parse_errors),
		cmocka_unit_test(test_cron_parse_fields),
		cmocka_unit_test(test_cron_next_examples),
		cmocka_unit_test(test_cron_next_against_reference),
		cmocka_unit_test(test_headers),
		cmocka_unit_test(test_heap_order),
		cmocka_unit_test(test_add_due_times_and_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
