/* test_broker.c - destinations, acknowledgements, transactions and
 * temp-queues, driven through real connections on the in-memory transport:
 * the test feeds the bytes a client sends and reads what eftd writes. */
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
#include "eft/sub.h"
#include "memclient.h"

static void
assert_prefix(const char *s, const char *prefix)
{
	assert_memory_equal(s, prefix, strlen(prefix));
}

static void
expect_output(struct conn *c, const char *want)
{
	char *got = output(c);
	assert_string_equal(got, want);
	free(got);
}

static struct conn *
connection(struct mem_broker *fx)
{
	return mem_accept(&fx->mc, fx->b, "mem test");
}

static struct conn *
client(struct mem_broker *fx, const char *version)
{
	return mem_client(&fx->mc, fx->b, version);
}

static void
test_queue_round_robin(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *a = client(fx, "1.2"), *b = client(fx, "1.2");
	feed(a, "SUBSCRIBE\nid:0\ndestination:/queue/q\n\n");
	feed(b, "SUBSCRIBE\nid:0\ndestination:/queue/q\n\n");
	for (int i = 0; i < 10; i++)
		send_to(p, "/queue/q", "m");
	char *oa = output(a), *ob = output(b);
	assert_int_equal(count(oa, "MESSAGE\n"), 5);
	assert_int_equal(count(ob, "MESSAGE\n"), 5);
	free(oa);
	free(ob);
	expect_output(p, "");
}

static void
test_queue_keeps_until_subscribe(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2");
	send_to(p, "/queue/keep", "one");
	send_to(p, "/queue/keep", "two");
	struct dest *d = dests_find(&fx->b->dests, "/queue/keep", 11);
	assert_non_null(d);
	assert_int_equal(dest_depth(d), 2);
	struct conn *c = client(fx, "1.2");
	feed(c, "SUBSCRIBE\nid:s\ndestination:/queue/keep\nreceipt:r\n\n");
	char *out = output(c);
	/* The RECEIPT comes first, then the messages in order. */
	const char *r = strstr(out, "RECEIPT\nreceipt-id:r\n");
	const char *one = strstr(out, "\n\none|"), *two = strstr(out, "\n\ntwo|");
	assert_non_null(r);
	assert_non_null(one);
	assert_non_null(two);
	assert_true(r < one && one < two);
	assert_non_null(strstr(out, "subscription:s\ndestination:/queue/keep\nmessage-id:"));
	free(out);
	assert_int_equal(dest_depth(d), 0);
}

static void
test_topic_fanout_and_drop(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *a = client(fx, "1.1"), *b = client(fx, "1.0");
	send_to(p, "/topic/t", "nobody");
	assert_null(dests_find(&fx->b->dests, "/topic/t", 8));
	feed(a, "SUBSCRIBE\nid:x\ndestination:/topic/t\n\n");
	feed(b, "SUBSCRIBE\ndestination:/topic/t\n\n");
	send_to(p, "/topic/t", "all");
	char *oa = output(a), *ob = output(b);
	assert_int_equal(count(oa, "\n\nall|"), 1);
	assert_int_equal(count(ob, "\n\nall|"), 1);
	assert_non_null(strstr(oa, "subscription:x\n"));
	assert_null(strstr(ob, "subscription:")); /* 1.0 without id */
	assert_int_equal(count(oa, "nobody"), 0);
	free(oa);
	free(ob);
	feed(a, "UNSUBSCRIBE\nid:x\n\n");
	feed(b, "UNSUBSCRIBE\ndestination:/topic/t\n\n");
	assert_null(dests_find(&fx->b->dests, "/topic/t", 8));
}

static void
test_client_ack_cumulative(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *c = client(fx, "1.2");
	for (int i = 1; i <= 5; i++) {
		char body[16];
		snprintf(body, sizeof(body), "m%d", i);
		send_to(p, "/queue/ack", body);
	}
	feed(c, "SUBSCRIBE\nid:s\ndestination:/queue/ack\nack:client\n\n");
	char *out = output(c);
	assert_int_equal(count(out, "MESSAGE\n"), 5);
	/* Find the ack id of the third message. */
	const char *third = strstr(out, "\n\nm3|");
	assert_non_null(third);
	const char *ack = NULL;
	for (const char *q = out; (q = strstr(q, "ack:")) != NULL && q < third; q += 4)
		ack = q + 4;
	assert_non_null(ack);
	char frame[128];
	int n = (int)strcspn(ack, "\n");
	snprintf(frame, sizeof(frame), "ACK\nid:%.*s\n\n", n, ack);
	free(out);
	feed(c, frame);
	struct sub *s;
	HASH_FIND(hh, c->session->ep.subs, "s", 1, s);
	assert_non_null(s);
	assert_int_equal(s->n_unacked, 2);

	/* The two unacked go to the next consumer, redelivered, in order. */
	conn_free(c);
	struct conn *d = client(fx, "1.2");
	feed(d, "SUBSCRIBE\nid:s\ndestination:/queue/ack\n\n");
	out = output(d);
	assert_int_equal(count(out, "MESSAGE\n"), 2);
	assert_int_equal(count(out, "redelivered:true\n"), 2);
	const char *m4 = strstr(out, "\n\nm4|"), *m5 = strstr(out, "\n\nm5|");
	assert_non_null(m4);
	assert_non_null(m5);
	assert_true(m4 < m5);
	free(out);
}

static void
test_client_individual_and_nack(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.1"), *c = client(fx, "1.1");
	send_to(p, "/queue/ind", "a");
	send_to(p, "/queue/ind", "b");
	feed(c, "SUBSCRIBE\nid:s\ndestination:/queue/ind\nack:client-individual\n\n");
	char *out = output(c);
	assert_int_equal(count(out, "MESSAGE\n"), 2);
	assert_null(strstr(out, "\nack:")); /* 1.1 has no ack header */
	free(out);
	struct sub *s;
	HASH_FIND(hh, c->session->ep.subs, "s", 1, s);
	uint64_t first = s->unacked_head->msg->id, second = s->unacked_tail->msg->id;
	char frame[128];
	/* 1.1: ACK by subscription and message-id; only the second one. */
	snprintf(frame, sizeof(frame), "ACK\nsubscription:s\nmessage-id:%llu\n\n",
	    (unsigned long long)second);
	feed(c, frame);
	assert_int_equal(s->n_unacked, 1);
	assert_int_equal(s->unacked_head->msg->id, first);
	/* NACK gives it back: it comes straight round again, redelivered. */
	snprintf(frame, sizeof(frame), "NACK\nsubscription:s\nmessage-id:%llu\n\n",
	    (unsigned long long)first);
	feed(c, frame);
	out = output(c);
	assert_int_equal(count(out, "MESSAGE\n"), 1);
	assert_non_null(strstr(out, "redelivered:true\n"));
	assert_non_null(strstr(out, "\n\na|"));
	free(out);
	assert_int_equal(s->n_unacked, 1);
}

static void
test_transaction_commit_abort(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *p = client(fx, "1.2"), *c = client(fx, "1.2");
	feed(c, "SUBSCRIBE\nid:s\ndestination:/queue/tx\n\n");
	feed(p, "BEGIN\ntransaction:t1\n\n");
	feed(p, "SEND\ndestination:/queue/tx\ntransaction:t1\nreceipt:s1\n\nin-tx");
	/* A SEND's RECEIPT in a transaction comes at COMMIT, before the
	 * COMMIT's own (RabbitMQ's way). */
	expect_output(c, "");
	expect_output(p, "");
	feed(p, "COMMIT\ntransaction:t1\nreceipt:c\n\n");
	expect_output(p, "RECEIPT\nreceipt-id:s1\n\n|RECEIPT\nreceipt-id:c\n\n|");
	char *out = output(c);
	assert_int_equal(count(out, "\n\nin-tx|"), 1);
	assert_null(strstr(out, "transaction:"));
	free(out);
	feed(p, "BEGIN\ntransaction:t2\n\n");
	feed(p, "SEND\ndestination:/queue/tx\ntransaction:t2\nreceipt:s2\n\naborted");
	feed(p, "ABORT\ntransaction:t2\nreceipt:a\n\n");
	expect_output(c, "");
	/* ABORT drops its SENDs' RECEIPTs with them, as RabbitMQ does. */
	expect_output(p, "RECEIPT\nreceipt-id:a\n\n|");
	assert_null(p->session->txs);
	/* An unknown transaction is an error that closes the connection. */
	feed(p, "COMMIT\ntransaction:t2\nreceipt:x\n\n");
	out = output(p);
	assert_prefix(out, "ERROR\nmessage:unknown transaction\nreceipt-id:x\n");
	free(out);
	assert_true(conn_is_closing(p));
}

static void
test_temp_queue_rpc(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *req = client(fx, "1.0"), *srv = client(fx, "1.2");
	feed(srv, "SUBSCRIBE\nid:s\ndestination:/queue/rpc\n\n");
	feed(req, "SEND\ndestination:/queue/rpc\nreply-to:/temp-queue/r\ncorrelation-id:7\n\nq");
	char *out = output(srv);
	char *rt = strstr(out, "reply-to:/reply-queue/eft.gen-");
	assert_non_null(rt);
	char reply_to[128];
	snprintf(reply_to, sizeof(reply_to), "%.*s", (int)strcspn(rt + 9, "\n"), rt + 9);
	assert_int_equal(strlen(reply_to), 13 + 8 + 22);
	free(out);
	char frame[256];
	snprintf(frame, sizeof(frame), "SEND\ndestination:%s\ncorrelation-id:7\n\nanswer", reply_to);
	feed(srv, frame);
	out = output(req);
	assert_non_null(strstr(out, "subscription:/temp-queue/r\n"));
	assert_non_null(strstr(out, "correlation-id:7\n"));
	assert_non_null(strstr(out, "\n\nanswer|"));
	char want_dest[160];
	snprintf(want_dest, sizeof(want_dest), "destination:%s\n", reply_to);
	assert_non_null(strstr(out, want_dest));
	free(out);
	/* The same NAME again reuses the queue. */
	feed(req, "SEND\ndestination:/queue/rpc\nreply-to:/temp-queue/r\n\nq2");
	out = output(srv);
	assert_non_null(strstr(out, reply_to));
	free(out);
	/* Owner gone: replies are dropped and counted, nobody gets them. */
	conn_free(req);
	assert_null(dests_find(&fx->b->dests, reply_to, strlen(reply_to)));
	feed(srv, frame);
	assert_int_equal(fx->b->stats.dropped[STAT_DROP_REPLY_OWNER_GONE], 1);
	expect_output(srv, "");
}

static void
test_bad_input_errors(void **state)
{
	struct mem_broker *fx = *state;
	struct conn *c = connection(fx);
	struct transport *t = c->transport;
	feed(c, "SEND\ndestination:/queue/x\n\nbefore connect");
	char *out = output(c);
	assert_prefix(out, "ERROR\nmessage:not connected\n");
	free(out);
	/* Written: the connection lingers, reading and dropping what comes,
	 * until the client closes too. */
	assert_int_equal(c->state, CONN_LINGER);
	feed(c, "SEND\ndestination:/queue/x\n\nignored");
	assert_int_equal(transport_mem_unread(t), 0);
	assert_int_equal(evbuffer_get_length(transport_mem_output(t)), 0);
	assert_null(dests_find(&fx->b->dests, "/queue/x", 8));
	transport_mem_end(t);
	assert_true(transport_mem_closed(t));

	c = client(fx, "1.2");
	feed(c, "SEND\ndestination:/bogus/x\nreceipt:9\n\n");
	out = output(c);
	assert_prefix(out, "ERROR\nmessage:unknown destination\nreceipt-id:9\n");
	free(out);

	c = client(fx, "1.2");
	feed(c, "SUBSCRIBE\ndestination:/queue/x\n\n");
	out = output(c);
	assert_prefix(out, "ERROR\nmessage:missing 'id' header\n");
	free(out);
}

/* The client sends bytes, no NUL. */
static void
send_raw(struct conn *c, const char *bytes)
{
	transport_mem_feed(c->transport, bytes, strlen(bytes));
}

/* An HTTP request line, whole or in pieces, is answered in HTTP at once;
 * STOMP's CONNECT (an EOL after it), whole or in pieces, is not. */
static void
test_http_on_a_stomp_port(void **state)
{
	struct mem_broker *fx = *state;
	static const char *const requests[][3] = {
		{ "GET / HTTP/1.1\r\n\r\n", NULL, NULL },
		{ "G", "ET", " /x HTTP/1.1\r\n" },
		{ "OPTIONS", " * HTTP/1.1\r\n", NULL },
		{ "CONNECT 127.0.0.1:61613 HTTP/1.1\r\n", NULL, NULL },
	};
	for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		struct conn *c = connection(fx);
		for (size_t j = 0; j < 3 && requests[i][j] != NULL; j++)
			send_raw(c, requests[i][j]);
		char *out = output(c);
		assert_prefix(out, "HTTP/1.1 400 Bad Request\r\n");
		assert_non_null(strstr(out, "\r\n\r\nThis port speaks STOMP, not HTTP"));
		free(out);
		assert_int_equal(c->state, CONN_LINGER);
		transport_mem_end(c->transport);
	}
	static const char *const stomp[][3] = {
		{ "CONNECT\naccept-version:1.2\n\n", NULL, NULL },
		{ "CONNE", "CT", "\r\naccept-version:1.2\n\n" },
		{ "\n", "GET", "\nx:y\n\n" }, /* a heart-beat first: STOMP, a bad command */
	};
	for (size_t i = 0; i < sizeof(stomp) / sizeof(stomp[0]); i++) {
		struct conn *c = connection(fx);
		for (size_t j = 0; j < 3 && stomp[i][j] != NULL; j++)
			send_raw(c, stomp[i][j]);
		transport_mem_feed(c->transport, "", 1);
		char *out = output(c);
		assert_prefix(out, i < 2 ? "CONNECTED\n" : "ERROR\n");
		free(out);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_queue_round_robin,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_queue_keeps_until_subscribe,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_topic_fanout_and_drop,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_client_ack_cumulative,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_client_individual_and_nack,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_transaction_commit_abort,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_temp_queue_rpc,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_bad_input_errors,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_http_on_a_stomp_port,
		    mem_broker_setup, mem_broker_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
