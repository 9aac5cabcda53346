/* address.c - which destination names eftd serves (see address.h). */
#include <string.h>

#include "eft/address.h"

bool
address_has_prefix(const char *name, size_t len, const char *prefix, size_t plen)
{
	return len >= plen && memcmp(name, prefix, plen) == 0;
}

/* The kind by prefix; the name after the prefix must not be empty. */
static inline bool
address_kind_of(const char *name, size_t len, enum address_kind *kind)
{
	if (len < 8 || name[0] != '/')
		return false;
	switch (name[1]) {
	case 'q':
		*kind = ADDR_QUEUE;
		return memcmp(name, "/queue/", 7) == 0;
	case 't':
		if (memcmp(name, "/topic/", 7) == 0) {
			*kind = ADDR_TOPIC;
			return true;
		}
		*kind = ADDR_TEMP_QUEUE;
		return len > TEMP_PREFIX_LEN && memcmp(name, TEMP_PREFIX, TEMP_PREFIX_LEN) == 0;
	case 'r':
		*kind = ADDR_REPLY_QUEUE;
		return len > REPLY_PREFIX_LEN && memcmp(name, REPLY_PREFIX, REPLY_PREFIX_LEN) == 0;
	default:
		return false;
	}
}

enum address_error
address_parse(const char *name, size_t len, bool unescaped, enum address_kind *kind)
{
	if (__builtin_expect(unescaped, 0) &&
	    (memchr(name, '\n', len) != NULL || memchr(name, '\r', len) != NULL))
		return ADDRESS_CRLF;
	return address_kind_of(name, len, kind) ? ADDRESS_OK : ADDRESS_UNKNOWN;
}
