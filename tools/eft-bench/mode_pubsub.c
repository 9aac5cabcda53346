/* mode_pubsub.c - the stream and fanout modes: producer and consumers at
 * the same time.  stream is one consumer on a fresh queue; fanout is K
 * subscribers on a fresh topic.  Everything else is shared: subscribers
 * subscribe (and wait for the RECEIPT) before the first SEND, the last SEND
 * asks for a RECEIPT, and every delivery gives a latency from the send time
 * carried in its body. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "report.h"
#include "session.h"

/* Frames are built only when the previous batch has been written, at most
 * 64 KB at a time, so a message waits in eft-bench for one write at most
 * and its time stamp is honest. */
#define FLOW_LOW 1
#define FLOW_HIGH (64u << 10)

struct pubsub {
	const struct opts *o;
	size_t size;
	int nsubs;
	struct producer prod;
	bool have_prod;
	struct consumer *cons;
	int ncons;               /* consumers initialised */
	struct hist lat;         /* every delivery, all subscribers */
};

static bool
all_done(void *arg)
{
	struct pubsub *ps = arg;
	if (!producer_confirmed(&ps->prod))
		return false;
	for (int i = 0; i < ps->ncons; i++)
		if (!consumer_done(&ps->cons[i]))
			return false;
	return true;
}

static uint64_t
delivered(const struct pubsub *ps)
{
	uint64_t n = 0;
	for (int i = 0; i < ps->ncons; i++)
		n += ps->cons[i].trk.unique;
	return n;
}

static void
progress(void *arg)
{
	struct pubsub *ps = arg;
	report_progress("%s %zu B: sent %" PRIu64 "/%" PRIu64 ", delivered %" PRIu64 "/%" PRIu64,
	    ps->o->mode_name, ps->size, ps->prod.sent, ps->o->count, delivered(ps),
	    ps->o->count * (uint64_t)ps->nsubs);
}

#define WILDCARD_FORMS 6

/* --wildcards: subscriber i's pattern, matching topic T's messages, which go
 * to T.m; each subscriber's is a different one. */
static void
matching_pattern(char *out, size_t outlen, const char *topic, int i)
{
	static const char *const forms[] = { "%s.*", "%s.#", "%s.>", "%s.m.#", "%s.#.m", "%s.*.#" };
	snprintf(out, outlen, forms[i % WILDCARD_FORMS], topic);
}

/* --wildcards: W - K patterns that match nothing, on filler connections
 * (up to 1000 each, eftd's default max-subscriptions), each acknowledged. */
#define WILDCARDS_PER_CONN 1000

static bool
subscribe_fillers(struct loop *l, const struct opts *o, const char *topic)
{
	int fillers = o->wildcards > o->subscribers ? o->wildcards - o->subscribers : 0;
	char pattern[300], id[24], name[40];
	for (int done = 0, k = 0; done < fillers; k++) {
		snprintf(name, sizeof(name), "wildcard filler %d", k + 1);
		struct conn *c = session_open(l, o, name);
		if (c == NULL || !session_wait_connected(l))
			return false;
		for (int j = 0; j < WILDCARDS_PER_CONN && done < fillers; j++, done++) {
			snprintf(pattern, sizeof(pattern), "%s-f%d.*", topic, done);
			snprintf(id, sizeof(id), "f%d", done);
			session_subscribe(c, o, pattern, id, ACK_AUTO,
			    j + 1 == WILDCARDS_PER_CONN || done + 1 == fillers ? RECEIPT_SUBSCRIBED : NULL);
		}
		if (!session_wait_receipts(l))
			return false;
	}
	return true;
}

static void
measure(struct pubsub *ps, struct loop *l, struct conn **subs, struct conn *pc, const char *dest,
    struct result *r)
{
	const struct opts *o = ps->o;
	char topic[300];
	snprintf(topic, sizeof(topic), "%s%s", dest, o->wildcards ? ".m" : "");

	for (int i = 0; i < ps->nsubs; i++) {
		char pattern[300];
		consumer_init(&ps->cons[i], subs[i], o, ps->size, o->count, &ps->lat);
		ps->ncons++;
		if (o->wildcards)
			matching_pattern(pattern, sizeof(pattern), dest, i);
		session_subscribe(subs[i], o, o->wildcards ? pattern : dest, "0", o->ack,
		    RECEIPT_SUBSCRIBED);
	}
	if (!session_wait_receipts(l))
		return;
	if (o->wildcards && !subscribe_fillers(l, o, dest))
		return;
	dest = topic;

	producer_init(&ps->prod, pc, o, dest, ps->size, o->count, o->rate, FLOW_LOW, FLOW_HIGH);
	ps->have_prod = true;
	uint64_t t0 = now_ns();
	producer_start(&ps->prod, t0);
	enum loop_status st = loop_run(l, all_done, ps);
	if (st != LOOP_OK)
		producer_note_failure(&ps->prod);

	uint64_t end = 0;
	for (int i = 0; i < ps->ncons; i++) {
		const struct consumer *k = &ps->cons[i];
		if (k->last_ns > end)
			end = k->last_ns;
		r->duplicated += k->trk.duplicated;
		r->reordered += k->trk.reordered;
		r->corrupted += k->trk.corrupted;
		/* Missing messages count as lost when the broker confirmed
		 * taking them and the run was not cut short by --duration. */
		if ((st == LOOP_OK || st == LOOP_IDLE) && producer_confirmed(&ps->prod))
			r->lost += tracker_lost(&k->trk);
	}
	if (producer_confirmed(&ps->prod))
		r->send_s = (double)(pc->receipt_ns - t0) / 1e9;
	r->total_s = (double)((end ? end : now_ns()) - t0) / 1e9;
	r->delivered = delivered(ps);
	r->complete = st == LOOP_OK;
	result_latency(r, &ps->lat);
	result_rates(r);
}

static int
pubsub_run(const struct opts *o, size_t size, int row, struct result *r, bool fanout)
{
	struct pubsub ps = { .o = o, .size = size, .nsubs = fanout ? o->subscribers : 1 };
	struct loop l;
	char dest[256], name[40];

	loop_init(&l, o->timeout_ns, o->deadline_ns);
	if (o->progress)
		loop_set_progress(&l, progress, &ps);
	hist_init(&ps.lat);
	ps.cons = xcalloc((size_t)ps.nsubs, sizeof(*ps.cons));
	bench_dest_name(dest, sizeof(dest), o, fanout ? "/topic/eft-bench" : "/queue/eft-bench",
	    size, row);
	r->conns = ps.nsubs + 1;

	struct conn **subs = xcalloc((size_t)ps.nsubs, sizeof(*subs));
	struct conn *pc = NULL;
	bool opened = true;
	for (int i = 0; i < ps.nsubs && opened; i++) {
		if (fanout)
			snprintf(name, sizeof(name), "subscriber %d", i + 1);
		else
			snprintf(name, sizeof(name), "consumer");
		subs[i] = session_open_consumer(&l, o, name);
		opened = subs[i] != NULL;
	}
	if (opened)
		pc = session_open(&l, o, "producer");
	if (pc != NULL && session_wait_connected(&l)) {
		session_note_server(&l, r);
		measure(&ps, &l, subs, pc, dest, r);
	}
	session_note_failure(&l, r);
	session_close_all(&l);
	session_note_failure(&l, r);

	if (ps.have_prod)
		producer_free(&ps.prod);
	for (int i = 0; i < ps.ncons; i++)
		consumer_free(&ps.cons[i]);
	free(ps.cons);
	free(subs);
	hist_free(&ps.lat);
	loop_free(&l);
	return result_ok(r) ? 0 : -1;
}

int
mode_stream(const struct opts *o, size_t size, int row, struct result *r)
{
	return pubsub_run(o, size, row, r, false);
}

int
mode_fanout(const struct opts *o, size_t size, int row, struct result *r)
{
	return pubsub_run(o, size, row, r, true);
}
