/* test_policy.c - unit tests for destination name patterns: a table of
 * patterns, names and whether they match, names that are not NUL-terminated
 * or hold NUL bytes, and a table of malformed patterns with the reason
 * policy_pattern_check gives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eft/policy.h"

struct match_case {
	const char *pattern;
	const char *name;
	bool match;
};

static const struct match_case matches[] = {
	/* '>' last: one or more segments, separators as written. */
	{ "/queue/orders.>", "/queue/orders.new", true },
	{ "/queue/orders.>", "/queue/orders.eu.new", true },
	{ "/queue/orders.>", "/queue/orders.eu/new", true },
	{ "/queue/orders.>", "/queue/orders", false },
	{ "/queue/orders.>", "/queue/orders.", false },
	{ "/queue/orders.>", "/queue/ordersX.new", false },
	{ "/queue/orders.>", "/queue/orders/new", false },
	{ "/queue/orders.>", "/queue/order.new", false },
	{ "/queue/orders.>", "/topic/orders.new", false },
	{ "/queue/orders.>", "/queue/orders..new", false },
	/* '>' alone after the type: every queue, and only queues. */
	{ "/queue/>", "/queue/a", true },
	{ "/queue/>", "/queue/a.b.c", true },
	{ "/queue/>", "/queue/a/b", true },
	{ "/queue/>", "/queue/a.", true },
	{ "/queue/>", "/queue/a..b", true },
	{ "/queue/>", "/queue/", false },
	{ "/queue/>", "/queue", false },
	{ "/queue/>", "/queue/.a", false },
	{ "/queue/>", "/queue//a", false },
	{ "/queue/>", "/topic/a", false },
	{ "/queue/>", "/temp-queue/a", false },
	{ "/queue/>", "/reply-queue/eft.gen-abc", false },
	{ "/queue/>", "", false },
	{ "/topic/>", "/topic/prices", true },
	{ "/temp-queue/>", "/temp-queue/replies", true },
	/* '*': exactly one non-empty segment. */
	{ "/queue/*", "/queue/a", true },
	{ "/queue/*", "/queue/abc-def_1", true },
	{ "/queue/*", "/queue/*", true },
	{ "/queue/*", "/queue/a.b", false },
	{ "/queue/*", "/queue/a/b", false },
	{ "/queue/*", "/queue/", false },
	{ "/queue/*", "/queue", false },
	{ "/queue/*", "/queue/.a", false },
	{ "/queue/*", "/topic/a", false },
	{ "/queue/a.*", "/queue/a.b", true },
	{ "/queue/a.*", "/queue/a.", false },
	{ "/queue/a.*", "/queue/a", false },
	{ "/queue/a.*", "/queue/a.b.c", false },
	{ "/queue/a.*", "/queue/a/b", false },
	{ "/queue/a.*", "/queue/ab.c", false },
	{ "/queue/*.b", "/queue/x.b", true },
	{ "/queue/*.b", "/queue/x.c", false },
	{ "/queue/*.b", "/queue/.b", false },
	{ "/queue/*.b", "/queue/x/b", false },
	{ "/queue/*/*", "/queue/a/b", true },
	{ "/queue/*/*", "/queue/a.b", false },
	{ "/topic/*.*.>", "/topic/a.b.c", true },
	{ "/topic/*.*.>", "/topic/a.b.c.d", true },
	{ "/topic/*.*.>", "/topic/a.b", false },
	{ "/topic/*.*.>", "/topic/a..c", false },
	{ "/temp-queue/*", "/temp-queue/x", true },
	{ "/temp-queue/*", "/temp-queue/x.y", false },
	/* No wildcard: the whole name, byte for byte. */
	{ "/queue/a", "/queue/a", true },
	{ "/queue/a", "/queue/ab", false },
	{ "/queue/a", "/queue/a.b", false },
	{ "/queue/a", "/queue/a/", false },
	{ "/queue/a", "/queue/A", false },
	{ "/queue/a", "/queue/", false },
	{ "/queue/a", "/topic/a", false },
	{ "/queue/a", "", false },
	{ "/queue/a.b", "/queue/a.b", true },
	{ "/queue/a.b", "/queue/a/b", false },
	{ "/queue/a/b", "/queue/a.b", false },
	{ "/queue/a.b", "/queue/a.c", false },
	{ "/queue/caf\xc3\xa9.*", "/queue/caf\xc3\xa9.x", true },
	{ "/queue/caf\xc3\xa9.*", "/queue/cafe.x", false },
};

static void
test_match_table(void **state)
{
	(void)state;
	int bad = 0;
	for (size_t i = 0; i < sizeof(matches) / sizeof(matches[0]); i++) {
		const struct match_case *c = &matches[i];
		bool got = policy_match(c->pattern, c->name, strlen(c->name));
		if (got != c->match) {
			print_error("policy_match('%s', '%s') = %d, want %d\n", c->pattern, c->name,
			    got, c->match);
			bad++;
		}
		/* The table is about patterns the config accepts. */
		if (policy_pattern_check(c->pattern) != NULL) {
			print_error("'%s' should be well-formed: %s\n", c->pattern,
			    policy_pattern_check(c->pattern));
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* The name is len bytes: what follows them does not count. */
static void
test_match_name_not_terminated(void **state)
{
	(void)state;
	const char *buf = "/queue/a.bXYZ";
	size_t len = strlen("/queue/a.b");
	assert_true(policy_match("/queue/a.b", buf, len));
	assert_true(policy_match("/queue/a.*", buf, len));
	assert_true(policy_match("/queue/>", buf, len));
	assert_false(policy_match("/queue/a.bXYZ", buf, len));
	assert_false(policy_match("/queue/a.bX", buf, len));
	assert_true(policy_match("/queue/a.bXYZ", buf, strlen(buf)));
	/* Cut right after a separator: nothing left for '*' or '>'. */
	assert_false(policy_match("/queue/a.*", buf, strlen("/queue/a.")));
	assert_false(policy_match("/queue/>", buf, strlen("/queue/")));
	assert_true(policy_match("/queue/*", buf, strlen("/queue/a")));
	assert_false(policy_match("/queue/a", buf, 0));
	assert_false(policy_match("/queue/>", buf, 0));
}

/* A NUL inside a name is one more byte of its segment. */
static void
test_match_name_with_nul(void **state)
{
	(void)state;
	static const char name[] = "/queue/a\0b.c";
	size_t len = sizeof(name) - 1;
	assert_true(policy_match("/queue/>", name, len));
	assert_true(policy_match("/queue/*.c", name, len));
	assert_false(policy_match("/queue/a", name, len));
	assert_false(policy_match("/queue/a.*", name, len));
	assert_false(policy_match("/queue/*", name, len));
	/* Up to the NUL alone: "/queue/a". */
	assert_true(policy_match("/queue/a", name, strlen(name)));
}

static void
test_check_accepts(void **state)
{
	(void)state;
	static const char *const good[] = {
		"/queue/a", "/queue/*", "/queue/>", "/topic/>", "/temp-queue/*", "/queue/orders.>",
		"/queue/a/b.c", "/queue/*.*.>", "/queue/a-b_c:d", "/queue/caf\xc3\xa9",
		"/topic/a.*/b.>", "/queue/queue/x",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const char *why = policy_pattern_check(good[i]);
		if (why != NULL) {
			print_error("'%s' refused: %s\n", good[i], why);
			fail();
		}
	}
	/* The longest: POLICY_NAME_MAX - 1 bytes. */
	char longest[POLICY_NAME_MAX];
	memset(longest, 'x', sizeof(longest) - 1);
	memcpy(longest, "/queue/", 7);
	longest[sizeof(longest) - 1] = '\0';
	assert_null(policy_pattern_check(longest));
}

struct check_case {
	const char *pattern;
	const char *why;
};

#define PREFIX "does not start with /queue/, /topic/ or /temp-queue/"
#define EMPTY "has an empty segment (two separators in a row, or nothing after one)"
#define INSIDE "has '*' or '>' inside a segment: they stand only for a whole segment"
#define LAST "has '>' before its last segment: '>' may only end a pattern"
#define SPACE "holds a space or a control character"

static const struct check_case bad_patterns[] = {
	{ "", PREFIX },
	{ "queue/a", PREFIX },
	{ "/queue", PREFIX },
	{ "/queues/a", PREFIX },
	{ "/Queue/a", PREFIX },
	{ "/queue.a", PREFIX },
	{ "/reply-queue/a", PREFIX },
	{ "/temp-queue", PREFIX },
	{ "*", PREFIX },
	{ ">", PREFIX },
	{ "/>", PREFIX },
	{ "/*/a", PREFIX },
	{ "/queue/", EMPTY },
	{ "/topic/", EMPTY },
	{ "/temp-queue/", EMPTY },
	{ "/queue/a..b", EMPTY },
	{ "/queue/a.", EMPTY },
	{ "/queue/a/", EMPTY },
	{ "/queue//a", EMPTY },
	{ "/queue/.a", EMPTY },
	{ "/queue/*.", EMPTY },
	{ "/queue/a*", INSIDE },
	{ "/queue/*a", INSIDE },
	{ "/queue/a.b>", INSIDE },
	{ "/queue/**", INSIDE },
	{ "/queue/>>", INSIDE },
	{ "/queue/*>", INSIDE },
	{ "/queue/a.x*y.b", INSIDE },
	{ "/queue/>.a", LAST },
	{ "/queue/>/*", LAST },
	{ "/queue/a.>.>", LAST },
	{ "/queue/a b", SPACE },
	{ " /queue/a", SPACE },
	{ "/queue/a ", SPACE },
	{ "/queue/a\tb", SPACE },
	{ "/queue/a\nb", SPACE },
	{ "/queue/a\x01", SPACE },
	{ "/queue/a\x7f", SPACE },
};

static void
test_check_refuses(void **state)
{
	(void)state;
	int bad = 0;
	for (size_t i = 0; i < sizeof(bad_patterns) / sizeof(bad_patterns[0]); i++) {
		const struct check_case *c = &bad_patterns[i];
		const char *why = policy_pattern_check(c->pattern);
		if (why == NULL || strcmp(why, c->why) != 0) {
			print_error("policy_pattern_check('%s') = '%s', want '%s'\n", c->pattern,
			    why ? why : "(null)", c->why);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

static void
test_check_too_long(void **state)
{
	(void)state;
	char p[POLICY_NAME_MAX + 10];
	memset(p, 'x', sizeof(p) - 1);
	memcpy(p, "/queue/", 7);
	p[POLICY_NAME_MAX] = '\0';
	assert_string_equal(policy_pattern_check(p), "is longer than 255 bytes");
	p[POLICY_NAME_MAX] = 'x';
	p[sizeof(p) - 1] = '\0';
	assert_string_equal(policy_pattern_check(p), "is longer than 255 bytes");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match_table),
		cmocka_unit_test(test_match_name_not_terminated),
		cmocka_unit_test(test_match_name_with_nul),
		cmocka_unit_test(test_check_accepts),
		cmocka_unit_test(test_check_refuses),
		cmocka_unit_test(test_check_too_long),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
