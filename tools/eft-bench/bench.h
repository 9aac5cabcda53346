/* bench.h - what every part of eft-bench shares: the options of a run and
 * the entry point of each mode.  Each mode runs one message size at a time
 * and fills a struct result (report.h) that becomes one row of output. */
#ifndef EFT_BENCH_BENCH_H
#define EFT_BENCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ws.h"

enum mode { MODE_SENDRECV, MODE_STREAM, MODE_RPC, MODE_FANOUT };
enum ack_mode { ACK_AUTO, ACK_CLIENT, ACK_CLIENT_INDIVIDUAL };
enum out_format { OUT_TEXT, OUT_CSV, OUT_JSON };

struct tls_client;

#define MAX_SIZES 64
#define MAX_SUB_HEADERS 16
#define MAX_CONNS 1000          /* -c and -k: poll() copes, file limits may not */
#define MAX_COUNT 4000000000ull /* sequence numbers travel as 8 hex digits */

/* The temp-queue name every rpc client puts in reply-to. */
#define RPC_TEMP_QUEUE "/temp-queue/bench"

struct opts {
	enum mode mode;
	const char *mode_name;
	const char *host, *port, *login, *passcode, *vhost;
	const char *consumer_port;  /* consumers' (and rpc's responder's) port; NULL: port */
	const char *queue;          /* --queue NAME: /queue/NAME, not a fresh one; NULL: fresh */
	uint64_t count;             /* -n: messages (rpc: requests) per run */
	size_t sizes[MAX_SIZES];    /* one run per size */
	int nsizes;
	enum ack_mode ack;
	enum out_format format;
	uint64_t timeout_ns;        /* --timeout: longest wait without progress */
	uint64_t deadline_ns;       /* --duration as a CLOCK_MONOTONIC instant; 0 = none */
	bool quiet;
	bool progress;              /* stderr is a terminal and not --quiet */
	int clients;                /* rpc -c */
	int inflight;               /* rpc --inflight */
	int subscribers;            /* fanout -k */
	int wildcards;              /* fanout --wildcards: patterns in all; 0 = exact names */
	double rate;                /* stream/fanout --rate, messages/s; 0 = flat out */
	const char *sub_headers[MAX_SUB_HEADERS]; /* --sub-header "name:value" */
	int nsub_headers;
	const char *send_headers[MAX_SUB_HEADERS]; /* --send-header "name:value" */
	int nsend_headers;
	bool rpc_subscribe;         /* clients SUBSCRIBE to the temp-queue themselves */
	bool tls;                   /* --tls: speak TLS to the broker */
	const char *ca;             /* --ca: PEM CA file; NULL = the system's CA store */
	bool insecure;              /* --insecure: do not verify the certificate */
	const char *sni;            /* --sni; NULL = --host, when it is a name */
	struct tls_client *tls_client; /* made once from the four above; NULL without --tls */
	bool ws;                    /* --ws: STOMP over WebSocket (wss:// with --tls) */
	struct ws_opts ws_opts;     /* --ws-path, --ws-binary */
	long run_id;                /* unix time at start: part of destination names */
	bool persistent;            /* --persistent: every SEND has persistent:true */
	int receipt_window;         /* --receipt-window: a RECEIPT per SEND, at most this
	                             * many outstanding; 0 = only the last SEND asks */
};

const char *ack_mode_name(enum ack_mode a);

struct result;

/* Run one size; fill r.  The return value is 0 when the run completed and
 * every message checked out, -1 otherwise (r->error says why). */
int mode_sendrecv(const struct opts *o, size_t size, int row, struct result *r);
int mode_stream(const struct opts *o, size_t size, int row, struct result *r);
int mode_rpc(const struct opts *o, size_t size, int row, struct result *r);
int mode_fanout(const struct opts *o, size_t size, int row, struct result *r);

/* A destination no other run uses: PREFIX-<pid>-<time>-<size>[-<row>]. */
void bench_dest_name(char *out, size_t outlen, const struct opts *o, const char *prefix,
    size_t size, int row);

#endif
