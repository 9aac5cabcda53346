/* listener.h - where eftd accepts connections: one listener per `listen`
 * URL, each with its address and its transport (tcp, tls, ws, wss).  A listener owns
 * binding and accepting; what it accepts becomes a connection on the
 * listener's transport, or, past max-connections, a refusal. */
#ifndef EFT_LISTENER_H
#define EFT_LISTENER_H

#include <stddef.h>

#include "eft/config.h"
#include "eft/ws.h"

struct broker;
struct evconnlistener;
struct event;
struct tls_server;

struct listener {
	struct listener *next;          /* broker->server->listeners */
	struct broker *broker;
	struct config_listen where;
	struct tls_server *tls;         /* tls://, wss://: the server context (the broker's) */
	bool ws;                        /* ws://, wss://: WebSocket over the above */
	struct ws_server ws_server;     /* ws://, wss://: path and ws-* settings */
	struct evconnlistener *ev;
	struct event *relisten_ev;      /* accepting again after EMFILE */
	unsigned port;                  /* the port bound (where.port may be 0) */
	unsigned idx;                   /* where in cfg->listen (connections are counted by it) */
};

/* Bind where and start accepting into b; tls for a tls:// listener.  NULL
 * with a one-line reason in err. */
struct listener *listener_open(struct broker *b, const struct config_listen *where,
    struct tls_server *tls, char *err, size_t errlen);
/* Stop accepting and free. */
void listener_close(struct listener *l);

#endif
