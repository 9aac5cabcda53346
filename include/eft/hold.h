/* hold.h - output that waits for a backend to keep a promise.
 *
 * A RECEIPT for a frame whose effects the journal or JetStream must keep
 * may leave only once the backend has kept them.  Each such RECEIPT is a
 * hold: where it sits in the connection's output (at, end: positions in
 * the stream of bytes the connection has ever queued) and the backend's
 * number it waits for (seq).  Output before the first hold may be written;
 * the hold and everything after it waits until the backend's "kept through"
 * number reaches the hold's seq.  Seqs only grow along a connection's
 * output, so holds are released from the front.
 *
 * A backend refusal (the journal cannot be written, the cluster is down)
 * cuts the RECEIPTs of every hold not kept out of the output, so that the
 * ERROR that follows reaches the client right after the RECEIPTs for what
 * was kept.
 *
 * Plain data: no connection, no event loop; conn.c owns one per connection. */
#ifndef EFT_HOLD_H
#define EFT_HOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evbuffer;

struct hold {
	uint64_t at, end;  /* the RECEIPT's bytes in the output stream */
	uint64_t seq;      /* released when the backend has kept this much */
};

struct holds {
	struct hold *ring;
	uint32_t cap, head, n;
};

/* Room for one more hold, so that hold_add cannot fail: -1 if out of memory. */
int hold_reserve(struct holds *h);
/* A hold for the bytes [at, end) until seq is kept.  Call hold_reserve first. */
void hold_add(struct holds *h, uint64_t at, uint64_t end, uint64_t seq);
/* Drop the holds whose seq is at most kept; true if any was dropped. */
bool hold_release(struct holds *h, uint64_t kept);
/* The stream position output may be written up to; UINT64_MAX if nothing waits. */
static inline uint64_t
hold_limit(const struct holds *h)
{
	return h->n > 0 ? h->ring[h->head].at : UINT64_MAX;
}
/* The seq the first hold waits for; UINT64_MAX if none. */
static inline uint64_t
hold_first_seq(const struct holds *h)
{
	return h->n > 0 ? h->ring[h->head].seq : UINT64_MAX;
}
/* Cut the bytes of every hold out of buf, whose first byte is stream
 * position base (none of them written yet), and drop the holds.  -1 if out
 * of memory: buf is then broken, and the caller drops the connection. */
int hold_cut(struct holds *h, struct evbuffer *buf, uint64_t base);
void hold_free(struct holds *h);

#endif
