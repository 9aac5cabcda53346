/* parser-fuzzer.c - libFuzzer harness for the incremental frame parser.
 *
 * Input: one seed byte, then the byte stream a client would send.  The
 * stream is fed twice: split into pieces whose sizes the seed byte picks, the
 * way conn.c's reader does (parser_space, read, parser_commit, parser_next
 * until it wants more), and then in one piece.  Every frame is checked
 * against the parser's invariants as it comes out, and the two runs must hand
 * out the same frames and end the same way: the parser promises that how the
 * input was split makes no difference.  (Which error is reported may differ:
 * a line that grows past max-header-line before its NUL arrives is "too
 * long" when split and "NUL inside the headers" when whole.  Only that an
 * error happens, and where, is compared.)  Limits are small so that they are
 * reached.  Any violation abort()s. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eft/parser.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Picked by the seed byte: eftd-like small limits, tiny ones that short
 * inputs reach, and no body limit of its own (max_body 0). */
static const struct parser_limits limit_sets[4] = {
	{ .max_frame = 64 * 1024, .max_headers = 64, .max_header_line = 1024, .max_body = 32 * 1024 },
	{ .max_frame = 2048, .max_headers = 8, .max_header_line = 128, .max_body = 1024 },
	{ .max_frame = 512, .max_headers = 16, .max_header_line = 256, .max_body = 0 },
	{ .max_frame = 200, .max_headers = 8, .max_header_line = 64, .max_body = 150 },
};
static const struct parser_limits *limits;

/* Everything a run produced, serialised, so two runs compare with memcmp. */
struct trace {
	unsigned char *d;
	size_t n, cap;
};

static void
trace_add(struct trace *t, const void *s, size_t n)
{
	if (t->n + n > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		while (cap < t->n + n)
			cap *= 2;
		unsigned char *d = realloc(t->d, cap);
		if (d == NULL)
			abort();
		t->d = d;
		t->cap = cap;
	}
	if (n > 0)
		memcpy(t->d + t->n, s, n);
	t->n += n;
}

static void
trace_u64(struct trace *t, uint64_t v)
{
	trace_add(t, &v, sizeof(v));
}

static void
trace_bytes(struct trace *t, const void *s, size_t n)
{
	trace_u64(t, n);
	trace_add(t, s, n);
}

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "parser-fuzzer: invariant failed: %s (%s:%d)\n", \
			    #cond, __FILE__, __LINE__);                                \
			abort();                                                       \
		}                                                                      \
	} while (0)

/* Does [s, s+n) lie inside the bytes the parser holds? */
static bool
inside(const struct parser *p, const char *s, size_t n)
{
	return s >= p->buf && s <= p->buf + p->len && n <= (size_t)(p->buf + p->len - s);
}

static bool
parse_number(const char *s, size_t len, uint64_t *out)
{
	uint64_t n = 0;
	if (len == 0 || len > 19)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	*out = n;
	return true;
}

/* Command and header lines of a frame, complete or (after an error) not. */
static void
check_lines(const struct parser *p, const struct frame *f)
{
	CHECK(f->cmd_len > 0);
	CHECK(inside(p, f->cmd_name, f->cmd_len));
	CHECK(memchr(f->cmd_name, '\n', f->cmd_len) == NULL);
	CHECK(memchr(f->cmd_name, '\0', f->cmd_len) == NULL);
	CHECK(f->cmd == frame_cmd_lookup(f->cmd_name, f->cmd_len));
	CHECK(f->nhdr <= limits->max_headers);
	/* CONNECT and STOMP are never unescaped; neither is anything in 1.0. */
	bool raw = f->cmd == CMD_CONNECT || f->cmd == CMD_STOMP || p->version == STOMP_1_0;
	for (size_t i = 0; i < f->nhdr; i++) {
		const struct header *h = &f->hdr[i];
		CHECK(inside(p, h->name, h->name_len));
		CHECK(inside(p, h->value, h->value_len));
		CHECK((size_t)h->name_len + 1 + h->value_len <= limits->max_header_line);
		CHECK(h->id == (int)frame_hdr_lookup(h->name, h->name_len));
		CHECK(h->id >= HDR_OTHER && h->id < HDR_COUNT);
		if (h->id != HDR_OTHER)
			CHECK(f->known[h->id] >= 0 && (size_t)f->known[h->id] <= i);
		if (raw) {
			CHECK(memchr(h->name, ':', h->name_len) == NULL);
			CHECK(memchr(h->name, '\n', h->name_len) == NULL);
			CHECK(memchr(h->value, '\n', h->value_len) == NULL);
		}
		/* msg.c copies plain frames' headers without escaping them. */
		if (f->plain) {
			CHECK(!frame_needs_escape(STOMP_1_2, h->name, h->name_len));
			CHECK(!frame_needs_escape(STOMP_1_2, h->value, h->value_len));
		}
	}
	for (int id = 0; id < HDR_COUNT; id++) {
		int32_t k = f->known[id];
		CHECK(k >= -1 && (k < 0 || (size_t)k < f->nhdr));
		if (k < 0)
			continue;
		/* The first occurrence counts. */
		CHECK(f->hdr[k].id == id);
		for (int32_t j = 0; j < k; j++)
			CHECK(f->hdr[j].id != id);
	}
}

/* The frame the parser just handed out, checked against everything the
 * protocol handlers and msg.c take for granted. */
static void
check_frame(const struct parser *p, const struct frame *f)
{
	check_lines(p, f);
	CHECK(inside(p, f->body, f->body_len + 1));
	CHECK(f->body[f->body_len] == '\0');
	CHECK(limits->max_body == 0 || f->body_len <= limits->max_body);
	CHECK((size_t)(f->body + f->body_len + 1 - f->cmd_name) <= limits->max_frame);
	const struct header *cl = frame_get(f, HDR_CONTENT_LENGTH);
	uint64_t want;
	/* A NUL right after the last header line (no blank line) ends a frame
	 * with no body; content-length does not apply then. */
	const char *b = f->body;
	size_t head = (size_t)(b - f->cmd_name); /* at least "X\n" */
	CHECK(head >= 2 && b[-1] == '\n');
	bool blank = head >= 3 && (b[-2] == '\n' || (head >= 4 && b[-2] == '\r' && b[-3] == '\n'));
	CHECK(blank || f->body_len == 0);
	if (cl != NULL && blank) {
		CHECK(parse_number(cl->value, cl->value_len, &want));
		CHECK(want == f->body_len);
	} else if (cl == NULL) {
		CHECK(memchr(f->body, '\0', f->body_len) == NULL);
	}
}

static void
trace_frame(struct trace *t, const struct frame *f)
{
	trace_u64(t, 'F');
	trace_u64(t, (uint64_t)f->cmd);
	trace_bytes(t, f->cmd_name, f->cmd_len);
	trace_u64(t, f->nhdr);
	for (size_t i = 0; i < f->nhdr; i++) {
		trace_u64(t, (uint64_t)(int64_t)f->hdr[i].id);
		trace_bytes(t, f->hdr[i].name, f->hdr[i].name_len);
		trace_bytes(t, f->hdr[i].value, f->hdr[i].value_len);
	}
	trace_add(t, f->known, sizeof(f->known));
	trace_u64(t, f->plain);
	trace_bytes(t, f->body, f->body_len);
}

/* Take every frame now complete.  After a CONNECT or STOMP frame the
 * session's escaping applies, as proto.c sets it.  Returns false once the
 * parser has failed. */
static bool
drain(struct parser *p, struct trace *t, enum stomp_version session)
{
	for (;;) {
		struct frame *f;
		enum parser_result r = parser_next(p, &f);
		if (r == PARSE_NEED_MORE)
			return true;
		if (r == PARSE_ERROR) {
			trace_u64(t, 'E');
			/* The error names its cause; an empty one would tell a client nothing. */
			CHECK(parser_error(p)[0] != '\0');
			/* proto_error looks for a receipt header in what was parsed. */
			const struct frame *partial = parser_failed_frame(p);
			if (partial != NULL)
				check_lines(p, partial);
			CHECK(parser_next(p, &f) == PARSE_ERROR); /* failed stays failed */
			return false;
		}
		CHECK(r == PARSE_FRAME && f != NULL);
		check_frame(p, f);
		trace_frame(t, f);
		if (f->cmd == CMD_CONNECT || f->cmd == CMD_STOMP)
			p->version = session;
	}
}

/* A small PRNG: piece sizes follow from the seed byte alone. */
static uint32_t
next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t seed = data[0];
	data++;
	size--;
	/* Seed bits: 0-1 the version the session switches to after CONNECT,
	 * 2-4 the largest piece (1 to 128 bytes, or everything at once), 5 whether
	 * to ask parser_space for a whole read (64 KB) or just the piece, 6-7 the
	 * limits. */
	enum stomp_version session = (enum stomp_version)((seed & 3) % STOMP_VERSIONS);
	unsigned shift = (seed >> 2) & 7;
	size_t max_piece = shift == 7 ? size + 1 : (size_t)1 << shift;
	bool big_reads = (seed >> 5) & 1;
	limits = &limit_sets[seed >> 6];
	uint32_t rng = 0x9e3779b9u ^ seed;

	/* Split run, as a socket reader would see it. */
	struct trace split = { 0 }, whole = { 0 };
	struct parser p;
	parser_init(&p, limits);
	size_t off = 0;
	bool ok = true;
	while (ok && off < size) {
		size_t piece = 1 + next_rand(&rng) % max_piece;
		if (piece > size - off)
			piece = size - off;
		size_t avail;
		char *space = parser_space(&p, big_reads ? 64 * 1024 : piece, &avail);
		CHECK(space != NULL);
		CHECK(avail >= (big_reads ? 64 * 1024 : piece));
		memcpy(space, data + off, piece);
		parser_commit(&p, piece);
		off += piece;
		ok = drain(&p, &split, session);
		/* conn.c trims after every read; frames handed out are dead by now. */
		if (ok && !parser_mid_frame(&p))
			parser_trim(&p);
	}
	bool mid_split = parser_mid_frame(&p);
	char err_split[sizeof(p.error)];
	memcpy(err_split, p.error, sizeof(err_split));
	parser_free(&p);

	/* Whole run: one piece. */
	parser_init(&p, limits);
	CHECK(parser_feed(&p, data, size) == 0);
	bool ok_whole = drain(&p, &whole, session);
	bool mid_whole = parser_mid_frame(&p);

	if (split.n != whole.n || (split.n > 0 && memcmp(split.d, whole.d, split.n) != 0) ||
	    ok != ok_whole || (ok && mid_split != mid_whole)) {
		fprintf(stderr, "parser-fuzzer: split and whole runs differ: %zu vs %zu trace bytes, "
		    "%s vs %s, errors '%s' vs '%s'\n", split.n, whole.n, ok ? "ok" : "failed",
		    ok_whole ? "ok" : "failed", ok ? "" : err_split, ok_whole ? "" : p.error);
		abort();
	}
	parser_free(&p);
	free(split.d);
	free(whole.d);
	return 0;
}
