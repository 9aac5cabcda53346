/* policy.c - destination name patterns for per-destination policies.
 *
 * Names and patterns are walked segment by segment, side by side, with no
 * allocation and no copy: a destination's policy is looked up once, when it
 * is made, but names come from clients and may be any bytes of any length.
 * '*' and '>' need a non-empty segment, so "/queue/a.*" does not match
 * "/queue/a." and "/queue/>" does not match "/queue/". */
#include <string.h>

#include "eft/policy.h"

/* The error text below says so. */
_Static_assert(POLICY_NAME_MAX == 256, "policy_pattern_check's 'longer than 255 bytes'");

static bool
is_sep(char c)
{
	return c == '/' || c == '.';
}

/* Bytes of s (n of them) before the first separator. */
static size_t
seg_len(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && !is_sep(s[i]))
		i++;
	return i;
}

bool
policy_match(const char *pattern, const char *name, size_t len)
{
	const char *p = pattern;
	size_t i = 0;
	for (;;) {
		size_t plen = strcspn(p, "/.");
		size_t nlen = seg_len(name + i, len - i);
		if (plen == 1 && p[0] == '>' && p[1] == '\0')
			return nlen > 0;
		if (plen == 1 && p[0] == '*') {
			if (nlen == 0)
				return false;
		} else if (plen != nlen || memcmp(p, name + i, plen) != 0)
			return false;
		p += plen;
		i += nlen;
		/* Both end here, or both go on past the same separator. */
		if (*p == '\0' || i == len)
			return *p == '\0' && i == len;
		if (*p != name[i])
			return false;
		p++;
		i++;
	}
}

const char *
policy_pattern_check(const char *pattern)
{
	static const char *const prefixes[] = { "/queue/", "/topic/", "/temp-queue/" };
	size_t len = strnlen(pattern, POLICY_NAME_MAX);
	if (len == POLICY_NAME_MAX)
		return "is longer than 255 bytes";
	for (const char *s = pattern; *s != '\0'; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return "holds a space or a control character";
	const char *rest = NULL;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(pattern, prefixes[i], strlen(prefixes[i])) == 0)
			rest = pattern + strlen(prefixes[i]);
	if (rest == NULL)
		return "does not start with /queue/, /topic/ or /temp-queue/";
	for (;;) {
		size_t n = strcspn(rest, "/.");
		if (n == 0)
			return "has an empty segment (two separators in a row, or nothing after one)";
		bool wild = memchr(rest, '*', n) != NULL || memchr(rest, '>', n) != NULL;
		if (wild && n > 1)
			return "has '*' or '>' inside a segment: they stand only for a whole segment";
		if (rest[0] == '>' && rest[1] != '\0')
			return "has '>' before its last segment: '>' may only end a pattern";
		if (rest[n] == '\0')
			return NULL;
		rest += n + 1;
	}
}
