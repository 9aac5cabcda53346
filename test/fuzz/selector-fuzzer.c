/* selector-fuzzer.c - libFuzzer harness for message selectors (selector.c).
 *
 * Input: the selector's text up to the first 0xFF byte, then headers as
 * "name:value" lines.  The text is compiled twice (the same answer and the
 * same error both times); a failure must name a position.  When it
 * compiles it is matched against the headers, and so are "(text)" and
 * "NOT (text)" when they compile (the extra level may pass the nesting
 * limit): "(text)" matches exactly when the text does, and under
 * three-valued logic a condition and its NOT are never both TRUE.
 * Violations abort(); ASan and UBSan catch the rest. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eft/selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZER "selector-fuzzer"
#include "check.h"

struct headers {
	const char *d;
	size_t n;
};

/* The first line "name:value" whose name is name. */
static bool
lookup(void *arg, const char *name, size_t len, const char **value, size_t *vlen)
{
	const struct headers *h = arg;
	size_t i = 0;
	while (i < h->n) {
		const char *line = h->d + i;
		const char *end = memchr(line, '\n', h->n - i);
		size_t n = end ? (size_t)(end - line) : h->n - i;
		const char *colon = memchr(line, ':', n);
		if (colon != NULL && (size_t)(colon - line) == len && memcmp(line, name, len) == 0) {
			*value = colon + 1;
			*vlen = n - (size_t)(colon + 1 - line);
			return true;
		}
		i += n + 1;
	}
	return false;
}

/* Compile and match; -1 if it does not compile. */
static int
try(const char *text, size_t len, struct headers *h)
{
	char err[128];
	struct selector *s = selector_compile(text, len, err, sizeof(err));
	if (s == NULL) {
		CHECK(strncmp(err, "selector: position ", 19) == 0, "error '%s'", err);
		return -1;
	}
	bool m = selector_match(s, lookup, h);
	CHECK(selector_match(s, lookup, h) == m, "a second match differs");
	selector_free(s);
	return m;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *ff = memchr(data, 0xff, size);
	size_t len = ff ? (size_t)(ff - data) : size;
	struct headers h = { ff ? (const char *)ff + 1 : "", ff ? size - len - 1 : 0 };
	const char *text = (const char *)data;

	char err1[128], err2[128];
	struct selector *s1 = selector_compile(text, len, err1, sizeof(err1));
	struct selector *s2 = selector_compile(text, len, err2, sizeof(err2));
	CHECK((s1 == NULL) == (s2 == NULL), "compiled once but not twice");
	if (s1 == NULL) {
		CHECK(strcmp(err1, err2) == 0, "errors differ: '%s', '%s'", err1, err2);
		CHECK(strncmp(err1, "selector: position ", 19) == 0, "error '%s'", err1);
		return 0;
	}
	bool m = selector_match(s1, lookup, &h);
	CHECK(selector_match(s2, lookup, &h) == m, "two compilations match differently");
	selector_free(s1);
	selector_free(s2);

	char *buf = malloc(len + 8);
	if (buf == NULL)
		return 0;
	memcpy(buf, "NOT (", 5);
	memcpy(buf + 5, text, len);
	buf[5 + len] = ')';
	int paren = try(buf + 4, len + 2, &h);
	int negated = try(buf, len + 6, &h);
	free(buf);
	CHECK(paren < 0 || paren == m, "(text) is %d, text %d", paren, m);
	CHECK(negated < 0 || !(negated && m), "both the text and its NOT match");
	return 0;
}
