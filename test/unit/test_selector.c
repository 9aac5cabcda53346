/* test_selector.c - unit tests for JMS message selectors: a table of
 * selectors, headers and whether they match, and a table of malformed
 * selectors with the position their error names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eft/selector.h"

/* Headers as "name:value" lines, as a STOMP frame has them. */
static bool
lookup(void *arg, const char *name, size_t len, const char **value, size_t *vlen)
{
	const char *h = arg;
	while (h != NULL && *h != '\0') {
		const char *end = strchr(h, '\n');
		size_t n = end ? (size_t)(end - h) : strlen(h);
		const char *colon = memchr(h, ':', n);
		if (colon != NULL && (size_t)(colon - h) == len && memcmp(h, name, len) == 0) {
			*value = colon + 1;
			*vlen = n - (size_t)(colon + 1 - h);
			return true;
		}
		h = end ? end + 1 : h + n;
	}
	return false;
}

/* Headers most rows use: u (unset) and n (unset) are NULL. */
#define H "p:7\ns:abc\nt:true\nf:FALSE\nz:0\nx-type:red\nJMSType:car\nq:it's\nfl:2.5e1\nneg:-3\n" \
    "e:\nw: 7\nu8:h\xc3\xa9llo\n"

static const struct {
	const char *sel;
	const char *hdrs;
	bool match;
} cases[] = {
	/* comparisons, numeric conversion of header strings */
	{ "p = 7", H, true },
	{ "p = 7.0", H, true },
	{ "p <> 7", H, false },
	{ "p > 5", H, true },
	{ "p >= 7", H, true },
	{ "p < 7", H, false },
	{ "p <= 6", H, false },
	{ "p > 5 AND p < 8", H, true },
	{ "fl = 25", H, true },
	{ "neg < 0", H, true },
	{ "neg = -3", H, true },
	{ "s > 5", H, false },      /* not a number: UNKNOWN */
	{ "NOT (s > 5)", H, false }, /* still UNKNOWN */
	{ "w = 7", H, false },      /* " 7" is not entirely a number */
	{ "e = 0", H, false },
	{ "e = ''", H, true },
	{ "p = '7'", H, true },     /* string equality */
	{ "p = '7.0'", H, false },
	{ "p < z", H, false },      /* two headers ordered as numbers */
	{ "z < p", H, true },
	{ "s < p", H, false },
	{ "1.5e1 = 15", "", true },
	{ ".5 = 0.5", "", true },
	{ "2E-1 < 1", "", true },
	/* strings */
	{ "s = 'abc'", H, true },
	{ "s = 'ABC'", H, false },
	{ "s <> 'abc'", H, false },
	{ "s <> 'abd'", H, true },
	{ "q = 'it''s'", H, true },
	{ "'''' = ''''", "", true },
	{ "x-type = 'red'", H, true },
	{ "JMSType = 'car'", H, true },
	{ "jmstype = 'car'", H, false }, /* header names are case-sensitive */
	{ "s = x-type", H, false },
	{ "s = s", H, true },
	/* booleans */
	{ "t = TRUE", H, true },
	{ "t = FALSE", H, false },
	{ "f = false", H, true },
	{ "t", H, true },
	{ "f", H, false },
	{ "NOT f", H, true },
	{ "s", H, false },
	{ "NOT s", H, false },
	{ "TRUE", "", true },
	{ "FALSE", "", false },
	{ "NOT FALSE", "", true },
	{ "(1 = 1) = TRUE", "", true },
	{ "s = TRUE", H, false },
	{ "NOT (s = TRUE)", H, false },
	/* arithmetic and precedence */
	{ "p + 1 = 8", H, true },
	{ "p - 1 = 6", H, true },
	{ "p * 2 = 14", H, true },
	{ "p / 2 = 3.5", H, true },
	{ "1 + 2 * 3 = 7", "", true },
	{ "(1 + 2) * 3 = 9", "", true },
	{ "10 - 4 - 3 = 3", "", true },
	{ "12 / 2 / 3 = 2", "", true },
	{ "-p = -7", H, true },
	{ "- -p = 7", H, true },
	{ "+p = 7", H, true },
	{ "-(2 + 3) = -5", "", true },
	{ "p - -1 = 8", H, true },
	{ "p / 0 = 1", H, false },
	{ "NOT (p / 0 = 1)", H, false },
	{ "p / z > 0", H, false },
	{ "s + 1 = 1", H, false },
	{ "u + 1 = 1", H, false },
	{ "2 * 3 > 5 AND 1 < 2", "", true },
	/* NULL and three-valued logic: u is absent */
	{ "u = 1", H, false },
	{ "NOT (u = 1)", H, false },
	{ "u <> 1", H, false },
	{ "u = 'a'", H, false },
	{ "NOT (u = 'a')", H, false },
	{ "u IS NULL", H, true },
	{ "u IS NOT NULL", H, false },
	{ "p IS NULL", H, false },
	{ "p IS NOT NULL", H, true },
	{ "e IS NOT NULL", H, true },
	{ "NOT (u IS NULL)", H, false },
	/* AND truth table */
	{ "1=1 AND 1=1", "", true },
	{ "1=1 AND 1=2", "", false },
	{ "1=2 AND 1=1", "", false },
	{ "1=1 AND u=1", H, false },                 /* TRUE AND UNKNOWN = UNKNOWN */
	{ "NOT (1=1 AND u=1)", H, false },
	{ "1=2 AND u=1", H, false },                 /* FALSE AND UNKNOWN = FALSE */
	{ "NOT (1=2 AND u=1)", H, true },
	{ "NOT (u=1 AND 1=2)", H, true },
	{ "NOT (u=1 AND u=2)", H, false },           /* UNKNOWN AND UNKNOWN */
	/* OR truth table */
	{ "1=1 OR 1=2", "", true },
	{ "1=2 OR 1=2", "", false },
	{ "1=2 OR 1=1", "", true },
	{ "1=1 OR u=1", H, true },                   /* TRUE OR UNKNOWN = TRUE */
	{ "u=1 OR 1=1", H, true },
	{ "1=2 OR u=1", H, false },                  /* FALSE OR UNKNOWN = UNKNOWN */
	{ "NOT (1=2 OR u=1)", H, false },
	{ "NOT (u=1 OR u=2)", H, false },
	/* precedence: NOT > AND > OR */
	{ "1=1 OR 1=1 AND 1=2", "", true },
	{ "(1=1 OR 1=1) AND 1=2", "", false },
	{ "NOT 1=1 AND 1=2", "", false },
	{ "NOT 1=2 AND 1=1", "", true },
	{ "NOT 1=1 OR 1=1", "", true },
	{ "NOT (1=1 OR 1=1)", "", false },
	{ "1=2 AND 1=2 OR 1=1", "", true },
	{ "NOT NOT 1=1", "", true },
	/* keywords in any case */
	{ "p > 1 and p < 9", H, true },
	{ "p between 1 AnD 9", H, true },
	{ "s in ('abc')", H, true },
	{ "s like 'a%' escape '!'", H, true },
	{ "u is null", H, true },
	{ "t = True", H, true },
	{ "not s not in ('x') or 1=2", H, false },
	/* IN */
	{ "s IN ('x', 'abc', 'y')", H, true },
	{ "s IN ('x', 'y')", H, false },
	{ "s IN ('ABC')", H, false },
	{ "s NOT IN ('x', 'y')", H, true },
	{ "s NOT IN ('abc')", H, false },
	{ "u IN ('a')", H, false },
	{ "u NOT IN ('a')", H, false },
	{ "NOT (u IN ('a'))", H, false },
	{ "p IN ('7')", H, true },
	{ "q IN ('it''s')", H, true },
	/* LIKE */
	{ "s LIKE 'abc'", H, true },
	{ "s LIKE 'a%'", H, true },
	{ "s LIKE '%c'", H, true },
	{ "s LIKE '%b%'", H, true },
	{ "s LIKE '%'", H, true },
	{ "e LIKE '%'", H, true },
	{ "e LIKE '_'", H, false },
	{ "s LIKE 'a_c'", H, true },
	{ "s LIKE '___'", H, true },
	{ "s LIKE '__'", H, false },
	{ "s LIKE '____'", H, false },
	{ "s LIKE 'b%'", H, false },
	{ "s LIKE 'A%'", H, false },
	{ "s LIKE '%%%c%%'", H, true },
	{ "s LIKE 'a%b%c'", H, true },
	{ "s LIKE 'a%c%c'", H, false },
	{ "s NOT LIKE 'a%'", H, false },
	{ "s NOT LIKE 'x%'", H, true },
	{ "u LIKE '%'", H, false },
	{ "u NOT LIKE '%'", H, false },
	{ "u8 LIKE 'h_llo'", H, true },              /* '_' is one UTF-8 character */
	{ "u8 LIKE 'h__llo'", H, false },
	{ "v LIKE '100!%' ESCAPE '!'", "v:100%", true },
	{ "v LIKE '100!%' ESCAPE '!'", "v:1000", false },
	{ "v LIKE '%!_%' ESCAPE '!'", "v:a_b", true },
	{ "v LIKE '%!_%' ESCAPE '!'", "v:ab", false },
	{ "v LIKE 'a!!b' ESCAPE '!'", "v:a!b", true },
	{ "v LIKE 'a\\%' ESCAPE '\\'", "v:a%", true },
	{ "v LIKE 'a\\%' ESCAPE '\\'", "v:ab", false },
	{ "v LIKE '%%' ESCAPE '%'", "v:%", true },   /* '%' escapes itself */
	{ "v LIKE '%%' ESCAPE '%'", "v:x", false },
	{ "v LIKE 'it''%'", "v:it's", true },
	{ "v LIKE '%a%a%a%b'", "v:aaaaaaaaaaaaaaaab", true },
	{ "v LIKE '%a%a%a%b'", "v:aaaaaaaaaaaaaaaa", false },
	/* BETWEEN */
	{ "p BETWEEN 1 AND 9", H, true },
	{ "p BETWEEN 7 AND 7", H, true },
	{ "p BETWEEN 8 AND 9", H, false },
	{ "p BETWEEN 9 AND 1", H, false },
	{ "p NOT BETWEEN 8 AND 9", H, true },
	{ "p NOT BETWEEN 1 AND 9", H, false },
	{ "p BETWEEN z + 1 AND p * 2", H, true },
	{ "u BETWEEN 1 AND 9", H, false },
	{ "u NOT BETWEEN 1 AND 9", H, false },
	{ "s BETWEEN 1 AND 9", H, false },
	{ "p BETWEEN u AND 5", H, false },           /* FALSE AND UNKNOWN */
	{ "p NOT BETWEEN u AND 5", H, true },
	{ "p BETWEEN u AND 9", H, false },           /* UNKNOWN */
	{ "p NOT BETWEEN u AND 9", H, false },
	{ "p BETWEEN 1 AND 9 AND s = 'abc'", H, true },
	/* identifiers */
	{ "$a_1 = 1", "$a_1:1", true },
	{ "_x = 1", "_x:1", true },
	{ "a.b.c = 'd'", "a.b.c:d", true },
	{ "a - b = 1", "a:3\nb:2", true },
	{ "p-1 = 6", H, false },                     /* one identifier "p-1", absent */
	{ "p-1 = 6", "p-1:6", true },
	{ "p - 1 = 6", H, true },
	{ "\t p\n=\r7 ", H, true },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void
test_match_table(void **state)
{
	(void)state;
	int bad = 0;
	for (size_t i = 0; i < NCASES; i++) {
		char err[128];
		struct selector *s = selector_compile(cases[i].sel, strlen(cases[i].sel), err,
		    sizeof(err));
		if (s == NULL) {
			print_error("%s: does not compile: %s\n", cases[i].sel, err);
			bad++;
			continue;
		}
		bool m = selector_match(s, lookup, (void *)cases[i].hdrs);
		if (m != cases[i].match) {
			print_error("%s: %s, want %s\n", cases[i].sel, m ? "matches" : "no match",
			    cases[i].match ? "a match" : "no match");
			bad++;
		}
		selector_free(s);
	}
	assert_int_equal(bad, 0);
}

static const struct {
	const char *sel;
	const char *err;
} errors[] = {
	{ "", "selector: position 1: empty selector" },
	{ "   ", "selector: position 4: empty selector" },
	{ "s = 'abc", "selector: position 5: unterminated string" },
	{ "s = 'it''s", "selector: position 5: unterminated string" },
	{ "(p = 7", "selector: position 7: expected ')'" },
	{ "(p = 7 AND (s = 'a')", "selector: position 21: expected ')'" },
	{ "p = 7)", "selector: position 6: unexpected ')'" },
	{ "p = 7 AND", "selector: position 10: unexpected end" },
	{ "AND p = 7", "selector: position 1: expected a value" },
	{ "p = 7 OR OR p = 8", "selector: position 10: expected a value" },
	{ "p = ", "selector: position 5: unexpected end" },
	{ "p = 7 s = 8", "selector: position 7: expected AND, OR or the end" },
	{ "s LIKE 'a' ESCAPE 'ab'", "selector: position 19: ESCAPE needs exactly one character" },
	{ "s LIKE 'a' ESCAPE ''", "selector: position 19: ESCAPE needs exactly one character" },
	{ "s LIKE 'a!' ESCAPE '!'", "selector: position 8: the pattern ends in its ESCAPE character" },
	{ "s LIKE x", "selector: position 8: expected a string" },
	{ "s IN 'a'", "selector: position 6: expected '('" },
	{ "s IN ('a' 'b')", "selector: position 11: expected ')'" },
	{ "s IN ('a', 1)", "selector: position 12: expected a string" },
	{ "s IN ()", "selector: position 7: expected a string" },
	{ "1 IN ('a')", "selector: position 3: IN needs an identifier" },
	{ "'a' LIKE 'a'", "selector: position 5: LIKE needs an identifier" },
	{ "s IS 1", "selector: position 6: expected NULL" },
	{ "s NOT = 1", "selector: position 7: expected IN, LIKE or BETWEEN" },
	{ "p BETWEEN 1 OR 2", "selector: position 13: expected AND" },
	{ "p BETWEEN 'a' AND 2", "selector: position 11: BETWEEN needs a number" },
	{ "s < 'abc'", "selector: position 3: strings and booleans compare only with = and <>" },
	{ "t >= TRUE", "selector: position 3: strings and booleans compare only with = and <>" },
	{ "'a' = 1", "selector: position 5: comparing values of different types" },
	{ "TRUE = 1", "selector: position 6: comparing values of different types" },
	{ "'a' + 1 = 2", "selector: position 1: + needs a number" },
	{ "-'a' = 2", "selector: position 2: unary - needs a number" },
	{ "p = 1 AND 7", "selector: position 11: expected a condition" },
	{ "NOT 'a'", "selector: position 5: expected a condition" },
	{ "7", "selector: position 1: expected a condition" },
	{ "p + 1", "selector: position 3: expected a condition" },
	{ "p = #", "selector: position 5: unexpected character '#'" },
	{ "p = 7 AND AND", "selector: position 11: expected a value" },
	{ "p = 7 ESCAPE", "selector: position 7: expected AND, OR or the end" },
	{ "()", "selector: position 2: expected a value" },
};
#define NERRORS (sizeof(errors) / sizeof(errors[0]))

static void
test_error_table(void **state)
{
	(void)state;
	int bad = 0;
	for (size_t i = 0; i < NERRORS; i++) {
		char err[128] = "untouched";
		struct selector *s = selector_compile(errors[i].sel, strlen(errors[i].sel), err,
		    sizeof(err));
		if (s != NULL) {
			print_error("%s: compiles\n", errors[i].sel);
			selector_free(s);
			bad++;
		} else if (strcmp(err, errors[i].err) != 0) {
			print_error("%s: error '%s', want '%s'\n", errors[i].sel, err, errors[i].err);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

/* n opening parentheses around a condition, or n NOTs, or n signs. */
static char *
nested(const char *open, int n, const char *mid, const char *close)
{
	size_t len = (strlen(open) + strlen(close)) * (size_t)n + strlen(mid) + 1;
	char *s = malloc(len);
	assert_non_null(s);
	s[0] = '\0';
	for (int i = 0; i < n; i++)
		strcat(s, open);
	strcat(s, mid);
	for (int i = 0; i < n; i++)
		strcat(s, close);
	return s;
}

static void
test_nesting_limits(void **state)
{
	(void)state;
	char err[128];
	struct selector *s;

	char *ok = nested("(", SELECTOR_MAX_DEPTH - 1, "p = 7", ")");
	s = selector_compile(ok, strlen(ok), err, sizeof(err));
	assert_non_null(s);
	assert_true(selector_match(s, lookup, H));
	selector_free(s);
	free(ok);

	char *deep = nested("(", SELECTOR_MAX_DEPTH + 1, "p = 7", ")");
	assert_null(selector_compile(deep, strlen(deep), err, sizeof(err)));
	assert_string_equal(err, "selector: position 65: nested deeper than 64 levels");
	free(deep);

	char *nots = nested("NOT ", 100, "p = 7", "");
	assert_null(selector_compile(nots, strlen(nots), err, sizeof(err)));
	assert_string_equal(err, "selector: position 257: nested deeper than 64 levels");
	free(nots);

	/* The tree's depth counts too: 70 additions nest 70 levels. */
	char *sum = nested("", 1, "p", "");
	size_t len = strlen(sum);
	sum = realloc(sum, len + 70 * 4 + 8);
	assert_non_null(sum);
	for (int i = 0; i < 70; i++)
		strcat(sum, " + 1");
	strcat(sum, " = 77");
	assert_null(selector_compile(sum, strlen(sum), err, sizeof(err)));
	assert_non_null(strstr(err, "nested deeper than 64 levels"));
	free(sum);

	/* A long AND chain is a list, not a deep tree. */
	char *chain = nested("p = 7 AND ", 1000, "s = 'abc'", "");
	s = selector_compile(chain, strlen(chain), err, sizeof(err));
	assert_non_null(s);
	assert_true(selector_match(s, lookup, H));
	selector_free(s);
	free(chain);

	/* But not more than SELECTOR_MAX_NODES nodes. */
	char *many = nested("p = 7 OR ", 2000, "p = 7", "");
	assert_null(selector_compile(many, strlen(many), err, sizeof(err)));
	assert_non_null(strstr(err, "more than 4096 nodes"));
	free(many);
}

/* Only len bytes count: no NUL is needed, none is read past. */
static void
test_length_bounded(void **state)
{
	(void)state;
	char err[128];
	const char text[] = "p = 7 garbage";
	struct selector *s = selector_compile(text, 5, err, sizeof(err));
	assert_non_null(s);
	assert_true(selector_match(s, lookup, H));
	selector_free(s);
	/* A short or absent error buffer is fine. */
	char tiny[8];
	assert_null(selector_compile("(", 1, tiny, sizeof(tiny)));
	assert_string_equal(tiny, "selecto");
	assert_null(selector_compile("(", 1, NULL, 0));
	selector_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match_table),
		cmocka_unit_test(test_error_table),
		cmocka_unit_test(test_nesting_limits),
		cmocka_unit_test(test_length_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
