/* cluster_wire.c - names, payloads and JSON fields for the NATS cluster
 * (cluster_wire.h).  No sockets, no libnats. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eft/cluster_wire.h"
#include "eft/frame.h"
#include "eft/subject.h"

static bool
token_safe(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '_';
}

/* name escaped, appended to out's first n bytes (cap in all), NUL-terminated:
 * the new length, or 0 if it would not fit. */
static size_t
escape_at(char *out, size_t cap, size_t n, const char *name, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		size_t need = token_safe(c) ? 1 : 3;
		if (n + need >= cap)
			return 0;
		if (need == 1) {
			out[n++] = (char)c;
		} else {
			out[n++] = '=';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = '\0';
	return n;
}

uint32_t
cluster_queue_partition(const char *name, size_t len, uint32_t parts)
{
	/* FNV-1a, 32 bits */
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 16777619u;
	}
	return parts > 1 ? h % parts : 0;
}

size_t
cluster_queue_subject(char *out, size_t cap, uint32_t partition, const char *name, size_t len)
{
	/* "eft.q.PARTITION.": no snprintf, this runs for every queue SEND */
	char digits[24];
	size_t nd = msg_format_u64(digits, partition);
	size_t n = 6 + nd + 1;
	if (n >= cap)
		return 0;
	memcpy(out, "eft.q.", 6);
	memcpy(out + 6, digits, nd);
	out[n - 1] = '.';
	out[n] = '\0';
	return escape_at(out, cap, n, name, len);
}

#define DESCRIPTION_PREFIX "eft queues: partition "

size_t
cluster_queue_stream_description(char *out, size_t cap, uint32_t partition, uint32_t parts)
{
	int n = snprintf(out, cap, DESCRIPTION_PREFIX "%" PRIu32 " of %" PRIu32, partition, parts);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

bool
cluster_queue_streams_of(const char *desc, size_t len, uint32_t *parts)
{
	size_t plen = strlen(DESCRIPTION_PREFIX);
	if (len <= plen || memcmp(desc, DESCRIPTION_PREFIX, plen) != 0)
		return false;
	const char *p = desc + plen, *end = desc + len;
	while (p < end && *p >= '0' && *p <= '9')
		p++;
	if (end - p < 5 || memcmp(p, " of ", 4) != 0)
		return false;
	uint64_t n = 0;
	for (p += 4; p < end; p++) {
		if (*p < '0' || *p > '9' || (n = n * 10 + (uint64_t)(*p - '0')) > UINT32_MAX)
			return false;
	}
	if (n == 0)
		return false;
	*parts = (uint32_t)n;
	return true;
}

size_t
cluster_escape(char *out, size_t cap, const char *prefix, const char *name, size_t len)
{
	size_t n = strlen(prefix);
	if (n >= cap)
		return 0;
	memcpy(out, prefix, n);
	out[n] = '\0';
	return escape_at(out, cap, n, name, len);
}

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long
cluster_unescape(char *token, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)token[i];
		if (c != '=') {
			if (!token_safe(c))
				return -1;
			token[o++] = (char)c;
			continue;
		}
		if (i + 2 >= len)
			return -1;
		int hi = hex_value(token[i + 1]), lo = hex_value(token[i + 2]);
		if (hi < 0 || lo < 0)
			return -1;
		token[o++] = (char)(hi << 4 | lo);
		i += 2;
	}
	return (long)o;
}

/* ---- topic subjects: one token per element ---- */

/* text (static, never empty) appended to out's first n bytes: the new
 * length, or 0 if it would not fit. */
static size_t
append(char *out, size_t cap, size_t n, const char *text)
{
	size_t len = strlen(text);
	if (n + len >= cap)
		return 0;
	memcpy(out + n, text, len + 1);
	return n + len;
}

/* One element of a name as its token: escaped, or "=" if empty. */
static size_t
append_element(char *out, size_t cap, size_t n, const char *e, size_t elen)
{
	return elen == 0 ? append(out, cap, n, "=") : escape_at(out, cap, n, e, elen);
}

static size_t
element_end(const char *s, size_t len, size_t off)
{
	const char *dot = memchr(s + off, '.', len - off);
	return dot != NULL ? (size_t)(dot - s) : len;
}

size_t
cluster_topic_subject(char *out, size_t cap, const char *name, size_t len)
{
	size_t n = append(out, cap, 0, CLUSTER_TOPIC_PREFIX);
	for (size_t off = 0, end; n != 0 && off <= len; off = end + 1) {
		end = element_end(name, len, off);
		n = append_element(out, cap, n, name + off, end - off);
		if (n != 0)
			n = append(out, cap, n, ".");
	}
	return n != 0 ? append(out, cap, n, CLUSTER_TOPIC_END) : 0;
}

size_t
cluster_topic_filter(char *out, size_t cap, const char *pat, size_t len, bool *exact)
{
	int kind = subject_parse(pat, len, NULL);
	*exact = true;
	if (kind < 0)
		return 0;
	if (kind == 0)
		return cluster_topic_subject(out, cap, pat, len);
	size_t inner = subject_inner_hash(pat, len);
	*exact = inner == len;
	size_t n = append(out, cap, 0, CLUSTER_TOPIC_PREFIX);
	for (size_t off = 0, end; n != 0 && off <= len; off = end + 1) {
		end = element_end(pat, len, off);
		size_t elen = end - off;
		char w = elen == 1 ? pat[off] : '\0';
		/* '#' (the first of a final run, or one before the end, inexact):
		 * '>' takes the rest, the end token too; '>' (one or more): "*.>" */
		if (w == '#')
			return append(out, cap, n, ">");
		if (w == '>')
			return append(out, cap, n, "*.>");
		n = w == '*' ? append(out, cap, n, "*") : append_element(out, cap, n, pat + off, elen);
		if (n != 0)
			n = append(out, cap, n, ".");
	}
	return n != 0 ? append(out, cap, n, CLUSTER_TOPIC_END) : 0;
}

long
cluster_topic_name(const char *subject, size_t len, char *out, size_t cap)
{
	size_t plen = strlen(CLUSTER_TOPIC_PREFIX), elen = strlen(CLUSTER_TOPIC_END);
	if (len < plen + 1 + elen || memcmp(subject, CLUSTER_TOPIC_PREFIX, plen) != 0 ||
	    subject[len - elen - 1] != '.' || memcmp(subject + len - elen, CLUSTER_TOPIC_END,
	    elen) != 0)
		return -1;
	const char *tokens = subject + plen;
	size_t tlen = len - plen - elen - 1, o = 0;
	for (size_t off = 0, end; off <= tlen; off = end + 1) {
		end = element_end(tokens, tlen, off);
		size_t n = end - off;
		if (o + n + 1 > cap || n == 0)
			return -1;
		if (off > 0)
			out[o++] = '.';
		if (n == 1 && tokens[off] == '=')
			continue;      /* an empty element */
		memcpy(out + o, tokens + off, n);
		long un = cluster_unescape(out + o, n);
		if (un <= 0)
			return -1;
		o += (size_t)un;
	}
	return (long)o;
}

/* ---- message payloads ---- */

/* n bytes of v, little-endian, and back */
static void
put_le(char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (char)(v >> (8 * i));
}

static uint64_t
get_le(const char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | (unsigned char)p[i];
	return v;
}

size_t
cluster_msg_size(const struct msg *m)
{
	int nblocks = msg_nblocks(m);
	return CLUSTER_MSG_FIXED + 4 * (size_t)nblocks + msg_blocks_len(m) + m->body_len;
}

void
cluster_msg_encode(const struct msg *m, char *out)
{
	int nblocks = msg_nblocks(m);
	memcpy(out, CLUSTER_MSG_MAGIC, 4);
	out[4] = (char)((m->persistent ? 1 : 0) | (m->dead ? 2 : 0) | (m->redelivered ? 4 : 0) |
	    (m->now_or_never ? 8 : 0));
	out[5] = (char)m->priority;
	out[6] = (char)nblocks;
	out[7] = 0;
	put_le(out + 8, m->expires_ms, 8);
	char *p = out + CLUSTER_MSG_FIXED;
	for (int v = 0; v < nblocks; v++, p += 4)
		put_le(p, m->block_len[v], 4);
	size_t run;
	const char *data = msg_blocks_and_body(m, &run);
	memcpy(p, data, run);
}

static bool
has_message_id(const char *block, size_t len)
{
	const char *pos = block, *end = block + len, *line, *value;
	size_t n, vlen;
	while (msg_line_next(&pos, end, &line, &n))
		if (msg_line_is(line, n, "message-id", 10, &value, &vlen))
			return true;
	return false;
}

struct msg *
cluster_msg_decode(struct msg_pool *pool, const char *data, size_t len, uint64_t id, bool *bad)
{
	*bad = true;
	if (len < CLUSTER_MSG_FIXED || memcmp(data, CLUSTER_MSG_MAGIC, 4) != 0)
		return NULL;
	unsigned flags = (unsigned char)data[4], priority = (unsigned char)data[5];
	int nblocks = (unsigned char)data[6];
	if ((nblocks != 1 && nblocks != STOMP_VERSIONS) || priority >= MSG_PRIORITIES ||
	    flags > 15)
		return NULL;
	size_t at = CLUSTER_MSG_FIXED + 4 * (size_t)nblocks;
	if (len < at)
		return NULL;
	const char *blocks[STOMP_VERSIONS];
	uint32_t lens[STOMP_VERSIONS];
	for (int v = 0; v < nblocks; v++) {
		uint32_t bl = (uint32_t)get_le(data + CLUSTER_MSG_FIXED + 4 * v, 4);
		if (bl == 0 || bl > len - at || data[at + bl - 1] != '\n')
			return NULL;
		blocks[v] = data + at;
		lens[v] = bl;
		at += bl;
	}
	for (int v = 0; v < nblocks; v++)
		if (!has_message_id(blocks[v], lens[v]))
			return NULL;
	*bad = false;
	/* Copied in one allocation with id as its message-id. */
	struct msg *m = msg_restore_as(pool, id, nblocks, blocks, lens, data + at, len - at);
	if (m == NULL)
		return NULL;
	m->persistent = flags & 1;
	m->dead = (flags & 2) != 0;
	m->now_or_never = (flags & 8) != 0;
	m->priority = (uint8_t)priority;
	m->expires_ms = get_le(data + 8, 8);
	m->redelivered = (flags & 4) != 0;
	return m;
}

bool
cluster_msg_set_redelivered(char *payload, size_t len)
{
	if (len < CLUSTER_MSG_FIXED || memcmp(payload, CLUSTER_MSG_MAGIC, 4) != 0)
		return false;
	payload[4] = (char)(payload[4] | 4);
	return true;
}

/* ---- JSON fields ---- */

/* Where "key" is followed by a ':' (after blanks): the value's start. */
static const char *
json_value(const char *json, size_t len, const char *key)
{
	size_t klen = strlen(key);
	const char *end = json + len;
	for (const char *p = json; p + klen + 2 <= end; p++) {
		p = memchr(p, '"', (size_t)(end - p));
		if (p == NULL || p + klen + 2 > end)
			return NULL;
		if (memcmp(p + 1, key, klen) != 0 || p[klen + 1] != '"')
			continue;
		const char *v = p + klen + 2;
		while (v < end && (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r'))
			v++;
		if (v >= end || *v != ':')
			continue;
		v++;
		while (v < end && (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r'))
			v++;
		return v < end ? v : NULL;
	}
	return NULL;
}

bool
cluster_json_string(const char *json, size_t len, const char *key, const char **value,
    size_t *vlen)
{
	const char *v = json_value(json, len, key), *end = json + len;
	if (v == NULL || *v != '"')
		return false;
	const char *s = ++v;
	while (v < end && *v != '"')
		v += *v == '\\' ? 2 : 1;
	if (v >= end)
		return false;
	*value = s;
	*vlen = (size_t)(v - s);
	return true;
}

bool
cluster_json_int(const char *json, size_t len, const char *key, int64_t *value)
{
	const char *v = json_value(json, len, key), *end = json + len;
	if (v == NULL)
		return false;
	bool neg = *v == '-';
	v += neg;
	if (v >= end || *v < '0' || *v > '9')
		return false;
	int64_t n = 0;
	while (v < end && *v >= '0' && *v <= '9' && n < INT64_MAX / 10)
		n = n * 10 + (*v++ - '0');
	*value = neg ? -n : n;
	return true;
}

bool
cluster_json_member_int(const char *json, size_t len, const char *object, const char *key,
    int64_t *value)
{
	const char *v = json_value(json, len, object), *end = json + len;
	if (v == NULL || *v != '{')
		return false;
	const char *close = memchr(v, '}', (size_t)(end - v));
	return close != NULL && cluster_json_int(v, (size_t)(close - v + 1), key, value);
}

bool
cluster_json_error(const char *json, size_t len, int64_t *err_code, const char **desc,
    size_t *desc_len)
{
	const char *v = json_value(json, len, "error");
	if (v == NULL || *v != '{')
		return false;
	size_t rest = len - (size_t)(v - json);
	if (!cluster_json_int(v, rest, "err_code", err_code) &&
	    !cluster_json_int(v, rest, "code", err_code))
		*err_code = 0;
	if (!cluster_json_string(v, rest, "description", desc, desc_len)) {
		*desc = "";
		*desc_len = 0;
	}
	return true;
}

static const char *
json_blanks(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

long
cluster_json_subjects(const char *json, size_t len,
    void (*fn)(const char *subject, size_t len, uint64_t count, void *arg), void *arg)
{
	const char *end = json + len, *p = json_value(json, len, "state");
	if (p == NULL || *p != '{')
		return -1;
	/* Inside state: the config's "subjects" (an array) comes before it.
	 * No map (2.9 leaves it out when nothing is stored) is no entries. */
	p = json_value(p, (size_t)(end - p), "subjects");
	if (p == NULL || *p != '{')
		return 0;
	long n = 0;
	p = json_blanks(p + 1, end);
	if (p < end && *p == '}')
		return 0;
	while (p < end) {
		if (*p != '"')
			return -1;
		const char *key = ++p;
		while (p < end && *p != '"')
			p += *p == '\\' ? 2 : 1;
		if (p >= end)
			return -1;
		size_t klen = (size_t)(p - key);
		p = json_blanks(p + 1, end);
		if (p >= end || *p != ':')
			return -1;
		p = json_blanks(p + 1, end);
		if (p >= end || *p < '0' || *p > '9')
			return -1;
		uint64_t count = 0;
		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			uint64_t digit = (uint64_t)(*p - '0');
			if (count > (UINT64_MAX - digit) / 10)
				return -1;
			count = count * 10 + digit;
		}
		fn(key, klen, count, arg);
		n++;
		p = json_blanks(p, end);
		if (p >= end)
			return -1;
		if (*p == '}')
			return n;
		if (*p != ',')
			return -1;
		p = json_blanks(p + 1, end);
	}
	return -1;
}

/* The tokens of an ack subject, and which one is the consumer's:
 * v1: $JS ACK stream consumer delivered sseq cseq time pending (9 tokens);
 * v2: $JS ACK domain hash stream consumer delivered ... (11 or more). */
static bool
ack_tokens(const char *subject, const char **tok, size_t *ntok, size_t *consumer)
{
	if (strncmp(subject, "$JS.ACK.", 8) != 0)
		return false;
	*ntok = 0;
	for (const char *p = subject; *ntok < 16; ) {
		tok[(*ntok)++] = p;
		p = strchr(p, '.');
		if (p == NULL)
			break;
		p++;
	}
	if (*ntok == 9)
		*consumer = 3;
	else if (*ntok >= 11)
		*consumer = 5;
	else
		return false;
	return true;
}

/* A token of digits ending at '.': its value; false if there are none, or
 * something else ends it, or it is past 64 bits. */
static bool
ack_number(const char *t, uint64_t *value)
{
	uint64_t n = 0;
	const char *p = t;
	for (; *p >= '0' && *p <= '9'; p++) {
		uint64_t digit = (uint64_t)(*p - '0');
		if (n > (UINT64_MAX - digit) / 10)
			return false;
		n = n * 10 + digit;
	}
	if (p == t || *p != '.')
		return false;
	*value = n;
	return true;
}

bool
cluster_ack_parse(const char *subject, struct cluster_ack *ack)
{
	const char *tok[16];
	size_t ntok, at;
	if (!ack_tokens(subject, tok, &ntok, &at))
		return false;
	ack->consumer = tok[at];
	ack->consumer_len = (size_t)(tok[at + 1] - tok[at] - 1);
	ack->has_delivered = ack_number(tok[at + 1], &ack->delivered);
	ack->has_stream_seq = ack_number(tok[at + 2], &ack->stream_seq);
	ack->has_consumer_seq = ack_number(tok[at + 3], &ack->consumer_seq);
	return true;
}

size_t
cluster_held_format(char *out, size_t cap, const char *stream, const char *consumer,
    uint64_t seq)
{
	int n = snprintf(out, cap, "%s %s %" PRIu64, stream, consumer, seq);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

bool
cluster_held_parse(const char *data, size_t len, struct cluster_held *held)
{
	const char *end = data + len;
	const char *sp1 = memchr(data, ' ', len);
	if (sp1 == NULL || sp1 == data)
		return false;
	const char *consumer = sp1 + 1;
	const char *sp2 = memchr(consumer, ' ', (size_t)(end - consumer));
	if (sp2 == NULL || sp2 == consumer)
		return false;
	uint64_t seq;
	if (frame_parse_u64(sp2 + 1, (size_t)(end - sp2 - 1), &seq) != 0 || seq == 0)
		return false;
	held->stream = data;
	held->stream_len = (size_t)(sp1 - data);
	held->consumer = consumer;
	held->consumer_len = (size_t)(sp2 - consumer);
	held->seq = seq;
	return true;
}
