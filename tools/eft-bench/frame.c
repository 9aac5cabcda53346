/* frame.c - STOMP frame parsing and building.
 *
 * The parser runs over large reads: memchr finds each line, and header
 * names are told apart by their first byte so the headers eft-bench does not
 * need cost one memchr each and nothing else.  When a frame is incomplete it
 * says how many bytes it needs (known from content-length), so a big body
 * arriving in pieces is not re-parsed on every read. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "frame.h"

#define MAX_HEADER_BLOCK (1u << 20) /* a broker sending more is broken */
#define MAX_BODY (1ull << 31)

/* Record header line [line, line+len) if it is one we read.  The first
 * occurrence of a repeated header wins, as the spec says. */
static void
header_note(struct frame *f, const char *line, size_t len)
{
#define IS(lit, id)                                                            \
	if (len >= sizeof(lit) - 1 && memcmp(line, lit, sizeof(lit) - 1) == 0) { \
		if (f->h[id].p == NULL) {                                          \
			f->h[id].p = line + sizeof(lit) - 1;                       \
			f->h[id].len = len - (sizeof(lit) - 1);                    \
		}                                                                  \
		return;                                                            \
	}
	switch (line[0]) {
	case 'a':
		IS("ack:", HDR_ACK);
		break;
	case 'c':
		IS("content-length:", HDR_CONTENT_LENGTH);
		IS("correlation-id:", HDR_CORRELATION_ID);
		break;
	case 'd':
		IS("destination:", HDR_DESTINATION);
		break;
	case 'm':
		IS("message-id:", HDR_MESSAGE_ID);
		IS("message:", HDR_MESSAGE);
		break;
	case 'r':
		IS("receipt-id:", HDR_RECEIPT_ID);
		IS("reply-to:", HDR_REPLY_TO);
		break;
	case 's':
		IS("subscription:", HDR_SUBSCRIPTION);
		IS("server:", HDR_SERVER);
		break;
	case 'v':
		IS("version:", HDR_VERSION);
		break;
	default:
		break;
	}
#undef IS
}

static enum frame_cmd
classify(const char *name, size_t len)
{
	if (len == 7 && memcmp(name, "MESSAGE", 7) == 0)
		return FRAME_MESSAGE;
	if (len == 7 && memcmp(name, "RECEIPT", 7) == 0)
		return FRAME_RECEIPT;
	if (len == 5 && memcmp(name, "ERROR", 5) == 0)
		return FRAME_ERROR;
	if (len == 9 && memcmp(name, "CONNECTED", 9) == 0)
		return FRAME_CONNECTED;
	return FRAME_OTHER;
}

static int
parse_len(struct hval v, uint64_t *out)
{
	uint64_t n = 0;
	if (v.len == 0 || v.len > 12)
		return -1;
	for (size_t i = 0; i < v.len; i++) {
		if (v.p[i] < '0' || v.p[i] > '9')
			return -1;
		n = n * 10 + (uint64_t)(v.p[i] - '0');
	}
	*out = n;
	return 0;
}

enum frame_status
frame_parse(const char *buf, size_t len, struct frame *f, size_t *used, const char **why)
{
	const char *p = buf, *end = buf + len;

	/* Heart-beats, and the EOLs a broker may put after a frame's NUL. */
	while (p < end && (*p == '\n' || *p == '\r')) {
		if (*p == '\r' && (p + 1 == end || p[1] != '\n'))
			break;
		p += *p == '\r' ? 2 : 1;
	}
	if (end - p < 2) {
		*used = len + 1;
		return FRAME_MORE;
	}
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	if (nl == NULL)
		goto more_headers;
	/* Not memset: clearing only the pointers is a few plain stores, and
	 * this runs for every frame. */
	for (int i = 0; i < HDR_COUNT; i++)
		f->h[i].p = NULL;
	f->name = p;
	f->name_len = (size_t)(nl - p);
	if (f->name_len > 0 && nl[-1] == '\r')
		f->name_len--;
	f->cmd = classify(f->name, f->name_len);

	const char *line = nl + 1;
	for (;;) {
		const char *le = line < end ? memchr(line, '\n', (size_t)(end - line)) : NULL;
		if (le == NULL)
			goto more_headers;
		size_t ll = (size_t)(le - line);
		if (ll > 0 && le[-1] == '\r')
			ll--;
		if (ll == 0) {
			line = le + 1;
			break;
		}
		header_note(f, line, ll);
		line = le + 1;
	}

	const char *body = line;
	size_t head = (size_t)(body - buf);
	if (f->h[HDR_CONTENT_LENGTH].p != NULL) {
		uint64_t clen;
		if (parse_len(f->h[HDR_CONTENT_LENGTH], &clen) != 0 || clen > MAX_BODY) {
			*why = "bad content-length header";
			return FRAME_BAD;
		}
		if ((uint64_t)(end - body) < clen + 1) {
			*used = head + (size_t)clen + 1;
			return FRAME_MORE;
		}
		if (body[clen] != '\0') {
			*why = "frame body is not followed by a NUL byte (content-length wrong?)";
			return FRAME_BAD;
		}
		f->body = body;
		f->body_len = (size_t)clen;
		*used = head + (size_t)clen + 1;
		return FRAME_OK;
	}
	const char *nul = memchr(body, '\0', (size_t)(end - body));
	if (nul == NULL) {
		*used = len + 1;
		return FRAME_MORE;
	}
	f->body = body;
	f->body_len = (size_t)(nul - body);
	*used = (size_t)(nul - buf) + 1;
	return FRAME_OK;

more_headers:
	if (len > MAX_HEADER_BLOCK) {
		*why = "no end of headers within 1 MB";
		return FRAME_BAD;
	}
	*used = len + 1;
	return FRAME_MORE;
}

int
frame_hval_is(struct hval v, const char *s)
{
	size_t n = strlen(s);
	return v.p != NULL && v.len == n && memcmp(v.p, s, n) == 0;
}

void
frame_unescape(char *out, size_t outlen, struct hval v)
{
	size_t o = 0;
	if (outlen == 0)
		return;
	for (size_t i = 0; v.p != NULL && i < v.len && o + 1 < outlen; i++) {
		char ch = v.p[i];
		if (ch == '\\' && i + 1 < v.len) {
			char e = v.p[++i];
			ch = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 'c' ? ':' : e;
		}
		out[o++] = ch;
	}
	out[o] = '\0';
}

void
frame_begin(struct buf *b, const char *command)
{
	size_t n = strlen(command);
	char *p = buf_reserve(b, n + 1);
	memcpy(p, command, n);
	p[n] = '\n';
	buf_commit(b, n + 1);
}

/* STOMP 1.2 header escaping of s[0, n) into dst; returns the end. */
static char *
escape(char *dst, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		switch (s[i]) {
		case '\n': *dst++ = '\\'; *dst++ = 'n'; break;
		case '\r': *dst++ = '\\'; *dst++ = 'r'; break;
		case ':': *dst++ = '\\'; *dst++ = 'c'; break;
		case '\\': *dst++ = '\\'; *dst++ = '\\'; break;
		default: *dst++ = s[i]; break;
		}
	}
	return dst;
}

static void
header_put(struct buf *b, const char *name, size_t nlen, const char *value, size_t vlen,
    int do_escape)
{
	char *start = buf_reserve(b, nlen + 2 * vlen + 2), *p = start;
	memcpy(p, name, nlen);
	p += nlen;
	*p++ = ':';
	if (do_escape) {
		p = escape(p, value, vlen);
	} else {
		memcpy(p, value, vlen);
		p += vlen;
	}
	*p++ = '\n';
	buf_commit(b, (size_t)(p - start));
}

void
frame_header(struct buf *b, const char *name, const char *value)
{
	header_put(b, name, strlen(name), value, strlen(value), 1);
}

void
frame_header_raw(struct buf *b, const char *name, struct hval value)
{
	header_put(b, name, strlen(name), value.p, value.len, 0);
}

void
frame_header_u64(struct buf *b, const char *name, uint64_t value)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%" PRIu64, value);
	header_put(b, name, strlen(name), num, (size_t)n, 0);
}

void
frame_header_line(struct buf *b, const char *line)
{
	const char *colon = strchr(line, ':');
	size_t nlen = colon ? (size_t)(colon - line) : strlen(line);
	const char *value = colon ? colon + 1 : "";
	header_put(b, line, nlen, value, strlen(value), 1);
}

void
frame_finish(struct buf *b, const char *body, size_t len)
{
	char *p = buf_reserve(b, len + 2);
	*p++ = '\n';
	if (len)
		memcpy(p, body, len);
	p[len] = '\0';
	buf_commit(b, len + 2);
}
