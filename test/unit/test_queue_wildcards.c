/* test_queue_wildcards.c - wildcard queue consumers (ActiveMQ's): a
 * SUBSCRIBE to /queue/w.* takes from every queue its pattern matches, the
 * ones there already and the ones made later, competing with each queue's
 * own consumers, with one prefetch window and one ACK list across all its
 * queues; what it had not acknowledged goes back to each message's own
 * queue.  Driven through real connections on the in-memory transport;
 * after every step every destination's bookkeeping is checked
 * (dest_check) and so is each subscription's unacked list. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "eft/broker.h"
#include "eft/conn.h"
#include "eft/server.h"
#include "eft/session.h"
#include "eft/sub.h"
#include "memclient.h"

static struct conn *
client(struct mem_broker *fx, const char *version)
{
	return mem_client(&fx->mc, fx->b, version);
}

static void
check_dest(const struct dest *d, void *arg)
{
	(void)arg;
	const char *why = dest_check(d);
	if (why != NULL)
		fail_msg("%s: %s", dest_name(d), why);
}

/* Every destination's bookkeeping, and c's subscriptions' unacked lists:
 * every delivery on its root's list, the count right. */
static void
check(struct mem_broker *fx, struct conn *c)
{
	dests_foreach(&fx->b->dests, check_dest, NULL);
	struct sub *s, *tmp;
	HASH_ITER(hh, c->session->ep.subs, s, tmp) {
		size_t n = 0;
		for (const struct delivery *dl = s->unacked_head; dl != NULL; dl = dl->next, n++)
			assert_ptr_equal(dl->sub->root, s);
		assert_int_equal(n, s->n_unacked);
		assert_true(s->prefetch == 0 || n <= s->prefetch);
	}
}

/* SUBSCRIBE, its RECEIPT, and what came after it (messages waiting), to free. */
static char *
subscribe(struct mem_broker *fx, struct conn *c, const char *id, const char *dest,
    const char *extra)
{
	char frame[512];
	snprintf(frame, sizeof(frame), "SUBSCRIBE\nid:%s\ndestination:%s\nreceipt:r-%s\n%s\n",
	    id, dest, id, extra);
	feed(c, frame);
	char *out = output(c);
	char want[64];
	snprintf(want, sizeof(want), "RECEIPT\nreceipt-id:r-%s\n", id);
	assert_memory_equal(out, want, strlen(want));
	check(fx, c);
	return out;
}

static void
send_checked(struct mem_broker *fx, struct conn *p, const char *dest, const char *body)
{
	send_to(p, dest, body);
	check(fx, p);
}

/* The MESSAGEs c was sent since last time as "DEST=BODY " each ("r" before
 * one redelivered); their ack ids into acks[] if not NULL. */
static char *
messages_in(char *out, char acks[][48], size_t nacks)
{
	size_t cap = strlen(out) + 1, n = 0, i = 0;
	char *got = malloc(cap);
	assert_non_null(got);
	for (const char *m = out; (m = strstr(m, "MESSAGE\n")) != NULL; ) {
		const char *body = strstr(m, "\n\n"), *end = body ? strchr(body, '|') : NULL;
		assert_non_null(end);
		const char *re = strstr(m, "redelivered:true\n");
		if (re != NULL && re < body)
			got[n++] = 'r';
		const char *dh = strstr(m, "\ndestination:");
		assert_true(dh != NULL && dh < body);
		size_t dlen = strcspn(dh + 13, "\n");
		memcpy(got + n, dh + 13, dlen);
		n += dlen;
		got[n++] = '=';
		memcpy(got + n, body + 2, (size_t)(end - body - 2));
		n += (size_t)(end - body - 2);
		got[n++] = ' ';
		const char *ack = strstr(m, "\nack:");
		if (acks != NULL && ack != NULL && ack < body && i < nacks)
			snprintf(acks[i++], 48, "%.*s", (int)strcspn(ack + 5, "\n"), ack + 5);
		m = end;
	}
	got[n] = '\0';
	free(out);
	return got;
}

static char *
messages(struct conn *c, char acks[][48], size_t nacks)
{
	return messages_in(output(c), acks, nacks);
}

static void
expect(struct conn *c, const char *want)
{
	char *got = messages(c, NULL, 0);
	assert_string_equal(got, want);
	free(got);
}

/* The subscription's RECEIPT was followed by these messages. */
static void
expect_after_receipt(char *out, const char *want)
{
	char *got = messages_in(out, NULL, 0);
	assert_string_equal(got, want);
	free(got);
}

static size_t
depth(struct mem_broker *fx, const char *name)
{
	struct dest *d = dests_find(&fx->b->dests, name, strlen(name));
	return d != NULL ? dest_depth(d) : 0;
}

static size_t
unacked(struct mem_broker *fx, const char *name)
{
	struct dest *d = dests_find(&fx->b->dests, name, strlen(name));
	return d != NULL ? dest_unacked(d) : 0;
}

/* A queue there already and one made later both feed the pattern; queues
 * it does not match (another prefix, one element more) do not; the MESSAGE
 * names the concrete queue. */
static void
test_existing_and_later_queues(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *c = client(fx, "1.2");
	send_checked(fx, p, "/queue/w.a", "1");
	expect_after_receipt(subscribe(fx, c, "s", "/queue/w.*", ""), "/queue/w.a=1 ");
	send_checked(fx, p, "/queue/w.b", "2");
	send_checked(fx, p, "/queue/x.b", "3");
	send_checked(fx, p, "/queue/w.b.c", "4");
	expect(c, "/queue/w.b=2 ");
	assert_int_equal(depth(fx, "/queue/x.b"), 1);
	assert_int_equal(depth(fx, "/queue/w.b.c"), 1);
	/* '>' and '#' as for topics */
	expect_after_receipt(subscribe(fx, c, "t", "/queue/w.>", ""), "/queue/w.b.c=4 ");
	struct conn *r = client(fx, "1.2");
	expect_after_receipt(subscribe(fx, r, "r", "/queue/x.#", ""), "/queue/x.b=3 ");
	send_checked(fx, p, "/queue/x", "5");
	expect(r, "/queue/x=5 ");
}

/* A pattern that begins with a wildcard looks at every queue; one that
 * begins with a name only at the queues that begin with it (dest.c's
 * groups, made when the first pattern comes and dropped with the last). */
static void
test_first_element_wild_or_named(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *c = client(fx, "1.2"), *d = client(fx, "1.2");
	send_checked(fx, p, "/queue/g1.a", "1");
	send_checked(fx, p, "/queue/g2.a", "2");
	send_checked(fx, p, "/queue/g2.b", "3");
	send_checked(fx, p, "/queue/g2", "4");
	char *got = messages_in(subscribe(fx, c, "s", "/queue/*.a", ""), NULL, 0);
	assert_int_equal(count(got, "="), 2);
	assert_non_null(strstr(got, "/queue/g1.a=1 "));
	assert_non_null(strstr(got, "/queue/g2.a=2 "));
	free(got);
	got = messages_in(subscribe(fx, d, "t", "/queue/g2.#", ""), NULL, 0);
	assert_int_equal(count(got, "="), 2);
	assert_non_null(strstr(got, "/queue/g2.b=3 "));
	assert_non_null(strstr(got, "/queue/g2=4 "));
	free(got);
	feed(c, "UNSUBSCRIBE\nid:s\n\n");
	feed(d, "UNSUBSCRIBE\nid:t\n\n");
	check(fx, c);
	/* the groups were dropped with the last pattern and are made again */
	send_checked(fx, p, "/queue/g3.a", "5");
	send_checked(fx, p, "/queue/g2.b", "3b");
	expect_after_receipt(subscribe(fx, d, "u", "/queue/g2.*", ""), "/queue/g2.b=3b ");
	send_checked(fx, p, "/queue/g2.c", "6");
	expect(d, "/queue/g2.c=6 ");
	assert_int_equal(depth(fx, "/queue/g3.a"), 1);
}

/* A wildcard consumer and a queue's own consumer compete: each message goes
 * to one of them, in turn. */
static void
test_one_consumer_per_message(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *plain = client(fx, "1.2"), *wild = client(fx, "1.2");
	free(subscribe(fx, plain, "p", "/queue/w.a", ""));
	free(subscribe(fx, wild, "w", "/queue/w.*", ""));
	for (int i = 0; i < 4; i++) {
		char body[16];
		snprintf(body, sizeof(body), "%d", i);
		send_checked(fx, p, "/queue/w.a", body);
	}
	char *a = messages(plain, NULL, 0), *b = messages(wild, NULL, 0);
	assert_int_equal(count(a, "=") + count(b, "="), 4);
	assert_int_equal(count(a, "="), 2);
	free(a);
	free(b);
	assert_int_equal(depth(fx, "/queue/w.a"), 0);
}

/* Unacknowledged messages from two queues go back each to its own queue
 * when the wildcard subscription ends (UNSUBSCRIBE, then a disconnect),
 * redelivered to the next consumer there. */
static void
test_detach_gives_back_to_each_queue(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *c = client(fx, "1.2"), *d = client(fx, "1.2");
	free(subscribe(fx, c, "s", "/queue/w.*", "ack:client-individual\n"));
	send_checked(fx, p, "/queue/w.a", "1");
	send_checked(fx, p, "/queue/w.b", "2");
	expect(c, "/queue/w.a=1 /queue/w.b=2 ");
	assert_int_equal(unacked(fx, "/queue/w.a"), 1);
	feed(c, "UNSUBSCRIBE\nid:s\n\n");
	check(fx, c);
	assert_int_equal(depth(fx, "/queue/w.a"), 1);
	assert_int_equal(depth(fx, "/queue/w.b"), 1);
	expect_after_receipt(subscribe(fx, d, "a", "/queue/w.a", ""), "r/queue/w.a=1 ");
	/* again, the subscription ending with its connection */
	expect_after_receipt(subscribe(fx, c, "s2", "/queue/w.>", "ack:client\n"), "r/queue/w.b=2 ");
	conn_free(c);
	dests_foreach(&fx->b->dests, check_dest, NULL);
	assert_int_equal(depth(fx, "/queue/w.b"), 1);
	expect_after_receipt(subscribe(fx, d, "b", "/queue/w.b", ""), "r/queue/w.b=2 ");
}

/* One prefetch window across all the queues: with prefetch 1 the second
 * queue's message waits until the first is acknowledged. */
static void
test_prefetch_across_queues(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *c = client(fx, "1.2");
	free(subscribe(fx, c, "s", "/queue/w.*", "ack:client-individual\nactivemq.prefetchSize:1\n"));
	send_checked(fx, p, "/queue/w.a", "1");
	send_checked(fx, p, "/queue/w.b", "2");
	send_checked(fx, p, "/queue/w.c", "3");
	char acks[4][48];
	char *got = messages(c, acks, 4);
	assert_string_equal(got, "/queue/w.a=1 ");
	free(got);
	/* Each ACK opens the window for one more, from either queue left. */
	char frame[128];
	snprintf(frame, sizeof(frame), "ACK\nid:%s\n\n", acks[0]);
	feed(c, frame);
	check(fx, c);
	got = messages(c, acks, 4);
	bool b_first = strcmp(got, "/queue/w.b=2 ") == 0;
	assert_true(b_first || strcmp(got, "/queue/w.c=3 ") == 0);
	free(got);
	assert_int_equal(depth(fx, "/queue/w.b") + depth(fx, "/queue/w.c"), 1);
	/* NACK: back to its own queue; the window open again, one comes */
	snprintf(frame, sizeof(frame), "NACK\nid:%s\n\n", acks[0]);
	feed(c, frame);
	check(fx, c);
	got = messages(c, acks, 4);
	assert_int_equal(count(got, "="), 1);
	free(got);
	assert_int_equal(depth(fx, "/queue/w.b") + depth(fx, "/queue/w.c"), 1);
	assert_int_equal(unacked(fx, "/queue/w.b") + unacked(fx, "/queue/w.c"), 1);
}

/* ack:client covers the earlier messages of the subscription whichever
 * queue they came from; a 1.1 client ACKs by subscription + message-id. */
static void
test_cumulative_ack_across_queues(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *c = client(fx, "1.2"), *old = client(fx, "1.1");
	free(subscribe(fx, c, "s", "/queue/w.*", "ack:client\n"));
	send_checked(fx, p, "/queue/w.a", "1");
	send_checked(fx, p, "/queue/w.b", "2");
	char acks[2][48];
	char *got = messages(c, acks, 2);
	assert_string_equal(got, "/queue/w.a=1 /queue/w.b=2 ");
	free(got);
	char frame[128];
	snprintf(frame, sizeof(frame), "ACK\nid:%s\n\n", acks[1]);
	feed(c, frame);
	check(fx, c);
	assert_int_equal(unacked(fx, "/queue/w.a") + unacked(fx, "/queue/w.b"), 0);

	free(subscribe(fx, old, "o", "/queue/v.*", "ack:client-individual\n"));
	send_checked(fx, p, "/queue/v.a", "3");
	char *out = output(old);
	const char *mid = strstr(out, "\nmessage-id:");
	assert_non_null(mid);
	snprintf(frame, sizeof(frame), "ACK\nsubscription:o\nmessage-id:%.*s\n\n",
	    (int)strcspn(mid + 12, "\n"), mid + 12);
	free(out);
	feed(old, frame);
	check(fx, old);
	assert_int_equal(unacked(fx, "/queue/v.a"), 0);
}

/* A selector applies on every queue; RabbitMQ's exclusive:true is refused
 * with a pattern; a malformed pattern is refused. */
static void
test_selector_and_refusals(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *c = client(fx, "1.2");
	free(subscribe(fx, c, "s", "/queue/w.*", "selector:x = 1\n"));
	feed(p, "SEND\ndestination:/queue/w.a\nx:2\n\nno");
	feed(p, "SEND\ndestination:/queue/w.b\nx:1\n\nyes");
	check(fx, c);
	expect(c, "/queue/w.b=yes ");
	feed(c, "SUBSCRIBE\nid:e\ndestination:/queue/w.*\nexclusive:true\n\n");
	char *out = output(c);
	assert_non_null(strstr(out, "ERROR\n"));
	assert_non_null(strstr(out, "message:wildcard queue subscriptions cannot be exclusive"));
	free(out);
	struct conn *d = client(fx, "1.2");
	feed(d, "SUBSCRIBE\nid:m\ndestination:/queue/w..*\n\n");
	out = output(d);
	assert_non_null(strstr(out, "message:malformed wildcard pattern"));
	free(out);
}

/* activemq.exclusive and activemq.priority apply on each queue the
 * pattern takes from: against a plain consumer, the exclusive wildcard one
 * gets every message; a higher priority one is served first. */
static void
test_exclusive_and_priority_per_queue(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *plain = client(fx, "1.2"), *wild = client(fx, "1.2");
	free(subscribe(fx, plain, "p", "/queue/w.a", ""));
	free(subscribe(fx, wild, "w", "/queue/w.*", "activemq.exclusive:true\n"));
	send_checked(fx, p, "/queue/w.a", "1");
	send_checked(fx, p, "/queue/w.a", "2");
	expect(wild, "/queue/w.a=1 /queue/w.a=2 ");
	expect(plain, "");
	struct conn *hi = client(fx, "1.2");
	free(subscribe(fx, plain, "q", "/queue/v.a", ""));
	free(subscribe(fx, hi, "h", "/queue/v.#", "activemq.priority:9\n"));
	send_checked(fx, p, "/queue/v.a", "3");
	send_checked(fx, p, "/queue/v.a", "4");
	expect(hi, "/queue/v.a=3 /queue/v.a=4 ");
	expect(plain, "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_existing_and_later_queues,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_first_element_wild_or_named,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_one_consumer_per_message,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_detach_gives_back_to_each_queue,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_prefetch_across_queues,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_cumulative_ack_across_queues,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_selector_and_refusals,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_exclusive_and_priority_per_queue,
		    mem_broker_setup, mem_broker_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
