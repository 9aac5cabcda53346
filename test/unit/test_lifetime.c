/* test_lifetime.c - message lifetimes and queue policies, driven through
 * connections on the in-memory transport: priority order, expiry (at the
 * head and by the timer), dead-letter queues and their headers, NACK
 * requeue:false, max-redeliveries, drop-head overflow, selectors on queues
 * and topics, and per-destination policies.  The broker's clock is replaced
 * by one the test moves. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
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
#include "eft/msg.h"
#include "eft/policy.h"
#include "memclient.h"

struct fixture {
	struct event_base *base;
	struct config cfg;
	struct broker *b;
	struct memclients mc;
};

/* The clock the destinations see (ms since the epoch). */
static uint64_t fake_now;

static uint64_t
fake_clock(void *arg)
{
	(void)arg;
	return fake_now;
}

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	fx->base = event_base_new();
	config_defaults(&fx->cfg);
	log_set_level(EFT_LOG_ERROR);
	*state = fx;
	return fx->base ? 0 : -1;
}

/* After the test's settings: the broker, on the fake clock. */
static struct broker *
start(struct fixture *fx)
{
	char err[256];
	assert_int_equal(config_check(&fx->cfg, err, sizeof(err)), 0);
	fx->b = server_new(fx->base, &fx->cfg);
	assert_non_null(fx->b);
	fake_now = broker_now_ms(fx->b);
	fx->b->dests.hooks.now_ms = fake_clock;
	return fx->b;
}

static void
set(struct fixture *fx, const char *key, const char *value)
{
	char err[256];
	if (config_set(&fx->cfg, key, value, err, sizeof(err)) != 0)
		fail_msg("%s = %s: %s", key, value, err);
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;
	server_free(fx->b);
	memclients_free(&fx->mc);
	event_base_free(fx->base);
	free(fx);
	return 0;
}

static struct conn *
client(struct fixture *fx)
{
	return mem_client(&fx->mc, fx->b, "1.2");
}

/* SEND with extra header lines (each ending in \n). */
static void
send_with(struct conn *c, const char *dest, const char *headers, const char *body)
{
	char frame[1024];
	snprintf(frame, sizeof(frame), "SEND\ndestination:%s\n%s\n%s", dest, headers, body);
	feed(c, frame);
}

/* The bodies of the MESSAGE frames in out, in order, joined by ','. */
static char *
bodies(const char *out)
{
	char *s = calloc(1, strlen(out) + 1);
	for (const char *p = out; (p = strstr(p, "MESSAGE\n")) != NULL;) {
		const char *b = strstr(p, "\n\n") + 2, *end = strchr(b, '|');
		if (s[0] != '\0')
			strcat(s, ",");
		strncat(s, b, (size_t)(end - b));
		p = end;
	}
	return s;
}

static void
expect_bodies(struct conn *c, const char *want)
{
	char *out = output(c), *got = bodies(out);
	if (strcmp(got, want) != 0)
		fail_msg("bodies '%s', want '%s' in:\n%s", got, want, out);
	free(got);
	free(out);
}

static void
check_all(struct fixture *fx)
{
	server_flush(fx->b);
	size_t n;
	struct dest **all = dests_sorted(&fx->b->dests, &n);
	for (size_t i = 0; i < n; i++) {
		const char *why = dest_check(all[i]);
		if (why != NULL)
			fail_msg("%s: %s", dest_name(all[i]), why);
	}
	free(all);
}

static struct dest *
find(struct fixture *fx, const char *name)
{
	return dests_find(&fx->b->dests, name, strlen(name));
}

/* The value of header name in the first MESSAGE of out ("" if absent). */
static char *
header_of(const char *out, const char *name)
{
	char want[128];
	snprintf(want, sizeof(want), "\n%s:", name);
	const char *end = strstr(out, "\n\n"), *p = strstr(out, want);
	if (p == NULL || end == NULL || p > end)
		return strdup("");
	p += strlen(want);
	return strndup(p, strcspn(p, "\n"));
}

/* ---- priority ---- */

static void
test_priority_order(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *p = client(fx);
	send_with(p, "/queue/p", "priority:0\n", "low");
	send_with(p, "/queue/p", "priority:9\n", "top1");
	send_with(p, "/queue/p", "", "default");
	send_with(p, "/queue/p", "priority:12\n", "top2"); /* RabbitMQ-size: counts as 9 */
	send_with(p, "/queue/p", "priority:7\n", "seven");
	send_with(p, "/queue/p", "priority:4\n", "four");
	struct dest *d = find(fx, "/queue/p");
	assert_int_equal(dest_by_priority(d, 9), 2);
	assert_int_equal(dest_by_priority(d, 4), 2);
	check_all(fx);
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/p\nack:client-individual\n\n");
	expect_bodies(c, "top1,top2,seven,default,four,low");
	check_all(fx);
}

static void
test_priority_redelivery_keeps_its_place(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *p = client(fx), *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/r\nack:client-individual\nprefetch-count:1\n\n");
	send_with(p, "/queue/r", "priority:9\n", "urgent");
	send_with(p, "/queue/r", "priority:1\n", "later");
	send_with(p, "/queue/r", "priority:9\n", "urgent2");
	char *out = output(c), *id = header_of(out, "ack");
	assert_non_null(strstr(out, "urgent|"));
	char nack[128];
	snprintf(nack, sizeof(nack), "NACK\nid:%s\n\n", id);
	feed(c, nack); /* back to the head of priority 9, before urgent2 */
	free(out);
	free(id);
	out = output(c);
	assert_non_null(strstr(out, "redelivered:true\n"));
	assert_non_null(strstr(out, "\n\nurgent|"));
	free(out);
	check_all(fx);
}

static void
test_bad_priority_and_expiry_headers(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	const char *bad[][2] = {
		{ "priority:high\n", "message:bad priority header\n" },
		{ "expires:tomorrow\n", "message:bad expires header\n" },
		{ "expiration:-5\n", "message:bad expiration header\n" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct conn *p = client(fx);
		send_with(p, "/queue/bad", bad[i][0], "x");
		char *out = output(p);
		assert_non_null(strstr(out, "ERROR\n"));
		assert_non_null(strstr(out, bad[i][1]));
		free(out);
	}
	assert_null(find(fx, "/queue/bad"));
}

/* ---- expiry ---- */

static void
test_expired_at_head_never_delivered(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *p = client(fx);
	char h[64];
	snprintf(h, sizeof(h), "expires:%llu\n", (unsigned long long)fake_now + 100);
	send_with(p, "/queue/e", h, "stale");
	send_with(p, "/queue/e", "expires:0\n", "forever");
	send_with(p, "/queue/e", "expiration:60000\n", "fresh");
	fake_now += 101;
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/e\n\n");
	expect_bodies(c, "forever,fresh");
	assert_int_equal(fx->b->stats.dropped[STAT_DROP_EXPIRED], 1);
	/* Already expired when sent: never queued. */
	snprintf(h, sizeof(h), "expires:%llu\n", (unsigned long long)fake_now - 1);
	send_with(p, "/queue/e", h, "dead on arrival");
	expect_bodies(c, "");
	assert_int_equal(fx->b->stats.dropped[STAT_DROP_EXPIRED], 2);
	check_all(fx);
}

/* expiration:0 is RabbitMQ's TTL 0: a consumer that can take the message
 * as it comes gets it; otherwise it dies then, and never waits. */
static void
test_expiration_zero_goes_to_a_ready_consumer(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *p = client(fx), *a = client(fx), *b = client(fx);
	feed(a, "SUBSCRIBE\nid:0\ndestination:/queue/now\n\n");
	feed(b, "SUBSCRIBE\nid:0\ndestination:/queue/now\n\n");
	send_with(p, "/queue/now", "expiration:0\n", "1");
	send_with(p, "/queue/now", "expiration:0\n", "2");
	send_with(p, "/queue/now", "expiration:0\n", "3");
	expect_bodies(a, "1,3"); /* in turn, as any other */
	expect_bodies(b, "2");
	assert_int_equal(fx->b->stats.dropped[STAT_DROP_EXPIRED], 0);
	assert_int_equal(dest_depth(find(fx, "/queue/now")), 0);
	check_all(fx);
}

static void
test_expiration_zero_dies_without_one(void **state)
{
	struct fixture *fx = *state;
	set(fx, "dead-letter-queue", "/queue/dlq");
	start(fx);
	struct conn *p = client(fx);
	/* Nobody subscribed: it dies, and no queue is left behind for it. */
	send_with(p, "/queue/nobody", "expiration:0\n", "lost");
	assert_null(find(fx, "/queue/nobody"));
	assert_int_equal(fx->b->stats.dead_lettered[DEATH_EXPIRED], 1);
	assert_int_equal(dest_depth(find(fx, "/queue/dlq")), 1);
	/* A subscriber at its prefetch cannot take it now: it does not wait
	 * for the ACK. */
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/busy\nack:client\nprefetch-count:1\n\n");
	send_with(p, "/queue/busy", "", "first");
	send_with(p, "/queue/busy", "expiration:0\n", "too soon");
	char *out = output(c), *id = header_of(out, "ack");
	assert_int_equal(count(out, "MESSAGE\n"), 1);
	assert_non_null(strstr(out, "\n\nfirst|"));
	char frame[128];
	snprintf(frame, sizeof(frame), "ACK\nid:%s\n\n", id);
	feed(c, frame);
	free(out);
	free(id);
	expect_bodies(c, "");
	assert_int_equal(fx->b->stats.dead_lettered[DEATH_EXPIRED], 2);
	/* Room again: the next one goes. */
	send_with(p, "/queue/busy", "expiration:0\n", "in time");
	expect_bodies(c, "in time");
	/* An expires already past wins over it (the sooner wins): it dies. */
	char h[80];
	snprintf(h, sizeof(h), "expires:%llu\nexpiration:0\n", (unsigned long long)fake_now - 1);
	send_with(p, "/queue/busy", h, "stale");
	expect_bodies(c, "");
	assert_int_equal(fx->b->stats.dead_lettered[DEATH_EXPIRED], 3);
	check_all(fx);
}

static void
test_expiration_zero_with_selectors_and_topics(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *p = client(fx), *red = client(fx), *t = client(fx);
	feed(red, "SUBSCRIBE\nid:0\ndestination:/queue/sel\nselector:color = 'red'\n\n");
	send_with(p, "/queue/sel", "color:blue\n", "blue waits");
	send_with(p, "/queue/sel", "color:red\nexpiration:0\n", "red now");
	send_with(p, "/queue/sel", "color:green\nexpiration:0\n", "green never");
	expect_bodies(red, "red now");
	assert_int_equal(dest_depth(find(fx, "/queue/sel")), 1); /* only blue */
	assert_int_equal(fx->b->stats.dropped[STAT_DROP_EXPIRED], 1);
	/* A topic: every current subscriber gets it. */
	feed(t, "SUBSCRIBE\nid:0\ndestination:/topic/now\n\n");
	send_with(p, "/topic/now", "expiration:0\n", "news");
	expect_bodies(t, "news");
	/* In a transaction: whoever can take it at COMMIT. */
	struct conn *q = client(fx);
	feed(q, "SUBSCRIBE\nid:0\ndestination:/queue/tx\n\n");
	feed(p, "BEGIN\ntransaction:t1\n\n");
	send_with(p, "/queue/tx", "transaction:t1\nexpiration:0\n", "committed");
	send_with(p, "/queue/tx.none", "transaction:t1\nexpiration:0\n", "nobody");
	expect_bodies(q, "");
	feed(p, "COMMIT\ntransaction:t1\n\n");
	expect_bodies(q, "committed");
	assert_null(find(fx, "/queue/tx.none"));
	check_all(fx);
}

static void
test_expiry_timer_frees_memory(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *p = client(fx);
	size_t before = fx->b->msg_pool.live_bytes;
	char h[64];
	/* Out of order in time, and behind a message that never expires. */
	send_with(p, "/queue/t", "", "keeper");
	for (int i = 0; i < 100; i++) {
		snprintf(h, sizeof(h), "expires:%llu\n", (unsigned long long)fake_now + 1000 -
		    (uint64_t)(i % 10) * 50);
		send_with(p, "/queue/t", h, "goes");
	}
	struct dest *d = find(fx, "/queue/t");
	assert_int_equal(dest_depth(d), 101);
	assert_int_equal(fx->b->dests.nexpiry, 100);
	assert_int_equal(dests_next_expiry(&fx->b->dests), fake_now + 1000 - 450);
	check_all(fx);
	fake_now += 575; /* the 10 earliest (i % 10 == 9, at +550) */
	assert_int_equal(dests_expire(&fx->b->dests, fake_now, 1000), 10);
	assert_int_equal(dest_depth(d), 91);
	check_all(fx);
	fake_now += 1000;
	assert_int_equal(dests_expire(&fx->b->dests, fake_now, 30), 30); /* a budget per turn */
	assert_int_equal(dests_expire(&fx->b->dests, fake_now, 1000), 60);
	assert_int_equal(dest_depth(d), 1);
	assert_int_equal(fx->b->dests.nexpiry, 0);
	assert_int_equal(fx->b->stats.dropped[STAT_DROP_EXPIRED], 100);
	check_all(fx);
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/t\n\n");
	expect_bodies(c, "keeper");
	assert_int_equal(fx->b->msg_pool.live_bytes, before);
}

static void
test_message_ttl_policy_and_sooner_wins(void **state)
{
	struct fixture *fx = *state;
	set(fx, "policy", "/queue/ttl.* message-ttl=500");
	start(fx);
	struct conn *p = client(fx);
	char h[64];
	send_with(p, "/queue/ttl.a", "", "policy ttl");
	snprintf(h, sizeof(h), "expires:%llu\n", (unsigned long long)fake_now + 100);
	send_with(p, "/queue/ttl.a", h, "own sooner");
	snprintf(h, sizeof(h), "expires:%llu\n", (unsigned long long)fake_now + 100000);
	send_with(p, "/queue/ttl.a", h, "own later");
	send_with(p, "/queue/other", "", "no ttl");
	fake_now += 200;
	assert_int_equal(dests_expire(&fx->b->dests, fake_now, 100), 1);
	fake_now += 400;
	assert_int_equal(dests_expire(&fx->b->dests, fake_now, 100), 2);
	assert_null(find(fx, "/queue/ttl.a"));
	assert_int_equal(dest_depth(find(fx, "/queue/other")), 1);
	check_all(fx);
}

/* ---- dead letters ---- */

static void
test_dead_letter_headers(void **state)
{
	struct fixture *fx = *state;
	set(fx, "dead-letter-queue", "/queue/dlq");
	start(fx);
	struct conn *p = client(fx);
	char h[128];
	snprintf(h, sizeof(h), "expires:%llu\ncolor:red\n", (unsigned long long)fake_now + 10);
	send_with(p, "/queue/orders", h, "late");
	fake_now += 20;
	uint64_t died_at = fake_now;
	assert_int_equal(dests_expire(&fx->b->dests, fake_now, 10), 1);
	assert_int_equal(fx->b->stats.dead_lettered[DEATH_EXPIRED], 1);
	assert_int_equal(fx->b->stats.dropped[STAT_DROP_EXPIRED], 0);
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/dlq\n\n");
	char *out = output(c);
	char *reason = header_of(out, "x-death-reason"), *orig = header_of(out,
	    "x-original-destination"), *at = header_of(out, "x-death-time"),
	    *dest = header_of(out, "destination"), *exp = header_of(out, "expires"),
	    *color = header_of(out, "color");
	assert_string_equal(reason, "expired");
	assert_string_equal(orig, "/queue/orders");
	assert_int_equal(strtoull(at, NULL, 10), died_at);
	assert_string_equal(dest, "/queue/dlq");
	assert_string_equal(exp, ""); /* a dead letter does not expire again */
	assert_string_equal(color, "red");
	assert_non_null(strstr(out, "\n\nlate|"));
	free(reason), free(orig), free(at), free(dest), free(exp), free(color);
	free(out);
	check_all(fx);
}

/* The dead-letter queue matches the pattern of the queues it collects
 * for, message-ttl included: its dead letters still wait to be read. */
static void
test_dead_letters_do_not_expire_with_the_ttl_they_collect_for(void **state)
{
	struct fixture *fx = *state;
	set(fx, "policy", "/queue/o.> message-ttl=500 dead-letter-queue=/queue/o.dlq");
	set(fx, "message-ttl", "700");
	set(fx, "dead-letter-queue", "/queue/dlq");
	start(fx);
	struct conn *p = client(fx);
	send_with(p, "/queue/o.a", "", "order");
	send_with(p, "/queue/plain", "", "plain");
	fake_now += 800;
	assert_int_equal(dests_expire(&fx->b->dests, fake_now, 100), 2);
	assert_int_equal(dest_depth(find(fx, "/queue/o.dlq")), 1);
	assert_int_equal(dest_depth(find(fx, "/queue/dlq")), 1);
	fake_now += 100000;
	assert_int_equal(dests_expire(&fx->b->dests, fake_now, 100), 0);
	assert_int_equal(fx->b->stats.dropped[STAT_DROP_EXPIRED], 0);
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/o.dlq\n\n");
	feed(c, "SUBSCRIBE\nid:1\ndestination:/queue/dlq\n\n");
	expect_bodies(c, "order,plain");
	check_all(fx);
}

static void
test_reject_goes_to_dlq_and_never_loops(void **state)
{
	struct fixture *fx = *state;
	set(fx, "dead-letter-queue", "/queue/dlq");
	start(fx);
	struct conn *p = client(fx), *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/work\nack:client-individual\n\n");
	feed(c, "SUBSCRIBE\nid:1\ndestination:/queue/dlq\nack:client-individual\n\n");
	send_with(p, "/queue/work", "", "poison");
	char *out = output(c), *id = header_of(out, "ack");
	char frame[160];
	snprintf(frame, sizeof(frame), "NACK\nid:%s\nrequeue:false\n\n", id);
	feed(c, frame);
	free(out);
	free(id);
	out = output(c);
	char *reason = header_of(out, "x-death-reason"), *sub = header_of(out, "subscription");
	assert_string_equal(reason, "rejected");
	assert_string_equal(sub, "1");
	assert_int_equal(fx->b->stats.dead_lettered[DEATH_REJECTED], 1);
	/* Rejected again from the dead-letter queue: dropped, not dead-lettered. */
	id = header_of(out, "ack");
	snprintf(frame, sizeof(frame), "NACK\nid:%s\nrequeue:false\n\n", id);
	feed(c, frame);
	free(out);
	free(id);
	free(reason);
	free(sub);
	expect_bodies(c, "");
	assert_int_equal(fx->b->stats.dead_lettered[DEATH_REJECTED], 1);
	assert_int_equal(fx->b->stats.dropped[STAT_DROP_REJECTED], 1);
	assert_int_equal(dest_depth(find(fx, "/queue/dlq")), 0);
	check_all(fx);
}

/* requeue:False is stomp.py's str(False), and RabbitMQ takes it as false:
 * any case rejects; True (any other value) gives the message back. */
static void
test_reject_requeue_false_in_any_case(void **state)
{
	struct fixture *fx = *state;
	set(fx, "dead-letter-queue", "/queue/dlq");
	start(fx);
	struct conn *p = client(fx), *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/work\nack:client-individual\n\n");
	const char *values[] = { "False", "FALSE", "True" };
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		send_with(p, "/queue/work", "", values[i]);
		char *out = output(c), *id = header_of(out, "ack");
		assert_int_equal(count(out, "MESSAGE\n"), 1);
		char frame[160];
		snprintf(frame, sizeof(frame), "NACK\nid:%s\nrequeue:%s\n\n", id, values[i]);
		feed(c, frame);
		free(out);
		free(id);
	}
	/* Only True's message comes back; the two others died, rejected. */
	char *out = output(c), *got = bodies(out);
	assert_string_equal(got, "True");
	assert_int_equal(count(out, "redelivered:true\n"), 1);
	free(got);
	free(out);
	assert_int_equal(fx->b->stats.dead_lettered[DEATH_REJECTED], 2);
	assert_int_equal(dest_depth(find(fx, "/queue/dlq")), 2);
	check_all(fx);
}

static void
test_max_redeliveries(void **state)
{
	struct fixture *fx = *state;
	set(fx, "max-redeliveries", "2");
	set(fx, "dead-letter-queue", "/queue/dlq");
	start(fx);
	struct conn *p = client(fx), *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/w\nack:client-individual\n\n");
	send_with(p, "/queue/w", "", "again");
	for (int i = 0; i < 3; i++) { /* one delivery and two redeliveries */
		char *out = output(c), *id = header_of(out, "ack");
		assert_int_equal(count(out, "MESSAGE\n"), 1);
		assert_int_equal(count(out, "redelivered:true\n"), i > 0);
		char frame[128];
		snprintf(frame, sizeof(frame), "NACK\nid:%s\n\n", id);
		feed(c, frame);
		free(out);
		free(id);
	}
	expect_bodies(c, "");
	assert_int_equal(fx->b->stats.dead_lettered[DEATH_MAX_REDELIVERIES], 1);
	assert_int_equal(dest_depth(find(fx, "/queue/dlq")), 1);
	/* A lost subscriber counts as giving it back too. */
	send_with(p, "/queue/w2", "", "crash");
	for (int i = 0; i < 3; i++) {
		struct conn *k = client(fx);
		feed(k, "SUBSCRIBE\nid:0\ndestination:/queue/w2\nack:client\n\n");
		expect_bodies(k, "crash");
		conn_free(k);
	}
	assert_int_equal(fx->b->stats.dead_lettered[DEATH_MAX_REDELIVERIES], 2);
	check_all(fx);
}

static void
test_drop_head_overflow(void **state)
{
	struct fixture *fx = *state;
	set(fx, "policy", "/queue/small max-queue-messages=3 queue-overflow=drop-head "
	    "dead-letter-queue=/queue/small.dlq");
	start(fx);
	struct conn *p = client(fx);
	send_with(p, "/queue/small", "priority:9\n", "1");
	send_with(p, "/queue/small", "", "2");
	send_with(p, "/queue/small", "", "3");
	send_with(p, "/queue/small", "", "4");
	send_with(p, "/queue/small", "", "5");
	assert_int_equal(dest_depth(find(fx, "/queue/small")), 3);
	assert_int_equal(dest_depth(find(fx, "/queue/small.dlq")), 2);
	assert_int_equal(fx->b->stats.dead_lettered[DEATH_OVERFLOW], 2);
	assert_null(fx->b->set->paused); /* drop-head never makes a producer wait */
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/small\n\n");
	expect_bodies(c, "1,4,5"); /* the oldest of the lowest priority went first */
	feed(c, "SUBSCRIBE\nid:1\ndestination:/queue/small.dlq\n\n");
	expect_bodies(c, "2,3");
	check_all(fx);
}

static void
test_block_overflow_still_pauses(void **state)
{
	struct fixture *fx = *state;
	set(fx, "max-queue-messages", "2");
	start(fx);
	struct conn *p = client(fx);
	send_with(p, "/queue/full", "", "1");
	send_with(p, "/queue/full", "", "2");
	assert_non_null(fx->b->set->paused);
	assert_int_equal(dest_depth(find(fx, "/queue/full")), 2);
}

/* ---- selectors ---- */

static void
test_selectors_on_a_queue(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *p = client(fx), *red = client(fx), *blue = client(fx);
	feed(red, "SUBSCRIBE\nid:0\ndestination:/queue/s\nselector:color = 'red'\n\n");
	feed(blue, "SUBSCRIBE\nid:0\ndestination:/queue/s\nselector:color='blue' OR n > 10\n\n");
	send_with(p, "/queue/s", "color:red\n", "r1");
	send_with(p, "/queue/s", "color:blue\n", "b1");
	send_with(p, "/queue/s", "color:green\n", "g1");
	send_with(p, "/queue/s", "color:green\nn:11\n", "g2");
	send_with(p, "/queue/s", "color:red\n", "r2");
	expect_bodies(red, "r1,r2");
	expect_bodies(blue, "b1,g2");
	assert_int_equal(dest_depth(find(fx, "/queue/s")), 1); /* g1 waits for a taker */
	check_all(fx);
	struct conn *any = client(fx);
	feed(any, "SUBSCRIBE\nid:0\ndestination:/queue/s\n\n");
	expect_bodies(any, "g1");
	check_all(fx);
}

static void
test_selector_waits_for_room(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *p = client(fx), *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/w\nselector:JMSPriority >= 7\n"
	    "ack:client-individual\nprefetch-count:1\n\n");
	send_with(p, "/queue/w", "", "normal");
	send_with(p, "/queue/w", "priority:8\n", "high1");
	send_with(p, "/queue/w", "priority:9\n", "high2");
	char *out = output(c), *id = header_of(out, "ack");
	assert_int_equal(count(out, "MESSAGE\n"), 1);
	assert_non_null(strstr(out, "\n\nhigh1|"));
	char frame[128];
	snprintf(frame, sizeof(frame), "ACK\nid:%s\n\n", id);
	feed(c, frame);
	free(out);
	free(id);
	expect_bodies(c, "high2");
	assert_int_equal(dest_depth(find(fx, "/queue/w")), 1);
	check_all(fx);
}

static void
test_selector_window(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *p = client(fx), *c = client(fx);
	for (int i = 0; i < DEST_SELECTOR_WINDOW + 10; i++)
		send_with(p, "/queue/long", "kind:noise\n", "n");
	send_with(p, "/queue/long", "kind:wanted\n", "old");
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/long\nselector:kind = 'wanted'\n\n");
	expect_bodies(c, ""); /* beyond the window */
	send_with(p, "/queue/long", "kind:wanted\n", "new");
	expect_bodies(c, "new"); /* offered as it comes */
	check_all(fx);
	/* Once the front moves on, the one behind it is seen. */
	struct conn *drain = client(fx);
	feed(drain, "SUBSCRIBE\nid:0\ndestination:/queue/long\nselector:kind = 'noise'\n\n");
	char *out = output(drain);
	assert_int_equal(count(out, "MESSAGE\n"), DEST_SELECTOR_WINDOW + 10);
	free(out);
	expect_bodies(c, "old");
	check_all(fx);
}

static void
test_selectors_on_a_topic(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *p = client(fx), *a = client(fx), *b = client(fx);
	feed(a, "SUBSCRIBE\nid:0\ndestination:/topic/t\nselector:region IN ('eu', 'us') AND "
	    "price BETWEEN 10 AND 20\n\n");
	feed(b, "SUBSCRIBE\nid:0\ndestination:/topic/t\nselector:   \n\n"); /* blank: all */
	send_with(p, "/topic/t", "region:eu\nprice:15\n", "yes");
	send_with(p, "/topic/t", "region:asia\nprice:15\n", "no1");
	send_with(p, "/topic/t", "region:us\nprice:25\n", "no2");
	send_with(p, "/topic/t", "region:us\n", "no3");
	expect_bodies(a, "yes");
	expect_bodies(b, "yes,no1,no2,no3");
	check_all(fx);
}

static void
test_bad_selector(void **state)
{
	struct fixture *fx = *state;
	start(fx);
	struct conn *c = client(fx);
	feed(c, "SUBSCRIBE\nid:0\ndestination:/queue/q\nselector:color = 'red' AND (\n\n");
	char *out = output(c);
	assert_non_null(strstr(out, "ERROR\n"));
	assert_non_null(strstr(out, "message:invalid selector\\c position 20\\c unexpected end\n"));
	free(out);
	assert_null(find(fx, "/queue/q"));
	c = client(fx);
	feed(c, "SUBSCRIBE\nid:d\ndestination:/topic/t\ndurable:true\nauto-delete:false\n"
	    "selector:a = 1\n\n");
	out = output(c);
	assert_non_null(strstr(out, "message:selectors on durable subscriptions are not "
	    "supported\n"));
	free(out);
}

/* ---- policies ---- */

static void
test_first_matching_policy_wins(void **state)
{
	struct fixture *fx = *state;
	set(fx, "max-redeliveries", "5");
	set(fx, "policy", "/queue/orders.eu max-redeliveries=2");
	set(fx, "policy", "/queue/orders.> max-redeliveries=1 dead-letter-queue=/queue/orders.dlq");
	start(fx);
	struct conn *p = client(fx);
	send_with(p, "/queue/orders.eu", "", "x");
	send_with(p, "/queue/orders.us.east", "", "x");
	send_with(p, "/queue/other", "", "x");
	const struct dest_policy *eu = dest_policy(find(fx, "/queue/orders.eu"));
	const struct dest_policy *us = dest_policy(find(fx, "/queue/orders.us.east"));
	const struct dest_policy *other = dest_policy(find(fx, "/queue/other"));
	assert_int_equal(eu->max_redeliveries, 2);
	assert_string_equal(eu->dead_letter_queue, ""); /* not given: the global, none */
	assert_int_equal(us->max_redeliveries, 1);
	assert_string_equal(us->dead_letter_queue, "/queue/orders.dlq");
	assert_int_equal(other->max_redeliveries, 5);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_priority_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_priority_redelivery_keeps_its_place, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_bad_priority_and_expiry_headers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expired_at_head_never_delivered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiration_zero_goes_to_a_ready_consumer, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_expiration_zero_dies_without_one, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_expiration_zero_with_selectors_and_topics, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_expiry_timer_frees_memory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_message_ttl_policy_and_sooner_wins, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_dead_letter_headers, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_dead_letters_do_not_expire_with_the_ttl_they_collect_for, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reject_goes_to_dlq_and_never_loops, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_reject_requeue_false_in_any_case, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_max_redeliveries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drop_head_overflow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_overflow_still_pauses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_selectors_on_a_queue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_selector_waits_for_room, setup, teardown),
		cmocka_unit_test_setup_teardown(test_selector_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_selectors_on_a_topic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_selector, setup, teardown),
		cmocka_unit_test_setup_teardown(test_first_matching_policy_wins, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
