/* outbuf.c - output through one open evbuffer reservation at a time. */
#include <string.h>

#include "eft/outbuf.h"

/* Reserve at least this much at once: a few hundred small MESSAGEs. */
#define OUTBUF_CHUNK (16 * 1024)

int
outbuf_init(struct outbuf *o)
{
	memset(o, 0, sizeof(*o));
	o->buf = evbuffer_new();
	return o->buf ? 0 : -1;
}

void
outbuf_free(struct outbuf *o)
{
	if (o->buf != NULL)
		evbuffer_free(o->buf);
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
outbuf_add_reference(struct outbuf *o, const void *data, size_t n,
    evbuffer_ref_cleanup_cb cleanup, void *arg)
{
	if (outbuf_settle(o) != 0)
		return -1;
	return evbuffer_add_reference(o->buf, data, n, cleanup, arg);
}
