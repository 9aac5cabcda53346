/* listener.c - binding, accepting, and the connection limit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "eft/broker.h"
#include "eft/conn.h"
#include "eft/listener.h"
#include "eft/log.h"
#include "eft/server.h"
#include "eft/tls.h"
#include "eft/transport.h"
#include "eft/ws.h"

#define REFUSING_MAX 64 /* refused connections lingering at once */

/* "tls 127.0.0.1:5000", "tcp [::1]:5000": how log lines name the peer. */
static void
listener_peer_name(const struct listener *l, const struct sockaddr *sa, char *out, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	}
	snprintf(out, len, sa->sa_family == AF_INET6 ? "%s [%s]:%d" : "%s %s:%d", l->where.scheme,
	    host, port);
}

static struct transport *
listener_transport(struct listener *l, int fd)
{
	struct transport *t = l->tls != NULL ? transport_tls_new(l->broker->base, l->tls, fd) :
	    transport_tcp_new(l->broker->base, fd);
	if (t == NULL || !l->ws)
		return t;
	return transport_ws_new(l->broker->base, &l->ws_server, t, l->where.scheme);
}

/* Past max-connections: refuse cleanly and keep serving the others; say so
 * once.  Each refusal lingers until the client has read its ERROR; in a
 * flood, past REFUSING_MAX of those at once, the socket is just closed. */
static void
listener_refuse(struct listener *l, int fd, const char *peer)
{
	struct broker *b = l->broker;
	static const char full[] = "ERROR\nmessage:too many connections\n\n";
	b->stats.rejected[STAT_REJECT_LIMIT]++;
	if (b->server->refused++ == 0)
		log_warn("connection limit (%zu) reached: refusing new connections", b->server->max_conns);
	/* Before its upgrade a WebSocket client cannot read a STOMP ERROR. */
	if (l->ws) {
		static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
		    "Connection: close\r\n\r\n";
		if (l->tls == NULL)
			(void)send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		evutil_closesocket(fd);
		return;
	}
	if (b->set->refusing < REFUSING_MAX) {
		struct transport *t = listener_transport(l, fd);
		struct conn *c = t ? conn_new(b, t, peer) : NULL;
		if (c != NULL) {
			conn_refuse(c);
			return;
		}
		if (t != NULL)
			return; /* conn_new closed it */
	}
	if (l->tls == NULL)
		(void)send(fd, full, sizeof(full), MSG_NOSIGNAL | MSG_DONTWAIT);
	evutil_closesocket(fd);
}

static void
listener_accept_cb(struct evconnlistener *el, evutil_socket_t fd, struct sockaddr *sa, int salen,
    void *arg)
{
	(void)el;
	(void)salen;
	struct listener *l = arg;
	struct broker *b = l->broker;
	char peer[80];
	listener_peer_name(l, sa, peer, sizeof(peer));
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (b->set->nconns >= b->server->max_conns) {
		listener_refuse(l, fd, peer);
		return;
	}
	if (b->server->refused > 0) {
		log_info("accepting connections again (%llu refused meanwhile)",
		    (unsigned long long)b->server->refused);
		b->server->refused = 0;
	}
	struct transport *t = listener_transport(l, fd);
	if (t == NULL) {
		log_error("%s: out of memory, connection refused", peer);
		evutil_closesocket(fd);
		return;
	}
	struct conn *c = conn_new(b, t, peer);
	if (c == NULL) {
		log_error("%s: out of memory, connection refused", peer);
		return;
	}
	conn_set_listener(c, l->idx);
	log_info("%s: connection open on %s", peer, l->where.url);
}

static void
listener_relisten_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct listener *l = arg;
	evconnlistener_enable(l->ev);
}

static void
listener_error_cb(struct evconnlistener *el, void *arg)
{
	struct listener *l = arg;
	int err = errno;
	/* Out of file descriptors: the pending connection stays pending and
	 * the listener would spin; pause accepting briefly, serve the others. */
	if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
		if (!evtimer_pending(l->relisten_ev, NULL)) {
			log_warn("%s: accept failed: %s; not accepting for 100 ms", l->where.url,
			    strerror(err));
			evconnlistener_disable(el);
			struct timeval tv = { 0, 100 * 1000 };
			evtimer_add(l->relisten_ev, &tv);
		}
		return;
	}
	log_warn("%s: accept failed: %s", l->where.url, strerror(err));
}

/* The port actually bound (differs from the URL's for port 0). */
static unsigned
listener_bound_port(const struct listener *l)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	evutil_socket_t fd = evconnlistener_get_fd(l->ev);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return l->where.port;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

struct listener *
listener_open(struct broker *b, const struct config_listen *where, struct tls_server *tls,
    char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *ai = NULL;
	char port[8];
	struct listener *l = calloc(1, sizeof(*l));
	if (l == NULL) {
		snprintf(err, errlen, "%s: out of memory", where->url);
		return NULL;
	}
	l->broker = b;
	l->where = *where;
	l->tls = tls;
	if (where->scheme[0] == 'w') {
		const struct config *cfg = b->cfg;
		l->ws = true;
		snprintf(l->ws_server.path, sizeof(l->ws_server.path), "%s", where->path);
		l->ws_server.origins = cfg->ws_allowed_origins;
		l->ws_server.binary = strcmp(cfg->ws_frame, "binary") == 0;
		l->ws_server.max_message = cfg->max_frame_size;
	}
	snprintf(port, sizeof(port), "%u", where->port);
	int rc = getaddrinfo(where->host, port, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "%s: bad listen address '%s': %s", where->url, where->host,
		    gai_strerror(rc));
		goto fail;
	}
	l->ev = evconnlistener_new_bind(b->base, listener_accept_cb, l,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 1024,
	    ai->ai_addr, (int)ai->ai_addrlen);
	int saved = errno;
	freeaddrinfo(ai);
	if (l->ev == NULL) {
		snprintf(err, errlen, "cannot listen on %s: %s", where->url, strerror(saved));
		goto fail;
	}
	l->relisten_ev = evtimer_new(b->base, listener_relisten_cb, l);
	if (l->relisten_ev == NULL) {
		snprintf(err, errlen, "%s: out of memory", where->url);
		goto fail;
	}
	evconnlistener_set_error_cb(l->ev, listener_error_cb);
	l->port = listener_bound_port(l);
	return l;
fail:
	listener_close(l);
	return NULL;
}

void
listener_close(struct listener *l)
{
	if (l == NULL)
		return;
	if (l->ev)
		evconnlistener_free(l->ev);
	if (l->relisten_ev)
		event_free(l->relisten_ev);
	free(l);
}
