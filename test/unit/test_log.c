/* test_log.c - unit tests for log.c's rate limit of repeated events
 * (log_every): the first in full, then a count at most once per interval,
 * and in full again after a quiet interval. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "eft/log.h"

#define MINUTE 60000

static void
test_first_in_full_then_a_count_a_minute(void **state)
{
	(void)state;
	struct log_every r = { .interval_ms = MINUTE };
	uint64_t n = 0, t = 1000000;
	assert_int_equal(log_every_event(&r, t, &n), LOG_EVERY_FULL);
	/* Once a second for a minute and a half: quiet, then one summary. */
	int summaries = 0;
	uint64_t counted = 0;
	for (int i = 1; i <= 90; i++) {
		enum log_every_verdict v = log_every_event(&r, t + 1000u * (uint64_t)i, &n);
		assert_int_not_equal(v, LOG_EVERY_FULL);
		if (v == LOG_EVERY_SUMMARY) {
			summaries++;
			counted += n;
			assert_int_equal(i, 60);
			assert_int_equal(n, 60);
		}
	}
	assert_int_equal(summaries, 1);
	assert_int_equal(counted, 60);
	/* The timer: nothing due before the minute, then the 30 since. */
	assert_int_equal(log_every_due(&r, t + 100000), 0);
	assert_int_equal(log_every_due(&r, t + 120000), 30);
	assert_int_equal(log_every_due(&r, t + 200000), 0);
	/* A quiet minute: the next one is logged in full again. */
	assert_int_equal(log_every_event(&r, t + 200000, &n), LOG_EVERY_FULL);
	assert_int_equal(log_every_event(&r, t + 201000, &n), LOG_EVERY_QUIET);
}

static void
test_at_most_one_line_a_minute(void **state)
{
	(void)state;
	/* Events every 100 ms for ten minutes: 1 full line, then at most
	 * one summary per minute (from events or the timer). */
	struct log_every r = { .interval_ms = MINUTE };
	uint64_t n, last_line = 0, events = 0, reported = 0;
	int lines = 0;
	for (uint64_t t = 5000; t < 5000 + 10 * MINUTE; t += 100) {
		enum log_every_verdict v = log_every_event(&r, t, &n);
		events++;
		uint64_t due = t % 200 == 0 ? log_every_due(&r, t) : 0;
		if (v == LOG_EVERY_FULL)
			reported++;
		if (v == LOG_EVERY_SUMMARY)
			reported += n;
		reported += due;
		if (v != LOG_EVERY_QUIET || due > 0) {
			if (lines > 0)
				assert_true(t - last_line >= MINUTE);
			last_line = t;
			lines++;
		}
	}
	assert_true(lines <= 11);
	/* Every event is in a line, but those of the last minute. */
	assert_true(events - reported < MINUTE / 100 + 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_in_full_then_a_count_a_minute),
		cmocka_unit_test(test_at_most_one_line_a_minute),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
