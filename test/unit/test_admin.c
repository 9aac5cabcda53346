/* test_admin.c - the admin API and metrics apart from HTTP: JSON and
 * tab-separated answers, routes and their errors, names decoded from the
 * path, purge, and Prometheus text, on a broker driven through the memory
 * transport.  Also sbuf's JSON quoting. */
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

#include "eft/admin.h"
#include "eft/broker.h"
#include "eft/server.h"
#include "eft/conn.h"
#include "eft/metrics.h"
#include "eft/sbuf.h"
#include "memclient.h"

struct fixture {
	struct event_base *base;
	struct config cfg;
	struct broker *b;
	struct memclients mc;
	struct admin_reply r;
};

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	char err[256];
	fx->base = event_base_new();
	config_defaults(&fx->cfg);
	assert_int_equal(config_set(&fx->cfg, "listen", "tcp://127.0.0.1:5000", err,
	    sizeof(err)), 0);
	assert_int_equal(config_check(&fx->cfg, err, sizeof(err)), 0);
	log_set_level(EFT_LOG_ERROR);
	fx->b = server_new(fx->base, &fx->cfg);
	sbuf_init(&fx->r.body);
	*state = fx;
	return fx->base && fx->b ? 0 : -1;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;
	admin_reply_free(&fx->r);
	server_free(fx->b);
	memclients_free(&fx->mc);
	event_base_free(fx->base);
	free(fx);
	return 0;
}

static struct conn *
client(struct fixture *fx, const char *frames, size_t len)
{
	struct conn *c = mem_accept(&fx->mc, fx->b, "mem 127.0.0.1:4000");
	transport_mem_feed(c->transport, frames, len);
	server_flush(fx->b);
	return c;
}

#define CLIENT(fx, lit) client((fx), (lit), sizeof(lit) - 1)

/* The answer to method path, as a string. */
static const char *
ask(struct fixture *fx, const char *method, const char *path, enum admin_format fmt)
{
	admin_reply_free(&fx->r);
	admin_handle(fx->b, method, path, fmt, &fx->r);
	size_t len;
	const char *body = admin_reply_body(&fx->r, &len);
	assert_int_equal(strlen(body), len);
	return body;
}

static void
test_json_strings(void **state)
{
	(void)state;
	struct sbuf s;
	sbuf_init(&s);
	static const char in[] = "a\"b\\c\n\t\x01 \xc3\xa9 \xff\xe2\x82";
	sbuf_json_string(&s, in, sizeof(in) - 1);
	/* é stays; a lone 0xff and a cut sequence become U+FFFD. */
	assert_string_equal(s.data, "\"a\\\"b\\\\c\\n\\u0009\\u0001 \xc3\xa9 \\ufffd\\ufffd\\ufffd\"");
	assert_false(s.failed);
	sbuf_free(&s);
	sbuf_init(&s);
	for (int i = 0; i < 1000; i++)
		sbuf_printf(&s, "%d,", i);
	assert_int_equal(s.len, strlen(s.data));
	assert_memory_equal(s.data + s.len - 4, "999,", 4);
	sbuf_free(&s);
}

static const char SETUP_FRAMES[] =
    "CONNECT\naccept-version:1.2\n\n\0"
    "SUBSCRIBE\ndestination:/queue/busy\nid:s1\nack:client\n\n\0"
    "SEND\ndestination:/queue/a\tb\n\nx\0"
    "SEND\ndestination:/queue/a\tb\n\nyy\0"
    "SEND\ndestination:/queue/busy\n\nz\0"
    "SEND\ndestination:/topic/none\n\nlost\0";

static void
test_lists(void **state)
{
	struct fixture *fx = *state;
	CLIENT(fx, SETUP_FRAMES);
	assert_string_equal(ask(fx, "GET", "/api/queues", ADMIN_JSON),
	    "[{\"name\":\"/queue/a\\u0009b\",\"type\":\"queue\",\"depth\":2,\"bytes\":272,"
	    "\"unacked\":0,\"consumers\":0,\"published\":2,\"cluster_waiting\":null},"
	    "{\"name\":\"/queue/busy\",\"type\":\"queue\",\"depth\":0,\"bytes\":0,"
	    "\"unacked\":1,\"consumers\":1,\"published\":1,\"cluster_waiting\":null}]\n");
	assert_int_equal(fx->r.status, 200);
	assert_string_equal(fx->r.content_type, "application/json");
	assert_string_equal(ask(fx, "GET", "/api/queues", ADMIN_TSV),
	    "name\ttype\tdepth\tbytes\tunacked\tconsumers\tpublished\tcluster_waiting\n"
	    "/queue/a\\tb\tqueue\t2\t272\t0\t0\t2\t-\n"
	    "/queue/busy\tqueue\t0\t0\t1\t1\t1\t-\n");
	assert_string_equal(ask(fx, "GET", "/api/topics", ADMIN_JSON), "[]\n");
	assert_string_equal(ask(fx, "GET", "/api/scheduled", ADMIN_TSV),
	    "id\tdestination\tdue\tdeliveries_left\tperiod_ms\tcron\tsize\n");
	assert_string_equal(ask(fx, "GET", "/api/connections", ADMIN_TSV),
	    "id\tpeer\tlistener\tlogin\tversion\tstate\tconnected_seconds\tunacked\tsubscriptions\n"
	    "1\t127.0.0.1:4000\ttcp://127.0.0.1:5000\t-\t1.2\topen\t0\t1\t/queue/busy\n");
	const char *o = ask(fx, "GET", "/api/overview", ADMIN_JSON);
	assert_non_null(strstr(o, "\"queues\":2,\"topics\":0,\"temp_queues\":0,"));
	assert_non_null(strstr(o, "\"messages_queued\":2,\"messages_unacked\":1,"
	    "\"messages_published\":4,\"messages_delivered\":1,"));
	assert_non_null(strstr(o, "\"messages_dropped\":1,"));
	assert_non_null(strstr(o, "\"journal_bytes\":null,\"cluster_waiting_age_ms\":null,"
	    "\"listeners\":[{\"url\":"
	    "\"tcp://127.0.0.1:5000\",\"connections\":1}]}\n"));
}

static void
test_actions_and_errors(void **state)
{
	struct fixture *fx = *state;
	CLIENT(fx, SETUP_FRAMES);
	assert_string_equal(ask(fx, "POST", "/api/queues/a%09b/purge", ADMIN_JSON),
	    "{\"queue\":\"/queue/a\\u0009b\",\"purged\":2}\n");
	assert_int_equal(fx->b->stats.dropped[STAT_DROP_PURGED], 2);
	assert_null(dests_find(&fx->b->dests, "/queue/a\tb", 10)); /* forgotten */
	ask(fx, "DELETE", "/api/queues/%2Fqueue%2Fbusy", ADMIN_JSON);
	assert_int_equal(fx->r.status, 409);
	assert_string_equal(ask(fx, "DELETE", "/api/queues/busy", ADMIN_TSV),
	    "/queue/busy has 1 consumer: it can be deleted once they unsubscribe\n");
	struct {
		const char *method, *path;
		int status;
		const char *allow;
	} cases[] = {
		{ "GET", "/nope", 404, NULL },
		{ "GET", "/api/nope", 404, NULL },
		{ "POST", "/api/overview", 405, "GET, HEAD" },
		{ "GET", "/api/queues/x/purge", 405, "POST" },
		{ "PUT", "/api/queues/x", 405, "DELETE" },
		{ "GET", "/api/connections/1", 405, "DELETE" },
		{ "DELETE", "/api/queues/x%zz", 400, NULL },
		{ "DELETE", "/api/queues/x%0", 400, NULL },
		{ "DELETE", "/api/queues/x%00y", 400, NULL },
		{ "DELETE", "/api/queues/", 400, NULL },
		{ "POST", "/api/queues//purge", 405, "DELETE" }, /* the queue "/purge" */
		{ "DELETE", "/api/queues/none", 404, NULL },
		{ "DELETE", "/api/connections/99", 404, NULL },
		{ "DELETE", "/api/connections/1x", 400, NULL },
		{ "DELETE", "/api/connections/", 400, NULL },
		{ "DELETE", "/api/connections/-1", 400, NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *body = ask(fx, cases[i].method, cases[i].path, ADMIN_JSON);
		if (fx->r.status != cases[i].status)
			fail_msg("%s %s: %d, not %d", cases[i].method, cases[i].path, fx->r.status,
			    cases[i].status);
		assert_memory_equal(body, "{\"error\":\"", 10);
		if (cases[i].allow)
			assert_string_equal(fx->r.allow, cases[i].allow);
		else
			assert_null(fx->r.allow);
	}
	/* The page is served as it is, not copied. */
	ask(fx, "GET", "/", ADMIN_JSON);
	assert_int_equal(fx->r.status, 200);
	assert_ptr_equal(fx->r.fixed, eft_dashboard_html);
	assert_non_null(strstr(eft_dashboard_html, "<html"));
}

static void
test_close_connection(void **state)
{
	struct fixture *fx = *state;
	struct conn *c = CLIENT(fx, "CONNECT\naccept-version:1.2\n\n");
	struct evbuffer *out = transport_mem_output(c->transport);
	evbuffer_drain(out, evbuffer_get_length(out));
	assert_string_equal(ask(fx, "DELETE", "/api/connections/1", ADMIN_JSON),
	    "{\"closed\":1}\n");
	server_flush(fx->b);
	size_t n = evbuffer_get_length(out);
	char *got = calloc(1, n + 1);
	evbuffer_remove(out, got, n);
	assert_memory_equal(got, "ERROR\n", 6);
	assert_non_null(strstr(got, "message:closed by an administrator\n"));
	free(got);
	assert_true(conn_is_closing(c));
}

/* The value of one sample in Prometheus text, or -1. */
static long long
metric(const char *text, const char *sample)
{
	size_t n = strlen(sample);
	for (const char *p = text; (p = strstr(p, sample)) != NULL; p += n)
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtoll(p + n + 1, NULL, 10);
	return -1;
}

static void
test_metrics(void **state)
{
	struct fixture *fx = *state;
	CLIENT(fx, SETUP_FRAMES);
	CLIENT(fx, "CONNECT\naccept-version:1.2\n\n\0BOGUS\n\n\0");
	struct sbuf s;
	sbuf_init(&s);
	metrics_render(fx->b, &s);
	assert_false(s.failed);
	/* The second is closing after its ERROR: open until it is closed. */
	assert_int_equal(metric(s.data, "eft_connections{listener=\"tcp://127.0.0.1:5000\"}"), 2);
	assert_int_equal(metric(s.data, "eft_connections_accepted_total"), 2);
	assert_int_equal(metric(s.data, "eft_frames_received_total{command=\"SEND\"}"), 4);
	assert_int_equal(metric(s.data, "eft_frames_received_total{command=\"CONNECT\"}"), 2);
	assert_int_equal(metric(s.data, "eft_frames_received_total{command=\"unknown\"}"), 1);
	assert_int_equal(metric(s.data, "eft_frames_sent_total{command=\"ERROR\"}"), 1);
	assert_int_equal(metric(s.data, "eft_frames_sent_total{command=\"CONNECTED\"}"), 2);
	assert_int_equal(metric(s.data, "eft_messages_published_total"), 4);
	assert_int_equal(metric(s.data, "eft_messages_dropped_total{reason=\"no_subscriber\"}"), 1);
	assert_int_equal(metric(s.data, "eft_queue_messages{queue=\"/queue/a\tb\"}"), 2);
	assert_int_equal(metric(s.data, "eft_queue_messages_unacknowledged{queue=\"/queue/busy\"}"), 1);
	assert_int_equal(metric(s.data, "eft_queue_consumers{queue=\"/queue/busy\"}"), 1);
	assert_int_equal(metric(s.data, "eft_queues"), 2);
	/* One TYPE line per family, before its samples. */
	const char *t = strstr(s.data, "# TYPE eft_queue_messages gauge\n");
	assert_non_null(t);
	assert_true(t < strstr(s.data, "eft_queue_messages{"));
	assert_null(strstr(t + 1, "# TYPE eft_queue_messages gauge\n"));
	assert_null(strstr(s.data, "eft_journal_bytes")); /* no data-dir */
	sbuf_free(&s);
}

/* A backend that counts what waits elsewhere, as the cluster does: three
 * queues, one of them also here, and this node's other queue not listed
 * (so none of it waits). */
static const struct { const char *name; uint64_t count; } fake_waiting[] = {
	{ "/queue/zz", 3 }, { "/queue/busy", 7 }, { "/queue/0first", 5 },
};

static int64_t
fake_waiting_of(const void *impl, const char *name, size_t len)
{
	(void)impl;
	if (len < 7 || memcmp(name, "/queue/", 7) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(fake_waiting) / sizeof(fake_waiting[0]); i++)
		if (strlen(fake_waiting[i].name) == len && memcmp(fake_waiting[i].name, name, len) == 0)
			return (int64_t)fake_waiting[i].count;
	return 0;
}

static void
fake_each_waiting(const void *impl, void (*fn)(const char *name, size_t len, uint64_t count,
    void *arg), void *arg)
{
	(void)impl;
	for (size_t i = 0; i < sizeof(fake_waiting) / sizeof(fake_waiting[0]); i++)
		fn(fake_waiting[i].name, strlen(fake_waiting[i].name), fake_waiting[i].count, arg);
}

static int64_t
fake_waiting_age_ms(const void *impl)
{
	(void)impl;
	return 1234;
}

static const struct backend_ops fake_counting_ops = {
	.name = "fake",
	.waiting = fake_waiting_of,
	.each_waiting = fake_each_waiting,
	.waiting_age_ms = fake_waiting_age_ms,
};

static void
test_cluster_waiting(void **state)
{
	struct fixture *fx = *state;
	CLIENT(fx, SETUP_FRAMES);
	struct backend fake = { &fake_counting_ops, NULL };
	fx->b->backend = &fake;
	/* Those waiting only elsewhere are rows, in name order among this
	 * node's queues. */
	assert_string_equal(ask(fx, "GET", "/api/queues", ADMIN_TSV),
	    "name\ttype\tdepth\tbytes\tunacked\tconsumers\tpublished\tcluster_waiting\n"
	    "/queue/0first\tqueue\t0\t0\t0\t0\t0\t5\n"
	    "/queue/a\\tb\tqueue\t2\t272\t0\t0\t2\t0\n"
	    "/queue/busy\tqueue\t0\t0\t1\t1\t1\t7\n"
	    "/queue/zz\tqueue\t0\t0\t0\t0\t0\t3\n");
	assert_non_null(strstr(ask(fx, "GET", "/api/queues", ADMIN_JSON),
	    "\"published\":0,\"cluster_waiting\":3}]\n"));
	assert_non_null(strstr(ask(fx, "GET", "/api/overview", ADMIN_JSON),
	    "\"cluster_waiting_age_ms\":1234,"));
	struct sbuf s;
	sbuf_init(&s);
	metrics_render(fx->b, &s);
	assert_false(s.failed);
	assert_non_null(strstr(s.data, "# TYPE eft_queue_messages_in_cluster gauge\n"
	    "eft_queue_messages_in_cluster{queue=\"/queue/0first\"} 5\n"
	    "eft_queue_messages_in_cluster{queue=\"/queue/a\tb\"} 0\n"
	    "eft_queue_messages_in_cluster{queue=\"/queue/busy\"} 7\n"
	    "eft_queue_messages_in_cluster{queue=\"/queue/zz\"} 3\n"));
	assert_non_null(strstr(s.data, "\neft_cluster_stats_age_seconds 1.234\n"));
	sbuf_free(&s);
	fx->b->backend = NULL;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_strings),
		cmocka_unit_test_setup_teardown(test_lists, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cluster_waiting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_actions_and_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
