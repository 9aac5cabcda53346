/* ws.h - STOMP over WebSocket (RFC 6455): the codec, and the transport that
 * carries a connection's STOMP bytes in WebSocket messages over a plain or
 * TLS transport (ws://, wss://).
 *
 * The codec is our own, not libwslay: a client's frames are unmasked in
 * place, straight in the parser's buffer (one pass over each byte, no buffer
 * of the codec's own, no allocation per message), and a server frame's body
 * goes out by reference behind a 2-10 byte header.  wslay's event layer
 * copies and allocates every message, and its frame layer reads through a
 * 4 KB buffer of its own.  The handshake's SHA-1 and base64 are OpenSSL's.
 *
 * The codec has no sockets and no libevent, for the unit tests and the
 * fuzzer. */
#ifndef EFT_WS_H
#define EFT_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct transport;

/* Opcodes and close codes used here. */
enum {
	WS_OP_CONT = 0x0, WS_OP_TEXT = 0x1, WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8, WS_OP_PING = 0x9, WS_OP_PONG = 0xA,
};
enum {
	WS_CLOSE_NORMAL = 1000, WS_CLOSE_GOING_AWAY = 1001, WS_CLOSE_PROTOCOL = 1002,
	WS_CLOSE_BAD_DATA = 1007, WS_CLOSE_POLICY = 1008, WS_CLOSE_TOO_BIG = 1009,
};

#define WS_REQUEST_MAX 8192   /* bytes of an HTTP upgrade request */
#define WS_CONTROL_MAX 125    /* payload of a control frame */
#define WS_HEADER_MAX 14      /* a client frame's header: 2 + 8 + 4 */

/* What a ws:// or wss:// listener is set to (from its URL and the ws-*
 * settings); the listener owns it. */
struct ws_server {
	char path[256];          /* requests for another path get 404 */
	const char *origins;     /* allowed Origin values, comma or space separated; "": any */
	bool binary;             /* send binary messages (ws-frame = binary), else text */
	size_t max_message;      /* bytes in a client message (max-frame-size): more is 1009 */
};

/* ---- the handshake ---- */

/* Bytes up to and including the blank line ending an HTTP request in
 * buf[0..len), or 0 if it has not all come. */
size_t ws_request_length(const char *buf, size_t len);

/* Answer the upgrade request req[0..len) (as ws_request_length measured
 * it): the whole HTTP response into resp (at least 512 bytes), its length
 * in *resp_len, and the status: 101 (switched; *protocol is the STOMP
 * subprotocol picked or ""), else 400, 403, 404, 405, 426 with a short
 * reason in why. */
int ws_handshake(const struct ws_server *s, const char *req, size_t len, char *resp,
    size_t resp_cap, size_t *resp_len, char *protocol, size_t protocol_cap, char *why,
    size_t why_cap);

/* Sec-WebSocket-Accept for a key: 28 characters and a NUL into out. */
void ws_accept_key(const char *key, size_t key_len, char out[29]);

/* ---- frames ---- */

/* A server frame's header (never masked): its length (2, 4 or 10). */
size_t ws_frame_header(uint8_t out[10], unsigned opcode, uint64_t payload_len);

/* dst[i] = src[i] ^ mask[(phase + i) % 4]; dst may be src or before it.
 * True if a byte written has its high bit set (is not ASCII). */
bool ws_unmask(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t mask[4], size_t phase);

/* A streaming UTF-8 check: feed bytes in any split; 0 is the start state
 * and the state between characters. */
#define WS_UTF8_BAD 0xffffffffu
uint32_t ws_utf8(uint32_t state, const uint8_t *p, size_t n);

/* ---- the decoder of client frames ---- */

struct ws_control {
	unsigned opcode;                 /* WS_OP_CLOSE, PING or PONG */
	size_t len;
	uint8_t data[WS_CONTROL_MAX];    /* unmasked */
};

struct ws_decoder {
	size_t max_message;
	uint64_t left;         /* payload bytes of the current data frame still to come */
	uint8_t mask[4];
	size_t phase;          /* of the mask, for the next payload byte */
	bool in_message;       /* a data message started and not finished */
	bool final;            /* the current data frame ends its message */
	bool text;             /* the current message is text */
	uint8_t last;          /* the last payload byte of the current message */
	bool any;              /* the current message has had a payload byte */
	uint64_t message_len;
	uint32_t utf8;
	unsigned close_code;   /* after WS_DECODE_FAIL */
	char error[96];        /* after WS_DECODE_FAIL */
};

enum ws_decode_result {
	WS_DECODE_MORE,         /* all taken; buf[*in..len) is an unfinished header or control frame */
	WS_DECODE_CONTROL,      /* a control frame was taken: see ctl */
	WS_DECODE_UNTERMINATED, /* a message ended on a byte other than NUL or LF */
	WS_DECODE_FAIL,         /* close_code and error say why */
};

void ws_decoder_init(struct ws_decoder *d, size_t max_message);
/* Decode client frames from buf[*in..len), writing their payload, unmasked,
 * at buf[*out..] (so *out <= *in always), and advancing both. */
enum ws_decode_result ws_decode(struct ws_decoder *d, uint8_t *buf, size_t len, size_t *in,
    size_t *out, struct ws_control *ctl);

/* ---- the transport ---- */

struct evbuffer;

/* The length of the STOMP frame at the front of b (a lone EOL is a
 * heart-beat), or 0 if b does not start with a whole one: how the output
 * is cut into messages.  eftd writes content-length on every frame with a
 * body.  May make the frame's head contiguous in b. */
size_t ws_frame_span(struct evbuffer *b);

/* WebSocket over inner (a tcp or tls transport, which it now owns; s is
 * copied, its origins must outlive the connection): the
 * upgrade request is answered first, then STOMP bytes go in messages.
 * kind is "ws" or "wss".  NULL if out of memory (inner is then freed). */
struct transport *transport_ws_new(struct event_base *base, const struct ws_server *s,
    struct transport *inner, const char *kind);

#endif
