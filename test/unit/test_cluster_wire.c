/* test_cluster_wire.c - what nodes send each other over NATS: subject
 * tokens from destination names and back, message payloads and their
 * damage, JetStream's JSON answers and ack subjects. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "eft/cluster_wire.h"
#include "eft/parser.h"
#include "eft/subject.h"

#include "msgbuild.h"
#include "natsmatch.h"

static void
test_escape_round_trip(void **state)
{
	(void)state;
	char out[64];
	assert_int_equal(cluster_escape(out, sizeof(out), "eft.q.", "orders", 6), 12);
	assert_string_equal(out, "eft.q.orders");
	const char odd[] = "a.b *>=c%d\xff";
	size_t n = cluster_escape(out, sizeof(out), "", odd, sizeof(odd) - 1);
	assert_string_equal(out, "a=2Eb=20=2A=3E=3Dc=25d=FF");
	assert_null(strpbrk(out, ".*> %"));
	assert_int_equal(cluster_unescape(out, n), (long)sizeof(odd) - 1);
	assert_memory_equal(out, odd, sizeof(odd) - 1);
	/* does not fit: 0, never a cut name */
	assert_int_equal(cluster_escape(out, 8, "eft.q.", "ab", 2), 0);
	assert_int_equal(cluster_escape(out, 9, "eft.q.", "ab", 2), 8);
	assert_int_equal(cluster_escape(out, 9, "", "...", 3), 0);
	/* malformed tokens */
	char bad1[] = "ab=2", bad2[] = "a.b", bad3[] = "=zz", good[] = "=41-_z";
	assert_int_equal(cluster_unescape(bad1, 4), -1);
	assert_int_equal(cluster_unescape(bad2, 3), -1);
	assert_int_equal(cluster_unescape(bad3, 3), -1);
	assert_int_equal(cluster_unescape(good, 6), 4);
	assert_memory_equal(good, "A-_z", 4);
}

/* name (NUL-terminated) maps to want, and want back to name. */
static void
check_topic(const char *name, const char *want)
{
	char out[300], back[300];
	size_t n = cluster_topic_subject(out, sizeof(out), name, strlen(name));
	assert_string_equal(out, want);
	assert_int_equal(n, strlen(want));
	long b = cluster_topic_name(out, n, back, sizeof(back));
	assert_int_equal(b, (long)strlen(name));
	assert_memory_equal(back, name, strlen(name));
}

static void
test_topic_subjects(void **state)
{
	(void)state;
	check_topic("chat.a.b", "eft.t.chat.a.b.$");
	check_topic("news", "eft.t.news.$");
	check_topic("", "eft.t.=.$");                 /* one empty element */
	check_topic("a..b", "eft.t.a.=.b.$");
	check_topic(".a.", "eft.t.=.a.=.$");
	check_topic("a$.=b", "eft.t.a=24.=3Db.$");    /* '$' and '=' never a lone token */
	check_topic("$.=", "eft.t.=24.=3D.$");
	/* wildcard elements in a name are plain elements */
	check_topic("a.*.>.#", "eft.t.a.=2A.=3E.=23.$");
	check_topic("x y.%", "eft.t.x=20y.=25.$");
	/* too long: 0, never a cut subject */
	char out[300];
	assert_int_equal(cluster_topic_subject(out, 13, "ab.cd", 5), 0);
	assert_int_equal(cluster_topic_subject(out, 14, "ab.cd", 5), 13);
	char big[201];
	memset(big, 'x', 200);
	big[200] = '\0';
	big[100] = '.';
	assert_int_equal(cluster_topic_subject(out, sizeof(out), big, 200), 6 + 200 + 2);
	assert_int_equal(cluster_topic_subject(out, 6 + 200 + 2, big, 200), 0);
	/* not topic subjects */
	char back[64];
	const char *bad[] = { "eft.t.a", "eft.q.a.$", "eft.t.$", "eft.t..$", "eft.t.a..$",
		"eft.t.a*.$", "eft.t.=4.$", "eft.t.a.>", "eft.t.a.$.x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(cluster_topic_name(bad[i], strlen(bad[i]), back, sizeof(back)), -1);
	assert_int_equal(cluster_topic_name("eft.t.abc.d.$", 13, back, 5), 5);
	assert_int_equal(cluster_topic_name("eft.t.abc.d.$", 13, back, 4), -1);
}

static void
check_filter(const char *pat, const char *want, bool want_exact)
{
	char out[300];
	bool exact = !want_exact;
	size_t n = cluster_topic_filter(out, sizeof(out), pat, strlen(pat), &exact);
	assert_string_equal(out, want);
	assert_int_equal(n, strlen(want));
	assert_int_equal(exact, want_exact);
}

static void
test_topic_filters(void **state)
{
	(void)state;
	/* every row of docs/cluster-design-26.md 2.1 */
	check_filter("a.b", "eft.t.a.b.$", true);
	check_filter("a.*.c", "eft.t.a.*.c.$", true);
	check_filter("a.>", "eft.t.a.*.>", true);
	check_filter("a.#", "eft.t.a.>", true);
	check_filter("#", "eft.t.>", true);
	check_filter("a.#.c", "eft.t.a.>", false);
	check_filter("#.c", "eft.t.>", false);
	check_filter("a.#.*", "eft.t.a.>", false);
	/* and around them */
	check_filter("a.*.#", "eft.t.a.*.>", true);
	check_filter("a.#.#", "eft.t.a.>", true);     /* "a.#" */
	check_filter("a.*.#.c", "eft.t.a.*.>", false);
	check_filter("*", "eft.t.*.$", true);
	check_filter(">", "eft.t.*.>", true);
	check_filter("*.*", "eft.t.*.*.$", true);
	check_filter("a..b", "eft.t.a.=.b.$", true);  /* a plain name */
	check_filter("a$.*", "eft.t.a=24.*.$", true);
	char out[64];
	bool exact;
	/* malformed patterns, and too long */
	assert_int_equal(cluster_topic_filter(out, sizeof(out), "a.>.b", 5, &exact), 0);
	assert_int_equal(cluster_topic_filter(out, sizeof(out), "a..*", 4, &exact), 0);
	assert_int_equal(cluster_topic_filter(out, sizeof(out), "#.>", 3, &exact), 0);
	assert_int_equal(cluster_topic_filter(out, 10, "abc.*", 5, &exact), 0);
	assert_int_equal(cluster_topic_filter(out, 14, "abc.*", 5, &exact), 13);
	assert_int_equal(cluster_topic_filter(out, 13, "abc.*", 5, &exact), 0);
}

/* The inexact case end to end: a name's subject is inside its pattern's
 * NATS filter, and the name read back from it decides with subject_match. */
static void
test_topic_inexact_filtering(void **state)
{
	(void)state;
	const char *pat = "w.#.z";
	char filter[64], subject[64], name[64];
	bool exact;
	assert_int_equal(cluster_topic_filter(filter, sizeof(filter), pat, 5, &exact), 9);
	assert_false(exact);
	assert_string_equal(filter, "eft.t.w.>");
	const struct { const char *name; bool match; } rows[] = {
		{ "w.z", true }, { "w.a.z", true }, { "w.b.c.z", true }, { "w", false },
		{ "w.a", false }, { "w..z", true }, { "w.z.a", false },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		size_t len = strlen(rows[i].name);
		size_t n = cluster_topic_subject(subject, sizeof(subject), rows[i].name, len);
		assert_true(n > 0);
		assert_memory_equal(subject, "eft.t.w.", 8);   /* inside eft.t.w.> */
		long b = cluster_topic_name(subject, n, name, sizeof(name));
		assert_int_equal(b, (long)len);
		assert_int_equal(subject_match(pat, 5, name, (size_t)b), rows[i].match);
	}
}

/* Every well-formed pattern of up to 3 elements over {a, "", *, >, #}
 * against every name of up to 4 elements over {a, b, "", *}: a name the
 * pattern matches (subject_match) has a subject its filter matches in NATS,
 * and an exact filter matches no other. */
static void
test_topic_filters_agree_with_subject_match(void **state)
{
	(void)state;
	static const char *pel[] = { "a", "", "*", ">", "#" }, *nel[] = { "a", "b", "", "*" };
	char pat[32], name[32], filter[128], subject[128];
	size_t checked = 0, wider = 0;
	for (int plen = 1; plen <= 3; plen++) {
		for (int pi = 0; pi < 125; pi++) {
			int pc = pi;
			pat[0] = '\0';
			for (int e = 0; e < plen; e++, pc /= 5)
				snprintf(pat + strlen(pat), sizeof(pat) - strlen(pat), "%s%s", e ? "." : "",
				    pel[pc % 5]);
			if (pi >= (plen == 1 ? 5 : plen == 2 ? 25 : 125))
				break;
			bool exact;
			if (subject_parse(pat, strlen(pat), NULL) < 0) {
				assert_int_equal(cluster_topic_filter(filter, sizeof(filter), pat,
				    strlen(pat), &exact), 0);
				continue;
			}
			assert_true(cluster_topic_filter(filter, sizeof(filter), pat, strlen(pat),
			    &exact) > 0);
			for (int nlen = 1; nlen <= 4; nlen++) {
				int count = nlen == 1 ? 4 : nlen == 2 ? 16 : nlen == 3 ? 64 : 256;
				for (int ni = 0; ni < count; ni++) {
					int nc = ni;
					name[0] = '\0';
					for (int e = 0; e < nlen; e++, nc /= 4)
						snprintf(name + strlen(name), sizeof(name) - strlen(name), "%s%s",
						    e ? "." : "", nel[nc % 4]);
					assert_true(cluster_topic_subject(subject, sizeof(subject), name,
					    strlen(name)) > 0);
					bool want = subject_match(pat, strlen(pat), name, strlen(name));
					bool got = nats_match(filter, subject);
					if (want && !got)
						fail_msg("'%s' matches '%s', but NATS's %s misses %s", pat, name,
						    filter, subject);
					if (exact && got && !want)
						fail_msg("'%s' does not match '%s', yet exact %s takes %s", pat,
						    name, filter, subject);
					wider += got && !want;
					checked++;
				}
			}
		}
	}
	print_message("%zu pairs, %zu wider\n", checked, wider);
	assert_true(checked > 10000);
	assert_true(wider > 0);     /* the inexact ones were tried */
}

static void
check_round_trip(struct msg_pool *pool, struct msg *m)
{
	size_t size = cluster_msg_size(m);
	char *buf = malloc(size);
	cluster_msg_encode(m, buf);
	bool bad = true;
	struct msg *c = cluster_msg_decode(pool, buf, size, 77, &bad);
	assert_non_null(c);
	assert_false(bad);
	assert_int_equal(c->id, 77);
	assert_int_equal(c->priority, m->priority);
	assert_int_equal(c->expires_ms, m->expires_ms);
	assert_int_equal(c->persistent, m->persistent);
	assert_int_equal(c->redelivered, m->redelivered);
	assert_int_equal(c->now_or_never, m->now_or_never);
	assert_int_equal(msg_nblocks(c), msg_nblocks(m));
	assert_int_equal(c->body_len, m->body_len);
	assert_memory_equal(msg_body(c), msg_body(m), m->body_len);
	const char *v;
	size_t vlen;
	assert_true(msg_header(c, "message-id", 10, &v, &vlen));
	assert_int_equal(vlen, 2);
	assert_memory_equal(v, "77", 2);
	assert_true(msg_header(c, "x-k", 3, &v, &vlen));
	assert_memory_equal(v, "v", 1);
	/* every cut of it is refused, never read past its end */
	for (size_t cut = 0; cut < CLUSTER_MSG_FIXED + 8; cut++) {
		char *part = malloc(cut ? cut : 1);
		memcpy(part, buf, cut);
		assert_null(cluster_msg_decode(pool, part, cut, 78, &bad));
		assert_true(bad);
		free(part);
	}
	msg_unref(c);
	free(buf);
}

static void
test_payload_round_trip(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	static const char body[] = "hello\0world";
	struct msg *m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\nx-k:v\n"
	    "content-length:11\n\n", body, 11, 5);
	m->priority = 7;
	m->expires_ms = 1234567890123ull;
	m->persistent = true;
	check_round_trip(&pool, m);
	msg_unref(m);
	/* one block per version: a header 1.0 cannot carry */
	m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\nx-k:v\nx-nl:a\\nb\n\n", "", 0, 6);
	assert_int_equal(msg_nblocks(m), STOMP_VERSIONS);
	m->redelivered = true;
	check_round_trip(&pool, m);
	m->now_or_never = true; /* expiration:0, to a topic on other nodes */
	check_round_trip(&pool, m);
	msg_unref(m);
	msg_pool_drain(&pool);
}

static void
test_payload_damage(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	struct msg *m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\n\n", "x", 1, 5);
	size_t size = cluster_msg_size(m);
	char *buf = malloc(size);
	bool bad;
	cluster_msg_encode(m, buf);
	buf[0] = 'X'; /* magic */
	assert_null(cluster_msg_decode(&pool, buf, size, 1, &bad));
	assert_true(bad);
	cluster_msg_encode(m, buf);
	buf[5] = 10; /* priority */
	assert_null(cluster_msg_decode(&pool, buf, size, 1, &bad));
	assert_true(bad);
	cluster_msg_encode(m, buf);
	buf[6] = 2; /* nblocks */
	assert_null(cluster_msg_decode(&pool, buf, size, 1, &bad));
	assert_true(bad);
	cluster_msg_encode(m, buf);
	buf[CLUSTER_MSG_FIXED] = (char)0xff; /* a block longer than the payload */
	assert_null(cluster_msg_decode(&pool, buf, size, 1, &bad));
	assert_true(bad);
	cluster_msg_encode(m, buf);
	/* a block without its message-id line */
	char *id = memmem(buf, size, "message-id", 10);
	assert_non_null(id);
	id[0] = 'M';
	assert_null(cluster_msg_decode(&pool, buf, size, 1, &bad));
	assert_true(bad);
	free(buf);
	msg_unref(m);
	msg_pool_drain(&pool);
}

/* A publish retried says so: the copy decodes redelivered, all else as it
 * was; what is no payload is left alone. */
static void
test_set_redelivered(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	struct msg *m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\nx-k:v\n\n", "body",
	    4, 5);
	m->persistent = true;
	m->priority = 3;
	size_t size = cluster_msg_size(m);
	char *buf = malloc(size), *before = malloc(size);
	cluster_msg_encode(m, buf);
	memcpy(before, buf, size);
	bool bad = true;
	struct msg *c = cluster_msg_decode(&pool, buf, size, 9, &bad);
	assert_non_null(c);
	assert_false(c->redelivered);
	msg_unref(c);
	assert_true(cluster_msg_set_redelivered(buf, size));
	c = cluster_msg_decode(&pool, buf, size, 9, &bad);
	assert_non_null(c);
	assert_true(c->redelivered);
	assert_true(c->persistent);
	assert_int_equal(c->priority, 3);
	assert_int_equal(c->body_len, 4);
	assert_memory_equal(msg_body(c), "body", 4);
	msg_unref(c);
	/* only the flag byte changed, and twice is once */
	assert_int_equal(buf[4], before[4] | 4);
	assert_memory_equal(buf + 5, before + 5, size - 5);
	assert_memory_equal(buf, before, 4);
	assert_true(cluster_msg_set_redelivered(buf, size));
	assert_int_equal(buf[4], before[4] | 4);
	/* too short, or not ours: untouched */
	memcpy(buf, before, size);
	assert_false(cluster_msg_set_redelivered(buf, CLUSTER_MSG_FIXED - 1));
	buf[0] = 'X';
	assert_false(cluster_msg_set_redelivered(buf, size));
	assert_int_equal(buf[4], before[4]);
	free(buf);
	free(before);
	msg_unref(m);
	msg_pool_drain(&pool);
}

static void
test_json(void **state)
{
	(void)state;
	const char ack[] = "{\"stream\":\"EFT_QUEUES\", \"seq\" : 42,\"duplicate\":true}";
	const char *v;
	size_t vlen;
	int64_t n;
	assert_true(cluster_json_string(ack, sizeof(ack) - 1, "stream", &v, &vlen));
	assert_int_equal(vlen, 10);
	assert_memory_equal(v, "EFT_QUEUES", 10);
	assert_true(cluster_json_int(ack, sizeof(ack) - 1, "seq", &n));
	assert_int_equal(n, 42);
	assert_false(cluster_json_int(ack, sizeof(ack) - 1, "stream", &n));
	assert_false(cluster_json_string(ack, sizeof(ack) - 1, "missing", &v, &vlen));
	assert_false(cluster_json_error(ack, sizeof(ack) - 1, &n, &v, &vlen));
	const char err[] = "{\"type\":\"io.nats.jetstream.api.v1.stream_create_response\","
	    "\"error\":{\"code\":400,\"err_code\":10058,\"description\":\"stream name \\\"x\\\" "
	    "already in use\"}}";
	assert_true(cluster_json_error(err, sizeof(err) - 1, &n, &v, &vlen));
	assert_int_equal(n, 10058);
	assert_int_equal(vlen, strlen("stream name \\\"x\\\" already in use"));
	/* cut anywhere: no read past the end */
	for (size_t cut = 0; cut < sizeof(err) - 1; cut++) {
		char *part = malloc(cut ? cut : 1);
		memcpy(part, err, cut);
		cluster_json_error(part, cut, &n, &v, &vlen);
		cluster_json_string(part, cut, "description", &v, &vlen);
		free(part);
	}
}

static void
test_ack_subjects(void **state)
{
	(void)state;
	struct cluster_ack k = {0};
	assert_true(cluster_ack_parse("$JS.ACK.EFT_QUEUES.q-a.3.10.9.1700000000000000000.5", &k));
	assert_true(k.has_delivered && k.has_stream_seq && k.has_consumer_seq);
	assert_int_equal(k.delivered, 3);
	assert_int_equal(k.stream_seq, 10);
	assert_int_equal(k.consumer_seq, 9);
	assert_int_equal(k.consumer_len, 3);
	assert_memory_equal(k.consumer, "q-a", 3);
	/* 2.9's form, with a domain and account hash */
	assert_true(cluster_ack_parse(
	    "$JS.ACK.dom.ACCHASH.EFT_QUEUES.q-a.1.18446744073709551615.7.17.5.xyz", &k));
	assert_int_equal(k.delivered, 1);
	assert_true(k.stream_seq == UINT64_MAX);
	assert_int_equal(k.consumer_seq, 7);
	assert_false(cluster_ack_parse("$JS.ACK.EFT_QUEUES.q-a", &k));
	/* each number plain digits; one that is not, is not had */
	static const struct {
		const char *subject;
		bool delivered, stream_seq, consumer_seq;
	} partly[] = {
		{ "$JS.ACK.EFT_QUEUES.q-a.x.10.9.1.5", false, true, true },
		{ "$JS.ACK.EFT_QUEUES.q-a.-1.10.9.1.5", false, true, true },
		{ "$JS.ACK.EFT_QUEUES.q-a. 2.10.9.1.5", false, true, true },
		{ "$JS.ACK.EFT_QUEUES.q-a.+2.10.9.1.5", false, true, true },
		{ "$JS.ACK.EFT_QUEUES.q-a.3.x.9.1.5", true, false, true },
		{ "$JS.ACK.EFT_QUEUES.q-a.3..9.1.5", true, false, true },
		{ "$JS.ACK.EFT_QUEUES.q-a.3.-1.9.1.5", true, false, true },
		{ "$JS.ACK.EFT_QUEUES.q-a.3.10.9x.1.5", true, true, false },
		{ "$JS.ACK.EFT_QUEUES.q-a.3.10..1.5", true, true, false },
	};
	for (size_t i = 0; i < sizeof(partly) / sizeof(partly[0]); i++) {
		assert_true(cluster_ack_parse(partly[i].subject, &k));
		assert_int_equal(k.has_delivered, partly[i].delivered);
		assert_int_equal(k.has_stream_seq, partly[i].stream_seq);
		assert_int_equal(k.has_consumer_seq, partly[i].consumer_seq);
	}
	assert_true(cluster_ack_parse("$JS.ACK.EFT_TOPICS.d_x=3Ay.3.10.9.17.5", &k));
	assert_int_equal(k.consumer_len, 7);
	assert_memory_equal(k.consumer, "d_x=3Ay", 7);
	assert_false(cluster_ack_parse("eft.q.a", &k));
	/* all at once, as pulled() reads them */
	struct cluster_ack ack;
	assert_true(cluster_ack_parse("$JS.ACK.EFT_Q_5.q_a.2.77.9.1700000000000000000.5", &ack));
	assert_int_equal(ack.consumer_len, 3);
	assert_memory_equal(ack.consumer, "q_a", 3);
	assert_true(ack.has_delivered);
	assert_int_equal(ack.delivered, 2);
	assert_true(ack.has_stream_seq);
	assert_int_equal(ack.stream_seq, 77);
	assert_true(cluster_ack_parse("$JS.ACK.dom.H.EFT_Q_5.q_b.1.18446744073709551615.9.17.5.x",
	    &ack));
	assert_memory_equal(ack.consumer, "q_b", 3);
	assert_int_equal(ack.delivered, 1);
	assert_true(ack.stream_seq == UINT64_MAX);
	/* past 64 bits, empty, signed or not digits: not numbers */
	assert_true(cluster_ack_parse("$JS.ACK.S.c.18446744073709551616.+1.9.17.5", &ack));
	assert_false(ack.has_delivered);
	assert_false(ack.has_stream_seq);
	assert_true(cluster_ack_parse("$JS.ACK.S..1..9.17.5", &ack));
	assert_int_equal(ack.consumer_len, 0);
	assert_true(ack.has_delivered);
	assert_false(ack.has_stream_seq);
	assert_false(cluster_ack_parse("$JS.ACK.S.c.1.2", &ack));
	assert_false(cluster_ack_parse("_INBOX.abc.q.1", &ack));
}

/* The partition hash is wire format: these values were computed apart
 * (FNV-1a 32 in Python) and must never change. */
static void
test_queue_partitions(void **state)
{
	(void)state;
	char x200[200];
	memset(x200, 'x', sizeof(x200));
	static const struct {
		const char *name;
		uint32_t p1, p7, p32, p1024;
	} pinned[] = {
		{ "", 0, 2, 5, 453 },
		{ "a", 0, 5, 12, 300 },
		{ "orders", 0, 3, 12, 748 },
	};
	for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++) {
		const char *n = pinned[i].name;
		assert_int_equal(cluster_queue_partition(n, strlen(n), 1), pinned[i].p1);
		assert_int_equal(cluster_queue_partition(n, strlen(n), 7), pinned[i].p7);
		assert_int_equal(cluster_queue_partition(n, strlen(n), 32), pinned[i].p32);
		assert_int_equal(cluster_queue_partition(n, strlen(n), 1024), pinned[i].p1024);
	}
	assert_int_equal(cluster_queue_partition(x200, 200, 1), 0);
	assert_int_equal(cluster_queue_partition(x200, 200, 7), 3);
	assert_int_equal(cluster_queue_partition(x200, 200, 32), 5);
	assert_int_equal(cluster_queue_partition(x200, 200, 1024), 741);

	char subject[64];
	assert_int_equal(cluster_queue_subject(subject, sizeof(subject), 12, "a.b", 3), 14);
	assert_string_equal(subject, "eft.q.12.a=2Eb");
	assert_int_equal(cluster_queue_subject(subject, 12, 12, "a.b", 3), 0);
	assert_int_equal(cluster_queue_subject(subject, sizeof(subject), 0, "q", 1), 9);
	assert_string_equal(subject, "eft.q.0.q");
	assert_int_equal(cluster_queue_subject(subject, sizeof(subject), 4294967295u, "q", 1), 18);
	assert_string_equal(subject, "eft.q.4294967295.q");
	/* the prefix alone must leave room for the NUL */
	assert_int_equal(cluster_queue_subject(subject, 9, 0, "", 0), 8);
	assert_string_equal(subject, "eft.q.0.");
	assert_int_equal(cluster_queue_subject(subject, 8, 0, "", 0), 0);
	assert_int_equal(cluster_queue_subject(subject, 9, 10, "", 0), 0);

	char desc[64];
	uint32_t parts = 0;
	size_t n = cluster_queue_stream_description(desc, sizeof(desc), 3, 32);
	assert_string_equal(desc, "eft queues: partition 3 of 32");
	assert_true(cluster_queue_streams_of(desc, n, &parts));
	assert_int_equal(parts, 32);
	assert_false(cluster_queue_streams_of("eft queues: partition 3 of ", 27, &parts));
	assert_false(cluster_queue_streams_of("eft queues: partition 3 of 0", 28, &parts));
	assert_false(cluster_queue_streams_of("eft queues: partition 3 of 9999999999", 37, &parts));
	assert_false(cluster_queue_streams_of("eft queues: partition 3 or 32", 29, &parts));
	assert_false(cluster_queue_streams_of("something else", 14, &parts));
}

/* CONSUMER.INFO as nats-server 2.9.10 answers it (captured once). */
static void
test_json_member(void **state)
{
	(void)state;
	static const char info[] =
	    "{\"type\":\"io.nats.jetstream.api.v1.consumer_info_response\",\"stream_name\":\"EFT_"
	    "Q_0\",\"name\":\"q_a\",\"created\":\"2026-11-26T13:19:51.651341445Z\",\"config\":{\""
	    "durable_name\":\"q_a\",\"deliver_policy\":\"all\",\"ack_policy\":\"explicit\",\"ack_"
	    "wait\":3000000000,\"max_deliver\":-1,\"filter_subject\":\"eft.q.0.a\",\"replay_polic"
	    "y\":\"instant\",\"max_waiting\":512,\"max_ack_pending\":-1,\"num_replicas\":0},\"del"
	    "ivered\":{\"consumer_seq\":2,\"stream_seq\":2,\"last_active\":\"2026-11-26T13:19:51."
	    "653111073Z\"},\"ack_floor\":{\"consumer_seq\":1,\"stream_seq\":1,\"last_active\":\"2"
	    "026-11-26T13:19:51.653304322Z\"},\"num_ack_pending\":1,\"num_redelivered\":0,\"num_w"
	    "aiting\":0,\"num_pending\":1}";
	int64_t v = 0;
	assert_true(cluster_json_member_int(info, strlen(info), "ack_floor", "stream_seq", &v));
	assert_int_equal(v, 1);
	assert_true(cluster_json_member_int(info, strlen(info), "delivered", "stream_seq", &v));
	assert_int_equal(v, 2);
	assert_true(cluster_json_int(info, strlen(info), "num_ack_pending", &v));
	assert_int_equal(v, 1);
	/* no such object, not an object, or the key outside it */
	assert_false(cluster_json_member_int(info, strlen(info), "nope", "stream_seq", &v));
	assert_false(cluster_json_member_int(info, strlen(info), "name", "stream_seq", &v));
	static const char outside[] = "{\"ack_floor\":{\"consumer_seq\":1},\"stream_seq\":5}";
	assert_false(cluster_json_member_int(outside, strlen(outside), "ack_floor", "stream_seq",
	    &v));
	static const char cut[] = "{\"ack_floor\":{\"stream_seq\":5";
	assert_false(cluster_json_member_int(cut, strlen(cut), "ack_floor", "stream_seq", &v));
}

/* What nats-server 2.9.10 answered, captured once: STREAM.INFO EFT_Q_0 with
 * {"subjects_filter":"eft.q.0.>"}, three queues holding messages, and the
 * same stream empty (no "subjects" map at all). */
static const char stream_info_full[] =
	    "{\"type\":\"io.nats.jetstream.api.v1.stream_info_response\",\"total\":"
	    "3,\"offset\":0,\"limit\":100000,\"config\":{\"name\":\"EFT_Q_0\",\"descript"
	    "ion\":\"eft queues: partition 0 of 1\",\"subjects\":[\"eft.q.0.\\u003e\""
	    "],\"retention\":\"workqueue\",\"max_consumers\":-1,\"max_msgs\":-1,\"max_"
	    "bytes\":-1,\"max_age\":0,\"max_msgs_per_subject\":-1,\"max_msg_size\":-"
	    "1,\"discard\":\"old\",\"storage\":\"file\",\"num_replicas\":1,\"duplicate_w"
	    "indow\":120000000000,\"allow_direct\":false,\"mirror_direct\":false,\""
	    "sealed\":false,\"deny_delete\":false,\"deny_purge\":false,\"allow_roll"
	    "up_hdrs\":false},\"created\":\"2026-11-26T13:16:01.890213964Z\",\"stat"
	    "e\":{\"messages\":6,\"bytes\":263,\"first_seq\":1,\"first_ts\":\"2026-11-2"
	    "6T13:16:01.893388976Z\",\"last_seq\":6,\"last_ts\":\"2026-11-26T13:16:"
	    "01.895876198Z\",\"num_subjects\":3,\"subjects\":{\"eft.q.0.a=2Eb\":2,\"e"
	    "ft.q.0.orders\":3,\"eft.q.0.x\":1},\"consumer_count\":0}}";
static const char stream_info_empty[] =
	    "{\"type\":\"io.nats.jetstream.api.v1.stream_info_response\",\"total\":"
	    "0,\"offset\":0,\"limit\":0,\"config\":{\"name\":\"EFT_Q_0\",\"description\":"
	    "\"eft queues: partition 0 of 1\",\"subjects\":[\"eft.q.0.\\u003e\"],\"re"
	    "tention\":\"workqueue\",\"max_consumers\":-1,\"max_msgs\":-1,\"max_bytes"
	    "\":-1,\"max_age\":0,\"max_msgs_per_subject\":-1,\"max_msg_size\":-1,\"di"
	    "scard\":\"old\",\"storage\":\"file\",\"num_replicas\":1,\"duplicate_window"
	    "\":120000000000,\"allow_direct\":false,\"mirror_direct\":false,\"seale"
	    "d\":false,\"deny_delete\":false,\"deny_purge\":false,\"allow_rollup_hd"
	    "rs\":false},\"created\":\"2026-11-26T13:16:01.890213964Z\",\"state\":{\""
	    "messages\":0,\"bytes\":0,\"first_seq\":0,\"first_ts\":\"0001-01-01T00:00"
	    ":00Z\",\"last_seq\":0,\"last_ts\":\"0001-01-01T00:00:00Z\",\"consumer_co"
	    "unt\":0}}";

struct seen {
	char subjects[8][64];
	uint64_t counts[8];
	int n;
};

static void
seen_one(const char *subject, size_t len, uint64_t count, void *arg)
{
	struct seen *s = arg;
	if (s->n < 8 && len < 64) {
		memcpy(s->subjects[s->n], subject, len);
		s->subjects[s->n][len] = '\0';
		s->counts[s->n] = count;
	}
	s->n++;
}

static long
subjects_of(const char *json, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	return cluster_json_subjects(json, strlen(json), seen_one, s);
}

static void
test_stream_info_subjects(void **state)
{
	(void)state;
	struct seen s;
	assert_int_equal(subjects_of(stream_info_full, &s), 3);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.subjects[0], "eft.q.0.a=2Eb");
	assert_int_equal(s.counts[0], 2);
	assert_string_equal(s.subjects[1], "eft.q.0.orders");
	assert_int_equal(s.counts[1], 3);
	assert_string_equal(s.subjects[2], "eft.q.0.x");
	assert_int_equal(s.counts[2], 1);
	int64_t total = -1;
	assert_true(cluster_json_int(stream_info_full, strlen(stream_info_full), "total", &total));
	assert_int_equal(total, 3);
	/* No messages: no map, which is no entries (the config's "subjects"
	 * array is not it). */
	assert_int_equal(subjects_of(stream_info_empty, &s), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(subjects_of("{\"state\":{\"subjects\":{}}}", &s), 0);
	assert_int_equal(subjects_of("{\"state\": {\"subjects\" : { \"a\" : 18446744073709551615 ,"
	    "\"b\":0 } } }", &s), 2);
	assert_int_equal(s.counts[0], UINT64_MAX);
	assert_int_equal(s.counts[1], 0);
	/* Damage: every way the map can be cut off or bent is -1. */
	static const char *const bad[] = {
		"", "{}", "{\"state\":1}", "{\"state\":{\"subjects\":{",
		"{\"state\":{\"subjects\":{\"a\"", "{\"state\":{\"subjects\":{\"a\":",
		"{\"state\":{\"subjects\":{\"a\":1", "{\"state\":{\"subjects\":{\"a\":1,",
		"{\"state\":{\"subjects\":{\"a\":1,}}}", "{\"state\":{\"subjects\":{\"a\":-1}}}",
		"{\"state\":{\"subjects\":{\"a\":\"1\"}}}", "{\"state\":{\"subjects\":{\"a\" 1}}}",
		"{\"state\":{\"subjects\":{a:1}}}", "{\"state\":{\"subjects\":{\"a\":1 \"b\":2}}}",
		"{\"state\":{\"subjects\":{\"a\":18446744073709551616}}}",
		"{\"state\":{\"subjects\":{\"a\\\\",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(subjects_of(bad[i], &s), -1);
	/* Cut off anywhere inside the map: never read past the end. */
	const char *map = strstr(stream_info_full, "\"subjects\":{");
	assert_non_null(map);
	size_t close = (size_t)(strchr(map, '}') - stream_info_full);
	for (size_t n = (size_t)(map - stream_info_full) + 12; n <= close; n++) {
		char *cut = malloc(n);
		assert_non_null(cut);
		memcpy(cut, stream_info_full, n);
		memset(&s, 0, sizeof(s));
		assert_int_equal(cluster_json_subjects(cut, n, seen_one, &s), -1);
		free(cut);
	}
}

/* The sweep's question to every node: written, read back, and refused
 * when malformed (the cases test_cluster.HeldQuestionTest sends too). */
static void
held_refused(const char *text)
{
	struct cluster_held h;
	assert_false(cluster_held_parse(text, strlen(text), &h));
}

static void
test_held_question(void **state)
{
	(void)state;
	char q[64];
	size_t n = cluster_held_format(q, sizeof(q), "EFT_Q_7", "q_orders", 12345);
	assert_int_equal(n, strlen("EFT_Q_7 q_orders 12345"));
	assert_string_equal(q, "EFT_Q_7 q_orders 12345");
	struct cluster_held h;
	assert_true(cluster_held_parse(q, n, &h));
	assert_int_equal(h.stream_len, 7);
	assert_memory_equal(h.stream, "EFT_Q_7", 7);
	assert_int_equal(h.consumer_len, 8);
	assert_memory_equal(h.consumer, "q_orders", 8);
	assert_int_equal(h.seq, 12345);
	/* too small: nothing written that could be sent */
	assert_int_equal(cluster_held_format(q, 10, "EFT_Q_7", "q_orders", 1), 0);
	/* not NUL-terminated: only len bytes are read */
	assert_true(cluster_held_parse("s c 42junk", 6, &h));
	assert_int_equal(h.seq, 42);
	held_refused("");
	held_refused("garbage");
	held_refused("a b c");
	held_refused("s c 0");
	held_refused("s c ");
	held_refused(" c 1");
	held_refused("s  1");
	held_refused("s c -1");
	held_refused("s c 1 ");
	held_refused("s c 99999999999999999999");
	held_refused("x x x x x x");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape_round_trip),
		cmocka_unit_test(test_topic_subjects),
		cmocka_unit_test(test_topic_filters),
		cmocka_unit_test(test_topic_inexact_filtering),
		cmocka_unit_test(test_topic_filters_agree_with_subject_match),
		cmocka_unit_test(test_payload_round_trip),
		cmocka_unit_test(test_payload_damage),
		cmocka_unit_test(test_set_redelivered),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_ack_subjects),
		cmocka_unit_test(test_queue_partitions),
		cmocka_unit_test(test_json_member),
		cmocka_unit_test(test_stream_info_subjects),
		cmocka_unit_test(test_held_question),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
