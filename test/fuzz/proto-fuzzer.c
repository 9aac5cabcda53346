/* proto-fuzzer.c - libFuzzer harness for the whole protocol handler: bytes
 * from up to three clients in, the frames the broker sends them out, no
 * network.
 *
 * Input: one seed byte, then segments separated by 0xFF bytes.  Segment i is
 * what client i % 3 sends next; an empty segment means that client hangs up
 * (its stream ends, as on EOF) and a new one takes its place; so does a
 * segment for a client whose connection eft closed (ERROR, DISCONNECT, a
 * slow consumer cut off), which until then must be sent nothing more.  Each
 * client is a real connection on the in-memory transport: its segment is fed
 * in pieces whose sizes the seed picks, and the connection reads each as it
 * would from a socket.  A producer that flow control paused does not read
 * (its bytes wait) until server_flush's check of paused producers lets it
 * go, as eftd's flush and paused timer do.
 *
 * After every step the broker's flush runs, as at the end of a loop turn, and
 * each client's new output is parsed with a second eft parser in the client's
 * negotiated version (unless the seed made the third client a slow reader:
 * it takes nothing, so its output piles up in eftd, as a stuck consumer's
 * does, until it hangs up or is cut off): it must parse, every frame
 * must be CONNECTED, MESSAGE, RECEIPT or ERROR with the headers those need,
 * CONNECTED comes first and once, ERROR has a message header and is the last
 * thing a connection is sent.  Any violation abort()s; ASan and UBSan catch
 * the rest, and a fresh broker per input lets LeakSanitizer see any
 * reference that is never dropped. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "eft/broker.h"
#include "eft/server.h"
#include "eft/conn.h"
#include "eft/log.h"
#include "eft/parser.h"
#include "eft/sub.h"
#include "eft/transport.h"
#include "eft/transport_mem.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NCLIENTS 3
#define SEPARATOR 0xff

#define FUZZER "proto-fuzzer"
#include "check.h"

/* Temp-queue names come from getrandom: make them predictable, so that an
 * input can SEND to /reply-queue/eft.gen-AAAAAAAAAAAAAAAAAAAAAA (the first
 * temp-queue of the input), ...AAAQ (the second) and so on, and replies
 * reach their requester.  Nothing else in eft asks for random bytes. */
static unsigned temp_counter;

ssize_t
getrandom(void *buf, size_t len, unsigned flags)
{
	(void)flags;
	memset(buf, 0, len);
	if (len > 0)
		((unsigned char *)buf)[len - 1] = (unsigned char)temp_counter++;
	return (ssize_t)len;
}

struct client {
	struct conn *c;             /* NULL once eft has freed it */
	struct transport *t;        /* its memory transport (ours to destroy) */
	struct parser out;          /* parses what the broker sent this client */
	enum stomp_version version; /* what CONNECTED said */
	bool connected;             /* CONNECTED seen */
	bool errored;               /* ERROR seen: nothing may follow */
	bool closed;                /* eft shut its side: nothing more may come */
	bool slow;                  /* never reads: output stays queued in eft */
	bool http;                  /* answered as an HTTP client: nothing may follow */
	bool heard;                 /* eft has sent this client something */
	uint8_t *sent;              /* what the client sent; fed to eft up to `read` */
	size_t nsent, read, cap;
};

static struct event_base *base;
static struct client clients[NCLIENTS];
static struct broker *broker;
static uint32_t rng;
static size_t max_piece;
static bool trace; /* PROTO_FUZZER_TRACE=1: print what each client is sent */

static uint32_t
next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	base = event_base_new();
	if (base == NULL)
		abort();
	log_set_level(EFT_LOG_ERROR);
	trace = getenv("PROTO_FUZZER_TRACE") != NULL;
	return 0;
}

/* Output frames are checked with roomy limits: eft's own frames may be a
 * little larger than what it accepts (MESSAGE adds headers). */
static const struct parser_limits out_limits = {
	.max_frame = 1u << 30,
	.max_headers = 1u << 20,
	.max_header_line = 1u << 24,
	.max_body = 0,
};

static void
client_open(struct client *cl, bool slow)
{
	memset(cl, 0, sizeof(*cl));
	cl->slow = slow;
	cl->t = transport_mem_new();
	CHECK(cl->t != NULL, "transport_mem_new failed");
	if (slow)
		transport_mem_set_window(cl->t, 0);
	cl->c = conn_new(broker, cl->t, "mem fuzz");
	CHECK(cl->c != NULL, "conn_new failed");
	parser_init(&cl->out, &out_limits);
}

static bool
has(const struct frame *f, enum hdr_id id)
{
	return frame_get(f, id) != NULL;
}

static const struct header *
header(const struct frame *f, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < f->nhdr; i++)
		if (f->hdr[i].name_len == len && memcmp(f->hdr[i].name, name, len) == 0)
			return &f->hdr[i];
	return NULL;
}

static bool
cmd_is(const struct frame *f, const char *name)
{
	return f->cmd_len == strlen(name) && memcmp(f->cmd_name, name, f->cmd_len) == 0;
}

/* One frame the broker sent to cl, in the order it was sent. */
static void
check_frame(struct client *cl, const struct frame *f)
{
	int n = (int)(f->cmd_len > 40 ? 40 : f->cmd_len);
	CHECK(!cl->errored, "%.*s sent after ERROR", n, f->cmd_name);
	if (cmd_is(f, "CONNECTED")) {
		CHECK(!cl->connected, "second CONNECTED");
		cl->connected = true;
		CHECK(header(f, "session") != NULL, "CONNECTED without session");
		const struct header *v = header(f, "version");
		enum stomp_version ver = STOMP_1_0;
		if (v != NULL) {
			CHECK(v->value_len == 3 && memcmp(v->value, "1.", 2) == 0 &&
			    v->value[2] >= '0' && v->value[2] <= '2', "bad version header");
			ver = (enum stomp_version)(v->value[2] - '0');
			CHECK(header(f, "heart-beat") != NULL, "CONNECTED with version but no heart-beat");
		}
		CHECK(cl->c == NULL || ver == cl->c->session->version,
		    "CONNECTED says 1.%d, session is 1.%d", (int)ver, (int)cl->c->session->version);
		/* From here on the broker escapes headers for this version. */
		cl->out.version = ver;
		cl->version = ver;
	} else if (cmd_is(f, "MESSAGE")) {
		CHECK(cl->connected, "MESSAGE before CONNECTED");
		const struct header *d = frame_get(f, HDR_DESTINATION);
		enum address_kind kind;
		CHECK(d != NULL, "MESSAGE without destination");
		CHECK(address_parse(d->value, d->value_len, true, &kind) == ADDRESS_OK,
		    "MESSAGE from destination '%.*s'", (int)d->value_len, d->value);
		CHECK(has(f, HDR_MESSAGE_ID), "MESSAGE without message-id");
		CHECK(has(f, HDR_CONTENT_LENGTH), "MESSAGE without content-length");
		/* Only a 1.0 subscription made without an id has no subscription header. */
		CHECK(cl->version == STOMP_1_0 || has(f, HDR_SUBSCRIPTION),
		    "1.%d MESSAGE without subscription", (int)cl->version);
		CHECK(!has(f, HDR_ACK) || cl->version == STOMP_1_2, "ack header before 1.2");
	} else if (cmd_is(f, "RECEIPT")) {
		CHECK(cl->connected, "RECEIPT before CONNECTED");
		CHECK(header(f, "receipt-id") != NULL, "RECEIPT without receipt-id");
	} else if (cmd_is(f, "ERROR")) {
		const struct header *m = header(f, "message");
		CHECK(m != NULL && m->value_len > 0, "ERROR without message");
		CHECK(has(f, HDR_CONTENT_LENGTH), "ERROR without content-length");
		cl->errored = true;
	} else {
		CHECK(false, "unexpected command '%.*s'", n, f->cmd_name);
	}
}

/* The broker's own bookkeeping, checked whenever it is at rest: each
 * destination's (dest_check), and each session's lists and counts. */
static void
check_dest(const struct dest *d, void *arg)
{
	(void)arg;
	const char *why = dest_check(d);
	CHECK(why == NULL, "%s: %s", dest_name(d), why);
}

static void
check_broker(void)
{
	dests_foreach(&broker->dests, check_dest, NULL);
	for (struct conn *c = broker->set->conns; c != NULL; c = c->next) {
		size_t unacked = 0;
		struct sub *s, *stmp;
		HASH_ITER(hh, c->session->ep.subs, s, stmp) {
			CHECK(s->ep == &c->session->ep, "subscription '%s' of another session", s->id);
			size_t n = 0;
			for (struct delivery *dl = s->unacked_head; dl != NULL; dl = dl->next) {
				CHECK(dl->sub->root == s && (dl->next == NULL || dl->next->prev == dl),
				    "'%s': unacked list", s->id);
				n++;
			}
			CHECK(n == s->n_unacked, "'%s': %zu unacked listed, n_unacked %zu", s->id, n,
			    s->n_unacked);
			CHECK(s->prefetch == 0 || n <= s->prefetch, "'%s': %zu unacked, prefetch %u",
			    s->id, n, s->prefetch);
			unacked += n;
		}
		CHECK(unacked == HASH_COUNT(c->session->ep.deliveries), "%zu unacked listed, %u in the hash",
		    unacked, HASH_COUNT(c->session->ep.deliveries));
	}
}

static void
count_ref(const struct msg *m, bool redelivered, void *arg)
{
	(void)redelivered;
	(void)arg;
	CHECK(m->refs == 1, "message %llu has %u references", (unsigned long long)m->id, m->refs);
}

static void
check_idle_dest(const struct dest *d, void *arg)
{
	size_t *bytes = arg;
	/* A queue declared with x- arguments is kept empty, as RabbitMQ's are. */
	CHECK(dest_kind(d) == DEST_QUEUE && (dest_depth(d) > 0 || dest_has_own_policy(d)) &&
	    dest_temp(d) == NULL && dest_subscribers(d) == 0, "%s: kept with nobody connected",
	    dest_name(d));
	dest_foreach_queued(d, count_ref, NULL);
	*bytes += dest_bytes(d);
}

/* Once every connection is gone only queued and scheduled messages are
 * left, each held once, and message memory accounting agrees. */
static void
check_broker_idle(void)
{
	CHECK(broker->set->conns == NULL && broker->set->nconns == 0 && broker->set->paused == NULL,
	    "connections left");
	size_t bytes = 0;
	dests_foreach(&broker->dests, check_idle_dest, &bytes);
	/* Scheduled messages wait for their time (it does not come here). */
	for (size_t i = 0; i < broker->sched.n; i++) {
		const struct msg *m = broker->sched.heap[i]->m;
		CHECK(m->refs == 1, "scheduled message %llu has %u references",
		    (unsigned long long)m->id, m->refs);
		bytes += m->size;
	}
	CHECK(bytes == broker->msg_pool.live_bytes, "live_bytes %zu, queued %zu",
	    broker->msg_pool.live_bytes, bytes);
}

/* Check what the broker wrote to cl since last time, frame by frame, taking
 * it out as the client would read it. */
static void
client_take_output(struct client *cl)
{
	struct evbuffer *out = transport_mem_output(cl->t);
	size_t len = evbuffer_get_length(out);
	CHECK(!(cl->closed && len > 0), "%zu bytes sent after the connection was shut", len);
	static const char http_answer[] = "HTTP/1.1 400 Bad Request\r\n";
	if (len > 0 && !cl->heard &&
	    len >= sizeof(http_answer) - 1 &&
	    memcmp(evbuffer_pullup(out, sizeof(http_answer) - 1), http_answer,
		sizeof(http_answer) - 1) == 0) {
		/* A request line eftd took for HTTP ("GET ", "CONNECT " with
		 * its space): the 400 answer is all it may send, and it
		 * closes. */
		CHECK(!cl->http, "a second HTTP answer");
		cl->http = true;
		CHECK(evbuffer_drain(out, len) == 0, "evbuffer_drain");
		len = 0;
	}
	CHECK(!(cl->http && len > 0), "%zu bytes sent after the HTTP answer", len);
	if (len > 0) {
		cl->heard = true;
		size_t avail;
		char *space = parser_space(&cl->out, len, &avail);
		CHECK(space != NULL, "parser_space failed");
		CHECK(evbuffer_remove(out, space, len) == (int)len, "evbuffer_remove");
		parser_commit(&cl->out, len);
		if (trace) {
			fprintf(stderr, "--- client %d is sent:\n", (int)(cl - clients));
			for (size_t i = 0; i < len; i++)
				fputs(space[i] == '\0' ? "^@\n" : (char[2]){ space[i], 0 }, stderr);
		}
		for (;;) {
			struct frame *f;
			enum parser_result r = parser_next(&cl->out, &f);
			CHECK(r != PARSE_ERROR, "malformed output frame: %s", parser_error(&cl->out));
			if (r == PARSE_NEED_MORE)
				break;
			check_frame(cl, f);
		}
		/* eft writes whole frames. */
		CHECK(!parser_mid_frame(&cl->out), "output ends inside a frame");
	}
	if (transport_mem_closed(cl->t)) {
		cl->c = NULL; /* eft freed it (a slow consumer cut off) */
		cl->closed = true;
	} else if (cl->c->state == CONN_LINGER) {
		cl->closed = true; /* all written: nothing more may come */
	}
	CHECK(!transport_mem_shut(cl->t) || cl->closed, "shut while not lingering");
	if ((cl->errored || cl->http) && cl->c != NULL)
		CHECK(conn_is_closing(cl->c), "ERROR or HTTP answer sent but the connection stays open");
}

/* The end of a loop turn: eft writes what it has, looks at paused
 * producers, and every client's output is checked. */
static void
take_all_output(void)
{
	server_flush(broker);
	for (int i = 0; i < NCLIENTS; i++)
		if (clients[i].t != NULL)
			client_take_output(&clients[i]);
	check_broker();
}

static void
client_close(struct client *cl)
{
	/* EOF: a connection that reads sees it and frees itself; one that does
	 * not (paused, writing its last output) would hear of it from a failed
	 * write: free it as that would. */
	if (cl->c != NULL)
		transport_mem_end(cl->t);
	if (!transport_mem_closed(cl->t))
		conn_free(cl->c);
	transport_mem_destroy(cl->t);
	cl->t = NULL;
	cl->c = NULL;
	parser_free(&cl->out);
	free(cl->sent);
	cl->sent = NULL;
	/* Requeued messages may have gone to the others. */
	take_all_output();
}

static void
client_send(struct client *cl, const uint8_t *bytes, size_t n)
{
	if (cl->nsent + n > cl->cap) {
		size_t cap = cl->cap ? cl->cap : 256;
		while (cap < cl->nsent + n)
			cap *= 2;
		uint8_t *p = realloc(cl->sent, cap);
		CHECK(p != NULL, "out of memory");
		cl->sent = p;
		cl->cap = cap;
	}
	memcpy(cl->sent + cl->nsent, bytes, n);
	cl->nsent += n;
}

/* Would eftd read from this client now? */
static bool
readable(const struct client *cl)
{
	return cl->c != NULL && !conn_is_closing(cl->c) && cl->t->want_read &&
	    (cl->read < cl->nsent || transport_mem_unread(cl->t) > 0);
}

/* One read: what a paused client left unread, or a piece of what cl sent,
 * then everything that follows from it. */
static void
client_step(struct client *cl)
{
	if (transport_mem_unread(cl->t) > 0) {
		transport_mem_poll(cl->t);
	} else {
		size_t piece = 1 + next_rand() % max_piece;
		if (piece > cl->nsent - cl->read)
			piece = cl->nsent - cl->read;
		size_t at = cl->read;
		cl->read += piece;
		transport_mem_feed(cl->t, cl->sent + at, piece);
	}
	take_all_output();
}

/* Read from every client with bytes waiting until none can be read. */
static void
pump(void)
{
	bool progress = true;
	while (progress) {
		progress = false;
		for (int i = 0; i < NCLIENTS; i++) {
			struct client *cl = &clients[i];
			if (cl->c == NULL || conn_is_closing(cl->c))
				cl->read = cl->nsent; /* eftd stopped reading it */
			if (readable(cl)) {
				client_step(cl);
				progress = true;
			}
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (trace) fprintf(stderr, "=== input of %zu bytes\n", size);
	uint8_t seed = data[0];
	data++;
	size--;

	/* Seed bits: 0-2 the largest piece (1 to 64 bytes, or whole segments),
	 * 3 queue limits of 3 messages and 1 KB or of 50 messages, 4
	 * max-memory 2 KB (a few messages) or 1 MB, 5 output-high-water 4 KB
	 * (the minimum) or the default, 6 message-cache off or 64 KB, 7 whether
	 * the third client is slow: it never reads, so its output (references
	 * to large bodies included) is still queued when it hangs up. */
	unsigned shift = seed & 7;
	max_piece = shift == 7 ? size + 1 : (size_t)1 << shift;
	rng = 0x9e3779b9u ^ seed;
	struct config cfg;
	config_defaults(&cfg);
	cfg.log_level = EFT_LOG_ERROR;
	cfg.max_frame_size = 64 * 1024;
	cfg.max_headers = 64;
	cfg.max_header_line = 1024;
	cfg.max_body_size = 32 * 1024;
	cfg.max_subscriptions = 8;
	cfg.policy.max_queue_messages = (seed & 8) ? 3 : 50;
	cfg.policy.max_queue_bytes = (seed & 8) ? 1024 : 0;
	cfg.max_memory = (seed & 16) ? 2048 : 1024 * 1024;
	cfg.output_high_water = (seed & 32) ? 4096 : cfg.output_high_water;
	cfg.message_cache = (seed & 64) ? 64 * 1024 : 0;
	/* Message lifetimes ride on the same bits: a dead-letter queue with the
	 * small memory limit, a redelivery limit with some piece sizes, drop-head
	 * with the small queues, and a TTL policy for /queue/ttl.*. */
	if (seed & 16)
		snprintf(cfg.policy.dead_letter_queue, sizeof(cfg.policy.dead_letter_queue), "/queue/dlq");
	cfg.policy.max_redeliveries = (seed & 2) ? 2 : 0;
	cfg.policy.overflow = (seed & 9) == 9 ? OVERFLOW_DROP_HEAD : OVERFLOW_BLOCK;
	char err[256];
	CHECK(config_set(&cfg, "policy", "/queue/ttl.* message-ttl=1 max-redeliveries=1", err,
	    sizeof(err)) == 0 && config_check(&cfg, err, sizeof(err)) == 0, "config");
	temp_counter = 0;
	broker = server_new(base, &cfg);
	CHECK(broker != NULL, "server_new failed");
	bool slow = seed & 128;
	for (int i = 0; i < NCLIENTS; i++)
		client_open(&clients[i], slow && i == NCLIENTS - 1);

	size_t seg = 0, start = 0;
	for (size_t i = 0; i <= size; i++) {
		if (i < size && data[i] != SEPARATOR)
			continue;
		struct client *cl = &clients[seg++ % NCLIENTS];
		if (i == start) {
			/* The client hangs up; someone new connects in its place. */
			client_close(cl);
			client_open(cl, cl->slow);
		} else {
			/* eftd ends a closing connection once its output is
			 * written (or its grace period ends); the client then
			 * connects again. */
			if (cl->c == NULL || conn_is_closing(cl->c)) {
				client_close(cl);
				client_open(cl, cl->slow);
			}
			/* Behind whatever a paused client could not send yet. */
			client_send(cl, data + start, i - start);
		}
		pump();
		start = i + 1;
	}
	take_all_output();

	/* Hang up in an order the input decides. */
	unsigned first = next_rand() % NCLIENTS;
	for (unsigned i = 0; i < NCLIENTS; i++)
		client_close(&clients[(first + i) % NCLIENTS]);
	check_broker_idle();
	server_free(broker);
	broker = NULL;
	return 0;
}
