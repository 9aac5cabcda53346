/* conn.h - broker connections and the one poll() loop that drives them.
 *
 * eft-bench is single-threaded: every connection of a run (producers,
 * consumers, rpc clients and responder) is served by loop_run(), which
 * writes pending output in large chunks, reads whatever has arrived and
 * hands each complete frame to its connection's callback.  ERROR frames,
 * RECEIPTs, CONNECTED and unexpected end-of-stream are handled here, so a
 * mode only sees MESSAGE frames.  Every wait is bounded by the idle timeout
 * and the --duration deadline.  With --tls the same loop drives each
 * connection's TLS handshake (tls.h), before CONNECT goes out; with --ws,
 * then its WebSocket handshake (ws.h), and from there on frames travel as
 * WebSocket messages. */
#ifndef EFT_BENCH_CONN_H
#define EFT_BENCH_CONN_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "frame.h"
#include "ws.h"

struct loop;
struct conn;
struct tls;
struct tls_client;

typedef void (*conn_fn)(struct conn *c);
typedef void (*conn_frame_fn)(struct conn *c, const struct frame *f);

struct conn {
	struct loop *loop;
	int fd;
	struct tls *tls;        /* NULL: plain TCP */
	bool handshaking;       /* TLS: the handshake has not finished */
	const char *host, *port; /* as given to conn_open, for messages */
	char name[40];          /* "producer", "subscriber 3": names it in messages */
	struct buf in, out;
	size_t want;            /* bytes to have buffered before parsing again */
	short rwait;            /* poll event reading waits for: POLLIN, or POLLOUT
	                         * while TLS must write before it can read */
	short wwait;            /* poll event writing waits for: 0 (none), POLLOUT,
	                         * or POLLIN while TLS must read before it can write */
	bool rpending;          /* TLS holds input that poll() cannot see */
	/* --ws: out holds STOMP frames, which are wrapped into WebSocket
	 * messages in wire only once wire is empty, so a slow socket holds
	 * the producer back just as without --ws. */
	const struct ws_opts *ws; /* NULL: STOMP straight on the stream */
	bool upgrading;         /* the Upgrade request is out, no 101 yet */
	bool ws_in_message;     /* a fragmented data message is under way */
	bool ws_closed;         /* the broker sent a close frame */
	struct buf wire;        /* bytes for the socket: handshake and frames */
	struct buf frag;        /* the start of a STOMP frame split across messages */
	size_t frag_want;       /* bytes frag needs before parsing again */
	char ws_key[WS_KEY_LEN + 1];
	struct ws_rng rng;      /* masks */
	bool connected;         /* CONNECTED arrived */
	bool closing;           /* DISCONNECT sent: end of stream is expected */
	bool eof;
	char receipt_want[40];  /* receipt-id awaited, "" for none */
	bool receipt_got;
	uint64_t receipt_ns;
	char server[64];        /* CONNECTED's server header */
	char version[16];       /* CONNECTED's version header */
	uint64_t rx_ns;         /* when the bytes being parsed were read */
	conn_frame_fn on_message; /* each MESSAGE */
	conn_frame_fn on_receipt; /* each RECEIPT other than receipt_want; NULL: an error */
	conn_fn after_read;     /* after the frames of one read: batch work such as ACKs */
	conn_fn refill;         /* before each write: the producer adds frames to out */
	void *arg;
};

enum loop_status { LOOP_OK, LOOP_FAILED, LOOP_IDLE, LOOP_DEADLINE };

struct loop {
	struct conn **conns;
	int nconns, cap;
	struct pollfd *pfd;
	uint64_t timeout_ns;    /* longest time without any byte moving */
	uint64_t deadline_ns;   /* absolute; 0 = none */
	uint64_t last_activity_ns; /* when a byte last moved */
	uint64_t wake_ns;       /* a refill wants to run again at this time (pacing) */
	enum loop_status status; /* sticky: the first failure is the one reported */
	struct conn *failed_conn;
	bool unreached;         /* the run's first connection could not be opened, or
	                         * no TLS handshake of the run succeeded */
	bool tls_up;            /* a connection of this loop finished its handshake */
	bool ws_up;             /* ... or its WebSocket handshake */
	char err[768];
	void (*progress)(void *arg);
	void *progress_arg;
	uint64_t next_progress_ns; /* 0 = no progress line */
};

void loop_init(struct loop *l, uint64_t timeout_ns, uint64_t deadline_ns);
/* Close every connection and free the loop. */
void loop_free(struct loop *l);
/* Call progress(arg) now and then while runs take long (stderr a terminal). */
void loop_set_progress(struct loop *l, void (*progress)(void *), void *arg);
/* Serve all connections until done(arg) is true or something fails. */
enum loop_status loop_run(struct loop *l, bool (*done)(void *), void *arg);
/* Record the run's failure (first one wins); c names the connection, or NULL. */
void loop_fail(struct loop *l, struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A refill that paces itself asks to be called again at t. */
void loop_wake_at(struct loop *l, uint64_t t);

/* Open a TCP connection (bounded by the loop's timeout); NULL after loop_fail.
 * When it is the loop's first connection, l->unreached says so.  With tc
 * (not NULL) the connection speaks TLS: the handshake starts in loop_run.
 * With ws (not NULL) it speaks WebSocket: the Upgrade request goes out
 * first (after the TLS handshake), frames in out wait for its answer. */
struct conn *conn_open(struct loop *l, const char *host, const char *port, const char *name,
    struct tls_client *tc, const struct ws_opts *ws);
void conn_close(struct conn *c);
/* The next RECEIPT on c must carry this receipt-id. */
void conn_expect_receipt(struct conn *c, const char *id);

#endif
