/* transport.h - the bytes under a STOMP connection: plain TCP, TLS, or an
 * in-memory pair for tests and fuzzers.
 *
 * A connection never touches a socket.  It reads into its parser's buffer
 * with transport_read, writes its output evbuffer with transport_write, and
 * says whether it wants to hear when the transport is readable or writable;
 * the transport calls back on_readable / on_writable when it is.  Like
 * redis's ConnectionType, each kind is a table of operations, so that a new
 * kind (WebSocket) is one more file, not branches in the connection.
 *
 * Ownership: a transport belongs to the connection it was given to, which
 * frees it with transport_free (closing the socket). */
#ifndef EFT_TRANSPORT_H
#define EFT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct evbuffer;
struct event_base;
struct transport;

/* transport_read and transport_write return a byte count, or one of these. */
#define TRANSPORT_AGAIN (-2)  /* nothing now: wait for the callback */
#define TRANSPORT_ERROR (-1)  /* broken: transport_error() says why */
/* read: the transport ended the connection itself (a refused WebSocket
 * upgrade, a WebSocket close); transport_error() says why.  What it has
 * queued (an HTTP status, a close frame) is written by the connection's
 * closing flush, as its own output is. */
#define TRANSPORT_CLOSE (-3)

typedef void (*transport_cb)(void *arg);

struct transport_ops {
	const char *kind;  /* "tcp", "tls", "ws", "wss", "mem": names the listener in logs */
	/* It carries messages, not a byte stream (WebSocket): what a client
	 * sends first is never a TLS ClientHello or an HTTP request line. */
	bool framed;
	/* Up to len bytes into buf: > 0 read, 0 the peer ended the stream. */
	ssize_t (*read)(struct transport *t, void *buf, size_t len);
	/* Write from the front of out, draining what went: >= 0 bytes written
	 * (less than all when the transport is full; wait for on_writable). */
	ssize_t (*write)(struct transport *t, struct evbuffer *out);
	/* Bytes taken by write and not yet sent (TLS gathers records); NULL:
	 * none ever are. */
	size_t (*pending)(const struct transport *t);
	/* Call on_readable / on_writable when the transport is ready that way. */
	void (*want)(struct transport *t, bool read, bool write);
	/* Send nothing more (FIN; TLS close_notify first).  Reading goes on. */
	void (*shutdown)(struct transport *t);
	void (*free)(struct transport *t);
};

struct transport {
	const struct transport_ops *ops;
	transport_cb on_readable, on_writable;
	void *arg;                 /* passed to the callbacks: the connection */
	bool want_read, want_write;
	bool established;          /* can carry STOMP bytes (a TLS handshake is done) */
	/* The bytes the last read returned end a WebSocket message whose last
	 * byte was not a NUL or an EOL (a client that drops a frame's NUL). */
	bool unterminated_end;
	char error[160];           /* why the last call returned TRANSPORT_ERROR */
};

static inline ssize_t
transport_read(struct transport *t, void *buf, size_t len)
{
	return t->ops->read(t, buf, len);
}

static inline ssize_t
transport_write(struct transport *t, struct evbuffer *out)
{
	return t->ops->write(t, out);
}

/* Ask for (or stop) the callbacks; cheap when nothing changes. */
static inline void
transport_want(struct transport *t, bool read, bool write)
{
	if (read != t->want_read || write != t->want_write) {
		t->want_read = read;
		t->want_write = write;
		t->ops->want(t, read, write);
	}
}

static inline size_t
transport_pending(const struct transport *t)
{
	return t->ops->pending ? t->ops->pending(t) : 0;
}

static inline void
transport_shutdown(struct transport *t)
{
	t->ops->shutdown(t);
}

static inline void
transport_free(struct transport *t)
{
	if (t != NULL)
		t->ops->free(t);
}

static inline const char *
transport_kind(const struct transport *t)
{
	return t->ops->kind;
}

static inline const char *
transport_error(const struct transport *t)
{
	return t->error;
}

/* Plain TCP on an accepted, connected socket (made non-blocking here).
 * NULL if out of memory (fd is then left open). */
struct transport *transport_tcp_new(struct event_base *base, int fd);

/* Set the callbacks (the connection does this when it takes t). */
void transport_bind(struct transport *t, transport_cb on_readable, transport_cb on_writable,
    void *arg);
/* Fill t->error from a format, for implementations. */
void transport_fail(struct transport *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
