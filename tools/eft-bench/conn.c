/* conn.c - socket I/O and the poll() loop (see conn.h for the design).
 *
 * Output is written straight after the refill that produced it, and only
 * waits for POLLOUT once a write would block, so a burst costs one send()
 * per few hundred kilobytes.  Input is read in large pieces and parsed in
 * place; a partial frame stays in the buffer for the next read.
 *
 * conn_recv and conn_send are the only places that know whether bytes go
 * through TLS.  TLS changes what a connection waits for: a read may need
 * the socket writable and a write may need it readable (rwait, wwait), and
 * input OpenSSL has already taken from the socket is invisible to poll()
 * (rpending), so the loop reads it before it sleeps.
 *
 * With --ws, conn_flush wraps the STOMP frames in out into masked
 * WebSocket messages in wire (ws.h) and sends from there, and conn_parse_ws
 * takes the broker's frames apart.  A message's payload is parsed for
 * STOMP frames where it lies in the read buffer; only a STOMP frame split
 * across messages is copied, into frag, to be parsed whole. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "stats.h"
#include "tls.h"

#define IN_CAP (1u << 20)      /* first size of a read buffer */
#define READ_MIN (256u << 10)  /* room offered to each read() */
#define OUT_CAP (512u << 10)
#define PROGRESS_FIRST_NS 500000000ull
#define PROGRESS_EVERY_NS 250000000ull

void
loop_init(struct loop *l, uint64_t timeout_ns, uint64_t deadline_ns)
{
	memset(l, 0, sizeof(*l));
	l->timeout_ns = timeout_ns;
	l->deadline_ns = deadline_ns;
	l->status = LOOP_OK;
}

void
loop_free(struct loop *l)
{
	while (l->nconns > 0)
		conn_close(l->conns[l->nconns - 1]);
	free(l->conns);
	free(l->pfd);
	l->conns = NULL;
	l->pfd = NULL;
}

void
loop_set_progress(struct loop *l, void (*progress)(void *), void *arg)
{
	l->progress = progress;
	l->progress_arg = arg;
	l->next_progress_ns = now_ns() + PROGRESS_FIRST_NS;
}

void
loop_fail(struct loop *l, struct conn *c, const char *fmt, ...)
{
	if (l->status != LOOP_OK)
		return;
	int n = 0;
	if (c != NULL)
		n = snprintf(l->err, sizeof(l->err), "%s connection: ", c->name);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->err + n, sizeof(l->err) - (size_t)n, fmt, ap);
	va_end(ap);
	l->status = LOOP_FAILED;
	l->failed_conn = c;
}

void
loop_wake_at(struct loop *l, uint64_t t)
{
	if (l->wake_ns == 0 || t < l->wake_ns)
		l->wake_ns = t;
}

void
conn_expect_receipt(struct conn *c, const char *id)
{
	snprintf(c->receipt_want, sizeof(c->receipt_want), "%s", id);
	c->receipt_got = false;
}

/* ---- connecting ---- */

/* Wait for a non-blocking connect to finish; 0 or an errno. */
static int
connect_wait(struct loop *l, int fd)
{
	uint64_t limit = now_ns() + l->timeout_ns;
	if (l->deadline_ns && l->deadline_ns < limit)
		limit = l->deadline_ns;
	for (;;) {
		uint64_t now = now_ns();
		if (now >= limit)
			return ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int ms = (int)((limit - now) / 1000000) + 1;
		int r = poll(&p, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno;
		if (r == 0)
			continue;
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			return errno;
		return err;
	}
}

struct conn *
conn_open(struct loop *l, const char *host, const char *port, const char *name,
    struct tls_client *tc, const struct ws_opts *ws)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV }, *res, *ai;
	struct tls *t = NULL;
	char why[256];
	int fd = -1, err = 0;

	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		snprintf(why, sizeof(why), "cannot resolve %s port %s: %s", host, port,
		    gai_strerror(rc));
		goto fail;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		err = errno == EINPROGRESS ? connect_wait(l, fd) : errno;
		if (err == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(why, sizeof(why), "cannot connect to %s port %s for the %s connection: %s",
		    host, port, name, strerror(err));
		goto fail;
	}
	/* Frames are batched by eft-bench itself; Nagle would only add delay
	 * to the last partial segment of each batch. */
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (tc != NULL) {
		char reason[200];
		t = tls_new(tc, fd, reason, sizeof(reason));
		if (t == NULL) {
			snprintf(why, sizeof(why), "cannot start TLS with %s port %s for the %s "
			    "connection: %s", host, port, name, reason);
			goto fail;
		}
	}

	struct conn *c = xcalloc(1, sizeof(*c));
	c->loop = l;
	c->fd = fd;
	c->tls = t;
	c->handshaking = t != NULL;
	c->host = host;
	c->port = port;
	c->rwait = POLLIN;
	snprintf(c->name, sizeof(c->name), "%s", name);
	buf_init(&c->in, IN_CAP);
	buf_init(&c->out, OUT_CAP);
	c->ws = ws;
	if (ws != NULL) {
		buf_init(&c->wire, OUT_CAP);
		buf_init(&c->frag, 256);
		ws_rng_seed(&c->rng);
		ws_key_new(c->ws_key);
		ws_request(&c->wire, host, port, ws->path, c->ws_key);
		c->upgrading = true;
	}
	if (l->nconns == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 8;
		l->conns = xrealloc(l->conns, (size_t)l->cap * sizeof(*l->conns));
		l->pfd = xrealloc(l->pfd, (size_t)l->cap * sizeof(*l->pfd));
	}
	l->conns[l->nconns++] = c;
	return c;

fail:
	if (fd >= 0)
		close(fd);
	l->unreached = l->nconns == 0;
	loop_fail(l, NULL, "%s", why);
	return NULL;
}

static void conn_send_quietly(struct conn *c);

void
conn_close(struct conn *c)
{
	struct loop *l = c->loop;
	for (int i = 0; i < l->nconns; i++) {
		if (l->conns[i] == c) {
			l->conns[i] = l->conns[--l->nconns];
			break;
		}
	}
	if (l->failed_conn == c)
		l->failed_conn = NULL;
	if (c->ws != NULL && !c->upgrading && !c->ws_closed && !c->eof) {
		/* Say goodbye if the socket takes it at once; wire is empty
		 * unless the run failed, and then its tail may be a partial
		 * frame. */
		if (buf_pending(&c->wire) == 0) {
			ws_put(&c->wire, WS_CLOSE, "\x03\xe8", 2, &c->rng); /* 1000: normal */
			conn_send_quietly(c);
		}
	}
	tls_free(c->tls);
	if (c->fd >= 0)
		close(c->fd);
	buf_free(&c->in);
	buf_free(&c->out);
	buf_free(&c->wire);
	buf_free(&c->frag);
	free(c);
}

/* ---- frames every connection handles the same way ---- */

static void
on_error_frame(struct loop *l, struct conn *c, const struct frame *f)
{
	char message[256], detail[320];
	size_t n = 0;
	frame_unescape(message, sizeof(message), f->h[HDR_MESSAGE]);
	/* The body usually explains; keep its first few hundred bytes on one line. */
	for (size_t i = 0; i < f->body_len && n + 1 < sizeof(detail); i++) {
		char ch = f->body[i];
		if (ch == '\n' || ch == '\r' || ch == '\t')
			ch = ' ';
		if ((unsigned char)ch < ' ')
			continue;
		detail[n++] = ch;
	}
	while (n > 0 && detail[n - 1] == ' ')
		n--;
	detail[n] = '\0';
	loop_fail(l, c, "broker sent ERROR \"%s\"%s%s", message[0] ? message : "(no message header)",
	    n ? ": " : "", detail);
}

static void
dispatch(struct loop *l, struct conn *c, const struct frame *f)
{
	switch (f->cmd) {
	case FRAME_MESSAGE:
		if (c->on_message != NULL) {
			c->on_message(c, f);
			return;
		}
		loop_fail(l, c, "unexpected MESSAGE (this connection has no subscription)");
		return;
	case FRAME_RECEIPT:
		if (c->receipt_want[0] && !c->receipt_got &&
		    frame_hval_is(f->h[HDR_RECEIPT_ID], c->receipt_want)) {
			c->receipt_got = true;
			c->receipt_ns = c->rx_ns;
			return;
		}
		if (c->on_receipt != NULL) {
			c->on_receipt(c, f);
			return;
		}
		char id[64];
		frame_unescape(id, sizeof(id), f->h[HDR_RECEIPT_ID]);
		loop_fail(l, c, "unexpected RECEIPT for '%s'", id);
		return;
	case FRAME_ERROR:
		on_error_frame(l, c, f);
		return;
	case FRAME_CONNECTED:
		if (c->connected) {
			loop_fail(l, c, "a second CONNECTED frame");
			return;
		}
		c->connected = true;
		frame_unescape(c->server, sizeof(c->server), f->h[HDR_SERVER]);
		if (f->h[HDR_VERSION].p != NULL)
			frame_unescape(c->version, sizeof(c->version), f->h[HDR_VERSION]);
		else
			snprintf(c->version, sizeof(c->version), "1.0");
		return;
	case FRAME_OTHER:
		break;
	}
	loop_fail(l, c, "unexpected %.*s frame from the broker", (int)(f->name_len > 40 ? 40 :
	    f->name_len), f->name);
}

/* ---- I/O ---- */

/* The first connection of l still in its TLS handshake, or NULL. */
static struct conn *
loop_handshaking(const struct loop *l)
{
	for (int i = 0; i < l->nconns; i++)
		if (l->conns[i]->handshaking)
			return l->conns[i];
	return NULL;
}

/* The first connection of l waiting for its WebSocket handshake, or NULL. */
static struct conn *
loop_upgrading(const struct loop *l)
{
	for (int i = 0; i < l->nconns; i++)
		if (l->conns[i]->upgrading)
			return l->conns[i];
	return NULL;
}

/* Take c's TLS handshake a step further; true once it has finished.  A
 * failure is reported like an unreachable broker when no handshake of
 * this run got through: nothing can be measured, and retrying would not
 * get further. */
static bool
conn_handshake(struct loop *l, struct conn *c)
{
	l->last_activity_ns = now_ns();
	switch (tls_handshake(c->tls)) {
	case TLS_OK:
		c->handshaking = false;
		c->wwait = 0;
		l->tls_up = true;
		return true;
	case TLS_WANT_READ:
		c->wwait = POLLIN;
		return false;
	case TLS_WANT_WRITE:
		c->wwait = POLLOUT;
		return false;
	case TLS_EOF:
	case TLS_ERROR:
		break;
	}
	l->unreached = !l->tls_up;
	loop_fail(l, NULL, "TLS handshake with %s port %s failed for the %s connection: %s",
	    c->host, c->port, c->name, tls_error(c->tls));
	return false;
}

/* Move what has arrived into c->in.  Returns the number of bytes, 0 when
 * nothing has (or the stream ended: c->eof), -1 after loop_fail. */
static ssize_t
conn_recv(struct loop *l, struct conn *c)
{
	char *space = buf_reserve(&c->in, READ_MIN);
	size_t room = c->in.cap - c->in.len, got = 0;

	if (c->tls == NULL) {
		ssize_t n = read(c->fd, space, room);
		if (n > 0)
			return n;
		if (n == 0) {
			c->eof = true;
			return 0;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 0;
		loop_fail(l, c, "read failed: %s", strerror(errno));
		return -1;
	}
	/* One SSL_read yields one record at most: fill the room as a single
	 * read() would.  Stopping before OpenSSL says WANT_READ can leave
	 * input inside it that poll() will not report. */
	c->rwait = POLLIN;
	c->rpending = false;
	while (got < room) {
		size_t n = 0;
		switch (tls_read(c->tls, space + got, room - got, &n)) {
		case TLS_OK:
			got += n;
			continue;
		case TLS_WANT_READ:
			return (ssize_t)got;
		case TLS_WANT_WRITE:
			c->rwait = POLLOUT;
			return (ssize_t)got;
		case TLS_EOF:
			c->eof = true;
			return (ssize_t)got;
		case TLS_ERROR:
			loop_fail(l, c, "read failed: %s", tls_error(c->tls));
			return -1;
		}
	}
	c->rpending = tls_pending(c->tls);
	return (ssize_t)got;
}

/* Write from the front of b (c->out, or c->wire with --ws) once.  Returns
 * the number of bytes, 0 when the socket must be waited for (c->wwait says
 * for what), -1 on failure with the reason in why. */
static ssize_t
conn_send(struct conn *c, const struct buf *b, char *why, size_t whylen)
{
	const char *p = b->data + b->start;
	size_t len = buf_pending(b);

	if (c->tls == NULL) {
		for (;;) {
			ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
			if (n >= 0)
				return n;
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->wwait = POLLOUT;
				return 0;
			}
			snprintf(why, whylen, "%s", strerror(errno));
			return -1;
		}
	}
	size_t n = 0;
	switch (tls_write(c->tls, p, len, &n)) {
	case TLS_OK:
		return (ssize_t)n;
	case TLS_WANT_WRITE:
		c->wwait = POLLOUT;
		return 0;
	case TLS_WANT_READ:
		c->wwait = POLLIN;
		return 0;
	case TLS_EOF:
	case TLS_ERROR:
		break;
	}
	snprintf(why, whylen, "%s", tls_error(c->tls));
	return -1;
}

/* Handle every complete STOMP frame at the front of p[0, len).  Returns the
 * bytes used; *want is how many of the rest must be there before a frame
 * can be parsed (0 when none are left). */
static size_t
conn_frames(struct loop *l, struct conn *c, const char *p, size_t len, size_t *want)
{
	size_t done = 0;
	*want = 0;
	while (l->status == LOOP_OK && done < len) {
		struct frame f;
		size_t used;
		const char *why = NULL;
		enum frame_status st = frame_parse(p + done, len - done, &f, &used, &why);
		if (st == FRAME_MORE) {
			*want = used;
			break;
		}
		if (st == FRAME_BAD) {
			loop_fail(l, c, "malformed frame from the broker: %s", why);
			break;
		}
		dispatch(l, c, &f);
		done += used;
	}
	return done;
}

/* Handle every complete frame in c->in, then the after-read hook. */
static void
conn_parse(struct loop *l, struct conn *c)
{
	size_t want;
	buf_consume(&c->in, conn_frames(l, c, c->in.data + c->in.start, buf_pending(&c->in),
	    &want));
	c->want = want;
	if (c->after_read != NULL && l->status == LOOP_OK)
		c->after_read(c);
}

/* ---- WebSocket ---- */

/* Write as much of c->wire as the socket takes now, ignoring failures: for
 * goodbyes. */
static void
conn_send_quietly(struct conn *c)
{
	char why[256];
	while (buf_pending(&c->wire) > 0) {
		ssize_t n = conn_send(c, &c->wire, why, sizeof(why));
		if (n <= 0)
			return;
		buf_consume(&c->wire, (size_t)n);
	}
}

/* Only CR and LF: heart-beats, or the EOLs after a frame's NUL. */
static bool
only_eols(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != '\n' && p[i] != '\r')
			return false;
	return true;
}

/* The payload of a data message (or a piece of one) continues the STOMP
 * byte stream: parse it where it lies, unless a frame split across
 * messages is being put together in c->frag. */
static void
conn_ws_data(struct loop *l, struct conn *c, const char *p, size_t len)
{
	size_t want;
	if (buf_pending(&c->frag) == 0) {
		size_t used = conn_frames(l, c, p, len, &want);
		if (l->status != LOOP_OK || only_eols(p + used, len - used))
			return;
		buf_append(&c->frag, p + used, len - used);
		c->frag_want = want;
		return;
	}
	buf_append(&c->frag, p, len);
	if (buf_pending(&c->frag) < c->frag_want)
		return;
	buf_consume(&c->frag, conn_frames(l, c, c->frag.data + c->frag.start,
	    buf_pending(&c->frag), &want));
	c->frag_want = want;
	if (only_eols(c->frag.data + c->frag.start, buf_pending(&c->frag)))
		buf_clear(&c->frag);
}

/* The broker closed the WebSocket: answer with its status code, then the
 * stream is over (expected after DISCONNECT). */
static void
conn_ws_close(struct loop *l, struct conn *c, const struct ws_frame *wf)
{
	c->ws_closed = true;
	c->eof = true;
	unsigned code = wf->len >= 2 ? (unsigned)(unsigned char)wf->payload[0] << 8 |
	    (unsigned char)wf->payload[1] : 0;
	ws_put(&c->wire, WS_CLOSE, wf->payload, wf->len >= 2 ? 2 : 0, &c->rng);
	conn_send_quietly(c);
	if (c->closing)
		return;
	char reason[128] = "";
	size_t n = 0;
	for (size_t i = 2; i < wf->len && n + 1 < sizeof(reason); i++)
		if ((unsigned char)wf->payload[i] >= ' ')
			reason[n++] = wf->payload[i];
	reason[n] = '\0';
	if (code != 0)
		loop_fail(l, c, "the broker closed the WebSocket (status %u%s%s)%s", code,
		    n ? ": " : "", reason, c->connected ? "" : " before answering CONNECT");
	else
		loop_fail(l, c, "the broker closed the WebSocket%s", c->connected ? "" :
		    " before answering CONNECT");
}

/* Handle every complete WebSocket frame in c->in, then the after-read hook. */
static void
conn_parse_ws(struct loop *l, struct conn *c)
{
	while (l->status == LOOP_OK && !c->ws_closed) {
		struct ws_frame wf;
		size_t need = 0;
		const char *why = NULL;
		enum ws_status st = ws_frame_parse(c->in.data + c->in.start, buf_pending(&c->in), &wf,
		    &need, &why);
		if (st == WS_MORE) {
			c->want = need;
			break;
		}
		if (st == WS_BAD) {
			loop_fail(l, c, "bad WebSocket frame from the broker: %s", why);
			return;
		}
		c->want = 0;
		switch (wf.opcode) {
		case WS_TEXT:
		case WS_BINARY:
		case WS_CONTINUATION:
			if ((wf.opcode == WS_CONTINUATION) != c->ws_in_message) {
				loop_fail(l, c, "bad WebSocket frame from the broker: %s",
				    c->ws_in_message ? "a new message inside a fragmented one" :
				    "a continuation frame outside a message");
				return;
			}
			c->ws_in_message = !wf.fin;
			conn_ws_data(l, c, wf.payload, wf.len);
			break;
		case WS_PING:
			/* Answered with the next write. */
			ws_put(&c->wire, WS_PONG, wf.payload, wf.len, &c->rng);
			break;
		case WS_PONG:
			break;
		case WS_CLOSE:
			conn_ws_close(l, c, &wf);
			break;
		}
		buf_consume(&c->in, wf.size);
	}
	if (c->after_read != NULL && l->status == LOOP_OK)
		c->after_read(c);
}

/* Look for the answer to the Upgrade request in c->in; true once it has
 * come and is right, and c->in holds what followed it. */
static bool
conn_upgrade(struct loop *l, struct conn *c)
{
	char why[400];
	size_t used = 0;
	switch (ws_response(c->in.data + c->in.start, buf_pending(&c->in), c->ws_key, &used, why,
	    sizeof(why))) {
	case WS_OK:
		buf_consume(&c->in, used);
		c->upgrading = false;
		l->ws_up = true;
		return true;
	case WS_MORE:
		return false;
	case WS_BAD:
		break;
	}
	l->unreached = !l->ws_up;
	loop_fail(l, NULL, "WebSocket handshake with %s port %s (GET %s) failed for the %s "
	    "connection: %s", c->host, c->port, c->ws->path, c->name, why);
	return false;
}

/* Read once and handle every complete frame; false at end of stream or error. */
static bool
conn_read(struct loop *l, struct conn *c)
{
	if (c->handshaking && !conn_handshake(l, c))
		return l->status == LOOP_OK;
	ssize_t n = conn_recv(l, c);
	if (n < 0)
		return false;
	if (n > 0) {
		buf_commit(&c->in, (size_t)n);
		c->rx_ns = now_ns();
		l->last_activity_ns = c->rx_ns;
		if ((!c->upgrading || conn_upgrade(l, c)) && buf_pending(&c->in) >= c->want)
			(c->ws != NULL ? conn_parse_ws : conn_parse)(l, c);
	}
	if (c->eof && c->upgrading) {
		l->unreached = !l->ws_up;
		loop_fail(l, NULL, "WebSocket handshake with %s port %s (GET %s) failed for the %s "
		    "connection: the broker closed the connection without answering: is the port "
		    "a WebSocket one?", c->host, c->port, c->ws->path, c->name);
		return false;
	}
	if (c->eof) {
		if (!c->closing)
			loop_fail(l, c, "the broker closed the connection%s",
			    c->connected ? "" : " before answering CONNECT");
		return false;
	}
	return l->status == LOOP_OK;
}

/* Something is waiting to be written (or a TLS handshake to go on). */
static bool
conn_has_output(const struct conn *c)
{
	if (c->handshaking)
		return true;
	if (c->ws == NULL)
		return buf_pending(&c->out) > 0;
	return buf_pending(&c->wire) > 0 || (!c->upgrading && !c->ws_closed &&
	    buf_pending(&c->out) > 0);
}

static void
conn_flush(struct loop *l, struct conn *c)
{
	if (c->handshaking && !conn_handshake(l, c))
		return;
	struct buf *b = c->ws != NULL ? &c->wire : &c->out;
	for (;;) {
		/* Wrap only into an empty wire: what the socket has not taken
		 * stays in out, where the producer sees it. */
		if (c->ws != NULL && buf_pending(b) == 0 && !c->upgrading && !c->ws_closed &&
		    buf_pending(&c->out) > 0)
			ws_wrap(b, &c->out, c->ws->binary ? WS_BINARY : WS_TEXT, &c->rng);
		if (buf_pending(b) == 0)
			return;
		char why[256];
		ssize_t n = conn_send(c, b, why, sizeof(why));
		if (n > 0) {
			buf_consume(b, (size_t)n);
			l->last_activity_ns = now_ns();
			continue;
		}
		if (n == 0)
			return;
		/* The broker may have said why before closing: read that first.
		 * (Not through TLS: after a failure OpenSSL allows no more reads.) */
		while (c->tls == NULL && !c->eof && l->status == LOOP_OK && conn_read(l, c)) {
			struct pollfd p = { .fd = c->fd, .events = POLLIN };
			if (poll(&p, 1, 100) <= 0)
				break;
		}
		loop_fail(l, c, "connection lost while writing: %s", why);
		return;
	}
}

/* Let c's producer add frames and write them, again while the socket takes
 * everything, up to a few rounds so that reading is not starved.  Returns
 * true when it stopped with more to write and a writable socket.  A TLS
 * handshake starts here, with or without output. */
static bool
conn_produce(struct loop *l, struct conn *c)
{
	for (int round = 0; round < 4; round++) {
		if (c->eof)
			return false;
		if (c->refill != NULL)
			c->refill(c);
		if (!conn_has_output(c) || c->wwait)
			return false;
		conn_flush(l, c);
		if (c->wwait || l->status != LOOP_OK || c->refill == NULL)
			return false;
	}
	return true;
}

static bool
past(uint64_t now, uint64_t t)
{
	return t != 0 && now >= t;
}

enum loop_status
loop_run(struct loop *l, bool (*done)(void *), void *arg)
{
	l->last_activity_ns = now_ns();
	while (l->status == LOOP_OK) {
		if (done(arg))
			return LOOP_OK;
		uint64_t now = now_ns();
		if (past(now, l->deadline_ns)) {
			snprintf(l->err, sizeof(l->err), "the --duration limit was reached");
			l->status = LOOP_DEADLINE;
			break;
		}
		if (now - l->last_activity_ns >= l->timeout_ns) {
			struct conn *hs = loop_handshaking(l), *up = loop_upgrading(l);
			if (hs == NULL && up != NULL) {
				l->unreached = !l->ws_up;
				snprintf(l->err, sizeof(l->err), "WebSocket handshake with %s port %s "
				    "(GET %s) did not finish within %.1f s (--timeout) for the %s "
				    "connection: is the port a WebSocket one?", up->host, up->port,
				    up->ws->path, (double)l->timeout_ns / 1e9, up->name);
			} else if (hs != NULL) {
				/* Most likely a port that does not speak TLS and waits
				 * for a frame. */
				l->unreached = !l->tls_up;
				snprintf(l->err, sizeof(l->err), "TLS handshake with %s port %s did not "
				    "finish within %.1f s (--timeout) for the %s connection: is the "
				    "port a TLS one?", hs->host, hs->port, (double)l->timeout_ns / 1e9,
				    hs->name);
			} else {
				snprintf(l->err, sizeof(l->err), "nothing arrived or could be sent "
				    "for %.1f s (--timeout)", (double)l->timeout_ns / 1e9);
			}
			l->status = LOOP_IDLE;
			break;
		}
		if (l->progress != NULL && past(now, l->next_progress_ns)) {
			l->progress(l->progress_arg);
			l->next_progress_ns = now + PROGRESS_EVERY_NS;
		}

		l->wake_ns = 0;
		bool busy = false; /* a producer could write more right now */
		for (int i = 0; i < l->nconns && l->status == LOOP_OK; i++)
			busy |= conn_produce(l, l->conns[i]);
		if (l->status != LOOP_OK)
			break;

		/* Sleep until I/O or the earliest of the deadlines that apply. */
		now = now_ns();
		uint64_t until = l->last_activity_ns + l->timeout_ns;
		if (l->deadline_ns && l->deadline_ns < until)
			until = l->deadline_ns;
		if (l->wake_ns && l->wake_ns < until)
			until = l->wake_ns;
		if (l->progress != NULL && l->next_progress_ns < until)
			until = l->next_progress_ns;
		bool pending = false; /* input inside OpenSSL: read it before sleeping */
		for (int i = 0; i < l->nconns; i++)
			pending |= l->conns[i]->rpending;
		if (busy || pending)
			until = now; /* only look for input, then write on */
		struct timespec ts = { 0, 0 };
		if (until > now) {
			ts.tv_sec = (time_t)((until - now) / 1000000000u);
			ts.tv_nsec = (long)((until - now) % 1000000000u);
		}
		int n = 0;
		for (int i = 0; i < l->nconns; i++) {
			struct conn *c = l->conns[i];
			l->pfd[i].fd = c->eof ? -1 : c->fd;
			l->pfd[i].events = (short)(c->rwait | c->wwait);
			l->pfd[i].revents = 0;
			n++;
		}
		int r = ppoll(l->pfd, (nfds_t)n, &ts, NULL);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			loop_fail(l, NULL, "poll failed: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n && l->status == LOOP_OK && (r > 0 || pending); i++) {
			struct conn *c = l->conns[i];
			short ev = l->pfd[i].revents;
			if (ev & c->wwait)
				c->wwait = 0;
			if ((ev & (c->rwait | POLLHUP | POLLERR)) || c->rpending)
				conn_read(l, c);
		}
	}
	return l->status;
}
