/* test_subject.c - unit tests for wildcard subjects: a table of patterns x
 * names in both dialects (each row through the reference matcher, a set of
 * its own, and one set holding every pattern), parse errors with their
 * positions, fixed prefixes, and a set's add, remove, dedupe, cache and
 * pruning.  The last tests make allocations fail in turn (malloc, calloc
 * and realloc are wrapped: failalloc.h) and check that nothing changed
 * and nothing leaked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eft/subject.h"

#include "failalloc.h"

/* ---- the table ---- */

static const struct {
	const char *pat;
	const char *name;
	bool match;
} cases[] = {
	/* '*': one element, both dialects */
	{ "price.stock.*", "price.stock.ACME", true },
	{ "price.stock.*", "price.stock", false },
	{ "price.stock.*", "price.stock.ACME.x", false },
	{ "price.stock.*", "price.stockACME", false },
	{ "*", "a", true },
	{ "*", "a.b", false },
	{ "*.b", "a.b", true },
	{ "*.b", "b", false },
	{ "*.b", "a.c", false },
	{ "a.*.c", "a.b.c", true },
	{ "a.*.c", "a.c", false },
	{ "*.*", "a.b", true },
	{ "*.*", "a", false },
	/* '>': one or more trailing elements (ActiveMQ, NATS) */
	{ "a.>", "a.b", true },
	{ "a.>", "a.b.c", true },
	{ "a.>", "a", false },
	{ "a.>", "b.c", false },
	{ "a.>", "ab.c", false },
	{ ">", "a", true },
	{ ">", "a.b.c", true },
	{ "*.>", "a", false },
	{ "*.>", "a.b", true },
	{ "a.*.>", "a.b", false },
	{ "a.*.>", "a.b.c.d", true },
	/* '#': zero or more elements (RabbitMQ), zero included */
	{ "a.#", "a", true },
	{ "a.#", "a.b", true },
	{ "a.#", "a.b.c", true },
	{ "a.#", "b", false },
	{ "a.#", "ab", false },
	{ "a.#", "ab.c", false },
	{ "#", "a", true },
	{ "#", "a.b.c", true },
	{ "#.b", "b", true },
	{ "#.b", "a.b", true },
	{ "#.b", "a.x.b", true },
	{ "#.b", "a.b.c", false },
	{ "#.b", "ab", false },
	{ "a.#.b", "a.b", true },
	{ "a.#.b", "a.x.b", true },
	{ "a.#.b", "a.x.y.b", true },
	{ "a.#.b", "a", false },
	{ "a.#.b", "a.b.c", false },
	{ "a.#.c", "a.c", true },
	{ "a.#.c", "a.c.d", false },
	{ "#.#", "a", true },
	{ "#.#", "a.b.c", true },
	{ "a.#.#", "a", true },
	{ "a.#.#", "a.b.c", true },
	{ "a.#.#", "b", false },
	{ "#.a.#", "a", true },
	{ "#.a.#", "x.a.y", true },
	{ "#.a.#", "x.y", false },
	{ "#.a.#.b", "x.a.y.b", true },
	{ "#.a.#.b", "x.b.y.a", false },
	{ "#.*", "a", true },
	{ "#.*", "a.b", true },
	{ "*.#", "a", true },
	{ "*.*.#", "a", false },
	{ "*.*.#", "a.b", true },
	{ "#.b.*", "b.c", true },
	{ "#.b.*", "a.b.c", true },
	{ "#.b.*", "a.b", false },
	/* elements merely containing a wildcard byte are literal */
	{ "a*", "a*", true },
	{ "a*", "ab", false },
	{ "x#y", "x#y", true },
	{ "x#y", "xy", false },
	{ "a*.*", "a*.b", true },
	{ "a*.*", "ab.b", false },
	{ "a.b>", "a.b>", true },
	{ "a.b>", "a.bc", false },
	{ "**", "ab", false },
	{ "##.a", "##.a", true },
	{ "##.a", "x.a", false },
	/* plain names: equality, empty elements allowed */
	{ "a.b", "a.b", true },
	{ "a.b", "a.b.c", false },
	{ "a.b", "a", false },
	{ "a.b", "a.bb", false },
	{ "a..b", "a..b", true },
	{ "a..b", "a.b", false },
	{ "", "", true },
	{ "", "a", false },
	{ "a.", "a.", true },
	{ "a.", "a", false },
	{ ".", ".", true },
	{ ".", "", false },
	/* names with empty elements against patterns: an empty element is one */
	{ "#", "", true },
	{ "#", "a..b", true },
	{ "#", "..", true },
	{ "*", "", true },
	{ "*", ".", false },
	{ "*.*", ".", true },
	{ "*.b", ".b", true },
	{ "a.*", "a.", true },
	{ "a.*.c", "a..c", true },
	{ "a.#", "a.", true },
	{ "a.#", "a..", true },
	{ "a.#.b", "a..b", true },
	{ "a.>", "a.", true },
	{ ">", "", true },
	{ "*.>", ".", true },
	/* a name with a wildcard element is matched by wildcards, not as a literal */
	{ "*", "*", true },
	{ "#", "#", true },
	{ "a.*", "a.#", true },
	{ "a.b", "a.*", false },
};

static const char *
name_of(size_t i)
{
	return cases[i].name;
}

static bool
has(void *const *r, size_t n, const void *v)
{
	for (size_t i = 0; i < n; i++)
		if (r[i] == v)
			return true;
	return false;
}

/* No value twice in an answer. */
static void
assert_distinct(void *const *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			assert_ptr_not_equal(r[i], r[j]);
}

#define V(i) ((void *)(uintptr_t)(0x1000 + (i)))

/* The set's own bookkeeping holds (subjects_check). */
static void
assert_sound(const struct subjects *set)
{
	const char *why = subjects_check(set);
	if (why != NULL)
		fail_msg("subjects_check: %s", why);
}

static void
test_table(void **state)
{
	(void)state;
	size_t ncases = sizeof(cases) / sizeof(cases[0]);
	for (size_t i = 0; i < ncases; i++) {
		const char *p = cases[i].pat, *nm = cases[i].name;
		struct subject_error err;
		int parsed = subject_parse(p, strlen(p), &err);
		if (parsed < 0)
			fail_msg("table row %zu: '%s' is malformed at %zu: %s", i, p, err.pos, err.why);
		bool got = subject_match(p, strlen(p), nm, strlen(nm));
		if (got != cases[i].match)
			fail_msg("subject_match('%s', '%s') = %d, want %d", p, nm, got, cases[i].match);

		struct subjects *set = subjects_new();
		assert_non_null(set);
		assert_int_equal(subjects_add(set, p, strlen(p), V(i)), 0);
		size_t n;
		void *const *r = subjects_match(set, nm, strlen(nm), &n);
		if (n != (cases[i].match ? 1u : 0u) || (n == 1 && r[0] != V(i)))
			fail_msg("subjects_match('%s' in the set, '%s'): %zu values, want %d", p, nm, n,
			    cases[i].match);
		/* The same again, from the cache. */
		r = subjects_match(set, nm, strlen(nm), &n);
		assert_int_equal(n, cases[i].match ? 1 : 0);
		assert_sound(set);
		subjects_free(set);
	}

	/* Every pattern in one set: each name gets exactly the rows whose
	 * pattern matches it (rows with the same pattern included). */
	struct subjects *set = subjects_new();
	assert_non_null(set);
	for (size_t i = 0; i < ncases; i++)
		assert_int_equal(subjects_add(set, cases[i].pat, strlen(cases[i].pat), V(i)), 0);
	assert_int_equal(subjects_count(set), ncases);
	for (size_t j = 0; j < ncases; j++) {
		const char *nm = name_of(j);
		size_t n, want = 0;
		void *const *r = subjects_match(set, nm, strlen(nm), &n);
		assert_true(n != (size_t)-1);
		assert_distinct(r, n);
		for (size_t i = 0; i < ncases; i++) {
			bool m = subject_match(cases[i].pat, strlen(cases[i].pat), nm, strlen(nm));
			want += m;
			if (m != has(r, n, V(i)))
				fail_msg("set: '%s' against '%s': %d, want %d", cases[i].pat, nm, !m, m);
		}
		assert_int_equal(n, want);
	}
	assert_sound(set);
	subjects_free(set);
}

static void
test_parse_errors(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int result;
		size_t pos;
		const char *why; /* a word of the reason */
	} rows[] = {
		{ "a.b", 0, 0, NULL },
		{ "", 0, 0, NULL },
		{ "a..b", 0, 0, NULL },     /* plain: never validated */
		{ ".a.", 0, 0, NULL },
		{ "a*", 0, 0, NULL },
		{ "x#y.>>", 0, 0, NULL },
		{ "*", 1, 0, NULL },
		{ "#", 1, 0, NULL },
		{ ">", 1, 0, NULL },
		{ "a.#.#", 1, 0, NULL },
		{ "#.b", 1, 0, NULL },
		{ "a.*.>", 1, 0, NULL },
		{ "*.#.*", 1, 0, NULL },
		{ "a..*", -1, 2, "empty" },
		{ ".*", -1, 0, "empty" },
		{ "*.", -1, 2, "empty" },
		{ "*..a", -1, 2, "empty" },
		{ "a.>.b", -1, 2, "last" },
		{ ">.a", -1, 0, "last" },
		{ ">.#", -1, 0, "last" },
		{ "a.#.>", -1, 4, "dialects" },
		{ "#.a.>", -1, 4, "dialects" },
		{ "abc.*.def..", -1, 10, "empty" },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct subject_error err = { 12345, NULL };
		int r = subject_parse(rows[i].s, strlen(rows[i].s), &err);
		if (r != rows[i].result)
			fail_msg("subject_parse('%s') = %d, want %d", rows[i].s, r, rows[i].result);
		if (r >= 0)
			continue;
		if (err.pos != rows[i].pos || err.why == NULL || strstr(err.why, rows[i].why) == NULL)
			fail_msg("subject_parse('%s'): %zu '%s', want %zu '%s'", rows[i].s, err.pos,
			    err.why ? err.why : "(null)", rows[i].pos, rows[i].why);
	}
	/* Only the first len bytes count. */
	assert_int_equal(subject_parse("a.*junk", 3, NULL), 1);
	assert_int_equal(subject_parse("a.>.b", 3, NULL), 1);
}

static void
test_inner_hash(void **state)
{
	(void)state;
	static const struct {
		const char *pat;
		size_t at;      /* SIZE_MAX: none (the pattern's length) */
	} rows[] = {
		{ "a.#.c", 2 }, { "#.c", 0 }, { "a.#.*", 2 }, { "a.#.#.c", 2 }, { "a.*.#.c", 4 },
		{ "a.#", SIZE_MAX }, { "a.#.#", SIZE_MAX }, { "#", SIZE_MAX }, { "a.*", SIZE_MAX },
		{ "a.b", SIZE_MAX }, { "x#y.c", SIZE_MAX }, { "a.#.b.#", 2 }, { "", SIZE_MAX },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		size_t len = strlen(rows[i].pat), n = subject_inner_hash(rows[i].pat, len);
		size_t want = rows[i].at == SIZE_MAX ? len : rows[i].at;
		if (n != want)
			fail_msg("subject_inner_hash('%s') = %zu, want %zu", rows[i].pat, n, want);
	}
}

static void
test_fixed_prefix(void **state)
{
	(void)state;
	static const struct {
		const char *pat;
		size_t n;
	} rows[] = {
		{ "a.b.*", 4 }, { "a.#", 1 }, { "a.#.c", 1 }, { "*.b", 0 }, { "a.>", 2 },
		{ "#", 0 }, { "#.a", 0 }, { "a.b.#", 3 }, { "a*.*", 3 }, { "a.*.c", 2 },
		{ "a.b", 3 }, { "", 0 }, { "a..b", 4 }, { "price.stock.*", 12 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		size_t n = subject_fixed_prefix(rows[i].pat, strlen(rows[i].pat));
		if (n != rows[i].n)
			fail_msg("subject_fixed_prefix('%s') = %zu, want %zu", rows[i].pat, n, rows[i].n);
	}
	/* Every name a pattern of the table matches starts with its fixed prefix. */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!cases[i].match)
			continue;
		size_t n = subject_fixed_prefix(cases[i].pat, strlen(cases[i].pat));
		assert_true(strlen(cases[i].name) >= n);
		assert_memory_equal(cases[i].pat, cases[i].name, n);
	}
}

static void
test_empty_set(void **state)
{
	(void)state;
	struct subjects *set = subjects_new();
	assert_non_null(set);
	size_t n = 99;
	assert_true(subjects_match(set, "a.b", 3, &n) == NULL || n == 0);
	assert_int_equal(n, 0);
	assert_int_equal(subjects_count(set), 0);
	struct subjects_stats st;
	subjects_stats(set, &st);
	assert_int_equal(st.nodes, 1);
	assert_int_equal(st.cache_hits + st.cache_misses, 0); /* nothing looked at */
	assert_sound(set);
	subjects_free(set);
	subjects_free(NULL);
}

static void
test_several_values(void **state)
{
	(void)state;
	struct subjects *set = subjects_new();
	assert_non_null(set);
	assert_int_equal(subjects_add(set, "a.*", 3, V(1)), 0);
	assert_int_equal(subjects_add(set, "a.*", 3, V(2)), 0);
	assert_int_equal(subjects_add(set, "a.*", 3, NULL), 0); /* a value may be NULL */
	assert_int_equal(subjects_count(set), 3);
	size_t n;
	void *const *r = subjects_match(set, "a.b", 3, &n);
	assert_int_equal(n, 3);
	assert_true(has(r, n, V(1)) && has(r, n, V(2)) && has(r, n, NULL));

	assert_int_equal(subjects_remove(set, "a.*", 3, V(1)), 0);
	r = subjects_match(set, "a.b", 3, &n);
	assert_int_equal(n, 2);
	assert_true(!has(r, n, V(1)) && has(r, n, V(2)) && has(r, n, NULL));
	assert_int_equal(subjects_remove(set, "a.*", 3, NULL), 0);
	assert_int_equal(subjects_remove(set, "a.*", 3, V(2)), 0);
	r = subjects_match(set, "a.b", 3, &n);
	assert_int_equal(n, 0);
	assert_sound(set);
	subjects_free(set);
}

static void
test_dedupe(void **state)
{
	(void)state;
	struct subjects *set = subjects_new();
	assert_non_null(set);
	/* Several paths through one pattern: "#.a.#" reaches its end node
	 * through each 'a' of "a.a.a". */
	assert_int_equal(subjects_add(set, "#.a.#", 5, V(1)), 0);
	/* One value under two matching patterns, and twice under one. */
	assert_int_equal(subjects_add(set, "a.*.a", 5, V(2)), 0);
	assert_int_equal(subjects_add(set, "*.a.>", 5, V(2)), 0);
	assert_int_equal(subjects_add(set, "a.#.#", 5, V(3)), 0);
	assert_int_equal(subjects_add(set, "a.#.#", 5, V(3)), 0);
	assert_int_equal(subjects_add(set, "a.#", 3, V(3)), 0); /* the same node: "#.#" is "#" */
	assert_int_equal(subjects_count(set), 6);
	size_t n;
	void *const *r = subjects_match(set, "a.a.a", 5, &n);
	assert_int_equal(n, 3);
	assert_distinct(r, n);
	assert_true(has(r, n, V(1)) && has(r, n, V(2)) && has(r, n, V(3)));

	/* (pattern, value) twice: one removal leaves the other. */
	assert_int_equal(subjects_remove(set, "a.#.#", 5, V(3)), 0);
	assert_int_equal(subjects_remove(set, "a.#", 3, V(3)), 0);
	r = subjects_match(set, "a.a.a", 5, &n);
	assert_int_equal(n, 3);
	assert_int_equal(subjects_remove(set, "a.#.#", 5, V(3)), 0);
	assert_int_equal(subjects_remove(set, "a.#.#", 5, V(3)), -1);
	r = subjects_match(set, "a.a.a", 5, &n);
	assert_int_equal(n, 2);
	assert_false(has(r, n, V(3)));
	assert_sound(set);
	subjects_free(set);
}

static void
test_cache_dropped_on_change(void **state)
{
	(void)state;
	struct subjects *set = subjects_new();
	assert_non_null(set);
	struct subjects_stats st;
	assert_int_equal(subjects_add(set, "a.b", 3, V(1)), 0);
	size_t n;
	void *const *r = subjects_match(set, "a.b", 3, &n);
	assert_int_equal(n, 1);
	r = subjects_match(set, "a.b", 3, &n);
	assert_int_equal(n, 1);
	assert_ptr_equal(r[0], V(1));
	subjects_stats(set, &st);
	assert_int_equal(st.cache_misses, 1);
	assert_int_equal(st.cache_hits, 1);
	/* A name that matches nothing is cached too. */
	subjects_match(set, "x", 1, &n);
	subjects_match(set, "x", 1, &n);
	assert_int_equal(n, 0);
	subjects_stats(set, &st);
	assert_int_equal(st.cache_hits, 2);

	/* An add makes the cached answers stale. */
	assert_int_equal(subjects_add(set, "*.b", 3, V(2)), 0);
	r = subjects_match(set, "a.b", 3, &n);
	assert_int_equal(n, 2);
	assert_true(has(r, n, V(1)) && has(r, n, V(2)));
	subjects_stats(set, &st);
	assert_int_equal(st.cache_misses, 3);
	assert_int_equal(subjects_add(set, "#", 1, V(3)), 0);
	r = subjects_match(set, "x", 1, &n);
	assert_int_equal(n, 1);
	assert_ptr_equal(r[0], V(3));

	/* So does a removal. */
	subjects_match(set, "a.b", 3, &n);
	assert_int_equal(n, 3);
	assert_int_equal(subjects_remove(set, "a.b", 3, V(1)), 0);
	r = subjects_match(set, "a.b", 3, &n);
	assert_int_equal(n, 2);
	assert_false(has(r, n, V(1)));

	/* A failed removal changes nothing: the answer still comes from the cache. */
	subjects_stats(set, &st);
	uint64_t hits = st.cache_hits;
	assert_int_equal(subjects_remove(set, "a.b", 3, V(1)), -1);
	r = subjects_match(set, "a.b", 3, &n);
	assert_int_equal(n, 2);
	subjects_stats(set, &st);
	assert_int_equal(st.cache_hits, hits + 1);
	assert_sound(set);
	subjects_free(set);
}

/* The answer for name "n.D" of the set test_cache_eviction makes. */
static void
assert_n_answer(struct subjects *set, unsigned d, bool extra)
{
	char name[32];
	snprintf(name, sizeof(name), "n.%u", d);
	size_t n, want = 2 + (d < 100) + (extra && d == 7);
	void *const *r = subjects_match(set, name, strlen(name), &n);
	assert_int_equal(n, want);
	assert_true(has(r, n, V(1)) && has(r, n, V(2)));
	if (d < 100)
		assert_true(has(r, n, V(100 + d)));
	if (extra && d == 7)
		assert_true(has(r, n, V(9)));
}

/* The cache holds 1,000 names; past its size it drops entries and stays
 * right; a change drops it whole. */
static void
test_cache_eviction(void **state)
{
	(void)state;
	struct subjects *set = subjects_new();
	assert_non_null(set);
	assert_int_equal(subjects_add(set, "n.*", 3, V(1)), 0);
	assert_int_equal(subjects_add(set, "n.#", 3, V(2)), 0);
	for (unsigned d = 0; d < 100; d++) {
		char p[32];
		snprintf(p, sizeof(p), "n.%u", d);
		assert_int_equal(subjects_add(set, p, strlen(p), V(100 + d)), 0);
	}
	struct subjects_stats st;
	for (int pass = 0; pass < 2; pass++)
		for (unsigned d = 0; d < 1000; d++)
			assert_n_answer(set, d, false);
	subjects_stats(set, &st);
	assert_int_equal(st.cache_misses, 1000);
	assert_int_equal(st.cache_hits, 1000);

	/* 5,000 names, three times over: some answers from the cache, every one right. */
	for (int pass = 0; pass < 3; pass++)
		for (unsigned d = 0; d < 5000; d++)
			assert_n_answer(set, d, false);
	assert_sound(set); /* every cached name can be found after all that dropping */
	subjects_stats(set, &st);
	assert_int_equal(st.cache_hits + st.cache_misses, 2000 + 15000);
	assert_true(st.cache_hits > 1000 && st.cache_misses > 1000 + 5000);

	/* A change: nothing stale is answered after it. */
	assert_int_equal(subjects_add(set, "n.7", 3, V(9)), 0);
	for (unsigned d = 0; d < 2000; d++)
		assert_n_answer(set, d, true);
	assert_sound(set);
	subjects_free(set);
}

static void
test_remove_what_is_not_there(void **state)
{
	(void)state;
	struct subjects *set = subjects_new();
	assert_non_null(set);
	assert_int_equal(subjects_remove(set, "a.*", 3, V(1)), -1); /* empty set */
	assert_int_equal(subjects_add(set, "a.*", 3, V(1)), 0);
	assert_int_equal(subjects_remove(set, "a.*", 3, V(2)), -1); /* another value */
	assert_int_equal(subjects_remove(set, "a", 1, V(1)), -1);    /* a prefix of it */
	assert_int_equal(subjects_remove(set, "a.*.c", 5, V(1)), -1); /* longer */
	assert_int_equal(subjects_remove(set, "a.b", 3, V(1)), -1);  /* '*' is no literal */
	assert_int_equal(subjects_remove(set, "a.#", 3, V(1)), -1);
	assert_int_equal(subjects_count(set), 1);
	struct subjects_stats st;
	subjects_stats(set, &st);
	assert_int_equal(st.nodes, 3);
	size_t n;
	subjects_match(set, "a.b", 3, &n);
	assert_int_equal(n, 1);
	assert_sound(set);
	subjects_free(set);
}

/* Removing prunes: what no pattern needs any more is gone. */
static void
test_remove_prunes(void **state)
{
	(void)state;
	static const char *pats[] = {
		"a.b.c", "a.b.*", "a.#", "a.#.c", "#", "#.#.x", ">", "a.>", "a", "", "a..b", "*.*.*",
	};
	size_t np = sizeof(pats) / sizeof(pats[0]);
	struct subjects *set = subjects_new();
	assert_non_null(set);
	struct subjects_stats st;
	for (size_t i = 0; i < np; i++)
		assert_int_equal(subjects_add(set, pats[i], strlen(pats[i]), V(i)), 0);
	subjects_stats(set, &st);
	assert_true(st.nodes > np);
	/* In another order than added; the answers stay right on the way. */
	for (size_t k = 0; k < np; k++) {
		size_t i = (k * 5) % np;
		assert_int_equal(subjects_remove(set, pats[i], strlen(pats[i]), V(i)), 0);
		size_t n;
		void *const *r = subjects_match(set, "a.b.c", 5, &n);
		assert_false(has(r, n, V(i)));
		assert_sound(set);
	}
	assert_int_equal(subjects_count(set), 0);
	subjects_stats(set, &st);
	assert_int_equal(st.nodes, 1);

	/* "#.#" and "#" are one node. */
	assert_int_equal(subjects_add(set, "#.#", 3, V(1)), 0);
	assert_int_equal(subjects_add(set, "#", 1, V(2)), 0);
	subjects_stats(set, &st);
	assert_int_equal(st.nodes, 2);
	assert_sound(set);
	subjects_free(set);
}

/* Many patterns (the edge table grows), checked name by name against the
 * reference matcher, then all removed. */
static void
test_many_patterns(void **state)
{
	(void)state;
	enum { NPAT = 3000 };
	static const char *shapes[] = { "%s.%u.*", "%s.*.%u", "#.%s.%u", "%s.%u.>", "%s.%u", "*.%u.#" };
	static const char *words[] = { "a", "b", "c", "" };
	static char pats[NPAT][32];
	struct subjects *set = subjects_new();
	assert_non_null(set);
	for (unsigned i = 0; i < NPAT; i++) {
		snprintf(pats[i], sizeof(pats[i]), shapes[i % 6], words[i % 4], i % 50);
		assert_int_equal(subjects_add(set, pats[i], strlen(pats[i]), V(i)), 0);
	}
	for (unsigned j = 0; j < 300; j++) {
		char name[64];
		snprintf(name, sizeof(name), j % 3 ? "%s.%u.%s" : "%s.%u", words[j % 4], j % 60,
		    words[(j / 4) % 4]);
		for (int twice = 0; twice < 2; twice++) {
			size_t n, want = 0;
			void *const *r = subjects_match(set, name, strlen(name), &n);
			assert_true(n != (size_t)-1);
			for (unsigned i = 0; i < NPAT; i++) {
				bool m = subject_match(pats[i], strlen(pats[i]), name, strlen(name));
				want += m;
				if (m != has(r, n, V(i)))
					fail_msg("'%s' against '%s': %d, want %d", pats[i], name, !m, m);
			}
			assert_int_equal(n, want);
		}
	}
	for (unsigned i = 0; i < NPAT; i++)
		assert_int_equal(subjects_remove(set, pats[i], strlen(pats[i]), V(i)), 0);
	struct subjects_stats st;
	subjects_stats(set, &st);
	assert_int_equal(st.nodes, 1);
	assert_sound(set);
	subjects_free(set);
}

/* '#' patterns built to make a backtracking matcher take exponential time
 * (a test that would not end, not a timing), and a pattern of 100,000
 * elements (nothing may recurse per element). */
static void
test_no_blowup(void **state)
{
	(void)state;
	char pat[256] = "", name[256] = "";
	for (int i = 0; i < 20; i++)
		strcat(pat, "#.a.");
	strcat(pat, "b");
	for (int i = 0; i < 60; i++)
		strcat(name, "a.");
	strcat(name, "c");
	assert_false(subject_match(pat, strlen(pat), name, strlen(name)));
	struct subjects *set = subjects_new();
	assert_non_null(set);
	assert_int_equal(subjects_add(set, pat, strlen(pat), V(1)), 0);
	size_t n;
	subjects_match(set, name, strlen(name), &n);
	assert_int_equal(n, 0);
	name[strlen(name) - 1] = 'b';
	subjects_match(set, name, strlen(name), &n);
	assert_int_equal(n, 1);

	/* "x.x. ... x.#" and "x.x. ... x.y" */
	size_t len = 200001;
	char *big = malloc(len), *big_name = malloc(len);
	assert_non_null(big);
	assert_non_null(big_name);
	for (size_t i = 0; i + 1 < len; i += 2) {
		big[i] = 'x';
		big[i + 1] = '.';
	}
	big[len - 1] = '#';
	memcpy(big_name, big, len);
	big_name[len - 1] = 'y';
	assert_int_equal(subject_parse(big, len, NULL), 1);
	assert_int_equal(subjects_add(set, big, len, V(2)), 0);
	subjects_match(set, big_name, len, &n);
	assert_int_equal(n, 1);
	subjects_match(set, big_name, len - 2, &n); /* "x. ... x": '#' as zero elements */
	assert_int_equal(n, 1);
	subjects_match(set, big_name + 2, len - 2, &n);
	assert_int_equal(n, 0);
	assert_true(subject_match(big, len, big_name, len));
	assert_false(subject_match(big, len, big_name + 2, len - 2));
	free(big);
	free(big_name);
	assert_sound(set);
	subjects_free(set); /* 100,000 nodes deep */
}

/* ---- out of memory ---- */

static void
test_oom_new(void **state)
{
	(void)state;
	for (long k = 0;; k++) {
		fail_after(k);
		struct subjects *set = subjects_new();
		fail_after(-1);
		if (set != NULL) {
			assert_sound(set);
			subjects_free(set);
			assert_true(k > 0);
			break;
		}
	}
}

/* Each allocation of an add failing in turn, alone or with all after it:
 * -1 and nothing changed, or (growing the edge table failed, which only
 * makes chains longer) 0 and the pattern is there. */
static void
test_oom_add(void **state)
{
	(void)state;
	for (int once = 0; once < 2; once++) {
		struct subjects *set = subjects_new();
		assert_non_null(set);
		assert_int_equal(subjects_add(set, "a.b", 3, V(1)), 0);
		/* Enough edges that the table grows during some of the adds. */
		for (int i = 0; i < 40; i++) {
			char pat[48], name[48];
			snprintf(pat, sizeof(pat), "a.%d.#.x.*.y%d", i, i);
			snprintf(name, sizeof(name), "a.%d.x.q.y%d", i, i);
			for (long k = 0;; k++) {
				struct subjects_stats before, after;
				subjects_stats(set, &before);
				size_t count = subjects_count(set), n;
				once ? fail_only(k) : fail_after(k);
				int r = subjects_add(set, pat, strlen(pat), V(100 + i));
				long fails = failed;
				fail_after(-1);
				void *const *m = subjects_match(set, name, strlen(name), &n);
				assert_true(n != (size_t)-1);
				if (r == 0) {
					assert_int_equal(subjects_count(set), count + 1);
					assert_int_equal(n, 1);
					assert_ptr_equal(m[0], V(100 + i));
					if (fails == 0)
						break;
					/* A failure shrugged off: take it out, try the next k. */
					assert_int_equal(subjects_remove(set, pat, strlen(pat), V(100 + i)), 0);
					continue;
				}
				assert_int_equal(r, -1);
				assert_true(fails > 0);
				assert_sound(set);
				assert_int_equal(subjects_count(set), count);
				subjects_stats(set, &after);
				assert_int_equal(after.nodes, before.nodes);
				assert_int_equal(n, 0);
			}
		}
		size_t n;
		void *const *m = subjects_match(set, "a.9.x.q.y9", 10, &n);
		assert_int_equal(n, 1);
		assert_ptr_equal(m[0], V(109));
		m = subjects_match(set, "a.b", 3, &n);
		assert_int_equal(n, 1);
		assert_ptr_equal(m[0], V(1));
		assert_sound(set);
		subjects_free(set);
	}
}

/* Each allocation of a match failing in turn, with all after it, then
 * alone: the right answer, or NULL with (size_t)-1; the set works
 * afterwards. */
static void
test_oom_match(void **state)
{
	(void)state;
	for (long k = 0, once = 0; once < 2; k++) {
		struct subjects *set = subjects_new();
		assert_non_null(set);
		for (int i = 0; i < 40; i++) {
			char p[32];
			snprintf(p, sizeof(p), i % 2 ? "#.%d" : "*.%d.>", i % 3);
			assert_int_equal(subjects_add(set, p, strlen(p), V(i)), 0);
		}
		once ? fail_only(k) : fail_after(k);
		size_t n;
		void *const *r = subjects_match(set, "x.1.y.z.1", 9, &n);
		long fails = failed;
		fail_after(-1);
		if (r == NULL && n == (size_t)-1) {
			assert_true(fails > 0);
			assert_sound(set);
		} else {
			assert_int_equal(n, 13); /* 7 of "#.1" and 6 of "*.1.>" */
			for (int i = 0; i < 40; i++)
				assert_int_equal(has(r, n, V(i)), i % 3 == 1);
		}
		r = subjects_match(set, "x.1.y.z.1", 9, &n);
		assert_int_equal(n, 13);
		assert_sound(set);
		subjects_free(set);
		if (fails == 0) {
			once++;
			k = -1;
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_fixed_prefix),
		cmocka_unit_test(test_inner_hash),
		cmocka_unit_test(test_empty_set),
		cmocka_unit_test(test_several_values),
		cmocka_unit_test(test_dedupe),
		cmocka_unit_test(test_cache_dropped_on_change),
		cmocka_unit_test(test_cache_eviction),
		cmocka_unit_test(test_remove_what_is_not_there),
		cmocka_unit_test(test_remove_prunes),
		cmocka_unit_test(test_many_patterns),
		cmocka_unit_test(test_no_blowup),
		cmocka_unit_test(test_oom_new),
		cmocka_unit_test(test_oom_add),
		cmocka_unit_test(test_oom_match),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
