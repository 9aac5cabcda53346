/* main.c - eft-bench: options, help, and one run per message size.
 *
 * eft-bench MODE [options].  Each mode lives in its own mode_*.c; this file
 * only turns the command line into a struct opts, calls the mode once per
 * size, and turns the results into an exit status. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "payload.h"
#include "report.h"
#include "stats.h"
#include "tls.h"

#define EXIT_USAGE 2
#define MAX_SIZE (64u << 20)

static const char general_help[] =
"usage: eft-bench MODE [options]\n"
"       eft-bench MODE --help\n"
"\n"
"Load generator and timer for STOMP brokers: eftd, RabbitMQ's STOMP plugin,\n"
"ActiveMQ, or anything else speaking STOMP 1.2.  One thread, non-blocking\n"
"sockets, frames batched into large writes and parsed in place from large\n"
"reads, so eft-bench itself is not the bottleneck.\n"
"\n"
"Modes:\n"
"  sendrecv   one connection sends N messages to a fresh queue, then reads them\n"
"  stream     producer and consumer at once: msg/s, MB/s, latency percentiles\n"
"  rpc        request/reply via reply-to:/temp-queue/: rpc/s, round-trip times\n"
"  fanout     one producer to a topic, K subscribers: deliveries/s\n"
"Options of one mode (rpc: -c, --inflight, --rpc-subscribe; fanout: -k;\n"
"stream and fanout: --rate) are in 'eft-bench MODE --help'.\n"
"\n";

static const char common_help[] =
"Common options:\n"
"  -H, --host HOST       broker address (default 127.0.0.1; ::1 works too)\n"
"  -p, --port PORT       broker port (default 61613)\n"
"      --consumer-port PORT\n"
"                        consumers (and rpc's responder) connect here, producers\n"
"                        to --port: two nodes of an eft cluster (default: --port)\n"
"      --queue NAME      sendrecv and stream: use /queue/NAME, not a fresh queue\n"
"                        (an eft cluster places a queue by its name); it should\n"
"                        be empty, and one size only\n"
"      --login NAME      CONNECT login (default guest; '' sends none)\n"
"      --passcode SECRET CONNECT passcode (default guest; '' sends none)\n"
"      --vhost HOST      CONNECT host header: RabbitMQ's vhost (default /)\n"
"      --tls             speak TLS (1.2 or later) to the broker and verify its\n"
"                        certificate against the system's CA store, or --ca\n"
"      --ca FILE         PEM file of the CA certificate(s) that verify the\n"
"                        broker's certificate (with --tls)\n"
"      --insecure        do not verify the broker's certificate (with --tls;\n"
"                        a warning on stderr says so, unless -q)\n"
"      --sni NAME        the server name to send and to verify the certificate\n"
"                        against (with --tls; default: --host when it is a\n"
"                        name; an IP address is verified against the\n"
"                        certificate's IP address entries, and not sent)\n"
"      --ws              speak STOMP over WebSocket (RFC 6455): ws://, or\n"
"                        wss:// with --tls; subprotocols v12.stomp, v11.stomp,\n"
"                        v10.stomp; one masked message per STOMP frame\n"
"      --ws-path PATH    the WebSocket request path (with --ws; default /ws;\n"
"                        RabbitMQ's Web-STOMP: /ws on port 15674)\n"
"      --ws-binary       send binary messages, not text ones (with --ws)\n"
"      --persistent      every SEND carries persistent:true (rpc: requests and\n"
"                        replies), which asks brokers that keep messages on\n"
"                        disk (RabbitMQ, ActiveMQ, a durable eftd) to do so\n"
"      --receipt-window N\n"
"                        every SEND asks for a RECEIPT and at most N are\n"
"                        outstanding: the producer waits for one before sending\n"
"                        more, so a broker that syncs to disk before each\n"
"                        RECEIPT is measured with up to N messages per sync.\n"
"                        RECEIPTs must come back in order, each exactly once\n"
"                        (receipt-id eft-bench-<seq>); one missing, extra or\n"
"                        out of order fails the run.  0 (default): only the\n"
"                        last SEND asks.  sendrecv, stream and fanout only\n"
"  -n, --count N         messages per run; rpc: requests (default 100000;\n"
"                        suffix k = x1000, m = x1000000)\n"
"  -s, --size BYTES      message body size (default 1024, at least 32;\n"
"                        suffix k = x1024, m = x1048576)\n"
"      --sizes A,B,...   one run, and one output row, per size\n"
"      --sweep           the sizes 64 B to 32 KB in powers of two\n"
"      --ack MODE        auto (default), client or client-individual.  Consumers\n"
"                        ACK STOMP 1.2 style (id = the MESSAGE's ack header):\n"
"                        client sends one cumulative ACK for the newest message\n"
"                        of each read, client-individual ACKs every message\n"
"      --sub-header N:V  add header N:V to every SUBSCRIBE (repeatable), e.g.\n"
"                        prefetch-count:500 (RabbitMQ, eftd) or\n"
"                        activemq.prefetchSize:500 (ActiveMQ)\n"
"      --send-header N:V add header N:V to every SEND (repeatable; rpc: the\n"
"                        requests), e.g. priority:7 or expiration:60000, or a\n"
"                        header that a --sub-header selector:... tests\n"
"  -t, --timeout SECS    fail when nothing moves for this long (default 10)\n"
"  -d, --duration SECS   hard limit on the whole invocation: when it expires the\n"
"                        current run is reported as incomplete and the exit\n"
"                        status is 1\n"
"      --csv             CSV: a header line, then one row per run\n"
"      --json            JSON Lines: one object per run\n"
"  -q, --quiet           no progress line and no warnings (errors still show);\n"
"                        the progress line appears only when stderr is a\n"
"                        terminal\n"
"  -h, --help            this help\n"
"\n"
"STOMP: CONNECT with accept-version:1.2, host, login, passcode and\n"
"heart-beat:0,0; every SEND has content-length.  Destinations are fresh per\n"
"run: /queue/eft-bench-<pid>-<time>-<size> (rpc: /queue/eft-bench-rpc-...,\n"
"fanout: /topic/eft-bench-...).  Brokers that keep queues (RabbitMQ) keep\n"
"these, empty.\n"
"\n"
"TLS: each connection's handshake happens before its CONNECT, outside every\n"
"measured time.  A handshake that fails (certificate verification included)\n"
"or does not finish within --timeout is reported like an unreachable broker,\n"
"with OpenSSL's reason.\n"
"\n"
"WebSocket: each connection's Upgrade handshake (GET --ws-path, the 101\n"
"answer and its Sec-WebSocket-Accept checked) happens before its CONNECT,\n"
"outside every measured time, and fails like a TLS handshake does.  The\n"
"broker's messages may be text or binary, hold any number of STOMP frames\n"
"or parts of one, and be fragmented; pings are answered.\n"
"\n"
"Checking: every body carries a sequence number, its send time\n"
"(CLOCK_MONOTONIC) and a check value, followed by a pattern that depends on\n"
"the sequence number.  Every arrival is checked; lost, duplicated, reordered\n"
"(queues and topics promise per-producer order) and corrupted messages are\n"
"counted and reported.  A broker ERROR (its message header is printed), a\n"
"closed connection, or --timeout without progress ends the run.\n"
"\n"
"Output: a text table by default, one row per run.  --csv and --json share\n"
"these columns in every mode (empty in CSV, null in JSON, when a mode does\n"
"not measure one):\n"
"  mode server host port size count conns inflight ack\n"
"  send_s recv_s total_s delivered msgs_per_s mb_per_s\n"
"  lat_min_us lat_mean_us lat_p50_us lat_p90_us lat_p99_us lat_p999_us\n"
"  lat_max_us lost duplicated reordered corrupted complete error transport\n"
"  persistent receipt_window\n"
"server is the broker's CONNECTED server header.  conns counts eft-bench's\n"
"connections (sendrecv 1, stream 2, fanout K + 1, rpc clients + 1 responder);\n"
"inflight is rpc's --inflight.  delivered counts good deliveries (fanout:\n"
"summed over the subscribers; rpc: replies).  msgs_per_s = delivered /\n"
"total_s (rpc: round trips per second); mb_per_s = delivered body bytes /\n"
"total_s / 10^6.  Latencies are in microseconds.  lost counts messages sent\n"
"but never received when the run finished or timed out waiting for them.\n"
"complete is 1 (true) when every message went and came within the limits;\n"
"error says why a run failed; transport is tcp, tls with --tls, ws with\n"
"--ws, wss with both.  persistent is 1 (true) with --persistent;\n"
"receipt_window is --receipt-window (0: one RECEIPT, for the last SEND;\n"
"empty in CSV, null in JSON, in rpc mode).  A run whose first connection\n"
"cannot be made (nothing listening, unknown host, a failed TLS or WebSocket\n"
"handshake) has no row: eft-bench stops there and says why in one line on\n"
"stderr.\n"
"\n"
"Exit status: 0 when every run completed and every message checked out;\n"
"1 when the broker could not be reached or a run failed (broker ERROR or\n"
"closed connection, --timeout or --duration expired, or a lost, duplicated,\n"
"reordered or corrupted message);\n"
"2 for bad usage, or a --ca file that cannot be loaded.\n";

static const char sendrecv_help[] =
"usage: eft-bench sendrecv [options]\n"
"\n"
"One connection sends N messages of S bytes to a fresh queue, without\n"
"receipts, except that the last SEND asks for a RECEIPT: send time runs from\n"
"the first byte written to that RECEIPT, i.e. until the broker has taken\n"
"every message.  With --receipt-window W every SEND asks for one, at most W\n"
"outstanding, and send time runs to the last of them.  The same connection\n"
"then subscribes; receive time runs from SUBSCRIBE to the Nth MESSAGE.\n"
"Columns: send s, recv s, total s (their sum), msg/s = N / total s,\n"
"MB/s = N * S / total s / 10^6.\n"
"\n"
"Defaults: -n 100000 -s 1024.  With --sizes or --sweep, one row per size.\n"
"\n";

static const char stream_help[] =
"usage: eft-bench stream [options]\n"
"\n"
"A consumer connection subscribes to a fresh queue (waiting for the\n"
"SUBSCRIBE's RECEIPT), then a producer connection sends N messages while the\n"
"consumer receives them.  Each body carries its send time, so each delivery\n"
"gives a latency: p50, p99, p99.9 and max, in microseconds.\n"
"send s: first SEND to the RECEIPT for the last SEND; total s: first SEND to\n"
"the Nth MESSAGE; msg/s = N / total s.\n"
"\n"
"      --rate R          send R messages per second (default: as fast as the\n"
"                        broker takes them).  Flat out, latency mostly shows\n"
"                        queueing; paced, each message's latency counts from\n"
"                        its scheduled send time, so a broker that falls\n"
"                        behind is not excused (no coordinated omission)\n"
"\n";

static const char rpc_help[] =
"usage: eft-bench rpc [options]\n"
"\n"
"A responder connection subscribes to a service queue.  Client connections\n"
"send N requests in all, each with reply-to:" RPC_TEMP_QUEUE " and a\n"
"correlation-id.  Clients do not subscribe: the broker gives each client a\n"
"private reply queue and subscribes it (RabbitMQ's temp-queue behaviour), so\n"
"replies arrive as MESSAGEs with subscription:" RPC_TEMP_QUEUE ".  The\n"
"responder answers each request by SENDing its body back to the request's\n"
"reply-to value, copying the correlation-id.  Every reply is checked: it must\n"
"arrive on subscription " RPC_TEMP_QUEUE ", its correlation-id must name a\n"
"request outstanding on that client, and its body must equal the request's.\n"
"total s: first request to last reply; rpc/s = N / total s; latency: each\n"
"request's round trip.  --ack applies to the responder's subscription.\n"
"A broker without temp-queues typically answers the responder's SEND to\n"
RPC_TEMP_QUEUE " with an ERROR; eft-bench reports it and exits 1.\n"
"\n"
"  -c, --clients N       client connections (default 1)\n"
"      --inflight K      requests outstanding per client: 1 (default) sends\n"
"                        the next only after the reply; more pipelines\n"
"      --rpc-subscribe   clients also SUBSCRIBE to " RPC_TEMP_QUEUE " (with id\n"
"                        " RPC_TEMP_QUEUE "), as ActiveMQ expects\n"
"\n"
"Defaults: -n 100000 -s 1024 (request and reply body size).\n"
"\n";

static const char fanout_help[] =
"usage: eft-bench fanout [options]\n"
"\n"
"K subscriber connections subscribe to a fresh topic, each waiting for its\n"
"RECEIPT; then one producer sends N messages.  deliv/s = N * K / total s,\n"
"where total s runs from the first SEND until every subscriber has all N.\n"
"Latency as in stream mode, over every delivery.  send s: first SEND to the\n"
"RECEIPT for the last.\n"
"\n"
"  -k, --subscribers K   subscriber connections (default 4)\n"
"      --wildcards W     W wildcard subscriptions on distinct patterns: each\n"
"                        subscriber's matches the topic ('T.*', 'T.#', 'T.>',\n"
"                        '*.m', ...; the messages go to T.m), and W - K more\n"
"                        on other connections (up to 1000 each: eftd's\n"
"                        max-subscriptions) match nothing ('T-fI.*'): the cost\n"
"                        of many patterns, to compare with plain fanout\n"
"      --rate R          send R messages per second (see stream --help)\n"
"\n";

static const struct {
	const char *name;
	enum mode mode;
	const char *help;
	int (*run)(const struct opts *, size_t, int, struct result *);
} modes[] = {
	{ "sendrecv", MODE_SENDRECV, sendrecv_help, mode_sendrecv },
	{ "stream", MODE_STREAM, stream_help, mode_stream },
	{ "rpc", MODE_RPC, rpc_help, mode_rpc },
	{ "fanout", MODE_FANOUT, fanout_help, mode_fanout },
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

const char *
ack_mode_name(enum ack_mode a)
{
	return a == ACK_CLIENT ? "client" : a == ACK_CLIENT_INDIVIDUAL ? "client-individual" : "auto";
}

void
bench_dest_name(char *out, size_t outlen, const struct opts *o, const char *prefix, size_t size,
    int row)
{
	if (o->queue != NULL && strcmp(prefix, "/queue/eft-bench") == 0) {
		snprintf(out, outlen, "/queue/%s", o->queue);
		return;
	}
	bool repeated = false;
	for (int i = 0; i < row && i < o->nsizes; i++)
		if (o->sizes[i] == size)
			repeated = true;
	if (repeated)
		snprintf(out, outlen, "%s-%ld-%ld-%zu-%d", prefix, (long)getpid(), o->run_id, size,
		    row);
	else
		snprintf(out, outlen, "%s-%ld-%ld-%zu", prefix, (long)getpid(), o->run_id, size);
}

static _Noreturn void
usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("eft-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\ntry 'eft-bench --help'\n", stderr);
	exit(EXIT_USAGE);
}

/* A number with an optional k/m suffix worth `kilo` and kilo^2. */
static int
parse_number(const char *s, uint64_t kilo, uint64_t *out)
{
	char *end;
	if (s[0] < '0' || s[0] > '9')
		return -1;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	uint64_t mult = 1;
	if (*end == 'k' || *end == 'K')
		mult = kilo, end++;
	else if (*end == 'm' || *end == 'M')
		mult = kilo * kilo, end++;
	if (*end != '\0' || (mult > 1 && n > UINT64_MAX / mult))
		return -1;
	*out = n * mult;
	return 0;
}

static size_t
parse_size_arg(const char *opt, const char *s)
{
	uint64_t n;
	if (parse_number(s, 1024, &n) != 0)
		usage_error("%s: '%s' is not a size in bytes", opt, s);
	if (n < PAYLOAD_MIN || n > MAX_SIZE)
		usage_error("%s: %s is out of range: sizes run from %d bytes (sequence number, "
		    "time stamp and check value) to 64m", opt, s, PAYLOAD_MIN);
	return (size_t)n;
}

static double
parse_seconds(const char *opt, const char *s)
{
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(d > 0) || d > 1e7)
		usage_error("%s: '%s' is not a positive number of seconds", opt, s);
	return d;
}

static int
parse_int_arg(const char *opt, const char *s, int min, int max)
{
	uint64_t n;
	if (parse_number(s, 1000, &n) != 0 || n < (uint64_t)min || n > (uint64_t)max)
		usage_error("%s: '%s' is not a whole number from %d to %d", opt, s, min, max);
	return (int)n;
}

static void
add_size(struct opts *o, size_t size)
{
	if (o->nsizes == MAX_SIZES)
		usage_error("too many sizes (at most %d)", MAX_SIZES);
	o->sizes[o->nsizes++] = size;
}

enum {
	OPT_LOGIN = 256, OPT_PASSCODE, OPT_VHOST, OPT_SIZES, OPT_SWEEP, OPT_ACK, OPT_CSV,
	OPT_JSON, OPT_INFLIGHT, OPT_RATE, OPT_SUB_HEADER, OPT_SEND_HEADER, OPT_RPC_SUBSCRIBE, OPT_TLS, OPT_CA,
	OPT_INSECURE, OPT_SNI, OPT_WS, OPT_WS_PATH, OPT_WS_BINARY, OPT_PERSISTENT,
	OPT_RECEIPT_WINDOW,
	OPT_CONSUMER_PORT, OPT_WILDCARDS, OPT_QUEUE,
};

static void
parse_options(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "login", required_argument, NULL, OPT_LOGIN },
		{ "passcode", required_argument, NULL, OPT_PASSCODE },
		{ "vhost", required_argument, NULL, OPT_VHOST },
		{ "tls", no_argument, NULL, OPT_TLS },
		{ "ca", required_argument, NULL, OPT_CA },
		{ "insecure", no_argument, NULL, OPT_INSECURE },
		{ "sni", required_argument, NULL, OPT_SNI },
		{ "ws", no_argument, NULL, OPT_WS },
		{ "ws-path", required_argument, NULL, OPT_WS_PATH },
		{ "ws-binary", no_argument, NULL, OPT_WS_BINARY },
		{ "count", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 's' },
		{ "sizes", required_argument, NULL, OPT_SIZES },
		{ "sweep", no_argument, NULL, OPT_SWEEP },
		{ "ack", required_argument, NULL, OPT_ACK },
		{ "sub-header", required_argument, NULL, OPT_SUB_HEADER },
		{ "send-header", required_argument, NULL, OPT_SEND_HEADER },
		{ "timeout", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' },
		{ "csv", no_argument, NULL, OPT_CSV },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "clients", required_argument, NULL, 'c' },
		{ "inflight", required_argument, NULL, OPT_INFLIGHT },
		{ "rpc-subscribe", no_argument, NULL, OPT_RPC_SUBSCRIBE },
		{ "subscribers", required_argument, NULL, 'k' },
		{ "wildcards", required_argument, NULL, OPT_WILDCARDS },
		{ "rate", required_argument, NULL, OPT_RATE },
		{ "persistent", no_argument, NULL, OPT_PERSISTENT },
		{ "receipt-window", required_argument, NULL, OPT_RECEIPT_WINDOW },
		{ "consumer-port", required_argument, NULL, OPT_CONSUMER_PORT },
		{ "queue", required_argument, NULL, OPT_QUEUE },
		{ NULL, 0, NULL, 0 },
	};
	/* Options that belong to one mode: the mode letters that allow them. */
	bool only_rpc = false, only_fanout = false, only_paced = false;
	bool single_size = false, many_sizes = false, ws_options = false;
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":H:p:n:s:t:d:qhc:k:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'H':
			o->host = optarg;
			break;
		case 'p':
			o->port = optarg;
			(void)parse_int_arg("--port", optarg, 1, 65535);
			break;
		case OPT_CONSUMER_PORT:
			o->consumer_port = optarg;
			(void)parse_int_arg("--consumer-port", optarg, 1, 65535);
			break;
		case OPT_QUEUE:
			if (optarg[0] == '\0' || strlen(optarg) > 200 || strpbrk(optarg, "\r\n:") != NULL)
				usage_error("--queue: '%s' is not a queue name (1 to 200 bytes, no "
				    "':' or line ends)", optarg);
			o->queue = optarg;
			break;
		case OPT_LOGIN:
			o->login = optarg;
			break;
		case OPT_PASSCODE:
			o->passcode = optarg;
			break;
		case OPT_VHOST:
			o->vhost = optarg;
			break;
		case OPT_TLS:
			o->tls = true;
			break;
		case OPT_CA:
			o->ca = optarg;
			break;
		case OPT_INSECURE:
			o->insecure = true;
			break;
		case OPT_SNI:
			if (optarg[0] == '\0')
				usage_error("--sni: the name is empty");
			o->sni = optarg;
			break;
		case OPT_WS:
			o->ws = true;
			break;
		case OPT_WS_PATH:
			if (optarg[0] != '/' || strpbrk(optarg, " \t\r\n") != NULL ||
			    strlen(optarg) > 512)
				usage_error("--ws-path: '%s' is not a path such as /ws", optarg);
			o->ws_opts.path = optarg;
			ws_options = true;
			break;
		case OPT_WS_BINARY:
			o->ws_opts.binary = true;
			ws_options = true;
			break;
		case 'n':
			if (parse_number(optarg, 1000, &o->count) != 0 || o->count < 1 ||
			    o->count > MAX_COUNT)
				usage_error("-n: '%s' is not a count from 1 to %llu", optarg,
				    (unsigned long long)MAX_COUNT);
			break;
		case 's':
			o->sizes[0] = parse_size_arg("-s", optarg);
			single_size = true;
			break;
		case OPT_SIZES: {
			char *list = optarg, *tok, *save = NULL;
			for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				add_size(o, parse_size_arg("--sizes", tok));
			many_sizes = true;
			break;
		}
		case OPT_SWEEP:
			for (size_t s = 64; s <= 32768; s *= 2)
				add_size(o, s);
			many_sizes = true;
			break;
		case OPT_ACK:
			if (strcmp(optarg, "auto") == 0)
				o->ack = ACK_AUTO;
			else if (strcmp(optarg, "client") == 0)
				o->ack = ACK_CLIENT;
			else if (strcmp(optarg, "client-individual") == 0)
				o->ack = ACK_CLIENT_INDIVIDUAL;
			else
				usage_error("--ack: '%s' is not auto, client or client-individual", optarg);
			break;
		case OPT_SUB_HEADER:
			if (strchr(optarg, ':') == NULL || optarg[0] == ':')
				usage_error("--sub-header: '%s' is not NAME:VALUE", optarg);
			if (o->nsub_headers == MAX_SUB_HEADERS)
				usage_error("--sub-header: at most %d", MAX_SUB_HEADERS);
			o->sub_headers[o->nsub_headers++] = optarg;
			break;
		case OPT_SEND_HEADER:
			if (strchr(optarg, ':') == NULL || optarg[0] == ':')
				usage_error("--send-header: '%s' is not NAME:VALUE", optarg);
			if (o->nsend_headers == MAX_SUB_HEADERS)
				usage_error("--send-header: at most %d", MAX_SUB_HEADERS);
			o->send_headers[o->nsend_headers++] = optarg;
			break;
		case 't':
			o->timeout_ns = (uint64_t)(parse_seconds("--timeout", optarg) * 1e9);
			break;
		case 'd':
			o->deadline_ns = (uint64_t)(parse_seconds("--duration", optarg) * 1e9);
			break;
		case OPT_CSV:
			o->format = OUT_CSV;
			break;
		case OPT_JSON:
			o->format = OUT_JSON;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'h':
			for (size_t i = 0; i < NMODES; i++)
				if (modes[i].mode == o->mode)
					fputs(modes[i].help, stdout);
			fputs(common_help, stdout);
			exit(0);
		case 'c':
			o->clients = parse_int_arg("-c", optarg, 1, MAX_CONNS);
			only_rpc = true;
			break;
		case OPT_INFLIGHT:
			o->inflight = parse_int_arg("--inflight", optarg, 1, 1000000);
			only_rpc = true;
			break;
		case OPT_RPC_SUBSCRIBE:
			o->rpc_subscribe = true;
			only_rpc = true;
			break;
		case 'k':
			o->subscribers = parse_int_arg("-k", optarg, 1, MAX_CONNS);
			only_fanout = true;
			break;
		case OPT_WILDCARDS:
			o->wildcards = parse_int_arg("--wildcards", optarg, 1, 1000000);
			only_fanout = true;
			break;
		case OPT_RATE: {
			char *end;
			errno = 0;
			o->rate = strtod(optarg, &end);
			if (errno != 0 || end == optarg || *end != '\0' || !(o->rate > 0) ||
			    o->rate > 1e9)
				usage_error("--rate: '%s' is not a positive number of messages per "
				    "second", optarg);
			only_paced = true;
			break;
		}
		case OPT_PERSISTENT:
			o->persistent = true;
			break;
		case OPT_RECEIPT_WINDOW:
			o->receipt_window = parse_int_arg("--receipt-window", optarg, 0, 1000000);
			break;
		case ':':
			usage_error("%s needs a value", argv[optind - 1]);
		default:
			usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (only_rpc && o->mode != MODE_RPC)
		usage_error("-c, --inflight and --rpc-subscribe apply to rpc mode only");
	if (o->wildcards && (o->subscribers > 6 || o->wildcards < o->subscribers))
		usage_error("--wildcards: -k is at most 6 (the patterns that match differ) and at "
		    "most --wildcards");
	if (only_fanout && o->mode != MODE_FANOUT)
		usage_error("-k and --wildcards apply to fanout mode only");
	if (only_paced && o->mode != MODE_STREAM && o->mode != MODE_FANOUT)
		usage_error("--rate applies to stream and fanout modes only");
	if (o->receipt_window > 0 && o->mode == MODE_RPC)
		usage_error("--receipt-window applies to sendrecv, stream and fanout modes only");
	if (single_size && many_sizes)
		usage_error("use -s or --sizes/--sweep, not both");
	if (o->queue != NULL && (o->mode != MODE_SENDRECV && o->mode != MODE_STREAM))
		usage_error("--queue applies to sendrecv and stream modes only");
	if (o->queue != NULL && many_sizes)
		usage_error("--queue takes one size (-s): each size would need a queue of its own");
	if (!o->tls && (o->ca != NULL || o->insecure || o->sni != NULL))
		usage_error("--ca, --insecure and --sni apply with --tls only");
	if (!o->ws && ws_options)
		usage_error("--ws-path and --ws-binary apply with --ws only");
	if (o->ca != NULL && o->insecure)
		usage_error("use --ca or --insecure, not both");
	if (!many_sizes)
		o->nsizes = 1;
}

int
main(int argc, char **argv)
{
	struct opts o = {
		.host = "127.0.0.1", .port = "61613", .login = "guest", .passcode = "guest",
		.vhost = "/", .count = 100000, .sizes = { 1024 }, .ack = ACK_AUTO,
		.format = OUT_TEXT, .timeout_ns = 10000000000ull, .clients = 1, .inflight = 1,
		.subscribers = 4, .ws_opts = { .path = "/ws" },
	};
	int (*run)(const struct opts *, size_t, int, struct result *) = NULL;

	if (argc < 2)
		usage_error("no mode given: sendrecv, stream, rpc or fanout");
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		fputs(general_help, stdout);
		fputs(common_help, stdout);
		return 0;
	}
	for (size_t i = 0; i < NMODES; i++) {
		if (strcmp(argv[1], modes[i].name) == 0) {
			o.mode = modes[i].mode;
			o.mode_name = modes[i].name;
			run = modes[i].run;
		}
	}
	if (run == NULL)
		usage_error("unknown mode '%s': use sendrecv, stream, rpc or fanout", argv[1]);
	parse_options(argc - 1, argv + 1, &o);

	/* A broker that resets the connection must not kill us mid-report. */
	signal(SIGPIPE, SIG_IGN);
	/* Paced sends sleep in ppoll(); Linux lets such sleeps overrun by 50 us
	 * by default, which would show up as broker latency. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	o.progress = !o.quiet && isatty(STDERR_FILENO);
	o.run_id = (long)time(NULL);
	if (o.deadline_ns)
		o.deadline_ns += now_ns();
	size_t max_size = 0;
	for (int i = 0; i < o.nsizes; i++)
		if (o.sizes[i] > max_size)
			max_size = o.sizes[i];
	payload_init(max_size);
	report_init(&o);
	if (o.tls) {
		char err[512];
		o.tls_client = tls_client_new(o.ca, o.insecure, o.sni ? o.sni : o.host, err,
		    sizeof(err));
		if (o.tls_client == NULL) {
			report_error("%s", err);
			return EXIT_USAGE;
		}
		if (o.insecure)
			report_warn("--insecure: the broker's certificate is not verified");
	}

	int status = 0;
	for (int i = 0; i < o.nsizes; i++) {
		struct result r;
		result_init(&r, &o, o.sizes[i]);
		run(&o, o.sizes[i], i, &r);
		/* Nothing was measured, and the next sizes would not get further:
		 * no row, just the reason. */
		if (r.unreached) {
			report_error("%s", r.error);
			status = 1;
			break;
		}
		report_row(&r);
		if (!result_ok(&r)) {
			status = 1;
			if (r.error[0])
				report_error("%s, %zu-byte messages: %s", o.mode_name, o.sizes[i],
				    r.error);
		}
		if (r.expired)
			break;
	}
	report_finish();
	tls_client_free(o.tls_client);
	return status;
}
