/* transport_ws.c - STOMP over WebSocket: a transport on top of a tcp or tls
 * one (see ws.h).
 *
 * In: the upgrade request is read and answered first.  After that, bytes
 * are read from the inner transport straight into the space the connection
 * offers and decoded there, in place; what cannot be decoded yet (a header
 * cut short, a control frame not all here) waits in `carry` and goes in
 * front of the next read.
 *
 * Out: the connection's output holds whole STOMP frames.  Each becomes one
 * WebSocket message: a 2-10 byte header, then the frame's bytes moved (by
 * reference where they are chunks of their own, such as large bodies) into
 * `wire`, which the inner transport writes.  A text message must be UTF-8;
 * a frame that is not goes out as binary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "eft/transport.h"
#include "eft/ws.h"

#define WS_OUT_MAX (256 * 1024) /* framed output gathered before more is framed */

struct ws {
	struct transport t;        /* first: a struct ws is a struct transport */
	struct ws_server server;   /* a copy: the listener may close first (at shutdown) */
	struct transport *inner;
	struct event *kick;        /* decode again next turn: input is waiting in carry */
	struct evbuffer *wire;     /* WebSocket frames the inner transport has not taken */
	struct ws_decoder dec;
	char *carry;               /* input not decoded yet */
	size_t carry_len, carry_cap;
	char *request;             /* the upgrade request, until it is answered */
	size_t request_len;
	bool ending;               /* the connection is to end: the next read says TRANSPORT_CLOSE */
	bool ended;                /* it was told: later reads are raw (a lingering close drops them) */
	bool close_sent;           /* no data frames after our close frame */
	bool shut;                 /* shutdown: reads are raw (lingering), writes are over */
	bool shut_pending;         /* the inner shutdown waits for wire to drain */
	bool failed;
};

static void
ws_update_inner(struct ws *w)
{
	transport_want(w->inner, w->t.want_read || w->shut,
	    w->t.want_write || evbuffer_get_length(w->wire) > 0);
}

/* Hand wire to the inner transport; -1 (and failed) if it broke. */
static int
ws_flush(struct ws *w)
{
	if (evbuffer_get_length(w->wire) > 0 &&
	    transport_write(w->inner, w->wire) == TRANSPORT_ERROR) {
		transport_fail(&w->t, "%s", transport_error(w->inner));
		w->failed = true;
		return -1;
	}
	if (w->shut_pending && evbuffer_get_length(w->wire) == 0) {
		w->shut_pending = false;
		transport_shutdown(w->inner);
	}
	ws_update_inner(w);
	return 0;
}

static int
ws_send_control(struct ws *w, unsigned opcode, const void *data, size_t len)
{
	uint8_t hdr[10];
	size_t hl = ws_frame_header(hdr, opcode, len);
	if (evbuffer_add(w->wire, hdr, hl) != 0 || (len > 0 && evbuffer_add(w->wire, data, len) != 0))
		return -1;
	return ws_flush(w);
}

/* Our close frame, once; after it only the end of the stream follows. */
static void
ws_send_close(struct ws *w, unsigned code, const char *reason)
{
	if (w->close_sent || !w->t.established)
		return;
	uint8_t payload[WS_CONTROL_MAX];
	size_t rlen = strlen(reason);
	if (rlen > WS_CONTROL_MAX - 2)
		rlen = WS_CONTROL_MAX - 2;
	payload[0] = (uint8_t)(code >> 8);
	payload[1] = (uint8_t)code;
	memcpy(payload + 2, reason, rlen);
	w->close_sent = true;
	(void)ws_send_control(w, WS_OP_CLOSE, payload, 2 + rlen);
}

/* Close codes a peer may send (RFC 6455 7.4). */
static bool
close_code_valid(unsigned code)
{
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1011) ||
	    (code >= 3000 && code <= 4999);
}

static void
ws_control(struct ws *w, const struct ws_control *ctl)
{
	if (ctl->opcode == WS_OP_PING) {
		if (!w->close_sent && ws_send_control(w, WS_OP_PONG, ctl->data, ctl->len) != 0)
			w->ending = true;
		return;
	}
	if (ctl->opcode != WS_OP_CLOSE)
		return; /* a pong: nothing to do */
	unsigned code = ctl->len >= 2 ? (unsigned)ctl->data[0] << 8 | ctl->data[1] : 0;
	w->ending = true;
	if (ctl->len == 1 || (ctl->len >= 2 && !close_code_valid(code))) {
		transport_fail(&w->t, "WebSocket: bad close frame (close 1002)");
		ws_send_close(w, WS_CLOSE_PROTOCOL, "bad close frame");
	} else if (ctl->len > 2 && ws_utf8(0, ctl->data + 2, ctl->len - 2) != 0) {
		transport_fail(&w->t, "WebSocket: close reason is not UTF-8 (close 1007)");
		ws_send_close(w, WS_CLOSE_BAD_DATA, "close reason is not UTF-8");
	} else {
		transport_fail(&w->t, "WebSocket closed by the client (code %u)", code ? code : 1005);
		ws_send_close(w, code ? code : WS_CLOSE_NORMAL, "");
	}
}

/* Put data in front of what carry holds. */
static int
carry_prepend(struct ws *w, const char *data, size_t n)
{
	if (n == 0)
		return 0;
	if (w->carry_len + n > w->carry_cap) {
		size_t cap = w->carry_cap ? w->carry_cap : 256;
		while (cap < w->carry_len + n)
			cap *= 2;
		char *c = realloc(w->carry, cap);
		if (c == NULL)
			return -1;
		w->carry = c;
		w->carry_cap = cap;
	}
	memmove(w->carry + n, w->carry, w->carry_len);
	memcpy(w->carry, data, n);
	w->carry_len += n;
	return 0;
}

static void
carry_take(struct ws *w, char *buf, size_t n)
{
	memcpy(buf, w->carry, n);
	memmove(w->carry, w->carry + n, w->carry_len - n);
	w->carry_len -= n;
	if (w->carry_len == 0) {
		free(w->carry); /* an idle connection holds no buffer */
		w->carry = NULL;
		w->carry_cap = 0;
	}
}

/* The connection hears that it is to end, once; later reads are raw. */
static ssize_t
ws_ended(struct ws *w)
{
	w->ending = true;
	w->ended = true;
	return TRANSPORT_CLOSE;
}

static void
ws_refuse(struct ws *w, const char *resp, size_t len)
{
	(void)evbuffer_add(w->wire, resp, len);
	w->ending = true;
	(void)ws_flush(w);
}

/* Before the upgrade: gather the request and answer it. */
static ssize_t
ws_read_request(struct ws *w)
{
	if (w->request == NULL && (w->request = malloc(WS_REQUEST_MAX)) == NULL) {
		transport_fail(&w->t, "out of memory");
		return TRANSPORT_ERROR;
	}
	ssize_t n = transport_read(w->inner, w->request + w->request_len,
	    WS_REQUEST_MAX - w->request_len);
	if (n == TRANSPORT_ERROR)
		transport_fail(&w->t, "%s", transport_error(w->inner));
	if (n <= 0)
		return n;
	w->request_len += (size_t)n;
	if (w->request[0] == 0x16) {
		transport_fail(&w->t, "not HTTP: a TLS handshake (this listener is ws://, not wss://)");
		w->ending = true;
		return ws_ended(w);
	}
	size_t end = ws_request_length(w->request, w->request_len);
	if (end == 0) {
		if (w->request_len < WS_REQUEST_MAX)
			return TRANSPORT_AGAIN;
		static const char big[] = "HTTP/1.1 431 Request Header Fields Too Large\r\n"
		    "Content-Length: 0\r\nConnection: close\r\n\r\n";
		transport_fail(&w->t, "WebSocket handshake refused: 431 (request over %d bytes)",
		    WS_REQUEST_MAX);
		ws_refuse(w, big, sizeof(big) - 1);
		return ws_ended(w);
	}
	char resp[1024], protocol[16], why[200];
	size_t rlen;
	int status = ws_handshake(&w->server, w->request, end, resp, sizeof(resp), &rlen, protocol,
	    sizeof(protocol), why, sizeof(why));
	if (status != 101) {
		transport_fail(&w->t, "WebSocket handshake refused: %d (%s)", status, why);
		ws_refuse(w, resp, rlen);
		return ws_ended(w);
	}
	if (evbuffer_add(w->wire, resp, rlen) != 0 ||
	    carry_prepend(w, w->request + end, w->request_len - end) != 0) {
		transport_fail(&w->t, "out of memory");
		return TRANSPORT_ERROR;
	}
	free(w->request);
	w->request = NULL;
	w->t.established = true;
	if (ws_flush(w) != 0)
		return TRANSPORT_ERROR;
	if (w->carry_len > 0)
		event_active(w->kick, EV_READ, 1); /* frames came with the request */
	return TRANSPORT_AGAIN;
}

static ssize_t
ws_read(struct transport *t, void *buf, size_t len)
{
	struct ws *w = (struct ws *)t;
	if (w->failed)
		return TRANSPORT_ERROR;
	if (w->shut || w->ended) {
		ssize_t n = transport_read(w->inner, buf, len); /* lingering: raw bytes, dropped */
		if (n == TRANSPORT_ERROR)
			transport_fail(t, "%s", transport_error(w->inner));
		return n;
	}
	if (w->ending) {
		w->ended = true;
		return TRANSPORT_CLOSE;
	}
	if (!t->established)
		return ws_read_request(w);
	if (len == 0)
		return TRANSPORT_AGAIN;
	/* A few rounds when only control frames or a part of a header came. */
	for (int round = 0; round < 8; round++) {
		size_t n = w->carry_len < len ? w->carry_len : len;
		bool again = false, eof = false;
		if (n > 0)
			carry_take(w, buf, n);
		if (n < len) {
			ssize_t r = transport_read(w->inner, (char *)buf + n, len - n);
			if (r > 0) {
				n += (size_t)r;
			} else if (r == TRANSPORT_AGAIN) {
				again = true;
			} else if (r == 0) {
				eof = true;
			} else {
				transport_fail(t, "%s", transport_error(w->inner));
				return TRANSPORT_ERROR;
			}
		}
		size_t in = 0, out = 0;
		struct ws_control ctl;
		enum ws_decode_result res;
		while ((res = ws_decode(&w->dec, buf, n, &in, &out, &ctl)) == WS_DECODE_CONTROL &&
		    !w->ending)
			ws_control(w, &ctl);
		if (res == WS_DECODE_FAIL) {
			transport_fail(t, "WebSocket: %s (close %u)", w->dec.error, w->dec.close_code);
			ws_send_close(w, w->dec.close_code, w->dec.error);
			w->ending = true;
		} else if (!w->ending && carry_prepend(w, (char *)buf + in, n - in) != 0) {
			transport_fail(t, "out of memory");
			return TRANSPORT_ERROR;
		}
		/* A message that ended without its frame's NUL: the bytes handed
		 * out end there, and the connection may supply the NUL. */
		t->unterminated_end = res == WS_DECODE_UNTERMINATED && out > 0;
		/* More to decode, or the end to report, with no new input to
		 * wake the connection: come back on the next turn. */
		if (res == WS_DECODE_UNTERMINATED || (w->ending && out > 0))
			event_active(w->kick, EV_READ, 1);
		if (out > 0)
			return (ssize_t)out;
		if (w->ending)
			return ws_ended(w);
		if (eof)
			return 0;
		if (again && res != WS_DECODE_UNTERMINATED)
			return TRANSPORT_AGAIN;
	}
	event_active(w->kick, EV_READ, 1);
	return TRANSPORT_AGAIN;
}

size_t
ws_frame_span(struct evbuffer *b)
{
	struct evbuffer_iovec v;
	size_t total = evbuffer_get_length(b);
	if (total == 0 || evbuffer_peek(b, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
		return 0;
	/* The head is nearly always in the first chunk; when it is not (a
	 * frame added by evbuffer_add across chunks), make more of b
	 * contiguous, doubling, which copies only then. */
	for (size_t have = v.iov_len;; have = have * 2 < total ? have * 2 : total) {
		const char *p = have == v.iov_len ? v.iov_base : (const char *)evbuffer_pullup(b,
		    (ev_ssize_t)have);
		if (p == NULL)
			return 0;
		if (p[0] == '\n')
			return 1;
		const char *end = p + have, *clen_at = NULL;
		/* Line by line (memchr is quick on short lines): the command,
		 * the headers, the blank line. */
		for (const char *line = memchr(p, '\n', have); line != NULL && ++line < end;
		    line = memchr(line, '\n', (size_t)(end - line))) {
			if (*line != '\n') {
				if (clen_at == NULL && (size_t)(end - line) > 15 &&
				    memcmp(line, "content-length:", 15) == 0)
					clen_at = line + 15;
				continue;
			}
			size_t head = (size_t)(line - p) + 1;
			if (clen_at == NULL) /* no body: the NUL follows the blank line */
				return head + 1 <= total ? head + 1 : 0;
			uint64_t clen = 0;
			for (const char *d = clen_at; *d != '\n'; d++) {
				if (*d < '0' || *d > '9' || clen > (UINT64_MAX - 9) / 10)
					return 0;
				clen = clen * 10 + (uint64_t)(*d - '0');
			}
			return clen < total && head + clen + 1 <= total ? head + (size_t)clen + 1 : 0;
		}
		if (have == total)
			return 0;
	}
}

/* Is the frame at the front of b, n bytes, valid UTF-8 (for a text message)? */
static bool
frame_is_utf8(struct evbuffer *b, size_t n)
{
	struct evbuffer_iovec vec[8];
	int nv = evbuffer_peek(b, (ev_ssize_t)n, NULL, vec, 8);
	if (nv < 1 || nv > 8)
		return false; /* in too many pieces to look at cheaply: send it as binary */
	uint32_t st = 0;
	for (int i = 0; i < nv && n > 0; i++) {
		size_t k = vec[i].iov_len < n ? vec[i].iov_len : n;
		st = ws_utf8(st, vec[i].iov_base, k);
		n -= k;
	}
	return st == 0;
}

static ssize_t
ws_write(struct transport *t, struct evbuffer *out)
{
	struct ws *w = (struct ws *)t;
	if (w->failed)
		return TRANSPORT_ERROR;
	if (!t->established)
		return 0; /* written once the upgrade is answered */
	if (w->close_sent || w->shut) {
		/* Nothing may follow a close frame. */
		size_t n = evbuffer_get_length(out);
		evbuffer_drain(out, n);
		return (ssize_t)n;
	}
	ssize_t total = 0;
	size_t flen;
	while (evbuffer_get_length(w->wire) < WS_OUT_MAX && (flen = ws_frame_span(out)) > 0) {
		unsigned op = w->server.binary || !frame_is_utf8(out, flen) ? WS_OP_BINARY : WS_OP_TEXT;
		uint8_t hdr[10];
		size_t hl = ws_frame_header(hdr, op, flen);
		if (evbuffer_add(w->wire, hdr, hl) != 0 ||
		    evbuffer_remove_buffer(out, w->wire, flen) != (int)flen) {
			transport_fail(t, "out of memory");
			w->failed = true;
			return TRANSPORT_ERROR;
		}
		total += (ssize_t)flen;
	}
	if (ws_flush(w) != 0)
		return TRANSPORT_ERROR;
	return total;
}

static size_t
ws_pending(const struct transport *t)
{
	const struct ws *w = (const struct ws *)t;
	return evbuffer_get_length(w->wire) + transport_pending(w->inner);
}

static void
ws_want(struct transport *t, bool read, bool write)
{
	(void)read;
	(void)write;
	ws_update_inner((struct ws *)t);
}

static void
ws_shutdown(struct transport *t)
{
	struct ws *w = (struct ws *)t;
	ws_send_close(w, WS_CLOSE_NORMAL, "");
	w->shut = true;
	if (evbuffer_get_length(w->wire) == 0)
		transport_shutdown(w->inner);
	else
		w->shut_pending = true; /* after the close frame has gone */
	ws_update_inner(w);
}

static void
ws_free(struct transport *t)
{
	struct ws *w = (struct ws *)t;
	if (w->kick)
		event_free(w->kick);
	transport_free(w->inner);
	if (w->wire)
		evbuffer_free(w->wire);
	free(w->carry);
	free(w->request);
	free(w);
}

static void
ws_inner_readable(void *arg)
{
	struct ws *w = arg;
	w->t.on_readable(w->t.arg);
}

static void
ws_inner_writable(void *arg)
{
	struct ws *w = arg;
	if (evbuffer_get_length(w->wire) > 0) {
		if (ws_flush(w) != 0) {
			/* The connection hears of it when it writes (or reads). */
			if (w->t.want_write)
				w->t.on_writable(w->t.arg);
			else
				w->t.on_readable(w->t.arg);
			return;
		}
		if (evbuffer_get_length(w->wire) > 0)
			return;
	}
	if (w->t.want_write)
		w->t.on_writable(w->t.arg);
	else
		ws_update_inner(w);
}

static void
ws_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct ws *w = arg;
	if (w->t.want_read)
		w->t.on_readable(w->t.arg);
}

/* ws:// and wss:// differ only in the name their log lines give. */
#define WS_OPS(name) { .kind = name, .framed = true, .read = ws_read, .write = ws_write, .pending = ws_pending, \
	.want = ws_want, .shutdown = ws_shutdown, .free = ws_free }
static const struct transport_ops ws_ops = WS_OPS("ws"), wss_ops = WS_OPS("wss");

struct transport *
transport_ws_new(struct event_base *base, const struct ws_server *s, struct transport *inner,
    const char *kind)
{
	struct ws *w = calloc(1, sizeof(*w));
	if (w == NULL) {
		transport_free(inner);
		return NULL;
	}
	w->t.ops = strcmp(kind, "wss") == 0 ? &wss_ops : &ws_ops;
	w->server = *s;
	w->inner = inner;
	ws_decoder_init(&w->dec, s->max_message);
	w->wire = evbuffer_new();
	w->kick = event_new(base, -1, 0, ws_kick_cb, w);
	if (w->wire == NULL || w->kick == NULL) {
		ws_free(&w->t);
		return NULL;
	}
	transport_bind(inner, ws_inner_readable, ws_inner_writable, w);
	return &w->t;
}
