/* transport_tcp.c - plain TCP: read(2) and writev(2) on a non-blocking
 * socket, with one persistent libevent event each way. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "eft/transport.h"

struct tcp {
	struct transport t;   /* first: a struct tcp is a struct transport */
	int fd;
	struct event *rd, *wr;
};

static void
tcp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct transport *t = arg;
	t->on_readable(t->arg);
}

static void
tcp_write_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct transport *t = arg;
	t->on_writable(t->arg);
}

static ssize_t
tcp_read(struct transport *t, void *buf, size_t len)
{
	struct tcp *tcp = (struct tcp *)t;
	ssize_t n = read(tcp->fd, buf, len);
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return TRANSPORT_AGAIN;
	transport_fail(t, "%s", strerror(errno));
	return TRANSPORT_ERROR;
}

static ssize_t
tcp_write(struct transport *t, struct evbuffer *out)
{
	struct tcp *tcp = (struct tcp *)t;
	ssize_t total = 0;
	/* evbuffer_write sends a bounded number of chunks per writev. */
	while (evbuffer_get_length(out) > 0) {
		int n = evbuffer_write(out, tcp->fd);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			transport_fail(t, "%s", strerror(errno));
			return TRANSPORT_ERROR;
		}
		if (n == 0)
			break;
		total += n;
	}
	return total;
}

static void
tcp_want(struct transport *t, bool read, bool write)
{
	struct tcp *tcp = (struct tcp *)t;
	if (read)
		event_add(tcp->rd, NULL);
	else
		event_del(tcp->rd);
	if (write)
		event_add(tcp->wr, NULL);
	else
		event_del(tcp->wr);
}

static void
tcp_shutdown(struct transport *t)
{
	struct tcp *tcp = (struct tcp *)t;
	(void)shutdown(tcp->fd, SHUT_WR); /* a peer already gone makes this fail: fine */
}

static void
tcp_free(struct transport *t)
{
	struct tcp *tcp = (struct tcp *)t;
	if (tcp->rd)
		event_free(tcp->rd);
	if (tcp->wr)
		event_free(tcp->wr);
	evutil_closesocket(tcp->fd);
	free(tcp);
}

static const struct transport_ops tcp_ops = {
	.kind = "tcp",
	.read = tcp_read,
	.write = tcp_write,
	.want = tcp_want,
	.shutdown = tcp_shutdown,
	.free = tcp_free,
};

struct transport *
transport_tcp_new(struct event_base *base, int fd)
{
	struct tcp *tcp = calloc(1, sizeof(*tcp));
	if (tcp == NULL)
		return NULL;
	tcp->t.ops = &tcp_ops;
	tcp->t.established = true;
	tcp->fd = fd;
	evutil_make_socket_nonblocking(fd);
	tcp->rd = event_new(base, fd, EV_READ | EV_PERSIST, tcp_read_cb, &tcp->t);
	tcp->wr = event_new(base, fd, EV_WRITE | EV_PERSIST, tcp_write_cb, &tcp->t);
	if (tcp->rd == NULL || tcp->wr == NULL) {
		if (tcp->rd)
			event_free(tcp->rd);
		if (tcp->wr)
			event_free(tcp->wr);
		free(tcp);
		return NULL;
	}
	return &tcp->t;
}
