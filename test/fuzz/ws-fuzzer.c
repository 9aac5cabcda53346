/* ws-fuzzer.c - libFuzzer harness for the WebSocket codec.
 *
 * Input: one seed byte, then bytes a client would send after its upgrade.
 * They are decoded twice: in pieces whose sizes the seed byte picks, with
 * what is not decoded carried in front of the next piece (as
 * transport_ws.c does), and in one piece.  Both runs must hand out the same
 * payload bytes (up to a failure), the same control frames and the same end
 * (failure or not, and the close code); the decoder's output must never
 * pass its input.  The
 * same bytes are also given to the handshake as a request, whose answer must
 * be a whole HTTP response.  Any violation abort()s. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eft/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
	uint8_t *out;
	size_t out_len;
	unsigned controls[64];
	size_t ncontrols;
	size_t control_bytes;
	unsigned unterminated;
	bool failed;
	unsigned close_code;
};

static void
check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "ws-fuzzer: %s\n", what);
		abort();
	}
}

static void
decode(const uint8_t *data, size_t size, size_t step, size_t max, struct run *r)
{
	struct ws_decoder d;
	ws_decoder_init(&d, max);
	memset(r, 0, sizeof(*r));
	r->out = malloc(size + 1);
	uint8_t *buf = malloc(size + 1);
	size_t carry = 0, pos = 0;
	while (pos < size) {
		size_t k = size - pos < step ? size - pos : step;
		memcpy(buf + carry, data + pos, k);
		pos += k;
		size_t len = carry + k, in = 0, out = 0;
		enum ws_decode_result res;
		struct ws_control ctl;
		while ((res = ws_decode(&d, buf, len, &in, &out, &ctl)) != WS_DECODE_MORE &&
		    res != WS_DECODE_FAIL) {
			check(out <= in && in <= len, "output passed input");
			if (res == WS_DECODE_CONTROL) {
				check(ctl.len <= WS_CONTROL_MAX, "control frame too long");
				if (r->ncontrols < 64)
					r->controls[r->ncontrols++] = ctl.opcode;
				r->control_bytes += ctl.len;
			} else {
				r->unterminated++;
			}
		}
		check(out <= in && in <= len, "output passed input");
		memcpy(r->out + r->out_len, buf, out);
		r->out_len += out;
		if (res == WS_DECODE_FAIL) {
			check(d.close_code >= 1000 && d.error[0] != '\0', "failure without a code");
			r->failed = true;
			r->close_code = d.close_code;
			break;
		}
		memmove(buf, buf + in, len - in);
		carry = len - in;
	}
	free(buf);
}

static void
handshake(const uint8_t *data, size_t size)
{
	static const struct ws_server s = { .path = "/ws", .origins = "http://a", .max_message = 64 };
	size_t len = ws_request_length((const char *)data, size);
	if (len == 0)
		return;
	char resp[1024], protocol[16], why[200];
	size_t rlen = 0;
	int status = ws_handshake(&s, (const char *)data, len, resp, sizeof(resp), &rlen, protocol,
	    sizeof(protocol), why, sizeof(why));
	check(rlen > 12 && rlen < sizeof(resp) && strlen(resp) == rlen, "response length");
	check(memcmp(resp + rlen - 4, "\r\n\r\n", 4) == 0 || status != 101, "101 not ended");
	check(status == 101 || status == 400 || status == 403 || status == 404 || status == 426,
	    "status");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	static const size_t steps[8] = { 1, 2, 3, 7, 14, 64, 509, 4096 };
	size_t step = steps[data[0] & 7], max = data[0] & 0x80 ? 100 : 1 << 20;
	data++;
	size--;
	handshake(data, size);
	struct run a, b;
	decode(data, size, step, max, &a);
	decode(data, size, size ? size : 1, max, &b);
	check(a.failed == b.failed && a.close_code == b.close_code, "split changed the end");
	/* A failure found inside a frame's payload (bad UTF-8) stops the output
	 * at the piece where it was seen: the whole run's is a prefix then. */
	check(a.failed ? b.out_len <= a.out_len && memcmp(a.out, b.out, b.out_len) == 0 :
	    a.out_len == b.out_len && memcmp(a.out, b.out, a.out_len) == 0,
	    "split changed the payload");
	check(a.ncontrols == b.ncontrols && a.control_bytes == b.control_bytes &&
	    memcmp(a.controls, b.controls, a.ncontrols * sizeof(a.controls[0])) == 0,
	    "split changed the control frames");
	check(a.unterminated == b.unterminated, "split changed the message ends");
	free(a.out);
	free(b.out);
	return 0;
}
