/* test_subqueue.c - RabbitMQ's queue semantics on topic subscriptions
 * (durable.h): prefetch-count on a topic subscription, whose messages wait
 * in a queue of its own; x-queue-name naming that queue; the queue going
 * with its last subscriber; and a plain topic publish untouched while no
 * such queue exists.  Driven through real connections on the in-memory
 * transport. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/event.h>

#include "eft/broker.h"
#include "eft/conn.h"
#include "eft/durable.h"
#include "eft/server.h"
#include "eft/sub.h"
#include "memclient.h"

static struct conn *
client(struct mem_broker *fx)
{
	return mem_client(&fx->mc, fx->b, "1.2");
}

static struct dest *
find(struct mem_broker *fx, const char *name)
{
	return dests_find(&fx->b->dests, name, strlen(name));
}

static void
check(struct dest *d)
{
	const char *why = dest_check(d);
	if (why != NULL)
		fail_msg("%s: %s", dest_name(d), why);
}

/* The ack id of the last MESSAGE in out, into buf. */
static void
last_ack(const char *out, char *buf, size_t size)
{
	const char *ack = NULL;
	for (const char *q = out; (q = strstr(q, "\nack:")) != NULL; q += 5)
		ack = q + 5;
	assert_non_null(ack);
	snprintf(buf, size, "%.*s", (int)strcspn(ack, "\n"), ack);
}

static void
test_prefetch_limits_a_topic_subscription(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *c = client(fx);
	feed(c, "SUBSCRIBE\nid:s\ndestination:/topic/t\nack:client-individual\n"
	    "prefetch-count:2\n\n");
	assert_int_equal(fx->b->dests.nbound, 1);
	for (int i = 0; i < 5; i++)
		send_to(p, "/topic/t", "m");
	char *out = output(c);
	assert_int_equal(count(out, "MESSAGE\n"), 2);
	/* The topic is the destination the subscriber sees. */
	assert_non_null(strstr(out, "destination:/topic/t\n"));
	char ack[64], frame[128];
	last_ack(out, ack, sizeof(ack));
	free(out);
	struct sub *s;
	HASH_FIND(hh, c->session->ep.subs, "s", 1, s);
	assert_non_null(s);
	struct dest *q = s->dest;
	assert_int_equal(dest_kind(q), DEST_QUEUE);
	assert_true(dest_auto_delete(q));
	assert_int_equal(dest_depth(q), 3);
	check(q);
	snprintf(frame, sizeof(frame), "ACK\nid:%s\n\n", ack);
	feed(c, frame);
	out = output(c);
	assert_int_equal(count(out, "MESSAGE\n"), 1);
	free(out);
	assert_int_equal(dest_depth(q), 2);

	/* The subscriber leaves: its queue goes with what it held, and the
	 * topic, which nobody else holds, with it. */
	feed(c, "UNSUBSCRIBE\nid:s\n\n");
	assert_int_equal(fx->b->dests.nbound, 0);
	assert_null(find(fx, "/topic/t"));
	assert_int_equal(fx->b->dests.count, 0);
}

static void
test_auto_ack_and_selectors_stay_direct(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:a\ndestination:/topic/t\nprefetch-count:2\n\n");
	feed(c, "SUBSCRIBE\nid:b\ndestination:/topic/t\nack:client\n\n");
	feed(c, "SUBSCRIBE\nid:c\ndestination:/topic/t\nack:client\nprefetch-count:1\n"
	    "selector:x = 1\n\n");
	assert_int_equal(fx->b->dests.nbound, 0);
	assert_int_equal(fx->b->dests.count, 1);
	char *out = output(c);
	assert_int_equal(count(out, "ERROR"), 0);
	free(out);
}

static void
test_x_queue_name_names_a_shared_queue(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *a = client(fx), *b = client(fx);
	feed(a, "SUBSCRIBE\nid:s\ndestination:/exchange/amq.topic/news\nx-queue-name:readers\n\n");
	feed(b, "SUBSCRIBE\nid:s\ndestination:/topic/news\nx-queue-name:readers\n\n");
	struct dest *q = find(fx, "/queue/readers");
	assert_non_null(q);
	assert_int_equal(dest_subscribers(q), 2);
	assert_string_equal(dest_name(dest_bound_topic(q)), "/topic/news");
	/* Once each through the topic, and straight to the queue by both its names. */
	send_to(p, "/topic/news", "1");
	send_to(p, "/topic/news", "2");
	send_to(p, "/queue/readers", "3");
	send_to(p, "/amq/queue/readers", "4");
	char *oa = output(a), *ob = output(b), *op = output(p);
	assert_int_equal(count(oa, "MESSAGE\n") + count(ob, "MESSAGE\n"), 4);
	assert_int_equal(count(oa, "MESSAGE\n"), 2);
	assert_string_equal(op, "");
	free(oa);
	free(ob);
	free(op);
	check(q);
	feed(a, "UNSUBSCRIBE\nid:s\n\n");
	assert_ptr_equal(find(fx, "/queue/readers"), q);
	conn_free(b);
	assert_null(find(fx, "/queue/readers"));
	assert_null(find(fx, "/topic/news"));
}

static void
test_x_queue_name_of_another_queue_is_refused(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx);
	send_to(p, "/queue/plain", "kept");
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:s\ndestination:/topic/t\nx-queue-name:plain\n\n");
	char *out = output(c);
	assert_non_null(strstr(out, "ERROR\n"));
	assert_non_null(strstr(out, "message:precondition_failed\n"));
	free(out);
	assert_int_equal(dest_depth(find(fx, "/queue/plain")), 1);
	assert_int_equal(fx->b->dests.nbound, 0);

	struct conn *e = client(fx);
	feed(e, "SUBSCRIBE\nid:s\ndestination:/topic/t\nx-queue-name:\n\n");
	out = output(e);
	assert_non_null(strstr(out, "message:bad x-queue-name\n"));
	free(out);
	struct conn *sel = client(fx);
	feed(sel, "SUBSCRIBE\nid:s\ndestination:/topic/t\nx-queue-name:q\nselector:x = 1\n\n");
	out = output(sel);
	assert_non_null(strstr(out, "message:selectors with x-queue-name are not supported\n"));
	free(out);
}

static void
test_durable_x_queue_name(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:d1\ndestination:/topic/dur\ndurable:true\nauto-delete:false\n"
	    "x-queue-name:kept\n\n");
	struct dest *q = find(fx, "/queue/kept");
	assert_non_null(q);
	assert_false(dest_auto_delete(q));
	assert_int_equal(fx->b->durables, 1);
	conn_free(c);
	struct conn *p = client(fx);
	send_to(p, "/topic/dur", "while away");
	assert_int_equal(dest_depth(q), 1);
	/* RabbitMQ's UNSUBSCRIBE names it the same way. */
	struct conn *u = client(fx);
	feed(u, "UNSUBSCRIBE\nid:d1\ndestination:/topic/dur\ndurable:true\nx-queue-name:kept\n\n");
	char *out = output(u);
	assert_string_equal(out, "");
	free(out);
	assert_int_equal(fx->b->durables, 0);
	assert_null(find(fx, "/queue/kept"));
}

static void
test_auto_delete_queue_goes_with_its_last_subscriber(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *a = client(fx), *b = client(fx);
	feed(a, "SUBSCRIBE\nid:s\ndestination:/queue/ad\nauto-delete:true\nack:client\n"
	    "prefetch-count:1\n\n");
	feed(b, "SUBSCRIBE\nid:s\ndestination:/queue/ad\nauto-delete:true\n\n");
	struct dest *q = find(fx, "/queue/ad");
	assert_non_null(q);
	assert_true(dest_auto_delete(q));
	assert_true(dest_transient(q));
	feed(b, "UNSUBSCRIBE\nid:s\n\n");
	send_to(p, "/queue/ad", "1");
	send_to(p, "/queue/ad", "2");
	assert_int_equal(dest_depth(q), 1);
	check(q);
	/* Its last subscriber leaves: the unacknowledged message comes back
	 * and goes with the queue. */
	conn_free(a);
	assert_null(find(fx, "/queue/ad"));
	assert_int_equal(fx->b->dests.count, 0);
}

static void
test_durable_and_auto_delete_must_match_the_queue(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx);
	send_to(p, "/queue/plain", "kept");
	static const char *const asks[][2] = {
		{ "auto-delete:true", "auto-delete" },
		{ "durable:false", "durable" },
		{ "durable:False\nauto-delete:false", "durable" },
	};
	for (size_t i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
		struct conn *c = client(fx);
		char frame[256];
		snprintf(frame, sizeof(frame), "SUBSCRIBE\nid:s\ndestination:/queue/plain\n%s\n\n",
		    asks[i][0]);
		feed(c, frame);
		char *out = output(c);
		assert_non_null(strstr(out, "message:precondition_failed\n"));
		assert_non_null(strstr(out, asks[i][1]));
		free(out);
	}
	/* What it is already, said or not, is fine. */
	struct conn *ok = client(fx);
	feed(ok, "SUBSCRIBE\nid:s\ndestination:/queue/plain\ndurable:true\nauto-delete:false\n\n");
	char *out = output(ok);
	assert_null(strstr(out, "ERROR"));
	assert_non_null(strstr(out, "\n\nkept|"));
	free(out);
	/* A queue made durable:false keeps nothing in a journal, and says so
	 * to the next that asks otherwise. */
	struct conn *t = client(fx);
	feed(t, "SUBSCRIBE\nid:s\ndestination:/queue/scratch\ndurable:false\n\n");
	assert_true(dest_transient(find(fx, "/queue/scratch")));
	assert_false(dest_auto_delete(find(fx, "/queue/scratch")));
	struct conn *d = client(fx);
	feed(d, "SUBSCRIBE\nid:s\ndestination:/queue/scratch\ndurable:true\n\n");
	out = output(d);
	assert_non_null(strstr(out, "message:precondition_failed\n"));
	free(out);
	struct conn *bad = client(fx);
	feed(bad, "SUBSCRIBE\nid:s\ndestination:/queue/x\nauto-delete:yes\n\n");
	out = output(bad);
	assert_non_null(strstr(out, "message:bad auto-delete\n"));
	free(out);
}

/* What a SUBSCRIBE with these headers gets back. */
static char *
subscribe_with(struct mem_broker *fx, const char *dest, const char *headers)
{
	struct conn *c = client(fx);
	char frame[512];
	snprintf(frame, sizeof(frame), "SUBSCRIBE\nid:s\ndestination:%s\nack:client\n"
	    "prefetch-count:1\n%s\n", dest, headers);
	feed(c, frame);
	return output(c);
}

static void
test_x_arguments_make_the_queue_policy(void **state)
{
	struct mem_broker *fx = *state;
	char *out = subscribe_with(fx, "/queue/xq", "x-max-length:2\nx-overflow:drop-head\n"
	    "x-dead-letter-exchange:\nx-dead-letter-routing-key:xq-dead\nx-message-ttl:60000\n"
	    "x-max-priority:3\n");
	assert_null(strstr(out, "ERROR"));
	free(out);
	struct dest *q = find(fx, "/queue/xq");
	const struct dest_policy *p = dest_policy(q);
	assert_int_equal(p->max_queue_messages, 2);
	assert_int_equal(p->overflow, OVERFLOW_DROP_HEAD);
	assert_string_equal(p->dead_letter_queue, "/queue/xq-dead");
	assert_int_equal(p->message_ttl_ms, 60000);
	assert_int_equal(p->max_priority, 3);
	/* One is handed out (prefetch 1), two wait, the oldest of the rest die. */
	struct conn *pr = client(fx);
	feed(pr, "SEND\ndestination:/queue/xq\n\n1");
	feed(pr, "SEND\ndestination:/queue/xq\npriority:9\n\n2");
	feed(pr, "SEND\ndestination:/queue/xq\n\n3");
	feed(pr, "SEND\ndestination:/queue/xq\npriority:2\n\n4");
	assert_int_equal(dest_depth(q), 2);
	assert_int_equal(dest_depth(find(fx, "/queue/xq-dead")), 1);
	/* Priority 9 counts as 3. */
	assert_int_equal(dest_by_priority(q, 3), 1);
	assert_int_equal(dest_by_priority(q, 9), 0);
	check(q);

	/* The same arguments again are fine; another value is not. */
	out = subscribe_with(fx, "/queue/xq", "x-max-length:2\nx-max-priority:3\n");
	assert_null(strstr(out, "ERROR"));
	free(out);
	out = subscribe_with(fx, "/queue/xq", "x-max-length:3\n");
	assert_non_null(strstr(out, "message:precondition_failed\n"));
	assert_non_null(strstr(out, "x-max-length"));
	free(out);
	out = subscribe_with(fx, "/queue/xq", "x-dead-letter-exchange:\n"
	    "x-dead-letter-routing-key:other\n");
	assert_non_null(strstr(out, "message:precondition_failed\n"));
	assert_non_null(strstr(out, "x-dead-letter-routing-key"));
	free(out);
	/* A queue whose policy came from its SUBSCRIBE is kept while empty and unused. */
	struct conn *k = client(fx);
	feed(k, "SUBSCRIBE\nid:k\ndestination:/queue/kept-policy\nx-max-length:5\n\n");
	feed(k, "UNSUBSCRIBE\nid:k\n\n");
	conn_free(k);
	struct dest *kept = find(fx, "/queue/kept-policy");
	assert_non_null(kept);
	assert_int_equal(dest_depth(kept), 0);
	assert_int_equal(dest_policy(kept)->max_queue_messages, 5);
	check(kept);
}

static void
test_bad_x_arguments_are_refused_by_name(void **state)
{
	struct mem_broker *fx = *state;
	static const char *const bad[][2] = {
		{ "x-max-length:abc\n", "bad x-max-length" },
		{ "x-max-length:0\n", "bad x-max-length" },
		{ "x-max-length-bytes:-1\n", "bad x-max-length-bytes" },
		{ "x-message-ttl:0\n", "bad x-message-ttl" },
		{ "x-max-priority:256\n", "bad x-max-priority" },
		{ "x-overflow:reject-publish\n", "bad x-overflow" },
		{ "x-overflow:whatever\n", "bad x-overflow" },
		{ "x-expires:0\n", "bad x-expires" },
		{ "x-dead-letter-exchange:amq.direct\nx-dead-letter-routing-key:k\n",
		    "bad x-dead-letter-exchange" },
		{ "x-dead-letter-routing-key:k\n", "bad x-dead-letter-routing-key" },
		{ "x-dead-letter-exchange:\n", "bad x-dead-letter-routing-key" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out = subscribe_with(fx, "/queue/b", bad[i][0]);
		char want[96];
		snprintf(want, sizeof(want), "message:%s\n", bad[i][1]);
		if (strstr(out, want) == NULL)
			fail_msg("%s: got %s", bad[i][0], out);
		free(out);
	}
	assert_null(find(fx, "/queue/b"));
}

static void
test_x_arguments_on_a_topic_give_it_a_queue(void **state)
{
	struct mem_broker *fx = *state;
	char *out = subscribe_with(fx, "/topic/xt", "x-max-length:1\nx-overflow:drop-head\n");
	assert_null(strstr(out, "ERROR"));
	free(out);
	struct conn *pr = client(fx);
	for (int i = 0; i < 4; i++)
		send_to(pr, "/topic/xt", "m");
	/* One handed out, one waiting, two dropped. */
	assert_int_equal(fx->b->dests.nbound, 1);
	struct dest *q = dests_find(&fx->b->dests, "/queue/stomp-subscription-", 0);
	assert_null(q);
	size_t n;
	struct dest *const *feeds = dest_feeds(find(fx, "/topic/xt"), &n);
	assert_int_equal(n, 1);
	assert_int_equal(dest_depth(feeds[0]), 1);
	assert_int_equal(dest_policy(feeds[0])->max_queue_messages, 1);
}

static uint64_t fake_now;

static uint64_t
fake_clock(void *arg)
{
	(void)arg;
	return fake_now;
}

static void
test_x_expires(void **state)
{
	struct mem_broker *fx = *state;
	fake_now = 1000000;
	fx->b->dests.hooks.now_ms = fake_clock;
	struct conn *a = client(fx), *p = client(fx);
	feed(a, "SUBSCRIBE\nid:s\ndestination:/queue/xe\nack:client\nx-expires:500\n\n");
	struct dest *q = find(fx, "/queue/xe");
	assert_int_equal(dest_policy(q)->expires_ms, 500);
	send_to(p, "/queue/xe", "m");
	/* In use: it never expires. */
	assert_null(dests_idle_expired(&fx->b->dests, fake_now + 100000));
	fake_now += 300;
	conn_free(a);           /* the message comes back; unused from now */
	assert_int_equal(dest_depth(q), 1);
	assert_null(dests_idle_expired(&fx->b->dests, fake_now + 499));
	fake_now += 400;
	struct conn *b = client(fx); /* a subscriber again: the clock starts again */
	feed(b, "SUBSCRIBE\nid:s\ndestination:/queue/xe\nx-expires:500\n\n");
	feed(b, "UNSUBSCRIBE\nid:s\n\n");
	assert_null(dests_idle_expired(&fx->b->dests, fake_now + 499));
	assert_ptr_equal(dests_idle_expired(&fx->b->dests, fake_now + 500), q);
	char *out = subscribe_with(fx, "/queue/xe", "x-expires:600\n");
	assert_non_null(strstr(out, "message:precondition_failed\n"));
	assert_non_null(strstr(out, "x-expires"));
	free(out);
	/* Deleted (as lifetime.c does), it leaves no trace in the idle list. */
	dests_delete(&fx->b->dests, q);
	assert_null(fx->b->dests.idle_head);
}

static void
test_redelivered_always(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx), *c = client(fx);
	feed(c, "SUBSCRIBE\nid:s\ndestination:/queue/r\nack:client\n\n");
	send_to(p, "/queue/r", "m");
	char *out = output(c);
	assert_null(strstr(out, "redelivered:"));   /* the default: only when true */
	free(out);
	fx->cfg.redelivered_always = true;          /* sessions made from now on */
	struct conn *a = client(fx);
	feed(a, "SUBSCRIBE\nid:s\ndestination:/queue/r\nack:client\n\n");
	conn_free(c);                               /* "m" goes back: a redelivery */
	send_to(p, "/queue/r", "n");
	out = output(a);
	assert_int_equal(count(out, "MESSAGE\n"), 2);
	assert_int_equal(count(out, "redelivered:true\n"), 1);
	assert_int_equal(count(out, "redelivered:false\n"), 1);
	assert_true(strstr(out, "redelivered:true\n") < strstr(out, "\n\nm|"));
	assert_true(strstr(out, "redelivered:false\n") > strstr(out, "\n\nm|"));
	free(out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_prefetch_limits_a_topic_subscription,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_auto_ack_and_selectors_stay_direct,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_x_queue_name_names_a_shared_queue,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_x_queue_name_of_another_queue_is_refused,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_durable_x_queue_name,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_auto_delete_queue_goes_with_its_last_subscriber,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_durable_and_auto_delete_must_match_the_queue,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_x_arguments_make_the_queue_policy,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_bad_x_arguments_are_refused_by_name,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_x_arguments_on_a_topic_give_it_a_queue,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_x_expires,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_redelivered_always,
		    mem_broker_setup, mem_broker_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
