/* ws.c - the WebSocket codec (RFC 6455): the upgrade handshake, server frame
 * headers, and the in-place decoder of client frames (see ws.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <openssl/evp.h>
#include <openssl/sha.h>

#include "eft/ws.h"

/* ---- the handshake ---- */

size_t
ws_request_length(const char *buf, size_t len)
{
	const char *end = memmem(buf, len, "\r\n\r\n", 4);
	return end ? (size_t)(end - buf) + 4 : 0;
}

void
ws_accept_key(const char *key, size_t key_len, char out[29])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	unsigned char digest[SHA_DIGEST_LENGTH];
	unsigned char in[128]; /* a valid key is 24 bytes: longer ones are refused before */
	size_t n = key_len < sizeof(in) - (sizeof(guid) - 1) ? key_len : sizeof(in) - (sizeof(guid) - 1);
	memcpy(in, key, n);
	memcpy(in + n, guid, sizeof(guid) - 1);
	unsigned int dlen = 0;
	EVP_Digest(in, n + sizeof(guid) - 1, digest, &dlen, EVP_sha1(), NULL);
	EVP_EncodeBlock((unsigned char *)out, digest, SHA_DIGEST_LENGTH);
	out[28] = '\0';
}

/* Does the comma-separated list value[0..len) hold token (any case)? */
static bool
has_token(const char *value, size_t len, const char *token)
{
	size_t tlen = strlen(token);
	const char *p = value, *end = value + len;
	while (p < end) {
		while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
			p++;
		const char *start = p;
		while (p < end && *p != ',')
			p++;
		const char *stop = p;
		while (stop > start && (stop[-1] == ' ' || stop[-1] == '\t'))
			stop--;
		if ((size_t)(stop - start) == tlen && strncasecmp(start, token, tlen) == 0)
			return true;
	}
	return false;
}

/* Is origin[0..len) in the allowed list (comma or space separated)? */
static bool
origin_allowed(const char *list, const char *origin, size_t len)
{
	const char *p = list;
	while (*p) {
		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		const char *start = p;
		while (*p && *p != ' ' && *p != ',' && *p != '\t')
			p++;
		if (p > start && (size_t)(p - start) == len && strncasecmp(start, origin, len) == 0)
			return true;
	}
	return false;
}

/* A Sec-WebSocket-Key: base64 of 16 bytes, so 24 characters ending "==". */
static bool
key_valid(const char *key, size_t len)
{
	if (len != 24 || key[22] != '=' || key[23] != '=')
		return false;
	for (size_t i = 0; i < 22; i++) {
		char c = key[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '+' || c == '/'))
			return false;
	}
	return true;
}

struct request {
	const char *path; size_t path_len;
	const char *key; size_t key_len;
	const char *origin; size_t origin_len;
	const char *version; size_t version_len;
	bool upgrade, connection, host;
	unsigned protocols;       /* bit i: stomp_protocols[i] offered */
};

/* Preferred first: the highest STOMP version offered. */
static const char *const stomp_protocols[] = { "v12.stomp", "v11.stomp", "v10.stomp", "stomp" };

static void
take_header(struct request *r, const char *name, size_t nlen, const char *v, size_t vlen)
{
#define IS(s) (nlen == sizeof(s) - 1 && strncasecmp(name, s, nlen) == 0)
	if (IS("upgrade"))
		r->upgrade |= has_token(v, vlen, "websocket");
	else if (IS("connection"))
		r->connection |= has_token(v, vlen, "upgrade");
	else if (IS("host"))
		r->host = true;
	else if (IS("sec-websocket-key"))
		r->key = v, r->key_len = vlen;
	else if (IS("sec-websocket-version"))
		r->version = v, r->version_len = vlen;
	else if (IS("origin"))
		r->origin = v, r->origin_len = vlen;
	else if (IS("sec-websocket-protocol"))
		for (size_t i = 0; i < sizeof(stomp_protocols) / sizeof(stomp_protocols[0]); i++)
			if (has_token(v, vlen, stomp_protocols[i]))
				r->protocols |= 1u << i;
#undef IS
}

/* The request line and headers; false if they are not HTTP/1.1 GET. */
static bool
parse_request(const char *req, size_t len, struct request *r)
{
	memset(r, 0, sizeof(*r));
	const char *end = req + len, *eol = memmem(req, len, "\r\n", 2);
	if (eol == NULL || len < 4 || memcmp(req, "GET ", 4) != 0)
		return false;
	const char *path = req + 4, *sp = memchr(path, ' ', (size_t)(eol - path));
	if (sp == NULL || sp == path || (size_t)(eol - sp - 1) != 8 || memcmp(sp + 1, "HTTP/1.1", 8) != 0)
		return false;
	r->path = path;
	r->path_len = (size_t)(sp - path);
	const char *q = memchr(path, '?', r->path_len);
	if (q != NULL)
		r->path_len = (size_t)(q - path);
	for (const char *line = eol + 2; line < end;) {
		const char *le = memmem(line, (size_t)(end - line), "\r\n", 2);
		if (le == NULL || le == line)
			break;
		const char *colon = memchr(line, ':', (size_t)(le - line));
		if (colon == NULL || colon == line)
			return false;
		const char *v = colon + 1, *ve = le;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		take_header(r, line, (size_t)(colon - line), v, (size_t)(ve - v));
		line = le + 2;
	}
	return true;
}

static size_t
refuse(int status, const char *text, const char *why, char *resp, size_t cap, char *whyout,
    size_t why_cap)
{
	char body[160];
	int blen = snprintf(body, sizeof(body), "%s\n", why);
	int n = snprintf(resp, cap, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
	    "Content-Length: %d\r\n%sConnection: close\r\n\r\n%s", status, text, blen,
	    status == 426 ? "Sec-WebSocket-Version: 13\r\n" : "", body);
	snprintf(whyout, why_cap, "%s", why);
	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

int
ws_handshake(const struct ws_server *s, const char *req, size_t len, char *resp,
    size_t resp_cap, size_t *resp_len, char *protocol, size_t protocol_cap, char *why,
    size_t why_cap)
{
	struct request r;
	protocol[0] = '\0';
	if (!parse_request(req, len, &r)) {
		*resp_len = refuse(400, "Bad Request", "not an HTTP/1.1 GET request", resp, resp_cap,
		    why, why_cap);
		return 400;
	}
	if (r.path_len != strlen(s->path) || memcmp(r.path, s->path, r.path_len) != 0) {
		char text[128];
		snprintf(text, sizeof(text), "no WebSocket endpoint at %.*s (try %.60s)",
		    (int)(r.path_len > 60 ? 60 : r.path_len), r.path, s->path);
		*resp_len = refuse(404, "Not Found", text, resp, resp_cap, why, why_cap);
		return 404;
	}
	if (!r.upgrade || !r.connection || !r.host) {
		*resp_len = refuse(400, "Bad Request", !r.host ? "no Host header" :
		    "not a WebSocket upgrade (Upgrade: websocket, Connection: Upgrade)", resp,
		    resp_cap, why, why_cap);
		return 400;
	}
	if (r.version_len != 2 || memcmp(r.version, "13", 2) != 0) {
		*resp_len = refuse(426, "Upgrade Required", "Sec-WebSocket-Version must be 13", resp,
		    resp_cap, why, why_cap);
		return 426;
	}
	if (!key_valid(r.key, r.key_len)) {
		*resp_len = refuse(400, "Bad Request", "bad or missing Sec-WebSocket-Key", resp,
		    resp_cap, why, why_cap);
		return 400;
	}
	/* A browser always sends Origin; other clients need not, and are not
	 * what an origin check protects against. */
	if (s->origins != NULL && s->origins[0] != '\0' && r.origin != NULL &&
	    !origin_allowed(s->origins, r.origin, r.origin_len)) {
		char text[160];
		snprintf(text, sizeof(text), "origin %.*s not allowed (ws-allowed-origins)",
		    (int)(r.origin_len > 100 ? 100 : r.origin_len), r.origin);
		*resp_len = refuse(403, "Forbidden", text, resp, resp_cap, why, why_cap);
		return 403;
	}
	for (size_t i = 0; i < sizeof(stomp_protocols) / sizeof(stomp_protocols[0]); i++)
		if (r.protocols & (1u << i)) {
			snprintf(protocol, protocol_cap, "%s", stomp_protocols[i]);
			break;
		}
	char accept[29];
	ws_accept_key(r.key, r.key_len, accept);
	int n = snprintf(resp, resp_cap, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s%s%s\r\n", accept,
	    protocol[0] ? "Sec-WebSocket-Protocol: " : "", protocol, protocol[0] ? "\r\n" : "");
	*resp_len = n < 0 ? 0 : (size_t)n < resp_cap ? (size_t)n : resp_cap - 1;
	why[0] = '\0';
	return 101;
}

/* ---- frames ---- */

size_t
ws_frame_header(uint8_t out[10], unsigned opcode, uint64_t len)
{
	out[0] = (uint8_t)(0x80 | opcode);
	if (len < 126) {
		out[1] = (uint8_t)len;
		return 2;
	}
	if (len <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
	return 10;
}

bool
ws_unmask(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t mask[4], size_t phase)
{
	uint8_t m[16];
	for (int i = 0; i < 16; i++)
		m[i] = mask[(phase + (size_t)i) & 3];
	size_t i = 0;
	/* Each store lands below the next load (dst <= src), so working
	 * forwards is safe in place.  The high bits of what is written are
	 * gathered on the way: all clear means ASCII, no UTF-8 check needed. */
#ifdef __SSE2__
	__m128i m128 = _mm_loadu_si128((const __m128i *)m), high = _mm_setzero_si128();
	for (; i + 64 <= n; i += 64) {
		__m128i a = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + i)), m128);
		__m128i b = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + i + 16)), m128);
		__m128i c = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + i + 32)), m128);
		__m128i d = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + i + 48)), m128);
		high = _mm_or_si128(high, _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d)));
		/* All four are loaded before any is stored, and dst <= src:
		 * no store reaches bytes still to be loaded. */
		_mm_storeu_si128((__m128i *)(dst + i), a);
		_mm_storeu_si128((__m128i *)(dst + i + 16), b);
		_mm_storeu_si128((__m128i *)(dst + i + 32), c);
		_mm_storeu_si128((__m128i *)(dst + i + 48), d);
	}
	for (; i + 16 <= n; i += 16) {
		__m128i w = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + i)), m128);
		high = _mm_or_si128(high, w);
		_mm_storeu_si128((__m128i *)(dst + i), w);
	}
	bool any_high = _mm_movemask_epi8(high) != 0;
#else
	bool any_high = false;
#endif
	uint64_t m64, high64 = 0;
	memcpy(&m64, m, 8);
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, src + i, 8);
		w ^= m64;
		high64 |= w;
		memcpy(dst + i, &w, 8);
	}
	uint8_t high8 = 0;
	for (; i < n; i++) {
		dst[i] = src[i] ^ m[i & 7];
		high8 |= dst[i];
	}
	return any_high || (high64 & 0x8080808080808080ull) || (high8 & 0x80);
}

/* State: 0 between characters; else the continuation bytes still due (low
 * byte) and the range the next one must be in (bytes 1 and 2). */
#define UTF8_STATE(need, lo, hi) ((uint32_t)(need) | (uint32_t)(lo) << 8 | (uint32_t)(hi) << 16)

uint32_t
ws_utf8(uint32_t st, const uint8_t *p, size_t n)
{
	size_t i = 0;
	if (st == WS_UTF8_BAD)
		return st;
	while (i < n) {
		if (st == 0) {
#ifdef __SSE2__
			for (; i + 64 <= n; i += 64) {
				__m128i a = _mm_loadu_si128((const __m128i *)(p + i));
				__m128i b = _mm_loadu_si128((const __m128i *)(p + i + 16));
				__m128i c = _mm_loadu_si128((const __m128i *)(p + i + 32));
				__m128i d = _mm_loadu_si128((const __m128i *)(p + i + 48));
				if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d))))
					break;
			}
			for (; i + 16 <= n; i += 16)
				if (_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(p + i))))
					break;
#endif
			for (; i + 8 <= n; i += 8) {
				uint64_t w;
				memcpy(&w, p + i, 8);
				if (w & 0x8080808080808080ull)
					break;
			}
			if (i == n)
				break;
			uint8_t c = p[i++];
			if (c < 0x80)
				continue;
			if (c < 0xC2)
				return WS_UTF8_BAD;
			if (c < 0xE0)
				st = UTF8_STATE(1, 0x80, 0xBF);
			else if (c < 0xF0)
				st = UTF8_STATE(2, c == 0xE0 ? 0xA0 : 0x80, c == 0xED ? 0x9F : 0xBF);
			else if (c < 0xF5)
				st = UTF8_STATE(3, c == 0xF0 ? 0x90 : 0x80, c == 0xF4 ? 0x8F : 0xBF);
			else
				return WS_UTF8_BAD;
		} else {
			uint8_t c = p[i++];
			if (c < ((st >> 8) & 0xff) || c > ((st >> 16) & 0xff))
				return WS_UTF8_BAD;
			uint32_t need = (st & 0xff) - 1;
			st = need ? UTF8_STATE(need, 0x80, 0xBF) : 0;
		}
	}
	return st;
}

/* ---- the decoder ---- */

void
ws_decoder_init(struct ws_decoder *d, size_t max_message)
{
	memset(d, 0, sizeof(*d));
	d->max_message = max_message;
}

static enum ws_decode_result
fail(struct ws_decoder *d, unsigned code, const char *why)
{
	d->close_code = code;
	snprintf(d->error, sizeof(d->error), "%s", why);
	return WS_DECODE_FAIL;
}

/* The end of a data message. */
static enum ws_decode_result
message_end(struct ws_decoder *d)
{
	bool unterminated = d->any && d->last != '\0' && d->last != '\n';
	if (d->text && d->utf8 != 0)
		return fail(d, WS_CLOSE_BAD_DATA, "text message is not valid UTF-8");
	d->in_message = false;
	d->any = false;
	d->message_len = 0;
	d->utf8 = 0;
	return unterminated ? WS_DECODE_UNTERMINATED : WS_DECODE_MORE;
}

enum ws_decode_result
ws_decode(struct ws_decoder *d, uint8_t *buf, size_t len, size_t *in, size_t *out,
    struct ws_control *ctl)
{
	if (d->close_code)
		return WS_DECODE_FAIL;
	while (*in < len) {
		if (d->left > 0) {
			size_t k = len - *in < d->left ? len - *in : (size_t)d->left;
			uint8_t *dst = buf + *out;
			bool high = ws_unmask(dst, buf + *in, k, d->mask, d->phase);
			if (d->text && (high || d->utf8 != 0) &&
			    (d->utf8 = ws_utf8(d->utf8, dst, k)) == WS_UTF8_BAD)
				return fail(d, WS_CLOSE_BAD_DATA, "text message is not valid UTF-8");
			d->last = dst[k - 1];
			d->any = true;
			*in += k;
			*out += k;
			d->left -= k;
			d->phase = (d->phase + k) & 3;
			if (d->left == 0 && d->final) {
				enum ws_decode_result r = message_end(d);
				if (r != WS_DECODE_MORE)
					return r;
			}
			continue;
		}
		/* A frame header. */
		const uint8_t *h = buf + *in;
		size_t avail = len - *in;
		if (avail < 2)
			return WS_DECODE_MORE;
		bool fin = h[0] & 0x80;
		unsigned opcode = h[0] & 0x0f;
		if (h[0] & 0x70)
			return fail(d, WS_CLOSE_PROTOCOL, "reserved bits set (no extension was agreed)");
		if (!(h[1] & 0x80))
			return fail(d, WS_CLOSE_PROTOCOL, "client frame not masked");
		uint64_t plen = h[1] & 0x7f;
		size_t hlen = 2 + (plen == 126 ? 2 : plen == 127 ? 8 : 0) + 4;
		if (avail < hlen)
			return WS_DECODE_MORE;
		if (plen == 126) {
			plen = (uint64_t)h[2] << 8 | h[3];
		} else if (plen == 127) {
			plen = 0;
			for (int i = 0; i < 8; i++)
				plen = plen << 8 | h[2 + i];
			if (plen >> 63)
				return fail(d, WS_CLOSE_PROTOCOL, "frame length out of range");
		}
		const uint8_t *mask = h + hlen - 4;
		if (opcode >= 0x8) {
			if (opcode > WS_OP_PONG)
				return fail(d, WS_CLOSE_PROTOCOL, "unknown opcode");
			if (!fin || plen > WS_CONTROL_MAX)
				return fail(d, WS_CLOSE_PROTOCOL, "fragmented or long control frame");
			if (avail < hlen + plen)
				return WS_DECODE_MORE;
			ctl->opcode = opcode;
			ctl->len = (size_t)plen;
			ws_unmask(ctl->data, h + hlen, ctl->len, mask, 0);
			*in += hlen + (size_t)plen;
			return WS_DECODE_CONTROL;
		}
		if (opcode == WS_OP_CONT) {
			if (!d->in_message)
				return fail(d, WS_CLOSE_PROTOCOL, "continuation frame without a message");
		} else if (opcode == WS_OP_TEXT || opcode == WS_OP_BINARY) {
			if (d->in_message)
				return fail(d, WS_CLOSE_PROTOCOL, "new message inside a fragmented one");
			d->in_message = true;
			d->text = opcode == WS_OP_TEXT;
		} else {
			return fail(d, WS_CLOSE_PROTOCOL, "unknown opcode");
		}
		if (plen > d->max_message || d->message_len + plen > d->max_message) {
			char why[96];
			snprintf(why, sizeof(why), "message too large (limit %zu, max-frame-size)",
			    d->max_message);
			return fail(d, WS_CLOSE_TOO_BIG, why);
		}
		d->message_len += plen;
		memcpy(d->mask, mask, 4);
		d->phase = 0;
		d->left = plen;
		d->final = fin;
		*in += hlen;
		if (plen == 0 && fin) {
			enum ws_decode_result r = message_end(d);
			if (r != WS_DECODE_MORE)
				return r;
		}
	}
	return WS_DECODE_MORE;
}
