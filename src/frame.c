/* frame.c - command and header names, and the escaping rules of STOMP 1.1
 * (\n \c \\) and 1.2 (also \r).  STOMP 1.0 has no escaping at all. */
#include <string.h>
#include <strings.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "eft/frame.h"

static const char *const cmd_names[CMD_COUNT] = {
	[CMD_UNKNOWN] = "UNKNOWN",
	[CMD_CONNECT] = "CONNECT",
	[CMD_STOMP] = "STOMP",
	[CMD_SEND] = "SEND",
	[CMD_SUBSCRIBE] = "SUBSCRIBE",
	[CMD_UNSUBSCRIBE] = "UNSUBSCRIBE",
	[CMD_ACK] = "ACK",
	[CMD_NACK] = "NACK",
	[CMD_BEGIN] = "BEGIN",
	[CMD_COMMIT] = "COMMIT",
	[CMD_ABORT] = "ABORT",
	[CMD_DISCONNECT] = "DISCONNECT",
};

static const char *const hdr_names[HDR_COUNT] = {
	[HDR_ACCEPT_VERSION] = "accept-version",
	[HDR_ACK] = "ack",
	[HDR_CONTENT_LENGTH] = "content-length",
	[HDR_CONTENT_TYPE] = "content-type",
	[HDR_DESTINATION] = "destination",
	[HDR_HEART_BEAT] = "heart-beat",
	[HDR_HOST] = "host",
	[HDR_ID] = "id",
	[HDR_LOGIN] = "login",
	[HDR_MESSAGE_ID] = "message-id",
	[HDR_PASSCODE] = "passcode",
	[HDR_RECEIPT] = "receipt",
	[HDR_REPLY_TO] = "reply-to",
	[HDR_SUBSCRIPTION] = "subscription",
	[HDR_TRANSACTION] = "transaction",
	[HDR_PREFETCH_COUNT] = "prefetch-count",
	[HDR_PRIORITY] = "priority",
	[HDR_EXPIRES] = "expires",
	[HDR_EXPIRATION] = "expiration",
	[HDR_SELECTOR] = "selector",
	[HDR_SCHEDULED] = "AMQ_SCHEDULED_DELAY", /* and the others (frame.h) */
};

/* A name longer than the common ones: the schedule headers
 * AMQ_SCHEDULED_DELAY, _PERIOD, _REPEAT and _CRON (frame.h: HDR_SCHEDULED),
 * out of the common lookup's way. */
static __attribute__((noinline)) enum hdr_id
hdr_lookup_long(const char *name, size_t len)
{
	if (len < 18 || len > 20 || memcmp(name, "AMQ_SCHEDULED_", 14) != 0)
		return HDR_OTHER;
	const char *rest = name + 14;
	len -= 14;
	if ((len == 5 && memcmp(rest, "DELAY", 5) == 0) ||
	    (len == 6 && (memcmp(rest, "PERIOD", 6) == 0 || memcmp(rest, "REPEAT", 6) == 0)) ||
	    (len == 4 && memcmp(rest, "CRON", 4) == 0))
		return HDR_SCHEDULED;
	return HDR_OTHER;
}

static enum frame_cmd
cmd_if(const char *name, size_t len, enum frame_cmd c)
{
	const char *n = cmd_names[c];
	return strlen(n) == len && memcmp(n, name, len) == 0 ? c : CMD_UNKNOWN;
}

enum frame_cmd
frame_cmd_lookup(const char *name, size_t len)
{
	/* Looked up once per frame: the first letter picks the candidates. */
	if (len < 3)
		return CMD_UNKNOWN;
	switch (name[0]) {
	case 'S':
		if (name[1] == 'E')
			return cmd_if(name, len, CMD_SEND);
		if (len == 5)
			return cmd_if(name, len, CMD_STOMP);
		return cmd_if(name, len, CMD_SUBSCRIBE);
	case 'A':
		return len == 3 ? cmd_if(name, len, CMD_ACK) : cmd_if(name, len, CMD_ABORT);
	case 'N':
		return cmd_if(name, len, CMD_NACK);
	case 'B':
		return cmd_if(name, len, CMD_BEGIN);
	case 'C':
		return len == 6 ? cmd_if(name, len, CMD_COMMIT) : cmd_if(name, len, CMD_CONNECT);
	case 'U':
		return cmd_if(name, len, CMD_UNSUBSCRIBE);
	case 'D':
		return cmd_if(name, len, CMD_DISCONNECT);
	default:
		return CMD_UNKNOWN;
	}
}

const char *
frame_cmd_name(enum frame_cmd cmd)
{
	return (cmd >= 0 && cmd < CMD_COUNT) ? cmd_names[cmd] : "UNKNOWN";
}

enum hdr_id
frame_hdr_lookup(const char *name, size_t len)
{
	if (len < 2 || len > 15)
		return len > 15 ? hdr_lookup_long(name, len) : HDR_OTHER;
	switch (name[0]) {
	case 'a':
		if (len == 3 && memcmp(name, "ack", 3) == 0)
			return HDR_ACK;
		if (len == 14 && memcmp(name, "accept-version", 14) == 0)
			return HDR_ACCEPT_VERSION;
		break;
	case 'c':
		if (len == 14 && memcmp(name, "content-length", 14) == 0)
			return HDR_CONTENT_LENGTH;
		if (len == 12 && memcmp(name, "content-type", 12) == 0)
			return HDR_CONTENT_TYPE;
		break;
	case 'd':
		if (len == 11 && memcmp(name, "destination", 11) == 0)
			return HDR_DESTINATION;
		break;
	case 'e':
		if (len == 7 && memcmp(name, "expires", 7) == 0)
			return HDR_EXPIRES;
		if (len == 10 && memcmp(name, "expiration", 10) == 0)
			return HDR_EXPIRATION;
		break;
	case 'h':
		if (len == 10 && memcmp(name, "heart-beat", 10) == 0)
			return HDR_HEART_BEAT;
		if (len == 4 && memcmp(name, "host", 4) == 0)
			return HDR_HOST;
		break;
	case 'i':
		if (len == 2 && name[1] == 'd')
			return HDR_ID;
		break;
	case 'l':
		if (len == 5 && memcmp(name, "login", 5) == 0)
			return HDR_LOGIN;
		break;
	case 'm':
		if (len == 10 && memcmp(name, "message-id", 10) == 0)
			return HDR_MESSAGE_ID;
		break;
	case 'p':
		if (len == 8 && memcmp(name, "passcode", 8) == 0)
			return HDR_PASSCODE;
		if (len == 14 && memcmp(name, "prefetch-count", 14) == 0)
			return HDR_PREFETCH_COUNT;
		if (len == 8 && memcmp(name, "priority", 8) == 0)
			return HDR_PRIORITY;
		break;
	case 'r':
		if (len == 7 && memcmp(name, "receipt", 7) == 0)
			return HDR_RECEIPT;
		if (len == 8 && memcmp(name, "reply-to", 8) == 0)
			return HDR_REPLY_TO;
		break;
	case 's':
		if (len == 12 && memcmp(name, "subscription", 12) == 0)
			return HDR_SUBSCRIPTION;
		if (len == 8 && memcmp(name, "selector", 8) == 0)
			return HDR_SELECTOR;
		break;
	case 't':
		if (len == 11 && memcmp(name, "transaction", 11) == 0)
			return HDR_TRANSACTION;
		break;
	case 'x':
		if (len == 7 && memcmp(name, "x-delay", 7) == 0)
			return HDR_SCHEDULED;
		break;
	}
	return HDR_OTHER;
}

const char *
frame_hdr_name(enum hdr_id id)
{
	return (id >= 0 && id < HDR_COUNT) ? hdr_names[id] : "";
}

int
frame_parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t n = 0;
	if (len == 0 || len > 19)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	*out = n;
	return 0;
}

/* Per version, the escape letter for each byte, or 0 if it stands for
 * itself: a table lookup keeps the per-byte cost to one load. */
static const char escape_table[STOMP_VERSIONS][256] = {
	[STOMP_1_1] = { ['\n'] = 'n', [':'] = 'c', ['\\'] = '\\' },
	[STOMP_1_2] = { ['\n'] = 'n', [':'] = 'c', ['\\'] = '\\', ['\r'] = 'r' },
};

static inline char
escape_char(enum stomp_version v, char c)
{
	return escape_table[v][(unsigned char)c];
}

bool
frame_needs_escape(enum stomp_version v, const char *s, size_t len)
{
	if (v == STOMP_1_0)
		return false;
	size_t i = 0;
#ifdef __SSE2__
	/* Every SEND's headers are checked: 16 bytes per step for the 1.2 set
	 * (a superset of 1.1's; a 1.1 hit on \r is rechecked below). */
	const __m128i nl = _mm_set1_epi8('\n'), colon = _mm_set1_epi8(':'),
		      bs = _mm_set1_epi8('\\'), cr = _mm_set1_epi8('\r');
	for (; i + 16 <= len; i += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(s + i));
		__m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, nl), _mm_cmpeq_epi8(x, colon)),
		    _mm_or_si128(_mm_cmpeq_epi8(x, bs), _mm_cmpeq_epi8(x, cr)));
		if (_mm_movemask_epi8(hit) != 0)
			break;
	}
#endif
	const char *t = escape_table[v];
	const unsigned char *u = (const unsigned char *)s;
	for (; i < len; i++)
		if (t[u[i]])
			return true;
	return false;
}

size_t
frame_escaped_len(enum stomp_version v, const char *s, size_t len)
{
	size_t n = len;
	for (size_t i = 0; i < len; i++)
		if (escape_char(v, s[i]))
			n++;
	return n;
}

char *
frame_escape(enum stomp_version v, char *dst, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char e = escape_char(v, s[i]);
		if (e) {
			*dst++ = '\\';
			*dst++ = e;
		} else {
			*dst++ = s[i];
		}
	}
	return dst;
}

int
frame_unescape(enum stomp_version v, char *s, uint32_t *len)
{
	if (v == STOMP_1_0)
		return 0;
	char *bs = memchr(s, '\\', *len);
	if (bs == NULL)
		return 0;
	char *out = bs, *in = bs, *end = s + *len;
	while (in < end) {
		if (*in != '\\') {
			*out++ = *in++;
			continue;
		}
		if (in + 1 == end)
			return -1;
		switch (in[1]) {
		case 'n': *out++ = '\n'; break;
		case 'c': *out++ = ':'; break;
		case '\\': *out++ = '\\'; break;
		case 'r':
			if (v != STOMP_1_2)
				return -1;
			*out++ = '\r';
			break;
		default:
			return -1;
		}
		in += 2;
	}
	*len = (uint32_t)(out - s);
	return 0;
}

const struct header *
frame_find(const struct frame *f, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < f->nhdr; i++)
		if (f->hdr[i].name_len == len && memcmp(f->hdr[i].name, name, len) == 0)
			return &f->hdr[i];
	return NULL;
}

bool
frame_header_is(const struct frame *f, const char *name, const char *value)
{
	const struct header *h = frame_find(f, name);
	return h != NULL && h->value_len == strlen(value) && memcmp(h->value, value, h->value_len) == 0;
}

bool
frame_header_is_nocase(const struct frame *f, const char *name, const char *value)
{
	const struct header *h = frame_find(f, name);
	/* Exact first: the usual lower case costs what frame_header_is does
	 * (persistent:true is read on every SEND with a data-dir). */
	return h != NULL && h->value_len == strlen(value) &&
	    (memcmp(h->value, value, h->value_len) == 0 ||
	    strncasecmp(h->value, value, h->value_len) == 0);
}
