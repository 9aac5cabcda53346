/* outbuf.h - a connection's output: an evbuffer written through one open
 * reservation, so that a burst of small frames costs one reserve/commit pair
 * instead of one per frame.  Anything that touches `buf` directly must call
 * outbuf_settle first. */
#ifndef EFT_OUTBUF_H
#define EFT_OUTBUF_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/buffer.h>

struct outbuf {
	struct evbuffer *buf;
	struct evbuffer *scratch;  /* where a body's reference is made before it joins buf */
	struct evbuffer_iovec res; /* the open reservation */
	size_t used;               /* bytes written into it so far */
	bool open;
	uint64_t drained;          /* bytes taken out of buf by writes: counted while the
	                              connection holds output (conn.c), the base of its
	                              stream positions */
};

int outbuf_init(struct outbuf *o);
void outbuf_free(struct outbuf *o);
/* Room for n contiguous bytes; write them, then outbuf_wrote(o, n).  NULL if out of memory. */
char *outbuf_space(struct outbuf *o, size_t n);
/* Hand what was written to the evbuffer. -1 if out of memory. */
int outbuf_settle(struct outbuf *o);
int outbuf_add(struct outbuf *o, const void *data, size_t n);
/* The head_len bytes just written at outbuf_space (not yet outbuf_wrote),
 * then n bytes of data by reference, as one piece: both or neither.
 * cleanup(data, n, arg) runs once the data is written or dropped; on failure
 * (-1, out of memory) it has not run and nothing was added. */
int outbuf_add_with_reference(struct outbuf *o, size_t head_len, const void *data, size_t n,
    evbuffer_ref_cleanup_cb cleanup, void *arg);

static inline void
outbuf_wrote(struct outbuf *o, size_t n)
{
	o->used += n;
}

static inline size_t
outbuf_length(const struct outbuf *o)
{
	return evbuffer_get_length(o->buf) + o->used;
}

#endif
