/* cluster-fuzzer.c - libFuzzer harness for what a node reads from NATS
 * (cluster_wire.c): message payloads from other nodes, JetStream's JSON
 * answers, ack subjects and escaped subject tokens.
 *
 * The input is tried as each.  A payload that decodes is encoded again and
 * decoded again: the same body, priority, expiry and flags, and the same
 * header blocks but for the message-id line.  A token that unescapes is
 * escaped again to the same text.  As a topic name, its subject reads back
 * as the name; split at the first newline into a pattern and a name, the
 * pattern's NATS filter matches the name's subject whenever subject_match
 * says the pattern matches the name, and only then if the filter is exact.
 * Violations abort(); ASan and UBSan catch the rest. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eft/cluster_wire.h"
#include "eft/subject.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZER "cluster-fuzzer"
#include "check.h"
#include "../unit/natsmatch.h"

static void
payload(const char *d, size_t n)
{
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	bool bad;
	struct msg *m = cluster_msg_decode(&pool, d, n, 12345, &bad);
	if (m == NULL) {
		CHECK(bad, "a payload refused for want of memory");
		msg_pool_drain(&pool);
		return;
	}
	CHECK(!bad, "decoded, yet called bad");
	size_t size = cluster_msg_size(m);
	char *again = malloc(size);
	CHECK(again != NULL, "out of memory");
	cluster_msg_encode(m, again);
	struct msg *m2 = cluster_msg_decode(&pool, again, size, 12345, &bad);
	CHECK(m2 != NULL, "a re-encoded payload does not decode");
	CHECK(m2->body_len == m->body_len && memcmp(msg_body(m2), msg_body(m), m->body_len) == 0,
	    "the body changed");
	CHECK(m2->priority == m->priority && m2->expires_ms == m->expires_ms &&
	    m2->persistent == m->persistent && m2->dead == m->dead &&
	    m2->redelivered == m->redelivered && m2->now_or_never == m->now_or_never,
	    "a flag changed");
	CHECK(msg_nblocks(m2) == msg_nblocks(m), "the block count changed");
	for (int v = 0; v < msg_nblocks(m); v++)
		CHECK(m2->block_len[v] == m->block_len[v] &&
		    memcmp(msg_block(m2, v), msg_block(m, v), m->block_len[v]) == 0,
		    "block %d changed (same id both times)", v);
	msg_unref(m2);
	msg_unref(m);
	free(again);
	msg_pool_drain(&pool);
}

/* Each subject of a "subjects" map lies inside the input. */
struct span {
	const char *d;
	size_t n;
	long entries;
};

static void
subject_in(const char *subject, size_t len, uint64_t count, void *arg)
{
	(void)count;
	struct span *s = arg;
	CHECK(subject >= s->d && subject + len <= s->d + s->n, "a subject outside the input");
	s->entries++;
}

static void
json(const char *d, size_t n)
{
	struct span span = { d, n, 0 };
	long entries = cluster_json_subjects(d, n, subject_in, &span);
	CHECK(entries < 0 || entries == span.entries, "a subjects map's count is not its entries");
	const char *v;
	size_t vlen;
	int64_t i;
	if (cluster_json_string(d, n, "description", &v, &vlen))
		CHECK(v >= d && v + vlen <= d + n, "a string outside the input");
	cluster_json_int(d, n, "seq", &i);
	if (cluster_json_error(d, n, &i, &v, &vlen) && vlen > 0)
		CHECK(v >= d && v + vlen <= d + n, "an error text outside the input");
}

static void
token(const char *d, size_t n)
{
	char *t = malloc(n + 1), *out = malloc(3 * n + 1);
	CHECK(t != NULL && out != NULL, "out of memory");
	memcpy(t, d, n);
	long len = cluster_unescape(t, n);
	if (len >= 0) {
		size_t e = cluster_escape(out, 3 * n + 1, "", t, (size_t)len);
		/* "=41" comes back as "A": only a token without escapes is its own
		 * escaped form */
		if (memchr(d, '=', n) == NULL)
			CHECK(e == n && memcmp(out, d, n) == 0, "unescape then escape differs");
	}
	/* an ack subject as a C string */
	memcpy(t, d, n);
	t[n] = '\0';
	struct cluster_ack ack;
	if (cluster_ack_parse(t, &ack))
		CHECK(ack.consumer > t && ack.consumer + ack.consumer_len <= t + n,
		    "the consumer is outside the subject");
	struct cluster_held held;
	if (cluster_held_parse(d, n, &held))
		CHECK(held.stream == d && held.consumer > d && held.consumer + held.consumer_len < d + n &&
		    held.consumer_len > 0 && held.stream_len > 0 && held.seq > 0,
		    "a held question read outside its bytes");
	free(t);
	free(out);
}

static void
topic(const char *d, size_t n)
{
	char subject[600], filter[600], back[600];
	size_t sn = cluster_topic_subject(subject, sizeof(subject), d, n);
	if (sn > 0) {
		long b = cluster_topic_name(subject, sn, back, sizeof(back));
		CHECK(b == (long)n && memcmp(back, d, n) == 0, "a topic name does not come back");
	}
	const char *nl = memchr(d, '\n', n);
	if (nl == NULL)
		return;
	size_t plen = (size_t)(nl - d), nlen = n - plen - 1;
	const char *name = nl + 1;
	bool exact;
	if (memchr(d, '\0', n) != NULL ||
	    cluster_topic_filter(filter, sizeof(filter), d, plen, &exact) == 0 ||
	    cluster_topic_subject(subject, sizeof(subject), name, nlen) == 0)
		return;
	bool want = subject_match(d, plen, name, nlen), got = nats_match(filter, subject);
	CHECK(got || !want, "the pattern matches the name, its NATS filter %s misses %s", filter,
	    subject);
	CHECK(!exact || !got || want, "the pattern misses the name, its exact filter %s takes %s",
	    filter, subject);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *d = (const char *)data;
	payload(d, size);
	json(d, size);
	token(d, size);
	topic(d, size);
	return 0;
}
