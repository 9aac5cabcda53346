/* conn.h - one client connection: its transport, the parser its bytes go
 * into, its output, timers (CONNECT and frame timeouts, heart-beats), flow
 * control and closing.  The STOMP session it points at is session.h's. */
#ifndef EFT_CONN_H
#define EFT_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "eft/broker.h"
#include "eft/hold.h"
#include "eft/outbuf.h"
#include "eft/parser.h"
#include "eft/session.h"

struct event;
struct transport;

enum conn_state {
	CONN_AWAIT_CONNECT, /* nothing but CONNECT or STOMP is accepted */
	CONN_OPEN,
	CONN_CLOSING,       /* session ended; writing what is left, then lingering */
	CONN_LINGER,        /* all written: input is read and dropped (the write side shut
	                     * once it is quiet) until the peer closes, or a time or byte
	                     * bound, then closed */
};

/* The set of connections: the server's, linked and counted here. */
struct conn_set {
	struct conn *conns;                  /* all connections, linked by next */
	uint64_t next_conn_id;               /* names connections in the admin API */
	size_t nconns;
	size_t refusing;                     /* refused connections still getting their ERROR */
	size_t listener_conns[CONFIG_MAX_LISTENERS]; /* open connections by cfg->listen index */
	struct conn *flush_head;             /* connections with output to write */
	struct conn *held;                   /* connections with held output, by held_next */
	uint64_t kept_released;              /* the backend's kept when held was last looked at */
	struct conn *paused;                 /* producers not being read, linked by paused_next */
	struct event *paused_ev;             /* looks at them every PAUSE_CHECK_MS */
	bool stopping;                       /* shutting down: the loop ends when conns do */
	const char *http_answer;             /* what an HTTP request on a STOMP listener gets
	                                        (a whole response, the server's); NULL: a
	                                        short one of conn.c's */
};

#define CONN_FIRST_DONE UINT8_MAX

struct conn {
	struct broker *broker;
	struct conn_set *set;          /* the server's set it is in (b->set) */
	struct transport *transport;
	char peer[80];                 /* "tcp 127.0.0.1:5000": names it in log lines */
	uint64_t id;                   /* names it in the admin API */
	unsigned listen_idx;           /* the cfg->listen it came through */
	struct session *session;       /* the client's STOMP session (session.h) */
	struct event *ev_timer;
	struct outbuf out;
	struct parser parser;
	enum conn_state state;
	bool overflow;                 /* output past max-output: cut off at the next flush */
	bool in_flush;
	struct conn *flush_prev, *flush_next;
	/* The backend's promises (hold.h): */
	struct holds holds;            /* RECEIPTs waiting for the backend to keep ... */
	uint64_t promised;             /* ... this: broker_promised after its last frame that
	                                  asked something of the backend */
	bool held;                     /* it has holds: on set->held */
	bool receipt_tracked;          /* a frame is being handled with a backend on: ... */
	uint64_t receipt_at, receipt_end; /* ... where its RECEIPT went (0, 0: none) */
	struct conn *held_prev, *held_next;
	struct conn *prev, *next;      /* set->conns */
	unsigned hb_send_ms;           /* we send a heart-beat after this much silence; 0 = never */
	unsigned hb_recv_ms;           /* the client promised to send this often; 0 = no promise */
	uint64_t last_read_ms, last_write_ms;
	uint64_t opened_ms;
	uint64_t frame_started_ms;     /* a frame is partly read since; 0 if none */
	uint64_t close_deadline_ms;    /* CLOSING, LINGER: freed by then */
	uint64_t timer_due;            /* when the timer fires; 0 if not armed */
	size_t linger_left;            /* LINGER: input bytes still to drop before closing */
	uint64_t linger_end_ms;        /* LINGER: closed by then whatever the peer does */
	bool linger_shut;              /* LINGER: our write side is shut */
	bool refused;                  /* over max-connections: only gets its ERROR */
	uint8_t first_len;             /* bytes read while they may yet be a TLS ClientHello or
	                                  an HTTP request line; CONN_FIRST_DONE once not */
	uint16_t first_not;            /* the HTTP methods (conn.c) they are not, a bit each */
	bool paused;                   /* not read from: a queue it sends to is full, or memory is */
	struct dest *paused_on;        /* the full queue, or NULL for the memory limit */
	uint64_t paused_gen;           /* dests.freed when paused (paused_on still valid?) */
	struct conn *paused_next;      /* set->paused */
	uint64_t reject_at_ms;         /* failed login: ERROR and close then; 0 if none */
};

/* A connection over t (it takes t; on failure t is freed too).  peer names
 * it in log lines.  NULL if out of memory. */
struct conn *conn_new(struct broker *b, struct transport *t, const char *peer);
/* c came through cfg->listen[idx] (counted per listener; conn_new says 0). */
void conn_set_listener(struct conn *c, unsigned idx);
/* Close now: end the session, drop unsent output, free (and the transport). */
void conn_free(struct conn *c);
/* Stop handling frames and end the session; once the output is written,
 * shut the write side and drop input for a bounded time and amount before
 * closing (a lingering close), so that the peer reads our last frame instead
 * of a reset. */
void conn_close_after_flush(struct conn *c);
/* Over the connection limit: an ERROR saying so, then a lingering close.
 * The connection no longer counts in the set's nconns. */
void conn_refuse(struct conn *c);
/* The broker is stopping: STOMP 1.1 and 1.2 sessions get an ERROR saying
 * so; every connection closes as conn_close_after_flush does. */
void conn_shutdown(struct conn *c);
/* Handle the frames the parser holds. */
void conn_process(struct conn *c);
/* Write pending output; called by the broker's flush. Returns -1 if c was freed. */
int conn_flush(struct conn *c);
/* Deadlines changed (CONNECT, heart-beats negotiated): arm the timer. */
void conn_schedule(struct conn *c);
/* Failed login: stop reading, send ERROR and close after delay_ms. */
void conn_reject_later(struct conn *c, unsigned delay_ms);
/* Stop reading from a producer until the queue `full` (or memory, if NULL) drains. */
void conn_pause(struct conn *c, struct dest *full);
/* Read again, starting with frames that arrived before the pause. */
void conn_resume(struct conn *c);
/* Write c's output before the loop next waits (the broker's flush list). */
void conn_want_flush(struct conn *c);
static inline void
conn_flush_remove(struct conn *c)
{
	if (!c->in_flush)
		return;
	if (c->flush_prev)
		c->flush_prev->flush_next = c->flush_next;
	else
		c->set->flush_head = c->flush_next;
	if (c->flush_next)
		c->flush_next->flush_prev = c->flush_prev;
	c->flush_prev = c->flush_next = NULL;
	c->in_flush = false;
}
/* Producers are paused: look at them again in a while (server_check_paused). */
void conn_check_paused_soon(struct broker *b);
/* Output was added: update the endpoint's blocked flag and ask for a flush. */
void conn_output_added(void *c);
/* Where the next byte of output goes, in the stream of all c has queued. */
static inline uint64_t
conn_out_pos(const struct conn *c)
{
	return c->out.drained + outbuf_length(&c->out);
}
/* The RECEIPT at [at, end) in c's output waits until the backend has kept
 * c->promised (hold_reserve'd beforehand). */
void conn_hold(struct conn *c, uint64_t at, uint64_t end);
/* The backend refuses c's work: the RECEIPTs still held are cut from its
 * output (what they promised was not kept), so that an ERROR written next
 * follows the RECEIPTs for what was. */
void conn_cut_held(struct conn *c);
/* Held output has piled up: a producer waits until it is released. */
bool conn_held_full(const struct conn *c);
/* Closing or lingering: no more frames are handled. */
static inline bool
conn_is_closing(const struct conn *c)
{
	return c->state == CONN_CLOSING || c->state == CONN_LINGER;
}
uint64_t conn_now_ms(const struct conn *c);

#endif
