/* msg.c - building the shared form of a message from a SEND frame, and the
 * copies made of it (a durable subscriber's, a dead letter), and reading a
 * header back from it.
 *
 * One allocation holds the struct, the encoded header block(s) and the body.
 * Most messages have no header byte that needs escaping, and then the 1.0,
 * 1.1 and 1.2 blocks are the same bytes, stored once.  A copy is built from
 * the blocks, line by line (msg_line_next), not from the frame, which is
 * gone by then. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eft/msg.h"

/* Headers the broker writes itself, or that only mean something to it: a
 * bit per known header (one test, not a jump through a table per header),
 * with reply-to when the spec replaces it; and redelivered, not a known
 * header. */
#define DROPPED_KNOWN ((1u << HDR_DESTINATION) | (1u << HDR_MESSAGE_ID) | \
	(1u << HDR_CONTENT_LENGTH) | (1u << HDR_RECEIPT) | (1u << HDR_TRANSACTION) | \
	(1u << HDR_SUBSCRIPTION) | (1u << HDR_ACK))
_Static_assert(HDR_COUNT <= 32, "a bit per known header");

static inline int
header_dropped(const struct header *h, uint32_t dropped_known)
{
	if (h->id != HDR_OTHER)
		return (dropped_known >> h->id) & 1;
	return h->name_len == 11 && memcmp(h->name, "redelivered", 11) == 0;
}

/* STOMP 1.0 cannot carry a newline in a header, nor a colon in a name. */
static int
header_fits_1_0(const char *name, size_t nlen, const char *value, size_t vlen)
{
	return memchr(name, ':', nlen) == NULL && memchr(name, '\n', nlen) == NULL &&
	    memchr(name, '\r', nlen) == NULL && memchr(value, '\n', vlen) == NULL &&
	    memchr(value, '\r', vlen) == NULL;
}

struct block_writer;
static void put_escaped(struct block_writer *w, const char *name, size_t nlen, const char *value,
    size_t vlen);

struct block_writer {
	enum stomp_version v;
	bool plain;   /* nothing needs escaping: copy bytes as they are */
	char *p;      /* NULL while only measuring */
	size_t len;
};

static inline __attribute__((always_inline)) void
put_header(struct block_writer *w, const char *name, size_t nlen, const char *value, size_t vlen)
{
	if (w->plain) {
		if (w->p != NULL) {
			memcpy(w->p, name, nlen);
			w->p[nlen] = ':';
			memcpy(w->p + nlen + 1, value, vlen);
			w->p[nlen + 1 + vlen] = '\n';
			w->p += nlen + vlen + 2;
		}
		w->len += nlen + vlen + 2;
		return;
	}
	put_escaped(w, name, nlen, value, vlen);
}

static void
put_escaped(struct block_writer *w, const char *name, size_t nlen, const char *value, size_t vlen)
{
	if (w->v == STOMP_1_0 && !header_fits_1_0(name, nlen, value, vlen))
		return;
	if (w->p == NULL) {
		w->len += frame_escaped_len(w->v, name, nlen) + frame_escaped_len(w->v, value, vlen) + 2;
		return;
	}
	char *start = w->p;
	w->p = frame_escape(w->v, w->p, name, nlen);
	*w->p++ = ':';
	w->p = frame_escape(w->v, w->p, value, vlen);
	*w->p++ = '\n';
	w->len += (size_t)(w->p - start);
}

static inline __attribute__((always_inline)) void
write_block(struct block_writer *w, const struct msg_spec *s, const char *id, size_t id_len,
    const char *clen, size_t clen_len)
{
	const struct frame *f = s->frame;
	put_header(w, "destination", 11, s->dest, s->dest_len);
	put_header(w, "message-id", 10, id, id_len);
	if (s->reply_to != NULL)
		put_header(w, "reply-to", 8, s->reply_to, s->reply_to_len);
	uint32_t dropped = DROPPED_KNOWN | (s->reply_to != NULL ? 1u << HDR_REPLY_TO : 0);
	for (size_t i = 0; i < f->nhdr; i++) {
		const struct header *h = &f->hdr[i];
		if (!header_dropped(h, dropped))
			put_header(w, h->name, h->name_len, h->value, h->value_len);
	}
	put_header(w, "content-length", 14, clen, clen_len);
}

/* The rare path, kept out of line so the plain one inlines small. */
static void
write_escaped_block(struct block_writer *w, const struct msg_spec *s, const char *id,
    size_t id_len, const char *clen, size_t clen_len)
{
	write_block(w, s, id, id_len, clen, clen_len);
}

static inline struct msg *msg_alloc(struct msg_pool *pool, size_t size);

/* The flags, lifetime and queue fields of a new message: the flags given,
 * no others set, no expiry, on no list. */
static inline void
msg_init_life(struct msg *m, unsigned priority, bool multi_block, bool persistent,
    bool now_or_never)
{
	/* The flags are built apart and stored in one go: set in place, each
	 * would first read the block's word, and a recycled block is cold. */
	struct msg flags;
	flags.bits = 0; /* not dead, redelivered, queued or delivered; no returns */
	flags.priority = priority & 0xf;
	flags.multi_block = multi_block;
	flags.persistent = persistent;
	flags.now_or_never = now_or_never;
	m->bits = flags.bits;
	m->expiry_slot = 0;
	m->expires_ms = 0;
	m->kept = NULL;
	/* qprev, qnext: set when it is queued */
}

static int
spec_needs_escape(const struct msg_spec *s)
{
	const struct frame *f = s->frame;
	if (s->reply_to && frame_needs_escape(STOMP_1_2, s->reply_to, s->reply_to_len))
		return 1;
	/* The destination is one of the frame's headers: covered by plain. */
	if (f->plain)
		return 0;
	if (frame_needs_escape(STOMP_1_2, s->dest, s->dest_len))
		return 1;
	for (size_t i = 0; i < f->nhdr; i++) {
		const struct header *h = &f->hdr[i];
		if (frame_needs_escape(STOMP_1_2, h->name, h->name_len) ||
		    frame_needs_escape(STOMP_1_2, h->value, h->value_len))
			return 1;
	}
	return 0;
}

size_t
msg_format_u64(char *out, uint64_t n)
{
	/* Two digits per division: ids and lengths are formatted per message. */
	static const char pairs[201] =
	    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	    "8081828384858687888990919293949596979899";
	/* The digit count without a division per digit: log10 from the bit
	 * length (1233 / 4096 ~ log10 2), corrected by one comparison. */
	static const uint64_t pow10[20] = {
		1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
		100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
		10000000000000ull, 100000000000000ull, 1000000000000000ull,
		10000000000000000ull, 100000000000000000ull, 1000000000000000000ull,
		10000000000000000000ull
	};
	unsigned bits = 64u - (unsigned)__builtin_clzll(n | 1);
	unsigned t = (bits * 1233u) >> 12;
	size_t len = t + (n >= pow10[t]);
	len += len == 0;
	char *p = out + len;
	*p = '\0';
	while (n >= 100) {
		unsigned i = (unsigned)(n % 100) * 2;
		n /= 100;
		*--p = pairs[i + 1];
		*--p = pairs[i];
	}
	if (n >= 10) {
		*--p = pairs[n * 2 + 1];
		*--p = pairs[n * 2];
	} else {
		*--p = (char)('0' + n);
	}
	return len;
}

/* The decimal text of id: the pool's last one plus one when id follows
 * it (carrying through the nines, growing a digit after all nines). */
static const char *
id_text(struct msg_pool *pool, uint64_t id, char *buf, size_t *len)
{
	if (pool == NULL) {
		*len = msg_format_u64(buf, id);
		return buf;
	}
	char *t = pool->id_text;
	size_t n = pool->id_len;
	if (n == 0 || id == 0 || id != pool->id_last + 1) { /* 0: not UINT64_MAX's next */
		n = msg_format_u64(t, id);
	} else {
		size_t i = n;
		while (i > 0 && t[i - 1] == '9')
			t[--i] = '0';
		if (i > 0) {
			t[i - 1]++;
		} else {
			memmove(t + 1, t, n);
			t[0] = '1';
			t[++n] = '\0';
		}
	}
	pool->id_last = id;
	pool->id_len = n;
	*len = n;
	return t;
}

/* Whether a content-length header wrote its number as msg_format_u64 would
 * (no leading zero), so its text can be the message's. */
static inline bool
length_as_formatted(const struct header *cl)
{
	return cl->value_len > 0 && (cl->value[0] != '0' || cl->value_len == 1);
}

/* The body's length as the frame's content-length wrote it, if it wrote it
 * as msg_format_u64 would, else formatted into buf. */
static const char *
length_text(const struct frame *f, char *buf, size_t *len)
{
	const struct header *cl = frame_get(f, HDR_CONTENT_LENGTH);
	if (cl != NULL && length_as_formatted(cl)) {
		*len = cl->value_len;
		return cl->value;
	}
	*len = msg_format_u64(buf, f->body_len);
	return buf;
}

/* The SEND's header lines as they lie in its frame, when they already are
 * the plain block but for the message-id line: the destination's line
 * first, then the lines write_block keeps, up to the content-length's,
 * and after it only lines write_block leaves out (a receipt, say).  Most
 * SENDs look like this; their block is then two copies, not one header at
 * a time in two passes (measure, then write). */
struct frame_lines {
	const char *first; /* "destination:...\n" */
	size_t first_len;
	const char *rest;  /* the lines after it, to content-length's "\n" */
	size_t rest_len;
};

static bool
frame_lines_fit(const struct msg_spec *s, struct frame_lines *fl)
{
	const struct frame *f = s->frame;
	size_t n = f->nhdr;
	if (!f->plain || s->reply_to != NULL || n < 2)
		return false;
	/* The destination as the frame wrote it. */
	const struct header *first = &f->hdr[0];
	if (first->id != HDR_DESTINATION || first->value != s->dest || first->value_len != s->dest_len)
		return false;
	size_t bytes = 0, i = 1;
	for (; i < n && f->hdr[i].id != HDR_CONTENT_LENGTH; i++) {
		const struct header *h = &f->hdr[i];
		if (header_dropped(h, DROPPED_KNOWN))
			return false;
		bytes += h->name_len + h->value_len + 2;
	}
	if (i == n)
		return false;
	/* A content-length as length_text takes it (the first one). */
	const struct header *cl = &f->hdr[i];
	if (!length_as_formatted(cl))
		return false;
	bytes += cl->name_len + cl->value_len + 2;
	while (++i < n)
		if (!header_dropped(&f->hdr[i], DROPPED_KNOWN))
			return false;
	fl->first = first->name;
	fl->first_len = first->name_len + first->value_len + 2;
	fl->rest = f->hdr[1].name;
	fl->rest_len = bytes;
	/* Lines that follow each other with a bare "\n" (no CR) are one run:
	 * a CR would make the run longer than the lines, or (the last line's)
	 * take its last byte. */
	return fl->first + fl->first_len == fl->rest &&
	    (size_t)(cl->value + cl->value_len + 1 - fl->rest) == bytes && fl->rest[bytes - 1] == '\n';
}

/* A new message of n bytes in all from spec s, its fields set. */
static inline __attribute__((always_inline)) struct msg *
msg_start(const struct msg_spec *s, size_t n, int nblocks)
{
	struct msg *m = msg_alloc(s->pool, n);
	if (m == NULL)
		return NULL;
	m->refs = 1;
	m->id = s->id;
	msg_init_life(m, s->priority, nblocks > 1, false, s->now_or_never);
	m->expires_ms = s->expires_ms;
	return m;
}

/* The body, and its NUL, at p. */
static struct msg *
msg_put_body(struct msg *m, char *p, const struct frame *f)
{
	m->body_len = (uint32_t)f->body_len;
	memcpy(p, f->body, m->body_len);
	p[m->body_len] = '\0';
	return m;
}

struct msg *
msg_new(const struct msg_spec *s)
{
	char id_buf[24], clen_buf[24];
	size_t id_len, clen_len;
	const char *id = id_text(s->pool, s->id, id_buf, &id_len);

	struct frame_lines fl;
	if (frame_lines_fit(s, &fl)) {
		size_t len = fl.first_len + 11 + id_len + 1 + fl.rest_len;
		struct msg *m = msg_start(s, sizeof(struct msg) + len + s->frame->body_len + 1, 1);
		if (m == NULL)
			return NULL;
		char *p = m->data;
		memcpy(p, fl.first, fl.first_len);
		p += fl.first_len;
		memcpy(p, "message-id:", 11);
		memcpy(p + 11, id, id_len);
		p += 11 + id_len;
		*p++ = '\n';
		memcpy(p, fl.rest, fl.rest_len);
		p += fl.rest_len;
		for (int v = 0; v < STOMP_VERSIONS; v++)
			m->block_len[v] = (uint32_t)len;
		return msg_put_body(m, p, s->frame);
	}

	const char *clen = length_text(s->frame, clen_buf, &clen_len);
	/* One block serves every version unless something must be escaped. */
	int nblocks = spec_needs_escape(s) ? STOMP_VERSIONS : 1;
	size_t lens[STOMP_VERSIONS], total = 0;
	for (int v = 0; v < nblocks; v++) {
		struct block_writer w = { .v = (enum stomp_version)v, .plain = nblocks == 1 };
		if (w.plain)
			write_block(&w, s, id, id_len, clen, clen_len);
		else
			write_escaped_block(&w, s, id, id_len, clen, clen_len);
		lens[v] = w.len;
		total += w.len;
	}

	struct msg *m = msg_start(s, sizeof(struct msg) + total + s->frame->body_len + 1, nblocks);
	if (m == NULL)
		return NULL;
	char *p = m->data;
	for (int v = 0; v < nblocks; v++) {
		struct block_writer w = { .v = (enum stomp_version)v, .plain = nblocks == 1, .p = p };
		if (w.plain)
			write_block(&w, s, id, id_len, clen, clen_len);
		else
			write_escaped_block(&w, s, id, id_len, clen, clen_len);
		m->block_len[v] = (uint32_t)lens[v];
		p += lens[v];
	}
	for (int v = nblocks; v < STOMP_VERSIONS; v++)
		m->block_len[v] = m->block_len[0];
	return msg_put_body(m, p, s->frame);
}

struct msg *
msg_restore(struct msg_pool *pool, uint64_t id, int nblocks, const char *const *blocks,
    const uint32_t *block_lens, const char *body, size_t body_len)
{
	if (nblocks != 1 && nblocks != STOMP_VERSIONS)
		return NULL;
	size_t total = 0;
	for (int v = 0; v < nblocks; v++)
		total += block_lens[v];
	struct msg *m = msg_alloc(pool, sizeof(struct msg) + total + body_len + 1);
	if (m == NULL)
		return NULL;
	m->refs = 1;
	m->id = id;
	msg_init_life(m, MSG_PRIORITY_DEFAULT, nblocks > 1, true, false);
	char *p = m->data;
	for (int v = 0; v < STOMP_VERSIONS; v++) {
		int from = v < nblocks ? v : 0;
		if (v == from) {
			memcpy(p, blocks[v], block_lens[v]);
			p += block_lens[v];
		}
		m->block_len[v] = block_lens[from];
	}
	m->body_len = (uint32_t)body_len;
	memcpy(p, body, body_len);
	p[body_len] = '\0';
	return m;
}

/* The value of the message-id line of a header block (second, after the
 * destination, or first where a 1.0 block left the destination out); false
 * if the block has none. */
static bool
find_id(const char *block, size_t len, const char **value, size_t *vlen)
{
	const char *pos = block, *end = block + len, *line;
	size_t n;
	while (msg_line_next(&pos, end, &line, &n))
		if (msg_line_is(line, n, "message-id", 10, value, vlen))
			return true;
	return false;
}

struct msg *
msg_restore_as(struct msg_pool *pool, uint64_t id, int nblocks, const char *const *blocks,
    const uint32_t *block_lens, const char *body, size_t body_len)
{
	if (nblocks != 1 && nblocks != STOMP_VERSIONS)
		return NULL;
	char idtext[24];
	size_t idlen = msg_format_u64(idtext, id);
	size_t total = 0;
	for (int v = 0; v < nblocks; v++)
		total += block_lens[v] + idlen;
	char *buf = malloc(total), *p = buf;
	if (buf == NULL)
		return NULL;
	const char *out[STOMP_VERSIONS];
	uint32_t lens[STOMP_VERSIONS];
	for (int v = 0; v < nblocks; v++) {
		const char *b = blocks[v], *value;
		size_t blen = block_lens[v], vlen;
		if (!find_id(b, blen, &value, &vlen)) {
			free(buf);
			return NULL;
		}
		const char *end = value + vlen;
		out[v] = p;
		memcpy(p, b, (size_t)(value - b));
		p += value - b;
		memcpy(p, idtext, idlen);
		p += idlen;
		memcpy(p, end, blen - (size_t)(end - b));
		p += blen - (size_t)(end - b);
		lens[v] = (uint32_t)(p - out[v]);
	}
	struct msg *c = msg_restore(pool, id, nblocks, out, lens, body, body_len);
	free(buf);
	return c;
}

struct msg *
msg_clone(struct msg_pool *pool, const struct msg *m, uint64_t id)
{
	int nblocks = msg_nblocks(m);
	const char *blocks[STOMP_VERSIONS];
	for (int v = 0; v < nblocks; v++)
		blocks[v] = msg_block(m, (enum stomp_version)v);
	struct msg *c = msg_restore_as(pool, id, nblocks, blocks, m->block_len, msg_body(m),
	    m->body_len);
	if (c != NULL) {
		c->persistent = m->persistent;
		c->priority = m->priority;
		c->expires_ms = m->expires_ms;
		c->now_or_never = m->now_or_never;
		c->dead = m->dead;
	}
	return c;
}

/* Bytes already encoded for w's version: a line of another block. */
static void
put_raw(struct block_writer *w, const char *s, size_t len)
{
	if (w->p != NULL) {
		memcpy(w->p, s, len);
		w->p += len;
	}
	w->len += len;
}

/* What a dead letter writes itself, formatted once for every block. */
struct dead_letter {
	const char *dlq, *reason, *id, *time;
	size_t dlq_len, reason_len, id_len, time_len;
};

/* Lines of a message its dead letter leaves out: its destination and id
 * (replaced), the lifetime it had, an earlier death record. */
static bool
dead_letter_drops(const char *line, size_t len)
{
	static const struct {
		const char *name;
		size_t len;
	} drop[] = {
		{ "destination", 11 }, { "message-id", 10 }, { "expires", 7 }, { "expiration", 10 },
		{ "x-death-reason", 14 }, { "x-original-destination", 22 }, { "x-death-time", 12 },
	};
	const char *value;
	size_t vlen;
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (msg_line_is(line, len, drop[i].name, drop[i].len, &value, &vlen))
			return true;
	return false;
}

/* Block w->v of a dead letter, from src: the message's block of that
 * version, or the one that serves them all.  -1 if src is malformed (a
 * line without its newline, no message-id line). */
static int
write_dead_block(struct block_writer *w, const struct dead_letter *d, const char *src, size_t len)
{
	const char *pos = src, *end = src + len, *line, *value, *orig = NULL;
	size_t n, vlen, orig_len = 0;
	bool have_id = false;
	while (msg_line_next(&pos, end, &line, &n)) {
		if (orig == NULL && msg_line_is(line, n, "destination", 11, &value, &vlen)) {
			orig = value;
			orig_len = vlen;
		} else if (msg_line_is(line, n, "message-id", 10, &value, &vlen)) {
			have_id = true;
		}
	}
	if (pos != end || !have_id)
		return -1;
	put_header(w, "destination", 11, d->dlq, d->dlq_len);
	put_header(w, "message-id", 10, d->id, d->id_len);
	put_header(w, "x-death-reason", 14, d->reason, d->reason_len);
	if (orig != NULL) {
		put_raw(w, "x-original-destination:", 23);
		put_raw(w, orig, orig_len);
		put_raw(w, "\n", 1);
	}
	put_header(w, "x-death-time", 12, d->time, d->time_len);
	for (pos = src; msg_line_next(&pos, end, &line, &n);)
		if (!dead_letter_drops(line, n))
			put_raw(w, line, n + 1);
	return 0;
}

struct msg *
msg_dead_letter(struct msg_pool *pool, const struct msg *m, uint64_t id, const char *dlq,
    size_t dlq_len, const char *reason, uint64_t time_ms)
{
	char idtext[24], timetext[24];
	struct dead_letter d = { .dlq = dlq, .dlq_len = dlq_len, .reason = reason,
		.reason_len = strlen(reason), .id = idtext, .time = timetext };
	d.id_len = msg_format_u64(idtext, id);
	d.time_len = msg_format_u64(timetext, time_ms);

	/* m's one block serves every version only while nothing of ours needs
	 * escaping either. */
	int from = msg_nblocks(m), nblocks = from;
	if (nblocks == 1 && (frame_needs_escape(STOMP_1_2, dlq, dlq_len) ||
	    frame_needs_escape(STOMP_1_2, reason, d.reason_len)))
		nblocks = STOMP_VERSIONS;
	size_t total = 0;
	for (int v = 0; v < nblocks; v++) {
		int src = from == 1 ? 0 : v;
		struct block_writer w = { .v = (enum stomp_version)v, .plain = nblocks == 1 };
		if (write_dead_block(&w, &d, msg_block(m, (enum stomp_version)src), m->block_len[src]) < 0)
			return NULL;
		total += w.len;
	}
	char *buf = malloc(total);
	if (buf == NULL)
		return NULL;
	const char *blocks[STOMP_VERSIONS];
	uint32_t lens[STOMP_VERSIONS];
	char *p = buf;
	for (int v = 0; v < nblocks; v++) {
		int src = from == 1 ? 0 : v;
		struct block_writer w = { .v = (enum stomp_version)v, .plain = nblocks == 1, .p = p };
		write_dead_block(&w, &d, msg_block(m, (enum stomp_version)src), m->block_len[src]);
		blocks[v] = p;
		lens[v] = (uint32_t)w.len;
		p += w.len;
	}
	struct msg *c = msg_restore(pool, id, nblocks, blocks, lens, msg_body(m), m->body_len);
	free(buf);
	if (c != NULL) {
		/* msg_restore left it unqueued, never redelivered, never expiring. */
		c->persistent = m->persistent;
		c->priority = m->priority;
		c->dead = true;
	}
	return c;
}

bool
msg_header(const struct msg *m, const char *name, size_t len, const char **value, size_t *vlen)
{
	/* No 1.0 name holds a ':': "a:b" would otherwise find header a's value
	 * "b:...". */
	if (memchr(name, ':', len) != NULL)
		return false;
	const char *pos = msg_block(m, STOMP_1_0), *end = pos + m->block_len[STOMP_1_0], *line;
	size_t n;
	while (msg_line_next(&pos, end, &line, &n))
		if (msg_line_is(line, n, name, len, value, vlen))
			return true;
	return false;
}

void
msg_pool_init(struct msg_pool *pool, size_t max_bytes)
{
	memset(pool, 0, sizeof(*pool));
	pool->max_bytes = max_bytes;
}

void
msg_pool_drain(struct msg_pool *pool)
{
	for (int i = 0; i < MSG_POOL_CLASSES; i++) {
		while (pool->free[i] != NULL) {
			struct msg *m = pool->free[i];
			pool->free[i] = m->next_free;
			free(m);
		}
	}
	pool->bytes = 0;
}

/* A pooled block of size bytes (msg_alloc_size's, at most MSG_POOL_MAX)
 * is in class size / MSG_ALLOC_STEP: all of a class are the same size. */
static inline size_t
pool_class(size_t size)
{
	return size / MSG_ALLOC_STEP;
}

_Static_assert(sizeof(struct msg) == 80, "a message's struct stays small: one per message held");

static inline __attribute__((always_inline)) struct msg *
msg_alloc(struct msg_pool *pool, size_t n)
{
	/* Sizes and lengths are 32 bits: far above what max-frame-size allows. */
	if (n > UINT32_MAX - MSG_ALLOC_STEP)
		return NULL;
	size_t size = msg_alloc_size(n);
	struct msg *m = NULL;
	if (pool != NULL && size < MSG_POOL_MAX) {
		size_t cls = pool_class(size);
		m = pool->free[cls];
		if (m != NULL) {
			/* A free block's pool field links the free list. */
			pool->free[cls] = m->next_free;
			pool->bytes -= size;
		}
	}
	if (m == NULL && (m = malloc(size)) == NULL)
		return NULL;
	m->pool = pool;
	m->size = (uint32_t)size;
	if (pool != NULL)
		pool->live_bytes += size;
	return m;
}

void
msg_unref(struct msg *m)
{
	if (--m->refs != 0)
		return;
	struct msg_pool *pool = m->pool;
	if (m->kept != NULL && pool != NULL && pool->drop_kept != NULL)
		pool->drop_kept(m); /* never settled here (eftd stopping) */
	size_t size = m->size;
	if (pool == NULL) {
		free(m);
		return;
	}
	pool->live_bytes -= size;
	if (size >= MSG_POOL_MAX || pool->bytes + size > pool->max_bytes) {
		free(m);
		return;
	}
	size_t cls = pool_class(size);
	m->next_free = pool->free[cls];
	pool->free[cls] = m;
	pool->bytes += size;
}

void
msg_unref_cb(const void *data, size_t len, void *m)
{
	(void)data;
	(void)len;
	msg_unref(m);
}
