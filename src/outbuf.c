/* outbuf.c - output through one open evbuffer reservation at a time. */
#include <stdlib.h>
#include <string.h>

#include "eft/outbuf.h"

/* Reserve at least this much at once: a few hundred small MESSAGEs. */
#define OUTBUF_CHUNK (16 * 1024)

int
outbuf_init(struct outbuf *o)
{
	memset(o, 0, sizeof(*o));
	o->buf = evbuffer_new();
	o->scratch = evbuffer_new();
	if (o->buf == NULL || o->scratch == NULL) {
		outbuf_free(o);
		return -1;
	}
	return 0;
}

void
outbuf_free(struct outbuf *o)
{
	if (o->buf != NULL)
		evbuffer_free(o->buf);
	if (o->scratch != NULL)
		evbuffer_free(o->scratch);
	memset(o, 0, sizeof(*o));
}

int
outbuf_settle(struct outbuf *o)
{
	if (!o->open)
		return 0;
	o->open = false;
	if (o->used == 0)
		return 0; /* an unused reservation may simply be dropped */
	o->res.iov_len = o->used;
	o->used = 0;
	return evbuffer_commit_space(o->buf, &o->res, 1);
}

char *
outbuf_space(struct outbuf *o, size_t n)
{
	if (o->open && o->res.iov_len - o->used >= n)
		return (char *)o->res.iov_base + o->used;
	if (outbuf_settle(o) != 0)
		return NULL;
	size_t want = n > OUTBUF_CHUNK ? n : OUTBUF_CHUNK;
	if (evbuffer_reserve_space(o->buf, (ev_ssize_t)want, &o->res, 1) < 1)
		return NULL;
	o->open = true;
	return o->res.iov_base;
}

int
outbuf_add(struct outbuf *o, const void *data, size_t n)
{
	char *p = outbuf_space(o, n);
	if (p == NULL)
		return -1;
	memcpy(p, data, n);
	outbuf_wrote(o, n);
	return 0;
}

int
outbuf_add_with_reference(struct outbuf *o, size_t head_len, const void *data, size_t n,
    evbuffer_ref_cleanup_cb cleanup, void *arg)
{
	/* The reference's chain is the allocation that can fail: make it
	 * aside first.  Committing the head and moving chains allocate nothing. */
	if (evbuffer_add_reference(o->scratch, data, n, cleanup, arg) != 0)
		return -1;
	outbuf_wrote(o, head_len);
	/* Cannot fail: the reservation is ours and nothing touched buf since. */
	if (outbuf_settle(o) != 0 || evbuffer_add_buffer(o->buf, o->scratch) != 0)
		abort();
	return 0;
}
