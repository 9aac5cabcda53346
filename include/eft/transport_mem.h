/* transport_mem.h - an in-memory transport, for unit tests and fuzzers: the
 * test plays the peer.  It feeds the bytes the peer sends, reads what the
 * connection wrote, and can make the peer slow (a write window) or end its
 * stream.  Nothing is read or written unless the test says so, and no
 * socket or event loop is needed.
 *
 * Ownership differs from the other transports: the test owns a memory
 * transport.  When the connection frees it, it is only marked closed
 * (transport_mem_closed), so the test can see that its connection has gone;
 * the test frees it with transport_mem_destroy. */
#ifndef EFT_TRANSPORT_MEM_H
#define EFT_TRANSPORT_MEM_H

#include <stdbool.h>
#include <stddef.h>

struct evbuffer;
struct transport;

struct transport *transport_mem_new(void);
void transport_mem_destroy(struct transport *t);
/* The peer sends n bytes: if the connection reads now, it reads them at once
 * (its readable callback runs; the connection may close and free itself). */
void transport_mem_feed(struct transport *t, const void *data, size_t n);
/* The peer ends its stream (the connection reads end of stream). */
void transport_mem_end(struct transport *t);
/* Bytes fed and not yet read by the connection. */
size_t transport_mem_unread(const struct transport *t);
/* If the connection wants to read and bytes wait, let it read them. */
void transport_mem_poll(struct transport *t);
/* What the connection wrote and the peer has not taken. */
struct evbuffer *transport_mem_output(struct transport *t);
/* How many more bytes the connection may write (SIZE_MAX: no limit).  A
 * larger window lets a connection that waits to write do so at once. */
void transport_mem_set_window(struct transport *t, size_t window);
/* The connection shut its write side (a lingering close has begun). */
bool transport_mem_shut(const struct transport *t);
/* The connection freed the transport: it has gone. */
bool transport_mem_closed(const struct transport *t);

#endif
