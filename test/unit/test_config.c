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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
