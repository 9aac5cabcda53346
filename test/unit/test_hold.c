/* test_hold.c - output held for a backend's promise (hold.h): the ring of
 * holds on its own, then through real connections on the in-memory
 * transport with a real journal whose writes are made to fail (a file-size
 * limit: write() then fails with EFBIG, as it would with ENOSPC). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <dirent.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "eft/broker.h"
#include "eft/server.h"
#include "eft/conn.h"
#include "eft/hold.h"
#include "eft/log.h"
#include "memclient.h"

/* ---- the ring ---- */

static void
test_release_from_the_front_in_order(void **state)
{
	(void)state;
	struct holds h = { 0 };
	assert_int_equal(hold_limit(&h), UINT64_MAX);
	assert_int_equal(hold_first_seq(&h), UINT64_MAX);
	/* more than the first allocation, so the ring grows while wrapped */
	for (uint64_t i = 0; i < 10; i++) {
		assert_int_equal(hold_reserve(&h), 0);
		hold_add(&h, 100 * i, 100 * i + 10, i + 1);
	}
	assert_true(hold_release(&h, 6));
	assert_int_equal(h.n, 4);
	for (uint64_t i = 10; i < 40; i++) {
		assert_int_equal(hold_reserve(&h), 0);
		hold_add(&h, 100 * i, 100 * i + 10, i + 1);
	}
	assert_int_equal(h.n, 34);
	assert_int_equal(hold_limit(&h), 600);
	assert_int_equal(hold_first_seq(&h), 7);
	assert_false(hold_release(&h, 6));
	assert_true(hold_release(&h, 39));
	assert_int_equal(h.n, 1);
	assert_int_equal(hold_limit(&h), 3900);
	assert_true(hold_release(&h, 40));
	assert_int_equal(h.n, 0);
	assert_int_equal(hold_limit(&h), UINT64_MAX);
	hold_free(&h);
}

static void
test_cut_drops_exactly_the_held_bytes(void **state)
{
	(void)state;
	struct holds h = { 0 };
	struct evbuffer *buf = evbuffer_new();
	/* stream positions 1000...: 3 bytes written before, then these */
	const char *s = "aaaa<R1>bb<R2><R3>cc";
	evbuffer_add(buf, s, strlen(s));
	assert_int_equal(hold_reserve(&h), 0);
	hold_add(&h, 1004, 1008, 5);
	assert_int_equal(hold_reserve(&h), 0);
	hold_add(&h, 1010, 1014, 6);
	assert_int_equal(hold_reserve(&h), 0);
	hold_add(&h, 1014, 1018, 6);
	assert_int_equal(hold_cut(&h, buf, 1000), 0);
	assert_int_equal(h.n, 0);
	size_t n = evbuffer_get_length(buf);
	char out[64];
	assert_int_equal(evbuffer_remove(buf, out, sizeof(out)), (int)n);
	assert_memory_equal(out, "aaaabbcc", 8);
	assert_int_equal(n, 8);
	evbuffer_free(buf);
	hold_free(&h);
}

/* ---- through the broker, with a journal that stops writing ---- */

struct fixture {
	char dir[64];
	struct event_base *base;
	struct config cfg;
	struct broker *b;
	struct memclients mc;
};

static int
setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/eft-hold-XXXXXX");
	if (mkdtemp(fx->dir) == NULL)
		return -1;
	fx->base = event_base_new();
	config_defaults(&fx->cfg);
	snprintf(fx->cfg.data_dir, sizeof(fx->cfg.data_dir), "%s", fx->dir);
	snprintf(fx->cfg.fsync, sizeof(fx->cfg.fsync), "always");
	log_set_level(EFT_LOG_QUIET); /* the refusals log errors: keep the output clean */
	fx->b = server_new(fx->base, &fx->cfg);
	char err[256];
	if (fx->b == NULL || broker_open_store(fx->b, err, sizeof(err)) != 0)
		return -1;
	/* write() past the limit fails with EFBIG instead of killing us */
	signal(SIGXFSZ, SIG_IGN);
	*state = fx;
	return 0;
}

static void
set_file_limit(rlim_t bytes)
{
	struct rlimit rl;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = bytes;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;
	set_file_limit(RLIM_INFINITY);
	server_free(fx->b);
	memclients_free(&fx->mc);
	event_base_free(fx->base);
	DIR *d = opendir(fx->dir);
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		char p[400];
		snprintf(p, sizeof(p), "%s/%s", fx->dir, e->d_name);
		if (e->d_name[0] != '.')
			unlink(p);
	}
	if (d != NULL)
		closedir(d);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

static void
send_persistent(struct conn *c, const char *receipt)
{
	char frame[256];
	snprintf(frame, sizeof(frame), "SEND\ndestination:/queue/h\npersistent:true\n"
	    "receipt:%s\n\nbody of %s", receipt, receipt);
	feed(c, frame);
}

/* The size of the newest journal segment: the limit that makes the next
 * append fail. */
static off_t
journal_size(const struct fixture *fx)
{
	off_t max = 0;
	DIR *d = opendir(fx->dir);
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		char p[400];
		struct stat st;
		snprintf(p, sizeof(p), "%s/%s", fx->dir, e->d_name);
		if (strncmp(e->d_name, "journal-", 8) == 0 && stat(p, &st) == 0 && st.st_size > max)
			max = st.st_size;
	}
	if (d != NULL)
		closedir(d);
	return max;
}

static void
test_receipts_wait_for_the_journal_and_a_refusal_cuts_them(void **state)
{
	struct fixture *fx = *state;
	struct conn *p = mem_client(&fx->mc, fx->b, "1.2");
	struct conn *w = mem_client(&fx->mc, fx->b, "1.2");
	send_persistent(p, "r1");
	char *out = output(p);
	assert_string_equal(out, "RECEIPT\nreceipt-id:r1\n\n|");
	free(out);

	/* The journal cannot grow: both SENDs of this turn are held. */
	set_file_limit((rlim_t)journal_size(fx));
	send_persistent(p, "r2");
	send_persistent(w, "w1");
	out = output(p);
	assert_string_equal(out, "");
	free(out);
	out = output(w);
	assert_string_equal(out, "");
	free(out);
	assert_int_equal(broker_pressure(fx->b), BACKEND_FAILING);

	/* p goes on sending: refused, and its held RECEIPT r2 is cut, since
	 * what it promised was not written. */
	send_persistent(p, "r3");
	out = output(p);
	assert_int_equal(count(out, "RECEIPT"), 0);
	assert_int_equal(count(out, "ERROR\n"), 1);
	assert_non_null(strstr(out, "message:cannot store persistent message\n"));
	assert_non_null(strstr(out, "receipt-id:r3\n"));
	free(out);

	/* Room again: w's RECEIPT, held all along, goes out. */
	set_file_limit(RLIM_INFINITY);
	out = output(w);
	assert_string_equal(out, "RECEIPT\nreceipt-id:w1\n\n|");
	free(out);
	assert_int_equal(broker_pressure(fx->b), BACKEND_OK);
}

static void
test_a_receipt_waits_for_earlier_frames_without_one(void **state)
{
	struct fixture *fx = *state;
	struct conn *p = mem_client(&fx->mc, fx->b, "1.2");
	set_file_limit((rlim_t)journal_size(fx));
	/* no receipt on the SEND; DISCONNECT's receipt stands for it */
	feed(p, "SEND\ndestination:/queue/h\npersistent:true\n\nx");
	feed(p, "DISCONNECT\nreceipt:bye\n\n");
	char *out = output(p);
	assert_string_equal(out, "");
	free(out);
	set_file_limit(RLIM_INFINITY);
	out = output(p);
	assert_string_equal(out, "RECEIPT\nreceipt-id:bye\n\n|");
	free(out);
}

static void
test_output_before_a_hold_is_written(void **state)
{
	struct fixture *fx = *state;
	struct conn *p = mem_client(&fx->mc, fx->b, "1.2");
	struct conn *q = mem_client(&fx->mc, fx->b, "1.2");
	feed(p, "SUBSCRIBE\ndestination:/topic/t\nid:0\n\n");
	char *out = output(p);
	free(out);
	set_file_limit((rlim_t)journal_size(fx));
	feed(q, "SEND\ndestination:/topic/t\n\nbefore");
	send_persistent(p, "held");
	feed(q, "SEND\ndestination:/topic/t\n\nafter");
	out = output(p);
	/* what came before the held RECEIPT goes; the RECEIPT and after wait */
	assert_int_equal(count(out, "MESSAGE\n"), 1);
	assert_non_null(strstr(out, "\n\nbefore|"));
	assert_null(strstr(out, "after"));
	free(out);
	set_file_limit(RLIM_INFINITY);
	out = output(p);
	assert_memory_equal(out, "RECEIPT\nreceipt-id:held\n\n|MESSAGE\n", 34);
	assert_non_null(strstr(out, "\n\nafter|"));
	free(out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_release_from_the_front_in_order),
		cmocka_unit_test(test_cut_drops_exactly_the_held_bytes),
		cmocka_unit_test_setup_teardown(
		    test_receipts_wait_for_the_journal_and_a_refusal_cuts_them, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_receipt_waits_for_earlier_frames_without_one,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_output_before_a_hold_is_written, setup,
		    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
