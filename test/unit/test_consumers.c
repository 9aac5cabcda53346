/* test_consumers.c - a queue's consumers: exclusive ones (activemq.exclusive,
 * x-single-active-consumer), consumer priorities (activemq.priority,
 * x-priority), RabbitMQ's exclusive queues (exclusive:true) and bad values
 * of those headers, driven through real connections on the in-memory
 * transport.  After every step the queue's own bookkeeping is checked
 * (dest_check): the ready list in priority order, the standby list, the
 * lock. */
#include <stdarg.h>
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
#include "eft/sub.h"
#include "memclient.h"

static struct conn *
client(struct mem_broker *fx)
{
	return mem_client(&fx->mc, fx->b, "1.2");
}

/* The queue's bookkeeping holds (if it is still there). */
static void
check(struct mem_broker *fx, const char *name)
{
	struct dest *d = dests_find(&fx->b->dests, name, strlen(name));
	const char *why = d != NULL ? dest_check(d) : NULL;
	if (why != NULL)
		fail_msg("%s: %s", name, why);
}

/* SUBSCRIBE to /queue/q with id and extra header lines, and its RECEIPT. */
static void
subscribe(struct mem_broker *fx, struct conn *c, const char *id, const char *extra)
{
	char frame[512];
	snprintf(frame, sizeof(frame), "SUBSCRIBE\nid:%s\ndestination:/queue/q\nreceipt:r-%s\n%s\n",
	    id, id, extra);
	feed(c, frame);
	char *out = output(c);
	char want[64];
	snprintf(want, sizeof(want), "RECEIPT\nreceipt-id:r-%s\n", id);
	assert_memory_equal(out, want, strlen(want));
	free(out);
	check(fx, "/queue/q");
}

static void
unsubscribe(struct mem_broker *fx, struct conn *c, const char *id)
{
	char frame[128];
	snprintf(frame, sizeof(frame), "UNSUBSCRIBE\nid:%s\n\n", id);
	feed(c, frame);
	check(fx, "/queue/q");
}

/* n messages "PREFIX0".. to /queue/q. */
static void
send_n(struct mem_broker *fx, struct conn *p, const char *prefix, int n)
{
	for (int i = 0; i < n; i++) {
		char frame[128];
		snprintf(frame, sizeof(frame), "SEND\ndestination:/queue/q\n\n%s%d", prefix, i);
		feed(p, frame);
	}
	check(fx, "/queue/q");
}

/* The bodies of the MESSAGEs c was sent since last time, each followed by
 * a space, "r" before one that is redelivered. */
static char *
bodies(struct conn *c)
{
	char *out = output(c);
	size_t cap = strlen(out) + 1, n = 0;
	char *got = malloc(cap);
	assert_non_null(got);
	for (const char *m = out; (m = strstr(m, "MESSAGE\n")) != NULL; ) {
		const char *body = strstr(m, "\n\n"), *end = body ? strchr(body, '|') : NULL;
		assert_non_null(end);
		const char *re = strstr(m, "redelivered:true\n");
		if (re != NULL && re < body)
			got[n++] = 'r';
		memcpy(got + n, body + 2, (size_t)(end - body - 2));
		n += (size_t)(end - body - 2);
		got[n++] = ' ';
		m = end;
	}
	got[n] = '\0';
	free(out);
	return got;
}

static void
expect_bodies(struct conn *c, const char *want)
{
	char *got = bodies(c);
	assert_string_equal(got, want);
	free(got);
}

/* The ack id of the first MESSAGE in out (a client-individual one). */
static void
ack_first(struct mem_broker *fx, struct conn *c, const char *out)
{
	const char *ack = strstr(out, "\nack:");
	assert_non_null(ack);
	char frame[128];
	snprintf(frame, sizeof(frame), "ACK\nid:%.*s\n\n", (int)strcspn(ack + 5, "\n"), ack + 5);
	feed(c, frame);
	check(fx, "/queue/q");
}

/* An exclusive consumer gets every message; a plain one and a second
 * exclusive one stand by.  When it unsubscribes the other exclusive one
 * takes over (not the plain one, which came earlier); when that one goes,
 * the plain one has the queue. */
static void
test_exclusive_takes_over_in_turn(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *plain = client(fx), *a = client(fx), *b = client(fx);
	subscribe(fx, plain, "plain", "");
	subscribe(fx, a, "a", "activemq.exclusive:true\n");
	subscribe(fx, b, "b", "activemq.exclusive:TRUE\n");
	send_n(fx, p, "m", 4);
	expect_bodies(a, "m0 m1 m2 m3 ");
	expect_bodies(b, "");
	expect_bodies(plain, "");
	unsubscribe(fx, a, "a");
	send_n(fx, p, "n", 2);
	expect_bodies(b, "n0 n1 ");
	expect_bodies(plain, "");
	unsubscribe(fx, b, "b");
	send_n(fx, p, "o", 2);
	expect_bodies(plain, "o0 o1 ");
}

/* The exclusive consumer's connection closes with messages unacknowledged:
 * the next one gets them first, redelivered and in order, then the rest. */
static void
test_exclusive_disconnect_redelivers_to_the_next(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *a = client(fx), *b = client(fx);
	subscribe(fx, a, "a", "activemq.exclusive:true\nack:client\n");
	subscribe(fx, b, "b", "activemq.exclusive:true\nack:client\n");
	send_n(fx, p, "m", 3);
	expect_bodies(a, "m0 m1 m2 ");
	conn_free(a);
	check(fx, "/queue/q");
	send_n(fx, p, "n", 1);
	expect_bodies(b, "rm0 rm1 rm2 n0 ");
}

/* RabbitMQ's single active consumer: the others wait, and take over in
 * the order they came. */
static void
test_single_active_consumer_in_order_of_arrival(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *c[3];
	const char *ids[3] = { "s0", "s1", "s2" };
	for (int i = 0; i < 3; i++) {
		c[i] = client(fx);
		subscribe(fx, c[i], ids[i], "x-single-active-consumer:true\n");
	}
	for (int i = 0; i < 3; i++) {
		send_n(fx, p, ids[i], 2);
		char want[32];
		snprintf(want, sizeof(want), "%s0 %s1 ", ids[i], ids[i]);
		expect_bodies(c[i], want);
		for (int j = i + 1; j < 3; j++)
			expect_bodies(c[j], "");
		unsubscribe(fx, c[i], ids[i]);
	}
	assert_null(dests_find(&fx->b->dests, "/queue/q", 8));
}

/* A later exclusive subscriber with a higher priority takes over at once
 * (as ActiveMQ does); the one it displaced takes over again after it. */
static void
test_exclusive_with_a_higher_priority_takes_over(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *low = client(fx), *same = client(fx), *high = client(fx);
	subscribe(fx, low, "low", "activemq.exclusive:true\n");
	subscribe(fx, same, "same", "activemq.exclusive:true\n");
	send_n(fx, p, "a", 1);
	expect_bodies(low, "a0 ");
	subscribe(fx, high, "high", "activemq.exclusive:true\nactivemq.priority:9\n");
	send_n(fx, p, "b", 2);
	expect_bodies(high, "b0 b1 ");
	expect_bodies(low, "");
	unsubscribe(fx, high, "high");
	send_n(fx, p, "c", 1);
	expect_bodies(low, "c0 ");
	expect_bodies(same, "");
}

/* Higher priority first while it has room (prefetch 1, no ACK): the lower
 * one gets the rest.  An ACK makes room: the next message goes up again. */
static void
test_priority_first_while_it_has_room(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *low = client(fx), *high = client(fx);
	subscribe(fx, low, "low", "");
	subscribe(fx, high, "high", "activemq.priority:5\nack:client-individual\nprefetch-count:1\n");
	send_n(fx, p, "m", 4);
	char *out = output(high);
	assert_int_equal(count(out, "MESSAGE\n"), 1);
	assert_non_null(strstr(out, "\n\nm0|"));
	expect_bodies(low, "m1 m2 m3 ");
	ack_first(fx, high, out);
	free(out);
	send_n(fx, p, "n", 2);
	expect_bodies(high, "n0 ");
	expect_bodies(low, "n1 ");
}

/* RabbitMQ's x-priority may be negative: 0 outranks it.  Among equals it
 * is round-robin, as without priorities. */
static void
test_priority_levels_and_equals_in_turn(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *neg = client(fx), *a = client(fx), *b = client(fx),
	    *zero = client(fx);
	subscribe(fx, neg, "neg", "x-priority:-3\n");
	subscribe(fx, a, "a", "x-priority:7\nack:client\nprefetch-count:2\n");
	subscribe(fx, zero, "zero", "ack:client\nprefetch-count:1\n");
	subscribe(fx, b, "b", "x-priority:7\nack:client\nprefetch-count:2\n");
	send_n(fx, p, "m", 7);
	expect_bodies(a, "m0 m2 ");
	expect_bodies(b, "m1 m3 ");
	expect_bodies(zero, "m4 ");
	expect_bodies(neg, "m5 m6 ");
	/* What a and b had goes back to the one with room, neg. */
	unsubscribe(fx, a, "a");
	expect_bodies(neg, "rm0 rm2 ");
	unsubscribe(fx, b, "b");
	expect_bodies(neg, "rm1 rm3 ");
	/* Everyone with a priority gone: the plain list again. */
	unsubscribe(fx, neg, "neg");
	subscribe(fx, neg, "again", "");
	send_n(fx, p, "n", 1);
	expect_bodies(neg, "n0 ");
}

/* Without priorities (or all equal) the queue is round-robin as before. */
static void
test_equal_priorities_round_robin(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *a = client(fx), *b = client(fx), *c = client(fx);
	subscribe(fx, a, "a", "activemq.priority:3\n");
	subscribe(fx, b, "b", "activemq.priority:3\n");
	subscribe(fx, c, "c", "activemq.priority:3\n");
	send_n(fx, p, "m", 6);
	expect_bodies(a, "m0 m3 ");
	expect_bodies(b, "m1 m4 ");
	expect_bodies(c, "m2 m5 ");
}

/* exclusive:true locks the queue to its connection: another connection is
 * refused (resource_locked) while that subscription lasts; the same
 * connection may subscribe again.  One that asks while another connection
 * consumes is refused as well. */
static void
test_rabbitmq_exclusive_queue(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *a = client(fx), *other = client(fx), *shared = client(fx);
	subscribe(fx, a, "a", "exclusive:true\n");
	subscribe(fx, a, "a2", "");
	feed(other, "SUBSCRIBE\nid:x\ndestination:/queue/q\n\n");
	char *out = output(other);
	assert_memory_equal(out, "ERROR\nmessage:resource_locked\n", 30);
	assert_non_null(strstr(out, "'/queue/q'"));
	free(out);
	check(fx, "/queue/q");
	unsubscribe(fx, a, "a");
	subscribe(fx, shared, "s", "");
	feed(a, "SUBSCRIBE\nid:a3\ndestination:/queue/q\nexclusive:true\n\n");
	out = output(a);
	assert_memory_equal(out, "ERROR\nmessage:resource_locked\n", 30);
	free(out);
	check(fx, "/queue/q");
}

/* A bad value is an ERROR naming the header; the queue's consumers are
 * untouched. */
static void
test_bad_values_name_the_header(void **state)
{
	struct mem_broker *fx = *state;
	static const char *const bad[][2] = {
		{ "activemq.priority:128\n", "bad activemq.priority" },
		{ "activemq.priority:-1\n", "bad activemq.priority" },
		{ "x-priority:high\n", "bad x-priority" },
		{ "x-priority:2147483648\n", "bad x-priority" },
		{ "activemq.exclusive:yes\n", "bad activemq.exclusive" },
		{ "x-single-active-consumer:1\n", "bad x-single-active-consumer" },
		{ "exclusive:\n", "bad exclusive" },
	};
	struct conn *p = client(fx), *keep = client(fx);
	subscribe(fx, keep, "keep", "activemq.exclusive:true\n");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct conn *c = client(fx);
		char frame[256], want[96];
		snprintf(frame, sizeof(frame), "SUBSCRIBE\nid:0\ndestination:/queue/q\n%s\n", bad[i][0]);
		feed(c, frame);
		char *out = output(c);
		snprintf(want, sizeof(want), "ERROR\nmessage:%s\n", bad[i][1]);
		assert_memory_equal(out, want, strlen(want));
		free(out);
		check(fx, "/queue/q");
	}
	send_n(fx, p, "m", 1);
	expect_bodies(keep, "m0 ");
	/* Taken as RabbitMQ takes them: false in any case, the extremes. */
	struct conn *c = client(fx);
	subscribe(fx, c, "ok", "exclusive:False\nx-priority:-2147483648\n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_exclusive_takes_over_in_turn,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_exclusive_disconnect_redelivers_to_the_next,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_single_active_consumer_in_order_of_arrival,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_exclusive_with_a_higher_priority_takes_over,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_priority_first_while_it_has_room,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_priority_levels_and_equals_in_turn,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_equal_priorities_round_robin,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_rabbitmq_exclusive_queue,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_bad_values_name_the_header,
		    mem_broker_setup, mem_broker_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
