/* ws.c - WebSocket client framing and handshake (see ws.h).
 *
 * Sending costs one pass over the bytes: ws_wrap copies each STOMP frame
 * from the connection's output into the wire buffer behind its frame
 * header, masking as it copies, 8 bytes at a time.  The frame boundaries
 * come from frame_parse, the same parser that reads the broker's frames. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "frame.h"
#include "ws.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define MAX_HTTP_HEAD (16u << 10)    /* an answer longer than this is not a 101 */
#define MAX_PAYLOAD (1ull << 31)     /* eft-bench's own frames stay far below */

/* ---- the opening handshake ---- */

void
ws_key_new(char key[WS_KEY_LEN + 1])
{
	unsigned char raw[16];
	if (RAND_bytes(raw, sizeof(raw)) != 1) {
		/* The key only proves the server read our request: any bytes do. */
		uint64_t a = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
		uint64_t b = a * 0xD6E8FEB86659FD93ull ^ (uint64_t)(uintptr_t)key;
		memcpy(raw, &a, 8);
		memcpy(raw + 8, &b, 8);
	}
	EVP_EncodeBlock((unsigned char *)key, raw, sizeof(raw));
}

void
ws_request(struct buf *b, const char *host, const char *port, const char *path,
    const char *key)
{
	/* An IPv6 literal goes in brackets, as in a URL. */
	bool v6 = strchr(host, ':') != NULL;
	char head[1024];
	int n = snprintf(head, sizeof(head),
	    "GET %s HTTP/1.1\r\n"
	    "Host: %s%s%s:%s\r\n"
	    "Upgrade: websocket\r\n"
	    "Connection: Upgrade\r\n"
	    "Sec-WebSocket-Key: %s\r\n"
	    "Sec-WebSocket-Version: 13\r\n"
	    "Sec-WebSocket-Protocol: v12.stomp, v11.stomp, v10.stomp\r\n"
	    "User-Agent: eft-bench\r\n"
	    "\r\n",
	    path, v6 ? "[" : "", host, v6 ? "]" : "", port, key);
	if (n < 0 || (size_t)n >= sizeof(head))
		fatal("--ws-path or --host too long for the WebSocket request");
	buf_append(b, head, (size_t)n);
}

/* The Sec-WebSocket-Accept value that answers key. */
static void
accept_for(const char *key, char out[29])
{
	char in[WS_KEY_LEN + sizeof(WS_GUID)];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	size_t n = strlen(key);
	memcpy(in, key, n);
	memcpy(in + n, WS_GUID, sizeof(WS_GUID) - 1);
	if (EVP_Digest(in, n + sizeof(WS_GUID) - 1, md, &mdlen, EVP_sha1(), NULL) != 1 ||
	    mdlen != 20)
		fatal("SHA-1 is not available from OpenSSL");
	EVP_EncodeBlock((unsigned char *)out, md, 20);
}

/* p[0, len) as printable text on one line, at most 60 characters. */
static void
excerpt(char *out, size_t outlen, const char *p, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len && i < 60 && n + 4 < outlen; i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch == '\r' || ch == '\n')
			break;
		out[n++] = ch >= ' ' && ch < 127 ? (char)ch : '?';
	}
	out[n] = '\0';
}

/* Header value v (trimmed) equals s, ignoring case. */
static bool
value_is(const char *v, size_t len, const char *s)
{
	return strlen(s) == len && strncasecmp(v, s, len) == 0;
}

/* Comma-separated list v has the token s, ignoring case. */
static bool
value_has(const char *v, size_t len, const char *s)
{
	const char *end = v + len;
	while (v < end) {
		const char *comma = memchr(v, ',', (size_t)(end - v));
		const char *te = comma ? comma : end, *ts = v;
		while (ts < te && (*ts == ' ' || *ts == '\t'))
			ts++;
		const char *tz = te;
		while (tz > ts && (tz[-1] == ' ' || tz[-1] == '\t'))
			tz--;
		if (value_is(ts, (size_t)(tz - ts), s))
			return true;
		v = comma ? comma + 1 : end;
	}
	return false;
}

enum ws_status
ws_response(const char *p, size_t len, const char *key, size_t *used, char *why,
    size_t whylen)
{
	static const char http[] = "HTTP/1.";
	char ex[64];
	size_t cmp = len < sizeof(http) - 1 ? len : sizeof(http) - 1;

	if (memcmp(p, http, cmp) != 0) {
		excerpt(ex, sizeof(ex), p, len);
		snprintf(why, whylen, "the answer is not HTTP (\"%s\"): is the port a WebSocket "
		    "one, and --ws-path right?", ex);
		return WS_BAD;
	}
	const char *end = memmem(p, len, "\r\n\r\n", 4);
	if (end == NULL) {
		if (len > MAX_HTTP_HEAD) {
			snprintf(why, whylen, "no end of the HTTP answer within %u bytes",
			    MAX_HTTP_HEAD);
			return WS_BAD;
		}
		return WS_MORE;
	}
	*used = (size_t)(end - p) + 4;

	const char *sp = memchr(p, ' ', (size_t)(end - p));
	if (sp == NULL || end - sp < 4 || !isdigit((unsigned char)sp[1]) ||
	    !isdigit((unsigned char)sp[2]) || !isdigit((unsigned char)sp[3])) {
		excerpt(ex, sizeof(ex), p, len);
		snprintf(why, whylen, "malformed HTTP status line \"%s\"", ex);
		return WS_BAD;
	}
	if (memcmp(sp + 1, "101", 3) != 0) {
		excerpt(ex, sizeof(ex), sp + 1, (size_t)(end - sp - 1));
		snprintf(why, whylen, "the broker answered \"%s\", not 101 Switching Protocols "
		    "(is --ws-path right, and the port a WebSocket one?)", ex);
		return WS_BAD;
	}

	bool upgrade = false, connection = false, accepted = false;
	char want[29], got[64] = "";
	accept_for(key, want);
	const char *line = (const char *)memchr(p, '\n', (size_t)(end + 2 - p)) + 1;
	while (line < end) {
		const char *le = memchr(line, '\r', (size_t)(end + 2 - line));
		const char *colon = memchr(line, ':', (size_t)(le - line));
		if (colon != NULL) {
			size_t nlen = (size_t)(colon - line);
			const char *v = colon + 1, *ve = le;
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			size_t vlen = (size_t)(ve - v);
			if (value_is(line, nlen, "upgrade"))
				upgrade = value_is(v, vlen, "websocket");
			else if (value_is(line, nlen, "connection"))
				connection = value_has(v, vlen, "upgrade");
			else if (value_is(line, nlen, "sec-websocket-accept")) {
				accepted = vlen == 28 && memcmp(v, want, 28) == 0;
				excerpt(got, sizeof(got), v, vlen);
			} else if (value_is(line, nlen, "sec-websocket-protocol") &&
			    !value_is(v, vlen, "v12.stomp") && !value_is(v, vlen, "v11.stomp") &&
			    !value_is(v, vlen, "v10.stomp")) {
				excerpt(ex, sizeof(ex), v, vlen);
				snprintf(why, whylen, "the broker chose subprotocol \"%s\", not one of "
				    "v12.stomp, v11.stomp, v10.stomp", ex);
				return WS_BAD;
			}
		}
		line = le + 2;
	}
	if (!upgrade || !connection) {
		snprintf(why, whylen, "the 101 answer lacks %s", !upgrade ?
		    "\"Upgrade: websocket\"" : "\"Connection: Upgrade\"");
		return WS_BAD;
	}
	if (!accepted) {
		snprintf(why, whylen, "wrong Sec-WebSocket-Accept: \"%s\", expected \"%s\"",
		    got[0] ? got : "(none)", want);
		return WS_BAD;
	}
	return WS_OK;
}

/* ---- frames ---- */

enum ws_status
ws_frame_parse(const char *p, size_t len, struct ws_frame *f, size_t *need, const char **why)
{
	const unsigned char *u = (const unsigned char *)p;
	if (len < 2) {
		*need = 2;
		return WS_MORE;
	}
	unsigned op = u[0] & 0x0Fu;
	if (u[0] & 0x70u) {
		*why = "reserved bits set (an extension eft-bench did not ask for)";
		return WS_BAD;
	}
	if (op != WS_CONTINUATION && op != WS_TEXT && op != WS_BINARY && op != WS_CLOSE &&
	    op != WS_PING && op != WS_PONG) {
		*why = "unknown opcode";
		return WS_BAD;
	}
	if (u[1] & 0x80u) {
		*why = "a masked frame (servers must not mask)";
		return WS_BAD;
	}
	size_t head = 2;
	uint64_t plen = u[1] & 0x7Fu;
	if (plen == 126)
		head = 4;
	else if (plen == 127)
		head = 10;
	if (len < head) {
		*need = head;
		return WS_MORE;
	}
	if (head > 2) {
		plen = 0;
		for (size_t i = 2; i < head; i++)
			plen = plen << 8 | u[i];
	}
	if (op & 0x8u) {
		if (!(u[0] & 0x80u)) {
			*why = "a fragmented control frame";
			return WS_BAD;
		}
		if (plen > 125) {
			*why = "a control frame longer than 125 bytes";
			return WS_BAD;
		}
	}
	if (plen > MAX_PAYLOAD) {
		*why = "a frame longer than 2 GB";
		return WS_BAD;
	}
	if (len - head < plen) {
		*need = head + (size_t)plen;
		return WS_MORE;
	}
	f->opcode = (enum ws_opcode)op;
	f->fin = (u[0] & 0x80u) != 0;
	f->payload = p + head;
	f->len = (size_t)plen;
	f->size = head + (size_t)plen;
	return WS_OK;
}

void
ws_rng_seed(struct ws_rng *r)
{
	if (RAND_bytes((unsigned char *)&r->s, sizeof(r->s)) != 1 || r->s == 0)
		r->s = ((uint64_t)time(NULL) << 20 ^ (uint64_t)getpid()) | 1u;
}

/* xorshift64*: a few cycles per mask. */
static uint32_t
rng_next(struct ws_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return (uint32_t)((r->s * 0x2545F4914F6CDD1Dull) >> 32);
}

/* dst = src XOR the 4-byte key repeated, 8 bytes at a time (memcpy keeps
 * the loads legal at any alignment and compiles to plain moves). */
static void
mask_copy(char *dst, const char *src, size_t len, const unsigned char key[4])
{
	unsigned char k8[8];
	uint64_t m;
	memcpy(k8, key, 4);
	memcpy(k8 + 4, key, 4);
	memcpy(&m, k8, 8);
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v;
		memcpy(&v, src + i, 8);
		v ^= m;
		memcpy(dst + i, &v, 8);
	}
	for (; i < len; i++)
		dst[i] = (char)(src[i] ^ (char)key[i & 3]);
}

void
ws_put(struct buf *out, enum ws_opcode opcode, const char *p, size_t len, struct ws_rng *rng)
{
	unsigned char *h = (unsigned char *)buf_reserve(out, 14 + len), *k;
	h[0] = (unsigned char)(0x80u | opcode);
	if (len < 126) {
		h[1] = (unsigned char)(0x80u | len);
		k = h + 2;
	} else if (len <= 0xFFFF) {
		h[1] = 0x80u | 126;
		h[2] = (unsigned char)(len >> 8);
		h[3] = (unsigned char)len;
		k = h + 4;
	} else {
		h[1] = 0x80u | 127;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
		k = h + 10;
	}
	uint32_t mask = rng_next(rng);
	memcpy(k, &mask, 4);
	mask_copy((char *)k + 4, p, len, k);
	buf_commit(out, (size_t)(k + 4 - h) + len);
}

size_t
ws_wrap(struct buf *out, struct buf *in, enum ws_opcode opcode, struct ws_rng *rng)
{
	const char *p = in->data + in->start;
	size_t len = buf_pending(in), done = 0;
	while (done < len) {
		struct frame f;
		size_t used;
		const char *why = NULL;
		if (frame_parse(p + done, len - done, &f, &used, &why) != FRAME_OK)
			used = len - done; /* not a whole frame: cannot happen; send it as is */
		ws_put(out, opcode, p + done, used, rng);
		done += used;
	}
	buf_consume(in, done);
	return done;
}
