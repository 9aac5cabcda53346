/* test_revoke.c - the core's revoke_unacked (backend_events): what the
 * backend let go of (the cluster, cut off from NATS past the ack wait) is
 * no longer pending for its subscriber, whose window is free again, and a
 * later ACK or NACK of it answers nothing.  Driven through real connections
 * on the in-memory transport. */
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
#include "eft/server.h"
#include "eft/sub.h"
#include "memclient.h"

/* The ack ids of the MESSAGEs in out, in order, into ids (n at most). */
static size_t
acks(const char *out, char ids[][64], size_t n)
{
	size_t i = 0;
	for (const char *q = out; i < n && (q = strstr(q, "\nack:")) != NULL; q += 5, i++)
		snprintf(ids[i], sizeof(ids[i]), "%.*s", (int)strcspn(q + 5, "\n"), q + 5);
	return i;
}

/* The backend let go of messages whose body starts with 'r'. */
static bool
revoke_r(struct msg *m, void *arg)
{
	size_t *asked = arg;
	(*asked)++;
	return m->body_len > 0 && msg_body(m)[0] == 'r';
}

static void
check_revoke(struct mem_broker *fx, const char *ack_mode)
{
	struct conn *p = mem_client(&fx->mc, fx->b, "1.2");
	struct conn *c = mem_client(&fx->mc, fx->b, "1.2");
	char frame[256];
	snprintf(frame, sizeof(frame), "SUBSCRIBE\nid:s\ndestination:/queue/q\nack:%s\n"
	    "prefetch-count:3\n\n", ack_mode);
	feed(c, frame);
	send_to(p, "/queue/q", "r1");
	send_to(p, "/queue/q", "k2");
	send_to(p, "/queue/q", "r3");
	send_to(p, "/queue/q", "k4");
	send_to(p, "/queue/q", "k5");
	char *out = output(c);
	assert_int_equal(count(out, "MESSAGE\n"), 3);
	char ids[8][64];
	assert_int_equal(acks(out, ids, 8), 3);
	free(out);
	struct dest *d = dests_find(&fx->b->dests, "/queue/q", 8);
	assert_non_null(d);
	assert_int_equal(dest_unacked(d), 3);
	assert_int_equal(dest_depth(d), 2);

	/* r1 and r3 go: the window takes k4 and k5, and k2 stays pending */
	size_t asked = 0;
	assert_int_equal(fx->b->be_events.revoke_unacked(fx->b, revoke_r, &asked), 2);
	assert_int_equal(asked, 3);
	out = output(c);
	assert_int_equal(count(out, "MESSAGE\n"), 2);
	assert_non_null(strstr(out, "k4"));
	assert_non_null(strstr(out, "k5"));
	char later[2][64];
	assert_int_equal(acks(out, later, 2), 2);
	free(out);
	assert_int_equal(dest_unacked(d), 3);
	assert_int_equal(dest_depth(d), 0);
	assert_null(dest_check(d));

	/* The client ACKs and NACKs what was revoked: nothing answers but its
	 * RECEIPT, nothing comes back, nothing else is settled. */
	snprintf(frame, sizeof(frame), "ACK\nid:%s\nreceipt:a\n\n", ids[0]);
	feed(c, frame);
	snprintf(frame, sizeof(frame), "NACK\nid:%s\nreceipt:n\n\n", ids[2]);
	feed(c, frame);
	out = output(c);
	assert_string_equal(out, "RECEIPT\nreceipt-id:a\n\n|RECEIPT\nreceipt-id:n\n\n|");
	free(out);
	assert_int_equal(dest_unacked(d), 3);
	assert_int_equal(fx->b->be_events.revoke_unacked(fx->b, revoke_r, &asked), 0);

	/* What was not revoked settles as ever: k5 (in client mode, with k2
	 * and k4 before it). */
	snprintf(frame, sizeof(frame), "ACK\nid:%s\n\n", later[1]);
	feed(c, frame);
	free(output(c));
	assert_int_equal(dest_unacked(d), strcmp(ack_mode, "client") == 0 ? 0 : 2);
	assert_null(dest_check(d));
}

static void
test_revoked_client_individual(void **state)
{
	check_revoke(*state, "client-individual");
}

/* Cumulative: an ACK of a later delivery settles the older ones that are
 * still pending, and a revoked one is not among them. */
static void
test_revoked_client(void **state)
{
	check_revoke(*state, "client");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_revoked_client_individual,
		    mem_broker_setup, mem_broker_teardown),
		cmocka_unit_test_setup_teardown(test_revoked_client,
		    mem_broker_setup, mem_broker_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
