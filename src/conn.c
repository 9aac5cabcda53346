/* conn.c - a client connection's socket I/O.
 *
 * Reads go straight into the parser's buffer, up to READ_CHUNK bytes a call;
 * every complete frame is handled before the next read.  Output collects in
 * an evbuffer and is written by the broker's flush once per loop turn (and
 * on EV_WRITE when the socket was full), so a burst of deliveries costs one
 * writev, not one syscall each.  A connection whose output passes the
 * high-water mark gets no more queue messages until it drains. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "eft/conn.h"
#include "eft/log.h"
#include "eft/proto.h"
#include "eft/sub.h"
#include "eft/temp.h"
#include "eft/tx.h"

#define READ_CHUNK (64 * 1024)
#define CLOSE_GRACE_MS 5000 /* after ERROR or DISCONNECT, time allowed to write what is left */

static void read_cb(evutil_socket_t fd, short what, void *arg);
static void write_cb(evutil_socket_t fd, short what, void *arg);
static void timer_cb(evutil_socket_t fd, short what, void *arg);

uint64_t
conn_now_ms(const struct conn *c)
{
	struct timeval tv;
	event_base_gettimeofday_cached(c->broker->base, &tv);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

static void
arm_timer(struct conn *c, uint64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
	evtimer_add(c->ev_timer, &tv);
}

struct conn *
conn_new(struct broker *b, int fd, const char *peer)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->broker = b;
	c->fd = fd;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	c->state = CONN_AWAIT_CONNECT;
	c->version = STOMP_1_0;
	const struct config *cfg = b->cfg;
	struct parser_limits limits = {
		.max_frame = cfg->max_frame_size,
		.max_headers = cfg->max_headers,
		.max_header_line = cfg->max_header_line,
	};
	parser_init(&c->parser, &limits);
	if (outbuf_init(&c->out) != 0)
		goto fail;
	if (fd >= 0) {
		evutil_make_socket_nonblocking(fd);
		c->ev_read = event_new(b->base, fd, EV_READ | EV_PERSIST, read_cb, c);
		c->ev_write = event_new(b->base, fd, EV_WRITE | EV_PERSIST, write_cb, c);
		c->ev_timer = evtimer_new(b->base, timer_cb, c);
		if (c->ev_read == NULL || c->ev_write == NULL || c->ev_timer == NULL ||
		    event_add(c->ev_read, NULL) != 0)
			goto fail;
	}
	c->last_read_ms = c->last_write_ms = conn_now_ms(c);
	c->next = b->conns;
	if (b->conns)
		b->conns->prev = c;
	b->conns = c;
	b->stats.connections++;
	log_info("%s: connection open", c->peer);
	return c;
fail:
	if (c->ev_read)
		event_free(c->ev_read);
	if (c->ev_write)
		event_free(c->ev_write);
	if (c->ev_timer)
		event_free(c->ev_timer);
	outbuf_free(&c->out);
	parser_free(&c->parser);
	free(c);
	return NULL;
}

/* Leave the broker: subscriptions end (their unacked messages go back to
 * their queues) and open transactions are dropped. */
static void
conn_detach(struct conn *c)
{
	c->state = CONN_CLOSING;
	struct sub *s, *stmp;
	HASH_ITER(hh, c->subs, s, stmp) {
		sub_free(s);
	}
	struct tx *t, *ttmp;
	HASH_ITER(hh, c->txs, t, ttmp) {
		tx_abort(c, t);
	}
	temp_free_all(c);
}

void
conn_close_after_flush(struct conn *c)
{
	if (c->state == CONN_CLOSING)
		return;
	conn_detach(c);
	if (c->fd < 0)
		return;
	event_del(c->ev_read);
	arm_timer(c, CLOSE_GRACE_MS);
	broker_want_flush(c->broker, c);
}

void
conn_free(struct conn *c)
{
	struct broker *b = c->broker;
	if (c->state != CONN_CLOSING)
		conn_detach(c);
	broker_flush_remove(b, c);
	if (c->prev)
		c->prev->next = c->next;
	else
		b->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->fd >= 0) {
		event_free(c->ev_read);
		event_free(c->ev_write);
		event_free(c->ev_timer);
		evutil_closesocket(c->fd);
		log_info("%s: connection closed", c->peer);
	}
	outbuf_free(&c->out);
	parser_free(&c->parser);
	free(c);
}

void
conn_output_added(struct conn *c)
{
	if (!c->out_blocked && outbuf_length(&c->out) >= c->broker->cfg->output_high_water)
		c->out_blocked = true;
	broker_want_flush(c->broker, c);
}

/* Output drained: let the connection's queue subscriptions take messages again. */
static void
conn_unblock(struct conn *c)
{
	c->out_blocked = false;
	struct sub *s, *tmp;
	HASH_ITER(hh, c->subs, s, tmp) {
		if (s->dest->kind == DEST_QUEUE && sub_can_take(s)) {
			broker_ready_add(s->dest, s);
			broker_dispatch(c->broker, s->dest);
		}
	}
}

int
conn_flush(struct conn *c)
{
	if (c->fd < 0)
		return 0;
	size_t left;
	if (outbuf_settle(&c->out) != 0) {
		log_error("%s: out of memory writing", c->peer);
		conn_free(c);
		return -1;
	}
	while ((left = evbuffer_get_length(c->out.buf)) > 0) {
		int n = evbuffer_write(c->out.buf, c->fd);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			log_info("%s: write failed: %s", c->peer, strerror(errno));
			conn_free(c);
			return -1;
		}
		c->last_write_ms = conn_now_ms(c);
		if (n == 0)
			break;
	}
	if (left > 0) {
		event_add(c->ev_write, NULL);
	} else {
		event_del(c->ev_write);
		if (c->state == CONN_CLOSING) {
			conn_free(c);
			return -1;
		}
	}
	if (c->out_blocked && left < c->broker->cfg->output_high_water / 2)
		conn_unblock(c);
	return 0;
}

void
conn_process(struct conn *c)
{
	struct frame *f;
	while (c->state != CONN_CLOSING) {
		enum parser_result r = parser_next(&c->parser, &f);
		if (r == PARSE_FRAME) {
			proto_handle(c, f);
		} else if (r == PARSE_ERROR) {
			proto_error(c, parser_failed_frame(&c->parser), parser_error(&c->parser),
			    "The frame could not be parsed; see the message header.");
			break;
		} else {
			break;
		}
	}
	if (c->state != CONN_CLOSING)
		parser_trim(&c->parser);
	if (outbuf_length(&c->out) > 0)
		broker_want_flush(c->broker, c);
}

static void
read_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct conn *c = arg;
	size_t avail;
	char *space = parser_space(&c->parser, READ_CHUNK, &avail);
	if (space == NULL) {
		log_error("%s: out of memory reading", c->peer);
		conn_free(c);
		return;
	}
	ssize_t n = read(fd, space, avail);
	if (n > 0) {
		parser_commit(&c->parser, (size_t)n);
		c->last_read_ms = conn_now_ms(c);
		conn_process(c);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n == 0)
		log_debug("%s: end of stream", c->peer);
	else
		log_info("%s: read failed: %s", c->peer, strerror(errno));
	if (parser_mid_frame(&c->parser))
		log_info("%s: closed in the middle of a frame", c->peer);
	conn_free(c);
}

static void
write_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	broker_flush_remove(c->broker, c);
	conn_flush(c);
}

void
conn_start_heartbeat(struct conn *c)
{
	if (c->fd < 0 || (c->hb_send_ms == 0 && c->hb_recv_ms == 0))
		return;
	uint64_t next = UINT64_MAX;
	if (c->hb_send_ms)
		next = c->hb_send_ms;
	if (c->hb_recv_ms && 2ull * c->hb_recv_ms < next)
		next = 2ull * c->hb_recv_ms;
	arm_timer(c, next);
}

/* Heart-beats: write an EOL after hb_send_ms of silence; close a client that
 * has been silent for twice the interval it promised.  Also the deadline for
 * a closing connection to get its output out. */
static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	if (c->state == CONN_CLOSING) {
		log_info("%s: peer did not read its last output in time", c->peer);
		conn_free(c);
		return;
	}
	uint64_t now = conn_now_ms(c), next = UINT64_MAX;
	if (c->hb_recv_ms) {
		uint64_t idle = now - c->last_read_ms, limit = 2ull * c->hb_recv_ms;
		if (idle >= limit) {
			log_info("%s: nothing received for %llu ms (heart-beat %u ms), closing",
			    c->peer, (unsigned long long)idle, c->hb_recv_ms);
			conn_free(c);
			return;
		}
		next = limit - idle;
	}
	if (c->hb_send_ms) {
		uint64_t since = now - c->last_write_ms;
		if (since >= c->hb_send_ms) {
			if (outbuf_add(&c->out, "\n", 1) == 0)
				broker_want_flush(c->broker, c);
			since = 0;
		}
		if (c->hb_send_ms - since < next)
			next = c->hb_send_ms - since;
	}
	arm_timer(c, next);
}
