/* test_config.c - unit tests for eftd settings: defaults, config_set for each
 * key, and config_load from a file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "eft/config.h"

static void
str_contains(const char *s, const char *needle)
{
	if (strstr(s, needle) == NULL) {
		print_error("'%s' does not contain '%s'\n", s, needle);
		fail();
	}
}

static void
str_starts(const char *s, const char *prefix)
{
	if (strncmp(s, prefix, strlen(prefix)) != 0) {
		print_error("'%s' does not start with '%s'\n", s, prefix);
		fail();
	}
}

/* Set key = value, which must succeed. */
static void
set_ok(struct config *cfg, const char *key, const char *value)
{
	char err[256] = "";
	if (config_set(cfg, key, value, err, sizeof(err)) != 0) {
		print_error("config_set(%s, '%s') failed: %s\n", key, value, err);
		fail();
	}
}

/* Set key = value, which must fail with a reason naming the key (or `needle`)
 * and leave the config exactly as it was. */
static void
set_bad(struct config *cfg, const char *key, const char *value, const char *needle)
{
	struct config before;
	memcpy(&before, cfg, sizeof(before));
	char err[256] = "";
	if (config_set(cfg, key, value, err, sizeof(err)) != -1) {
		print_error("config_set(%s, '%s') should have failed\n", key, value);
		fail();
	}
	str_contains(err, needle);
	assert_memory_equal(cfg, &before, sizeof(before));
}

/* ------------------------------------------------------------------------ */
/* Defaults                                                                   */

static void
test_defaults(void **state)
{
	(void)state;
	struct config cfg;
	memset(&cfg, 0xa5, sizeof(cfg)); /* defaults overwrite whatever was there */
	config_defaults(&cfg);
	assert_string_equal(cfg.bind, "127.0.0.1");
	assert_int_equal(cfg.port, 61613);
	assert_int_equal(cfg.log_level, EFT_LOG_INFO);
	assert_int_equal(cfg.max_frame_size, 17u * 1024 * 1024);
	assert_int_equal(cfg.max_body_size, 16u * 1024 * 1024);
	for (int k = 0; k < CFG_NKEYS; k++)
		assert_int_equal(cfg.origin[k], CONFIG_DEFAULT);
	assert_string_equal(cfg.path, "");
	assert_int_equal(cfg.max_headers, 1000);
	assert_int_equal(cfg.max_header_line, 64u * 1024);
	assert_int_equal(cfg.heartbeat_min_ms, 1000);
	assert_int_equal(cfg.output_high_water, 512u * 1024);
	assert_int_equal(cfg.policy.max_queue_messages, 10000000);
	assert_int_equal(cfg.policy.max_queue_bytes, 0);
	assert_int_equal(cfg.policy.overflow, OVERFLOW_BLOCK);
	assert_int_equal(cfg.policy.message_ttl_ms, 0);
	assert_int_equal(cfg.policy.max_redeliveries, 0);
	assert_string_equal(cfg.policy.dead_letter_queue, "");
	assert_int_equal(cfg.npolicies, 0);
}

/* ------------------------------------------------------------------------ */
/* config_set                                                                 */

static void
test_set_bind(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	set_ok(&cfg, "bind", "0.0.0.0");
	assert_string_equal(cfg.bind, "0.0.0.0");
	set_ok(&cfg, "bind", "::1");
	assert_string_equal(cfg.bind, "::1");

	char longest[64];
	memset(longest, 'h', 63);
	longest[63] = '\0';
	set_ok(&cfg, "bind", longest);
	assert_string_equal(cfg.bind, longest);

	set_ok(&cfg, "bind", "localhost");
	set_bad(&cfg, "bind", "", "bind");
	char too_long[65];
	memset(too_long, 'h', 64);
	too_long[64] = '\0';
	set_bad(&cfg, "bind", too_long, "bind");
	assert_string_equal(cfg.bind, "localhost");
}

static void
test_set_port(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	set_ok(&cfg, "port", "0"); /* 0: let the system pick */
	assert_int_equal(cfg.port, 0);
	set_ok(&cfg, "port", "1");
	assert_int_equal(cfg.port, 1);
	set_ok(&cfg, "port", "65535");
	assert_int_equal(cfg.port, 65535);
	set_ok(&cfg, "port", "8080");
	assert_int_equal(cfg.port, 8080);
	static const char *const bad[] = {
		"65536", "100000", "70000", "-1", "+80", "", "abc", " 80", "80 ", "80x", "8.0",
		"0x50", "99999999999999999999999",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		set_bad(&cfg, "port", bad[i], "port");
	assert_int_equal(cfg.port, 8080);
}

static void
test_set_log_level(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	static const struct {
		const char *name;
		enum log_level level;
	} levels[] = {
		{ "error", EFT_LOG_ERROR },
		{ "warn", EFT_LOG_WARN },
		{ "debug", EFT_LOG_DEBUG },
		{ "info", EFT_LOG_INFO },
	};
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		set_ok(&cfg, "log-level", levels[i].name);
		assert_int_equal(cfg.log_level, levels[i].level);
	}
	set_ok(&cfg, "log-level", "warn");
	set_bad(&cfg, "log-level", "verbose", "log-level");
	set_bad(&cfg, "log-level", "", "log-level");
	set_bad(&cfg, "log-level", "warning", "log-level");
	set_bad(&cfg, "log-level", "3", "log-level");
	assert_int_equal(cfg.log_level, EFT_LOG_WARN);
}

/* The numeric keys: where each lives and its allowed range. */
struct size_case {
	const char *key;
	size_t offset;
	int is_unsigned;
	uint64_t min, max;
};

static const struct size_case size_cases[] = {
	{ "max-frame-size", offsetof(struct config, max_frame_size), 0, 256, 1ull << 30 },
	{ "max-headers", offsetof(struct config, max_headers), 0, 8, 1000000 },
	{ "max-header-line", offsetof(struct config, max_header_line), 0, 64, 16ull << 20 },
	{ "heartbeat-min-ms", offsetof(struct config, heartbeat_min_ms), 1, 10, 3600000 },
	{ "output-high-water", offsetof(struct config, output_high_water), 0, 4096, 1ull << 30 },
};

static uint64_t
field(const struct config *cfg, const struct size_case *c)
{
	const char *p = (const char *)cfg + c->offset;
	if (c->is_unsigned)
		return *(const unsigned *)p;
	return *(const size_t *)p;
}

static void
set_num_ok(struct config *cfg, const struct size_case *c, const char *value, uint64_t want)
{
	set_ok(cfg, c->key, value);
	if (field(cfg, c) != want) {
		print_error("%s = %s: got %llu, want %llu\n", c->key, value,
		    (unsigned long long)field(cfg, c), (unsigned long long)want);
		fail();
	}
}

static void
test_set_numbers_range(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(size_cases) / sizeof(size_cases[0]); i++) {
		const struct size_case *c = &size_cases[i];
		struct config cfg;
		config_defaults(&cfg);
		char v[32], range[64];
		snprintf(range, sizeof(range), "from %llu to %llu", (unsigned long long)c->min,
		    (unsigned long long)c->max);

		snprintf(v, sizeof(v), "%llu", (unsigned long long)c->min);
		set_num_ok(&cfg, c, v, c->min);
		snprintf(v, sizeof(v), "%llu", (unsigned long long)c->max);
		set_num_ok(&cfg, c, v, c->max);
		snprintf(v, sizeof(v), "%llu", (unsigned long long)(c->min + c->max) / 2);
		set_num_ok(&cfg, c, v, (c->min + c->max) / 2);

		snprintf(v, sizeof(v), "%llu", (unsigned long long)c->min - 1);
		set_bad(&cfg, c->key, v, c->key);
		set_bad(&cfg, c->key, v, range);
		snprintf(v, sizeof(v), "%llu", (unsigned long long)c->max + 1);
		set_bad(&cfg, c->key, v, c->key);
		set_bad(&cfg, c->key, v, range);
		set_bad(&cfg, c->key, "0", c->key);
		assert_int_equal(field(&cfg, c), (c->min + c->max) / 2);
	}
}

static void
test_set_numbers_invalid(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "abc", "-5", "+5", " 500", "500 ", "500x", "500kb", "5.5k", "k", "m", "0x1000",
		"1e6", "500\n", "99999999999999999999", "18446744073709551615k",
		"18014398509481984k", "17179869184g",
	};
	for (size_t i = 0; i < sizeof(size_cases) / sizeof(size_cases[0]); i++) {
		const struct size_case *c = &size_cases[i];
		struct config cfg;
		config_defaults(&cfg);
		uint64_t before = field(&cfg, c);
		for (size_t j = 0; j < sizeof(bad) / sizeof(bad[0]); j++)
			set_bad(&cfg, c->key, bad[j], c->key);
		assert_int_equal(field(&cfg, c), before);
	}
}

static void
test_set_numbers_suffixes(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	const struct size_case *frame = &size_cases[0], *hdrs = &size_cases[1],
	    *line = &size_cases[2], *hb = &size_cases[3], *hw = &size_cases[4];

	set_num_ok(&cfg, frame, "64k", 64u << 10);
	set_num_ok(&cfg, frame, "64K", 64u << 10);
	set_num_ok(&cfg, frame, "1m", 1u << 20);
	set_num_ok(&cfg, frame, "16M", 16u << 20);
	set_num_ok(&cfg, frame, "1g", 1u << 30);
	set_num_ok(&cfg, frame, "1G", 1u << 30);
	set_num_ok(&cfg, frame, "1024m", 1u << 30);
	set_bad(&cfg, frame->key, "2g", frame->key);
	set_bad(&cfg, frame->key, "1025m", frame->key);
	set_bad(&cfg, frame->key, "1048577k", frame->key);
	set_bad(&cfg, frame->key, "0k", frame->key);
	set_num_ok(&cfg, frame, "1k", 1024);
	assert_int_equal(cfg.max_frame_size, 1024);

	set_num_ok(&cfg, hdrs, "2k", 2048);
	set_num_ok(&cfg, hdrs, "976k", 976u * 1024);
	set_bad(&cfg, hdrs->key, "1m", hdrs->key);   /* 1048576 > 1000000 */
	set_bad(&cfg, hdrs->key, "977k", hdrs->key); /* 1000448 > 1000000 */
	set_bad(&cfg, hdrs->key, "1g", hdrs->key);
	assert_int_equal(cfg.max_headers, 976u * 1024);

	set_num_ok(&cfg, line, "4k", 4096);
	set_num_ok(&cfg, line, "16m", 16u << 20);
	set_bad(&cfg, line->key, "16385k", line->key);
	set_bad(&cfg, line->key, "17m", line->key);
	assert_int_equal(cfg.max_header_line, 16u << 20);

	set_num_ok(&cfg, hb, "1k", 1024);
	set_num_ok(&cfg, hb, "3515k", 3515u * 1024);
	set_bad(&cfg, hb->key, "4m", hb->key); /* 4194304 > 3600000 */
	set_bad(&cfg, hb->key, "3516k", hb->key);
	assert_int_equal(cfg.heartbeat_min_ms, 3515u * 1024);

	set_num_ok(&cfg, hw, "4k", 4096);
	set_num_ok(&cfg, hw, "1g", 1u << 30);
	set_bad(&cfg, hw->key, "3k", hw->key);
	set_bad(&cfg, hw->key, "1025m", hw->key);
	assert_int_equal(cfg.output_high_water, 1u << 30);
}

static void
test_set_keys_independent(void **state)
{
	(void)state;
	/* Setting one key touches only its own field. */
	struct config def, cfg;
	config_defaults(&def);
	config_defaults(&cfg);
	/* ... and records that a flag set it. */
	set_ok(&cfg, "max-headers", "12");
	assert_int_equal(cfg.max_headers, 12);
	assert_int_equal(cfg.origin[CFG_MAX_HEADERS], CONFIG_FLAG);
	cfg.max_headers = def.max_headers;
	cfg.origin[CFG_MAX_HEADERS] = CONFIG_DEFAULT;
	assert_memory_equal(&cfg, &def, sizeof(def));
	set_ok(&cfg, "heartbeat-min-ms", "77");
	assert_int_equal(cfg.heartbeat_min_ms, 77);
	cfg.heartbeat_min_ms = def.heartbeat_min_ms;
	cfg.origin[CFG_HEARTBEAT_MIN_MS] = CONFIG_DEFAULT;
	assert_memory_equal(&cfg, &def, sizeof(def));
	set_ok(&cfg, "port", "1234");
	assert_int_equal(cfg.port, 1234);
	cfg.port = def.port;
	cfg.origin[CFG_PORT] = CONFIG_DEFAULT;
	assert_memory_equal(&cfg, &def, sizeof(def));
}

static void
test_set_unknown_key(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	set_bad(&cfg, "nope", "1", "unknown setting 'nope'");
	set_bad(&cfg, "Port", "80", "unknown setting 'Port'");
	set_bad(&cfg, "max_frame_size", "1m", "unknown setting");
	set_bad(&cfg, "max-frame-size ", "1m", "unknown setting");
	set_bad(&cfg, "", "1", "unknown setting");
}

static void
test_set_error_buffer_small(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	char err[12];
	memset(err, 'Z', sizeof(err));
	assert_int_equal(config_set(&cfg, "max-frame-size", "huge", err, 8), -1);
	assert_int_equal(strlen(err), 7); /* truncated, terminated */
	for (size_t i = 8; i < sizeof(err); i++)
		assert_int_equal(err[i], 'Z');
}

/* ------------------------------------------------------------------------ */
/* config_load                                                                */

struct tmpfile {
	char path[64];
};

static void
write_tmp(struct tmpfile *t, const char *text)
{
	snprintf(t->path, sizeof(t->path), "/tmp/eft-test-config-XXXXXX");
	int fd = mkstemp(t->path);
	assert_true(fd >= 0);
	size_t n = strlen(text);
	assert_int_equal(write(fd, text, n), (ssize_t)n);
	assert_int_equal(close(fd), 0);
}

static void
remove_tmp(struct tmpfile *t)
{
	unlink(t->path);
}

static void
test_load_file(void **state)
{
	(void)state;
	struct tmpfile t;
	write_tmp(&t,
	    "# eftd settings\n"
	    "\n"
	    "   \n"
	    "bind = 0.0.0.0\n"
	    "port=7000\n"
	    "\tlog-level\t=\tdebug   # chatty\n"
	    "max-frame-size = 2m\r\n"
	    "  # indented comment\n"
	    "max-headers = 50\n"
	    "max-header-line = 8k\n"
	    "heartbeat-min-ms = 250\n"
	    "output-high-water = 1m"); /* no newline at the end */
	struct config cfg;
	config_defaults(&cfg);
	char err[256] = "";
	int rc = config_load(&cfg, t.path, err, sizeof(err));
	remove_tmp(&t);
	if (rc != 0) {
		print_error("config_load failed: %s\n", err);
		fail();
	}
	assert_string_equal(cfg.bind, "0.0.0.0");
	assert_int_equal(cfg.port, 7000);
	assert_int_equal(cfg.log_level, EFT_LOG_DEBUG);
	assert_int_equal(cfg.max_frame_size, 2u << 20);
	assert_int_equal(cfg.max_headers, 50);
	assert_int_equal(cfg.max_header_line, 8u << 10);
	assert_int_equal(cfg.heartbeat_min_ms, 250);
	assert_int_equal(cfg.output_high_water, 1u << 20);
}

static void
test_load_partial_keeps_defaults(void **state)
{
	(void)state;
	struct tmpfile t;
	write_tmp(&t, "port = 9999\n");
	struct config cfg, def;
	config_defaults(&cfg);
	config_defaults(&def);
	char err[256] = "";
	assert_int_equal(config_load(&cfg, t.path, err, sizeof(err)), 0);
	remove_tmp(&t);
	assert_int_equal(cfg.port, 9999);
	assert_int_equal(cfg.origin[CFG_PORT], 1); /* the line it came from */
	assert_string_equal(cfg.path, t.path);
	cfg.port = def.port;
	cfg.origin[CFG_PORT] = CONFIG_DEFAULT;
	memset(cfg.path, 0, sizeof(cfg.path));
	assert_memory_equal(&cfg, &def, sizeof(def));

	/* An empty file, and one with only comments, change nothing. */
	static const char *const empty[] = { "", "\n\n", "# a\n   # b\n\t\n" };
	for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
		write_tmp(&t, empty[i]);
		config_defaults(&cfg);
		assert_int_equal(config_load(&cfg, t.path, err, sizeof(err)), 0);
		remove_tmp(&t);
		memset(cfg.path, 0, sizeof(cfg.path));
		assert_memory_equal(&cfg, &def, sizeof(def));
	}
}

/* Load text that must fail; check the message begins "path:line: ". */
static void
load_bad(const char *text, int line, const char *needle)
{
	struct tmpfile t;
	write_tmp(&t, text);
	struct config cfg;
	config_defaults(&cfg);
	char err[512] = "";
	int rc = config_load(&cfg, t.path, err, sizeof(err));
	remove_tmp(&t);
	if (rc != -1) {
		print_error("config_load should have failed for:\n%s\n", text);
		fail();
	}
	char prefix[128];
	snprintf(prefix, sizeof(prefix), "%s:%d: ", t.path, line);
	str_starts(err, prefix);
	str_contains(err, needle);
}

static void
test_load_bad_lines(void **state)
{
	(void)state;
	load_bad("garbage\n", 1, "expected 'key = value'");
	load_bad("# settings\n\nport = 80\njust words here\nbind = x\n", 4, "key = value");
	load_bad("port = 80\nnope = 1\n", 2, "unknown setting 'nope'");
	load_bad("\n\n\nport = 70000\n", 4, "port");
	load_bad("max-frame-size = 1t\n", 1, "max-frame-size");
	load_bad("log-level = loud # comment\n", 1, "log-level");
	load_bad("port =\n", 1, "port");
	load_bad(" = 5\n", 1, "unknown setting");
	load_bad("port 80\n", 1, "key = value");
	load_bad("# port = 1\nport: 80\n", 2, "key = value");
	load_bad("bind = 1.2.3.4\r\nport = 65536\r\n", 2, "port");
}

static void
test_load_unreadable(void **state)
{
	(void)state;
	struct config cfg, def;
	config_defaults(&cfg);
	config_defaults(&def);
	char err[512] = "";
	const char *missing = "/tmp/eft-test-config-does-not-exist/eftd.conf";
	assert_int_equal(config_load(&cfg, missing, err, sizeof(err)), -1);
	str_contains(err, missing);
	str_contains(err, strerror(ENOENT));
	assert_memory_equal(&cfg, &def, sizeof(def));

	/* A directory opens but cannot be read. */
	char dir[] = "/tmp/eft-test-config-dir-XXXXXX";
	assert_non_null(mkdtemp(dir));
	err[0] = '\0';
	int rc = config_load(&cfg, dir, err, sizeof(err));
	rmdir(dir);
	assert_int_equal(rc, -1);
	str_contains(err, dir);
	assert_memory_equal(&cfg, &def, sizeof(def));
}

/* A comment is ignored however long it is, and does not throw off the line
 * numbers of what follows. */
static void
test_load_long_comment_line(void **state)
{
	(void)state;
	size_t n = 3000;
	char *text = malloc(n + 64);
	assert_non_null(text);
	text[0] = '#';
	memset(text + 1, 'c', n - 1);
	snprintf(text + n, 64, "\nport = 4242\n");

	struct tmpfile t;
	write_tmp(&t, text);
	struct config cfg;
	config_defaults(&cfg);
	char err[512] = "";
	int rc = config_load(&cfg, t.path, err, sizeof(err));
	remove_tmp(&t);
	if (rc != 0) {
		print_error("config_load failed on a %zu-byte comment line: %s\n", n, err);
		free(text);
		fail();
	}
	assert_int_equal(cfg.port, 4242);

	snprintf(text + n, 64, "\nbogus\n");
	load_bad(text, 2, "key = value");
	free(text);
}

/* ------------------------------------------------------------------------ */
/* Mistakes said out loud: keys given twice, contradicting limits, paths      */

static void
test_load_key_twice_names_both_lines(void **state)
{
	(void)state;
	load_bad("port = 1\n# x\nmax-headers = 9\nport = 2\n", 4, "'port' is given twice, on lines 1 and 4");
	load_bad("users-file = /a\n\n\nusers-file = /a\n", 4, "lines 1 and 4");
	load_bad("allow-anonymous = no\nallow-anonymous = no\n", 2, "allow-anonymous");
	/* A flag over a file setting is not a duplicate: the flag wins. */
	struct tmpfile t;
	write_tmp(&t, "port = 1\n");
	struct config cfg;
	config_defaults(&cfg);
	char err[256] = "";
	assert_int_equal(config_load(&cfg, t.path, err, sizeof(err)), 0);
	remove_tmp(&t);
	set_ok(&cfg, "port", "2");
	assert_int_equal(cfg.port, 2);
}

/* config_check on text loaded from a file: 0, or -1 with every needle. */
static int
check_text(const char *text, char *err, size_t errlen)
{
	struct tmpfile t;
	write_tmp(&t, text);
	struct config cfg;
	config_defaults(&cfg);
	err[0] = '\0';
	int rc = config_load(&cfg, t.path, err, errlen);
	remove_tmp(&t);
	assert_int_equal(rc, 0);
	return config_check(&cfg, err, errlen);
}

static void
check_bad(const char *text, const char *a, const char *b)
{
	char err[512];
	if (check_text(text, err, sizeof(err)) != -1) {
		print_error("config_check should have failed for:\n%s\n", text);
		fail();
	}
	str_contains(err, a);
	str_contains(err, b);
}

static void
test_check_anonymous_off_needs_users_file(void **state)
{
	(void)state;
	check_bad("allow-anonymous = no\n", "allow-anonymous = no", "users-file");
	char err[512];
	assert_int_equal(check_text("allow-anonymous = no\nusers-file = /etc/eft-users\n", err,
	    sizeof(err)), 0);
	assert_int_equal(check_text("allow-anonymous = yes\n", err, sizeof(err)), 0);
	/* Flags alone: the same rule. */
	struct config cfg;
	config_defaults(&cfg);
	set_ok(&cfg, "allow-anonymous", "no");
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	str_contains(err, "users-file");
}

static void
test_check_contradicting_limits(void **state)
{
	(void)state;
	/* Both given: an error naming both, with their lines. */
	check_bad("max-frame-size = 1m\nmax-body-size = 2m\n", "max-body-size (2m, line 2)",
	    "max-frame-size (1m, line 1)");
	check_bad("max-frame-size = 1m\nmax-body-size = 1m\n", "max-body-size", "max-frame-size");
	check_bad("max-output = 1m\noutput-high-water = 1m\n", "output-high-water (1m, line 2)",
	    "max-output (1m, line 1)");
	check_bad("max-output = 1m\noutput-high-water = 2m\n", "output-high-water", "max-output");
	check_bad("max-frame-size = 4k\nmax-header-line = 8k\n", "max-header-line", "max-frame-size");
	/* One given, against the other's default: still both named. */
	check_bad("max-body-size = 100m\n", "max-body-size (100m, line 1)",
	    "max-frame-size (17m, the default)");
	check_bad("output-high-water = 64m\n", "output-high-water", "max-output (64m, the default)");

	/* What a frame can carry is the limit, exactly. */
	char err[512];
	assert_int_equal(check_text("max-frame-size = 1m\nmax-body-size = 1048569\n", err,
	    sizeof(err)), 0);
	check_bad("max-frame-size = 1m\nmax-body-size = 1048570\n", "max-body-size", "max-frame-size");
	assert_int_equal(check_text("max-output = 1m\noutput-high-water = 1048575\n", err,
	    sizeof(err)), 0);
}

static void
test_check_defaults_follow(void **state)
{
	(void)state;
	/* The defaults agree with each other. */
	struct config cfg;
	char err[512];
	config_defaults(&cfg);
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.max_body_size, 16u << 20);
	assert_int_equal(cfg.output_high_water, 512u << 10);

	/* A smaller frame: the default body limit gives way to it. */
	config_defaults(&cfg);
	set_ok(&cfg, "max-frame-size", "1m");
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.max_body_size, 0);
	assert_int_equal(cfg.max_header_line, 64u << 10);
	config_defaults(&cfg);
	set_ok(&cfg, "max-frame-size", "1k");
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.max_header_line, 1024);
	/* A smaller max-output: the default high-water mark goes below it. */
	config_defaults(&cfg);
	set_ok(&cfg, "max-output", "256k");
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.output_high_water, 128u << 10);
}

static void
test_load_users_file_beside_config(void **state)
{
	(void)state;
	char dir[] = "/tmp/eft-test-config-rel-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char sub[300], path[400], want[400];
	snprintf(sub, sizeof(sub), "%s/etc", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	snprintf(path, sizeof(path), "%s/eftd.conf", sub);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("users-file = users\n", f);
	fclose(f);

	struct config cfg;
	char err[512] = "";
	/* From another folder, by a relative path to the config file. */
	char cwd[400];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	config_defaults(&cfg);
	int rc = config_load(&cfg, "etc/eftd.conf", err, sizeof(err));
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(rc, 0);
	char *real = realpath(sub, NULL);
	assert_non_null(real);
	snprintf(want, sizeof(want), "%s/users", real);
	free(real);
	assert_string_equal(cfg.users_file, want);

	/* An absolute path stays as it is. */
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("users-file = /srv/eft/users\n", f);
	fclose(f);
	config_defaults(&cfg);
	assert_int_equal(config_load(&cfg, path, err, sizeof(err)), 0);
	assert_string_equal(cfg.users_file, "/srv/eft/users");
	unlink(path);
	rmdir(sub);
	rmdir(dir);
}

/* ------------------------------------------------------------------------ */
/* The global policy keys                                                    */

/* Set key = value, which must fail with exactly the text want. */
static void
set_err(struct config *cfg, const char *key, const char *value, const char *want)
{
	struct config before;
	memcpy(&before, cfg, sizeof(before));
	char err[512] = "";
	if (config_set(cfg, key, value, err, sizeof(err)) != -1) {
		print_error("config_set(%s, '%s') should have failed\n", key, value);
		fail();
	}
	assert_string_equal(err, want);
	assert_memory_equal(cfg, &before, sizeof(before));
}

#define TEN_YEARS_MS (10ull * 365 * 24 * 3600 * 1000)

/* The numeric policy keys: where each lives, how wide, the largest value. */
static const struct {
	enum config_key id;
	const char *key;
	size_t offset, width;
	uint64_t max;
} policy_numbers[] = {
	{ CFG_MAX_QUEUE_MESSAGES, "max-queue-messages",
	    offsetof(struct config, policy.max_queue_messages), 8, 1ull << 40 },
	{ CFG_MAX_QUEUE_BYTES, "max-queue-bytes", offsetof(struct config, policy.max_queue_bytes),
	    8, 1ull << 50 },
	{ CFG_MESSAGE_TTL, "message-ttl", offsetof(struct config, policy.message_ttl_ms), 8,
	    TEN_YEARS_MS },
	{ CFG_MAX_REDELIVERIES, "max-redeliveries", offsetof(struct config, policy.max_redeliveries),
	    4, 1000000 },
};

static uint64_t
policy_number(const struct config *cfg, size_t i)
{
	const char *p = (const char *)cfg + policy_numbers[i].offset;
	if (policy_numbers[i].width == 4) {
		uint32_t v;
		memcpy(&v, p, sizeof(v));
		return v;
	}
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* Each from 0 to its limit, in its own field only, with the reason naming
 * the range. */
static void
test_set_policy_numbers(void **state)
{
	(void)state;
	static const char *const bad[] = { "", "-1", "+1", " 1", "1 ", "1x", "1.5", "0x10", "1e3",
		"99999999999999999999" };
	for (size_t i = 0; i < sizeof(policy_numbers) / sizeof(policy_numbers[0]); i++) {
		const char *key = policy_numbers[i].key;
		uint64_t max = policy_numbers[i].max;
		struct config def, cfg;
		config_defaults(&def);
		config_defaults(&cfg);
		char v[32], want[128];
		snprintf(v, sizeof(v), "%llu", (unsigned long long)max);
		set_ok(&cfg, key, v);
		assert_true(policy_number(&cfg, i) == max);
		set_ok(&cfg, key, "0");
		assert_true(policy_number(&cfg, i) == 0);
		set_ok(&cfg, key, "2k");
		assert_true(policy_number(&cfg, i) == 2048);
		set_ok(&cfg, key, "123456");
		assert_true(policy_number(&cfg, i) == 123456);

		snprintf(v, sizeof(v), "%llu", (unsigned long long)max + 1);
		snprintf(want, sizeof(want), "%s: '%s' is not a number from 0 to %llu", key, v,
		    (unsigned long long)max);
		set_err(&cfg, key, v, want);
		for (size_t j = 0; j < sizeof(bad) / sizeof(bad[0]); j++)
			set_bad(&cfg, key, bad[j], key);

		/* Only its own field changed, and the flag is remembered. */
		enum config_key k = policy_numbers[i].id;
		assert_int_equal(cfg.origin[k], CONFIG_FLAG);
		cfg.origin[k] = CONFIG_DEFAULT;
		memcpy((char *)&cfg + policy_numbers[i].offset,
		    (char *)&def + policy_numbers[i].offset, policy_numbers[i].width);
		assert_memory_equal(&cfg, &def, sizeof(def));
	}
	/* 10 years is the longest TTL, to the millisecond. */
	struct config cfg;
	config_defaults(&cfg);
	set_ok(&cfg, "message-ttl", "315360000000");
	assert_true(cfg.policy.message_ttl_ms == 315360000000ull);
	set_bad(&cfg, "message-ttl", "315360000001", "message-ttl");
	set_bad(&cfg, "max-redeliveries", "1000001", "max-redeliveries");
	set_bad(&cfg, "max-redeliveries", "4294967296", "max-redeliveries");
	assert_int_equal(cfg.policy.max_redeliveries, 0);
}

static void
test_set_queue_overflow(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	set_ok(&cfg, "queue-overflow", "drop-head");
	assert_int_equal(cfg.policy.overflow, OVERFLOW_DROP_HEAD);
	assert_int_equal(cfg.origin[CFG_QUEUE_OVERFLOW], CONFIG_FLAG);
	set_ok(&cfg, "queue-overflow", "block");
	assert_int_equal(cfg.policy.overflow, OVERFLOW_BLOCK);
	set_ok(&cfg, "queue-overflow", "drop-head");
	static const char *const bad[] = { "", "Block", "DROP-HEAD", "drop_head", "drop-tail",
		"reject-publish", "drop-head ", "1", "yes" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[128];
		snprintf(want, sizeof(want), "queue-overflow: '%s' is not block or drop-head", bad[i]);
		set_err(&cfg, "queue-overflow", bad[i], want);
	}
	assert_int_equal(cfg.policy.overflow, OVERFLOW_DROP_HEAD);
}

static void
test_set_dead_letter_queue(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	static const char *const good[] = { "/queue/dlq", "/queue/a.b/c", "/queue/orders.dlq",
		"/queue/caf\xc3\xa9", "/queue/a..b" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		set_ok(&cfg, "dead-letter-queue", good[i]);
		assert_string_equal(cfg.policy.dead_letter_queue, good[i]);
	}
	assert_int_equal(cfg.origin[CFG_DEAD_LETTER_QUEUE], CONFIG_FLAG);
	/* Empty: none (a policy line can turn a global one off). */
	set_ok(&cfg, "dead-letter-queue", "");
	assert_string_equal(cfg.policy.dead_letter_queue, "");

	char longest[POLICY_NAME_MAX];
	memset(longest, 'q', sizeof(longest) - 1);
	memcpy(longest, "/queue/", 7);
	longest[POLICY_NAME_MAX - 1] = '\0';
	set_ok(&cfg, "dead-letter-queue", longest);
	assert_string_equal(cfg.policy.dead_letter_queue, longest);
	char too_long[POLICY_NAME_MAX + 1];
	memcpy(too_long, longest, POLICY_NAME_MAX - 1);
	too_long[POLICY_NAME_MAX - 1] = 'q';
	too_long[POLICY_NAME_MAX] = '\0';
	set_err(&cfg, "dead-letter-queue", too_long, "dead-letter-queue: longer than 255 bytes");

	static const struct {
		const char *value, *why;
	} bad[] = {
		{ "/topic/dlq", "is not /queue/NAME" },
		{ "/temp-queue/dlq", "is not /queue/NAME" },
		{ "/queue/", "is not /queue/NAME" },
		{ "/queue", "is not /queue/NAME" },
		{ "queue/dlq", "is not /queue/NAME" },
		{ "dlq", "is not /queue/NAME" },
		{ "/Queue/dlq", "is not /queue/NAME" },
		{ "/queue/*", "is a pattern: a dead-letter queue is one queue, without '*' or '>'" },
		{ "/queue/a.>", "is a pattern: a dead-letter queue is one queue, without '*' or '>'" },
		{ "/queue/a*b", "is a pattern: a dead-letter queue is one queue, without '*' or '>'" },
		{ "/queue/a b", "holds a space or a control character" },
		{ "/queue/a\tb", "holds a space or a control character" },
		{ "/queue/a\x01", "holds a space or a control character" },
		{ "/queue/a\x7f", "holds a space or a control character" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[256];
		snprintf(want, sizeof(want), "dead-letter-queue: '%s' %s", bad[i].value, bad[i].why);
		set_err(&cfg, "dead-letter-queue", bad[i].value, want);
	}
	assert_string_equal(cfg.policy.dead_letter_queue, longest);
}

static void
test_load_policy_keys_from_file(void **state)
{
	(void)state;
	struct tmpfile t;
	write_tmp(&t,
	    "max-queue-messages = 500\n"
	    "max-queue-bytes = 1m\n"
	    "queue-overflow = drop-head\n"
	    "message-ttl = 60000   # a minute\n"
	    "max-redeliveries = 5\n"
	    "dead-letter-queue = /queue/dead\n");
	struct config cfg;
	config_defaults(&cfg);
	char err[256] = "";
	int rc = config_load(&cfg, t.path, err, sizeof(err));
	remove_tmp(&t);
	if (rc != 0) {
		print_error("config_load failed: %s\n", err);
		fail();
	}
	assert_int_equal(cfg.policy.max_queue_messages, 500);
	assert_int_equal(cfg.policy.max_queue_bytes, 1u << 20);
	assert_int_equal(cfg.policy.overflow, OVERFLOW_DROP_HEAD);
	assert_int_equal(cfg.policy.message_ttl_ms, 60000);
	assert_int_equal(cfg.policy.max_redeliveries, 5);
	assert_string_equal(cfg.policy.dead_letter_queue, "/queue/dead");
	assert_int_equal(cfg.origin[CFG_MESSAGE_TTL], 4);
	assert_int_equal(cfg.origin[CFG_DEAD_LETTER_QUEUE], 6);

	load_bad("queue-overflow = block\nqueue-overflow = drop-head\n", 2,
	    "'queue-overflow' is given twice, on lines 1 and 2");
	load_bad("message-ttl = 1\n\nmessage-ttl = 1\n", 3, "on lines 1 and 3");
	load_bad("port = 1\nmessage-ttl = 1s\n", 2,
	    "message-ttl: '1s' is not a number from 0 to 315360000000");
	load_bad("max-redeliveries = -1\n", 1, "max-redeliveries");
	load_bad("queue-overflow = drop\n", 1, "queue-overflow: 'drop' is not block or drop-head");
	load_bad("dead-letter-queue = /topic/x\n", 1,
	    "dead-letter-queue: '/topic/x' is not /queue/NAME");
	load_bad("dead-letter-queue = /queue/a b\n", 1, "holds a space or a control character");
}

/* ------------------------------------------------------------------------ */
/* Policy lines                                                              */

static const struct config_policy *
only_policy(const struct config *cfg)
{
	assert_int_equal(cfg->npolicies, 1);
	return &cfg->policies[0];
}

static void
test_policy_flag(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	set_ok(&cfg, "policy", "/queue/orders.> max-queue-messages=100000 queue-overflow=drop-head "
	    "dead-letter-queue=/queue/orders.dlq message-ttl=60000");
	const struct config_policy *p = only_policy(&cfg);
	assert_string_equal(p->pattern, "/queue/orders.>");
	assert_int_equal(p->set, CONFIG_POLICY_BIT(CFG_MAX_QUEUE_MESSAGES) |
	    CONFIG_POLICY_BIT(CFG_QUEUE_OVERFLOW) | CONFIG_POLICY_BIT(CFG_DEAD_LETTER_QUEUE) |
	    CONFIG_POLICY_BIT(CFG_MESSAGE_TTL));
	assert_int_equal(p->values.max_queue_messages, 100000);
	assert_int_equal(p->values.overflow, OVERFLOW_DROP_HEAD);
	assert_string_equal(p->values.dead_letter_queue, "/queue/orders.dlq");
	assert_int_equal(p->values.message_ttl_ms, 60000);
	assert_int_equal(cfg.origin[CFG_POLICY], CONFIG_FLAG);
	/* The global settings are untouched. */
	struct config def;
	config_defaults(&def);
	assert_memory_equal(&cfg.policy, &def.policy, sizeof(def.policy));

	/* Later flags add lines; tabs and runs of spaces separate. */
	set_ok(&cfg, "policy", "\t/topic/*   max-queue-bytes=2k\tmax-redeliveries=3 ");
	assert_int_equal(cfg.npolicies, 2);
	p = &cfg.policies[1];
	assert_string_equal(p->pattern, "/topic/*");
	assert_int_equal(p->set, CONFIG_POLICY_BIT(CFG_MAX_QUEUE_BYTES) |
	    CONFIG_POLICY_BIT(CFG_MAX_REDELIVERIES));
	assert_int_equal(p->values.max_queue_bytes, 2048);
	assert_int_equal(p->values.max_redeliveries, 3);
	assert_string_equal(cfg.policies[0].pattern, "/queue/orders.>");

	/* Every policy key, each at its limit; dead-letter-queue= is none. */
	set_ok(&cfg, "policy", "/temp-queue/> max-queue-messages=1099511627776 "
	    "max-queue-bytes=1125899906842624 queue-overflow=block message-ttl=315360000000 "
	    "max-redeliveries=1000000 dead-letter-queue=");
	p = &cfg.policies[2];
	assert_int_equal(p->set, CONFIG_POLICY_BIT(CONFIG_POLICY_LAST + 1) - 1);
	assert_true(p->values.max_queue_messages == 1ull << 40);
	assert_true(p->values.max_queue_bytes == 1ull << 50);
	assert_int_equal(p->values.overflow, OVERFLOW_BLOCK);
	assert_true(p->values.message_ttl_ms == TEN_YEARS_MS);
	assert_int_equal(p->values.max_redeliveries, 1000000);
	assert_string_equal(p->values.dead_letter_queue, "");
}

/* Every mistake in a policy line: one line naming it, nothing changed. */
static void
test_policy_errors(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	set_ok(&cfg, "policy", "/queue/kept message-ttl=1");
	static const struct {
		const char *value, *want;
	} bad[] = {
		{ "", "policy: expected 'PATTERN key=value ...'" },
		{ "  \t ", "policy: expected 'PATTERN key=value ...'" },
		{ "/queue/a", "policy /queue/a: no key=value settings" },
		{ "/queue/a   ", "policy /queue/a: no key=value settings" },
		{ "/queue/a message-ttl", "policy /queue/a: 'message-ttl' is not key=value "
		    "(no spaces around '=')" },
		{ "/queue/a message-ttl = 5", "policy /queue/a: 'message-ttl' is not key=value "
		    "(no spaces around '=')" },
		{ "/queue/a =5", "policy /queue/a: '=5' is not key=value (no spaces around '=')" },
		{ "/queue/a max-memory=1m", "policy /queue/a: 'max-memory' is not a policy key (one "
		    "of max-queue-messages, max-queue-bytes, queue-overflow, message-ttl, "
		    "max-redeliveries, dead-letter-queue)" },
		{ "/queue/a policy=x", "policy /queue/a: 'policy' is not a policy key (one "
		    "of max-queue-messages, max-queue-bytes, queue-overflow, message-ttl, "
		    "max-redeliveries, dead-letter-queue)" },
		{ "/queue/a nope=1", "policy /queue/a: 'nope' is not a policy key (one "
		    "of max-queue-messages, max-queue-bytes, queue-overflow, message-ttl, "
		    "max-redeliveries, dead-letter-queue)" },
		{ "/queue/a Message-TTL=1", "policy /queue/a: 'Message-TTL' is not a policy key (one "
		    "of max-queue-messages, max-queue-bytes, queue-overflow, message-ttl, "
		    "max-redeliveries, dead-letter-queue)" },
		{ "/queue/a message-ttl=1 max-redeliveries=2 message-ttl=1",
		    "policy /queue/a: 'message-ttl' is given twice" },
		{ "/queue/a dead-letter-queue= dead-letter-queue=/queue/x",
		    "policy /queue/a: 'dead-letter-queue' is given twice" },
		{ "/queue/a message-ttl=", "policy /queue/a: message-ttl: '' is not a number from 0 "
		    "to 315360000000" },
		{ "/queue/a message-ttl=315360000001", "policy /queue/a: message-ttl: '315360000001' "
		    "is not a number from 0 to 315360000000" },
		{ "/queue/a max-queue-messages=-1", "policy /queue/a: max-queue-messages: '-1' is not "
		    "a number from 0 to 1099511627776" },
		{ "/queue/a max-redeliveries=1000001", "policy /queue/a: max-redeliveries: '1000001' "
		    "is not a number from 0 to 1000000" },
		{ "/queue/a queue-overflow=reject", "policy /queue/a: queue-overflow: 'reject' is not "
		    "block or drop-head" },
		{ "/queue/a dead-letter-queue=/topic/d", "policy /queue/a: dead-letter-queue: "
		    "'/topic/d' is not /queue/NAME" },
		{ "/queue/a dead-letter-queue=/queue/d.*", "policy /queue/a: dead-letter-queue: "
		    "'/queue/d.*' is a pattern: a dead-letter queue is one queue, without '*' or '>'" },
		{ "/queue/a message-ttl==5", "policy /queue/a: message-ttl: '=5' is not a number "
		    "from 0 to 315360000000" },
		{ "/queue/a message-ttl=1 bogus", "policy /queue/a: 'bogus' is not key=value "
		    "(no spaces around '=')" },
		{ "queue/a message-ttl=1", "policy: pattern 'queue/a' does not start with /queue/, "
		    "/topic/ or /temp-queue/" },
		{ "message-ttl=1", "policy: pattern 'message-ttl=1' does not start with /queue/, "
		    "/topic/ or /temp-queue/" },
		{ "/queue/a* message-ttl=1", "policy: pattern '/queue/a*' has '*' or '>' inside a "
		    "segment: they stand only for a whole segment" },
		{ "/queue/>.x message-ttl=1", "policy: pattern '/queue/>.x' has '>' before its last "
		    "segment: '>' may only end a pattern" },
		{ "/queue/a..b message-ttl=1", "policy: pattern '/queue/a..b' has an empty segment "
		    "(two separators in a row, or nothing after one)" },
		{ "/queue/ message-ttl=1", "policy: pattern '/queue/' has an empty segment "
		    "(two separators in a row, or nothing after one)" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		set_err(&cfg, "policy", bad[i].value, bad[i].want);

	/* A pattern too long, a line too long. */
	char line[1100];
	memset(line, 'x', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\0';
	memcpy(line, "/queue/", 7);
	memcpy(line + POLICY_NAME_MAX, " message-ttl=1", 14);
	line[POLICY_NAME_MAX + 14] = '\0';
	char want[512];
	snprintf(want, sizeof(want), "policy: pattern '%.*s' is longer than 255 bytes",
	    POLICY_NAME_MAX, line);
	set_err(&cfg, "policy", line, want);
	memset(line, 'x', sizeof(line) - 1);
	memcpy(line, "/queue/a message-ttl=1 ", 23);
	set_err(&cfg, "policy", line, "policy: longer than 1023 bytes");
	assert_int_equal(cfg.npolicies, 1);
	assert_string_equal(cfg.policies[0].pattern, "/queue/kept");
}

static void
test_policy_too_many(void **state)
{
	(void)state;
	struct config cfg;
	config_defaults(&cfg);
	char value[64];
	for (int i = 0; i < CONFIG_MAX_POLICIES; i++) {
		snprintf(value, sizeof(value), "/queue/q%d max-redeliveries=%d", i, i);
		set_ok(&cfg, "policy", value);
	}
	assert_int_equal(cfg.npolicies, 64);
	set_err(&cfg, "policy", "/queue/one-more max-redeliveries=1",
	    "policy: at most 64 policy lines");
	assert_string_equal(cfg.policies[63].pattern, "/queue/q63");
	assert_int_equal(cfg.policies[63].values.max_redeliveries, 63);

	/* In a file, the line that is one too many is named. */
	size_t n = 0, cap = 80 * 70;
	char *text = malloc(cap);
	assert_non_null(text);
	n += (size_t)snprintf(text + n, cap - n, "# policies\n");
	for (int i = 0; i <= CONFIG_MAX_POLICIES; i++)
		n += (size_t)snprintf(text + n, cap - n, "policy = /queue/q%d message-ttl=%d\n", i, i);
	load_bad(text, CONFIG_MAX_POLICIES + 2, "policy: at most 64 policy lines");
	free(text);
}

/* Load text and run config_check, which must both succeed. */
static void
load_checked(struct config *cfg, const char *text)
{
	struct tmpfile t;
	write_tmp(&t, text);
	config_defaults(cfg);
	char err[512] = "";
	int rc = config_load(cfg, t.path, err, sizeof(err));
	remove_tmp(&t);
	if (rc != 0 || config_check(cfg, err, sizeof(err)) != 0) {
		print_error("config failed: %s\n", err);
		fail();
	}
}

static void
test_policy_lines_in_file(void **state)
{
	(void)state;
	struct config cfg;
	load_checked(&cfg,
	    "# first match wins\n"
	    "policy = /queue/orders.eu.> max-queue-messages=10 dead-letter-queue=/queue/eu.dlq\n"
	    "max-redeliveries = 7\n"
	    "policy=/queue/orders.>   queue-overflow=drop-head   # a comment\n"
	    "\n"
	    "policy = /queue/> message-ttl=1000 dead-letter-queue=\n"
	    "dead-letter-queue = /queue/dead   # after the lines that use it\n"
	    "message-ttl = 5000\n");
	assert_int_equal(cfg.npolicies, 3);
	assert_int_equal(cfg.origin[CFG_POLICY], 6);
	assert_string_equal(cfg.policies[0].pattern, "/queue/orders.eu.>");
	assert_string_equal(cfg.policies[1].pattern, "/queue/orders.>");
	assert_string_equal(cfg.policies[2].pattern, "/queue/>");

	/* Keys a line gives are its own; the rest are the globals, even those
	 * given further down the file. */
	const struct dest_policy *eu = &cfg.policies[0].values;
	assert_int_equal(eu->max_queue_messages, 10);
	assert_string_equal(eu->dead_letter_queue, "/queue/eu.dlq");
	assert_int_equal(eu->overflow, OVERFLOW_BLOCK);
	assert_int_equal(eu->message_ttl_ms, 5000);
	assert_int_equal(eu->max_redeliveries, 7);
	assert_int_equal(eu->max_queue_bytes, 0);
	const struct dest_policy *orders = &cfg.policies[1].values;
	assert_int_equal(orders->overflow, OVERFLOW_DROP_HEAD);
	assert_int_equal(orders->max_queue_messages, 10000000);
	assert_string_equal(orders->dead_letter_queue, "/queue/dead");
	assert_int_equal(orders->message_ttl_ms, 5000);
	const struct dest_policy *all = &cfg.policies[2].values;
	assert_int_equal(all->message_ttl_ms, 1000);
	assert_string_equal(all->dead_letter_queue, ""); /* given, empty: none */
	assert_int_equal(all->max_redeliveries, 7);

	/* Where names go: the first line that matches, else the globals. */
	static const struct {
		const char *name;
		int policy; /* -1: the globals */
	} lookups[] = {
		{ "/queue/orders.eu.new", 0 },
		{ "/queue/orders.eu.fr.new", 0 },
		{ "/queue/orders.eu", 1 },
		{ "/queue/orders.us", 1 },
		{ "/queue/orders", 2 },
		{ "/queue/other", 2 },
		{ "/queue/", -1 },
		{ "/topic/orders.eu.new", -1 },
		{ "/temp-queue/orders.x", -1 },
		{ "/reply-queue/eft.gen-abc", -1 },
		{ "", -1 },
	};
	for (size_t i = 0; i < sizeof(lookups) / sizeof(lookups[0]); i++) {
		const struct dest_policy *want = lookups[i].policy < 0 ? &cfg.policy :
		    &cfg.policies[lookups[i].policy].values;
		if (config_policy(&cfg, lookups[i].name, strlen(lookups[i].name)) != want) {
			print_error("config_policy('%s') is not policy %d\n", lookups[i].name,
			    lookups[i].policy);
			fail();
		}
	}
	/* The name is len bytes. */
	const char *buf = "/queue/orders.eu.new";
	assert_ptr_equal(config_policy(&cfg, buf, strlen("/queue/orders.eu")), orders);
	assert_ptr_equal(config_policy(&cfg, buf, strlen("/queue/orders")), all);
	assert_ptr_equal(config_policy(&cfg, buf, strlen("/queue/")), &cfg.policy);
	assert_int_equal(cfg.policy.message_ttl_ms, 5000);
	assert_string_equal(cfg.policy.dead_letter_queue, "/queue/dead");

	/* A broad line first takes everything, however specific the later ones. */
	load_checked(&cfg, "policy = /queue/> max-redeliveries=1\n"
	    "policy = /queue/a max-redeliveries=2\n");
	assert_ptr_equal(config_policy(&cfg, "/queue/a", 8), &cfg.policies[0].values);
	assert_int_equal(config_policy(&cfg, "/queue/a", 8)->max_redeliveries, 1);

	/* No lines: every name has the globals. */
	load_checked(&cfg, "message-ttl = 3\n");
	assert_ptr_equal(config_policy(&cfg, "/queue/a", 8), &cfg.policy);
	assert_int_equal(config_policy(&cfg, "/queue/a", 8)->message_ttl_ms, 3);
}

/* A dead-letter queue matched by the pattern (or the global message-ttl)
 * of the queues it collects for keeps its dead letters: only a line naming
 * it exactly with a message-ttl of its own gives it one. */
static void
test_dead_letter_queue_takes_no_ttl_it_collects_for(void **state)
{
	(void)state;
	struct config cfg;
	load_checked(&cfg,
	    "policy = /queue/orders.dlq.kept max-redeliveries=3\n"
	    "policy = /queue/orders.> message-ttl=60000 dead-letter-queue=/queue/orders.dlq\n"
	    "policy = /queue/jobs.dlq message-ttl=5000\n"
	    "policy = /queue/jobs.> dead-letter-queue=/queue/jobs.dlq\n"
	    "policy = /queue/exact max-redeliveries=2 dead-letter-queue=/queue/orders.dlq.kept\n"
	    "message-ttl = 1000\n"
	    "dead-letter-queue = /queue/dead\n");
	const struct dest_policy *orders = config_policy(&cfg, "/queue/orders.eu", 16);
	assert_ptr_equal(orders, &cfg.policies[1].values);
	assert_int_equal(orders->message_ttl_ms, 60000);
	/* The dead-letter queue under the same pattern: all but the ttl. */
	const struct dest_policy *dlq = config_policy(&cfg, "/queue/orders.dlq", 17);
	assert_ptr_equal(dlq, &cfg.policies[1].for_dlq);
	assert_int_equal(dlq->message_ttl_ms, 0);
	assert_string_equal(dlq->dead_letter_queue, "/queue/orders.dlq");
	/* Named exactly, with a message-ttl of its own: kept. */
	const struct dest_policy *jobs = config_policy(&cfg, "/queue/jobs.dlq", 15);
	assert_ptr_equal(jobs, &cfg.policies[2].values);
	assert_int_equal(jobs->message_ttl_ms, 5000);
	/* Named exactly, without one: the global ttl would be its, so none. */
	const struct dest_policy *kept = config_policy(&cfg, "/queue/orders.dlq.kept", 22);
	assert_ptr_equal(kept, &cfg.policies[0].for_dlq);
	assert_int_equal(kept->message_ttl_ms, 0);
	assert_int_equal(kept->max_redeliveries, 3);
	/* The global dead-letter queue: no global ttl either. */
	const struct dest_policy *dead = config_policy(&cfg, "/queue/dead", 11);
	assert_ptr_equal(dead, &cfg.policy_for_dlq);
	assert_int_equal(dead->message_ttl_ms, 0);
	assert_string_equal(dead->dead_letter_queue, "/queue/dead");
	/* Other queues are as before. */
	assert_ptr_equal(config_policy(&cfg, "/queue/other", 12), &cfg.policy);
	assert_int_equal(cfg.policy.message_ttl_ms, 1000);
	assert_ptr_equal(config_policy(&cfg, "/queue/jobs.a", 13), &cfg.policies[3].values);
	assert_int_equal(cfg.policies[3].values.message_ttl_ms, 1000);
}

/* The globals fill a line's gaps at config_check, after flags too. */
static void
test_policy_filled_at_check(void **state)
{
	(void)state;
	struct config cfg;
	char err[512];
	config_defaults(&cfg);
	set_ok(&cfg, "policy", "/queue/a.* message-ttl=10");
	set_ok(&cfg, "max-queue-bytes", "1m");
	set_ok(&cfg, "queue-overflow", "drop-head");
	set_ok(&cfg, "dead-letter-queue", "/queue/dlq");
	set_ok(&cfg, "max-redeliveries", "9");
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	const struct dest_policy *p = &cfg.policies[0].values;
	assert_int_equal(p->message_ttl_ms, 10);
	assert_int_equal(p->max_queue_bytes, 1u << 20);
	assert_int_equal(p->max_queue_messages, 10000000);
	assert_int_equal(p->overflow, OVERFLOW_DROP_HEAD);
	assert_string_equal(p->dead_letter_queue, "/queue/dlq");
	assert_int_equal(p->max_redeliveries, 9);
	assert_int_equal(cfg.policies[0].set, CONFIG_POLICY_BIT(CFG_MESSAGE_TTL));
	assert_ptr_equal(config_policy(&cfg, "/queue/a.b", 10), p);
	assert_ptr_equal(config_policy(&cfg, "/queue/a.b.c", 12), &cfg.policy);
	/* Checking again changes nothing. */
	struct config once;
	memcpy(&once, &cfg, sizeof(once));
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_memory_equal(&cfg, &once, sizeof(once));
}

/* Flags override the file: the first --policy replaces its lines (as
 * --listen does), later ones add; a bad one changes nothing. */
static void
test_policy_flags_replace_file(void **state)
{
	(void)state;
	struct tmpfile t;
	write_tmp(&t, "policy = /queue/a message-ttl=1\npolicy = /queue/b message-ttl=2\n"
	    "listen = tcp://127.0.0.1:1\n");
	struct config cfg;
	config_defaults(&cfg);
	char err[256] = "";
	assert_int_equal(config_load(&cfg, t.path, err, sizeof(err)), 0);
	remove_tmp(&t);
	assert_int_equal(cfg.npolicies, 2);
	assert_int_equal(cfg.origin[CFG_POLICY], 2);

	set_bad(&cfg, "policy", "/queue/c", "no key=value settings");
	set_bad(&cfg, "listen", "udp://x:1", "listen");
	set_bad(&cfg, "listen", "tcp://x", "listen");
	assert_int_equal(cfg.npolicies, 2);
	set_ok(&cfg, "policy", "/queue/c message-ttl=3");
	assert_int_equal(cfg.npolicies, 1);
	assert_string_equal(cfg.policies[0].pattern, "/queue/c");
	set_ok(&cfg, "policy", "/queue/d message-ttl=4");
	assert_int_equal(cfg.npolicies, 2);
	assert_string_equal(cfg.policies[1].pattern, "/queue/d");
	/* The file's listener is still there. */
	assert_int_equal(cfg.nlisten, 1);
	assert_string_equal(cfg.listen[0].url, "tcp://127.0.0.1:1");
}

/* In a file, a policy line's mistake is "path:line: policy ...". */
static void
test_policy_errors_in_file(void **state)
{
	(void)state;
	load_bad("port = 1\npolicy = /queue/a nope=1\n", 2,
	    "policy /queue/a: 'nope' is not a policy key (one of max-queue-messages, ");
	load_bad("policy = /queue/a message-ttl=1\n\npolicy = /queue/b message-ttl=1 message-ttl=2\n",
	    3, "policy /queue/b: 'message-ttl' is given twice");
	load_bad("policy = /queue/a\n", 1, "policy /queue/a: no key=value settings");
	load_bad("policy =\n", 1, "policy: expected 'PATTERN key=value ...'");
	load_bad("policy = /queue/a max-queue-bytes=lots\n", 1,
	    "policy /queue/a: max-queue-bytes: 'lots' is not a number from 0 to ");
	load_bad("policy = /queue/a max-queue-messages = 5\n", 1,
	    "policy /queue/a: 'max-queue-messages' is not key=value (no spaces around '=')");
	load_bad("policy = /queues/a max-queue-messages=5\n", 1,
	    "policy: pattern '/queues/a' does not start with /queue/, /topic/ or /temp-queue/");
	load_bad("policy = /queue/a dead-letter-queue=/queue/x>\n", 1,
	    "policy /queue/a: dead-letter-queue: '/queue/x>' is a pattern");
	load_bad("policy = /queue/a queue-overflow=drop-head # x\nport = 1\nport = 2\n", 3,
	    "'port' is given twice, on lines 2 and 3");
}

/* The file's text loaded, then flags (key, value pairs up to a NULL). */
static void
load_with_flags(struct config *cfg, const char *text, const char *const *flags)
{
	struct tmpfile t;
	char err[256] = "";
	write_tmp(&t, text);
	config_defaults(cfg);
	assert_int_equal(config_load(cfg, t.path, err, sizeof(err)), 0);
	remove_tmp(&t);
	for (size_t i = 0; flags[i] != NULL; i += 2)
		set_ok(cfg, flags[i], flags[i + 1]);
}

/* -p/-b replace the file's STOMP listeners (its admin listener stays), as
 * -L replaces its listeners; -L makes the file's bind and port give way.
 * Only both as flags, or both in the file, are a mistake (issue 23). */
static void
test_listen_flags_override_the_file(void **state)
{
	(void)state;
	static const char file[] = "listen = tcp://0.0.0.0:61613\nlisten = ws://0.0.0.0:15674/ws\n"
	    "listen = http://127.0.0.1:15672\n";
	struct config cfg;
	char err[512];
	load_with_flags(&cfg, file, (const char *const[]){ "port", "7000", NULL });
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.nlisten, 2);
	assert_string_equal(cfg.listen[0].url, "http://127.0.0.1:15672");
	assert_string_equal(cfg.listen[1].url, "tcp://127.0.0.1:7000");

	load_with_flags(&cfg, file, (const char *const[]){ "bind", "::1", NULL });
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.nlisten, 2);
	assert_string_equal(cfg.listen[1].url, "tcp://[::1]:61613");

	load_with_flags(&cfg, "port = 7000\nbind = 127.0.0.2\n",
	    (const char *const[]){ "listen", "tls://127.0.0.1:7001", NULL });
	set_ok(&cfg, "tls-cert-file", "/c.pem");
	set_ok(&cfg, "tls-key-file", "/k.pem");
	assert_int_equal(config_check(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.nlisten, 1);
	assert_string_equal(cfg.listen[0].url, "tls://127.0.0.1:7001");

	load_with_flags(&cfg, "", (const char *const[]){ "port", "7000", "listen",
	    "tcp://127.0.0.1:7001", NULL });
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	str_starts(err, "--port is the shorthand for one tcp:// listener: with --listen");

	check_bad("listen = tcp://127.0.0.1:7001\nport = 7000\n", ": port is the shorthand",
	    "listen = tcp://127.0.0.1:7000");
}

/* One address and port twice: an error naming both places, not the
 * "Address already in use" of the second bind (issue 23). */
static void
test_listen_twice(void **state)
{
	(void)state;
	check_bad("listen = tcp://127.0.0.1:7000\nlisten = ws://127.0.0.1:7001/ws\n"
	    "listen = tcp://127.0.0.1:7000\n", ": listen = tcp://127.0.0.1:7000 is given twice, "
	    "on lines 1 and 3: keep one", "");
	check_bad("listen = tcp://0.0.0.0:7000\n\nlisten = ws://127.0.0.1:7000/ws\n",
	    ": listen = tcp://0.0.0.0:7000 (line 1) and listen = ws://127.0.0.1:7000/ws (line 3) "
	    "are on the same address and port", "");
	check_bad("listen = http://127.0.0.1:61613\n", "listen = http://127.0.0.1:61613 (line 1) "
	    "and tcp://127.0.0.1:61613 (the default bind and port)", "");
	check_bad("port = 7000\nlisten = http://127.0.0.1:7000\n", "listen = http://127.0.0.1:7000 "
	    "(line 2) and tcp://127.0.0.1:7000 (port, line 1)", "");
	struct config cfg;
	char err[512];
	load_with_flags(&cfg, "", (const char *const[]){ "listen", "tcp://[::1]:7000", "listen",
	    "tcp://[::1]:7000", NULL });
	assert_int_equal(config_check(&cfg, err, sizeof(err)), -1);
	assert_string_equal(err, "--listen tcp://[::1]:7000 is given twice: keep one");
	/* Port 0, other ports, other addresses: fine. */
	char ok[512];
	assert_int_equal(check_text("listen = tcp://127.0.0.1:0\nlisten = tcp://127.0.0.1:0\n"
	    "listen = tcp://127.0.0.1:7000\nlisten = tcp://127.0.0.2:7000\n"
	    "listen = tcp://[::1]:7000\nlisten = http://127.0.0.1:7001\n", ok, sizeof(ok)), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_set_bind),
		cmocka_unit_test(test_set_port),
		cmocka_unit_test(test_set_log_level),
		cmocka_unit_test(test_set_numbers_range),
		cmocka_unit_test(test_set_numbers_invalid),
		cmocka_unit_test(test_set_numbers_suffixes),
		cmocka_unit_test(test_set_keys_independent),
		cmocka_unit_test(test_set_unknown_key),
		cmocka_unit_test(test_set_error_buffer_small),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_load_partial_keeps_defaults),
		cmocka_unit_test(test_load_bad_lines),
		cmocka_unit_test(test_load_unreadable),
		cmocka_unit_test(test_load_long_comment_line),
		cmocka_unit_test(test_load_key_twice_names_both_lines),
		cmocka_unit_test(test_check_anonymous_off_needs_users_file),
		cmocka_unit_test(test_check_contradicting_limits),
		cmocka_unit_test(test_check_defaults_follow),
		cmocka_unit_test(test_load_users_file_beside_config),
		cmocka_unit_test(test_set_policy_numbers),
		cmocka_unit_test(test_set_queue_overflow),
		cmocka_unit_test(test_set_dead_letter_queue),
		cmocka_unit_test(test_load_policy_keys_from_file),
		cmocka_unit_test(test_policy_flag),
		cmocka_unit_test(test_policy_errors),
		cmocka_unit_test(test_policy_too_many),
		cmocka_unit_test(test_policy_lines_in_file),
		cmocka_unit_test(test_dead_letter_queue_takes_no_ttl_it_collects_for),
		cmocka_unit_test(test_policy_filled_at_check),
		cmocka_unit_test(test_policy_flags_replace_file),
		cmocka_unit_test(test_policy_errors_in_file),
		cmocka_unit_test(test_listen_flags_override_the_file),
		cmocka_unit_test(test_listen_twice),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
