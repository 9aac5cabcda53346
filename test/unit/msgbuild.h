/* msgbuild.h - a message as eftd builds it from a SEND frame, for the unit
 * tests of what is done with messages (test_msg, test_cluster_wire). */
#ifndef EFT_TEST_MSGBUILD_H
#define EFT_TEST_MSGBUILD_H

#include <string.h>

#include "eft/msg.h"
#include "eft/parser.h"

/* Parse one SEND frame (version v escaping) and build its message, with the
 * default priority, as handle_send does; reply_to (NULL: none) replaces the
 * frame's reply-to, as a temp-queue's broker-wide name does, and dest (NULL:
 * the frame's own destination) is the destination written, as an alias's
 * resolved name is. */
static inline struct msg *
build_as(struct msg_pool *pool, enum stomp_version v, const char *head, const char *body,
    size_t body_len, uint64_t id, const char *reply_to, const char *dest)
{
	static const struct parser_limits limits = { 1 << 24, 100, 1 << 16, 0 };
	struct parser p;
	struct frame *f;
	parser_init(&p, &limits);
	p.version = v;
	assert_int_equal(parser_feed(&p, head, strlen(head)), 0);
	assert_int_equal(parser_feed(&p, body, body_len), 0);
	assert_int_equal(parser_feed(&p, "", 1), 0);
	assert_int_equal(parser_next(&p, &f), PARSE_FRAME);
	const struct header *d = frame_get(f, HDR_DESTINATION);
	struct msg_spec spec = { .pool = pool, .frame = f,
		.dest = dest ? dest : d->value, .dest_len = dest ? strlen(dest) : d->value_len,
		.id = id, .reply_to = reply_to, .reply_to_len = reply_to ? strlen(reply_to) : 0,
		.priority = MSG_PRIORITY_DEFAULT };
	struct msg *m = msg_new(&spec);
	parser_free(&p);
	assert_non_null(m);
	return m;
}

static inline struct msg *
build_reply_to(struct msg_pool *pool, enum stomp_version v, const char *head, const char *body,
    size_t body_len, uint64_t id, const char *reply_to)
{
	return build_as(pool, v, head, body, body_len, id, reply_to, NULL);
}

static inline struct msg *
build(struct msg_pool *pool, enum stomp_version v, const char *head, const char *body,
    size_t body_len, uint64_t id)
{
	return build_reply_to(pool, v, head, body, body_len, id, NULL);
}

#endif
