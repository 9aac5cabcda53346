/* server.h - the broker as a server: connections, the flush once per loop
 * turn, paused producers, listeners, and a clean stop (server.c). */
#ifndef EFT_SERVER_H
#define EFT_SERVER_H

#include <stddef.h>

#include "eft/broker.h"
#include "eft/conn.h"

/* The server's own state; b->server. */
struct server {
	struct conn_set set;                 /* the connections; b->set */
	struct listener *listeners;          /* linked by next */
	struct tls_server *tls;              /* for tls:// listeners, made by server_listen */
	struct http_server *http;            /* the admin listener (http://), main's, or NULL */
	size_t max_conns;                    /* more are refused */
	uint64_t refused;                    /* connections refused since the limit was hit */
	struct event *stop_ev;               /* ends the loop if they take too long */
	char *http_answer;                   /* set.http_answer (server_set_http_answer) */
};

/* A broker with its server parts; NULL if out of memory. */
struct broker *server_new(struct event_base *base, const struct config *cfg);
/* Free everything: listeners, connections, destinations and their messages. */
void server_free(struct broker *b);
/* Open a listener for every STOMP cfg->listen (and the TLS context if one
 * is tls://); the admin listeners (http://) are http.c's.  -1 with a
 * one-line reason in err. */
int server_listen(struct broker *b, char *err, size_t errlen);
/* The answer an HTTP request on a STOMP listener gets (conn.c): 400, and
 * where eftd speaks HTTP: its WebSocket listeners and admin_url (the admin
 * listener's URL, NULL if none), or how to add them.  After server_listen;
 * -1 if out of memory. */
int server_set_http_answer(struct broker *b, const char *admin_url);
/* Begin a clean stop: accept nothing more, tell every client and close every
 * connection; the loop ends when they are gone or after grace_ms. */
void server_shutdown(struct broker *b, unsigned grace_ms);
/* Close whatever connections are left, at once. */
void server_close_all(struct broker *b);
/* Write every connection's pending output now, after the backend kept what
 * this turn asked of it (what the end of a loop turn does; tests call it). */
void server_flush(struct broker *b);
/* Producers paused now. */
size_t server_paused_count(const struct broker *b);
/* Resume paused producers whose reason has gone. */
void server_check_paused(struct broker *b);

#endif
