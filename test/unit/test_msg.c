/* test_msg.c - messages: the shared header block per version, the size
 * classes of the message pool, reuse, and the memory accounting that flow
 * control relies on. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "eft/msg.h"
#include "eft/parser.h"

#include "msgbuild.h"

static void
test_block_plain(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	struct msg *m = build(&pool, STOMP_1_2,
	    "SEND\ndestination:/queue/a\nreceipt:9\ncontent-type:text/plain\nx-k:v\n\n", "hello", 5, 42);
	const char *want = "destination:/queue/a\nmessage-id:42\ncontent-type:text/plain\nx-k:v\n"
	    "content-length:5\n";
	assert_int_equal(m->block_len[STOMP_1_2], strlen(want));
	assert_memory_equal(msg_block(m, STOMP_1_2), want, strlen(want));
	/* Nothing to escape: every version shares the bytes. */
	assert_ptr_equal(msg_block(m, STOMP_1_0), msg_block(m, STOMP_1_2));
	assert_memory_equal(msg_body(m), "hello", 6); /* with its NUL */
	msg_unref(m);
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

static void
test_block_escaped_per_version(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	/* 1.2 sender: the value holds a colon and a CR once unescaped. */
	struct msg *m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\nk:a\\cb\\rc\n\n", "", 0, 7);
	const char *v12 = "destination:/queue/a\nmessage-id:7\nk:a\\cb\\rc\ncontent-length:0\n";
	const char *v11 = "destination:/queue/a\nmessage-id:7\nk:a\\cb\rc\ncontent-length:0\n";
	/* 1.0 cannot carry a CR in a header: that header is left out. */
	const char *v10 = "destination:/queue/a\nmessage-id:7\ncontent-length:0\n";
	assert_int_equal(m->block_len[STOMP_1_2], strlen(v12));
	assert_memory_equal(msg_block(m, STOMP_1_2), v12, strlen(v12));
	assert_int_equal(m->block_len[STOMP_1_1], strlen(v11));
	assert_memory_equal(msg_block(m, STOMP_1_1), v11, strlen(v11));
	assert_int_equal(m->block_len[STOMP_1_0], strlen(v10));
	assert_memory_equal(msg_block(m, STOMP_1_0), v10, strlen(v10));
	msg_unref(m);
	msg_pool_drain(&pool);
}

static void
test_size_classes_and_reuse(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 64 << 20);
	static char body[20000];
	memset(body, 'x', sizeof(body));
	size_t prev_size = 0;
	for (size_t n = 0; n <= sizeof(body); n += 37) {
		struct msg *m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\n\n", body, n, 1);
		size_t need = sizeof(struct msg) + m->block_len[0] + n + 1;
		size_t size = m->size;
		/* Rounded to malloc's own steps (16 bytes with its 8-byte head),
		 * never more: a 1 KB message must not take a bigger class. */
		assert_true(size >= need);
		assert_true(size < need + MSG_ALLOC_STEP);
		assert_int_equal((size + 8) % MSG_ALLOC_STEP, 0);
		assert_true(size >= prev_size);
		prev_size = size;
		assert_int_equal(pool.live_bytes, size);
		/* Freed into the pool, the same block serves the same size again. */
		struct msg *again_ptr = m;
		size_t pooled = pool.bytes;
		msg_unref(m);
		assert_int_equal(pool.live_bytes, 0);
		/* Big ones go back to malloc. */
		assert_int_equal(pool.bytes, pooled + (size < MSG_POOL_MAX ? size : 0));
		/* A bigger size never takes that block. */
		if (size + MSG_ALLOC_STEP < MSG_POOL_MAX) {
			struct msg *m3 = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\n\n", body,
			    n + MSG_ALLOC_STEP, 3);
			assert_ptr_not_equal(m3, again_ptr);
			assert_true(m3->size > size);
			msg_unref(m3);
		}
		struct msg *m2 = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\n\n", body, n, 2);
		if (size < MSG_POOL_MAX)
			assert_ptr_equal(m2, again_ptr);
		msg_unref(m2);
	}
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
	assert_int_equal(pool.bytes, 0);
}

static void
test_pool_bounded(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 4096); /* room for a few small blocks only */
	struct msg *m[64];
	size_t live = 0;
	for (int i = 0; i < 64; i++) {
		m[i] = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\n\n", "abc", 3, (uint64_t)i);
		live += m[i]->size;
	}
	assert_int_equal(pool.live_bytes, live);
	assert_true(live > 2 * 4096); /* more than the pool may keep */
	for (int i = 0; i < 64; i++)
		msg_unref(m[i]);
	assert_true(pool.bytes <= 4096);
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

static void
test_refcount(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	struct msg *m = build(&pool, STOMP_1_2, "SEND\ndestination:/topic/t\n\n", "b", 1, 3);
	msg_ref(m);
	msg_ref(m);
	size_t held = pool.live_bytes;
	msg_unref(m);
	msg_unref(m);
	assert_int_equal(pool.live_bytes, held); /* one holder left */
	msg_unref(m);
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

/* Block v of m is exactly want. */
static void
assert_block(const struct msg *m, enum stomp_version v, const char *want)
{
	assert_int_equal(m->block_len[v], strlen(want));
	assert_memory_equal(msg_block(m, v), want, strlen(want));
}

static void
test_clone(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	struct msg *m = build(&pool, STOMP_1_2, "SEND\ndestination:/topic/t\nx-k:v\n\n", "b", 1, 3);
	m->persistent = true;
	m->priority = 7;
	struct msg *c = msg_clone(&pool, m, 123456);
	assert_non_null(c);
	assert_block(c, STOMP_1_2, "destination:/topic/t\nmessage-id:123456\nx-k:v\ncontent-length:1\n");
	assert_int_equal(msg_nblocks(c), 1);
	assert_true(c->persistent);
	assert_int_equal(c->priority, 7);
	assert_int_equal(c->id, 123456);
	msg_unref(c);
	msg_unref(m);

	/* Per-version blocks, the 1.0 one without its destination: the id line
	 * is found first there, second in the others. */
	m = build(&pool, STOMP_1_2, "SEND\ndestination:/topic/a\\nb\nk:a\\cb\n\n", "", 0, 9);
	c = msg_clone(&pool, m, 10);
	assert_non_null(c);
	assert_block(c, STOMP_1_0, "message-id:10\nk:a:b\ncontent-length:0\n");
	assert_block(c, STOMP_1_1, "destination:/topic/a\\nb\nmessage-id:10\nk:a\\cb\ncontent-length:0\n");
	assert_block(c, STOMP_1_2, "destination:/topic/a\\nb\nmessage-id:10\nk:a\\cb\ncontent-length:0\n");
	msg_unref(c);
	msg_unref(m);

	/* A stored block without a message-id line, or cut short: no copy. */
	const char *bad[] = { "destination:/q\ncontent-length:0\n", "destination:/q\nmessage-id:1" };
	for (int i = 0; i < 2; i++) {
		uint32_t len = (uint32_t)strlen(bad[i]);
		m = msg_restore(&pool, 1, 1, &bad[i], &len, "", 0);
		assert_non_null(m);
		assert_null(msg_clone(&pool, m, 2));
		msg_unref(m);
	}
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

static void
test_format_u64(void **state)
{
	(void)state;
	char buf[24], want[24];
	uint64_t samples[] = { 0, 1, 9, 10, 99, 100, 101, 999, 1000, 65535, 1234567890123ull,
		UINT64_MAX };
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		size_t n = msg_format_u64(buf, samples[i]);
		snprintf(want, sizeof(want), "%llu", (unsigned long long)samples[i]);
		assert_string_equal(buf, want);
		assert_int_equal(n, strlen(want));
	}
	/* The digit count's edges: each side of every power of 10 and of 2. */
	uint64_t p10 = 1;
	for (int k = 0; k < 64; k++) {
		uint64_t edges[6] = { p10 - 1, p10, p10 + 1, (1ull << k) - 1, 1ull << k,
			(1ull << k) + 1 };
		for (size_t i = 0; i < 6; i++) {
			size_t n = msg_format_u64(buf, edges[i]);
			snprintf(want, sizeof(want), "%llu", (unsigned long long)edges[i]);
			assert_string_equal(buf, want);
			assert_int_equal(n, strlen(want));
		}
		if (k < 19)
			p10 *= 10;
	}
}

/* The message-id line of m's block: the id, however ids came (one after
 * another through every carry, a jump, the same id again, down). */
static void
test_ids_in_turn(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	uint64_t ids[4000];
	size_t n = 0;
	for (uint64_t id = 1; id <= 1100; id++)
		ids[n++] = id;
	ids[n++] = 99999; /* a jump, then the carry that adds a digit */
	ids[n++] = 100000;
	ids[n++] = 100001;
	ids[n++] = 100001; /* the same id twice */
	ids[n++] = 7;      /* and down */
	ids[n++] = 8;
	ids[n++] = UINT64_MAX - 1;
	ids[n++] = UINT64_MAX;
	ids[n++] = 0;
	ids[n++] = 1;
	for (size_t i = 0; i < n; i++) {
		struct msg *m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\n\n", "x", 1, ids[i]);
		char want[128];
		int len = snprintf(want, sizeof(want), "destination:/queue/a\nmessage-id:%llu\n"
		    "content-length:1\n", (unsigned long long)ids[i]);
		assert_int_equal(m->block_len[STOMP_1_2], (size_t)len);
		assert_memory_equal(msg_block(m, STOMP_1_2), want, (size_t)len);
		msg_unref(m);
	}
	msg_pool_drain(&pool);
}

/* What the broker writes itself or only it reads is not in the block, in
 * every position and however often; everything else is, in its order.
 * reply-to stays unless the spec replaces it. */
static void
test_dropped_headers(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	const char *head = "SEND\nx-a:1\ndestination:/queue/a\nmessage-id:m\nreceipt:r\n"
	    "transaction:t\nsubscription:s\nack:k\nredelivered:true\nreply-to:/queue/r\n"
	    "content-type:text/plain\nredelivered:x\nreceipt:r2\nredeliverex:1\nx-b:2\n"
	    "content-length:5\n\n";
	struct msg *m = build(&pool, STOMP_1_2, head, "hello", 5, 3);
	const char *want = "destination:/queue/a\nmessage-id:3\nx-a:1\nreply-to:/queue/r\n"
	    "content-type:text/plain\nredeliverex:1\nx-b:2\ncontent-length:5\n";
	assert_int_equal(m->block_len[STOMP_1_2], strlen(want));
	assert_memory_equal(msg_block(m, STOMP_1_2), want, strlen(want));
	msg_unref(m);

	/* The spec's reply-to (a temp-queue's real name) replaces the frame's. */
	m = build_reply_to(&pool, STOMP_1_2, head, "hello", 5, 4, "/queue/t-1");
	want = "destination:/queue/a\nmessage-id:4\nreply-to:/queue/t-1\nx-a:1\n"
	    "content-type:text/plain\nredeliverex:1\nx-b:2\ncontent-length:5\n";
	assert_int_equal(m->block_len[STOMP_1_2], strlen(want));
	assert_memory_equal(msg_block(m, STOMP_1_2), want, strlen(want));
	msg_unref(m);
	msg_pool_drain(&pool);
}

/* A SEND whose own lines are the block but for message-id is built from
 * them in two copies (msg_new's frame_lines_fit), lines left out after
 * content-length's skipped; any other is built header by header.  Both must give the same bytes as write_block's order: the
 * destination, message-id, reply-to, the kept headers, content-length. */
static void
test_block_from_frame_lines(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	static const struct {
		const char *head;
		const char *reply_to;
		const char *want;
	} cases[] = {
		/* the SEND's lines as they are */
		{ "SEND\ndestination:/queue/a\ncontent-length:5\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\ncontent-length:5\n" },
		{ "SEND\ndestination:/queue/a\nx-k:v\ncontent-type:text/plain\ncontent-length:5\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\nx-k:v\ncontent-type:text/plain\n"
		    "content-length:5\n" },
		/* after content-length, lines that are left out */
		{ "SEND\ndestination:/queue/a\nx-k:v\ncontent-length:5\nreceipt:9\ntransaction:t\n\n",
		    NULL, "destination:/queue/a\nmessage-id:42\nx-k:v\ncontent-length:5\n" },
		{ "SEND\ndestination:/queue/a\ncontent-length:5\ncontent-length:7\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\ncontent-length:5\n" },
		/* not: a line kept after content-length's */
		{ "SEND\ndestination:/queue/a\ncontent-length:5\nx-k:v\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\nx-k:v\ncontent-length:5\n" },
		{ "SEND\ndestination:/queue/a\ncontent-length:5\nreceipt:9\nx-k:v\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\nx-k:v\ncontent-length:5\n" },
		/* not: a header between that is left out */
		{ "SEND\ndestination:/queue/a\nreceipt:9\ncontent-length:5\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\ncontent-length:5\n" },
		{ "SEND\ndestination:/queue/a\nredelivered:true\nx-k:v\ncontent-length:5\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\nx-k:v\ncontent-length:5\n" },
		{ "SEND\ndestination:/queue/a\ndestination:/queue/b\ncontent-length:5\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\ncontent-length:5\n" },
		/* not: another order, or no content-length */
		{ "SEND\ncontent-length:5\ndestination:/queue/a\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\ncontent-length:5\n" },
		{ "SEND\nx-k:v\ndestination:/queue/a\ncontent-length:5\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\nx-k:v\ncontent-length:5\n" },
		{ "SEND\ndestination:/queue/a\nx-k:v\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\nx-k:v\ncontent-length:5\n" },
		/* not: CRLF line ends, on every line or on one */
		{ "SEND\r\ndestination:/queue/a\r\nx-k:v\r\ncontent-length:5\r\n\r\n", NULL,
		    "destination:/queue/a\nmessage-id:42\nx-k:v\ncontent-length:5\n" },
		{ "SEND\ndestination:/queue/a\r\nx-k:v\ncontent-length:5\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\nx-k:v\ncontent-length:5\n" },
		{ "SEND\ndestination:/queue/a\nx-k:v\ncontent-length:5\r\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\nx-k:v\ncontent-length:5\n" },
		/* not: a content-length written otherwise, a reply-to replaced */
		{ "SEND\ndestination:/queue/a\ncontent-length:05\n\n", NULL,
		    "destination:/queue/a\nmessage-id:42\ncontent-length:5\n" },
		{ "SEND\ndestination:/queue/a\ncontent-length:5\n\n", "/queue/t-1",
		    "destination:/queue/a\nmessage-id:42\nreply-to:/queue/t-1\ncontent-length:5\n" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct msg *m = build_reply_to(&pool, STOMP_1_2, cases[i].head, "hello", 5, 42,
		    cases[i].reply_to);
		size_t len = strlen(cases[i].want);
		for (int v = 0; v < STOMP_VERSIONS; v++) {
			assert_int_equal(m->block_len[v], len);
			assert_memory_equal(msg_block(m, (enum stomp_version)v), cases[i].want, len);
		}
		assert_memory_equal(msg_body(m), "hello", 6);
		msg_unref(m);
	}

	/* A destination other than the frame's own bytes (an alias resolved)
	 * is written as given. */
	struct msg *m = build_as(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\ncontent-length:5\n\n",
	    "hello", 5, 43, NULL, "/queue/b");
	const char *want = "destination:/queue/b\nmessage-id:43\ncontent-length:5\n";
	assert_int_equal(m->block_len[STOMP_1_2], strlen(want));
	assert_memory_equal(msg_block(m, STOMP_1_2), want, strlen(want));
	msg_unref(m);
	msg_pool_drain(&pool);
}

/* content-length is written as a number is: the SEND's own text when it is
 * that, not when it has leading zeros; and for a body without one. */
static void
test_content_length_as_written(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	static const struct {
		const char *head;
		const char *line;
	} cases[] = {
		{ "SEND\ndestination:/queue/a\ncontent-length:5\n\n", "content-length:5\n" },
		{ "SEND\ndestination:/queue/a\ncontent-length:005\n\n", "content-length:5\n" },
		{ "SEND\ndestination:/queue/a\n\n", "content-length:5\n" },
		{ "SEND\ndestination:/queue/a\ncontent-length:5\ncontent-length:7\n\n",
		    "content-length:5\n" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct msg *m = build(&pool, STOMP_1_2, cases[i].head, "hello", 5, 1);
		size_t ll = strlen(cases[i].line);
		assert_true(m->block_len[STOMP_1_2] >= ll);
		assert_memory_equal(msg_block(m, STOMP_1_2) + m->block_len[STOMP_1_2] - ll, cases[i].line, ll);
		msg_unref(m);
	}
	struct msg *m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\ncontent-length:0\n\n", "", 0, 1);
	assert_memory_equal(msg_block(m, STOMP_1_2) + m->block_len[STOMP_1_2] - 17, "content-length:0\n", 17);
	msg_unref(m);
	msg_pool_drain(&pool);
}

/* msg_header finds name in m with value want, or (want NULL) does not. */
static void
assert_header(const struct msg *m, const char *name, const char *want)
{
	const char *value = NULL;
	size_t vlen = 0;
	bool found = msg_header(m, name, strlen(name), &value, &vlen);
	if (want == NULL) {
		assert_false(found);
		return;
	}
	assert_true(found);
	assert_int_equal(vlen, strlen(want));
	assert_memory_equal(value, want, vlen);
	/* Into the block, not a copy. */
	assert_true(value >= msg_block(m, STOMP_1_0) &&
	    value + vlen <= msg_block(m, STOMP_1_0) + m->block_len[STOMP_1_0]);
}

static void
test_header(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	/* 1.2 sender: sel's value holds colons, nl's a newline (not in 1.0). */
	struct msg *m = build(&pool, STOMP_1_2,
	    "SEND\ndestination:/queue/a\npriority:5\nprio:3\nsel:k\\cv\\c\nempty:\nk:first\n"
	    "nl:a\\nb\nk:second\n\n", "hello", 5, 42);
	assert_int_equal(msg_nblocks(m), STOMP_VERSIONS);
	assert_header(m, "destination", "/queue/a");
	assert_header(m, "message-id", "42");
	assert_header(m, "priority", "5");
	assert_header(m, "prio", "3");
	assert_header(m, "priorit", NULL);
	assert_header(m, "pri", NULL);
	assert_header(m, "priorityx", NULL);
	assert_header(m, "sel", "k:v:");
	/* Not header k inside sel's line, nor k:v's "value". */
	assert_header(m, "k", "first");
	assert_header(m, "sel:k", NULL);
	assert_header(m, "empty", "");
	assert_header(m, "nl", NULL);
	assert_header(m, "content-length", "5"); /* the last line */
	assert_header(m, "content-lengt", NULL);
	assert_header(m, "absent", NULL);
	assert_header(m, "", NULL);
	msg_unref(m);

	/* One block for every version. */
	m = build(&pool, STOMP_1_2, "SEND\ndestination:/topic/t\nx:1\nx:2\ny:\n\n", "", 0, 7);
	assert_int_equal(msg_nblocks(m), 1);
	assert_header(m, "destination", "/topic/t");
	assert_header(m, "message-id", "7");
	assert_header(m, "x", "1");
	assert_header(m, "y", "");
	assert_header(m, "content-length", "0");
	assert_header(m, "z", NULL);
	msg_unref(m);

	/* A destination 1.0 cannot carry is not in its block. */
	m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\\nb\n\n", "", 0, 8);
	assert_header(m, "destination", NULL);
	assert_header(m, "message-id", "8");
	msg_unref(m);

	/* A stored block whose last line lacks its newline: that line is not a
	 * header. */
	const char *cut = "destination:/q\nmessage-id:1\nx:y";
	uint32_t len = (uint32_t)strlen(cut);
	m = msg_restore(&pool, 1, 1, &cut, &len, "", 0);
	assert_non_null(m);
	assert_header(m, "message-id", "1");
	assert_header(m, "x", NULL);
	msg_unref(m);
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

/* What every dead letter of these tests starts with, after its destination. */
#define DEATH(reason, orig, time) "message-id:99\nx-death-reason:" reason "\n" \
	"x-original-destination:" orig "\nx-death-time:" time "\n"

static void
test_dead_letter_plain(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	struct msg *m = build(&pool, STOMP_1_2,
	    "SEND\ndestination:/queue/a\nx-k:v\npriority:7\ncontent-type:text/plain\n\n", "hello", 5, 42);
	const char *before = "destination:/queue/a\nmessage-id:42\nx-k:v\npriority:7\n"
	    "content-type:text/plain\ncontent-length:5\n";
	assert_block(m, STOMP_1_2, before);
	m->persistent = true;
	m->priority = 7;
	m->expires_ms = 1700000000000;
	m->redelivered = true;
	m->returns = 3;
	size_t held = pool.live_bytes;

	struct msg *d = msg_dead_letter(&pool, m, 99, "/queue/DLQ", 10, "expired", 1700000000123);
	assert_non_null(d);
	assert_int_equal(msg_nblocks(d), 1);
	assert_block(d, STOMP_1_2, "destination:/queue/DLQ\n"
	    DEATH("expired", "/queue/a", "1700000000123")
	    "x-k:v\npriority:7\ncontent-type:text/plain\ncontent-length:5\n");
	assert_ptr_equal(msg_block(d, STOMP_1_0), msg_block(d, STOMP_1_2));
	assert_int_equal(d->refs, 1);
	assert_int_equal(d->id, 99);
	assert_true(d->persistent);
	assert_int_equal(d->priority, 7);
	assert_true(d->dead);
	assert_int_equal(d->expires_ms, 0);
	assert_false(d->redelivered);
	assert_int_equal(d->returns, 0);
	assert_false(d->queued);
	assert_null(d->kept);
	assert_int_equal(d->body_len, 5);
	assert_memory_equal(msg_body(d), "hello", 6);
	assert_ptr_not_equal(msg_body(d), msg_body(m));
	assert_true(pool.live_bytes > held);

	/* m as it was. */
	assert_int_equal(m->refs, 1);
	assert_int_equal(m->id, 42);
	assert_false(m->dead);
	assert_int_equal(m->expires_ms, 1700000000000);
	assert_block(m, STOMP_1_2, before);

	/* Its headers for selectors; a clone keeps it a dead letter. */
	assert_header(d, "destination", "/queue/DLQ");
	assert_header(d, "x-original-destination", "/queue/a");
	assert_header(d, "message-id", "99");
	struct msg *c = msg_clone(&pool, d, 100);
	assert_non_null(c);
	assert_header(c, "message-id", "100");
	assert_true(c->dead);
	msg_unref(c);

	/* Its own references. */
	msg_ref(d);
	msg_unref(d);
	assert_int_equal(d->refs, 1);
	msg_unref(d);
	assert_int_equal(pool.live_bytes, held);

	/* Not persistent stays so (msg_restore alone would make it persistent). */
	m->persistent = false;
	m->priority = 0;
	d = msg_dead_letter(&pool, m, 99, "q", 1, "", 0);
	assert_non_null(d);
	assert_false(d->persistent);
	assert_int_equal(d->priority, 0);
	assert_block(d, STOMP_1_0, "destination:q\n" DEATH("", "/queue/a", "0")
	    "x-k:v\npriority:7\ncontent-type:text/plain\ncontent-length:5\n");
	msg_unref(d);
	msg_unref(m);
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

static void
test_dead_letter_escaped(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	/* 1.2 sender: a destination and a value with a colon, a value with a
	 * CR, a name with a colon, a value with a newline, one with a
	 * backslash. */
	struct msg *m = build(&pool, STOMP_1_2,
	    "SEND\ndestination:/queue/a\\cb\nk:a\\cb\\rc\nn\\cx:1\nnl:x\\ny\nbs:a\\\\b\n\n", "", 0, 42);
	assert_int_equal(msg_nblocks(m), STOMP_VERSIONS);
	struct msg *d = msg_dead_letter(&pool, m, 99, "DLQ.x", 5, "max-redeliveries", 5);
	assert_non_null(d);
	assert_int_equal(msg_nblocks(d), STOMP_VERSIONS);
	/* 1.0: raw, without what it cannot carry. */
	assert_block(d, STOMP_1_0, "destination:DLQ.x\n" DEATH("max-redeliveries", "/queue/a:b", "5")
	    "bs:a\\b\ncontent-length:0\n");
	/* 1.1: \n \c \\ escaped, a CR as it is. */
	assert_block(d, STOMP_1_1, "destination:DLQ.x\n" DEATH("max-redeliveries", "/queue/a\\cb", "5")
	    "k:a\\cb\rc\nn\\cx:1\nnl:x\\ny\nbs:a\\\\b\ncontent-length:0\n");
	/* 1.2: a CR escaped too. */
	assert_block(d, STOMP_1_2, "destination:DLQ.x\n" DEATH("max-redeliveries", "/queue/a\\cb", "5")
	    "k:a\\cb\\rc\nn\\cx:1\nnl:x\\ny\nbs:a\\\\b\ncontent-length:0\n");
	msg_unref(d);

	/* Ours need escaping too; the 1.0 block leaves out a dlq and a reason
	 * with a newline. */
	d = msg_dead_letter(&pool, m, 99, "/queue/d\nl:q", 12, "bad\\ x:y\r", 5);
	assert_non_null(d);
	assert_block(d, STOMP_1_0, "message-id:99\nx-original-destination:/queue/a:b\nx-death-time:5\n"
	    "bs:a\\b\ncontent-length:0\n");
	assert_block(d, STOMP_1_1, "destination:/queue/d\\nl\\cq\n"
	    DEATH("bad\\\\ x\\cy\r", "/queue/a\\cb", "5")
	    "k:a\\cb\rc\nn\\cx:1\nnl:x\\ny\nbs:a\\\\b\ncontent-length:0\n");
	assert_block(d, STOMP_1_2, "destination:/queue/d\\nl\\cq\n"
	    DEATH("bad\\\\ x\\cy\\r", "/queue/a\\cb", "5")
	    "k:a\\cb\\rc\nn\\cx:1\nnl:x\\ny\nbs:a\\\\b\ncontent-length:0\n");
	msg_unref(d);
	msg_unref(m);

	/* An original destination 1.0 cannot carry: no x-original-destination
	 * there either. */
	m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\\nb\nx:1\n\n", "z", 1, 42);
	d = msg_dead_letter(&pool, m, 99, "DLQ", 3, "expired", 5);
	assert_non_null(d);
	assert_block(d, STOMP_1_0, "destination:DLQ\nmessage-id:99\nx-death-reason:expired\n"
	    "x-death-time:5\nx:1\ncontent-length:1\n");
	assert_block(d, STOMP_1_2, "destination:DLQ\n" DEATH("expired", "/queue/a\\nb", "5")
	    "x:1\ncontent-length:1\n");
	assert_header(d, "x-original-destination", NULL);
	msg_unref(d);
	msg_unref(m);
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

static void
test_dead_letter_dlq_escaped(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	struct msg *m = build(&pool, STOMP_1_2, "SEND\ndestination:/queue/a\nx:1\n\n", "", 0, 42);
	assert_int_equal(msg_nblocks(m), 1);
	/* m has one block; the dead letter needs one per version. */
	struct msg *d = msg_dead_letter(&pool, m, 99, "/queue/dead:let\\ters\r", 21, "expired", 5);
	assert_non_null(d);
	assert_int_equal(msg_nblocks(d), STOMP_VERSIONS);
	const char *rest = DEATH("expired", "/queue/a", "5") "x:1\ncontent-length:0\n";
	char want[256];
	/* 1.0 cannot carry the CR: no destination line. */
	assert_block(d, STOMP_1_0, rest);
	snprintf(want, sizeof(want), "destination:/queue/dead\\clet\\\\ters\r\n%s", rest);
	assert_block(d, STOMP_1_1, want);
	snprintf(want, sizeof(want), "destination:/queue/dead\\clet\\\\ters\\r\n%s", rest);
	assert_block(d, STOMP_1_2, want);
	msg_unref(d);

	/* A colon alone: 1.0 carries it raw. */
	d = msg_dead_letter(&pool, m, 99, "/queue/dead:letters", 19, "expired", 5);
	assert_non_null(d);
	snprintf(want, sizeof(want), "destination:/queue/dead:letters\n%s", rest);
	assert_block(d, STOMP_1_0, want);
	snprintf(want, sizeof(want), "destination:/queue/dead\\cletters\n%s", rest);
	assert_block(d, STOMP_1_1, want);
	assert_block(d, STOMP_1_2, want);
	assert_header(d, "destination", "/queue/dead:letters");
	msg_unref(d);

	/* So does a reason that needs escaping. */
	d = msg_dead_letter(&pool, m, 99, "DLQ", 3, "a:b", 5);
	assert_non_null(d);
	assert_int_equal(msg_nblocks(d), STOMP_VERSIONS);
	assert_block(d, STOMP_1_0, "destination:DLQ\n" DEATH("a:b", "/queue/a", "5")
	    "x:1\ncontent-length:0\n");
	assert_block(d, STOMP_1_2, "destination:DLQ\n" DEATH("a\\cb", "/queue/a", "5")
	    "x:1\ncontent-length:0\n");
	msg_unref(d);
	msg_unref(m);
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

static void
test_dead_letter_drops(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	struct msg *m = build(&pool, STOMP_1_2,
	    "SEND\ndestination:/queue/a\nexpires:100\nx-a:1\nexpiration:200\nx-death-reason:old\n"
	    "x-a:2\nx-original-destination:/queue/older\nx-death-time:1\nexpire:keep\nexpiresx:keep\n"
	    "x-death:keep\nx-b:3\nexpires:101\nx-a:3\n\n", "body", 4, 42);
	struct msg *d = msg_dead_letter(&pool, m, 99, "DLQ", 3, "expired", 77);
	assert_non_null(d);
	const char *want = "destination:DLQ\n" DEATH("expired", "/queue/a", "77")
	    "x-a:1\nx-a:2\nexpire:keep\nexpiresx:keep\nx-death:keep\nx-b:3\nx-a:3\ncontent-length:4\n";
	assert_block(d, STOMP_1_2, want);
	assert_header(d, "x-a", "1");
	assert_header(d, "expires", NULL);

	/* Dead-lettered again: still one death record, the newest. */
	struct msg *d2 = msg_dead_letter(&pool, d, 99, "DLQ2", 4, "max-redeliveries", 78);
	assert_non_null(d2);
	assert_block(d2, STOMP_1_2, "destination:DLQ2\n" DEATH("max-redeliveries", "DLQ", "78")
	    "x-a:1\nx-a:2\nexpire:keep\nexpiresx:keep\nx-death:keep\nx-b:3\nx-a:3\ncontent-length:4\n");
	assert_memory_equal(msg_body(d2), "body", 5);
	msg_unref(d2);
	msg_unref(d);
	msg_unref(m);
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

static void
test_dead_letter_malformed(void **state)
{
	(void)state;
	struct msg_pool pool;
	msg_pool_init(&pool, 1 << 20);
	const char *good = "destination:/q\nmessage-id:1\ncontent-length:0\n";
	const char *bad[] = {
		"destination:/q\ncontent-length:0\n",         /* no message-id line */
		"destination:/q\nmessage-id:1\ncontent-length:0", /* last line cut short */
	};
	for (int i = 0; i < 2; i++) {
		/* Bad as the one block, or as the 1.2 block only. */
		const char *one[] = { bad[i] }, *three[] = { good, good, bad[i] };
		uint32_t one_len[] = { (uint32_t)strlen(bad[i]) },
			 three_len[] = { (uint32_t)strlen(good), (uint32_t)strlen(good),
				 (uint32_t)strlen(bad[i]) };
		struct msg *m = msg_restore(&pool, 1, 1, one, one_len, "", 0);
		assert_non_null(m);
		size_t held = pool.live_bytes;
		assert_null(msg_dead_letter(&pool, m, 2, "DLQ", 3, "expired", 5));
		assert_int_equal(pool.live_bytes, held);
		msg_unref(m);
		m = msg_restore(&pool, 1, STOMP_VERSIONS, three, three_len, "", 0);
		assert_non_null(m);
		assert_null(msg_dead_letter(&pool, m, 2, "DLQ", 3, "expired", 5));
		msg_unref(m);
	}
	/* The good one, as the journal gives it back. */
	uint32_t len = (uint32_t)strlen(good);
	struct msg *m = msg_restore(&pool, 1, 1, &good, &len, "", 0);
	struct msg *d = msg_dead_letter(&pool, m, 99, "DLQ", 3, "expired", 5);
	assert_non_null(d);
	assert_block(d, STOMP_1_2, "destination:DLQ\n" DEATH("expired", "/q", "5") "content-length:0\n");
	msg_unref(d);
	msg_unref(m);
	assert_int_equal(pool.live_bytes, 0);
	msg_pool_drain(&pool);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_block_plain),
		cmocka_unit_test(test_block_escaped_per_version),
		cmocka_unit_test(test_size_classes_and_reuse),
		cmocka_unit_test(test_pool_bounded),
		cmocka_unit_test(test_refcount),
		cmocka_unit_test(test_format_u64),
		cmocka_unit_test(test_ids_in_turn),
		cmocka_unit_test(test_content_length_as_written),
		cmocka_unit_test(test_block_from_frame_lines),
		cmocka_unit_test(test_dropped_headers),
		cmocka_unit_test(test_clone),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_dead_letter_plain),
		cmocka_unit_test(test_dead_letter_escaped),
		cmocka_unit_test(test_dead_letter_dlq_escaped),
		cmocka_unit_test(test_dead_letter_drops),
		cmocka_unit_test(test_dead_letter_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
