/* parser.c - incremental STOMP frame parser.
 *
 * States: skip heart-beat EOLs between frames, scan header lines until the
 * blank line, then collect the body (content-length bytes, or up to the first
 * NUL).  `scan` remembers how far each search got, so a frame arriving one
 * byte at a time is not rescanned.  The header block is split and unescaped
 * in place once it is complete, so header values point into the buffer. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "eft/parser.h"

#define PARSER_MIN_CAP 4096
/* Bytes kept free after the data, so a 16-byte load that starts inside the
 * data never leaves the buffer. */
#define PARSER_SLACK 16

/* One pass over a header line: where its first colon is (n if none), and
 * whether it holds a backslash, a CR or a second colon, any of which means
 * the header needs unescaping now or escaping for some receiver later. */
static inline size_t
scan_line(const char *line, size_t n, bool *special)
{
	size_t first = n;
	bool odd = false;
#ifdef __SSE2__
	const __m128i colon = _mm_set1_epi8(':'), bs = _mm_set1_epi8('\\'), cr = _mm_set1_epi8('\r');
	for (size_t i = 0; i < n; i += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(line + i));
		unsigned mc = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, colon));
		unsigned ms = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, bs),
		    _mm_cmpeq_epi8(x, cr)));
		if (n - i < 16) {
			unsigned keep = (1u << (n - i)) - 1;
			mc &= keep;
			ms &= keep;
		}
		if (ms)
			odd = true;
		if (mc && first == n) {
			first = i + (size_t)__builtin_ctz(mc);
			mc &= mc - 1;
		}
		if (mc)
			odd = true;
	}
#else
	for (size_t i = 0; i < n; i++) {
		char ch = line[i];
		if (ch == ':') {
			if (first == n)
				first = i;
			else
				odd = true;
		} else if (ch == '\\' || ch == '\r') {
			odd = true;
		}
	}
#endif
	*special = odd;
	return first;
}

/* The first '\n' or NUL from s on: strchrnul inlined, for lines of a few
 * dozen bytes, where a library call's set-up costs more than its search.
 * buf ends in a NUL sentinel followed by PARSER_SLACK defined bytes, so no
 * load leaves the buffer. */
static inline char *
find_line_end(char *s)
{
#ifdef __SSE2__
	const __m128i nl = _mm_set1_epi8('\n'), nul = _mm_setzero_si128();
	for (;; s += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)s);
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, nl),
		    _mm_cmpeq_epi8(x, nul)));
		if (m)
			return s + __builtin_ctz(m);
	}
#else
	return strchrnul(s, '\n');
#endif
}

void
parser_init(struct parser *p, const struct parser_limits *limits)
{
	memset(p, 0, sizeof(*p));
	p->limits = *limits;
	p->state = PARSER_EOL;
	p->version = STOMP_1_0;
}

void
parser_free(struct parser *p)
{
	free(p->buf);
	free(p->frame.hdr);
	p->buf = NULL;
	p->frame.hdr = NULL;
	p->cap = p->len = p->start = 0;
}

/* Keep what was parsed of the failing frame, so that the ERROR can carry its
 * receipt-id. */
static enum parser_result
failed(struct parser *p)
{
	p->partial = p->state == PARSER_BODY || (p->state == PARSER_HEADERS && p->nlines > 0);
	p->state = PARSER_FAILED;
	return PARSE_ERROR;
}

static enum parser_result
fail(struct parser *p, const char *why)
{
	snprintf(p->error, sizeof(p->error), "%s", why);
	p->broken = PARSER_LIMIT_NONE;
	return failed(p);
}

/* The settings behind the limits, by enum parser_limit_id. */
static const char *const limit_keys[] = {
	[PARSER_LIMIT_FRAME] = "max-frame-size",
	[PARSER_LIMIT_HEADERS] = "max-headers",
	[PARSER_LIMIT_LINE] = "max-header-line",
	[PARSER_LIMIT_BODY] = "max-body-size",
};

static size_t
limit_value(const struct parser *p, enum parser_limit_id id)
{
	switch (id) {
	case PARSER_LIMIT_FRAME: return p->limits.max_frame;
	case PARSER_LIMIT_HEADERS: return p->limits.max_headers;
	case PARSER_LIMIT_LINE: return p->limits.max_header_line;
	case PARSER_LIMIT_BODY: return p->limits.max_body;
	case PARSER_LIMIT_NONE: break;
	}
	return 0;
}

/* Fail on a configured limit, naming the setting and the size, so the client
 * (and the log) tell what to change.  The size is given exactly only when
 * content-length declared it: otherwise how much had arrived would depend on
 * how the input was split, and the same input must fail the same way. */
static enum parser_result
fail_limit(struct parser *p, const char *what, uint64_t declared, enum parser_limit_id id)
{
	const char *key = limit_keys[id];
	size_t limit = limit_value(p, id);
	if (declared > 0)
		snprintf(p->error, sizeof(p->error), "%s: %" PRIu64 " bytes (%s is %zu)", what,
		    declared, key, limit);
	else
		snprintf(p->error, sizeof(p->error), "%s: more than %zu bytes (%s is %zu)", what,
		    limit, key, limit);
	p->broken = id;
	return failed(p);
}

const struct frame *
parser_failed_frame(const struct parser *p)
{
	return p->state == PARSER_FAILED && p->partial ? &p->frame : NULL;
}

const char *
parser_error(const struct parser *p)
{
	return p->error;
}

const char *
parser_limit(const struct parser *p, size_t *limit)
{
	if (p->state != PARSER_FAILED || p->broken == PARSER_LIMIT_NONE)
		return NULL;
	*limit = limit_value(p, p->broken);
	return limit_keys[p->broken];
}

int
parser_awaits_nul(const struct parser *p)
{
	return p->state == PARSER_BODY && p->has_length && p->len == p->body_end;
}

int
parser_mid_frame(const struct parser *p)
{
	return p->state == PARSER_HEADERS || p->state == PARSER_BODY;
}

/* While a frame is arriving, the lines taken so far point into buf: when the bytes move, the pointers move with them.  `from` is the
 * old position of the bytes now at `to`. */
static void
rebase_frame(struct parser *p, const char *from, char *to)
{
	struct frame *f = &p->frame;
	if (p->state != PARSER_BODY && !(p->state == PARSER_HEADERS && p->nlines > 0))
		return;
	f->cmd_name = to + (f->cmd_name - from);
	for (size_t i = 0; i < f->nhdr; i++) {
		f->hdr[i].name = to + (f->hdr[i].name - from);
		f->hdr[i].value = to + (f->hdr[i].value - from);
	}
}

/* Drop consumed bytes from the front; offsets are relative to buf. */
static void
compact(struct parser *p)
{
	size_t s = p->start;
	if (s == 0)
		return;
	rebase_frame(p, p->buf + s, p->buf);
	memmove(p->buf, p->buf + s, p->len - s);
	p->len -= s;
	p->scan -= s;
	if (p->state == PARSER_HEADERS || p->state == PARSER_BODY)
		p->line_start -= s;
	if (p->state == PARSER_BODY) {
		p->body_start -= s;
		p->body_end -= s;
	}
	p->start = 0;
}

char *
parser_space(struct parser *p, size_t want, size_t *avail)
{
	if (p->start == p->len && p->state != PARSER_HEADERS && p->state != PARSER_BODY) {
		p->start = p->len = p->scan = 0;
	}
	/* A known body length: make room for the whole rest of the frame at once. */
	if (p->state == PARSER_BODY && p->has_length && p->body_end + 1 > p->len &&
	    p->body_end + 1 - p->len > want)
		want = p->body_end + 1 - p->len;
	want += 1 + PARSER_SLACK; /* the NUL sentinel, and room for 16-byte loads */
	if (p->cap - p->len < want && p->start > 0)
		compact(p);
	if (p->cap - p->len < want) {
		/* An empty buffer gets what is asked for (a read's worth, not twice
		 * that); a frame that outgrows its buffer doubles it. */
		size_t cap = p->cap;
		if (cap == 0)
			cap = (want + PARSER_MIN_CAP - 1) / PARSER_MIN_CAP * PARSER_MIN_CAP;
		while (cap - p->len < want)
			cap *= 2;
		/* Not realloc: the old block must stay readable to rebase from. */
		char *nbuf = malloc(cap);
		if (nbuf == NULL)
			return NULL;
		if (p->len > 0)
			memcpy(nbuf, p->buf, p->len);
		rebase_frame(p, p->buf, nbuf);
		free(p->buf);
		p->buf = nbuf;
		p->cap = cap;
	}
	/* The NUL sentinel, and defined bytes for vector loads that read past
	 * the data (compaction or growth may have moved them; a commit writes
	 * them again after what it adds). */
	memset(p->buf + p->len, 0, 1 + PARSER_SLACK);
	*avail = p->cap - p->len - 1 - PARSER_SLACK;
	return p->buf + p->len;
}

void
parser_commit(struct parser *p, size_t n)
{
	p->len += n;
	memset(p->buf + p->len, 0, 1 + PARSER_SLACK); /* see parser_space */
}

int
parser_feed(struct parser *p, const void *data, size_t n)
{
	size_t avail;
	char *dst = parser_space(p, n, &avail);
	if (dst == NULL)
		return -1;
	memcpy(dst, data, n);
	parser_commit(p, n);
	return 0;
}

void
parser_trim(struct parser *p)
{
	if (p->start == p->len && p->state == PARSER_EOL) {
		free(p->buf);
		p->buf = NULL;
		p->cap = p->len = p->start = p->scan = 0;
	}
}

/* One complete line of the header block: the command, or a header. */
static enum parser_result
take_line(struct parser *p, char *line, size_t n)
{
	struct frame *f = &p->frame;
	if (p->nlines == 0) {
		f->cmd_name = line;
		f->cmd_len = n;
		f->cmd = frame_cmd_lookup(line, n);
		/* CONNECT headers are never escaped. */
		p->escape = (f->cmd == CMD_CONNECT || f->cmd == CMD_STOMP) ? STOMP_1_0 : p->version;
		for (int i = 0; i < HDR_COUNT; i++)
			f->known[i] = -1;
		f->nhdr = 0;
		f->plain = true;
		return PARSE_NEED_MORE;
	}
	if (f->nhdr >= p->limits.max_headers) {
		snprintf(p->error, sizeof(p->error), "too many headers: over %zu (max-headers is %zu)",
		    p->limits.max_headers, p->limits.max_headers);
		p->broken = PARSER_LIMIT_HEADERS;
		return failed(p);
	}
	if (f->nhdr == p->hdr_cap) {
		size_t cap = p->hdr_cap ? p->hdr_cap * 2 : 16;
		struct header *h = realloc(f->hdr, cap * sizeof(*h));
		if (h == NULL)
			return fail(p, "out of memory");
		f->hdr = h;
		p->hdr_cap = cap;
	}
	bool special;
	size_t colon_at = scan_line(line, n, &special);
	if (colon_at == n)
		return fail(p, "malformed header line (no ':') in frame");
	char *colon = line + colon_at;
	struct header *h = &f->hdr[f->nhdr];
	h->name = line;
	h->name_len = (uint32_t)(colon - line);
	h->value = colon + 1;
	h->value_len = (uint32_t)(n - h->name_len - 1);
	/* A backslash, a CR or a second colon means some receiver will need
	 * this header escaped; most frames have none, and then messages skip
	 * the escaping step entirely. */
	if (special)
		f->plain = false;
	if (special && p->escape != STOMP_1_0 && memchr(line, '\\', n) != NULL &&
	    (frame_unescape(p->escape, h->name, &h->name_len) != 0 ||
	     frame_unescape(p->escape, h->value, &h->value_len) != 0))
		return fail(p, "undefined escape sequence in header");
	h->id = frame_hdr_lookup(h->name, h->name_len);
	if (h->id != HDR_OTHER && f->known[h->id] < 0)
		f->known[h->id] = (int32_t)f->nhdr;
	f->nhdr++;
	return PARSE_NEED_MORE;
}

/* The body's length the frame's content-length declares (*declared false
 * and 0 if it has none); PARSE_ERROR if it is no number. */
static inline enum parser_result
declared_length(struct parser *p, bool *declared, uint64_t *len)
{
	const struct header *cl = frame_get(&p->frame, HDR_CONTENT_LENGTH);
	*declared = cl != NULL;
	*len = 0;
	if (cl != NULL && frame_parse_u64(cl->value, cl->value_len, len) != 0)
		return fail(p, "content-length is not a number");
	return PARSE_NEED_MORE;
}

/* The blank line was seen: work out where the body ends. */
static enum parser_result
end_headers(struct parser *p)
{
	p->has_length = 0;
	bool declared;
	uint64_t body_len;
	if (declared_length(p, &declared, &body_len) == PARSE_ERROR)
		return PARSE_ERROR;
	if (declared) {
		size_t head = p->body_start - p->start;
		if (p->limits.max_body && body_len > p->limits.max_body)
			return fail_limit(p, "body too large", body_len, PARSER_LIMIT_BODY);
		if (body_len > p->limits.max_frame || head + body_len + 1 > p->limits.max_frame)
			return fail_limit(p, "frame too large", body_len > p->limits.max_frame ?
			    body_len : head + body_len + 1, PARSER_LIMIT_FRAME);
		p->has_length = 1;
		p->body_end = p->body_start + body_len;
	}
	p->scan = p->body_start;
	p->state = PARSER_BODY;
	return PARSE_NEED_MORE;
}

/* Take header lines as they complete.  buf[len] is always a NUL sentinel, so
 * one search (find_line_end) finds the end of a line or a NUL, whichever
 * comes first. */
static enum parser_result
scan_headers(struct parser *p)
{
	for (;;) {
		char *line = p->buf + p->line_start;
		char *q = find_line_end(p->buf + p->scan);
		if (*q == '\0') {
			if (q == p->buf + p->len) {
				p->scan = p->len;
				break;
			}
			/* A NUL where a header line should start ends a frame with no
			 * blank line; accept it as a frame with no body, unless its
			 * content-length promised one: messages carry the frame's
			 * content-length as the body's length. */
			if (q != line || p->nlines == 0)
				return fail(p, "NUL byte inside the frame's headers");
			if (p->line_start + 1 - p->start > p->limits.max_frame)
				return fail_limit(p, "frame too large", 0, PARSER_LIMIT_FRAME);
			bool declared;
			uint64_t body_len;
			if (declared_length(p, &declared, &body_len) == PARSE_ERROR)
				return PARSE_ERROR;
			if (body_len != 0)
				return fail(p, "frame ended after its headers, with no blank line, but its "
				    "content-length is not 0");
			p->body_start = p->line_start;
			p->has_length = 1;
			p->body_end = p->body_start;
			p->scan = p->body_start;
			p->state = PARSER_BODY;
			return PARSE_NEED_MORE;
		}
		size_t n = (size_t)(q - line);
		if (n > 0 && q[-1] == '\r')
			n--;
		if (n > p->limits.max_header_line)
			return fail_limit(p, "header line too long", 0, PARSER_LIMIT_LINE);
		p->scan = p->line_start = (size_t)(q + 1 - p->buf);
		if (n == 0) {
			p->body_start = p->scan;
			return end_headers(p);
		}
		if (take_line(p, line, n) == PARSE_ERROR)
			return PARSE_ERROR;
		p->nlines++;
	}
	/* The unfinished line: a trailing CR may yet be part of its CRLF. */
	size_t pending = p->len - p->line_start;
	if (pending > 0 && p->buf[p->len - 1] == '\r')
		pending--;
	if (pending > p->limits.max_header_line)
		return fail_limit(p, "header line too long", 0, PARSER_LIMIT_LINE);
	if (p->len - p->start > p->limits.max_frame)
		return fail_limit(p, "frame too large", 0, PARSER_LIMIT_FRAME);
	return PARSE_NEED_MORE;
}

enum parser_result
parser_next(struct parser *p, struct frame **out)
{
	for (;;) {
		switch (p->state) {
		case PARSER_FAILED:
			return PARSE_ERROR;
		case PARSER_EOL:
			while (p->start < p->len) {
				char c = p->buf[p->start];
				if (c == '\n') {
					p->start++;
				} else if (c == '\r') {
					if (p->start + 1 == p->len)
						return PARSE_NEED_MORE;
					if (p->buf[p->start + 1] != '\n')
						return fail(p, "stray carriage return between frames");
					p->start += 2;
				} else {
					break;
				}
			}
			if (p->start == p->len)
				return PARSE_NEED_MORE;
			p->state = PARSER_HEADERS;
			p->scan = p->line_start = p->start;
			p->nlines = 0;
			break;
		case PARSER_HEADERS: {
			enum parser_result r = scan_headers(p);
			if (r == PARSE_ERROR)
				return r;
			if (p->state == PARSER_HEADERS)
				return PARSE_NEED_MORE;
			break;
		}
		case PARSER_BODY: {
			size_t nul_at;
			if (p->has_length) {
				if (p->len <= p->body_end)
					return PARSE_NEED_MORE;
				if (p->buf[p->body_end] != '\0')
					return fail(p, "frame body not followed by NUL "
					    "(is content-length right?)");
				nul_at = p->body_end;
			} else {
				char *nul = memchr(p->buf + p->scan, '\0', p->len - p->scan);
				if (nul == NULL) {
					p->scan = p->len;
					if (p->limits.max_body && p->len - p->body_start > p->limits.max_body)
						return fail_limit(p, "body too large", 0, PARSER_LIMIT_BODY);
					if (p->len - p->start > p->limits.max_frame)
						return fail_limit(p, "frame too large", 0, PARSER_LIMIT_FRAME);
					return PARSE_NEED_MORE;
				}
				nul_at = (size_t)(nul - p->buf);
				if (p->limits.max_body && nul_at - p->body_start > p->limits.max_body)
					return fail_limit(p, "body too large", 0, PARSER_LIMIT_BODY);
				if (nul_at + 1 - p->start > p->limits.max_frame)
					return fail_limit(p, "frame too large", 0, PARSER_LIMIT_FRAME);
			}
			p->frame.body = p->buf + p->body_start;
			p->frame.body_len = nul_at - p->body_start;
			p->start = p->scan = nul_at + 1;
			p->state = PARSER_EOL;
			*out = &p->frame;
			return PARSE_FRAME;
		}
		}
	}
}
