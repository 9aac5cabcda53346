/* broker.c - destinations and routing.
 *
 * A queue keeps messages in a ring and hands each to one subscriber, taking
 * ready subscribers in turn (round-robin) from a list, so choosing one costs
 * O(1) however many there are.  A topic hands each message to every current
 * subscriber and keeps nothing.  Output is not written here: connections
 * that got output are put on a flush list, written once per loop turn. */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "eft/auth.h"
#include "eft/broker.h"
#include "eft/conn.h"
#include "eft/log.h"
#include "eft/sub.h"

/* ---- message ring ---- */

static int
msgq_grow(struct msgq *q)
{
	if (q->count < q->cap)
		return 0;
	size_t cap = q->cap ? q->cap * 2 : 16;
	struct qentry *e = malloc(cap * sizeof(*e));
	if (e == NULL)
		return -1;
	for (size_t i = 0; i < q->count; i++)
		e[i] = q->e[(q->head + i) % q->cap];
	free(q->e);
	q->e = e;
	q->head = 0;
	q->cap = cap;
	return 0;
}

static int
msgq_push_back(struct msgq *q, struct msg *m, bool redelivered)
{
	if (msgq_grow(q) != 0)
		return -1;
	q->e[(q->head + q->count) % q->cap] = (struct qentry){ m, redelivered };
	q->count++;
	q->bytes += m->size;
	return 0;
}

static int
msgq_push_front(struct msgq *q, struct msg *m, bool redelivered)
{
	if (msgq_grow(q) != 0)
		return -1;
	q->head = (q->head + q->cap - 1) % q->cap;
	q->e[q->head] = (struct qentry){ m, redelivered };
	q->count++;
	q->bytes += m->size;
	return 0;
}

static bool
msgq_pop(struct msgq *q, struct qentry *out)
{
	if (q->count == 0)
		return false;
	*out = q->e[q->head];
	q->head = (q->head + 1) % q->cap;
	q->count--;
	q->bytes -= out->msg->size;
	return true;
}

static void
msgq_free(struct msgq *q)
{
	struct qentry e;
	while (msgq_pop(q, &e))
		msg_unref(e.msg);
	free(q->e);
	memset(q, 0, sizeof(*q));
}

/* ---- destinations ---- */

bool
broker_address_kind(const char *name, size_t len, enum address_kind *kind)
{
	/* The name after the prefix must not be empty. */
	if (len < 8 || name[0] != '/')
		return false;
	switch (name[1]) {
	case 'q':
		*kind = ADDR_QUEUE;
		return memcmp(name, "/queue/", 7) == 0;
	case 't':
		if (memcmp(name, "/topic/", 7) == 0) {
			*kind = ADDR_TOPIC;
			return true;
		}
		*kind = ADDR_TEMP_QUEUE;
		return len > 12 && memcmp(name, "/temp-queue/", 12) == 0;
	case 'r':
		*kind = ADDR_REPLY_QUEUE;
		return len > 13 && memcmp(name, "/reply-queue/", 13) == 0;
	default:
		return false;
	}
}

struct dest *
broker_dest_find(struct broker *b, const char *name, size_t len)
{
	struct dest *d;
	HASH_FIND(hh, b->dests, name, len, d);
	return d;
}

struct dest *
broker_dest_get(struct broker *b, const char *name, size_t len, enum dest_kind kind)
{
	struct dest *d = broker_dest_find(b, name, len);
	if (d != NULL)
		return d;
	d = calloc(1, sizeof(*d));
	if (d == NULL)
		return NULL;
	d->name = malloc(len + 1);
	if (d->name == NULL) {
		free(d);
		return NULL;
	}
	memcpy(d->name, name, len);
	d->name[len] = '\0';
	d->name_len = len;
	d->kind = kind;
	HASH_ADD_KEYPTR(hh, b->dests, d->name, d->name_len, d);
	log_debug("destination %s created", d->name);
	return d;
}

static void
dest_free(struct broker *b, struct dest *d)
{
	b->dests_freed++; /* invalidates the connections' last-destination caches */
	msgq_free(&d->q);
	free(d->name);
	free(d);
}

void
broker_dest_release(struct broker *b, struct dest *d)
{
	if (d->nsubs > 0 || d->q.count > 0 || d->temp != NULL)
		return;
	HASH_DEL(b->dests, d);
	log_debug("destination %s removed", d->name);
	dest_free(b, d);
}

void
broker_dest_delete(struct broker *b, struct dest *d)
{
	HASH_DEL(b->dests, d);
	log_debug("destination %s deleted", d->name);
	dest_free(b, d);
}

/* ---- routing ---- */

void
broker_ready_add(struct dest *d, struct sub *s)
{
	if (s->in_ready)
		return;
	s->in_ready = true;
	s->ready_next = NULL;
	s->ready_prev = d->ready_tail;
	if (d->ready_tail)
		d->ready_tail->ready_next = s;
	else
		d->ready_head = s;
	d->ready_tail = s;
}

void
broker_ready_remove(struct dest *d, struct sub *s)
{
	if (!s->in_ready)
		return;
	if (s->ready_prev)
		s->ready_prev->ready_next = s->ready_next;
	else
		d->ready_head = s->ready_next;
	if (s->ready_next)
		s->ready_next->ready_prev = s->ready_prev;
	else
		d->ready_tail = s->ready_prev;
	s->ready_prev = s->ready_next = NULL;
	s->in_ready = false;
}

void
broker_dispatch(struct broker *b, struct dest *d)
{
	(void)b;
	while (d->q.count > 0 && d->ready_head != NULL) {
		struct sub *s = d->ready_head;
		broker_ready_remove(d, s);
		/* Readiness is checked lazily: a subscriber whose connection
		 * became blocked since it was listed just drops out here. */
		if (!sub_can_take(s))
			continue;
		struct qentry e;
		if (!msgq_pop(&d->q, &e))
			break;
		if (sub_deliver(s, e.msg, e.redelivered) != 0) {
			msgq_push_front(&d->q, e.msg, e.redelivered); /* room was just freed */
			log_error("out of memory delivering to %s", d->name);
			return;
		}
		if (sub_can_take(s))
			broker_ready_add(d, s);
	}
}

int
broker_publish(struct broker *b, struct dest *d, struct msg *m)
{
	b->stats.msgs_in++;
	if (d->kind == DEST_TOPIC) {
		for (struct sub *s = d->subs; s != NULL; s = s->dest_next) {
			if (sub_deliver(s, msg_ref(m), false) != 0) {
				msg_unref(m);
				log_error("out of memory delivering to %s", d->name);
			}
		}
		msg_unref(m);
		return 0;
	}
	if (msgq_push_back(&d->q, m, false) != 0) {
		msg_unref(m);
		return -1;
	}
	broker_dispatch(b, d);
	return 0;
}

int
broker_requeue(struct broker *b, struct dest *d, struct msg *m)
{
	(void)b;
	if (msgq_push_front(&d->q, m, true) != 0) {
		log_error("out of memory: message %llu of %s lost", (unsigned long long)m->id, d->name);
		msg_unref(m);
		return -1;
	}
	return 0;
}

/* ---- output flushing ---- */

void
broker_want_flush(struct broker *b, struct conn *c)
{
	if (c->in_flush || c->fd < 0)
		return;
	c->in_flush = true;
	c->flush_prev = NULL;
	c->flush_next = b->flush_head;
	if (b->flush_head)
		b->flush_head->flush_prev = c;
	b->flush_head = c;
	event_active(b->flush_ev, EV_WRITE, 0);
}

void
broker_flush_remove(struct broker *b, struct conn *c)
{
	if (!c->in_flush)
		return;
	if (c->flush_prev)
		c->flush_prev->flush_next = c->flush_next;
	else
		b->flush_head = c->flush_next;
	if (c->flush_next)
		c->flush_next->flush_prev = c->flush_prev;
	c->flush_prev = c->flush_next = NULL;
	c->in_flush = false;
}

/* Runs after the callbacks of one loop turn: one write per connection for
 * everything the turn produced. */
static void
flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct broker *b = arg;
	while (b->flush_head != NULL) {
		struct conn *c = b->flush_head;
		broker_flush_remove(b, c);
		conn_flush(c);
	}
	if (b->paused != NULL)
		broker_check_paused(b);
}

/* ---- flow control: limits on queues and on memory ---- */

#define PAUSE_CHECK_MS 50
#define REFUSING_MAX 64 /* refused connections lingering at once */

bool
broker_queue_full(const struct broker *b, const struct dest *d)
{
	const struct config *cfg = b->cfg;
	return (cfg->max_queue_messages && d->q.count >= cfg->max_queue_messages) ||
	    (cfg->max_queue_bytes && d->q.bytes >= cfg->max_queue_bytes);
}

bool
broker_memory_full(struct broker *b)
{
	if (b->msg_pool.live_bytes < b->max_memory)
		return false;
	if (!b->memory_alarm) {
		b->memory_alarm = true;
		log_warn("memory limit reached: %zu MB held by messages (max-memory %zu MB); "
		    "producers wait until consumers drain it", b->msg_pool.live_bytes >> 20,
		    b->max_memory >> 20);
	}
	return true;
}

/* Hysteresis: resume below 90% of a limit, so producers do not flap. */
static bool
below(size_t value, size_t limit)
{
	return limit == 0 || value < limit - limit / 10;
}

static bool
may_resume(const struct broker *b, const struct conn *c)
{
	if (b->memory_alarm)
		return false;
	const struct dest *d = c->paused_on;
	/* If any destination was freed since, paused_on may be gone: resume, and
	 * the next SEND to a still-full queue pauses again. */
	if (d == NULL || c->paused_gen != b->dests_freed)
		return true;
	return below(d->q.count, b->cfg->max_queue_messages) && below(d->q.bytes, b->cfg->max_queue_bytes);
}

void
broker_check_paused(struct broker *b)
{
	if (b->memory_alarm && below(b->msg_pool.live_bytes, b->max_memory)) {
		b->memory_alarm = false;
		log_info("memory below 90%% of max-memory again (%zu MB): producers resume",
		    b->msg_pool.live_bytes >> 20);
	}
	/* Take the list: resuming runs buffered frames, which may pause again. */
	struct conn *list = b->paused;
	b->paused = NULL;
	while (list != NULL) {
		struct conn *c = list;
		list = c->paused_next;
		c->paused_next = NULL;
		if (may_resume(b, c)) {
			conn_resume(c);
		} else {
			c->paused_next = b->paused;
			b->paused = c;
		}
	}
	if (b->paused != NULL)
		broker_paused_added(b);
}

static void
paused_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	broker_check_paused(arg);
}

void
broker_paused_added(struct broker *b)
{
	if (b->paused_ev == NULL || evtimer_pending(b->paused_ev, NULL))
		return;
	struct timeval tv = { 0, PAUSE_CHECK_MS * 1000 };
	evtimer_add(b->paused_ev, &tv);
}

/* ---- listening ---- */

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	(void)l;
	(void)salen;
	struct broker *b = arg;
	char host[INET6_ADDRSTRLEN] = "?", peer[64];
	int port = 0;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	}
	snprintf(peer, sizeof(peer), sa->sa_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (b->nconns >= b->max_conns) {
		/* Refuse cleanly and keep serving the others; say so once.  Each
		 * refusal lingers until the client has read its ERROR; in a flood,
		 * past REFUSING_MAX of those at once, the socket is just closed. */
		static const char full[] = "ERROR\nmessage:too many connections\n\n";
		if (b->refused++ == 0)
			log_warn("connection limit (%zu) reached: refusing new connections", b->max_conns);
		struct conn *c = b->refusing < REFUSING_MAX ? conn_new(b, fd, peer) : NULL;
		if (c != NULL) {
			conn_refuse(c);
			return;
		}
		(void)send(fd, full, sizeof(full), MSG_NOSIGNAL | MSG_DONTWAIT);
		evutil_closesocket(fd);
		return;
	}
	if (b->refused > 0) {
		log_info("accepting connections again (%llu refused meanwhile)",
		    (unsigned long long)b->refused);
		b->refused = 0;
	}
	if (conn_new(b, fd, peer) == NULL) {
		log_error("%s: out of memory, connection refused", peer);
		evutil_closesocket(fd);
		return;
	}
	log_info("%s: connection open", peer);
}

static void
relisten_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct broker *b = arg;
	if (b->listener != NULL)
		evconnlistener_enable(b->listener);
}

static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct broker *b = arg;
	int err = errno;
	/* Out of file descriptors: the pending connection stays pending and
	 * the listener would spin; pause accepting briefly, serve the others. */
	if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
		if (!evtimer_pending(b->relisten_ev, NULL)) {
			log_warn("accept failed: %s; not accepting for 100 ms", strerror(err));
			evconnlistener_disable(l);
			struct timeval tv = { 0, 100 * 1000 };
			evtimer_add(b->relisten_ev, &tv);
		}
		return;
	}
	log_warn("accept failed: %s", strerror(err));
}

int
broker_listen(struct broker *b, char *err, size_t errlen)
{
	const char *bind = b->cfg->bind;
	char host[sizeof(b->cfg->bind)], port[8];
	/* Accept "::1" and "[::1]" alike. */
	size_t n = strlen(bind);
	if (bind[0] == '[' && n > 2 && bind[n - 1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)(n - 2), bind + 1);
	else
		snprintf(host, sizeof(host), "%s", bind);
	snprintf(port, sizeof(port), "%u", b->cfg->port);

	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *ai;
	int rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "bad listen address '%s': %s", bind, gai_strerror(rc));
		return -1;
	}
	b->listener = evconnlistener_new_bind(b->base, accept_cb, b,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 1024,
	    ai->ai_addr, (int)ai->ai_addrlen);
	int saved = errno;
	freeaddrinfo(ai);
	if (b->listener == NULL) {
		snprintf(err, errlen, "cannot listen on %s port %s: %s", bind, port, strerror(saved));
		return -1;
	}
	evconnlistener_set_error_cb(b->listener, accept_error_cb);
	return 0;
}

/* ---- life cycle ---- */

static void
stop_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct broker *b = arg;
	log_warn("%zu connections still open at the end of the shutdown grace period; "
	    "closing them", b->nconns + b->refusing);
	event_base_loopexit(b->base, NULL);
}

void
broker_shutdown(struct broker *b, unsigned grace_ms)
{
	b->stopping = true;
	if (b->listener != NULL) {
		evconnlistener_free(b->listener);
		b->listener = NULL;
	}
	/* No message moves to another connection while they all close: what a
	 * subscriber had goes back to its queue and stays there. */
	for (struct conn *c = b->conns; c != NULL; c = c->next)
		c->out_blocked = true;
	for (struct conn *c = b->conns, *next; c != NULL; c = next) {
		next = c->next;
		conn_shutdown(c);
	}
	if (b->conns == NULL) {
		event_base_loopexit(b->base, NULL);
		return;
	}
	struct timeval tv = { .tv_sec = grace_ms / 1000, .tv_usec = (grace_ms % 1000) * 1000 };
	if (b->stop_ev == NULL || evtimer_add(b->stop_ev, &tv) != 0)
		event_base_loopexit(b->base, NULL);
}

void
broker_close_all(struct broker *b)
{
	while (b->conns != NULL)
		conn_free(b->conns);
}

size_t
broker_queued(const struct broker *b, size_t *ndests)
{
	size_t msgs = 0;
	*ndests = 0;
	for (const struct dest *d = b->dests; d != NULL; d = d->hh.next) {
		if (d->q.count > 0) {
			msgs += d->q.count;
			(*ndests)++;
		}
	}
	return msgs;
}

/* Like RabbitMQ's default memory watermark: 40% of physical memory. */
static size_t
broker_default_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || page <= 0)
		return (size_t)1 << 30;
	return (size_t)pages / 10 * 4 * (size_t)page;
}

struct broker *
broker_new(struct event_base *base, const struct config *cfg)
{
	struct broker *b = calloc(1, sizeof(*b));
	if (b == NULL)
		return NULL;
	b->base = base;
	b->cfg = cfg;
	b->next_msg_id = 1;
	b->next_sub_seq = 1;
	b->next_session = 1;
	msg_pool_init(&b->msg_pool, cfg->message_cache);
	b->max_memory = cfg->max_memory ? cfg->max_memory : broker_default_memory();
	b->max_conns = SIZE_MAX;
	b->flush_ev = event_new(base, -1, 0, flush_cb, b);
	b->paused_ev = evtimer_new(base, paused_cb, b);
	b->relisten_ev = evtimer_new(base, relisten_cb, b);
	b->stop_ev = evtimer_new(base, stop_timeout_cb, b);
	if (b->flush_ev == NULL || b->paused_ev == NULL || b->relisten_ev == NULL ||
	    b->stop_ev == NULL) {
		broker_free(b);
		return NULL;
	}
	return b;
}

void
broker_free(struct broker *b)
{
	if (b == NULL)
		return;
	if (b->listener)
		evconnlistener_free(b->listener);
	broker_close_all(b);
	struct dest *d, *tmp;
	HASH_ITER(hh, b->dests, d, tmp) {
		HASH_DEL(b->dests, d);
		dest_free(b, d);
	}
	if (b->flush_ev)
		event_free(b->flush_ev);
	if (b->paused_ev)
		event_free(b->paused_ev);
	if (b->relisten_ev)
		event_free(b->relisten_ev);
	if (b->stop_ev)
		event_free(b->stop_ev);
	msg_pool_drain(&b->msg_pool);
	auth_free(b->auth);
	free(b);
}
