/* mode_sendrecv.c - send N messages to a fresh queue, then receive them, on
 * one connection: the two halves of a broker's throughput, timed apart.
 * With --consumer-port (another node of a cluster) the receiving half has a
 * connection of its own there.
 *
 * Send time ends at the RECEIPT for the last SEND (the broker has taken all
 * of them), not when the last byte left eft-bench; receive time runs from
 * SUBSCRIBE to the Nth MESSAGE.  With --receipt-window every SEND has its
 * RECEIPT, and send time still ends at the last one. */
#include <inttypes.h>
#include <stdio.h>

#include "report.h"
#include "session.h"

/* Keep 128-256 KB of frames queued: writes big enough to cost little per
 * message, small enough that the broker starts on the first while the next
 * is built (measured: the best of 64 KB to 8 MB on loopback). */
#define SEND_LOW (128u << 10)
#define SEND_HIGH (256u << 10)

struct sendrecv {
	const struct opts *o;
	size_t size;
	struct producer prod;
	struct consumer cons;
	bool sending, receiving;
};

static bool
sent_all(void *arg)
{
	struct sendrecv *s = arg;
	return producer_confirmed(&s->prod);
}

static bool
received_all(void *arg)
{
	struct sendrecv *s = arg;
	return consumer_done(&s->cons);
}

static void
progress(void *arg)
{
	struct sendrecv *s = arg;
	if (s->receiving)
		report_progress("sendrecv %zu B: received %" PRIu64 "/%" PRIu64, s->size,
		    s->cons.trk.unique, s->o->count);
	else if (s->sending)
		report_progress("sendrecv %zu B: sent %" PRIu64 "/%" PRIu64, s->size,
		    s->prod.sent, s->o->count);
}

static void
measure(struct sendrecv *s, struct loop *l, struct conn *c, struct conn *rc, const char *dest,
    struct result *r)
{
	const struct opts *o = s->o;

	producer_init(&s->prod, c, o, dest, s->size, o->count, 0, SEND_LOW, SEND_HIGH);
	s->sending = true;
	uint64_t t0 = now_ns();
	producer_start(&s->prod, t0);
	if (loop_run(l, sent_all, s) != LOOP_OK) {
		producer_note_failure(&s->prod);
		r->total_s = (double)(now_ns() - t0) / 1e9;
		return;
	}
	r->send_s = (double)(c->receipt_ns - t0) / 1e9;

	/* From here on a RECEIPT for a SEND is one too many: conn.c fails it. */
	c->refill = NULL;
	c->on_receipt = NULL;
	consumer_init(&s->cons, rc, o, s->size, o->count, NULL);
	s->receiving = true;
	session_subscribe(rc, o, dest, "0", o->ack, NULL);
	uint64_t t1 = now_ns();
	enum loop_status st = loop_run(l, received_all, s);
	uint64_t end = s->cons.last_ns ? s->cons.last_ns : now_ns();
	r->recv_s = (double)(end - t1) / 1e9;
	r->total_s = r->send_s + r->recv_s;

	const struct tracker *t = &s->cons.trk;
	r->delivered = t->unique;
	r->duplicated = t->duplicated;
	r->reordered = t->reordered;
	r->corrupted = t->corrupted;
	/* Every message was confirmed sent: missing ones are lost, unless the
	 * --duration limit cut the wait short. */
	if (st == LOOP_OK || st == LOOP_IDLE)
		r->lost = tracker_lost(t);
	r->complete = st == LOOP_OK;
	result_rates(r);
}

int
mode_sendrecv(const struct opts *o, size_t size, int row, struct result *r)
{
	struct sendrecv s = { .o = o, .size = size };
	struct loop l;
	char dest[256];

	loop_init(&l, o->timeout_ns, o->deadline_ns);
	if (o->progress)
		loop_set_progress(&l, progress, &s);
	bench_dest_name(dest, sizeof(dest), o, "/queue/eft-bench", size, row);
	r->conns = session_split_ports(o) ? 2 : 1;
	struct conn *c = session_open(&l, o, "sendrecv"), *rc = c;
	if (c != NULL && r->conns == 2)
		rc = session_open_consumer(&l, o, "receiver");
	if (c != NULL && rc != NULL && session_wait_connected(&l)) {
		session_note_server(&l, r);
		measure(&s, &l, c, rc, dest, r);
	}
	session_note_failure(&l, r);
	session_close_all(&l);
	session_note_failure(&l, r);
	if (s.sending)
		producer_free(&s.prod);
	if (s.receiving)
		consumer_free(&s.cons);
	loop_free(&l);
	return result_ok(r) ? 0 : -1;
}
