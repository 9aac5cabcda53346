/* test_oom.c - what eftd promises when memory runs out, tried at every
 * allocation in turn.
 *
 * malloc, calloc and realloc are wrapped (the Makefile links this test with
 * -Wl,--wrap=...), and libevent is given the same functions, so that the Nth
 * allocation from here on can be made to fail, for N = 0, 1, 2, ... until a
 * run needs no failure at all.  For each N:
 *   - a COMMIT applies all of its SENDs or none of them;
 *   - the frames a subscriber is sent are whole: a MESSAGE is never left
 *     half-written in its output;
 *   - messages handed out and given back (NACK, a consumer gone) are never
 *     lost, even when no allocation at all succeeds.
 * The loops end at the first N that needs no failure, so they cover every
 * allocation the scenario makes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "eft/broker.h"
#include "eft/server.h"
#include "eft/conn.h"
#include "eft/parser.h"
#include "eft/transport_mem.h"

#include "failalloc.h"

/* ---- a broker and its connections ---- */

struct world {
	struct event_base *base;
	struct config cfg;
	struct broker *b;
	struct transport *mem[8];
	int nmem;
};

static void
world_open(struct world *w)
{
	memset(w, 0, sizeof(*w));
	w->base = event_base_new();
	assert_non_null(w->base);
	config_defaults(&w->cfg);
	w->cfg.message_cache = 0; /* every message allocates afresh */
	w->b = server_new(w->base, &w->cfg);
	assert_non_null(w->b);
}

static void
world_close(struct world *w)
{
	server_free(w->b);
	for (int i = 0; i < w->nmem; i++)
		transport_mem_destroy(w->mem[i]);
	event_base_free(w->base);
}

/* A connected client.  Its transport is what the test keeps: eft may free
 * the connection (the transport then says so), never the transport. */
static struct transport *
client(struct world *w)
{
	struct transport *t = transport_mem_new();
	assert_non_null(t);
	w->mem[w->nmem++] = t;
	assert_non_null(conn_new(w->b, t, "mem oom"));
	static const char connect[] = "CONNECT\naccept-version:1.2\nhost:/\n\n";
	transport_mem_feed(t, connect, sizeof(connect));
	return t;
}

static void
feed(struct transport *t, const char *frame)
{
	transport_mem_feed(t, frame, strlen(frame) + 1);
}

/* A SEND to dest with a body of `size` bytes and its content-length (2 KB or
 * more goes out by reference), plus extra header lines. */
static void
send_sized(struct transport *t, const char *dest, const char *extra, size_t size)
{
	char head[256];
	int n = snprintf(head, sizeof(head), "SEND\ndestination:%s\n%scontent-length:%zu\n\n",
	    dest, extra, size);
	char *frame = __real_malloc((size_t)n + size + 1);
	assert_non_null(frame);
	memcpy(frame, head, (size_t)n);
	memset(frame + n, 'b', size);
	frame[(size_t)n + size] = '\0';
	transport_mem_feed(t, frame, (size_t)n + size + 1);
	free(frame);
}

/* Every frame t was sent since last time, checked whole: the commands seen
 * are appended to `seen` (one letter each: C, M, R, E). */
static void
take_frames(struct world *w, struct transport *t, char *seen, size_t seen_len)
{
	server_flush(w->b);
	struct evbuffer *out = transport_mem_output(t);
	size_t n = evbuffer_get_length(out);
	struct parser p;
	struct parser_limits lim = { .max_frame = 1u << 30, .max_headers = 1u << 20,
		.max_header_line = 1u << 24, .max_body = 0 };
	parser_init(&p, &lim);
	p.version = STOMP_1_2;
	if (n > 0) {
		size_t avail;
		char *space = parser_space(&p, n, &avail);
		assert_non_null(space);
		evbuffer_remove(out, space, n);
		parser_commit(&p, n);
	}
	struct frame *f;
	enum parser_result r;
	while ((r = parser_next(&p, &f)) == PARSE_FRAME) {
		size_t used = strlen(seen);
		if (used + 1 < seen_len) {
			seen[used] = f->cmd_name[0];
			seen[used + 1] = '\0';
		}
	}
	if (r == PARSE_ERROR || parser_mid_frame(&p)) {
		print_error("output is not whole frames: %s\n", r == PARSE_ERROR ?
		    parser_error(&p) : "it ends inside a frame");
		fail();
	}
	parser_free(&p);
}

static size_t
depth(struct world *w, const char *name)
{
	struct dest *d = dests_find(&w->b->dests, name, strlen(name));
	return d ? dest_depth(d) : 0;
}

/* ---- the promises ---- */

static void
test_commit_applies_all_or_none(void **state)
{
	(void)state;
	long n = 0, applied = 0, refused = 0;
	for (;; n++) {
		struct world w;
		world_open(&w);
		struct transport *t = client(&w);
		feed(t, "SEND\ndestination:/queue/a\n\nbefore");
		feed(t, "BEGIN\ntransaction:t\n\n");
		feed(t, "SEND\ndestination:/queue/a\ntransaction:t\n\none");
		feed(t, "SEND\ndestination:/queue/b\ntransaction:t\n\ntwo");
		send_sized(t, "/queue/a", "transaction:t\n", 3000);
		char seen[32] = "";
		take_frames(&w, t, seen, sizeof(seen));
		assert_string_equal(seen, "C");
		assert_int_equal(depth(&w, "/queue/a"), 1);

		fail_after(n);
		feed(t, "COMMIT\ntransaction:t\nreceipt:c\n\n");
		long failures = failed;
		fail_after(-1);
		seen[0] = '\0';
		if (!transport_mem_closed(t))
			take_frames(&w, t, seen, sizeof(seen));
		size_t a = depth(&w, "/queue/a"), b = depth(&w, "/queue/b");
		if (a == 3 && b == 1) {
			applied++;
		} else if (a == 1 && b == 0) {
			refused++;
			assert_true(failures > 0);
			assert_null(strchr(seen, 'R')); /* no RECEIPT for what did not happen */
		} else {
			print_error("allocation %ld failing: /queue/a holds %zu, /queue/b %zu: "
			    "a COMMIT half applied\n", n, a, b);
			fail();
		}
		world_close(&w);
		if (failures == 0)
			break;
	}
	/* Both outcomes were seen, and the loop reached the end. */
	assert_true(applied > 0 && refused > 0);
}

static void
test_messages_are_whole_or_absent(void **state)
{
	(void)state;
	for (long n = 0;; n++) {
		struct world w;
		world_open(&w);
		struct transport *sub = client(&w);
		struct transport *p = client(&w);
		feed(sub, "SUBSCRIBE\nid:s\ndestination:/queue/m\n\n");
		feed(sub, "SUBSCRIBE\nid:t\ndestination:/topic/m\n\n");
		char seen[64] = "";
		take_frames(&w, sub, seen, sizeof(seen));
		take_frames(&w, p, seen, sizeof(seen));
		seen[0] = '\0';

		fail_after(n);
		/* Small bodies are copied; 2 KB or more go by reference. */
		feed(p, "SEND\ndestination:/queue/m\n\nsmall");
		send_sized(p, "/topic/m", "", 4096);
		send_sized(p, "/queue/m", "", 4096);
		long failures = failed;
		fail_after(-1);
		if (!transport_mem_closed(sub))
			take_frames(&w, sub, seen, sizeof(seen));
		world_close(&w);
		if (failures == 0) {
			assert_string_equal(seen, "MMM"); /* nothing failed: all three came */
			break;
		}
	}
}

/* Every message id 1..n is queued exactly once. */
static void
note_id(const struct msg *m, bool redelivered, void *arg)
{
	(void)redelivered;
	unsigned *seen = arg;
	assert_true(m->id >= 1 && m->id <= 64);
	seen[m->id]++;
}

static void
assert_all_queued_once(struct world *w, const char *name, unsigned n)
{
	struct dest *d = dests_find(&w->b->dests, name, strlen(name));
	assert_non_null(d);
	const char *why = dest_check(d);
	if (why != NULL) {
		print_error("%s: %s\n", name, why);
		fail();
	}
	unsigned seen[65] = { 0 };
	dest_foreach_queued(d, note_id, seen);
	for (unsigned id = 1; id <= n; id++) {
		if (seen[id] != 1) {
			print_error("%s: message %u queued %u times\n", name, id, seen[id]);
			fail();
		}
	}
	assert_int_equal(dest_depth(d), n);
}

static void
test_given_back_messages_are_never_lost(void **state)
{
	(void)state;
	for (long n = 0;; n++) {
		struct world w;
		world_open(&w);
		struct transport *p = client(&w);
		/* 16 messages (ids 1-16), all handed out, then 16 more (17-32)
		 * queued behind them: the ring must have kept room for the 16. */
		for (int i = 0; i < 16; i++)
			send_sized(p, "/queue/g", "", i % 2 ? 10 : 5000);
		struct transport *c1 = client(&w), *c2 = client(&w);
		feed(c1, "SUBSCRIBE\nid:s\ndestination:/queue/g\n"
		    "ack:client-individual\nprefetch-count:8\n\n");
		feed(c2, "SUBSCRIBE\nid:s\ndestination:/queue/g\nack:client\n"
		    "prefetch-count:8\n\n");
		char seen[64] = "";
		take_frames(&w, c1, seen, sizeof(seen));
		take_frames(&w, c2, seen, sizeof(seen));
		assert_int_equal(depth(&w, "/queue/g"), 0);
		for (int i = 0; i < 16; i++)
			send_sized(p, "/queue/g", "", i % 2 ? 5000 : 10);
		assert_int_equal(depth(&w, "/queue/g"), 16);

		/* c1 gives back the eight it holds (ids 1, 3, 5, ... or whichever:
		 * by subscription and message-id), one frame each, while
		 * allocation n fails. */
		char nacks[1024] = "";
		size_t len = 0;
		for (int id = 1; id <= 16; id++)
			len += (size_t)snprintf(nacks + len, sizeof(nacks) - len,
			    "NACK\nsubscription:s\nmessage-id:%d\n\n", id) + 1;
		fail_after(n);
		transport_mem_feed(c1, nacks, len);
		long failures = failed;
		fail_after(-1);
		/* Then both consumers go (after reading what they were sent, an
		 * ERROR perhaps): everything must be back in the queue, once. */
		if (!transport_mem_closed(c1))
			take_frames(&w, c1, seen, sizeof(seen));
		transport_mem_end(c1);
		transport_mem_end(c2);
		assert_true(transport_mem_closed(c1));
		assert_true(transport_mem_closed(c2));
		assert_all_queued_once(&w, "/queue/g", 32);
		world_close(&w);
		if (failures == 0)
			break;
	}
}

static void
test_nothing_can_be_allocated_and_nothing_is_lost(void **state)
{
	(void)state;
	struct world w;
	world_open(&w);
	struct transport *p = client(&w);
	for (int i = 0; i < 10; i++)
		send_sized(p, "/queue/z", "", 3000);
	struct transport *c = client(&w);
	feed(c, "SUBSCRIBE\nid:s\ndestination:/queue/z\nack:client\n\n");
	char seen[64] = "";
	take_frames(&w, c, seen, sizeof(seen));
	assert_int_equal(depth(&w, "/queue/z"), 0);
	/* Not one allocation succeeds while the consumer goes. */
	fail_after(0);
	transport_mem_end(c);
	assert_true(transport_mem_closed(c));
	fail_after(-1);
	assert_all_queued_once(&w, "/queue/z", 10);
	world_close(&w);
}

int
main(void)
{
	/* libevent allocates through the same failing functions. */
	event_set_mem_functions(__wrap_malloc, __wrap_realloc, free);
	log_set_level(EFT_LOG_QUIET); /* "out of memory" at every step otherwise */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commit_applies_all_or_none),
		cmocka_unit_test(test_messages_are_whole_or_absent),
		cmocka_unit_test(test_given_back_messages_are_never_lost),
		cmocka_unit_test(test_nothing_can_be_allocated_and_nothing_is_lost),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
