/* natsmatch.h - NATS's own subject matching, written apart from eftd's code:
 * the reference the topic filters of cluster_wire.h are checked against (the
 * unit test and the cluster fuzzer).  '*' is one token, '>' (last) one or
 * more. */
#ifndef EFT_TEST_NATSMATCH_H
#define EFT_TEST_NATSMATCH_H

#include <stdbool.h>
#include <string.h>

static inline bool
nats_match(const char *filter, const char *subject)
{
	for (;;) {
		size_t fl = strcspn(filter, "."), sl = strcspn(subject, ".");
		if (fl == 1 && filter[0] == '>')
			return true;        /* the subject has a token left: we are here */
		if (!(fl == 1 && filter[0] == '*') && (fl != sl || memcmp(filter, subject, fl) != 0))
			return false;
		if (filter[fl] == '\0' || subject[sl] == '\0')
			return filter[fl] == subject[sl];
		filter += fl + 1;
		subject += sl + 1;
	}
}

#endif
