/* policy.c - matching destination names against policy patterns (see
 * policy.h).  No allocation: a pattern is matched as it is written. */
#include <string.h>

#include "eft/policy.h"

static bool
is_sep(char c)
{
	return c == '/' || c == '.';
}

bool
policy_match(const char *pattern, const char *name, size_t len)
{
	size_t i = 0;
	bool seg_start = true;
	for (const char *p = pattern; *p != '\0'; p++) {
		bool whole = seg_start && (p[1] == '\0' || is_sep(p[1]));
		if (whole && *p == '>' && p[1] == '\0')
			return i < len; /* one or more segments: the rest */
		if (whole && *p == '*') {
			size_t start = i;
			while (i < len && !is_sep(name[i]))
				i++;
			if (i == start)
				return false;
			seg_start = false;
			continue;
		}
		if (i >= len || name[i] != *p)
			return false;
		seg_start = is_sep(*p);
		i++;
	}
	return i == len;
}

const char *
policy_pattern_check(const char *pattern)
{
	static const char *const kinds[] = { "/queue/", "/topic/", "/temp-queue/" };
	size_t n = strlen(pattern), prefix = 0;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		if (strncmp(pattern, kinds[k], strlen(kinds[k])) == 0)
			prefix = strlen(kinds[k]);
	if (prefix == 0)
		return "a pattern starts with /queue/, /topic/ or /temp-queue/";
	if (n >= POLICY_NAME_MAX)
		return "the pattern is too long";
	if (n == prefix)
		return "the pattern names no destination after its kind (use > for all of them)";
	for (size_t i = 0; i < n; i++) {
		char c = pattern[i];
		bool starts = i == 0 || is_sep(pattern[i - 1]), ends = i + 1 == n ||
		    is_sep(pattern[i + 1]);
		if ((unsigned char)c <= ' ' || c == 0x7f)
			return "a pattern may not hold spaces or control characters";
		if (is_sep(c) && i > 0 && is_sep(pattern[i - 1]))
			return "a pattern may not hold an empty segment";
		if (is_sep(c) && i + 1 == n)
			return "a pattern may not end with a separator";
		if ((c == '*' || c == '>') && (!starts || !ends))
			return "* and > stand for whole segments (between / or .)";
		if (c == '>' && i + 1 != n)
			return "> may only be the last segment";
	}
	return NULL;
}
