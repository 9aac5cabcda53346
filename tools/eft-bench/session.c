/* session.c - STOMP client steps shared by the modes (see session.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "payload.h"
#include "report.h"
#include "session.h"

#define MAX_COMPLAINTS 3

/* ---- connecting and subscribing ---- */

static void
header_plain(struct buf *b, const char *name, const char *value)
{
	/* CONNECT headers are never escaped (STOMP 1.2). */
	frame_header_raw(b, name, (struct hval){ value, strlen(value) });
}

static struct conn *
open_at(struct loop *l, const struct opts *o, const char *port, const char *name)
{
	struct conn *c = conn_open(l, o->host, port, name, o->tls_client,
	    o->ws ? &o->ws_opts : NULL);
	if (c == NULL)
		return NULL;
	frame_begin(&c->out, "CONNECT");
	header_plain(&c->out, "accept-version", "1.2");
	header_plain(&c->out, "host", o->vhost);
	if (o->login[0])
		header_plain(&c->out, "login", o->login);
	if (o->passcode[0])
		header_plain(&c->out, "passcode", o->passcode);
	header_plain(&c->out, "heart-beat", "0,0");
	frame_finish(&c->out, NULL, 0);
	return c;
}

struct conn *
session_open(struct loop *l, const struct opts *o, const char *name)
{
	return open_at(l, o, o->port, name);
}

bool
session_split_ports(const struct opts *o)
{
	return o->consumer_port != NULL && strcmp(o->consumer_port, o->port) != 0;
}

struct conn *
session_open_consumer(struct loop *l, const struct opts *o, const char *name)
{
	return open_at(l, o, session_split_ports(o) ? o->consumer_port : o->port, name);
}

static bool
all_connected(void *arg)
{
	struct loop *l = arg;
	for (int i = 0; i < l->nconns; i++)
		if (!l->conns[i]->connected)
			return false;
	return true;
}

bool
session_wait_connected(struct loop *l)
{
	if (loop_run(l, all_connected, l) != LOOP_OK)
		return false;
	for (int i = 0; i < l->nconns; i++) {
		struct conn *c = l->conns[i];
		if (strcmp(c->version, "1.2") != 0)
			report_warn("%s connection: the broker chose STOMP %s, not 1.2", c->name,
			    c->version);
	}
	return true;
}

static bool
all_receipts(void *arg)
{
	struct loop *l = arg;
	for (int i = 0; i < l->nconns; i++) {
		struct conn *c = l->conns[i];
		if (c->receipt_want[0] && !c->receipt_got && !c->eof)
			return false;
	}
	return true;
}

bool
session_wait_receipts(struct loop *l)
{
	return loop_run(l, all_receipts, l) == LOOP_OK;
}

void
session_subscribe(struct conn *c, const struct opts *o, const char *dest, const char *id,
    enum ack_mode ack, const char *receipt)
{
	frame_begin(&c->out, "SUBSCRIBE");
	frame_header(&c->out, "id", id);
	frame_header(&c->out, "destination", dest);
	frame_header(&c->out, "ack", ack_mode_name(ack));
	for (int i = 0; i < o->nsub_headers; i++)
		frame_header_line(&c->out, o->sub_headers[i]);
	if (receipt != NULL) {
		frame_header(&c->out, "receipt", receipt);
		conn_expect_receipt(c, receipt);
	}
	frame_finish(&c->out, NULL, 0);
}

void
session_close_all(struct loop *l)
{
	if (l->status == LOOP_OK) {
		for (int i = 0; i < l->nconns; i++) {
			struct conn *c = l->conns[i];
			if (c->eof)
				continue;
			c->refill = NULL;
			c->closing = true;
			frame_begin(&c->out, "DISCONNECT");
			frame_header(&c->out, "receipt", RECEIPT_BYE);
			frame_finish(&c->out, NULL, 0);
			conn_expect_receipt(c, RECEIPT_BYE);
		}
		if (!session_wait_receipts(l) && l->status == LOOP_IDLE)
			snprintf(l->err, sizeof(l->err), "no RECEIPT for DISCONNECT within %.1f s",
			    (double)l->timeout_ns / 1e9);
	}
	while (l->nconns > 0)
		conn_close(l->conns[l->nconns - 1]);
}

void
session_note_failure(const struct loop *l, struct result *r)
{
	if (l->status == LOOP_OK || r->error[0])
		return;
	snprintf(r->error, sizeof(r->error), "%s", l->err);
	r->expired = l->status == LOOP_DEADLINE;
	r->unreached = l->unreached;
}

void
session_note_server(const struct loop *l, struct result *r)
{
	for (int i = 0; i < l->nconns && !r->server[0]; i++)
		snprintf(r->server, sizeof(r->server), "%s", l->conns[i]->server);
}

/* ---- sending ---- */

void
sender_init(struct sender *s, const struct opts *o, const char *dest, size_t size,
    const char *extra_header)
{
	buf_init(&s->head, 256);
	frame_begin(&s->head, "SEND");
	frame_header(&s->head, "destination", dest);
	if (extra_header != NULL)
		frame_header_line(&s->head, extra_header);
	for (int i = 0; i < o->nsend_headers; i++)
		frame_header_line(&s->head, o->send_headers[i]);
	bool persistent = o->persistent;
	if (persistent)
		frame_header(&s->head, "persistent", "true");
	frame_header_u64(&s->head, "content-length", size);
	s->size = size;
}

void
sender_free(struct sender *s)
{
	buf_free(&s->head);
}

void
sender_put(const struct sender *s, struct buf *out, const char *extra, size_t extra_len,
    uint64_t seq, uint64_t sent_ns)
{
	size_t head = buf_pending(&s->head);
	char *p = buf_reserve(out, head + extra_len + s->size + 2), *start = p;
	memcpy(p, s->head.data + s->head.start, head);
	p += head;
	memcpy(p, extra, extra_len);
	p += extra_len;
	*p++ = '\n';
	payload_write(p, s->size, seq, sent_ns);
	p += s->size;
	*p++ = '\0';
	buf_commit(out, (size_t)(p - start));
}

#define RECEIPT_SEQ_PREFIX "eft-bench-"

/* "receipt:eft-bench-<seq>\n" into out; its length. */
static size_t
receipt_line(char *out, size_t outlen, uint64_t seq)
{
	int n = snprintf(out, outlen, "receipt:" RECEIPT_SEQ_PREFIX "%" PRIu64 "\n", seq);
	return (size_t)n;
}

/* How many messages should have been sent by now: all of them flat out,
 * else as many as the rate has come to. */
static inline uint64_t
producer_due(const struct producer *p, uint64_t now)
{
	if (p->rate <= 0)
		return p->n;
	uint64_t due = (uint64_t)((double)(now - p->t0) * p->rate / 1e9) + 1;
	return due < p->n ? due : p->n;
}

/* Paced runs stamp each message with its scheduled time, so a broker that
 * falls behind shows it in the latency (no coordinated omission).  Flat
 * out, one clock read per batch: the batch goes out in the same write. */
static inline uint64_t
producer_stamp(const struct producer *p, uint64_t seq, uint64_t now)
{
	return p->rate > 0 ? p->t0 + (uint64_t)((double)seq * 1e9 / p->rate) : now;
}

/* --receipt-window: each SEND asks for its own RECEIPT, at most window of
 * them outstanding.  Kept apart from producer_refill so that the usual
 * path has no per-message work added. */
static void
producer_refill_window(struct conn *c)
{
	struct producer *p = c->arg;
	if (p->sent >= p->n || p->sent - p->acked >= p->window ||
	    buf_pending(&c->out) >= p->low)
		return;
	uint64_t now = now_ns(), due = producer_due(p, now);
	while (p->sent < due && p->sent - p->acked < p->window &&
	    buf_pending(&c->out) < p->high) {
		uint64_t seq = p->sent++;
		uint64_t ts = producer_stamp(p, seq, now);
		char line[64];
		size_t len = receipt_line(line, sizeof(line), seq);
		sender_put(&p->snd, &c->out, line, len, seq, ts);
	}
	/* A full window waits for a RECEIPT, which brings the loop back by itself. */
	if (p->rate > 0 && p->sent < p->n && p->sent - p->acked < p->window)
		loop_wake_at(c->loop, p->t0 + (uint64_t)((double)p->sent * 1e9 / p->rate));
}

/* A RECEIPT on the producer's connection (--receipt-window): it must be the
 * one for the oldest SEND still waiting. */
static void
producer_receipt(struct conn *c, const struct frame *f)
{
	struct producer *p = c->arg;
	char want[48], got[64];
	snprintf(want, sizeof(want), RECEIPT_SEQ_PREFIX "%" PRIu64, p->acked);
	if (p->acked < p->sent && frame_hval_is(f->h[HDR_RECEIPT_ID], want)) {
		if (++p->acked == p->n) {
			c->receipt_got = true;
			c->receipt_ns = c->rx_ns;
		}
		return;
	}
	frame_unescape(got, sizeof(got), f->h[HDR_RECEIPT_ID]);
	if (p->acked >= p->sent)
		loop_fail(c->loop, c, "RECEIPT for '%s' when none was outstanding (%" PRIu64
		    " SENDs, %" PRIu64 " RECEIPTs so far)", got, p->sent, p->acked);
	else
		loop_fail(c->loop, c, "RECEIPT for '%s' where '%s' was due: receipts must come "
		    "back in order, each once", got, want);
}

void
producer_note_failure(const struct producer *p)
{
	struct loop *l = p->c->loop;
	if (p->window == 0 || l->status != LOOP_IDLE || p->acked >= p->sent)
		return;
	snprintf(l->err, sizeof(l->err), "%s connection: no RECEIPT for '" RECEIPT_SEQ_PREFIX
	    "%" PRIu64 "' within %.1f s (--timeout): %" PRIu64 " of %" PRIu64 " SENDs have "
	    "their RECEIPT, %" PRIu64 " outstanding", p->c->name, p->acked,
	    (double)l->timeout_ns / 1e9, p->acked, p->sent, p->sent - p->acked);
}

static void
producer_refill(struct conn *c)
{
	static const char last[] = "receipt:" RECEIPT_SENT "\n";
	struct producer *p = c->arg;
	if (p->sent >= p->n || buf_pending(&c->out) >= p->low)
		return;
	uint64_t now = now_ns(), due = producer_due(p, now);
	while (p->sent < due && buf_pending(&c->out) < p->high) {
		uint64_t seq = p->sent++;
		uint64_t ts = producer_stamp(p, seq, now);
		if (p->sent == p->n) {
			conn_expect_receipt(c, RECEIPT_SENT);
			sender_put(&p->snd, &c->out, last, sizeof(last) - 1, seq, ts);
		} else {
			sender_put(&p->snd, &c->out, "", 0, seq, ts);
		}
	}
	if (p->rate > 0 && p->sent < p->n)
		loop_wake_at(c->loop, p->t0 + (uint64_t)((double)p->sent * 1e9 / p->rate));
}

void
producer_init(struct producer *p, struct conn *c, const struct opts *o, const char *dest,
    size_t size, uint64_t n, double rate, size_t low, size_t high)
{
	memset(p, 0, sizeof(*p));
	p->c = c;
	sender_init(&p->snd, o, dest, size, NULL);
	p->window = (uint64_t)o->receipt_window;
	p->n = n;
	p->rate = rate;
	p->low = low;
	p->high = high;
}

void
producer_free(struct producer *p)
{
	sender_free(&p->snd);
}

void
producer_start(struct producer *p, uint64_t t0)
{
	p->t0 = t0;
	p->c->arg = p;
	if (p->window > 0) {
		conn_expect_receipt(p->c, ""); /* the last receipt sets receipt_got */
		p->c->on_receipt = producer_receipt;
		p->c->refill = producer_refill_window;
	} else {
		p->c->refill = producer_refill;
	}
}

/* ---- acknowledging ---- */

void
acker_init(struct acker *a, enum ack_mode mode)
{
	a->mode = mode;
	a->has = false;
	buf_init(&a->pending, 256);
}

void
acker_free(struct acker *a)
{
	buf_free(&a->pending);
}

/* ACK by the 1.2 ack header; a 1.0/1.1 broker gets subscription + message-id. */
static bool
put_ack(struct buf *b, const struct frame *f)
{
	const struct hval *h = f->h;
	if (h[HDR_ACK].p == NULL && h[HDR_MESSAGE_ID].p == NULL)
		return false;
	frame_begin(b, "ACK");
	if (h[HDR_ACK].p != NULL) {
		frame_header_raw(b, "id", h[HDR_ACK]);
	} else {
		if (h[HDR_SUBSCRIPTION].p != NULL)
			frame_header_raw(b, "subscription", h[HDR_SUBSCRIPTION]);
		frame_header_raw(b, "message-id", h[HDR_MESSAGE_ID]);
	}
	frame_finish(b, NULL, 0);
	return true;
}

void
acker_message(struct acker *a, struct conn *c, const struct frame *f)
{
	if (a->mode == ACK_AUTO)
		return;
	struct buf *b = a->mode == ACK_CLIENT ? &a->pending : &c->out;
	if (a->mode == ACK_CLIENT)
		buf_clear(b);
	if (!put_ack(b, f)) {
		loop_fail(c->loop, c, "MESSAGE with neither an ack nor a message-id header: "
		    "it cannot be acknowledged");
		return;
	}
	a->has = a->mode == ACK_CLIENT;
}

void
acker_flush(struct acker *a, struct conn *c)
{
	if (!a->has)
		return;
	buf_append(&c->out, a->pending.data + a->pending.start, buf_pending(&a->pending));
	a->has = false;
}

/* ---- receiving ---- */

/* A short printable picture of a body, for complaints. */
static void
body_excerpt(char *out, size_t outlen, const char *p, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len && n + 4 < outlen && i < 48; i++)
		out[n++] = (p[i] >= ' ' && p[i] < 127) ? p[i] : '?';
	if (len > 48 && n + 4 < outlen) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

static void
consumer_message(struct conn *c, const struct frame *f)
{
	struct consumer *k = c->arg;
	uint64_t seq, sent;
	if (payload_read(f->body, f->body_len, k->size, &seq, &sent) != 0) {
		k->trk.received++;
		k->trk.corrupted++;
		if (k->complaints++ < MAX_COMPLAINTS) {
			char ex[64];
			body_excerpt(ex, sizeof(ex), f->body, f->body_len);
			report_warn("%s connection: corrupted message (%zu bytes, expected %zu): \"%s\"",
			    c->name, f->body_len, k->size, ex);
		}
	} else {
		uint64_t dup = k->trk.duplicated, reord = k->trk.reordered, bad = k->trk.corrupted;
		if (tracker_note(&k->trk, seq) && k->lat != NULL)
			hist_record(k->lat, c->rx_ns > sent ? c->rx_ns - sent : 0);
		if ((k->trk.duplicated != dup || k->trk.reordered != reord ||
		    k->trk.corrupted != bad) && k->complaints++ < MAX_COMPLAINTS)
			report_warn("%s connection: message %" PRIu64 " %s", c->name, seq,
			    k->trk.duplicated != dup ? "arrived twice" : k->trk.corrupted != bad ?
			    "has a sequence number out of range" : "arrived after a later one");
	}
	if (k->first_ns == 0)
		k->first_ns = c->rx_ns;
	k->last_ns = c->rx_ns;
	acker_message(&k->ack, c, f);
}

static void
consumer_after_read(struct conn *c)
{
	struct consumer *k = c->arg;
	acker_flush(&k->ack, c);
}

void
consumer_init(struct consumer *k, struct conn *c, const struct opts *o, size_t size, uint64_t n,
    struct hist *lat)
{
	memset(k, 0, sizeof(*k));
	k->c = c;
	k->size = size;
	k->lat = lat;
	tracker_init(&k->trk, n);
	acker_init(&k->ack, o->ack);
	c->arg = k;
	c->on_message = consumer_message;
	c->after_read = consumer_after_read;
}

void
consumer_free(struct consumer *k)
{
	tracker_free(&k->trk);
	acker_free(&k->ack);
}
