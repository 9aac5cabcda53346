/* ws.h - the client side of WebSocket (RFC 6455) for eft-bench (--ws).
 *
 * Pure bytes in, bytes out, like frame.h: the opening handshake's request
 * and the check of its answer, the parsing of the frames a server sends,
 * and the masked frames a client sends.  conn.c owns the sockets and
 * decides when each step runs; with --tls the WebSocket runs inside TLS
 * (wss://). */
#ifndef EFT_BENCH_WS_H
#define EFT_BENCH_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define WS_KEY_LEN 24 /* base64 of 16 random bytes */

/* What --ws asks for; one per invocation, shared by every connection. */
struct ws_opts {
	const char *path;   /* the request target, "/ws" by default */
	bool binary;        /* send binary messages rather than text ones */
};

enum ws_opcode {
	WS_CONTINUATION = 0x0,
	WS_TEXT = 0x1,
	WS_BINARY = 0x2,
	WS_CLOSE = 0x8,
	WS_PING = 0x9,
	WS_PONG = 0xA,
};

enum ws_status { WS_OK, WS_MORE, WS_BAD };

/* A fresh Sec-WebSocket-Key: 16 random bytes in base64, NUL-terminated. */
void ws_key_new(char key[WS_KEY_LEN + 1]);
/* Append the HTTP/1.1 Upgrade request for path on host:port to b. */
void ws_request(struct buf *b, const char *host, const char *port, const char *path,
    const char *key);
/* Check the server's answer to the request made with key, at the front of
 * p[0, len).  WS_OK: *used is the length of the HTTP header block (frames
 * may follow it).  WS_MORE: the header block is not complete yet.  WS_BAD:
 * why holds one line saying what is wrong. */
enum ws_status ws_response(const char *p, size_t len, const char *key, size_t *used, char *why,
    size_t whylen);

/* One frame from the server; payload points into the parser's input. */
struct ws_frame {
	enum ws_opcode opcode;
	bool fin;
	const char *payload;
	size_t len;          /* payload bytes */
	size_t size;         /* header and payload: the bytes the frame takes */
};

/* Parse one frame from the front of p[0, len).  WS_MORE: *need is how many
 * bytes must be there before trying again.  WS_BAD: *why says what is wrong
 * (a masked frame, reserved bits, a control frame too long or fragmented,
 * an unknown opcode, or an absurd length). */
enum ws_status ws_frame_parse(const char *p, size_t len, struct ws_frame *f, size_t *need,
    const char **why);

/* Masks come from a cheap PRNG, not a cryptographic one: masking only
 * stops proxies from mistaking a client's frames for something else, and
 * a benchmark is no attacker.  seed it with anything non-zero. */
struct ws_rng {
	uint64_t s;
};
void ws_rng_seed(struct ws_rng *r);

/* Append one masked frame with payload p[0, len) to out. */
void ws_put(struct buf *out, enum ws_opcode opcode, const char *p, size_t len,
    struct ws_rng *rng);
/* Move every whole STOMP frame at the front of in into out, each as one
 * masked message of opcode (WS_TEXT or WS_BINARY); returns the bytes taken
 * from in.  eft-bench only ever queues whole frames, so in ends up empty. */
size_t ws_wrap(struct buf *out, struct buf *in, enum ws_opcode opcode, struct ws_rng *rng);

#endif
