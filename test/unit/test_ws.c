/* test_ws.c - unit tests for the WebSocket codec: the upgrade handshake,
 * server frame headers, masking, the decoder of client frames (fragments,
 * control frames between them, every close code it gives, limits) and the
 * UTF-8 check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <event2/buffer.h>

#include "eft/ws.h"

static const struct ws_server server = {
	.path = "/ws", .origins = "", .binary = false, .max_message = 1024,
};

#define GOOD_KEY "dGhlIHNhbXBsZSBub25jZQ=="

struct answer {
	int status;
	char resp[1024];
	size_t resp_len;
	char protocol[16];
	char why[200];
};

static struct answer
ask(const struct ws_server *s, const char *req)
{
	struct answer a;
	memset(&a, 0, sizeof(a));
	size_t len = ws_request_length(req, strlen(req));
	assert_int_equal(len, strlen(req));
	a.status = ws_handshake(s, req, len, a.resp, sizeof(a.resp), &a.resp_len, a.protocol,
	    sizeof(a.protocol), a.why, sizeof(a.why));
	assert_int_equal(a.resp_len, strlen(a.resp));
	return a;
}

static void
test_accept_key_rfc_example(void **state)
{
	(void)state;
	char out[29];
	ws_accept_key(GOOD_KEY, strlen(GOOD_KEY), out);
	assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void
test_request_length(void **state)
{
	(void)state;
	const char *req = "GET /ws HTTP/1.1\r\nHost: x\r\n\r\nrest";
	assert_int_equal(ws_request_length(req, strlen(req)), strlen(req) - 4);
	assert_int_equal(ws_request_length(req, 20), 0);
}

static void
test_handshake_good(void **state)
{
	(void)state;
	struct answer a = ask(&server, "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Key: " GOOD_KEY "\r\n"
	    "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v10.stomp, v11.stomp, v12.stomp\r\n\r\n");
	assert_int_equal(a.status, 101);
	assert_string_equal(a.protocol, "v12.stomp");
	assert_non_null(strstr(a.resp, "HTTP/1.1 101 Switching Protocols\r\n"));
	assert_non_null(strstr(a.resp, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
	assert_non_null(strstr(a.resp, "Sec-WebSocket-Protocol: v12.stomp\r\n"));
	assert_int_equal(memcmp(a.resp + a.resp_len - 4, "\r\n\r\n", 4), 0);
}

static void
test_handshake_headers_any_case_and_lists(void **state)
{
	(void)state;
	/* Firefox sends "Connection: keep-alive, Upgrade"; header names and
	 * tokens in any case; the path may carry a query. */
	struct answer a = ask(&server, "GET /ws?x=1 HTTP/1.1\r\nhOsT: h\r\nUPGRADE: WebSocket\r\n"
	    "connection: keep-alive, Upgrade\r\nsec-websocket-key:   " GOOD_KEY "  \r\n"
	    "SEC-WEBSOCKET-VERSION: 13\r\nsec-websocket-protocol: v11.stomp\r\n"
	    "Sec-WebSocket-Protocol: v10.stomp\r\n\r\n");
	assert_int_equal(a.status, 101);
	assert_string_equal(a.protocol, "v11.stomp");
}

static void
test_handshake_no_subprotocol(void **state)
{
	(void)state;
	struct answer a = ask(&server, "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Key: " GOOD_KEY "\r\nSec-WebSocket-Version: 13\r\n"
	    "Sec-WebSocket-Protocol: mqtt\r\n\r\n");
	assert_int_equal(a.status, 101);
	assert_string_equal(a.protocol, "");
	assert_null(strstr(a.resp, "Sec-WebSocket-Protocol"));
}

static void
test_handshake_refusals(void **state)
{
	(void)state;
	static const struct {
		const char *req;
		int status;
		const char *why;
	} cases[] = {
		{ "POST /ws HTTP/1.1\r\nHost: h\r\n\r\n", 400, "GET" },
		{ "GET /ws HTTP/1.0\r\nHost: h\r\n\r\n", 400, "GET" },
		{ "CONNECT\naccept-version:1.2\n\n\r\n\r\n", 400, "GET" },
		{ "GET /stomp HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		  "Sec-WebSocket-Key: " GOOD_KEY "\r\nSec-WebSocket-Version: 13\r\n\r\n", 404, "/stomp" },
		{ "GET /ws HTTP/1.1\r\nHost: h\r\n\r\n", 400, "upgrade" },
		{ "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nSec-WebSocket-Key: " GOOD_KEY
		  "\r\nSec-WebSocket-Version: 13\r\n\r\n", 400, "upgrade" },
		{ "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		  "Sec-WebSocket-Key: " GOOD_KEY "\r\nSec-WebSocket-Version: 13\r\n\r\n", 400, "Host" },
		{ "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		  "Sec-WebSocket-Key: " GOOD_KEY "\r\nSec-WebSocket-Version: 8\r\n\r\n", 426, "13" },
		{ "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		  "Sec-WebSocket-Version: 13\r\n\r\n", 400, "Key" },
		{ "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		  "Sec-WebSocket-Key: c2hvcnQ=\r\nSec-WebSocket-Version: 13\r\n\r\n", 400, "Key" },
		{ "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ!=\r\nSec-WebSocket-Version: 13\r\n\r\n", 400,
		  "Key" },
		{ "GET /ws HTTP/1.1\r\nHost: h\r\nbroken line\r\n\r\n", 400, "GET" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct answer a = ask(&server, cases[i].req);
		if (a.status != cases[i].status || strstr(a.why, cases[i].why) == NULL) {
			print_error("case %zu: status %d why '%s'\n", i, a.status, a.why);
			fail();
		}
		char line[32];
		snprintf(line, sizeof(line), "HTTP/1.1 %d ", cases[i].status);
		assert_int_equal(strncmp(a.resp, line, strlen(line)), 0);
		assert_non_null(strstr(a.resp, "Connection: close\r\n"));
		/* The body is the reason, and Content-Length is its length. */
		const char *body = strstr(a.resp, "\r\n\r\n") + 4;
		char cl[40];
		snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", strlen(body));
		assert_non_null(strstr(a.resp, cl));
	}
}

static void
test_handshake_origins(void **state)
{
	(void)state;
	struct ws_server s = server;
	s.origins = "https://a.example, http://localhost:8080";
	const char *fmt = "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	    "Sec-WebSocket-Key: " GOOD_KEY "\r\nSec-WebSocket-Version: 13\r\n%s\r\n";
	char req[512];
	snprintf(req, sizeof(req), fmt, "Origin: http://localhost:8080\r\n");
	assert_int_equal(ask(&s, req).status, 101);
	snprintf(req, sizeof(req), fmt, "Origin: HTTPS://A.EXAMPLE\r\n");
	assert_int_equal(ask(&s, req).status, 101);
	snprintf(req, sizeof(req), fmt, "Origin: https://evil.example\r\n");
	struct answer a = ask(&s, req);
	assert_int_equal(a.status, 403);
	assert_non_null(strstr(a.why, "https://evil.example"));
	snprintf(req, sizeof(req), fmt, "Origin: https://a.example.evil\r\n");
	assert_int_equal(ask(&s, req).status, 403);
	/* No Origin: not a browser. */
	snprintf(req, sizeof(req), fmt, "");
	assert_int_equal(ask(&s, req).status, 101);
	/* An empty list allows every origin. */
	snprintf(req, sizeof(req), fmt, "Origin: https://evil.example\r\n");
	assert_int_equal(ask(&server, req).status, 101);
}

static void
test_frame_header_lengths(void **state)
{
	(void)state;
	uint8_t h[10];
	assert_int_equal(ws_frame_header(h, WS_OP_TEXT, 0), 2);
	assert_int_equal(h[0], 0x81);
	assert_int_equal(h[1], 0);
	assert_int_equal(ws_frame_header(h, WS_OP_BINARY, 125), 2);
	assert_int_equal(h[0], 0x82);
	assert_int_equal(h[1], 125);
	assert_int_equal(ws_frame_header(h, WS_OP_TEXT, 126), 4);
	assert_int_equal(h[1], 126);
	assert_int_equal(h[2] << 8 | h[3], 126);
	assert_int_equal(ws_frame_header(h, WS_OP_TEXT, 65535), 4);
	assert_int_equal(h[2] << 8 | h[3], 65535);
	assert_int_equal(ws_frame_header(h, WS_OP_TEXT, 65536), 10);
	assert_int_equal(h[1], 127);
	uint64_t n = 0;
	for (int i = 0; i < 8; i++)
		n = n << 8 | h[2 + i];
	assert_int_equal(n, 65536);
}

/* A client frame: header with mask, then the masked payload. */
static size_t
client_frame(uint8_t *out, unsigned first_byte, const void *payload, size_t n, bool masked)
{
	static const uint8_t mask[4] = { 0x37, 0xfa, 0x21, 0x3d };
	size_t h = 0;
	out[h++] = (uint8_t)first_byte;
	uint8_t m = masked ? 0x80 : 0;
	if (n < 126) {
		out[h++] = (uint8_t)(m | n);
	} else if (n <= 0xffff) {
		out[h++] = m | 126;
		out[h++] = (uint8_t)(n >> 8);
		out[h++] = (uint8_t)n;
	} else {
		out[h++] = m | 127;
		for (int i = 0; i < 8; i++)
			out[h++] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
	}
	if (masked) {
		memcpy(out + h, mask, 4);
		h += 4;
	}
	const uint8_t *p = payload;
	for (size_t i = 0; i < n; i++)
		out[h + i] = masked ? p[i] ^ mask[i & 3] : p[i];
	return h + n;
}

static void
test_unmask_in_place_and_phases(void **state)
{
	(void)state;
	uint8_t src[100], buf[100];
	const uint8_t mask[4] = { 1, 2, 3, 4 };
	for (int i = 0; i < 100; i++)
		src[i] = (uint8_t)(i * 7);
	for (size_t phase = 0; phase < 4; phase++) {
		for (size_t shift = 0; shift < 10; shift++) {
			memcpy(buf, src, 100);
			/* In place, shifted down by `shift` (payload closing a header's gap). */
			bool high = ws_unmask(buf, buf + shift, 100 - shift, mask, phase);
			bool want_high = false;
			for (size_t i = 0; i + shift < 100; i++) {
				assert_int_equal(buf[i], src[i + shift] ^ mask[(phase + i) & 3]);
				want_high |= buf[i] >= 0x80;
			}
			assert_int_equal(high, want_high);
		}
	}
	/* ASCII out says so, whichever part of the loop saw the byte that is not. */
	for (size_t len = 1; len < 70; len++) {
		for (size_t at = 0; at < len; at++) {
			uint8_t a[70] = { 0 }, z[4] = { 0 };
			memset(a, 'a', len);
			assert_false(ws_unmask(buf, a, len, z, 0));
			a[at] = 0xC3;
			assert_true(ws_unmask(buf, a, len, z, 0));
		}
	}
}

struct decoded {
	enum ws_decode_result last;
	uint8_t data[4096];
	size_t len;
	unsigned controls[8];
	size_t ncontrols;
	unsigned unterminated;
};

/* Feed in[0..n) in pieces of `step` bytes, the way the transport does:
 * what is not decoded is carried in front of the next piece. */
static struct decoded
decode_in_steps(struct ws_decoder *d, const uint8_t *in, size_t n, size_t step)
{
	struct decoded r;
	memset(&r, 0, sizeof(r));
	uint8_t buf[8192];
	size_t carry = 0, pos = 0;
	r.last = WS_DECODE_MORE;
	while (pos < n || carry > 0) {
		size_t k = n - pos < step ? n - pos : step;
		memcpy(buf + carry, in + pos, k);
		pos += k;
		size_t len = carry + k, i = 0, o = 0;
		struct ws_control ctl;
		for (;;) {
			r.last = ws_decode(d, buf, len, &i, &o, &ctl);
			if (r.last == WS_DECODE_CONTROL) {
				r.controls[r.ncontrols++] = ctl.opcode;
				continue;
			}
			if (r.last == WS_DECODE_UNTERMINATED) {
				r.unterminated++;
				continue;
			}
			break;
		}
		assert_true(o <= i);
		memcpy(r.data + r.len, buf, o);
		r.len += o;
		if (r.last == WS_DECODE_FAIL)
			return r;
		memmove(buf, buf + i, len - i);
		carry = len - i;
		if (k == 0)
			break;
	}
	return r;
}

static void
test_decode_one_message_any_split(void **state)
{
	(void)state;
	const char stomp[] = "SEND\ndestination:/queue/a\ncontent-length:5\n\nhello";
	uint8_t wire[256];
	size_t n = client_frame(wire, 0x81, stomp, sizeof(stomp), true); /* with its NUL */
	for (size_t step = 1; step <= n; step++) {
		struct ws_decoder d;
		ws_decoder_init(&d, 1024);
		struct decoded r = decode_in_steps(&d, wire, n, step);
		assert_int_equal(r.last, WS_DECODE_MORE);
		assert_int_equal(r.len, sizeof(stomp));
		assert_memory_equal(r.data, stomp, sizeof(stomp));
		assert_int_equal(r.unterminated, 0);
	}
}

static void
test_decode_fragments_with_controls_between(void **state)
{
	(void)state;
	uint8_t wire[512];
	size_t n = 0;
	n += client_frame(wire + n, 0x01, "SEND\ndest", 9, true);          /* text, not final */
	n += client_frame(wire + n, 0x89, "ping!", 5, true);               /* ping between */
	n += client_frame(wire + n, 0x00, "ination:/q/a\n\n", 14, true);   /* continuation */
	n += client_frame(wire + n, 0x8A, "", 0, true);                    /* pong */
	n += client_frame(wire + n, 0x80, "body\0", 5, true);              /* final */
	n += client_frame(wire + n, 0x82, "\n", 1, true);                  /* heart-beat, binary */
	for (size_t step = 1; step <= n; step += 3) {
		struct ws_decoder d;
		ws_decoder_init(&d, 1024);
		struct decoded r = decode_in_steps(&d, wire, n, step);
		assert_int_equal(r.last, WS_DECODE_MORE);
		assert_int_equal(r.ncontrols, 2);
		assert_int_equal(r.controls[0], WS_OP_PING);
		assert_int_equal(r.controls[1], WS_OP_PONG);
		const char want[] = "SEND\ndestination:/q/a\n\nbody\0\n";
		assert_int_equal(r.len, sizeof(want) - 1);
		assert_memory_equal(r.data, want, sizeof(want) - 1);
	}
}

static void
test_decode_control_payload(void **state)
{
	(void)state;
	uint8_t wire[200];
	uint8_t close[] = { 0x03, 0xe8, 'b', 'y', 'e' };
	size_t n = client_frame(wire, 0x88, close, sizeof(close), true);
	struct ws_decoder d;
	ws_decoder_init(&d, 1024);
	size_t in = 0, out = 0;
	struct ws_control ctl;
	/* Not all here: nothing is taken. */
	assert_int_equal(ws_decode(&d, wire, n - 1, &in, &out, &ctl), WS_DECODE_MORE);
	assert_int_equal(in, 0);
	assert_int_equal(ws_decode(&d, wire, n, &in, &out, &ctl), WS_DECODE_CONTROL);
	assert_int_equal(in, n);
	assert_int_equal(out, 0);
	assert_int_equal(ctl.opcode, WS_OP_CLOSE);
	assert_int_equal(ctl.len, sizeof(close));
	assert_memory_equal(ctl.data, close, sizeof(close));
}

static void
expect_fail(const uint8_t *wire, size_t n, size_t max, unsigned code, const char *why)
{
	struct ws_decoder d;
	ws_decoder_init(&d, max);
	struct decoded r = decode_in_steps(&d, wire, n, n);
	assert_int_equal(r.last, WS_DECODE_FAIL);
	assert_int_equal(d.close_code, code);
	if (strstr(d.error, why) == NULL) {
		print_error("error '%s' lacks '%s'\n", d.error, why);
		fail();
	}
	/* And it stays failed. */
	size_t in = 0, out = 0;
	struct ws_control ctl;
	assert_int_equal(ws_decode(&d, (uint8_t *)wire, n, &in, &out, &ctl), WS_DECODE_FAIL);
}

static void
test_decode_protocol_errors(void **state)
{
	(void)state;
	uint8_t wire[300], big[130];
	memset(big, 'x', sizeof(big));
	expect_fail(wire, client_frame(wire, 0x81, "abc", 3, false), 1024, WS_CLOSE_PROTOCOL,
	    "not masked");
	expect_fail(wire, client_frame(wire, 0xC1, "abc", 3, true), 1024, WS_CLOSE_PROTOCOL,
	    "reserved");
	expect_fail(wire, client_frame(wire, 0x83, "abc", 3, true), 1024, WS_CLOSE_PROTOCOL, "opcode");
	expect_fail(wire, client_frame(wire, 0x8B, "abc", 3, true), 1024, WS_CLOSE_PROTOCOL, "opcode");
	expect_fail(wire, client_frame(wire, 0x80, "abc", 3, true), 1024, WS_CLOSE_PROTOCOL,
	    "continuation");
	expect_fail(wire, client_frame(wire, 0x09, "abc", 3, true), 1024, WS_CLOSE_PROTOCOL,
	    "control");
	expect_fail(wire, client_frame(wire, 0x89, big, 126, true), 1024, WS_CLOSE_PROTOCOL,
	    "control");
	size_t n = client_frame(wire, 0x01, "ab", 2, true);
	n += client_frame(wire + n, 0x81, "cd", 2, true);
	expect_fail(wire, n, 1024, WS_CLOSE_PROTOCOL, "inside");
	/* A 64-bit length with its top bit set. */
	uint8_t huge[14] = { 0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4 };
	expect_fail(huge, sizeof(huge), 1024, WS_CLOSE_PROTOCOL, "range");
}

static void
test_decode_too_big(void **state)
{
	(void)state;
	uint8_t wire[4200], body[2048];
	memset(body, 'a', sizeof(body));
	/* One frame over the limit: refused on its header, before its body. */
	size_t n = client_frame(wire, 0x82, body, 1025, true);
	expect_fail(wire, 8, 1024, WS_CLOSE_TOO_BIG, "limit 1024");
	/* Exactly the limit is fine. */
	n = client_frame(wire, 0x82, body, 1024, true);
	struct ws_decoder d;
	ws_decoder_init(&d, 1024);
	assert_int_equal(decode_in_steps(&d, wire, n, n).len, 1024);
	/* Fragments that add up to more. */
	n = client_frame(wire, 0x02, body, 600, true);
	n += client_frame(wire + n, 0x80, body, 600, true);
	expect_fail(wire, n, 1024, WS_CLOSE_TOO_BIG, "max-frame-size");
	/* A 2^62 byte length. */
	uint8_t huge[14] = { 0x82, 0xff, 0x40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4 };
	expect_fail(huge, sizeof(huge), 1024, WS_CLOSE_TOO_BIG, "too large");
}

static void
test_decode_utf8(void **state)
{
	(void)state;
	uint8_t wire[200];
	/* "é" split between two fragments is fine in a text message. */
	size_t n = client_frame(wire, 0x01, "caf\xc3", 4, true);
	n += client_frame(wire + n, 0x80, "\xa9\n", 2, true);
	struct ws_decoder d;
	ws_decoder_init(&d, 1024);
	struct decoded r = decode_in_steps(&d, wire, n, 1);
	assert_int_equal(r.last, WS_DECODE_MORE);
	assert_int_equal(r.len, 6);
	/* Invalid in text: 1007; the same bytes in binary: fine. */
	expect_fail(wire, client_frame(wire, 0x81, "\xff\n", 2, true), 1024, WS_CLOSE_BAD_DATA, "UTF-8");
	expect_fail(wire, client_frame(wire, 0x81, "ab\xc3", 3, true), 1024, WS_CLOSE_BAD_DATA,
	    "UTF-8");
	n = client_frame(wire, 0x82, "\xff\n", 2, true);
	ws_decoder_init(&d, 1024);
	assert_int_equal(decode_in_steps(&d, wire, n, n).last, WS_DECODE_MORE);
}

static void
test_decode_unterminated(void **state)
{
	(void)state;
	uint8_t wire[300];
	/* React Native drops the NUL: the message ends on the body's last byte. */
	const char a[] = "SEND\ndestination:/q/a\ncontent-length:3\n\nabc";
	size_t n = client_frame(wire, 0x81, a, sizeof(a) - 1, true);
	n += client_frame(wire + n, 0x81, a, sizeof(a), true);     /* with its NUL */
	n += client_frame(wire + n, 0x81, "\n", 1, true);          /* heart-beat */
	struct ws_decoder d;
	ws_decoder_init(&d, 1024);
	size_t in = 0, out = 0;
	struct ws_control ctl;
	/* The decoder stops right after the unterminated message. */
	assert_int_equal(ws_decode(&d, wire, n, &in, &out, &ctl), WS_DECODE_UNTERMINATED);
	assert_int_equal(out, sizeof(a) - 1);
	assert_memory_equal(wire, a, sizeof(a) - 1);
	size_t o2 = out;
	assert_int_equal(ws_decode(&d, wire, n, &in, &out, &ctl), WS_DECODE_MORE);
	assert_int_equal(in, n);
	assert_int_equal(out - o2, sizeof(a) + 1);
}

static void
test_utf8_checker(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int ok; /* 1 valid and complete, 0 invalid, 2 valid so far (cut short) */
	} cases[] = {
		{ "plain ascii, long enough for the fast path", 1 },
		{ "\xc3\xa9t\xc3\xa9", 1 },
		{ "\xe2\x82\xac", 1 },             /* euro */
		{ "\xf0\x9f\x98\x80", 1 },         /* emoji */
		{ "\xef\xbf\xbf", 1 },
		{ "\xf4\x8f\xbf\xbf", 1 },         /* U+10FFFF */
		{ "\xc0\xaf", 0 },                 /* overlong */
		{ "\xe0\x80\xaf", 0 },             /* overlong */
		{ "\xed\xa0\x80", 0 },             /* surrogate */
		{ "\xf4\x90\x80\x80", 0 },         /* past U+10FFFF */
		{ "\xf5\x80\x80\x80", 0 },
		{ "\x80", 0 },
		{ "abcdefgh\xff", 0 },
		{ "\xe2\x82", 2 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint8_t *p = (const uint8_t *)cases[i].s;
		size_t n = strlen(cases[i].s);
		uint32_t whole = ws_utf8(0, p, n), split = 0;
		for (size_t j = 0; j < n; j++)
			split = ws_utf8(split, p + j, 1);
		assert_int_equal(whole, split);
		int got = whole == 0 ? 1 : whole == WS_UTF8_BAD ? 0 : 2;
		if (got != cases[i].ok) {
			print_error("case %zu: got %d want %d\n", i, got, cases[i].ok);
			fail();
		}
	}
}

/* Frames in b, each in pieces of `piece` bytes (chunks of their own). */
static struct evbuffer *
pieces(const char *data, size_t n, size_t piece)
{
	struct evbuffer *b = evbuffer_new();
	for (size_t i = 0; i < n; i += piece) {
		size_t k = n - i < piece ? n - i : piece;
		struct evbuffer *one = evbuffer_new();
		evbuffer_add(one, data + i, k);
		evbuffer_add_buffer(b, one); /* moves the chunk: no merging */
		evbuffer_free(one);
	}
	return b;
}

static void
test_frame_span(void **state)
{
	(void)state;
	static const char msg[] = "MESSAGE\nsubscription:0\ncontent-length:5\n\nhe\0lo";
	static const char receipt[] = "RECEIPT\nreceipt-id:7\n\n";
	char all[256];
	size_t n = 0;
	memcpy(all + n, msg, sizeof(msg));
	n += sizeof(msg);
	all[n++] = '\n'; /* a heart-beat */
	memcpy(all + n, receipt, sizeof(receipt));
	n += sizeof(receipt);
	for (size_t piece = 1; piece <= n; piece++) {
		struct evbuffer *b = pieces(all, n, piece);
		assert_int_equal(ws_frame_span(b), sizeof(msg));
		evbuffer_drain(b, sizeof(msg));
		assert_int_equal(ws_frame_span(b), 1);
		evbuffer_drain(b, 1);
		assert_int_equal(ws_frame_span(b), sizeof(receipt));
		evbuffer_drain(b, sizeof(receipt));
		assert_int_equal(ws_frame_span(b), 0);
		evbuffer_free(b);
		/* Cut short anywhere: not a whole frame yet. */
		for (size_t cut = 1; cut < sizeof(msg); cut += 5) {
			b = pieces(all, cut, piece);
			assert_int_equal(ws_frame_span(b), 0);
			evbuffer_free(b);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accept_key_rfc_example),
		cmocka_unit_test(test_request_length),
		cmocka_unit_test(test_handshake_good),
		cmocka_unit_test(test_handshake_headers_any_case_and_lists),
		cmocka_unit_test(test_handshake_no_subprotocol),
		cmocka_unit_test(test_handshake_refusals),
		cmocka_unit_test(test_handshake_origins),
		cmocka_unit_test(test_frame_header_lengths),
		cmocka_unit_test(test_unmask_in_place_and_phases),
		cmocka_unit_test(test_decode_one_message_any_split),
		cmocka_unit_test(test_decode_fragments_with_controls_between),
		cmocka_unit_test(test_decode_control_payload),
		cmocka_unit_test(test_decode_protocol_errors),
		cmocka_unit_test(test_decode_too_big),
		cmocka_unit_test(test_decode_utf8),
		cmocka_unit_test(test_decode_unterminated),
		cmocka_unit_test(test_utf8_checker),
		cmocka_unit_test(test_frame_span),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
