/* mode_rpc.c - request/reply through RabbitMQ-style temp-queues.
 *
 * Clients SEND requests with reply-to:/temp-queue/bench and a
 * correlation-id and never subscribe: the broker makes each client a
 * private reply queue and subscribes it.  A built-in responder takes the
 * requests from a service queue and SENDs each body back to the request's
 * reply-to value.  Requests are numbered 0..N-1 across all clients; a table
 * indexed by that number (allocated once) says who sent each and when, so a
 * reply is matched and checked without searching. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "payload.h"
#include "report.h"
#include "session.h"

#define MAX_COMPLAINTS 5

enum req_state { REQ_UNSENT, REQ_OUTSTANDING, REQ_ANSWERED };

struct rpc;

struct rpc_client {
	struct rpc *rpc;
	struct conn *c;
	uint16_t index;
	int inflight;
	uint64_t last;      /* highest request answered so far, for the order check */
	bool any;
};

struct rpc {
	const struct opts *o;
	size_t size;
	struct rpc_client *clients;
	int nclients;
	struct conn *responder;
	struct sender req;
	bool have_req;
	struct acker resp_ack;
	uint64_t *sent_ns;  /* per request: when it was built and written */
	uint16_t *owner;    /* per request: the client that sent it */
	uint8_t *state;     /* per request: enum req_state */
	uint64_t next;      /* the next request number to send */
	uint64_t answered, good, requests_seen;
	uint64_t duplicated, reordered, corrupted;
	uint64_t last_reply_ns;
	struct hist lat;
	char reply_to[128]; /* the first request's reply-to as the responder saw it */
	int complaints;
};

static void
complain(struct rpc *rp, struct conn *c, const char *what, struct hval v)
{
	if (rp->complaints++ >= MAX_COMPLAINTS)
		return;
	char text[96];
	frame_unescape(text, sizeof(text), v);
	report_warn("%s connection: %s%s%s%s", c->name, what, v.p ? " '" : "", text, v.p ? "'" : "");
}

static int
parse_hex(struct hval v, uint64_t *out)
{
	uint64_t n = 0;
	if (v.p == NULL || v.len == 0 || v.len > 16)
		return -1;
	for (size_t i = 0; i < v.len; i++) {
		char ch = v.p[i];
		unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0') :
		    ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10) : 16;
		if (d == 16)
			return -1;
		n = n << 4 | d;
	}
	*out = n;
	return 0;
}

/* ---- clients ---- */

static void
client_refill(struct conn *c)
{
	struct rpc_client *cl = c->arg;
	struct rpc *rp = cl->rpc;
	uint64_t now = 0;
	while (cl->inflight < rp->o->inflight && rp->next < rp->o->count) {
		if (now == 0)
			now = now_ns();
		uint64_t idx = rp->next++;
		char corr[48];
		int n = snprintf(corr, sizeof(corr), "correlation-id:%" PRIx64 "\n", idx);
		rp->sent_ns[idx] = now;
		rp->owner[idx] = cl->index;
		rp->state[idx] = REQ_OUTSTANDING;
		cl->inflight++;
		sender_put(&rp->req, &c->out, corr, (size_t)n, idx, now);
	}
}

static void
client_message(struct conn *c, const struct frame *f)
{
	struct rpc_client *cl = c->arg;
	struct rpc *rp = cl->rpc;
	uint64_t idx, seq, sent;
	bool bad = false;

	rp->last_reply_ns = c->rx_ns;
	if (!frame_hval_is(f->h[HDR_SUBSCRIPTION], RPC_TEMP_QUEUE)) {
		complain(rp, c, "reply arrived on a subscription other than " RPC_TEMP_QUEUE ":",
		    f->h[HDR_SUBSCRIPTION]);
		bad = true;
	}
	if (parse_hex(f->h[HDR_CORRELATION_ID], &idx) != 0 || idx >= rp->o->count ||
	    rp->state[idx] == REQ_UNSENT || rp->owner[idx] != cl->index) {
		complain(rp, c, "reply whose correlation-id names no request of this connection:",
		    f->h[HDR_CORRELATION_ID]);
		rp->corrupted++;
		return;
	}
	if (rp->state[idx] == REQ_ANSWERED) {
		complain(rp, c, "second reply for correlation-id", f->h[HDR_CORRELATION_ID]);
		rp->duplicated++;
		return;
	}
	rp->state[idx] = REQ_ANSWERED;
	rp->answered++;
	cl->inflight--;
	if (payload_read(f->body, f->body_len, rp->size, &seq, &sent) != 0 || seq != idx ||
	    sent != rp->sent_ns[idx]) {
		complain(rp, c, "reply body differs from its request's, correlation-id",
		    f->h[HDR_CORRELATION_ID]);
		bad = true;
	}
	if (bad) {
		rp->corrupted++;
	} else {
		rp->good++;
		hist_record(&rp->lat, c->rx_ns - rp->sent_ns[idx]);
	}
	/* One responder and FIFO queues: a client's replies come in order. */
	if (cl->any && idx < cl->last) {
		rp->reordered++;
	} else {
		cl->last = idx;
		cl->any = true;
	}
}

/* ---- responder ---- */

static void
responder_message(struct conn *c, const struct frame *f)
{
	struct rpc *rp = c->arg;
	struct hval reply_to = f->h[HDR_REPLY_TO], corr = f->h[HDR_CORRELATION_ID];
	if (reply_to.p == NULL) {
		loop_fail(c->loop, c, "a request arrived without its reply-to header");
		return;
	}
	if (corr.p == NULL) {
		loop_fail(c->loop, c, "a request arrived without its correlation-id header");
		return;
	}
	if (rp->requests_seen++ == 0)
		frame_unescape(rp->reply_to, sizeof(rp->reply_to), reply_to);
	struct buf *b = &c->out;
	frame_begin(b, "SEND");
	frame_header_raw(b, "destination", reply_to);
	frame_header_raw(b, "correlation-id", corr);
	if (rp->o->persistent)
		frame_header(b, "persistent", "true");
	frame_header_u64(b, "content-length", f->body_len);
	frame_finish(b, f->body, f->body_len);
	acker_message(&rp->resp_ack, c, f);
}

static void
responder_after_read(struct conn *c)
{
	struct rpc *rp = c->arg;
	acker_flush(&rp->resp_ack, c);
}

/* ---- the run ---- */

static bool
all_answered(void *arg)
{
	struct rpc *rp = arg;
	return rp->answered >= rp->o->count;
}

static void
progress(void *arg)
{
	struct rpc *rp = arg;
	report_progress("rpc %zu B: replies %" PRIu64 "/%" PRIu64, rp->size, rp->answered,
	    rp->o->count);
}

/* An ERROR on the responder right after it replied usually means the
 * broker has no temp-queues: say so. */
static void
explain_failure(struct rpc *rp, struct loop *l)
{
	if (l->status != LOOP_FAILED || l->failed_conn != rp->responder || rp->requests_seen == 0)
		return;
	size_t n = strlen(l->err);
	if (strcmp(rp->reply_to, RPC_TEMP_QUEUE) == 0)
		snprintf(l->err + n, sizeof(l->err) - n, " (the broker passed reply-to:%s through "
		    "unchanged and refused the reply sent there: it does not seem to support "
		    "reply-to temp-queues)", RPC_TEMP_QUEUE);
	else
		snprintf(l->err + n, sizeof(l->err) - n, " (after the responder replied to "
		    "reply-to '%s')", rp->reply_to);
}

static void
measure(struct rpc *rp, struct loop *l, const char *service, struct result *r)
{
	const struct opts *o = rp->o;

	session_subscribe(rp->responder, o, service, "0", o->ack, RECEIPT_SUBSCRIBED);
	if (o->rpc_subscribe)
		for (int i = 0; i < rp->nclients; i++)
			session_subscribe(rp->clients[i].c, o, RPC_TEMP_QUEUE, RPC_TEMP_QUEUE,
			    ACK_AUTO, RECEIPT_SUBSCRIBED);
	if (!session_wait_receipts(l))
		return;

	uint64_t t0 = now_ns();
	for (int i = 0; i < rp->nclients; i++)
		rp->clients[i].c->refill = client_refill;
	enum loop_status st = loop_run(l, all_answered, rp);
	explain_failure(rp, l);

	r->total_s = (double)((rp->last_reply_ns ? rp->last_reply_ns : now_ns()) - t0) / 1e9;
	r->delivered = rp->good;
	r->duplicated = rp->duplicated;
	r->reordered = rp->reordered;
	r->corrupted = rp->corrupted;
	if (st == LOOP_OK || st == LOOP_IDLE)
		for (uint64_t i = 0; i < rp->next; i++)
			r->lost += rp->state[i] == REQ_OUTSTANDING;
	r->complete = st == LOOP_OK;
	result_latency(r, &rp->lat);
	result_rates(r);
}

int
mode_rpc(const struct opts *o, size_t size, int row, struct result *r)
{
	struct rpc rp = { .o = o, .size = size, .nclients = o->clients };
	struct loop l;
	char service[256], name[40];

	loop_init(&l, o->timeout_ns, o->deadline_ns);
	if (o->progress)
		loop_set_progress(&l, progress, &rp);
	hist_init(&rp.lat);
	acker_init(&rp.resp_ack, o->ack);
	rp.sent_ns = xcalloc((size_t)o->count, sizeof(*rp.sent_ns));
	rp.owner = xcalloc((size_t)o->count, sizeof(*rp.owner));
	rp.state = xcalloc((size_t)o->count, sizeof(*rp.state));
	rp.clients = xcalloc((size_t)rp.nclients, sizeof(*rp.clients));
	bench_dest_name(service, sizeof(service), o, "/queue/eft-bench-rpc", size, row);
	sender_init(&rp.req, o, service, size, "reply-to:" RPC_TEMP_QUEUE);
	r->conns = rp.nclients + 1;

	rp.responder = session_open_consumer(&l, o, "responder");
	bool opened = rp.responder != NULL;
	if (opened) {
		rp.responder->arg = &rp;
		rp.responder->on_message = responder_message;
		rp.responder->after_read = responder_after_read;
	}
	for (int i = 0; i < rp.nclients && opened; i++) {
		struct rpc_client *cl = &rp.clients[i];
		if (rp.nclients == 1)
			snprintf(name, sizeof(name), "client");
		else
			snprintf(name, sizeof(name), "client %d", i + 1);
		cl->c = session_open(&l, o, name);
		opened = cl->c != NULL;
		if (opened) {
			cl->rpc = &rp;
			cl->index = (uint16_t)i;
			cl->c->arg = cl;
			cl->c->on_message = client_message;
		}
	}
	if (opened && session_wait_connected(&l)) {
		session_note_server(&l, r);
		measure(&rp, &l, service, r);
	}
	session_note_failure(&l, r);
	session_close_all(&l);
	session_note_failure(&l, r);

	sender_free(&rp.req);
	acker_free(&rp.resp_ack);
	hist_free(&rp.lat);
	free(rp.sent_ns);
	free(rp.owner);
	free(rp.state);
	free(rp.clients);
	loop_free(&l);
	return result_ok(r) ? 0 : -1;
}
