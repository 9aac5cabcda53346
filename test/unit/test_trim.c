/* test_trim.c - memory given back after a burst: when the rule calls
 * malloc_trim, and that it gives back freed memory held below a live
 * allocation, which glibc's free alone keeps. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <cmocka.h>

#include "eft/trim.h"

#define MB ((size_t)1 << 20)

static void
test_due(void **state)
{
	(void)state;
	struct trim t = { .anon_base = 100 * MB, .held_base = 50 * MB };
	/* Resident memory that grew with message memory is theirs. */
	assert_false(trim_due(&t, 600 * MB, 550 * MB, false));
	assert_false(trim_due(&t, 100 * MB + TRIM_AFTER_BYTES - 1, 50 * MB, false));
	assert_true(trim_due(&t, 100 * MB + TRIM_AFTER_BYTES, 50 * MB, false));
	/* A burst drained: messages gone, their memory still resident. */
	assert_true(trim_due(&t, 1600 * MB, 0, false));
	/* Message memory grown into memory already resident (or below the
	 * base): nothing to give back. */
	assert_false(trim_due(&t, 100 * MB, 400 * MB, false));
	assert_false(trim_due(&t, 10 * MB, 0, false));
	/* While message memory still falls, only in large steps. */
	assert_false(trim_due(&t, 100 * MB + TRIM_WHILE_FALLING_BYTES - 1, 50 * MB, true));
	assert_true(trim_due(&t, 100 * MB + TRIM_WHILE_FALLING_BYTES, 50 * MB, true));
}

static void
test_tick_looks_when_messages_fell(void **state)
{
	(void)state;
	struct trim t;
	trim_init(&t, 300 * MB);
	assert_false(trim_tick(&t, 300 * MB));  /* idle: no look */
	assert_false(trim_tick(&t, 400 * MB));  /* rose: no look */
	assert_false(t.settling);
	/* Fell by 300 MB: 200 MB below the last trim's messages, resident
	 * memory as it was; not a step's worth while falling... */
	assert_false(trim_tick(&t, 100 * MB));
	assert_true(t.settling);
	/* ... but due once it stopped falling. */
	assert_true(trim_tick(&t, 100 * MB));
	assert_int_equal(t.held_base, 100 * MB);
	assert_false(t.settling);
	assert_false(trim_tick(&t, 100 * MB));
	/* While falling, a step's worth is due at once. */
	t.held_base = 100 * MB + TRIM_WHILE_FALLING_BYTES;
	assert_true(trim_tick(&t, 0));
}

/* A steady load whose message memory goes up and down by less than a
 * trim's step (RPC, a small queue) never reads /proc: it never settles. */
static void
test_small_ups_and_downs_do_not_look(void **state)
{
	(void)state;
	struct trim t;
	trim_init(&t, 0);
	for (int i = 0; i < 100; i++) {
		assert_false(trim_tick(&t, (i % 2) ? TRIM_AFTER_BYTES - 1 : 0));
		assert_false(t.settling);
	}
	/* A step's worth freed is looked at. */
	assert_false(trim_tick(&t, TRIM_AFTER_BYTES * 2));
	trim_tick(&t, 0);
	assert_true(t.settling);
}

#if defined(__SANITIZE_ADDRESS__)
static void
test_gives_back_memory_below_a_live_allocation(void **state)
{
	(void)state;
	skip(); /* ASan's allocator, not glibc's: its quarantine keeps what is freed */
}

static void
test_malloc_keeps_the_heap_top(void **state)
{
	(void)state;
	skip(); /* ASan's allocator, not glibc's: mallopt does nothing there */
}
#else
static void
test_gives_back_memory_below_a_live_allocation(void **state)
{
	(void)state;
	/* 64 MB in 32 KB blocks (under malloc's mmap threshold: in its heap),
	 * then one block above them all that stays. */
	enum { N = 2048, SIZE = 32 * 1024 };
	static char *block[N];
	struct trim t;
	trim_init(&t, 0);
	for (int i = 0; i < N; i++) {
		block[i] = malloc(SIZE);
		assert_non_null(block[i]);
		memset(block[i], 'x', SIZE);
	}
	char *pin = malloc(SIZE);
	assert_non_null(pin);
	memset(pin, 'p', SIZE);
	size_t full = trim_anon_rss();
	assert_true(full >= (size_t)N * SIZE);
	for (int i = 0; i < N; i++)
		free(block[i]);
	/* free() gave back nothing: the pin holds the top of the heap. */
	size_t freed = trim_anon_rss();
	assert_true(freed + 16 * MB > full);
	/* Message memory fell (from what the blocks stood for) and settled. */
	t.held_seen = (size_t)N * SIZE;
	t.held_base = t.held_peak = t.held_seen;
	t.anon_base = full;
	assert_false(trim_tick(&t, 0)); /* falling, and less than a step */
	assert_true(trim_tick(&t, 0));  /* stopped falling */
	assert_int_equal(t.anon_before, freed);
	assert_true(t.anon_after + 48 * MB < freed);
	assert_false(trim_tick(&t, 0)); /* settled: nothing more */
	assert_int_equal(pin[SIZE - 1], 'p');
	free(pin);
}

/* trim_configure_malloc: free() leaves the heap's top to trim_tick up to
 * TRIM_AFTER_BYTES (glibc's default gives it back past 128 KB, so each
 * burst of output faulted its pages in again), and blocks from
 * TRIM_MMAP_BYTES up get pages of their own. */
static void
test_malloc_keeps_the_heap_top(void **state)
{
	(void)state;
	assert_int_equal(trim_configure_malloc(), 0);
	malloc_trim(0);
	enum { N = 128, SIZE = 32 * 1024 }; /* 4 MB, at the top of the heap */
	static char *block[N];
	for (int i = 0; i < N; i++) {
		block[i] = malloc(SIZE);
		assert_non_null(block[i]);
		memset(block[i], 'x', SIZE);
	}
	for (int i = N - 1; i >= 0; i--)
		free(block[i]);
	assert_true(mallinfo2().keepcost >= (size_t)N * SIZE);
	/* What the top keeps, trim_tick's malloc_trim gives back. */
	malloc_trim(0);
	assert_true(mallinfo2().keepcost < (size_t)N * SIZE);
	/* With the top given back: half the mmap threshold comes from the
	 * heap (glibc's default threshold, 128 KB, would map it); the
	 * threshold itself is mapped. */
	size_t mapped = mallinfo2().hblks;
	char *half = malloc(TRIM_MMAP_BYTES / 2);
	assert_non_null(half);
	assert_int_equal(mallinfo2().hblks, mapped);
	char *big = malloc(TRIM_MMAP_BYTES);
	assert_non_null(big);
	assert_int_equal(mallinfo2().hblks, mapped + 1);
	free(big);
	free(half);
}
#endif

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_due),
		cmocka_unit_test(test_tick_looks_when_messages_fell),
		cmocka_unit_test(test_small_ups_and_downs_do_not_look),
		cmocka_unit_test(test_gives_back_memory_below_a_live_allocation),
		cmocka_unit_test(test_malloc_keeps_the_heap_top),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
