/* session.h - STOMP client steps on top of conn.h, shared by the modes:
 * connecting, subscribing, producing the numbered messages, receiving and
 * checking them, acknowledging, and disconnecting politely. */
#ifndef EFT_BENCH_SESSION_H
#define EFT_BENCH_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "buf.h"
#include "conn.h"
#include "stats.h"

#define RECEIPT_SUBSCRIBED "eft-bench-subscribed"
#define RECEIPT_SENT "eft-bench-sent"
#define RECEIPT_BYE "eft-bench-bye"

/* Open a connection and queue CONNECT; session_wait_connected finishes it.
 * NULL after loop_fail. */
struct conn *session_open(struct loop *l, const struct opts *o, const char *name);
/* The same for a consumer (or rpc's responder): at --consumer-port, if given
 * (another node of a cluster). */
struct conn *session_open_consumer(struct loop *l, const struct opts *o, const char *name);
/* Do consumers go to another port than producers? */
bool session_split_ports(const struct opts *o);
/* Serve the loop until every connection has its CONNECTED; false on failure. */
bool session_wait_connected(struct loop *l);
/* Serve the loop until every connection expecting a receipt has it. */
bool session_wait_receipts(struct loop *l);
/* Queue SUBSCRIBE with id, ack mode, the --sub-header extras, and a receipt
 * when receipt is not NULL. */
void session_subscribe(struct conn *c, const struct opts *o, const char *dest, const char *id,
    enum ack_mode ack, const char *receipt);
/* DISCONNECT (with a receipt) on every connection and wait, bounded, for the
 * broker to confirm; after a failure just close.  Then the loop is empty. */
void session_close_all(struct loop *l);

struct result;
/* After a run: the loop's failure, if any, becomes r's error (and
 * r->unreached when the broker was never reached). */
void session_note_failure(const struct loop *l, struct result *r);
/* The CONNECTED server header of the first connection, for the report. */
void session_note_server(const struct loop *l, struct result *r);

/* A SEND frame prefix made once per run, so each message costs a memcpy. */
struct sender {
	struct buf head;   /* "SEND\ndestination:...\n[extra]content-length:N\n" */
	size_t size;
};

/* extra_header ("name:value", or NULL) goes into every SEND, and so do
 * o's --send-header lines and persistent:true with --persistent. */
void sender_init(struct sender *s, const struct opts *o, const char *dest, size_t size,
    const char *extra_header);
void sender_free(struct sender *s);
/* Append SEND number seq: prefix, the already formatted header lines in
 * extra (may be empty), blank line, payload, NUL. */
void sender_put(const struct sender *s, struct buf *out, const char *extra, size_t extra_len,
    uint64_t seq, uint64_t sent_ns);

/* Sends messages 0..n-1 from a connection's refill hook; the last one asks
 * for a RECEIPT, so "sent" means the broker has taken every message.  With a
 * receipt window W (--receipt-window), every SEND asks for a RECEIPT
 * (receipt-id eft-bench-<seq>), at most W are outstanding, and they must
 * come back in order, each exactly once; "sent" is then the last one. */
struct producer {
	struct conn *c;
	struct sender snd;
	uint64_t n, sent;
	uint64_t window;   /* receipts outstanding at most; 0 = only the last SEND asks */
	uint64_t acked;    /* receipts received (window > 0) */
	uint64_t t0;       /* when sending started */
	double rate;       /* messages/s; 0 = as fast as the socket takes them */
	size_t low, high;  /* refill when pending output drops below low, up to high */
};

/* --persistent and --receipt-window come from o. */
void producer_init(struct producer *p, struct conn *c, const struct opts *o, const char *dest,
    size_t size, uint64_t n, double rate, size_t low, size_t high);
void producer_free(struct producer *p);
/* Start sending at t0 (refills from the next loop turn on). */
void producer_start(struct producer *p, uint64_t t0);
static inline bool
producer_confirmed(const struct producer *p)
{
	return p->c->receipt_got;
}
/* After a failed loop_run: a --timeout while receipts were outstanding is
 * reported as the receipt that did not come. */
void producer_note_failure(const struct producer *p);

/* Acknowledges MESSAGEs as the ack mode asks: client-individual ACKs each,
 * client sends one cumulative ACK for the newest message of each read. */
struct acker {
	enum ack_mode mode;
	struct buf pending;
	bool has;
};

void acker_init(struct acker *a, enum ack_mode mode);
void acker_free(struct acker *a);
void acker_message(struct acker *a, struct conn *c, const struct frame *f);
void acker_flush(struct acker *a, struct conn *c);

/* Receives and checks messages 0..n-1 on one subscription. */
struct consumer {
	struct conn *c;
	size_t size;
	struct tracker trk;
	struct hist *lat;  /* records receive time - send time; NULL = not measured */
	struct acker ack;
	uint64_t first_ns, last_ns;
	int complaints;    /* problems printed so far (a few are enough) */
};

/* Take over c's MESSAGE and after-read hooks. */
void consumer_init(struct consumer *k, struct conn *c, const struct opts *o, size_t size,
    uint64_t n, struct hist *lat);
void consumer_free(struct consumer *k);
/* Done when every message has arrived; a corrupted arrival stands for one
 * message (its sequence number cannot be trusted), so a broker that mangles
 * a body is reported at once rather than after --timeout. */
static inline bool
consumer_done(const struct consumer *k)
{
	return k->trk.unique + k->trk.corrupted >= k->trk.n;
}

#endif
