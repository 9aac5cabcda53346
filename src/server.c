/* server.c - the broker as a server: its connections, written once per
 * loop turn (the flush, which first has the backend keep what the turn
 * asked of it and then releases the output held for that), producers
 * paused by flow control and resumed, listeners, and a clean stop.  The
 * broker's own state (destinations, messages, the backend) is broker.c's;
 * a connection is conn.c's, accepting listener.c's. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "eft/broker.h"
#include "eft/conn.h"
#include "eft/dest.h"
#include "eft/durable.h"
#include "eft/hold.h"
#include "eft/listener.h"
#include "eft/log.h"
#include "eft/policy.h"
#include "eft/proto.h"
#include "eft/server.h"
#include "eft/sub.h"
#include "eft/tls.h"

/* The backend asks (cluster: to keep what is held here in progress). */
static void
each_unacked(void *arg, void (*fn)(const struct msg *m, void *fnarg), void *fnarg)
{
	const struct broker *b = arg;
	for (const struct conn *c = b->set->conns; c != NULL; c = c->next)
		for (const struct delivery *dl = c->session->ep.deliveries; dl != NULL;
		    dl = dl->hh.next)
			fn(dl->msg, fnarg);
}

/* The backend asks (cluster: cut off from NATS past the ack wait). */
static size_t
revoke_unacked(void *arg, bool (*revoke)(struct msg *m, void *fnarg), void *fnarg)
{
	const struct broker *b = arg;
	size_t n = 0;
	for (const struct conn *c = b->set->conns; c != NULL; c = c->next) {
		struct endpoint *ep = &c->session->ep;
		size_t k = sub_revoke(ep, revoke, fnarg);
		if (k == 0)
			continue;
		n += k;
		for (struct sub *s = ep->subs; s != NULL; s = s->hh.next)
			sub_wake(s);
	}
	return n;
}

/* The backend asks (cluster: another node holds d's lease).  A durable
 * subscription has one subscriber here at most (proto.c checks), so the
 * walk stops at the first; it runs once per refused claim, not per message. */
static void
durable_refused(void *arg, struct dest *d)
{
	struct broker *b = arg;
	for (struct conn *c = b->set->conns; c != NULL; c = c->next) {
		struct sub *s, *tmp;
		HASH_ITER(hh, c->session->ep.subs, s, tmp) {
			if (s->dest != d)
				continue;
			if (conn_is_closing(c))
				return;
			char detail[320];
			snprintf(detail, sizeof(detail), "Another connection is subscribed to durable "
			    "subscription '%s', on another node of the cluster.",
			    durable_shown(dest_name(d)));
			log_info("%s: durable subscription '%s' is held by another cluster node: "
			    "subscriber ended", c->peer, durable_shown(dest_name(d)));
			conn_cut_held(c); /* its SUBSCRIBE's RECEIPT waited for the claim */
			proto_end(c, "durable subscription in use", detail);
			return;
		}
	}
}

/* ---- output flushing ---- */

/* The backend kept more since the last look: the connections whose first
 * hold it reached write this turn (conn_flush releases their holds). */
static void
release_held(struct broker *b)
{
	b->set->kept_released = b->kept;
	for (struct conn *c = b->set->held; c != NULL; c = c->held_next)
		if (hold_first_seq(&c->holds) <= b->kept)
			conn_want_flush(c);
}

void
server_flush(struct broker *b)
{
	/* Group commit: one write (and fsync) for the turn, before the RECEIPTs
	 * that wait for it.  If it fails, they go on waiting (held), and the
	 * rest of every connection's output is written all the same.  Output
	 * added meanwhile joins the list this loop walks: no need to wake the
	 * flush again (b->flushing). */
	struct conn_set *set = b->set;
	b->flushing = true;
	if (b->backend != NULL)
		broker_commit(b);
	if (set->held != NULL && b->kept != set->kept_released)
		release_held(b);
	while (set->flush_head != NULL) {
		struct conn *c = set->flush_head;
		conn_flush_remove(c);
		conn_flush(c);
	}
	b->flushing = false;
	if (b->set->paused != NULL)
		server_check_paused(b);
}

/* Runs after the callbacks of one loop turn: one write per connection for
 * everything the turn produced. */
static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	server_flush(arg);
}

/* Hysteresis: resume below 90% of a limit, so producers do not flap. */
static bool
below(size_t value, size_t limit)
{
	return limit == 0 || value < limit - limit / 10;
}

static bool
may_resume(struct broker *b, const struct conn *c)
{
	/* A failing backend does not keep producers waiting: their SENDs that
	 * need it are refused with an ERROR, the others go on. */
	enum backend_pressure p = broker_pressure(b);
	if (b->memory_alarm || p == BACKEND_BUSY)
		return false;
	if (p == BACKEND_OK && conn_held_full(c))
		return false;
	const struct dest *d = c->paused_on;
	/* If any destination was freed since, paused_on may be gone: resume, and
	 * the next SEND to a still-full queue pauses again. */
	if (d == NULL || c->paused_gen != b->dests.freed)
		return true;
	const struct dest_policy *pol = dest_policy(d);
	return below(dest_depth(d), pol->max_queue_messages) &&
	    below(dest_bytes(d), pol->max_queue_bytes);
}

size_t
server_paused_count(const struct broker *b)
{
	size_t n = 0;
	for (const struct conn *c = b->set->paused; c != NULL; c = c->paused_next)
		n++;
	return n;
}

void
server_check_paused(struct broker *b)
{
	broker_memory_alarm(b); /* ends it when it is over */
	broker_pressure(b); /* ends a backend's alarm when it is over */
	/* Take the list: resuming runs buffered frames, which may pause again. */
	struct conn *list = b->set->paused;
	b->set->paused = NULL;
	while (list != NULL) {
		struct conn *c = list;
		list = c->paused_next;
		c->paused_next = NULL;
		if (may_resume(b, c)) {
			conn_resume(c);
		} else {
			c->paused_next = b->set->paused;
			b->set->paused = c;
		}
	}
	if (b->set->paused != NULL)
		conn_check_paused_soon(b);
}

static void
paused_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	server_check_paused(arg);
}

static void
stop_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct broker *b = arg;
	log_warn("%zu connections still open at the end of the shutdown grace period; "
	    "closing them", b->set->nconns + b->set->refusing);
	event_base_loopexit(b->base, NULL);
}

void
server_shutdown(struct broker *b, unsigned grace_ms)
{
	b->set->stopping = true;
	while (b->server->listeners != NULL) {
		struct listener *l = b->server->listeners;
		b->server->listeners = l->next;
		listener_close(l);
	}
	/* No message moves to another connection while they all close: what a
	 * subscriber had goes back to its queue and stays there. */
	for (struct conn *c = b->set->conns; c != NULL; c = c->next)
		c->session->ep.blocked = true;
	for (struct conn *c = b->set->conns, *next; c != NULL; c = next) {
		next = c->next;
		conn_shutdown(c);
	}
	if (b->set->conns == NULL) {
		event_base_loopexit(b->base, NULL);
		return;
	}
	struct timeval tv = { .tv_sec = grace_ms / 1000, .tv_usec = (grace_ms % 1000) * 1000 };
	if (b->server->stop_ev == NULL || evtimer_add(b->server->stop_ev, &tv) != 0)
		event_base_loopexit(b->base, NULL);
}

void
server_close_all(struct broker *b)
{
	while (b->set->conns != NULL)
		conn_free(b->set->conns);
}

struct broker *
server_new(struct event_base *base, const struct config *cfg)
{
	struct broker *b = calloc(1, sizeof(*b));
	struct server *srv = calloc(1, sizeof(*srv));
	if (b == NULL || srv == NULL) {
		free(b);
		free(srv);
		return NULL;
	}
	b->server = srv;
	b->set = &srv->set;
	srv->max_conns = SIZE_MAX;
	b->flush_ev = event_new(base, -1, 0, flush_cb, b);
	b->set->paused_ev = evtimer_new(base, paused_cb, b);
	b->server->stop_ev = evtimer_new(base, stop_timeout_cb, b);
	if (b->flush_ev == NULL || b->set->paused_ev == NULL || b->server->stop_ev == NULL ||
	    broker_init(b, base, cfg) != 0) {
		server_free(b);
		return NULL;
	}
	b->be_events.each_unacked = each_unacked;
	b->be_events.revoke_unacked = revoke_unacked;
	b->be_events.durable_refused = durable_refused;
	return b;
}

void
server_free(struct broker *b)
{
	if (b == NULL)
		return;
	while (b->server->listeners != NULL) {
		struct listener *l = b->server->listeners;
		b->server->listeners = l->next;
		listener_close(l);
	}
	server_close_all(b);
	broker_fini(b);
	if (b->flush_ev)
		event_free(b->flush_ev);
	if (b->set->paused_ev)
		event_free(b->set->paused_ev);
	if (b->server->stop_ev)
		event_free(b->server->stop_ev);
	tls_server_free(b->server->tls);
	free(b->server->http_answer);
	free(b->server);
	free(b);
}

int
server_listen(struct broker *b, char *err, size_t errlen)
{
	const struct config *cfg = b->cfg;
	struct listener **tail = &b->server->listeners;
	for (size_t i = 0; i < cfg->nlisten; i++) {
		const struct config_listen *where = &cfg->listen[i];
		if (config_listen_is_http(where))
			continue; /* the admin listener: main's (http.c) */
		bool tls = strcmp(where->scheme, "tls") == 0 || strcmp(where->scheme, "wss") == 0;
		if (tls && b->server->tls == NULL && (b->server->tls = tls_server_new(cfg, err, errlen)) == NULL)
			return -1;
		struct listener *l = listener_open(b, where, tls ? b->server->tls : NULL, err, errlen);
		if (l == NULL)
			return -1;
		l->idx = (unsigned)i;
		*tail = l;
		tail = &l->next;
	}
	return 0;
}

/* Append to buf[*len, cap) what fmt makes, as far as it fits. */
static void
append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	if (*len >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len = *len + (size_t)n < cap ? *len + (size_t)n : cap - 1;
}

int
server_set_http_answer(struct broker *b, const char *admin_url)
{
	/* A browser or curl shows this body; a STOMP ERROR frame it would not. */
	enum { BODY_MAX = 4096 };
	char body[BODY_MAX];
	size_t len = 0;
	bool ws = false;
	append(body, sizeof(body), &len, "This port speaks STOMP, not HTTP (eftd, a STOMP broker).\n");
	for (const struct listener *l = b->server->listeners; l != NULL; l = l->next) {
		if (!l->ws)
			continue;
		bool v6 = strchr(l->where.host, ':') != NULL;
		append(body, sizeof(body), &len, "STOMP over WebSocket: %s://%s%s%s:%u%s\n",
		    l->where.scheme, v6 ? "[" : "", l->where.host, v6 ? "]" : "", l->port,
		    l->where.path);
		ws = true;
	}
	if (!ws)
		append(body, sizeof(body), &len, "eftd has no WebSocket listener; for STOMP over "
		    "WebSocket, add one: listen = ws://HOST:PORT/ws\n");
	if (admin_url != NULL)
		append(body, sizeof(body), &len, "Dashboard, metrics and admin API: %s\n", admin_url);
	else
		append(body, sizeof(body), &len, "eftd has no admin listener; for the dashboard, "
		    "metrics and admin API, add one: listen = http://127.0.0.1:PORT\n");
	char head[160];
	int hlen = snprintf(head, sizeof(head), "HTTP/1.1 400 Bad Request\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n", len);
	char *answer = malloc((size_t)hlen + len + 1);
	if (answer == NULL)
		return -1;
	memcpy(answer, head, (size_t)hlen);
	memcpy(answer + hlen, body, len + 1);
	free(b->server->http_answer);
	b->server->http_answer = answer;
	b->set->http_answer = answer;
	return 0;
}
