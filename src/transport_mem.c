/* transport_mem.c - the in-memory transport for tests and fuzzers (see
 * transport_mem.h).  Callbacks run only from transport_mem_feed, _poll,
 * _end and _set_window, never behind the test's back. */
#include <stdint.h>
#include <stdlib.h>

#include <event2/buffer.h>

#include "eft/transport.h"
#include "eft/transport_mem.h"

struct mem {
	struct transport t;     /* first: a struct mem is a struct transport */
	struct evbuffer *in;    /* fed, not yet read */
	struct evbuffer *out;   /* written, not yet taken by the test */
	size_t window;          /* bytes the connection may still write */
	bool ended;             /* the peer's stream has ended */
	bool shut;
	bool closed;            /* the connection freed it */
};

static ssize_t
mem_read(struct transport *t, void *buf, size_t len)
{
	struct mem *m = (struct mem *)t;
	size_t have = evbuffer_get_length(m->in);
	if (have == 0)
		return m->ended ? 0 : TRANSPORT_AGAIN;
	return evbuffer_remove(m->in, buf, len);
}

static ssize_t
mem_write(struct transport *t, struct evbuffer *out)
{
	struct mem *m = (struct mem *)t;
	size_t n = evbuffer_get_length(out);
	if (n > m->window)
		n = m->window;
	if (n == 0)
		return 0;
	/* Moves whole chunks where it can: referenced bodies stay referenced,
	 * as they would until the kernel took them. */
	int moved = evbuffer_remove_buffer(out, m->out, n);
	if (moved < 0) {
		transport_fail(t, "out of memory");
		return TRANSPORT_ERROR;
	}
	if (m->window != SIZE_MAX)
		m->window -= (size_t)moved;
	return moved;
}

static void
mem_want(struct transport *t, bool read, bool write)
{
	(void)t;
	(void)read;
	(void)write;
}

static void
mem_shutdown(struct transport *t)
{
	((struct mem *)t)->shut = true;
}

static void
mem_free(struct transport *t)
{
	struct mem *m = (struct mem *)t;
	m->closed = true;
	t->want_read = t->want_write = false;
}

static const struct transport_ops mem_ops = {
	.kind = "mem",
	.read = mem_read,
	.write = mem_write,
	.want = mem_want,
	.shutdown = mem_shutdown,
	.free = mem_free,
};

struct transport *
transport_mem_new(void)
{
	struct mem *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	m->t.ops = &mem_ops;
	m->t.established = true;
	m->window = SIZE_MAX;
	m->in = evbuffer_new();
	m->out = evbuffer_new();
	if (m->in == NULL || m->out == NULL) {
		transport_mem_destroy(&m->t);
		return NULL;
	}
	return &m->t;
}

void
transport_mem_destroy(struct transport *t)
{
	struct mem *m = (struct mem *)t;
	if (m == NULL)
		return;
	if (m->in)
		evbuffer_free(m->in);
	if (m->out)
		evbuffer_free(m->out);
	free(m);
}

void
transport_mem_poll(struct transport *t)
{
	struct mem *m = (struct mem *)t;
	/* Like a level-triggered event: read until the connection stops wanting
	 * to, or takes nothing more.  m outlives the connection, so it may be
	 * looked at after the callback whatever the callback did. */
	while (!m->closed && t->want_read) {
		size_t before = evbuffer_get_length(m->in);
		if (before == 0 && !m->ended)
			break;
		t->on_readable(t->arg);
		if (before == 0 || evbuffer_get_length(m->in) == before)
			break;
	}
}

void
transport_mem_feed(struct transport *t, const void *data, size_t n)
{
	struct mem *m = (struct mem *)t;
	if (m->closed || evbuffer_add(m->in, data, n) != 0)
		return;
	transport_mem_poll(t);
}

void
transport_mem_end(struct transport *t)
{
	((struct mem *)t)->ended = true;
	transport_mem_poll(t);
}

size_t
transport_mem_unread(const struct transport *t)
{
	return evbuffer_get_length(((const struct mem *)t)->in);
}

struct evbuffer *
transport_mem_output(struct transport *t)
{
	return ((struct mem *)t)->out;
}

void
transport_mem_set_window(struct transport *t, size_t window)
{
	struct mem *m = (struct mem *)t;
	m->window = window;
	if (!m->closed && window > 0 && t->want_write)
		t->on_writable(t->arg);
}

bool
transport_mem_shut(const struct transport *t)
{
	return ((const struct mem *)t)->shut;
}

bool
transport_mem_closed(const struct transport *t)
{
	return ((const struct mem *)t)->closed;
}
