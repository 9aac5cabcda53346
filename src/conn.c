/* conn.c - a client connection: bytes in and out through its transport,
 * timers, flow control and closing.
 *
 * Reads go straight into the parser's buffer, up to READ_CHUNK bytes a call;
 * every complete frame is handled before the next read.  Output collects in
 * an evbuffer and is written by the broker's flush once per loop turn (and
 * when the transport becomes writable after being full), so a burst of
 * deliveries costs one write, not one each.  A connection whose output passes
 * the high-water mark gets no more queue messages until it drains.
 *
 * Closing after an ERROR is a lingering close, as careful HTTP servers do it:
 * write what is left, then read and drop what the peer still sends; once it
 * has been quiet for LINGER_QUIET_MS, shut the write side (FIN, or TLS
 * close_notify) and go on dropping input until the peer closes, or
 * LINGER_IDLE_MS pass without a byte, or a byte budget is spent, or
 * frame-timeout-ms have passed in all (a client still sending the rest of a
 * refused frame is given the time any frame gets).  Closing a socket whose
 * receive buffer holds unread bytes sends a reset, and the peer's kernel
 * then throws away our ERROR before the client reads it; and the end of
 * stream waits for quiet because some clients (stomp.py over TLS) tear the
 * connection down when it arrives, failing a send another of their threads
 * has not finished. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "eft/conn.h"
#include "eft/log.h"
#include "eft/proto.h"
#include "eft/sub.h"
#include "eft/transport.h"
#include "eft/wire.h"

#define READ_CHUNK (64 * 1024)
#define CLOSE_GRACE_MS 5000 /* after ERROR or DISCONNECT, time allowed to write what is left */
#define LINGER_QUIET_MS 100 /* then, silence after which the write side is shut */
#define LINGER_IDLE_MS 2000 /* and after that, silence after which the peer is not waited for */
#define LINGER_BODY_MAX ((size_t)1 << 30) /* most of a refused body we wait for */
#define PAUSE_CHECK_MS 50   /* paused producers are looked at this often */

static void conn_readable(void *arg);
static void conn_writable(void *arg);
static void timer_cb(evutil_socket_t fd, short what, void *arg);
static void paused_unlink(struct conn *c);

/* ---- the set of connections: flush list, held list, paused check ---- */

void
conn_want_flush(struct conn *c)
{
	struct broker *b = c->broker;
	if (c->in_flush)
		return;
	c->in_flush = true;
	c->flush_prev = NULL;
	c->flush_next = c->set->flush_head;
	if (c->set->flush_head)
		c->set->flush_head->flush_prev = c;
	c->set->flush_head = c;
	if (!b->flushing)
		event_active(b->flush_ev, EV_WRITE, 0);
}

/* c has held output: on the broker's held list, which the flush looks at
 * when the backend kept more. */
static void
held_link(struct conn *c)
{
	if (c->held)
		return;
	c->held = true;
	c->held_prev = NULL;
	c->held_next = c->set->held;
	if (c->set->held)
		c->set->held->held_prev = c;
	c->set->held = c;
}

static void
held_unlink(struct conn *c)
{
	if (!c->held)
		return;
	if (c->held_prev)
		c->held_prev->held_next = c->held_next;
	else
		c->set->held = c->held_next;
	if (c->held_next)
		c->held_next->held_prev = c->held_prev;
	c->held_prev = c->held_next = NULL;
	c->held = false;
}

void
conn_check_paused_soon(struct broker *b)
{
	if (b->set->paused_ev == NULL || evtimer_pending(b->set->paused_ev, NULL))
		return;
	struct timeval tv = { 0, PAUSE_CHECK_MS * 1000 };
	evtimer_add(b->set->paused_ev, &tv);
}

uint64_t
conn_now_ms(const struct conn *c)
{
	struct timeval tv;
	event_base_gettimeofday_cached(c->broker->base, &tv);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* Does the connection read now?  Not while paused, while a failed login
 * waits for its ERROR, or while its last output is being written. */
static void
conn_want_read(struct conn *c, bool read)
{
	transport_want(c->transport, read, c->transport->want_write);
}

static void
conn_want_write(struct conn *c, bool write)
{
	transport_want(c->transport, c->transport->want_read, write);
}

struct conn *
conn_new(struct broker *b, struct transport *t, const char *peer)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		transport_free(t);
		return NULL;
	}
	c->broker = b;
	c->set = b->set;
	c->transport = t;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	c->state = CONN_AWAIT_CONNECT;
	if (t->ops->framed)
		c->first_len = CONN_FIRST_DONE;
	const struct config *cfg = b->cfg;
	struct parser_limits limits = {
		.max_frame = cfg->max_frame_size,
		.max_headers = cfg->max_headers,
		.max_header_line = cfg->max_header_line,
		.max_body = cfg->max_body_size,
	};
	parser_init(&c->parser, &limits);
	if (outbuf_init(&c->out) != 0)
		goto fail;
	c->session = session_new(b, c->peer, &c->out, conn_output_added, c);
	if (c->session == NULL)
		goto fail;
	c->ev_timer = evtimer_new(b->base, timer_cb, c);
	if (c->ev_timer == NULL)
		goto fail;
	transport_bind(t, conn_readable, conn_writable, c);
	conn_want_read(c, true);
	c->opened_ms = c->last_read_ms = c->last_write_ms = conn_now_ms(c);
	b->set->nconns++;
	c->next = b->set->conns;
	if (b->set->conns)
		b->set->conns->prev = c;
	b->set->conns = c;
	b->stats.connections++;
	b->set->listener_conns[0]++;
	c->id = ++b->set->next_conn_id;
	conn_schedule(c);
	return c;
fail:
	session_free(c->session);
	outbuf_free(&c->out);
	parser_free(&c->parser);
	transport_free(t);
	free(c);
	return NULL;
}

/* Leave the broker: the session gives back all it holds. */
static void
conn_detach(struct conn *c)
{
	c->state = CONN_CLOSING;
	session_end(c->session);
}

void
conn_close_after_flush(struct conn *c)
{
	if (conn_is_closing(c))
		return;
	if (c->paused) {
		paused_unlink(c);
		c->paused = false;
	}
	conn_detach(c);
	conn_want_read(c, false);
	c->close_deadline_ms = conn_now_ms(c) + CLOSE_GRACE_MS;
	c->timer_due = 0; /* the grace period replaces every other deadline */
	conn_schedule(c);
	conn_want_flush(c);
}

void
conn_free(struct conn *c)
{
	struct broker *b = c->broker;
	if (c->paused)
		paused_unlink(c);
	held_unlink(c);
	if (!conn_is_closing(c))
		conn_detach(c);
	conn_flush_remove(c);
	if (c->refused) {
		b->set->refusing--;
	} else {
		b->set->nconns--;
		b->set->listener_conns[c->listen_idx]--;
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		b->set->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	event_free(c->ev_timer);
	transport_free(c->transport);
	if (!c->refused)
		log_info("%s: connection closed", c->peer);
	session_free(c->session); /* ended already (conn_detach) */
	outbuf_free(&c->out);
	hold_free(&c->holds);
	parser_free(&c->parser);
	free(c);
	if (b->set->stopping && b->set->conns == NULL)
		event_base_loopexit(b->base, NULL);
}

void
conn_set_listener(struct conn *c, unsigned idx)
{
	struct broker *b = c->broker;
	b->set->listener_conns[c->listen_idx]--;
	b->set->listener_conns[idx]++;
	c->listen_idx = idx;
}

void
conn_refuse(struct conn *c)
{
	struct broker *b = c->broker;
	c->refused = true;
	b->set->nconns--;
	b->set->refusing++;
	b->set->listener_conns[c->listen_idx]--;
	b->stats.connections--;
	b->stats.frames_out[STAT_OUT_ERROR]++;
	if (wire_error(&c->out, c->session->version, "too many connections", NULL, 0, NULL,
	    "The server has as many connections as it may (max-connections); try again later.") != 0) {
		conn_free(c);
		return;
	}
	conn_close_after_flush(c);
}

static void conn_linger_shut(struct conn *c);

void
conn_shutdown(struct conn *c)
{
	if (c->state == CONN_LINGER && !c->linger_shut) {
		conn_linger_shut(c); /* the stop waits for no quiet spell (conn_linger) */
		return;
	}
	if (c->state == CONN_OPEN && c->session->version >= STOMP_1_1) {
		c->broker->stats.frames_out[STAT_OUT_ERROR]++;
		if (wire_error(&c->out, c->session->version, "server shutting down", NULL, 0, NULL,
		    "The server is stopping; reconnect later.") != 0)
			log_error("%s: out of memory writing ERROR", c->peer);
	}
	conn_close_after_flush(c);
}

/* What a lingering close reads before giving up: a frame's worth, and the
 * rest of a too-large body the peer announced, since it is most likely
 * still sending it and should get to read the ERROR. */
static size_t
linger_budget(const struct conn *c)
{
	size_t budget = c->broker->cfg->max_frame_size;
	const struct frame *f = parser_failed_frame(&c->parser);
	const struct header *cl = f ? frame_get(f, HDR_CONTENT_LENGTH) : NULL;
	uint64_t declared;
	if (cl != NULL && frame_parse_u64(cl->value, cl->value_len, &declared) == 0)
		budget += declared < LINGER_BODY_MAX ? (size_t)declared : LINGER_BODY_MAX;
	return budget;
}

/* When the lingering connection is next looked at: the write side is shut
 * after a quiet spell, the connection closed after a longer one, and
 * whatever happens by linger_end_ms. */
static void
conn_linger_deadline(struct conn *c)
{
	uint64_t due = c->last_read_ms + (c->linger_shut ? LINGER_IDLE_MS : LINGER_QUIET_MS);
	c->close_deadline_ms = due < c->linger_end_ms ? due : c->linger_end_ms;
}

/* The write side shut (FIN, or TLS close_notify): from now on the peer is
 * only waited for to close. */
static void
conn_linger_shut(struct conn *c)
{
	transport_shutdown(c->transport);
	c->linger_shut = true;
	conn_linger_deadline(c);
	c->timer_due = 0;
	conn_schedule(c);
}

/* Everything is written: drop input until the peer closes (see the top).
 * When eftd is stopping, the write side is shut at once: the quiet spell
 * spares a client's send in flight, which fails at a stop anyway, and a
 * client that closes at the end of stream lets eftd exit without a wait. */
static void
conn_linger(struct conn *c)
{
	c->linger_left = linger_budget(c);
	parser_free(&c->parser); /* nothing more is parsed */
	c->state = CONN_LINGER;
	c->linger_shut = false;
	c->last_read_ms = conn_now_ms(c);
	c->linger_end_ms = c->last_read_ms + c->broker->cfg->frame_timeout_ms;
	transport_want(c->transport, true, false);
	if (c->set->stopping) {
		conn_linger_shut(c);
		return;
	}
	conn_linger_deadline(c);
	c->timer_due = 0;
	conn_schedule(c);
}

/* The lingering connection's deadline passed: shut the write side after
 * the quiet spell, or close.  Returns -1 if c was freed. */
static int
conn_linger_timeout(struct conn *c, uint64_t now)
{
	if (!c->linger_shut && now < c->linger_end_ms) {
		conn_linger_shut(c);
		return 0;
	}
	log_debug("%s: peer did not close in time after the end", c->peer);
	conn_free(c);
	return -1;
}

static void
conn_linger_read(struct conn *c)
{
	char sink[16 * 1024];
	ssize_t n = transport_read(c->transport, sink, sizeof(sink));
	if (n == TRANSPORT_AGAIN)
		return;
	if (n > 0 && (size_t)n < c->linger_left) {
		c->linger_left -= (size_t)n;
		/* Still sending: wait while it keeps on, up to linger_end_ms.  A
		 * later deadline needs no new timer (it fires early and looks). */
		c->last_read_ms = conn_now_ms(c);
		conn_linger_deadline(c);
		return;
	}
	if (n > 0)
		log_info("%s: still sending after its connection was ended; closing", c->peer);
	conn_free(c);
}

void
conn_output_added(void *arg)
{
	struct conn *c = arg;
	const struct config *cfg = c->broker->cfg;
	size_t len = outbuf_length(&c->out);
	if (len >= cfg->output_high_water) {
		c->session->ep.blocked = true;
		/* Only topic deliveries pass the high-water mark by much: a
		 * subscriber that does not read is cut off at the flush. */
		if (len > cfg->max_output)
			c->overflow = true;
	}
	conn_want_flush(c);
}

/* Output drained: let the connection's queue subscriptions take messages again. */
static void
conn_unblock(struct conn *c)
{
	c->session->ep.blocked = false;
	struct sub *s, *tmp;
	HASH_ITER(hh, c->session->ep.subs, s, tmp) {
		if (sub_can_take(s))
			sub_wake(s); /* a wildcard queue subscription: each of its queues */
	}
}

void
conn_hold(struct conn *c, uint64_t at, uint64_t end)
{
	hold_add(&c->holds, at, end, c->promised);
	held_link(c);
}

bool
conn_held_full(const struct conn *c)
{
	return c->holds.n > 0 && outbuf_length(&c->out) >= c->broker->cfg->output_high_water;
}

void
conn_cut_held(struct conn *c)
{
	hold_release(&c->holds, c->broker->kept);
	if (c->holds.n == 0)
		return;
	if (outbuf_settle(&c->out) != 0 || hold_cut(&c->holds, c->out.buf, c->out.drained) != 0) {
		/* Nothing it holds can be trusted now: drop it all. */
		log_error("%s: out of memory cutting held receipts: its output is dropped", c->peer);
		evbuffer_drain(c->out.buf, evbuffer_get_length(c->out.buf));
		hold_release(&c->holds, UINT64_MAX);
	}
	held_unlink(c);
}

/* With holds: write what comes before the first one not yet kept (moved
 * aside to scratch and written from there, the rest put back), and count
 * what left buf, which the holds' stream positions are measured from.
 * Returns what transport_write did; *ready, what may still be written. */
static __attribute__((noinline)) ssize_t
conn_write_held(struct conn *c, size_t *ready)
{
	struct evbuffer *buf = c->out.buf;
	size_t len = evbuffer_get_length(buf);
	size_t upto = (size_t)(hold_limit(&c->holds) - c->out.drained);
	ssize_t n;
	if (upto >= len) {
		n = transport_write(c->transport, buf);
	} else {
		struct evbuffer *part = c->out.scratch;
		if (evbuffer_remove_buffer(buf, part, upto) != (int)upto) {
			evbuffer_prepend_buffer(buf, part);
			*ready = 0;
			return TRANSPORT_AGAIN; /* out of memory: the next flush tries again */
		}
		n = transport_write(c->transport, part);
		evbuffer_prepend_buffer(buf, part);
	}
	size_t left = evbuffer_get_length(buf);
	c->out.drained += len - left;
	upto -= len - left;
	*ready = (upto < left ? upto : left) + transport_pending(c->transport);
	return n;
}

int
conn_flush(struct conn *c)
{
	if (c->overflow) {
		log_warn("%s: slow consumer: %zu bytes unread (max-output %zu), closing", c->peer,
		    outbuf_length(&c->out), c->broker->cfg->max_output);
		conn_free(c);
		return -1;
	}
	if (outbuf_settle(&c->out) != 0) {
		log_error("%s: out of memory writing", c->peer);
		conn_free(c);
		return -1;
	}
	if (c->state == CONN_LINGER)
		return 0; /* shut: nothing more is written */
	/* RECEIPTs whose promises the backend has kept may go now. */
	if (__builtin_expect(c->holds.n > 0, 0) && hold_release(&c->holds, c->broker->kept) &&
	    c->holds.n == 0)
		held_unlink(c);
	size_t left = evbuffer_get_length(c->out.buf) + transport_pending(c->transport);
	size_t ready = left;
	if (left > 0) {
		ssize_t n;
		if (__builtin_expect(c->holds.n == 0, 1)) {
			/* No positions to keep track of: out.drained is only
			 * counted while there are holds. */
			n = transport_write(c->transport, c->out.buf);
			ready = left = evbuffer_get_length(c->out.buf) + transport_pending(c->transport);
		} else {
			n = conn_write_held(c, &ready);
			left = evbuffer_get_length(c->out.buf) + transport_pending(c->transport);
		}
		if (n == TRANSPORT_ERROR) {
			log_info("%s: write failed: %s", c->peer, transport_error(c->transport));
			conn_free(c);
			return -1;
		}
		if (n > 0)
			c->last_write_ms = conn_now_ms(c);
	}
	conn_want_write(c, ready > 0);
	if (left == 0 && c->state == CONN_CLOSING) {
		conn_linger(c);
		return 0;
	}
	if (c->session->ep.blocked && left < c->broker->cfg->output_high_water / 2)
		conn_unblock(c);
	return 0;
}

/* The ERROR for a frame the parser refused: one over a limit says which
 * setting and how much, one malformed that it could not be parsed. */
static void
conn_parse_error(struct conn *c)
{
	size_t limit;
	const char *key = parser_limit(&c->parser, &limit);
	char detail[320];
	if (key != NULL && strcmp(key, "max-headers") == 0)
		snprintf(detail, sizeof(detail), "The frame has more header lines than this "
		    "server's limit, %s = %zu, and was not processed: send fewer headers, or raise "
		    "%s in the server's configuration.", key, limit, key);
	else if (key != NULL)
		snprintf(detail, sizeof(detail), "The frame exceeds this server's size limit, "
		    "%s = %zu bytes, and was not processed: send smaller frames, or raise %s in the "
		    "server's configuration.", key, limit, key);
	else
		snprintf(detail, sizeof(detail), "The frame could not be parsed: %s.",
		    parser_error(&c->parser));
	proto_error(c, parser_failed_frame(&c->parser), parser_error(&c->parser), detail);
}

void
conn_process(struct conn *c)
{
	struct frame *f;
	bool completed = false;
	while (!conn_is_closing(c) && !c->paused && c->reject_at_ms == 0) {
		enum parser_result r = parser_next(&c->parser, &f);
		if (r == PARSE_FRAME) {
			completed = true;
			proto_handle(c, f);
		} else if (r == PARSE_ERROR) {
			conn_parse_error(c);
			break;
		} else {
			break;
		}
	}
	if (!conn_is_closing(c)) {
		parser_trim(&c->parser);
		/* A frame left unfinished must be finished in time; the clock
		 * restarts with each frame, however the stream is split. */
		if (!parser_mid_frame(&c->parser)) {
			c->frame_started_ms = 0;
		} else if (c->frame_started_ms == 0 || completed) {
			c->frame_started_ms = conn_now_ms(c);
			conn_schedule(c);
		}
	}
	if (outbuf_length(&c->out) > 0)
		conn_want_flush(c);
}

/* HTTP request lines eftd recognises on a STOMP listener, by their method
 * and the space after it.  STOMP's own CONNECT is followed by an EOL. */
static const char *const http_methods[] = {
	"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE ",
};
#define HTTP_METHODS (sizeof(http_methods) / sizeof(http_methods[0]))
#define HTTP_METHODS_ALL ((1u << HTTP_METHODS) - 1)
_Static_assert(HTTP_METHODS <= 16, "a bit each in conn->first_not");

/* Not STOMP but HTTP (a browser, curl, a health check): an answer such a
 * client can show, saying where eftd does speak HTTP; then the lingering
 * close, which reads and drops the rest of the request. */
static void
conn_answer_http(struct conn *c, const char *method)
{
#define PLAIN_BODY "This port speaks STOMP, not HTTP (eftd, a STOMP broker).\n"
	_Static_assert(sizeof(PLAIN_BODY) - 1 == 57, "Content-Length below");
	static const char plain[] = "HTTP/1.1 400 Bad Request\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 57\r\n"
	    "Connection: close\r\n\r\n" PLAIN_BODY;
#undef PLAIN_BODY
	const char *answer = c->set->http_answer ? c->set->http_answer : plain;
	log_info("%s: not STOMP: an HTTP request (%.*s); answered 400 Bad Request, closing",
	    c->peer, (int)strlen(method) - 1, method);
	if (outbuf_add(&c->out, answer, strlen(answer)) != 0)
		log_error("%s: out of memory answering HTTP", c->peer);
	conn_close_after_flush(c);
}

/* The connection's first bytes, before any is parsed: a TLS client or an
 * HTTP client on a plain STOMP listener is told so at once, rather than
 * waiting for connect-timeout-ms and then getting a STOMP ERROR it cannot
 * show.  Each byte is matched against the methods it may still begin, so
 * that a request line split over reads is known too; only the first few
 * bytes of a connection are looked at.  Returns -1 when c is answered and
 * closing (the bytes are not STOMP). */
static __attribute__((noinline, cold)) int
conn_first_bytes(struct conn *c, const char *data, size_t n)
{
	if (c->first_len == 0 && data[0] == 0x16) {
		c->first_len = CONN_FIRST_DONE;
		proto_error(c, NULL, "not STOMP: a TLS handshake", "This listener speaks plain "
		    "STOMP; connect to a tls:// listener, or without TLS.");
		return -1;
	}
	for (size_t i = 0; i < n && c->first_not != HTTP_METHODS_ALL; i++, c->first_len++) {
		for (unsigned m = 0; m < HTTP_METHODS; m++) {
			if (c->first_not & (1u << m))
				continue;
			if (http_methods[m][c->first_len] != data[i]) {
				c->first_not |= (uint16_t)(1u << m);
			} else if (http_methods[m][c->first_len + 1] == '\0') {
				c->first_len = CONN_FIRST_DONE;
				conn_answer_http(c, http_methods[m]);
				return -1;
			}
		}
	}
	if (c->first_not == HTTP_METHODS_ALL)
		c->first_len = CONN_FIRST_DONE;
	return 0;
}

static void
conn_readable(void *arg)
{
	struct conn *c = arg;
	if (c->state == CONN_LINGER) {
		conn_linger_read(c);
		return;
	}
	size_t avail;
	char *space = parser_space(&c->parser, READ_CHUNK, &avail);
	if (space == NULL) {
		log_error("%s: out of memory reading", c->peer);
		conn_free(c);
		return;
	}
	ssize_t n = transport_read(c->transport, space, avail);
	if (n > 0) {
		if (__builtin_expect(c->first_len != CONN_FIRST_DONE, 0) &&
		    conn_first_bytes(c, space, (size_t)n) != 0)
			return;
		parser_commit(&c->parser, (size_t)n);
		c->last_read_ms = conn_now_ms(c);
		conn_process(c);
		/* A WebSocket client that drops the NUL of a message's last frame
		 * (React Native): its content-length says the frame is whole. */
		if (c->transport->unterminated_end && !conn_is_closing(c) &&
		    parser_awaits_nul(&c->parser)) {
			if (parser_feed(&c->parser, "", 1) != 0) {
				log_error("%s: out of memory reading", c->peer);
				conn_free(c);
				return;
			}
			conn_process(c);
		}
		return;
	}
	if (n == TRANSPORT_AGAIN) {
		parser_trim(&c->parser); /* an idle connection holds no buffer */
		return;
	}
	if (n == TRANSPORT_CLOSE) {
		log_info("%s: %s", c->peer, transport_error(c->transport));
		conn_close_after_flush(c);
		return;
	}
	if (n == 0)
		log_debug("%s: end of stream", c->peer);
	else
		log_info("%s: read failed: %s", c->peer, transport_error(c->transport));
	if (parser_mid_frame(&c->parser))
		log_info("%s: closed in the middle of a frame", c->peer);
	conn_free(c);
}

static void
conn_writable(void *arg)
{
	struct conn *c = arg;
	conn_flush_remove(c);
	conn_flush(c); /* RECEIPTs the backend has not kept stay held */
}

/* The earliest moment something time-driven is due, or UINT64_MAX:
 * the end of the grace period of a closing connection, the CONNECT and
 * frame deadlines, and both heart-beat directions. */
static uint64_t
next_deadline(const struct conn *c)
{
	if (conn_is_closing(c))
		return c->close_deadline_ms;
	const struct config *cfg = c->broker->cfg;
	uint64_t due = UINT64_MAX;
	if (c->reject_at_ms)
		return c->reject_at_ms;
	if (c->state == CONN_AWAIT_CONNECT)
		due = c->opened_ms + cfg->connect_timeout_ms;
	if (c->frame_started_ms && !c->paused && c->frame_started_ms + cfg->frame_timeout_ms < due)
		due = c->frame_started_ms + cfg->frame_timeout_ms;
	if (c->hb_recv_ms && !c->paused && c->last_read_ms + 2ull * c->hb_recv_ms < due)
		due = c->last_read_ms + 2ull * c->hb_recv_ms;
	if (c->hb_send_ms && c->last_write_ms + c->hb_send_ms < due)
		due = c->last_write_ms + c->hb_send_ms;
	return due;
}

/* Make sure the timer fires by the next deadline.  Deadlines that move later
 * (a write resets the heart-beat) just make the timer fire early and look again. */
void
conn_schedule(struct conn *c)
{
	uint64_t due = next_deadline(c);
	if (due == UINT64_MAX || (c->timer_due != 0 && c->timer_due <= due))
		return;
	uint64_t now = conn_now_ms(c), ms = due > now ? due - now : 0;
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
	evtimer_add(c->ev_timer, &tv);
	c->timer_due = due;
}

/* The CONNECT deadline passed.  A transport still in its handshake (TLS)
 * cannot carry an ERROR: it is just closed. */
static void
conn_connect_timeout(struct conn *c)
{
	const struct config *cfg = c->broker->cfg;
	if (!c->transport->established) {
		log_info("%s: %s handshake not finished within %u ms (connect-timeout-ms), closing",
		    c->peer, transport_kind(c->transport), cfg->connect_timeout_ms);
		conn_free(c);
		return;
	}
	char detail[128];
	snprintf(detail, sizeof(detail), "No CONNECT frame within %u ms of connecting.",
	    cfg->connect_timeout_ms);
	proto_error(c, NULL, "connect timeout", detail);
	conn_schedule(c);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	const struct config *cfg = c->broker->cfg;
	uint64_t now = conn_now_ms(c);
	c->timer_due = 0;
	if (c->state == CONN_LINGER) {
		if (now >= c->close_deadline_ms && conn_linger_timeout(c, now) != 0)
			return;
	} else if (c->state == CONN_CLOSING) {
		if (now >= c->close_deadline_ms) {
			log_info("%s: peer did not read its last output in time", c->peer);
			conn_free(c);
			return;
		}
	} else if (c->reject_at_ms) {
		if (now >= c->reject_at_ms) {
			c->reject_at_ms = 0;
			proto_error(c, NULL, "authentication failed", "Wrong login or passcode.");
		}
	} else if (c->state == CONN_AWAIT_CONNECT && now >= c->opened_ms + cfg->connect_timeout_ms) {
		conn_connect_timeout(c);
		return;
	} else if (c->frame_started_ms && !c->paused &&
	    now >= c->frame_started_ms + cfg->frame_timeout_ms) {
		char detail[128];
		snprintf(detail, sizeof(detail), "A frame was started but not finished within %u ms.",
		    cfg->frame_timeout_ms);
		proto_error(c, NULL, "frame timeout", detail);
	} else if (c->hb_recv_ms && !c->paused && now - c->last_read_ms >= 2ull * c->hb_recv_ms) {
		log_info("%s: nothing received for %llu ms (heart-beat %u ms), closing", c->peer,
		    (unsigned long long)(now - c->last_read_ms), c->hb_recv_ms);
		conn_free(c);
		return;
	} else if (c->hb_send_ms && now - c->last_write_ms >= c->hb_send_ms) {
		if (outbuf_add(&c->out, "\n", 1) == 0)
			conn_want_flush(c);
		c->last_write_ms = now; /* the flush, later this turn, sends it */
	}
	conn_schedule(c);
}

/* A failed login: stop reading now, answer with an ERROR after the delay
 * (a password guesser gets one try per delay and connection). */
void
conn_reject_later(struct conn *c, unsigned delay_ms)
{
	if (delay_ms == 0) {
		proto_error(c, NULL, "authentication failed", "Wrong login or passcode.");
		return;
	}
	conn_want_read(c, false);
	c->reject_at_ms = conn_now_ms(c) + delay_ms;
	c->timer_due = 0;
	conn_schedule(c);
}

/* ---- flow control ---- */

void
conn_pause(struct conn *c, struct dest *full)
{
	struct broker *b = c->broker;
	if (c->paused || conn_is_closing(c))
		return;
	c->paused = true;
	c->paused_on = full;
	c->paused_gen = b->dests.freed;
	conn_want_read(c, false);
	c->paused_next = b->set->paused;
	b->set->paused = c;
	conn_check_paused_soon(b);
	log_debug("%s: paused (%s)", c->peer, full ? dest_name(full) : "memory limit");
}

/* Unlink c from the broker's paused list, wherever it is. */
static void
paused_unlink(struct conn *c)
{
	struct conn **pp = &c->set->paused;
	while (*pp != NULL && *pp != c)
		pp = &(*pp)->paused_next;
	if (*pp == c)
		*pp = c->paused_next;
	c->paused_next = NULL;
}

void
conn_resume(struct conn *c)
{
	if (!c->paused)
		return;
	c->paused = false;
	c->paused_on = NULL;
	c->last_read_ms = conn_now_ms(c); /* we did not read: the client was not silent */
	if (!conn_is_closing(c))
		conn_want_read(c, true);
	log_debug("%s: resumed", c->peer);
	/* Frames that arrived with the one that paused us are still buffered. */
	conn_process(c);
}
