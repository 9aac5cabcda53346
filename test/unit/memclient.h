/* memclient.h - STOMP clients on the in-memory transport, for the unit tests
 * that drive a broker through real connections: the test feeds the bytes a
 * client sends and reads what eftd writes.  Header-only (static inline), so
 * each test binary links only what it uses. */
#ifndef EFT_TEST_MEMCLIENT_H
#define EFT_TEST_MEMCLIENT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "eft/broker.h"
#include "eft/config.h"
#include "eft/log.h"
#include "eft/server.h"
#include "eft/conn.h"
#include "eft/transport_mem.h"

/* The transports a test made: it owns them and destroys them at teardown. */
struct memclients {
	struct transport *t[32];
	int n;
};

static inline void
memclients_free(struct memclients *mc)
{
	for (int i = 0; i < mc->n; i++)
		transport_mem_destroy(mc->t[i]);
	mc->n = 0;
}

/* A connection as if just accepted, from peer. */
static inline struct conn *
mem_accept(struct memclients *mc, struct broker *b, const char *peer)
{
	assert_true(mc->n < (int)(sizeof(mc->t) / sizeof(mc->t[0])));
	struct transport *t = transport_mem_new();
	assert_non_null(t);
	mc->t[mc->n++] = t;
	struct conn *c = conn_new(b, t, peer);
	assert_non_null(c);
	return c;
}

/* The client sends bytes (and the frame's NUL). */
static inline void
feed(struct conn *c, const char *bytes)
{
	transport_mem_feed(c->transport, bytes, strlen(bytes) + 1);
}

/* The client SENDs body to dest. */
static inline void
send_to(struct conn *c, const char *dest, const char *body)
{
	char frame[512];
	snprintf(frame, sizeof(frame), "SEND\ndestination:%s\n\n%s", dest, body);
	feed(c, frame);
}

/* Everything the connection was sent since last time, NULs shown as '|'. */
static inline char *
output(struct conn *c)
{
	server_flush(c->broker); /* what the end of a loop turn does */
	struct evbuffer *out = transport_mem_output(c->transport);
	size_t n = evbuffer_get_length(out);
	char *s = malloc(n + 1);
	assert_non_null(s);
	evbuffer_remove(out, s, n);
	for (size_t i = 0; i < n; i++)
		if (s[i] == '\0')
			s[i] = '|';
	s[n] = '\0';
	return s;
}

/* How many times needle occurs in hay. */
static inline size_t
count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

/* A client that has CONNECTed with accept-version version. */
static inline struct conn *
mem_client(struct memclients *mc, struct broker *b, const char *version)
{
	struct conn *c = mem_accept(mc, b, "mem test");
	char connect[128];
	snprintf(connect, sizeof(connect), "CONNECT\naccept-version:%s\nhost:/\n\n", version);
	feed(c, connect);
	char *out = output(c);
	assert_memory_equal(out, "CONNECTED\n", 10);
	free(out);
	return c;
}

/* A broker with the default configuration and the clients a test made on
 * it: the cmocka fixture of the tests that drive eftd through connections
 * (mem_broker_setup and mem_broker_teardown). */
struct mem_broker {
	struct event_base *base;
	struct config cfg;
	struct broker *b;
	struct memclients mc;
};

static inline int
mem_broker_setup(void **state)
{
	struct mem_broker *fx = calloc(1, sizeof(*fx));
	fx->base = event_base_new();
	config_defaults(&fx->cfg);
	log_set_level(EFT_LOG_ERROR);
	fx->b = server_new(fx->base, &fx->cfg);
	*state = fx;
	return fx->base && fx->b ? 0 : -1;
}

static inline int
mem_broker_teardown(void **state)
{
	struct mem_broker *fx = *state;
	server_free(fx->b);
	memclients_free(&fx->mc);
	event_base_free(fx->base);
	free(fx);
	return 0;
}

#endif
