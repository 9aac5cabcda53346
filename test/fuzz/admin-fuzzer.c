/* admin-fuzzer.c - libFuzzer harness for the admin API (admin.c,
 * metrics.c): any state the STOMP side can make, any method and path.
 *
 * Input: bytes a client sends (destination names of any bytes), up to the
 * first 0xFF; then requests, one per line: the first byte picks the method
 * (GET, HEAD, POST, DELETE, PUT, OPTIONS), the rest of the line is the path.
 * After each request the answer is checked: a status admin.c may give, a
 * JSON answer that is valid JSON (a tiny validator below: destination names
 * are client bytes, so every escape must be right), a tab-separated one
 * whose lines have the header's number of fields, no body for errors but one
 * line; and after the requests, /metrics once, each line a comment or
 * "name value".  The broker's bookkeeping must hold after purges, deletes
 * and closes (dest_check).  Violations abort(); ASan and UBSan catch the
 * rest. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "eft/admin.h"
#include "eft/broker.h"
#include "eft/server.h"
#include "eft/conn.h"
#include "eft/log.h"
#include "eft/metrics.h"
#include "eft/transport_mem.h"
#include <event2/buffer.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZER "admin-fuzzer"
#include "check.h"

static struct event_base *base;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	base = event_base_new();
	if (base == NULL)
		abort();
	log_set_level(EFT_LOG_QUIET);
	return 0;
}

/* ---- a JSON validator (RFC 8259, UTF-8 not checked) ---- */

static const char *json_value(const char *p, const char *end, int depth);

static const char *
json_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

static const char *
json_string(const char *p, const char *end)
{
	if (p >= end || *p++ != '"')
		return NULL;
	while (p < end && *p != '"') {
		unsigned char c = (unsigned char)*p++;
		if (c < 0x20)
			return NULL;
		if (c != '\\')
			continue;
		if (p >= end)
			return NULL;
		c = (unsigned char)*p++;
		if (c == 'u') {
			for (int i = 0; i < 4; i++, p++)
				if (p >= end || !strchr("0123456789abcdefABCDEF", *p) || *p == '\0')
					return NULL;
		} else if (!strchr("\"\\/bfnrt", c) || c == '\0') {
			return NULL;
		}
	}
	return p < end ? p + 1 : NULL;
}

static const char *
json_value(const char *p, const char *end, int depth)
{
	p = json_ws(p, end);
	if (p >= end || depth > 16)
		return NULL;
	if (*p == '"')
		return json_string(p, end);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		bool object = *p == '{';
		p = json_ws(p + 1, end);
		if (p < end && *p == close)
			return p + 1;
		for (;;) {
			if (object) {
				p = json_string(json_ws(p, end), end);
				if (p == NULL || (p = json_ws(p, end)) >= end || *p++ != ':')
					return NULL;
			}
			if ((p = json_value(p, end, depth + 1)) == NULL)
				return NULL;
			p = json_ws(p, end);
			if (p >= end)
				return NULL;
			if (*p == close)
				return p + 1;
			if (*p++ != ',')
				return NULL;
		}
	}
	if (end - p >= 4 && (memcmp(p, "null", 4) == 0 || memcmp(p, "true", 4) == 0))
		return p + 4;
	if (end - p >= 5 && memcmp(p, "false", 5) == 0)
		return p + 5;
	const char *start = p;
	while (p < end && *p >= '0' && *p <= '9')
		p++;
	return p > start ? p : NULL;
}

/* ---- checks ---- */

static void
check_reply(const struct admin_reply *r, enum admin_format fmt, const char *path)
{
	static const int statuses[] = { 200, 400, 404, 405, 409 };
	bool known = false;
	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++)
		known |= r->status == statuses[i];
	CHECK(known, "status %d for %s", r->status, path);
	CHECK((r->status == 405) == (r->allow != NULL), "Allow with %d", r->status);
	CHECK(r->content_type != NULL, "no content type");
	size_t len;
	const char *body = admin_reply_body(r, &len);
	if (r->fixed != NULL || strcmp(path, "/metrics") == 0)
		return;
	CHECK(len > 0 && body[len - 1] == '\n', "the answer to %s does not end a line", path);
	if (fmt == ADMIN_JSON) {
		const char *end = json_value(body, body + len, 0);
		CHECK(end != NULL && json_ws(end, body + len) == body + len,
		    "not JSON for %s: %.*s", path, (int)(len > 300 ? 300 : len), body);
		return;
	}
	if (r->status != 200) {
		CHECK(memchr(body, '\n', len) == body + len - 1, "a TSV error of more than a line");
		return;
	}
	/* Every line has as many fields as the first (a record's: two). */
	size_t want = 0, fields = 1;
	for (size_t i = 0; i < len; i++) {
		if (body[i] == '\t') {
			fields++;
		} else if (body[i] == '\n') {
			if (want == 0)
				want = fields;
			CHECK(fields == want, "a TSV line of %zu fields, not %zu, for %s", fields, want,
			    path);
			fields = 1;
		}
	}
}

static void
check_metrics(struct broker *b)
{
	struct sbuf s;
	sbuf_init(&s);
	metrics_render(b, &s);
	CHECK(!s.failed, "metrics failed");
	const char *p = s.data, *end = s.data + s.len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		CHECK(nl != NULL, "metrics end in the middle of a line");
		if (*p != '#') {
			/* name or name{labels}, a space, a number. */
			const char *sp = nl;
			while (sp > p && sp[-1] != ' ')
				sp--;
			CHECK(sp > p + 1 && sp < nl, "a sample without a value: %.*s", (int)(nl - p), p);
			for (const char *q = sp; q < nl; q++)
				CHECK((*q >= '0' && *q <= '9') || *q == '.', "bad value %.*s",
				    (int)(nl - sp), sp);
		}
		p = nl + 1;
	}
	sbuf_free(&s);
}

static void
check_dest(const struct dest *d, void *arg)
{
	(void)arg;
	const char *why = dest_check(d);
	CHECK(why == NULL, "%s: %s", dest_name(d), why);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const methods[] = { "GET", "HEAD", "POST", "DELETE", "PUT", "OPTIONS" };
	struct config cfg;
	char err[256];
	config_defaults(&cfg);
	if (config_set(&cfg, "listen", "tcp://127.0.0.1:5000", err, sizeof(err)) != 0 ||
	    config_check(&cfg, err, sizeof(err)) != 0)
		abort();
	struct broker *b = server_new(base, &cfg);
	struct transport *t = transport_mem_new();
	if (b == NULL || t == NULL)
		abort();
	const uint8_t *sep = memchr(data, 0xff, size);
	size_t stomp = sep ? (size_t)(sep - data) : size;
	static const char connect[] = "CONNECT\naccept-version:1.2\n\n";
	struct conn *c = conn_new(b, t, "mem 127.0.0.1:4000");
	if (c == NULL)
		abort();
	transport_mem_feed(t, connect, sizeof(connect));
	transport_mem_feed(t, data, stomp);
	server_flush(b);

	const char *p = sep ? (const char *)sep + 1 : (const char *)data + size;
	const char *end = (const char *)data + size;
	char path[512];
	int n = 0;
	while (p < end && n++ < 32) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line_end = nl ? nl : end;
		size_t len = (size_t)(line_end - p);
		if (len > 0) {
			const char *method = methods[(unsigned char)p[0] % 6];
			enum admin_format fmt = (unsigned char)p[0] & 0x80 ? ADMIN_TSV : ADMIN_JSON;
			size_t plen = len - 1 < sizeof(path) - 1 ? len - 1 : sizeof(path) - 1;
			memcpy(path, p + 1, plen);
			path[plen] = '\0';
			if (strlen(path) == plen) { /* evhttp gives no NUL in a path */
				struct admin_reply r;
				admin_handle(b, method, path, fmt, &r);
				check_reply(&r, fmt, path);
				admin_reply_free(&r);
				server_flush(b);
				dests_foreach(&b->dests, check_dest, NULL);
			}
		}
		p = line_end + 1;
	}
	check_metrics(b);
	/* What the connection wrote may hold message bodies by reference:
	 * let them go while the broker's message pool is still there (a real
	 * transport writes them out or frees them with the connection). */
	struct evbuffer *written = transport_mem_output(t);
	evbuffer_drain(written, evbuffer_get_length(written));
	server_free(b);
	transport_mem_destroy(t);
	return 0;
}
