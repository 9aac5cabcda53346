/* test_frame.c - unit tests for command and header names and for header
 * escaping per STOMP version. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eft/frame.h"

static void
mem_is(const void *got, size_t got_len, const void *want, size_t want_len, const char *what)
{
	if (got_len != want_len || (want_len > 0 && memcmp(got, want, want_len) != 0)) {
		print_error("%s: got %zu bytes '%.*s', want %zu bytes '%.*s'\n", what, got_len,
		    (int)got_len, got_len ? (const char *)got : "", want_len, (int)want_len,
		    want_len ? (const char *)want : "");
		fail();
	}
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                   */

static const struct {
	enum frame_cmd cmd;
	const char *name;
} commands[] = {
	{ CMD_CONNECT, "CONNECT" },
	{ CMD_STOMP, "STOMP" },
	{ CMD_SEND, "SEND" },
	{ CMD_SUBSCRIBE, "SUBSCRIBE" },
	{ CMD_UNSUBSCRIBE, "UNSUBSCRIBE" },
	{ CMD_ACK, "ACK" },
	{ CMD_NACK, "NACK" },
	{ CMD_BEGIN, "BEGIN" },
	{ CMD_COMMIT, "COMMIT" },
	{ CMD_ABORT, "ABORT" },
	{ CMD_DISCONNECT, "DISCONNECT" },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void
test_cmd_lookup_every_command(void **state)
{
	(void)state;
	assert_int_equal(NCOMMANDS, CMD_COUNT - 1); /* every command but CMD_UNKNOWN */
	for (size_t i = 0; i < NCOMMANDS; i++) {
		const char *name = commands[i].name;
		assert_int_equal(frame_cmd_lookup(name, strlen(name)), commands[i].cmd);
		assert_string_equal(frame_cmd_name(commands[i].cmd), name);
		/* The name need not be NUL-terminated: only len bytes count. */
		char buf[32];
		snprintf(buf, sizeof(buf), "%s\nX", name);
		assert_int_equal(frame_cmd_lookup(buf, strlen(name)), commands[i].cmd);
	}
}

static void
test_cmd_lookup_misses(void **state)
{
	(void)state;
	static const char *const misses[] = {
		"", "send", "Send", "SENDX", "SEN", "SEND ", " SEND", "CONNECTED", "MESSAGE",
		"RECEIPT", "ERROR", "UNKNOWN", "ACKS", "NAC", "DISCONNECT\r", "SUBSCRIBE\n",
		"UNSUBSCRIBEX", "ABORTED", "BEGI", "COMMITS",
	};
	for (size_t i = 0; i < sizeof(misses) / sizeof(misses[0]); i++)
		assert_int_equal(frame_cmd_lookup(misses[i], strlen(misses[i])), CMD_UNKNOWN);
	/* Length-bounded: a prefix of a longer string matches only if it is a name. */
	assert_int_equal(frame_cmd_lookup("NACK", 3), CMD_UNKNOWN);
	assert_int_equal(frame_cmd_lookup("NACK" + 1, 3), CMD_ACK);
	assert_int_equal(frame_cmd_lookup("SENDX", 4), CMD_SEND);
	assert_int_equal(frame_cmd_lookup("DISCONNECT", 3), CMD_UNKNOWN);
	assert_int_equal(frame_cmd_lookup("SEND\0", 5), CMD_UNKNOWN);
}

static void
test_cmd_name_out_of_range(void **state)
{
	(void)state;
	assert_string_equal(frame_cmd_name(CMD_UNKNOWN), "UNKNOWN");
	assert_string_equal(frame_cmd_name(CMD_COUNT), "UNKNOWN");
	assert_string_equal(frame_cmd_name((enum frame_cmd)(CMD_COUNT + 7)), "UNKNOWN");
}

/* ------------------------------------------------------------------------ */
/* Headers                                                                    */

static const struct {
	enum hdr_id id;
	const char *name;
} headers[] = {
	{ HDR_ACCEPT_VERSION, "accept-version" },
	{ HDR_ACK, "ack" },
	{ HDR_CONTENT_LENGTH, "content-length" },
	{ HDR_CONTENT_TYPE, "content-type" },
	{ HDR_DESTINATION, "destination" },
	{ HDR_HEART_BEAT, "heart-beat" },
	{ HDR_HOST, "host" },
	{ HDR_ID, "id" },
	{ HDR_LOGIN, "login" },
	{ HDR_MESSAGE_ID, "message-id" },
	{ HDR_PASSCODE, "passcode" },
	{ HDR_RECEIPT, "receipt" },
	{ HDR_REPLY_TO, "reply-to" },
	{ HDR_SUBSCRIPTION, "subscription" },
	{ HDR_TRANSACTION, "transaction" },
	{ HDR_PREFETCH_COUNT, "prefetch-count" },
	{ HDR_PRIORITY, "priority" },
	{ HDR_EXPIRES, "expires" },
	{ HDR_EXPIRATION, "expiration" },
	{ HDR_SELECTOR, "selector" },
	{ HDR_SCHEDULED, "AMQ_SCHEDULED_DELAY" },
};
#define NHEADERS (sizeof(headers) / sizeof(headers[0]))

/* The expected answer for a name, by plain search of the table above. */
static enum hdr_id
expected_hdr(const char *name, size_t len)
{
	for (size_t i = 0; i < NHEADERS; i++)
		if (strlen(headers[i].name) == len && memcmp(headers[i].name, name, len) == 0)
			return headers[i].id;
	return HDR_OTHER;
}

static void
test_hdr_lookup_every_header(void **state)
{
	(void)state;
	assert_int_equal(NHEADERS, HDR_COUNT);
	for (size_t i = 0; i < NHEADERS; i++) {
		const char *name = headers[i].name;
		size_t len = strlen(name);
		assert_int_equal(frame_hdr_lookup(name, len), headers[i].id);
		assert_string_equal(frame_hdr_name(headers[i].id), name);
		char buf[64];
		snprintf(buf, sizeof(buf), "%s:value", name);
		assert_int_equal(frame_hdr_lookup(buf, len), headers[i].id);
	}
	assert_string_equal(frame_hdr_name(HDR_OTHER), "");
	assert_string_equal(frame_hdr_name(HDR_COUNT), "");
}

/* The other schedule headers share HDR_SCHEDULED (frame.h). */
static void
test_hdr_lookup_schedule_headers(void **state)
{
	(void)state;
	static const char *const names[] = { "AMQ_SCHEDULED_DELAY", "AMQ_SCHEDULED_PERIOD",
		"AMQ_SCHEDULED_REPEAT", "AMQ_SCHEDULED_CRON", "x-delay" };
	static const char *const misses[] = { "AMQ_SCHEDULED_", "AMQ_SCHEDULED_DELAYS",
		"AMQ_SCHEDULED_delay", "amq_scheduled_delay", "AMQ_SCHEDULED_CRONS", "AMQ_SCHEDULED_ID",
		"AMQ_SCHEDULED_PERIOX", "AMQ_SCHEDULEDXDELAY", "x-delays", "x-dela", "X-delay",
		"AMQ_SCHEDULED_REPEATS" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_int_equal(frame_hdr_lookup(names[i], strlen(names[i])), HDR_SCHEDULED);
	for (size_t i = 0; i < sizeof(misses) / sizeof(misses[0]); i++)
		assert_int_equal(frame_hdr_lookup(misses[i], strlen(misses[i])), HDR_OTHER);
}

static void
test_hdr_lookup_near_misses(void **state)
{
	(void)state;
	static const char *const misses[] = {
		"", "i", "d", "a", "ids", "Id", "ID", "iD", "ack ", "acks", "ac", "Ack",
		"content_length", "content-length:", "Content-Length", "content-lengths",
		"content-lengt", "content-types", "x-destination", "destinatio", "destinations",
		"heart_beat", "heartbeat", "hosts", "hostname", "logins", "login-name",
		"message_id", "message-ids", "messageid", "passcodes", "pass", "prefetch-size",
		"prefetch-counts", "prefetch_count", "receipt-id", "receipts", "reply_to",
		"replyto", "subscriptions", "subscription-id", "transactions", "transaction-id",
		"acceptversion", "accept-versions", "zz", "bb", "expire", "expiress", "persistent",
		"priorit", "priority-x", "expirations", "selectors", "Selector", "version", "session", "server", "content-length-x",
		"xxxxxxxxxxxxxxxx", "accept-version-and-more-text-past-the-longest-name",
	};
	for (size_t i = 0; i < sizeof(misses) / sizeof(misses[0]); i++) {
		if (frame_hdr_lookup(misses[i], strlen(misses[i])) != HDR_OTHER) {
			print_error("'%s' should not be a known header\n", misses[i]);
			fail();
		}
	}

	/* Every known name, changed by one byte, truncated or extended. */
	for (size_t i = 0; i < NHEADERS; i++) {
		const char *name = headers[i].name;
		size_t len = strlen(name);
		char buf[64];
		for (size_t pos = 0; pos < len; pos++) {
			static const char subst[] = { 'x', '-', '_', 'A', '\0', ':' };
			for (size_t s = 0; s < sizeof(subst); s++) {
				if (subst[s] == name[pos])
					continue;
				memcpy(buf, name, len);
				buf[pos] = subst[s];
				assert_int_equal(frame_hdr_lookup(buf, len), expected_hdr(buf, len));
				assert_int_equal(frame_hdr_lookup(buf, len), HDR_OTHER);
			}
			/* Upper-cased byte: names are case-sensitive. */
			if (name[pos] >= 'a' && name[pos] <= 'z') {
				memcpy(buf, name, len);
				buf[pos] = (char)(name[pos] - 'a' + 'A');
				assert_int_equal(frame_hdr_lookup(buf, len), HDR_OTHER);
			}
		}
		memcpy(buf, name, len);
		assert_int_equal(frame_hdr_lookup(buf, len - 1), expected_hdr(buf, len - 1));
		assert_int_equal(frame_hdr_lookup(buf, len - 1), HDR_OTHER);
		buf[len] = 's';
		assert_int_equal(frame_hdr_lookup(buf, len + 1), HDR_OTHER);
		buf[len] = '\0';
		assert_int_equal(frame_hdr_lookup(buf, len + 1), HDR_OTHER);
	}
}

/* ------------------------------------------------------------------------ */
/* Escaping                                                                   */

/* Escape s for v and check the three escaping functions agree. */
static char *
escape(enum stomp_version v, const char *s, size_t len, size_t *out_len)
{
	size_t n = frame_escaped_len(v, s, len);
	assert_true(n >= len);
	assert_true(n <= 2 * len);
	assert_int_equal(frame_needs_escape(v, s, len), n != len);
	char *buf = malloc(n + 16);
	assert_non_null(buf);
	memset(buf, '#', n + 16);
	char *end = frame_escape(v, buf, s, len);
	assert_true(end == buf + n);
	for (size_t i = n; i < n + 16; i++) /* nothing written past the end */
		assert_int_equal(buf[i], '#');
	*out_len = n;
	return buf;
}

/* Unescape a copy of s (len bytes) in place; returns its result. */
static int
unescape(enum stomp_version v, const char *s, size_t len, char *out, uint32_t *out_len)
{
	memcpy(out, s, len);
	*out_len = (uint32_t)len;
	return frame_unescape(v, out, out_len);
}

static void
check_escape(enum stomp_version v, const char *s, size_t len, const char *want, size_t want_len)
{
	size_t n;
	char *e = escape(v, s, len, &n);
	mem_is(e, n, want, want_len, "escaped");
	char back[256];
	uint32_t blen;
	assert_true(n < sizeof(back));
	assert_int_equal(unescape(v, e, n, back, &blen), 0);
	mem_is(back, blen, s, len, "unescaped");
	free(e);
}

#define LIT(s) (s), (sizeof(s) - 1)

static void
test_escape_v10(void **state)
{
	(void)state;
	/* STOMP 1.0 has no escaping: everything is literal both ways. */
	check_escape(STOMP_1_0, LIT("a\nb:c\\d\re"), LIT("a\nb:c\\d\re"));
	assert_false(frame_needs_escape(STOMP_1_0, LIT("a\nb:c\\d\re")));
	static const char *const lit[] = { "a\\nb", "\\t", "x\\", "\\", "\\c\\r\\\\" };
	for (size_t i = 0; i < sizeof(lit) / sizeof(lit[0]); i++) {
		char buf[32];
		uint32_t n;
		assert_int_equal(unescape(STOMP_1_0, lit[i], strlen(lit[i]), buf, &n), 0);
		mem_is(buf, n, lit[i], strlen(lit[i]), "1.0 unescape");
	}
}

static void
test_escape_v11(void **state)
{
	(void)state;
	/* 1.1 escapes LF, colon and backslash, but not CR. */
	check_escape(STOMP_1_1, LIT("a\nb:c\\d\re"), LIT("a\\nb\\cc\\\\d\re"));
	assert_false(frame_needs_escape(STOMP_1_1, LIT("plain\r value")));
	assert_true(frame_needs_escape(STOMP_1_1, LIT("x:y")));
	assert_true(frame_needs_escape(STOMP_1_1, LIT("x\\y")));
	assert_true(frame_needs_escape(STOMP_1_1, LIT("x\ny")));
	assert_int_equal(frame_escaped_len(STOMP_1_1, LIT("::\n\\\r")), 9);

	char buf[32];
	uint32_t n;
	assert_int_equal(unescape(STOMP_1_1, LIT("\\n\\c\\\\"), buf, &n), 0);
	mem_is(buf, n, LIT("\n:\\"), "1.1 unescape");
	assert_int_equal(unescape(STOMP_1_1, LIT("a\\rb"), buf, &n), -1);
	assert_int_equal(unescape(STOMP_1_1, LIT("a\\tb"), buf, &n), -1);
	assert_int_equal(unescape(STOMP_1_1, LIT("ab\\"), buf, &n), -1);
	assert_int_equal(unescape(STOMP_1_1, LIT("\\"), buf, &n), -1);
	assert_int_equal(unescape(STOMP_1_1, LIT("\\C"), buf, &n), -1);
	assert_int_equal(unescape(STOMP_1_1, LIT("\\N"), buf, &n), -1);
}

static void
test_escape_v12(void **state)
{
	(void)state;
	check_escape(STOMP_1_2, LIT("a\nb:c\\d\re"), LIT("a\\nb\\cc\\\\d\\re"));
	assert_true(frame_needs_escape(STOMP_1_2, LIT("plain\r value")));
	assert_false(frame_needs_escape(STOMP_1_2, LIT("plain value\t/queue/a")));
	assert_false(frame_needs_escape(STOMP_1_2, "", 0));
	assert_int_equal(frame_escaped_len(STOMP_1_2, LIT("::\n\\\r")), 10);
	assert_int_equal(frame_escaped_len(STOMP_1_2, "", 0), 0);

	char buf[32];
	uint32_t n;
	assert_int_equal(unescape(STOMP_1_2, LIT("\\r\\n\\c\\\\x"), buf, &n), 0);
	mem_is(buf, n, LIT("\r\n:\\x"), "1.2 unescape");
	assert_int_equal(unescape(STOMP_1_2, LIT("a\\tb"), buf, &n), -1);
	assert_int_equal(unescape(STOMP_1_2, LIT("ab\\"), buf, &n), -1);
	assert_int_equal(unescape(STOMP_1_2, LIT("\\\\\\"), buf, &n), -1);
	assert_int_equal(unescape(STOMP_1_2, LIT("\\R"), buf, &n), -1);
	assert_int_equal(unescape(STOMP_1_2, LIT("\\0"), buf, &n), -1);
	assert_int_equal(unescape(STOMP_1_2, LIT("\\ "), buf, &n), -1);
}

static void
test_unescape_in_place(void **state)
{
	(void)state;
	/* No backslash: untouched, same length. */
	char a[] = "plain:value";
	uint32_t n = (uint32_t)strlen(a);
	assert_int_equal(frame_unescape(STOMP_1_2, a, &n), 0);
	assert_int_equal(n, strlen("plain:value"));
	assert_string_equal(a, "plain:value");

	/* Shrinks in place; bytes past the new length are not relied upon, but
	 * bytes past the original length are left alone. */
	char b[] = "x\\\\y\\\\zTAIL";
	n = (uint32_t)(strlen(b) - 4);
	assert_int_equal(frame_unescape(STOMP_1_2, b, &n), 0);
	mem_is(b, n, LIT("x\\y\\z"), "in place");
	assert_memory_equal(b + strlen(b) - 4, "TAIL", 4);

	/* Only len bytes are looked at: a backslash last within len is an error
	 * even if an escape letter follows in memory. */
	char c[] = "ab\\n";
	n = 3;
	assert_int_equal(frame_unescape(STOMP_1_2, c, &n), -1);
	char d[] = "ab\\";
	n = 2;
	assert_int_equal(frame_unescape(STOMP_1_2, d, &n), 0);
	assert_int_equal(n, 2);

	/* Empty. */
	char e[1] = { 0 };
	n = 0;
	assert_int_equal(frame_unescape(STOMP_1_2, e, &n), 0);
	assert_int_equal(n, 0);
}

/* Every string of up to 4 bytes over an alphabet of the special characters
 * and escape letters survives escape + unescape in 1.1 and 1.2, and the
 * escaped form has none of the characters that must be escaped. */
static void
test_escape_round_trip_exhaustive(void **state)
{
	(void)state;
	static const char alpha[] = { 'a', '\n', '\r', ':', '\\', 'n', 'c', 'r', '\0', 't' };
	enum { K = sizeof(alpha), MAXLEN = 4 };
	for (enum stomp_version v = STOMP_1_0; v < STOMP_VERSIONS; v++) {
		size_t tried = 0;
		for (size_t len = 0; len <= MAXLEN; len++) {
			size_t total = 1;
			for (size_t i = 0; i < len; i++)
				total *= K;
			for (size_t code = 0; code < total; code++) {
				char s[MAXLEN];
				size_t c = code;
				for (size_t i = 0; i < len; i++, c /= K)
					s[i] = alpha[c % K];
				size_t n;
				char *e = escape(v, s, len, &n);
				if (v == STOMP_1_0) {
					mem_is(e, n, s, len, "1.0 escape is identity");
				} else {
					size_t specials = 0;
					for (size_t i = 0; i < len; i++)
						specials += s[i] == '\n' || s[i] == ':' || s[i] == '\\' ||
						    (v == STOMP_1_2 && s[i] == '\r');
					assert_int_equal(n, len + specials);
					assert_null(memchr(e, '\n', n));
					assert_null(memchr(e, ':', n));
					if (v == STOMP_1_2)
						assert_null(memchr(e, '\r', n));
				}
				char back[2 * MAXLEN + 1];
				uint32_t blen;
				assert_int_equal(unescape(v, e, n, back, &blen), 0);
				mem_is(back, blen, s, len, "round trip");
				free(e);
				tried++;
			}
		}
		assert_int_equal(tried, 1 + 10 + 100 + 1000 + 10000);
	}
}

static void
test_escape_all_bytes(void **state)
{
	(void)state;
	char s[256];
	for (int i = 0; i < 256; i++)
		s[i] = (char)i;
	for (enum stomp_version v = STOMP_1_0; v < STOMP_VERSIONS; v++) {
		size_t n;
		char *e = escape(v, s, sizeof(s), &n);
		size_t want = sizeof(s) + (v == STOMP_1_0 ? 0 : v == STOMP_1_1 ? 3 : 4);
		assert_int_equal(n, want);
		char back[600];
		uint32_t blen;
		assert_int_equal(unescape(v, e, n, back, &blen), 0);
		mem_is(back, blen, s, sizeof(s), "all bytes");
		free(e);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cmd_lookup_every_command),
		cmocka_unit_test(test_cmd_lookup_misses),
		cmocka_unit_test(test_cmd_name_out_of_range),
		cmocka_unit_test(test_hdr_lookup_every_header),
		cmocka_unit_test(test_hdr_lookup_schedule_headers),
		cmocka_unit_test(test_hdr_lookup_near_misses),
		cmocka_unit_test(test_escape_v10),
		cmocka_unit_test(test_escape_v11),
		cmocka_unit_test(test_escape_v12),
		cmocka_unit_test(test_unescape_in_place),
		cmocka_unit_test(test_escape_round_trip_exhaustive),
		cmocka_unit_test(test_escape_all_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
