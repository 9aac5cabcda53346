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

/* NATS's subject matching: '*' one token, '>' (last) one or more. */
static bool
nats_match(const char *filter, const char *subject)
{
	for (;;) {
		size_t fl = strcspn(filter, "."), sl = strcspn(subject, ".");
		if (fl == 1 && filter[0] == '>')
			return true;        /* the subject has a token left: we are here */
		if (!(fl == 1 && filter[0] == '*') && (fl != sl || memcmp(filter, subject, fl) != 0))
			return false;
		if (filter[fl] == '\0' || subject[sl] == '\0')
			return filter[fl] == subject[sl];
		filter += fl + 1;
		subject += sl + 1;
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
	assert_memory_equal(c->body, m->body, m->body_len);
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
	uint64_t d = 0;
	assert_true(cluster_ack_delivered("$JS.ACK.EFT_QUEUES.q-a.3.10.9.1700000000000000000.5", &d));
	assert_int_equal(d, 3);
	assert_true(cluster_ack_delivered(
	    "$JS.ACK.dom.ACCHASH.EFT_QUEUES.q-a.1.10.9.1700000000000000000.5.xyz", &d));
	assert_int_equal(d, 1);
	assert_false(cluster_ack_delivered("_INBOX.abc.q.1", &d));
	assert_false(cluster_ack_delivered("$JS.ACK.EFT_QUEUES.q-a.x.10.9.1.5", &d));
	assert_false(cluster_ack_delivered("$JS.ACK.EFT_QUEUES.q-a", &d));
	const char *c;
	size_t n;
	assert_true(cluster_ack_consumer("$JS.ACK.EFT_TOPICS.d_x=3Ay.3.10.9.17.5", &c, &n));
	assert_int_equal(n, 7);
	assert_memory_equal(c, "d_x=3Ay", 7);
	assert_true(cluster_ack_consumer("$JS.ACK.dom.H.EFT_QUEUES.q_a.1.10.9.17.5.xyz", &c, &n));
	assert_int_equal(n, 3);
	assert_memory_equal(c, "q_a", 3);
	assert_false(cluster_ack_consumer("$JS.ACK.S..1.2.3.4.5", &c, &n));
	assert_false(cluster_ack_consumer("eft.q.a", &c, &n));
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
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_ack_subjects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
