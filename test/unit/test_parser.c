/* test_parser.c - unit tests for the incremental STOMP frame parser.
 *
 * Frames handed out by parser_next live only until the next read, so every
 * frame is deep-copied (struct fcopy) as soon as it comes out; runs of the
 * same input split in different ways are then compared copy against copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eft/parser.h"

/* A string literal and its length, NULs inside included. */
#define LIT(s) (s), (sizeof(s) - 1)

/* ------------------------------------------------------------------------ */
/* Helpers                                                                    */

static void
mem_is(const void *got, size_t got_len, const void *want, size_t want_len, const char *what)
{
	if (got_len != want_len || (want_len > 0 && memcmp(got, want, want_len) != 0)) {
		print_error("%s: got %zu bytes '%.*s', want %zu bytes '%.*s'\n", what, got_len,
		    (int)(got_len > 200 ? 200 : got_len), got_len ? (const char *)got : "",
		    want_len, (int)(want_len > 200 ? 200 : want_len), want_len ? (const char *)want : "");
		fail();
	}
}

static void
str_contains(const char *s, const char *needle)
{
	if (strstr(s, needle) == NULL) {
		print_error("'%s' does not contain '%s'\n", s, needle);
		fail();
	}
}

/* A growable byte buffer for building inputs. */
struct bytes {
	char *d;
	size_t n, cap;
};

static void
b_add(struct bytes *b, const void *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap *= 2;
		b->d = realloc(b->d, cap);
		assert_non_null(b->d);
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->d + b->n, s, n);
	b->n += n;
	b->d[b->n] = '\0';
}

static void
b_str(struct bytes *b, const char *s)
{
	b_add(b, s, strlen(s));
}

static void
b_fmt(struct bytes *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
b_fmt(struct bytes *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	assert_true(n >= 0 && (size_t)n < sizeof(tmp));
	b_add(b, tmp, (size_t)n);
}

static void
b_fill(struct bytes *b, char c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b_add(b, &c, 1);
}

static void
b_free(struct bytes *b)
{
	free(b->d);
	memset(b, 0, sizeof(*b));
}

static char *
dup_mem(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	assert_non_null(d);
	if (n > 0)
		memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

struct hcopy {
	char *name, *value;
	size_t name_len, value_len;
	int id;
};

struct fcopy {
	enum frame_cmd cmd;
	char *cmd_name;
	size_t cmd_len;
	struct hcopy *hdr;
	size_t nhdr;
	int32_t known[HDR_COUNT];
	char *body;
	size_t body_len;
};

/* Everything one parse of an input produced. */
struct run {
	struct fcopy *f;
	size_t n, cap;
	int failed;
	char error[160];
	size_t fed;           /* bytes fed so far */
	size_t fed_at_error;  /* bytes fed when PARSE_ERROR first came back */
};

/* What must hold for any frame the parser hands out. */
static void
check_frame_invariants(const struct frame *f)
{
	assert_true(f->cmd_len > 0);
	assert_int_equal(f->cmd, frame_cmd_lookup(f->cmd_name, f->cmd_len));
	for (size_t i = 0; i < f->nhdr; i++) {
		const struct header *h = &f->hdr[i];
		assert_int_equal(h->id, frame_hdr_lookup(h->name, h->name_len));
	}
	for (int id = 0; id < HDR_COUNT; id++) {
		int32_t first = -1;
		for (size_t i = 0; i < f->nhdr; i++) {
			if (f->hdr[i].id == id) {
				first = (int32_t)i;
				break;
			}
		}
		assert_int_equal(f->known[id], first);
		if (first < 0)
			assert_null(frame_get(f, (enum hdr_id)id));
		else
			assert_ptr_equal(frame_get(f, (enum hdr_id)id), &f->hdr[first]);
	}
}

static void
copy_frame(struct fcopy *c, const struct frame *f)
{
	memset(c, 0, sizeof(*c));
	c->cmd = f->cmd;
	c->cmd_name = dup_mem(f->cmd_name, f->cmd_len);
	c->cmd_len = f->cmd_len;
	c->nhdr = f->nhdr;
	c->hdr = calloc(f->nhdr ? f->nhdr : 1, sizeof(*c->hdr));
	assert_non_null(c->hdr);
	for (size_t i = 0; i < f->nhdr; i++) {
		c->hdr[i].name = dup_mem(f->hdr[i].name, f->hdr[i].name_len);
		c->hdr[i].name_len = f->hdr[i].name_len;
		c->hdr[i].value = dup_mem(f->hdr[i].value, f->hdr[i].value_len);
		c->hdr[i].value_len = f->hdr[i].value_len;
		c->hdr[i].id = f->hdr[i].id;
	}
	memcpy(c->known, f->known, sizeof(c->known));
	c->body = dup_mem(f->body, f->body_len);
	c->body_len = f->body_len;
}

static void
free_fcopy(struct fcopy *c)
{
	free(c->cmd_name);
	for (size_t i = 0; i < c->nhdr; i++) {
		free(c->hdr[i].name);
		free(c->hdr[i].value);
	}
	free(c->hdr);
	free(c->body);
}

static void
run_free(struct run *r)
{
	for (size_t i = 0; i < r->n; i++)
		free_fcopy(&r->f[i]);
	free(r->f);
	memset(r, 0, sizeof(*r));
}

/* Take every complete frame out of the parser. */
static void
drain(struct parser *p, struct run *r)
{
	for (;;) {
		struct frame *f = NULL;
		enum parser_result res = parser_next(p, &f);
		if (r->failed) /* a failed parser stays failed */
			assert_int_equal(res, PARSE_ERROR);
		if (res == PARSE_NEED_MORE)
			return;
		if (res == PARSE_ERROR) {
			if (!r->failed) {
				r->failed = 1;
				r->fed_at_error = r->fed;
				snprintf(r->error, sizeof(r->error), "%s", parser_error(p));
				assert_true(r->error[0] != '\0');
			}
			return;
		}
		assert_int_equal(res, PARSE_FRAME);
		assert_non_null(f);
		check_frame_invariants(f);
		if (r->n == r->cap) {
			r->cap = r->cap ? r->cap * 2 : 8;
			r->f = realloc(r->f, r->cap * sizeof(*r->f));
			assert_non_null(r->f);
		}
		copy_frame(&r->f[r->n++], f);
	}
}

static void
feed(struct parser *p, struct run *r, const void *data, size_t n)
{
	assert_int_equal(parser_feed(p, data, n), 0);
	r->fed += n;
	drain(p, r);
}

/* Parse data fed in `chunk`-byte pieces (0: all at once), stopping at an error. */
static void
parse_chunked(const void *data, size_t n, size_t chunk, enum stomp_version v,
    const struct parser_limits *lim, struct run *r)
{
	struct parser p;
	parser_init(&p, lim);
	p.version = v;
	memset(r, 0, sizeof(*r));
	if (chunk == 0)
		chunk = n;
	for (size_t off = 0; off < n && !r->failed; off += chunk)
		feed(&p, r, (const char *)data + off, off + chunk > n ? n - off : chunk);
	parser_free(&p);
}

/* Parse data cut at the given (ascending) offsets. */
static void
parse_cuts(const void *data, size_t n, const size_t *cuts, size_t ncuts, enum stomp_version v,
    const struct parser_limits *lim, struct run *r)
{
	struct parser p;
	parser_init(&p, lim);
	p.version = v;
	memset(r, 0, sizeof(*r));
	size_t off = 0;
	for (size_t i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : n;
		feed(&p, r, (const char *)data + off, end - off);
		off = end;
	}
	parser_free(&p);
}

static void
same_run(const struct run *a, const struct run *b, const char *how)
{
	if (a->n != b->n || a->failed != b->failed) {
		print_error("%s: %zu frames%s%s vs %zu frames%s%s\n", how, a->n,
		    a->failed ? ", error: " : "", a->error, b->n, b->failed ? ", error: " : "",
		    b->error);
		fail();
	}
	assert_string_equal(a->error, b->error);
	for (size_t i = 0; i < a->n; i++) {
		const struct fcopy *x = &a->f[i], *y = &b->f[i];
		assert_int_equal(x->cmd, y->cmd);
		mem_is(x->cmd_name, x->cmd_len, y->cmd_name, y->cmd_len, "command");
		assert_int_equal(x->nhdr, y->nhdr);
		for (size_t h = 0; h < x->nhdr; h++) {
			mem_is(x->hdr[h].name, x->hdr[h].name_len, y->hdr[h].name, y->hdr[h].name_len,
			    "header name");
			mem_is(x->hdr[h].value, x->hdr[h].value_len, y->hdr[h].value,
			    y->hdr[h].value_len, "header value");
			assert_int_equal(x->hdr[h].id, y->hdr[h].id);
		}
		assert_memory_equal(x->known, y->known, sizeof(x->known));
		mem_is(x->body, x->body_len, y->body, y->body_len, "body");
	}
}

/* Check a copied frame: command, body, then nhdr (name, value) string pairs. */
static void
expect_frame(const struct fcopy *f, enum frame_cmd cmd, const char *cmd_name, const void *body,
    size_t body_len, size_t nhdr, ...)
{
	assert_int_equal(f->cmd, cmd);
	mem_is(f->cmd_name, f->cmd_len, cmd_name, strlen(cmd_name), "command");
	mem_is(f->body, f->body_len, body, body_len, "body");
	assert_int_equal(f->nhdr, nhdr);
	va_list ap;
	va_start(ap, nhdr);
	for (size_t i = 0; i < nhdr; i++) {
		const char *name = va_arg(ap, const char *);
		const char *value = va_arg(ap, const char *);
		mem_is(f->hdr[i].name, f->hdr[i].name_len, name, strlen(name), "header name");
		mem_is(f->hdr[i].value, f->hdr[i].value_len, value, strlen(value), "header value");
	}
	va_end(ap);
}

static const struct parser_limits roomy = {
	.max_frame = 1u << 20, .max_headers = 1000, .max_header_line = 1u << 16,
};

/* Parse a whole input in one feed; the run must then be checked by the caller. */
static void
parse_whole(const void *data, size_t n, enum stomp_version v, struct run *r)
{
	parse_chunked(data, n, 0, v, &roomy, r);
}

/* Parse one input that must fail, whole and byte by byte, and return the error. */
static void
expect_error(const void *data, size_t n, enum stomp_version v, const struct parser_limits *lim,
    const char *needle)
{
	struct run whole, bytes;
	parse_chunked(data, n, 0, v, lim, &whole);
	parse_chunked(data, n, 1, v, lim, &bytes);
	if (!whole.failed || !bytes.failed) {
		print_error("expected an error for '%.*s' (whole: %zu frames, %s; bytewise: %zu "
		    "frames, %s)\n", (int)n, (const char *)data, whole.n,
		    whole.failed ? whole.error : "no error", bytes.n,
		    bytes.failed ? bytes.error : "no error");
		fail();
	}
	assert_int_equal(whole.n, 0);
	assert_int_equal(bytes.n, 0);
	str_contains(whole.error, needle);
	assert_string_equal(whole.error, bytes.error);
	run_free(&whole);
	run_free(&bytes);
}

/* ------------------------------------------------------------------------ */
/* Basics                                                                     */

static void
test_init_state(void **state)
{
	(void)state;
	struct parser p;
	parser_init(&p, &roomy);
	assert_int_equal(p.version, STOMP_1_0);
	assert_int_equal(p.limits.max_frame, roomy.max_frame);
	assert_int_equal(p.limits.max_headers, roomy.max_headers);
	assert_int_equal(p.limits.max_header_line, roomy.max_header_line);
	assert_false(parser_mid_frame(&p));
	struct frame *f = NULL;
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_null(f);
	parser_free(&p);
}

static void
test_simple_frame(void **state)
{
	(void)state;
	struct parser p;
	parser_init(&p, &roomy);
	static const char in[] = "SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello";
	assert_int_equal(parser_feed(&p, in, sizeof(in)), 0); /* sizeof: the NUL too */

	struct frame *f = NULL;
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	assert_non_null(f);
	assert_int_equal(f->cmd, CMD_SEND);
	mem_is(f->cmd_name, f->cmd_len, LIT("SEND"), "command");
	assert_int_equal(f->nhdr, 2);
	mem_is(f->hdr[0].name, f->hdr[0].name_len, LIT("destination"), "name 0");
	mem_is(f->hdr[0].value, f->hdr[0].value_len, LIT("/queue/a"), "value 0");
	assert_int_equal(f->hdr[0].id, HDR_DESTINATION);
	mem_is(f->hdr[1].name, f->hdr[1].name_len, LIT("content-type"), "name 1");
	mem_is(f->hdr[1].value, f->hdr[1].value_len, LIT("text/plain"), "value 1");
	assert_int_equal(f->hdr[1].id, HDR_CONTENT_TYPE);
	mem_is(f->body, f->body_len, LIT("hello"), "body");
	assert_int_equal(f->known[HDR_DESTINATION], 0);
	assert_int_equal(f->known[HDR_CONTENT_TYPE], 1);
	assert_int_equal(f->known[HDR_CONTENT_LENGTH], -1);
	assert_null(frame_get(f, HDR_RECEIPT));
	check_frame_invariants(f);

	assert_false(parser_mid_frame(&p));
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	parser_free(&p);
}

static void
test_unknown_command(void **state)
{
	(void)state;
	struct run r;
	parse_whole(LIT("FROB\nx:y\n\nbody\0"), STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	expect_frame(&r.f[0], CMD_UNKNOWN, "FROB", LIT("body"), 1, "x", "y");
	run_free(&r);
}

static void
test_many_frames_one_feed(void **state)
{
	(void)state;
	struct bytes in = { 0 };
	enum { N = 200 };
	for (int i = 0; i < N; i++) {
		if (i % 3 == 0)
			b_fmt(&in, "SEND\ndestination:/queue/%d\n\nmsg %d", i, i);
		else
			b_fmt(&in, "SEND\ndestination:/queue/%d\ncontent-length:%d\n\nmsg %d",
			    i, (int)strlen("msg ") + (i < 10 ? 1 : i < 100 ? 2 : 3), i);
		b_add(&in, "", 1);
	}
	struct run r;
	parse_whole(in.d, in.n, STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, N);
	for (int i = 0; i < N; i++) {
		char dest[32], body[32];
		snprintf(dest, sizeof(dest), "/queue/%d", i);
		snprintf(body, sizeof(body), "msg %d", i);
		assert_int_equal(r.f[i].cmd, CMD_SEND);
		assert_int_equal(r.f[i].nhdr, i % 3 == 0 ? 1 : 2);
		mem_is(r.f[i].hdr[0].value, r.f[i].hdr[0].value_len, dest, strlen(dest), "dest");
		mem_is(r.f[i].body, r.f[i].body_len, body, strlen(body), "body");
	}
	run_free(&r);
	b_free(&in);
}

/* ------------------------------------------------------------------------ */
/* Splitting the input anywhere gives the same frames                         */

/* An input exercising most of the syntax: heart-beats, CRLF, escapes, a
 * CONNECT frame with backslashes, a body with NULs, a NUL-ended header block,
 * repeated headers and colons in values. */
static void
rich_input(struct bytes *b)
{
	b_str(b, "\n\r\n");
	b_add(b, LIT("CONNECT\r\naccept-version:1.2\r\nhost:a\\tb\r\nlogin:x\\ny\r\n\r\n\0"));
	b_str(b, "\n");
	b_add(b, LIT("SEND\ndestination:/queue/a\ncontent-length:5\ncontent-type:text/plain\n\n"
	    "a\0b\0c\0"));
	b_str(b, "\r\n\r\n");
	b_add(b, LIT("SEND\r\ndestination:/queue/b\r\nk\\cey:va\\nl\\\\ue\\r\r\n\r\nno length\0"));
	b_add(b, LIT("DISCONNECT\nreceipt:77\n\0"));
	b_add(b, LIT("SUBSCRIBE\nid:0\ndestination:/queue/c\nack:client\nid:1\n\n\0"));
	b_add(b, LIT("ACK\nid:x:y:z\n\n\0"));
	b_str(b, "\n");
}

static void
check_rich_common(const struct run *r)
{
	/* The CONNECT frame is never unescaped, whatever the version. */
	expect_frame(&r->f[0], CMD_CONNECT, "CONNECT", "", 0, 3, "accept-version", "1.2", "host",
	    "a\\tb", "login", "x\\ny");
	assert_int_equal(r->f[0].known[HDR_HOST], 1);
	assert_int_equal(r->f[0].known[HDR_LOGIN], 2);
	expect_frame(&r->f[1], CMD_SEND, "SEND", LIT("a\0b\0c"), 3, "destination", "/queue/a",
	    "content-length", "5", "content-type", "text/plain");
}

static void
check_rich_tail(const struct run *r)
{
	expect_frame(&r->f[3], CMD_DISCONNECT, "DISCONNECT", "", 0, 1, "receipt", "77");
	expect_frame(&r->f[4], CMD_SUBSCRIBE, "SUBSCRIBE", "", 0, 4, "id", "0", "destination",
	    "/queue/c", "ack", "client", "id", "1");
	assert_int_equal(r->f[4].known[HDR_ID], 0);
	expect_frame(&r->f[5], CMD_ACK, "ACK", "", 0, 1, "id", "x:y:z");
}

static void
check_rich_v12(const struct run *r)
{
	assert_false(r->failed);
	assert_int_equal(r->n, 6);
	check_rich_common(r);
	expect_frame(&r->f[2], CMD_SEND, "SEND", LIT("no length"), 2, "destination", "/queue/b",
	    "k:ey", "va\nl\\ue\r");
	check_rich_tail(r);
}

static void
check_rich_v10(const struct run *r)
{
	assert_false(r->failed);
	assert_int_equal(r->n, 6);
	check_rich_common(r);
	expect_frame(&r->f[2], CMD_SEND, "SEND", LIT("no length"), 2, "destination", "/queue/b",
	    "k\\cey", "va\\nl\\\\ue\\r");
	check_rich_tail(r);
}

static void
check_rich_v11(const struct run *r)
{
	/* \r is not an escape in 1.1: the third frame fails. */
	assert_true(r->failed);
	assert_int_equal(r->n, 2);
	check_rich_common(r);
	str_contains(r->error, "escape");
}

static void
split_everywhere(enum stomp_version v, void (*check)(const struct run *))
{
	struct bytes in = { 0 };
	rich_input(&in);
	struct run ref;
	parse_whole(in.d, in.n, v, &ref);
	check(&ref);

	for (size_t i = 1; i < in.n; i++) {
		struct run r;
		parse_cuts(in.d, in.n, &i, 1, v, &roomy, &r);
		char how[64];
		snprintf(how, sizeof(how), "cut at %zu", i);
		same_run(&ref, &r, how);
		run_free(&r);
	}
	for (size_t chunk = 1; chunk <= 17; chunk++) {
		struct run r;
		parse_chunked(in.d, in.n, chunk, v, &roomy, &r);
		char how[64];
		snprintf(how, sizeof(how), "%zu-byte chunks", chunk);
		same_run(&ref, &r, how);
		run_free(&r);
	}
	run_free(&ref);
	b_free(&in);
}

static void
test_split_every_boundary_v12(void **state)
{
	(void)state;
	split_everywhere(STOMP_1_2, check_rich_v12);
}

static void
test_split_every_boundary_v11(void **state)
{
	(void)state;
	split_everywhere(STOMP_1_1, check_rich_v11);
}

static void
test_split_every_boundary_v10(void **state)
{
	(void)state;
	split_everywhere(STOMP_1_0, check_rich_v10);
}

/* Every way of cutting the input in three pieces. */
static void
test_split_every_pair_of_boundaries(void **state)
{
	(void)state;
	struct bytes in = { 0 };
	rich_input(&in);
	struct run ref;
	parse_whole(in.d, in.n, STOMP_1_2, &ref);
	check_rich_v12(&ref);
	for (size_t i = 1; i < in.n; i++) {
		for (size_t j = i + 1; j < in.n; j++) {
			size_t cuts[2] = { i, j };
			struct run r;
			parse_cuts(in.d, in.n, cuts, 2, STOMP_1_2, &roomy, &r);
			char how[64];
			snprintf(how, sizeof(how), "cuts at %zu and %zu", i, j);
			same_run(&ref, &r, how);
			run_free(&r);
		}
	}
	run_free(&ref);
	b_free(&in);
}

/* ------------------------------------------------------------------------ */
/* Line endings and heart-beats                                               */

static void
test_heartbeats_between_frames(void **state)
{
	(void)state;
	static const char in[] = "\n\r\n\nSEND\n\nA\0\n\r\n\n\nSEND\n\nB\0\r\n\n";
	struct run r;
	parse_whole(in, sizeof(in) - 1, STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 2);
	expect_frame(&r.f[0], CMD_SEND, "SEND", LIT("A"), 0);
	expect_frame(&r.f[1], CMD_SEND, "SEND", LIT("B"), 0);
	run_free(&r);

	/* Only heart-beats: nothing comes out and no frame is in progress. */
	struct parser p;
	parser_init(&p, &roomy);
	struct frame *f;
	assert_int_equal(parser_feed(&p, LIT("\n\r\n\n\r")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_false(parser_mid_frame(&p));
	assert_int_equal(parser_feed(&p, LIT("\n")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_false(parser_mid_frame(&p));
	parser_free(&p);
}

static void
test_stray_cr_between_frames(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 1 << 20, 100, 1024, 0 };
	expect_error(LIT("\rSEND\n\n\0"), STOMP_1_2, &lim, "carriage return");
}

static void
test_crlf_lines(void **state)
{
	(void)state;
	struct run r;
	parse_whole(LIT("SEND\r\ndestination:/q\r\nfoo:bar\r\n\r\nbody\0"
	    "COMMIT\r\ntransaction:t1\n\r\n\0"), STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 2);
	expect_frame(&r.f[0], CMD_SEND, "SEND", LIT("body"), 2, "destination", "/q", "foo", "bar");
	expect_frame(&r.f[1], CMD_COMMIT, "COMMIT", "", 0, 1, "transaction", "t1");
	assert_int_equal(r.f[1].known[HDR_TRANSACTION], 0);
	run_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Bodies                                                                     */

static void
test_content_length_body_with_nuls(void **state)
{
	(void)state;
	struct run r;
	parse_whole(LIT("SEND\ncontent-length:6\n\na\0b\0\0c\0SEND\n\nnext\0"), STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 2);
	expect_frame(&r.f[0], CMD_SEND, "SEND", LIT("a\0b\0\0c"), 1, "content-length", "6");
	assert_int_equal(r.f[0].known[HDR_CONTENT_LENGTH], 0);
	expect_frame(&r.f[1], CMD_SEND, "SEND", LIT("next"), 0);
	run_free(&r);

	/* The body is only complete once all content-length bytes have come. */
	struct parser p;
	parser_init(&p, &roomy);
	struct frame *f;
	assert_int_equal(parser_feed(&p, LIT("SEND\ncontent-length:4\n\n\0\0\0")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_true(parser_mid_frame(&p));
	assert_int_equal(parser_feed(&p, LIT("\0")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_int_equal(parser_feed(&p, LIT("\0")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	mem_is(f->body, f->body_len, LIT("\0\0\0\0"), "body");
	parser_free(&p);
}

static void
test_body_ends_at_first_nul(void **state)
{
	(void)state;
	struct run r;
	parse_whole(LIT("SEND\n\nabc\0SEND\nx:1\n\ndef\0"), STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 2);
	expect_frame(&r.f[0], CMD_SEND, "SEND", LIT("abc"), 0);
	expect_frame(&r.f[1], CMD_SEND, "SEND", LIT("def"), 1, "x", "1");
	run_free(&r);

	/* Without content-length the body stops at the first NUL, so whatever
	 * follows is the start of the next frame. */
	parse_whole(LIT("SEND\n\nab\0cd\0"), STOMP_1_2, &r);
	assert_int_equal(r.n, 1);
	expect_frame(&r.f[0], CMD_SEND, "SEND", LIT("ab"), 0);
	assert_true(r.failed); /* "cd\0" is a command line cut by a NUL */
	run_free(&r);
}

/* Bodies of a few kilobytes, both kinds, in a variety of chunk sizes (all
 * within the parser's first buffer). */
static void
test_bodies_kilobytes(void **state)
{
	(void)state;
	enum { LEN = 1500 };
	char with_nuls[LEN], text[LEN];
	for (size_t i = 0; i < LEN; i++) {
		with_nuls[i] = (char)(i % 7 == 3 ? 0 : 'A' + i % 26);
		text[i] = (char)('a' + i % 26);
	}
	struct bytes in = { 0 };
	b_fmt(&in, "SEND\ncontent-length:%d\n\n", LEN);
	b_add(&in, with_nuls, LEN);
	b_add(&in, LIT("\0\nSEND\n\n"));
	b_add(&in, text, LEN);
	b_add(&in, "", 1);
	static const size_t chunks[] = { 0, 1, 2, 100, 1499, 1500, 1501 };
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		struct run r;
		parse_chunked(in.d, in.n, chunks[c], STOMP_1_2, &roomy, &r);
		assert_false(r.failed);
		assert_int_equal(r.n, 2);
		expect_frame(&r.f[0], CMD_SEND, "SEND", with_nuls, LEN, 1, "content-length", "1500");
		expect_frame(&r.f[1], CMD_SEND, "SEND", text, LEN, 0);
		run_free(&r);
	}
	b_free(&in);
}

static void
test_content_length_zero(void **state)
{
	(void)state;
	struct run r;
	parse_whole(LIT("SEND\ncontent-length:0\n\n\0\nSEND\n\nx\0"), STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 2);
	expect_frame(&r.f[0], CMD_SEND, "SEND", "", 0, 1, "content-length", "0");
	expect_frame(&r.f[1], CMD_SEND, "SEND", LIT("x"), 0);
	run_free(&r);

	/* An empty body without content-length. */
	parse_whole(LIT("BEGIN\ntransaction:t\n\n\0"), STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	expect_frame(&r.f[0], CMD_BEGIN, "BEGIN", "", 0, 1, "transaction", "t");
	run_free(&r);
}

static void
test_content_length_too_small(void **state)
{
	(void)state;
	expect_error(LIT("SEND\ncontent-length:2\n\nabc\0"), STOMP_1_2, &roomy, "NUL");
	/* Too large: the byte where the NUL should be is the next frame's. */
	expect_error(LIT("SEND\ncontent-length:5\n\nabc\0\nSEND\n\n\0"), STOMP_1_2, &roomy, "NUL");
}

static void
test_content_length_not_numeric(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"abc", "", "-1", "+1", " 5", "5 ", "0x10", "1.5", "5a", "12345678901234567890",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct bytes in = { 0 };
		b_fmt(&in, "SEND\ncontent-length:%s\n\nhello", bad[i]);
		b_add(&in, "", 1);
		expect_error(in.d, in.n, STOMP_1_2, &roomy, "content-length");
		b_free(&in);
	}
}

/* ------------------------------------------------------------------------ */
/* Escapes                                                                    */

static void
test_escapes_v12(void **state)
{
	(void)state;
	struct run r;
	parse_whole(LIT("SEND\na\\cb:x\\ny\\\\z\\r\nplain:no escapes\n\n\0"), STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	expect_frame(&r.f[0], CMD_SEND, "SEND", "", 0, 2, "a:b", "x\ny\\z\r", "plain", "no escapes");
	run_free(&r);

	/* A decoded header name is looked up after decoding. */
	parse_whole(LIT("SEND\n\\\\:v\ndest\\cination:w\n\n\0"), STOMP_1_2, &r);
	assert_false(r.failed);
	expect_frame(&r.f[0], CMD_SEND, "SEND", "", 0, 2, "\\", "v", "dest:ination", "w");
	assert_int_equal(r.f[0].hdr[1].id, HDR_OTHER);
	run_free(&r);
}

static void
test_escape_undefined_v12(void **state)
{
	(void)state;
	expect_error(LIT("SEND\nk:a\\tb\n\n\0"), STOMP_1_2, &roomy, "escape");
	expect_error(LIT("SEND\nk\\t:ab\n\n\0"), STOMP_1_2, &roomy, "escape");
	/* A backslash ending a value or a name. */
	expect_error(LIT("SEND\nk:ab\\\n\n\0"), STOMP_1_2, &roomy, "escape");
	expect_error(LIT("SEND\nk:ab\\\r\n\r\n\0"), STOMP_1_2, &roomy, "escape");
	expect_error(LIT("SEND\nk\\:ab\n\n\0"), STOMP_1_2, &roomy, "escape");
}

static void
test_escapes_v11(void **state)
{
	(void)state;
	struct run r;
	parse_whole(LIT("SEND\nk:a\\nb\\cc\\\\d\n\n\0"), STOMP_1_1, &r);
	assert_false(r.failed);
	expect_frame(&r.f[0], CMD_SEND, "SEND", "", 0, 1, "k", "a\nb:c\\d");
	run_free(&r);
	expect_error(LIT("SEND\nk:a\\rb\n\n\0"), STOMP_1_1, &roomy, "escape");
	expect_error(LIT("SEND\nk:a\\tb\n\n\0"), STOMP_1_1, &roomy, "escape");
	expect_error(LIT("SEND\nk:ab\\\n\n\0"), STOMP_1_1, &roomy, "escape");
}

static void
test_escapes_v10_literal(void **state)
{
	(void)state;
	struct run r;
	parse_whole(LIT("SEND\nk\\c:a\\nb\\tc\\r\\\n\n\0"), STOMP_1_0, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	expect_frame(&r.f[0], CMD_SEND, "SEND", "", 0, 1, "k\\c", "a\\nb\\tc\\r\\");
	run_free(&r);
}

static void
test_connect_never_unescaped(void **state)
{
	(void)state;
	for (enum stomp_version v = STOMP_1_0; v < STOMP_VERSIONS; v++) {
		struct run r;
		parse_whole(LIT("CONNECT\nlogin:a\\nb\npasscode:p\\t\\\n\n\0"
		    "STOMP\nhost:h\\c\\r\n\n\0"
		    "SEND\nk:a\\\\b\n\n\0"), v, &r);
		assert_false(r.failed);
		assert_int_equal(r.n, 3);
		expect_frame(&r.f[0], CMD_CONNECT, "CONNECT", "", 0, 2, "login", "a\\nb", "passcode",
		    "p\\t\\");
		assert_int_equal(r.f[0].known[HDR_LOGIN], 0);
		assert_int_equal(r.f[0].known[HDR_PASSCODE], 1);
		expect_frame(&r.f[1], CMD_STOMP, "STOMP", "", 0, 1, "host", "h\\c\\r");
		/* The frame after CONNECT is unescaped again per the version. */
		expect_frame(&r.f[2], CMD_SEND, "SEND", "", 0, 1, "k",
		    v == STOMP_1_0 ? "a\\\\b" : "a\\b");
		run_free(&r);
	}
}

/* ------------------------------------------------------------------------ */
/* Headers                                                                    */

static void
test_repeated_header(void **state)
{
	(void)state;
	struct run r;
	parse_whole(LIT("SEND\nfoo:1\ndestination:/a\ncontent-type:t\ndestination:/b\nfoo:2\n\n\0"
	    "SEND\nreceipt:r\n\n\0"), STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 2);
	const struct fcopy *f = &r.f[0];
	expect_frame(f, CMD_SEND, "SEND", "", 0, 5, "foo", "1", "destination", "/a",
	    "content-type", "t", "destination", "/b", "foo", "2");
	assert_int_equal(f->known[HDR_DESTINATION], 1);
	assert_int_equal(f->known[HDR_CONTENT_TYPE], 2);
	assert_int_equal(f->hdr[0].id, HDR_OTHER);
	assert_int_equal(f->hdr[1].id, HDR_DESTINATION);
	assert_int_equal(f->hdr[3].id, HDR_DESTINATION);
	for (int id = 0; id < HDR_COUNT; id++)
		if (id != HDR_DESTINATION && id != HDR_CONTENT_TYPE)
			assert_int_equal(f->known[id], -1);
	/* known[] is reset for the next frame. */
	assert_int_equal(r.f[1].known[HDR_DESTINATION], -1);
	assert_int_equal(r.f[1].known[HDR_RECEIPT], 0);
	run_free(&r);

	/* frame_get on the live frame returns the first occurrence. */
	struct parser p;
	parser_init(&p, &roomy);
	struct frame *fr;
	assert_int_equal(parser_feed(&p, LIT("SEND\ndestination:/a\ndestination:/b\n\n\0")), 0);
	assert_int_equal(parser_next(&p, &fr), PARSE_FRAME);
	const struct header *h = frame_get(fr, HDR_DESTINATION);
	assert_non_null(h);
	mem_is(h->value, h->value_len, LIT("/a"), "first destination");
	assert_null(frame_get(fr, HDR_ID));
	parser_free(&p);
}

static void
test_every_known_header_indexed(void **state)
{
	(void)state;
	struct bytes in = { 0 };
	b_str(&in, "SEND\nx-custom:0\n");
	for (int id = HDR_COUNT - 1; id >= 0; id--)
		if (id != HDR_CONTENT_LENGTH)
			b_fmt(&in, "%s:v%d\n", frame_hdr_name((enum hdr_id)id), id);
	b_add(&in, LIT("\n\0"));
	struct run r;
	parse_whole(in.d, in.n, STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	const struct fcopy *f = &r.f[0];
	assert_int_equal(f->nhdr, HDR_COUNT);
	assert_int_equal(f->known[HDR_CONTENT_LENGTH], -1);
	for (int id = 0; id < HDR_COUNT; id++) {
		if (id == HDR_CONTENT_LENGTH)
			continue;
		int32_t k = f->known[id];
		assert_true(k >= 1 && (size_t)k < f->nhdr);
		assert_int_equal(f->hdr[k].id, id);
		char want[16];
		snprintf(want, sizeof(want), "v%d", id);
		mem_is(f->hdr[k].value, f->hdr[k].value_len, want, strlen(want), "value");
	}
	run_free(&r);
	b_free(&in);
}

static void
test_header_without_colon(void **state)
{
	(void)state;
	expect_error(LIT("SEND\nfoo\n\n\0"), STOMP_1_2, &roomy, "':'");
	expect_error(LIT("SEND\ndestination:/a\nnocolon\r\n\r\nbody\0"), STOMP_1_0, &roomy, "':'");
}

static void
test_value_with_colons(void **state)
{
	(void)state;
	struct run r;
	parse_whole(LIT("SEND\nurl:http://h:80/a\nempty:\n:noname\ncolons:::\n\n\0"), STOMP_1_0, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	expect_frame(&r.f[0], CMD_SEND, "SEND", "", 0, 4, "url", "http://h:80/a", "empty", "",
	    "", "noname", "colons", "::");
	run_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Limits                                                                     */

static void
test_limit_max_headers(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 1 << 20, 4, 1024, 0 };
	struct run r;
	parse_chunked(LIT("SEND\na:1\nb:2\nc:3\nd:4\n\n\0"), 0, STOMP_1_2, &lim, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.f[0].nhdr, 4);
	run_free(&r);

	expect_error(LIT("SEND\na:1\nb:2\nc:3\nd:4\ne:5\n\n\0"), STOMP_1_2, &lim, "is 4)");
	expect_error(LIT("SEND\na:1\nb:2\nc:3\nd:4\ne:5\n\n\0"), STOMP_1_2, &lim, "headers");

	/* Rejected at the fifth header, without waiting for the end of the frame. */
	parse_chunked(LIT("SEND\na:1\nb:2\nc:3\nd:4\ne:5\nf:6\n"), 1, STOMP_1_2, &lim, &r);
	assert_true(r.failed);
	assert_int_equal(r.fed_at_error, strlen("SEND\na:1\nb:2\nc:3\nd:4\ne:5\n"));
	run_free(&r);
}

static void
test_limit_max_header_line(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 1 << 20, 100, 16, 0 };
	struct run r;
	/* 16 bytes is fine for a header and a command line. */
	parse_chunked(LIT("SEND\nk:vvvvvvvvvvvvvv\n\n\0XXXXXXXXXXXXXXXX\n\n\0"), 0, STOMP_1_2, &lim, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 2);
	expect_frame(&r.f[0], CMD_SEND, "SEND", "", 0, 1, "k", "vvvvvvvvvvvvvv");
	run_free(&r);

	expect_error(LIT("SEND\nk:vvvvvvvvvvvvvvv\n\n\0"), STOMP_1_2, &lim, "is 16)");
	expect_error(LIT("XXXXXXXXXXXXXXXXX\n\n\0"), STOMP_1_2, &lim, "is 16)");
	expect_error(LIT("SEND\nk:vvvvvvvvvvvvvvv\r\n\r\n\0"), STOMP_1_2, &lim, "line");

	/* A long line with no newline yet: 16 bytes wait, 17 fail. */
	struct parser p;
	parser_init(&p, &lim);
	struct frame *f;
	assert_int_equal(parser_feed(&p, LIT("SEND\nk:vvvvvvvvvvvvvv")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_int_equal(parser_feed(&p, LIT("v")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_ERROR);
	str_contains(parser_error(&p), "is 16)");
	parser_free(&p);

	/* Byte by byte, a 1000-byte line fails at its 17th byte. */
	struct bytes in = { 0 };
	b_str(&in, "SEND\n");
	b_fill(&in, 'h', 1000);
	parse_chunked(in.d, in.n, 1, STOMP_1_2, &lim, &r);
	assert_true(r.failed);
	assert_int_equal(r.fed_at_error, strlen("SEND\n") + 17);
	str_contains(r.error, "is 16)");
	run_free(&r);
	b_free(&in);
}

/* A line of exactly max_header_line bytes ended by CRLF is within the limit
 * (the CR is not counted when the line arrives whole), so it must also be
 * accepted when the input happens to be split between the CR and the LF. */
static void
test_limit_max_header_line_crlf_split(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 1 << 20, 100, 16, 0 };
	static const char in[] = "SEND\r\nk:vvvvvvvvvvvvvv\r\n\r\n";
	const size_t n = sizeof(in); /* with the closing NUL */
	struct run whole;
	parse_chunked(in, n, 0, STOMP_1_2, &lim, &whole);
	assert_false(whole.failed);
	assert_int_equal(whole.n, 1);
	expect_frame(&whole.f[0], CMD_SEND, "SEND", "", 0, 1, "k", "vvvvvvvvvvvvvv");
	for (size_t i = 1; i < n; i++) {
		struct run r;
		parse_cuts(in, n, &i, 1, STOMP_1_2, &lim, &r);
		char how[64];
		snprintf(how, sizeof(how), "cut at %zu", i);
		same_run(&whole, &r, how);
		run_free(&r);
	}
	run_free(&whole);
}

static void
test_limit_max_frame_content_length(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 64, 100, 1024, 0 };
	/* "SEND\ncontent-length:NN\n\n" is 24 bytes: 24 + 39 + NUL = 64. */
	struct bytes ok = { 0 }, big = { 0 };
	b_str(&ok, "SEND\ncontent-length:39\n\n");
	assert_int_equal(ok.n, 24);
	b_fill(&ok, 'b', 39);
	b_add(&ok, "", 1);
	assert_int_equal(ok.n, 64);
	struct run r;
	parse_chunked(ok.d, ok.n, 0, STOMP_1_2, &lim, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.f[0].body_len, 39);
	run_free(&r);
	parse_chunked(ok.d, ok.n, 1, STOMP_1_2, &lim, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	run_free(&r);

	b_str(&big, "SEND\ncontent-length:40\n\n");
	b_fill(&big, 'b', 40);
	b_add(&big, "", 1);
	expect_error(big.d, big.n, STOMP_1_2, &lim, "is 64)");
	b_free(&ok);
	b_free(&big);

	/* Rejected as soon as the headers are complete, before any body. */
	static const char *const lens[] = { "40", "1000000", "99999999999999999", "9999999999999999999" };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct parser p;
		parser_init(&p, &lim);
		struct frame *f;
		char head[64];
		int hn = snprintf(head, sizeof(head), "SEND\ncontent-length:%s\n", lens[i]);
		assert_int_equal(parser_feed(&p, head, (size_t)hn), 0);
		assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
		assert_int_equal(parser_feed(&p, LIT("\n")), 0);
		assert_int_equal(parser_next(&p, &f), PARSE_ERROR);
		str_contains(parser_error(&p), "frame too large");
		str_contains(parser_error(&p), "is 64)");
		parser_free(&p);
	}
}

static void
test_limit_max_frame_no_content_length(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 64, 100, 1024, 0 };
	/* "SEND\n\n" + 57 + NUL = 64. */
	struct bytes ok = { 0 }, big = { 0 }, endless = { 0 };
	b_str(&ok, "SEND\n\n");
	b_fill(&ok, 'b', 57);
	b_add(&ok, "", 1);
	assert_int_equal(ok.n, 64);
	struct run r;
	for (size_t chunk = 0; chunk <= 1; chunk++) {
		parse_chunked(ok.d, ok.n, chunk, STOMP_1_2, &lim, &r);
		assert_false(r.failed);
		assert_int_equal(r.n, 1);
		assert_int_equal(r.f[0].body_len, 57);
		run_free(&r);
	}

	b_str(&big, "SEND\n\n");
	b_fill(&big, 'b', 58);
	b_add(&big, "", 1);
	expect_error(big.d, big.n, STOMP_1_2, &lim, "is 64)");

	/* A body that never ends fails once it is over the limit. */
	b_str(&endless, "SEND\n\n");
	b_fill(&endless, 'b', 1000);
	parse_chunked(endless.d, endless.n, 0, STOMP_1_2, &lim, &r);
	assert_true(r.failed);
	str_contains(r.error, "is 64)");
	run_free(&r);
	parse_chunked(endless.d, endless.n, 1, STOMP_1_2, &lim, &r);
	assert_true(r.failed);
	assert_int_equal(r.fed_at_error, 65);
	str_contains(r.error, "frame too large");
	run_free(&r);
	b_free(&ok);
	b_free(&big);
	b_free(&endless);
}

static void
test_limit_max_frame_headers(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 64, 100, 1024, 0 };
	/* A header block that does not end, made of short lines. */
	struct bytes in = { 0 };
	b_str(&in, "SEND\n");
	for (int i = 0; i < 20; i++)
		b_str(&in, "k:vvvvvvvv\n");
	struct run r;
	parse_chunked(in.d, in.n, 0, STOMP_1_2, &lim, &r);
	assert_true(r.failed);
	str_contains(r.error, "is 64)");
	run_free(&r);
	parse_chunked(in.d, in.n, 1, STOMP_1_2, &lim, &r);
	assert_true(r.failed);
	assert_int_equal(r.fed_at_error, 65);
	run_free(&r);

	/* The same header block, ended by a blank line, body under the limit. */
	b_add(&in, LIT("\nb\0"));
	expect_error(in.d, in.n, STOMP_1_2, &lim, "is 64)");
	b_free(&in);
}

/* A header block ended directly by a NUL (no blank line) is still a frame,
 * and must obey max_frame like any other, whole or byte by byte. */
static void
test_limit_max_frame_nul_ended_headers(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 64, 100, 1024, 0 };
	struct bytes small = { 0 }, in = { 0 };
	b_str(&small, "SEND\n");
	for (int i = 0; i < 5; i++)
		b_str(&small, "k:vvvvvvvv\n");
	b_add(&small, "", 1);
	assert_true(small.n <= 64);
	struct run r;
	parse_chunked(small.d, small.n, 0, STOMP_1_2, &lim, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.f[0].nhdr, 5);
	run_free(&r);

	b_str(&in, "SEND\n");
	for (int i = 0; i < 10; i++)
		b_str(&in, "k:vvvvvvvv\n");
	b_add(&in, "", 1);
	assert_true(in.n > 64);
	expect_error(in.d, in.n, STOMP_1_2, &lim, "is 64)");
	b_free(&small);
	b_free(&in);
}

/* A frame ended by a NUL after its headers has no body: a content-length
 * other than 0 in it contradicts that, and is refused (a message would
 * carry that length with no body behind it), as one that is no number
 * is; 0, or none, is accepted. */
static void
test_nul_ended_headers_with_content_length(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 1 << 20, 100, 1024, 0 };
	static const char bad[] = "SEND\ndestination:/queue/a\ncontent-length:40000\n";
	expect_error(bad, sizeof(bad), STOMP_1_2, &lim, "content-length is not 0");
	static const char junk[] = "SEND\ndestination:/queue/a\ncontent-length:x\n";
	expect_error(junk, sizeof(junk), STOMP_1_2, &lim, "content-length is not a number");
	static const char *const good[] = {
		"SEND\ndestination:/queue/a\ncontent-length:0\n",
		"SEND\ndestination:/queue/a\n",
	};
	for (size_t i = 0; i < 2; i++) {
		struct run r;
		parse_chunked(good[i], strlen(good[i]) + 1, 1, STOMP_1_2, &lim, &r);
		assert_false(r.failed);
		assert_int_equal(r.n, 1);
		assert_int_equal(r.f[0].body_len, 0);
		run_free(&r);
	}
}

/* ------------------------------------------------------------------------ */
/* Many headers: each byte looked at a bounded number of times                */

enum { MANY = 100000 };

static size_t
many_headers(struct bytes *b, size_t stop_after)
{
	size_t end_of = 0;
	b_str(b, "SEND\n");
	for (unsigned i = 0; i < MANY; i++) {
		b_fmt(b, "h%u:v%u\n", i, i);
		if (i + 1 == stop_after)
			end_of = b->n;
	}
	b_str(b, "destination:/queue/many\n\nbody");
	b_add(b, "", 1);
	return end_of;
}

static void
test_many_headers_rejected(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 64u << 20, 1000, 1024, 0 };
	struct bytes in = { 0 };
	size_t end_1001 = many_headers(&in, 1001);
	assert_true(end_1001 > 0);
	static const size_t chunks[] = { 1, 7, 0 };
	for (size_t c = 0; c < 3; c++) {
		struct run r;
		parse_chunked(in.d, in.n, chunks[c], STOMP_1_2, &lim, &r);
		assert_true(r.failed);
		assert_int_equal(r.n, 0);
		str_contains(r.error, "is 1000)");
		if (chunks[c] != 0) {
			/* Failed on the line that broke the limit, not at the end. */
			assert_true(r.fed_at_error >= end_1001);
			assert_true(r.fed_at_error < end_1001 + chunks[c]);
		}
		run_free(&r);
	}
	b_free(&in);
}

static void
test_many_headers_parsed(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 64u << 20, 200000, 1024, 0 };
	struct bytes in = { 0 };
	many_headers(&in, 0);
	static const size_t chunks[] = { 1, 7, 0 };
	for (size_t c = 0; c < 3; c++) {
		struct run r;
		parse_chunked(in.d, in.n, chunks[c], STOMP_1_2, &lim, &r);
		assert_false(r.failed);
		assert_int_equal(r.n, 1);
		const struct fcopy *f = &r.f[0];
		assert_int_equal(f->nhdr, MANY + 1);
		for (unsigned i = 0; i < MANY; i++) {
			char name[16], value[16];
			int nn = snprintf(name, sizeof(name), "h%u", i);
			int vn = snprintf(value, sizeof(value), "v%u", i);
			mem_is(f->hdr[i].name, f->hdr[i].name_len, name, (size_t)nn, "name");
			mem_is(f->hdr[i].value, f->hdr[i].value_len, value, (size_t)vn, "value");
		}
		assert_int_equal(f->known[HDR_DESTINATION], MANY);
		mem_is(f->hdr[MANY].value, f->hdr[MANY].value_len, LIT("/queue/many"), "destination");
		mem_is(f->body, f->body_len, LIT("body"), "body");
		run_free(&r);
	}
	b_free(&in);
}

/* ------------------------------------------------------------------------ */
/* NUL bytes in the header block                                              */

static void
test_nul_inside_headers(void **state)
{
	(void)state;
	expect_error(LIT("SEND\nfoo:b\0ar\n\nbody\0"), STOMP_1_2, &roomy, "NUL");
	expect_error(LIT("SE\0ND\n\n\0"), STOMP_1_2, &roomy, "NUL");
	expect_error(LIT("SEND\nfoo\0:bar\n\n\0"), STOMP_1_2, &roomy, "NUL");
	/* A NUL where a command should start. */
	expect_error(LIT("\n\0SEND\n\n\0"), STOMP_1_2, &roomy, "NUL");
}

static void
test_nul_ends_header_block(void **state)
{
	(void)state;
	static const char in[] = "DISCONNECT\n\0SEND\ndestination:/a\n\0\r\nSEND\n\nok\0";
	const size_t n = sizeof(in) - 1;
	for (size_t chunk = 0; chunk <= 3; chunk++) {
		struct run r;
		parse_chunked(in, n, chunk, STOMP_1_2, &roomy, &r);
		assert_false(r.failed);
		assert_int_equal(r.n, 3);
		expect_frame(&r.f[0], CMD_DISCONNECT, "DISCONNECT", "", 0, 0);
		expect_frame(&r.f[1], CMD_SEND, "SEND", "", 0, 1, "destination", "/a");
		assert_int_equal(r.f[1].known[HDR_DESTINATION], 0);
		expect_frame(&r.f[2], CMD_SEND, "SEND", LIT("ok"), 0);
		run_free(&r);
	}
	/* CRLF before the NUL. */
	struct run r;
	parse_whole(LIT("DISCONNECT\r\nreceipt:1\r\n\0"), STOMP_1_2, &r);
	assert_false(r.failed);
	assert_int_equal(r.n, 1);
	expect_frame(&r.f[0], CMD_DISCONNECT, "DISCONNECT", "", 0, 1, "receipt", "1");
	run_free(&r);
}

/* ------------------------------------------------------------------------ */
/* Failure is final                                                           */

static void
test_error_is_sticky(void **state)
{
	(void)state;
	struct parser p;
	parser_init(&p, &roomy);
	struct frame *f;
	assert_int_equal(parser_feed(&p, LIT("SEND\nbad\n\n\0")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_ERROR);
	char first[sizeof(p.error)];
	snprintf(first, sizeof(first), "%s", parser_error(&p));
	assert_true(first[0] != '\0');
	assert_int_equal(parser_next(&p, &f), PARSE_ERROR);
	assert_int_equal(parser_feed(&p, LIT("SEND\n\nok\0SEND\n\nok\0")), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(parser_next(&p, &f), PARSE_ERROR);
	assert_string_equal(parser_error(&p), first);
	assert_false(parser_mid_frame(&p));
	parser_free(&p);

	/* Also after a good frame came out first. */
	parser_init(&p, &roomy);
	assert_int_equal(parser_feed(&p, LIT("SEND\n\nok\0\rX")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	assert_int_equal(parser_next(&p, &f), PARSE_ERROR);
	assert_int_equal(parser_feed(&p, LIT("SEND\n\nok\0")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_ERROR);
	parser_free(&p);
}

/* ------------------------------------------------------------------------ */
/* The socket reader's path: parser_space, read, parser_commit, parser_next   */

static void
body_pattern(char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (char)((i * 31 + seed) % 251); /* includes NULs */
}

/* Emulate reads of varying sizes into the parser's own buffer. */
static void
socket_reads(struct parser *p, struct run *r, const char *data, size_t n, const size_t *reads,
    size_t nreads, size_t *max_cap)
{
	size_t off = 0, k = 0;
	while (off < n && !r->failed) {
		size_t want = reads[k++ % nreads];
		size_t avail = 0;
		char *dst = parser_space(p, want, &avail);
		assert_non_null(dst);
		assert_true(avail >= want);
		size_t got = n - off < want ? n - off : want;
		memcpy(dst, data + off, got);
		parser_commit(p, got);
		off += got;
		r->fed = off;
		if (p->cap > *max_cap)
			*max_cap = p->cap;
		drain(p, r);
	}
}

static void
socket_case(const size_t *reads, size_t nreads)
{
	enum { BIG = 100000, NOLEN = 50000 };
	char *big = malloc(BIG), *nolen = malloc(NOLEN);
	assert_non_null(big);
	assert_non_null(nolen);
	body_pattern(big, BIG, 7);
	for (size_t i = 0; i < NOLEN; i++)
		nolen[i] = (char)('a' + i % 26);

	struct bytes in = { 0 };
	b_add(&in, LIT("CONNECT\naccept-version:1.2\nhost:/\n\n\0\n"));
	b_fmt(&in, "SEND\ndestination:/queue/big\ncontent-length:%d\nreceipt:r1\n\n", BIG);
	b_add(&in, big, BIG);
	b_add(&in, LIT("\0\r\n"));
	b_add(&in, LIT("SEND\ndestination:/queue/nolen\n\n"));
	b_add(&in, nolen, NOLEN);
	b_add(&in, LIT("\0\n\n"));
	for (int i = 0; i < 50; i++) {
		b_fmt(&in, "ACK\nid:%d\n\n", i);
		b_add(&in, "", 1);
	}

	struct parser p;
	parser_init(&p, &roomy);
	p.version = STOMP_1_2;
	struct run r;
	memset(&r, 0, sizeof(r));
	size_t max_cap = 0;
	socket_reads(&p, &r, in.d, in.n, reads, nreads, &max_cap);
	assert_false(r.failed);
	assert_int_equal(r.n, 53);
	expect_frame(&r.f[0], CMD_CONNECT, "CONNECT", "", 0, 2, "accept-version", "1.2", "host", "/");
	expect_frame(&r.f[1], CMD_SEND, "SEND", big, BIG, 3, "destination", "/queue/big",
	    "content-length", "100000", "receipt", "r1");
	expect_frame(&r.f[2], CMD_SEND, "SEND", nolen, NOLEN, 1, "destination", "/queue/nolen");
	for (int i = 0; i < 50; i++) {
		char id[16];
		snprintf(id, sizeof(id), "%d", i);
		expect_frame(&r.f[3 + i], CMD_ACK, "ACK", "", 0, 1, "id", id);
	}
	assert_true(max_cap > BIG); /* grew past the initial buffer */

	/* Idle: trimming gives the buffer back, and the parser still works. */
	assert_false(parser_mid_frame(&p));
	parser_trim(&p);
	assert_null(p.buf);
	assert_int_equal(p.cap, 0);
	struct frame *f;
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	size_t avail;
	char *dst = parser_space(&p, 64, &avail);
	assert_non_null(dst);
	assert_true(avail >= 64);
	memcpy(dst, "SEND\nk:a\\cb\n\nafter trim", 24);
	parser_commit(&p, 24);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	mem_is(f->hdr[0].value, f->hdr[0].value_len, LIT("a:b"), "value after trim");
	mem_is(f->body, f->body_len, LIT("after trim"), "body after trim");
	parser_free(&p);
	run_free(&r);
	b_free(&in);
	free(big);
	free(nolen);
}

/* Reads of mixed sizes: frames arrive in many pieces, the big ones across
 * several reads and buffer growths. */
static void
test_socket_reader(void **state)
{
	(void)state;
	static const size_t reads[] = { 1, 13, 512, 4096, 3, 70000, 100, 8192 };
	socket_case(reads, sizeof(reads) / sizeof(reads[0]));
}

/* One read big enough for everything: the buffer grows once, up front. */
static void
test_socket_reader_one_read(void **state)
{
	(void)state;
	static const size_t reads[] = { 1u << 20 };
	socket_case(reads, 1);
}

/* The frame in progress must survive the buffer being compacted (consumed
 * bytes dropped from the front) while its body is still arriving. */
static void
test_headers_survive_compaction(void **state)
{
	(void)state;
	struct parser p;
	parser_init(&p, &roomy);
	struct frame *f;
	assert_int_equal(parser_feed(&p, LIT("SEND\n\nA\0SEND\ndestination:/q\nreceipt:r\n\n")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	mem_is(f->body, f->body_len, LIT("A"), "first body");
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_true(parser_mid_frame(&p));
	/* Ask for a little more than is free at the end but less than would be
	 * free after dropping the first frame: the buffer is compacted in place. */
	size_t want = p.cap - p.len + 1, avail;
	char *dst = parser_space(&p, want, &avail);
	assert_non_null(dst);
	assert_true(avail >= want);
	memset(dst, 'x', want);
	parser_commit(&p, want);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_int_equal(parser_feed(&p, "", 1), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	assert_int_equal(f->cmd, CMD_SEND);
	mem_is(f->cmd_name, f->cmd_len, LIT("SEND"), "command");
	assert_int_equal(f->nhdr, 2);
	mem_is(f->hdr[0].name, f->hdr[0].name_len, LIT("destination"), "name");
	mem_is(f->hdr[0].value, f->hdr[0].value_len, LIT("/q"), "value");
	mem_is(f->hdr[1].value, f->hdr[1].value_len, LIT("r"), "receipt");
	assert_int_equal(f->body_len, want);
	parser_free(&p);
}

/* ...and the buffer being reallocated to a bigger one. */
static void
test_headers_survive_growth(void **state)
{
	(void)state;
	struct parser p;
	parser_init(&p, &roomy);
	struct frame *f;
	assert_int_equal(parser_feed(&p, LIT("SEND\ndestination:/queue/grow\n\n")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	size_t cap0 = p.cap;
	enum { BODY = 300000 };
	char *body = malloc(BODY);
	assert_non_null(body);
	body_pattern(body, BODY, 1);
	for (size_t i = 0; i < BODY; i++)
		if (body[i] == '\0')
			body[i] = '0';
	for (size_t off = 0; off < BODY; off += 1000) {
		assert_int_equal(parser_feed(&p, body + off, 1000), 0);
		assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	}
	assert_true(p.cap > cap0);
	assert_int_equal(parser_feed(&p, "", 1), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	mem_is(f->cmd_name, f->cmd_len, LIT("SEND"), "command");
	assert_int_equal(f->nhdr, 1);
	mem_is(f->hdr[0].name, f->hdr[0].name_len, LIT("destination"), "name");
	mem_is(f->hdr[0].value, f->hdr[0].value_len, LIT("/queue/grow"), "value");
	mem_is(f->body, f->body_len, body, BODY, "body");
	free(body);
	parser_free(&p);
}

/* With a known content-length, parser_space makes room for the whole rest
 * of the frame at once. */
static void
test_space_reserves_known_body(void **state)
{
	(void)state;
	struct parser p;
	parser_init(&p, &roomy);
	struct frame *f;
	assert_int_equal(parser_feed(&p, LIT("SEND\ncontent-length:200000\n\nabc")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	size_t avail;
	char *dst = parser_space(&p, 1, &avail);
	assert_non_null(dst);
	assert_true(avail >= 200000 - 3 + 1);
	parser_free(&p);
}

static void
test_trim(void **state)
{
	(void)state;
	struct parser p;
	parser_init(&p, &roomy);
	struct frame *f;
	parser_trim(&p); /* nothing held: harmless */
	assert_null(p.buf);

	/* Mid-frame: the buffer is kept, and the frame completes intact. */
	assert_int_equal(parser_feed(&p, LIT("SEND\ndestination:/a\n\nhal")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	parser_trim(&p);
	assert_non_null(p.buf);
	assert_int_equal(parser_feed(&p, LIT("f\0")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	mem_is(f->body, f->body_len, LIT("half"), "body");
	mem_is(f->hdr[0].value, f->hdr[0].value_len, LIT("/a"), "value");

	/* All consumed: released. */
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	parser_trim(&p);
	assert_null(p.buf);
	assert_int_equal(p.cap, 0);

	/* A half heart-beat (CR waiting for LF) is kept. */
	assert_int_equal(parser_feed(&p, LIT("\r")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	parser_trim(&p);
	assert_non_null(p.buf);
	assert_int_equal(parser_feed(&p, LIT("\nSEND\n\nx\0")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	mem_is(f->body, f->body_len, LIT("x"), "body");

	/* A complete frame followed by the start of another: kept. */
	assert_int_equal(parser_feed(&p, LIT("SEND\n\ny\0SE")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	parser_trim(&p);
	assert_non_null(p.buf);
	assert_int_equal(parser_feed(&p, LIT("ND\n\nz\0")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	mem_is(f->cmd_name, f->cmd_len, LIT("SEND"), "command");
	mem_is(f->body, f->body_len, LIT("z"), "body");
	parser_trim(&p);
	assert_null(p.buf);
	parser_free(&p);
}

static void
test_mid_frame(void **state)
{
	(void)state;
	struct parser p;
	parser_init(&p, &roomy);
	struct frame *f;
	assert_false(parser_mid_frame(&p));
	assert_int_equal(parser_feed(&p, LIT("\n\n")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_false(parser_mid_frame(&p));
	assert_int_equal(parser_feed(&p, LIT("SE")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_true(parser_mid_frame(&p));
	assert_int_equal(parser_feed(&p, LIT("ND\ncontent-length:3\n\nab")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_NEED_MORE);
	assert_true(parser_mid_frame(&p));
	assert_int_equal(parser_feed(&p, LIT("c\0")), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	assert_false(parser_mid_frame(&p));
	parser_free(&p);
}

/* After an error, which setting's limit was broken (for the ERROR's
 * body), or none for a malformed frame. */
static void
test_limit_named(void **state)
{
	(void)state;
	static const struct parser_limits lim = { 4096, 3, 64, 1000 };
	static const struct {
		const char *in;
		const char *key;
		size_t limit;
	} cases[] = {
		{ "SEND\ncontent-length:2000\n\n", "max-body-size", 1000 },
		{ "SEND\na:1\nb:2\nc:3\nd:4\n\n", "max-headers", 3 },
		{ "SEND\nlong:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n\n",
		    "max-header-line", 64 },
		{ "SEND\nno colon\n\n", NULL, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct parser p;
		parser_init(&p, &lim);
		struct frame *f;
		size_t limit = 12345;
		assert_null(parser_limit(&p, &limit)); /* nothing failed yet */
		assert_int_equal(parser_feed(&p, cases[i].in, strlen(cases[i].in)), 0);
		assert_int_equal(parser_next(&p, &f), PARSE_ERROR);
		const char *key = parser_limit(&p, &limit);
		if (cases[i].key == NULL) {
			assert_null(key);
		} else {
			assert_non_null(key);
			assert_string_equal(key, cases[i].key);
			assert_int_equal(limit, cases[i].limit);
			str_contains(parser_error(&p), cases[i].key);
		}
		parser_free(&p);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_state),
		cmocka_unit_test(test_simple_frame),
		cmocka_unit_test(test_unknown_command),
		cmocka_unit_test(test_many_frames_one_feed),
		cmocka_unit_test(test_split_every_boundary_v12),
		cmocka_unit_test(test_split_every_boundary_v11),
		cmocka_unit_test(test_split_every_boundary_v10),
		cmocka_unit_test(test_split_every_pair_of_boundaries),
		cmocka_unit_test(test_heartbeats_between_frames),
		cmocka_unit_test(test_stray_cr_between_frames),
		cmocka_unit_test(test_crlf_lines),
		cmocka_unit_test(test_content_length_body_with_nuls),
		cmocka_unit_test(test_body_ends_at_first_nul),
		cmocka_unit_test(test_bodies_kilobytes),
		cmocka_unit_test(test_content_length_zero),
		cmocka_unit_test(test_content_length_too_small),
		cmocka_unit_test(test_content_length_not_numeric),
		cmocka_unit_test(test_escapes_v12),
		cmocka_unit_test(test_escape_undefined_v12),
		cmocka_unit_test(test_escapes_v11),
		cmocka_unit_test(test_escapes_v10_literal),
		cmocka_unit_test(test_connect_never_unescaped),
		cmocka_unit_test(test_repeated_header),
		cmocka_unit_test(test_every_known_header_indexed),
		cmocka_unit_test(test_header_without_colon),
		cmocka_unit_test(test_value_with_colons),
		cmocka_unit_test(test_limit_max_headers),
		cmocka_unit_test(test_limit_max_header_line),
		cmocka_unit_test(test_limit_max_header_line_crlf_split),
		cmocka_unit_test(test_limit_max_frame_content_length),
		cmocka_unit_test(test_limit_max_frame_no_content_length),
		cmocka_unit_test(test_limit_max_frame_headers),
		cmocka_unit_test(test_limit_max_frame_nul_ended_headers),
		cmocka_unit_test(test_nul_ended_headers_with_content_length),
		cmocka_unit_test(test_many_headers_rejected),
		cmocka_unit_test(test_many_headers_parsed),
		cmocka_unit_test(test_nul_inside_headers),
		cmocka_unit_test(test_nul_ends_header_block),
		cmocka_unit_test(test_error_is_sticky),
		cmocka_unit_test(test_socket_reader_one_read),
		cmocka_unit_test(test_socket_reader),
		cmocka_unit_test(test_headers_survive_compaction),
		cmocka_unit_test(test_headers_survive_growth),
		cmocka_unit_test(test_space_reserves_known_body),
		cmocka_unit_test(test_trim),
		cmocka_unit_test(test_mid_frame),
		cmocka_unit_test(test_limit_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
