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

#define EXCHANGE_PREFIX "/exchange/"
#define EXCHANGE_PREFIX_LEN 10
#define AMQ_QUEUE_PREFIX "/amq/queue/"
#define AMQ_QUEUE_PREFIX_LEN 11

static bool
is(const char *s, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(s, word, len) == 0;
}

enum address_error
address_alias(const char *name, size_t len, enum address_kind *kind, struct address_alias *a)
{
	*a = (struct address_alias){ .kind = ALIAS_NONE };
	if (len > AMQ_QUEUE_PREFIX_LEN && address_has_prefix(name, len, AMQ_QUEUE_PREFIX,
	    AMQ_QUEUE_PREFIX_LEN)) {
		*kind = ADDR_QUEUE;
		*a = (struct address_alias){ ALIAS_QUEUE, QUEUE_PREFIX, name + AMQ_QUEUE_PREFIX_LEN,
		    QUEUE_PREFIX_LEN, len - AMQ_QUEUE_PREFIX_LEN };
		return ADDRESS_OK;
	}
	if (len <= EXCHANGE_PREFIX_LEN || !address_has_prefix(name, len, EXCHANGE_PREFIX,
	    EXCHANGE_PREFIX_LEN))
		return ADDRESS_UNKNOWN;
	/* /exchange/X or /exchange/X/KEY */
	const char *x = name + EXCHANGE_PREFIX_LEN;
	size_t xlen = len - EXCHANGE_PREFIX_LEN;
	const char *slash = memchr(x, '/', xlen);
	size_t nlen = slash ? (size_t)(slash - x) : xlen;
	const char *key = slash ? slash + 1 : NULL;
	size_t klen = slash ? xlen - nlen - 1 : 0;
	*kind = ADDR_TOPIC;
	if (is(x, nlen, "amq.fanout")) {
		*a = (struct address_alias){ ALIAS_FANOUT, "", name, 0, EXCHANGE_PREFIX_LEN + nlen };
		return ADDRESS_OK;
	}
	bool topic = is(x, nlen, "amq.topic"), direct = is(x, nlen, "amq.direct");
	if (!topic && !direct) {
		a->rest = x;
		a->rest_len = nlen;
		return ADDRESS_NO_EXCHANGE;
	}
	if (klen == 0)
		return ADDRESS_NO_KEY;
	if (topic)
		*a = (struct address_alias){ ALIAS_TOPIC, TOPIC_PREFIX, key, TOPIC_PREFIX_LEN, klen };
	else
		*a = (struct address_alias){ ALIAS_DIRECT, "", name, 0, len };
	return ADDRESS_OK;
}
