/* test_auth.c - unit tests for the users file, password checks with their
 * cache, destination permissions and auth_hash_password. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "eft/auth.h"
#include "eft/log.h"

/* Hashes made once for the whole run: each costs tens of milliseconds. */
static char hash_alice[AUTH_HASH_MAX];  /* "wonderland" */
static char hash_bob[AUTH_HASH_MAX];    /* "builder" */
static char hash_i[AUTH_HASH_MAX];      /* argon2i, not argon2id */
static char hash_slow[AUTH_HASH_MAX];   /* argon2id with twice our memory */

static void
str_contains(const char *s, const char *needle)
{
	if (strstr(s, needle) == NULL) {
		print_error("'%s' does not contain '%s'\n", s, needle);
		fail();
	}
}

/* text with @A, @B, @I, @S replaced by the hashes above; malloc'd. */
static char *
subst(const char *text)
{
	size_t cap = strlen(text) + 1, n = 0;
	for (const char *p = text; *p; p++)
		cap += *p == '@' ? AUTH_HASH_MAX : 0;
	char *out = malloc(cap);
	assert_non_null(out);
	for (const char *p = text; *p; p++) {
		const char *h = NULL;
		if (p[0] == '@' && p[1] == 'A')
			h = hash_alice;
		else if (p[0] == '@' && p[1] == 'B')
			h = hash_bob;
		else if (p[0] == '@' && p[1] == 'I')
			h = hash_i;
		else if (p[0] == '@' && p[1] == 'S')
			h = hash_slow;
		if (h != NULL) {
			size_t len = strlen(h);
			assert_true(n + len < cap);
			memcpy(out + n, h, len);
			n += len;
			p++;
		} else {
			assert_true(n + 1 < cap);
			out[n++] = *p;
		}
	}
	out[n] = '\0';
	return out;
}

struct tmpfile {
	char path[64];
};

/* Write len bytes to a new temporary file. */
static void
write_tmp_bytes(struct tmpfile *t, const char *data, size_t len)
{
	snprintf(t->path, sizeof(t->path), "/tmp/eft-test-users-XXXXXX");
	int fd = mkstemp(t->path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* A users file of text after subst(). */
static void
write_tmp(struct tmpfile *t, const char *text)
{
	char *s = subst(text);
	write_tmp_bytes(t, s, strlen(s));
	free(s);
}

static struct auth *
load_ok(const char *text)
{
	struct tmpfile t;
	struct auth *a = NULL;
	char err[512] = "";
	write_tmp(&t, text);
	if (auth_load(&a, t.path, err, sizeof(err)) != 0) {
		print_error("auth_load failed: %s\n", err);
		unlink(t.path);
		fail();
	}
	unlink(t.path);
	assert_non_null(a);
	return a;
}

/* Loading text must fail with "PATH:LINE: ..." naming needle. */
static void
load_bad_bytes(const char *data, size_t len, int line, const char *needle)
{
	struct tmpfile t;
	struct auth *a = (struct auth *)&t; /* must be reset to NULL */
	char err[512] = "", where[128];
	write_tmp_bytes(&t, data, len);
	int rc = auth_load(&a, t.path, err, sizeof(err));
	unlink(t.path);
	if (rc != -1) {
		print_error("auth_load of '%s' should have failed\n", data);
		auth_free(a);
		fail();
	}
	assert_null(a);
	snprintf(where, sizeof(where), "%s:%d: ", t.path, line);
	if (strncmp(err, where, strlen(where)) != 0) {
		print_error("'%s' does not start with '%s'\n", err, where);
		fail();
	}
	str_contains(err, needle);
}

static void
load_bad(const char *text, int line, const char *needle)
{
	char *s = subst(text);
	load_bad_bytes(s, strlen(s), line, needle);
	free(s);
}

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const struct auth_user *
check(struct auth *a, const char *login, const char *passcode)
{
	return auth_check(a, login, login ? strlen(login) : 0, passcode,
	    passcode ? strlen(passcode) : 0);
}

static bool
may_read(const struct auth_user *u, const char *dest)
{
	return auth_may_read(u, dest, strlen(dest));
}

static bool
may_write(const struct auth_user *u, const char *dest)
{
	return auth_may_write(u, dest, strlen(dest));
}

static int
group_setup(void **state)
{
	(void)state;
	log_set_level(EFT_LOG_ERROR); /* auth_load's cost warning is expected */
	if (sodium_init() < 0 ||
	    auth_hash_password("wonderland", 10, hash_alice, sizeof(hash_alice)) != 0 ||
	    auth_hash_password("builder", 7, hash_bob, sizeof(hash_bob)) != 0 ||
	    crypto_pwhash_str_alg(hash_i, "x", 1, crypto_pwhash_argon2i_OPSLIMIT_MIN,
	    AUTH_HASH_MEMLIMIT, crypto_pwhash_ALG_ARGON2I13) != 0 ||
	    crypto_pwhash_str(hash_slow, "slow", 4, crypto_pwhash_OPSLIMIT_INTERACTIVE,
	    2 * AUTH_HASH_MEMLIMIT) != 0)
		return -1;
	return 0;
}

/* ---- loading ---- */

static void
test_load_valid(void **state)
{
	(void)state;
	struct auth *a = load_ok(
	    "# users\n"
	    "\n"
	    "alice:@A\n"
	    "   \t\n"
	    "  # an indented comment\n"
	    "bob:@B:read=/topic/:write=\n"
	    "\tcarol:@A:write=/queue/orders.,/queue/audit:read=/queue/orders.  \r\n"
	    "dave:@S\n"
	    "erin:@B:read=/topic/news.,/queue/x/,/queue/y");
	assert_int_equal(auth_count(a), 5);

	const struct auth_user *alice = auth_find(a, "alice", 5);
	const struct auth_user *bob = auth_find(a, "bob", 3);
	const struct auth_user *carol = auth_find(a, "carol", 5);
	const struct auth_user *erin = auth_find(a, "erin", 4);
	assert_non_null(alice);
	assert_non_null(bob);
	assert_non_null(carol);
	assert_non_null(auth_find(a, "dave", 4));
	assert_non_null(erin);
	assert_null(auth_find(a, "alic", 4));
	assert_null(auth_find(a, "alicex", 6));
	assert_null(auth_find(a, NULL, 0));
	assert_string_equal(auth_user_name(alice), "alice");
	assert_string_equal(auth_user_name(carol), "carol");

	assert_true(may_read(alice, "/queue/a") && may_write(alice, "/topic/b"));
	assert_true(may_read(bob, "/topic/a") && !may_read(bob, "/queue/a"));
	assert_false(may_write(bob, "/topic/a"));
	assert_true(may_write(carol, "/queue/orders.new") && may_write(carol, "/queue/audit"));
	assert_false(may_write(carol, "/queue/other"));
	assert_true(may_read(carol, "/queue/orders.x") && !may_read(carol, "/queue/audit"));
	assert_true(may_read(erin, "/topic/news.sport") && may_read(erin, "/queue/x/1"));
	assert_true(may_read(erin, "/queue/y") && may_read(erin, "/queue/yz"));
	assert_false(may_read(erin, "/topic/weather"));
	assert_true(may_write(erin, "/anything"));
	auth_free(a);
}

static void
test_load_empty(void **state)
{
	(void)state;
	struct auth *a = load_ok("# nobody yet\n\n");
	assert_int_equal(auth_count(a), 0);
	assert_null(check(a, "alice", "wonderland"));
	auth_free(a);
	a = load_ok("");
	assert_int_equal(auth_count(a), 0);
	auth_free(a);
}

static void
test_load_example(void **state)
{
	(void)state;
	struct auth *a = NULL;
	char err[512] = "";
	if (auth_load(&a, "etc/users.example", err, sizeof(err)) != 0) {
		print_error("etc/users.example: %s\n", err);
		fail();
	}
	assert_int_equal(auth_count(a), 2);
	const struct auth_user *alice = check(a, "alice", "wonderland");
	const struct auth_user *bob = check(a, "bob", "builder");
	assert_non_null(alice);
	assert_non_null(bob);
	assert_null(check(a, "bob", "wonderland"));
	assert_true(may_read(alice, "/queue/a") && may_write(alice, "/queue/a"));
	assert_true(may_read(bob, "/topic/a"));
	assert_false(may_read(bob, "/queue/a"));
	assert_false(may_write(bob, "/topic/a"));
	auth_free(a);
}

static void
test_load_malformed(void **state)
{
	(void)state;
	load_bad("alice\n", 1, "expected NAME:HASH");
	load_bad("# comment\n\nbob:@B\nalice\n", 4, "expected NAME:HASH");
	load_bad(":@A\n", 1, "empty user name");
	load_bad("al ice:@A\n", 1, "user name 'al ice' contains a blank");
	load_bad("al\x01ice:@A\n", 1, "contains a blank or control character");
	load_bad("alice:\n", 1, "not a libsodium crypto_pwhash_str");
	load_bad("alice:secret\n", 1, "not a libsodium crypto_pwhash_str");
	load_bad("alice:@I\n", 1, "not a libsodium crypto_pwhash_str");
	load_bad("alice:$argon2id$v=19$m=16384,t=2,p=1$bad\n", 1, "not a libsodium");
	load_bad("alice:$argon2id$v=19$m=16384,t=2,p=1$u/jpqets6SrY0GUaBiq3OQ$"
	    "luiSYm5rBv/2UIVeRIFQjNe1VmZArRdBRedKbOzGo*E\n", 1, "not a libsodium");
	load_bad("alice:@A # the admin\n", 1, "not a libsodium");
	load_bad("alice:@A:read=queue/\n", 1, "read= prefix 'queue/' does not start with '/'");
	load_bad("alice:@A:read=/queue/,,/topic/\n", 1, "empty prefix in read= list");
	load_bad("alice:@A:write=/queue/,\n", 1, "empty prefix in write= list");
	load_bad("alice:@A:write=,/queue/\n", 1, "empty prefix in write= list");
	load_bad("alice:@A:read=/queue/ /topic/\n", 1, "contains a blank or control character");
	load_bad("alice:@A:read=/a/:read=/b/\n", 1, "read= given twice");
	load_bad("alice:@A:write=:write=/b/\n", 1, "write= given twice");
	load_bad("alice:@A:admin=yes\n", 1, "unknown field 'admin=yes'");
	load_bad("alice:@A:read\n", 1, "unknown field 'read'");
	load_bad("alice:@A:\n", 1, "unknown field ''");
	load_bad("bob:@B\n\n# fine so far\nalice:@A:read=/q/:write=x\n", 4, "does not start");

	static const char nul[] = "alice:x\0y\n";
	load_bad_bytes(nul, sizeof(nul) - 1, 1, "NUL byte");
}

static void
test_load_duplicate(void **state)
{
	(void)state;
	load_bad("alice:@A\n# two\nalice:@B\n", 3, "duplicate user 'alice' (first on line 1)");
	load_bad("bob:@B\nalice:@A\nalice:@A\n", 3, "duplicate user 'alice' (first on line 2)");
}

static void
test_load_unreadable(void **state)
{
	(void)state;
	struct auth *a = (struct auth *)&a;
	char err[512] = "";
	assert_int_equal(auth_load(&a, "/nonexistent/eft-users", err, sizeof(err)), -1);
	assert_null(a);
	str_contains(err, "/nonexistent/eft-users: cannot read users file");
	str_contains(err, "No such file");

	a = (struct auth *)&a;
	err[0] = '\0';
	assert_int_equal(auth_load(&a, "/tmp", err, sizeof(err)), -1);
	assert_null(a);
	str_contains(err, "/tmp: cannot read users file");
}

/* ---- checking passwords ---- */

static void
test_check(void **state)
{
	(void)state;
	struct auth *a = load_ok("alice:@A\nbob:@B:read=/topic/\n");
	const struct auth_user *alice = auth_find(a, "alice", 5);

	assert_null(check(a, "mallory", "wonderland"));  /* unknown user */
	assert_null(check(a, NULL, "wonderland"));       /* no login header */
	assert_null(check(a, "", ""));
	assert_null(check(a, "alice", "wonderlan"));     /* wrong password */
	assert_null(check(a, "alice", "wonderland "));
	assert_null(check(a, "alice", NULL));            /* no passcode header */
	assert_null(check(a, "alice", "builder"));       /* bob's password */
	assert_ptr_equal(check(a, "alice", "wonderland"), alice);
	assert_ptr_equal(check(a, "bob", "builder"), auth_find(a, "bob", 3));

	/* Header values are not NUL-terminated: the lengths count. */
	assert_ptr_equal(auth_check(a, "alicex", 5, "wonderlandXX", 10), alice);
	assert_null(auth_check(a, "alice", 5, "wonderland", 9));
	assert_null(auth_check(a, "alice", 4, "wonderland", 10));
	auth_free(a);
}

static void
test_check_cache(void **state)
{
	(void)state;
	struct auth *a = load_ok("alice:@A\nbob:@A\n");
	const struct auth_user *alice = auth_find(a, "alice", 5);

	double t0 = now_s();
	assert_ptr_equal(check(a, "alice", "wonderland"), alice); /* verified: slow */
	double t1 = now_s();
	assert_ptr_equal(check(a, "alice", "wonderland"), alice); /* cached: fast */
	double t2 = now_s();
	if ((t2 - t1) * 10 > t1 - t0) {
		print_error("cached check took %.6f s, the first %.6f s\n", t2 - t1, t1 - t0);
		fail();
	}

	/* A wrong password after a cached right one still fails, and does not
	 * push the right one out of the cache. */
	assert_null(check(a, "alice", "wonderlanD"));
	assert_null(check(a, "alice", ""));
	assert_null(check(a, "alice", NULL));
	double t3 = now_s();
	assert_ptr_equal(check(a, "alice", "wonderland"), alice);
	double t4 = now_s();
	assert_true((t4 - t3) * 10 <= t1 - t0);

	/* The cache is per user: bob (same hash) is verified for himself. */
	assert_null(check(a, "bob", "builder"));
	assert_ptr_equal(check(a, "bob", "wonderland"), auth_find(a, "bob", 3));
	assert_ptr_equal(check(a, "bob", "wonderland"), auth_find(a, "bob", 3));
	assert_ptr_equal(check(a, "alice", "wonderland"), alice);
	auth_free(a);
}

/* ---- permissions ---- */

static void
test_perm_prefix(void **state)
{
	(void)state;
	struct auth *a = load_ok("u:@A:read=/queue/,/topic/news.:write=/queue/orders\n");
	const struct auth_user *u = auth_find(a, "u", 1);
	assert_non_null(u);
	assert_true(may_read(u, "/queue/"));
	assert_true(may_read(u, "/queue/a"));
	assert_true(may_read(u, "/topic/news.sport"));
	assert_true(may_read(u, "/topic/news."));
	assert_false(may_read(u, "/topic/news"));        /* shorter than the prefix */
	assert_false(may_read(u, "/topic/newsletter"));
	assert_false(may_read(u, "/queue"));
	assert_false(may_read(u, "/Queue/a"));            /* byte for byte */
	assert_false(may_read(u, ""));
	assert_true(may_write(u, "/queue/orders"));
	assert_true(may_write(u, "/queue/orders.eu"));
	assert_true(may_write(u, "/queue/ordersX"));      /* a prefix, not a name */
	assert_false(may_write(u, "/queue/order"));
	assert_false(may_write(u, "/topic/news.x"));
	/* Lengths count, not NULs. */
	assert_true(auth_may_read(u, "/queue/aXYZ", 7));
	assert_false(auth_may_read(u, "/queue/a", 6));
	auth_free(a);
}

static void
test_perm_missing_and_empty(void **state)
{
	(void)state;
	struct auth *a = load_ok("all:@A\nnone:@A:read=:write=\nro:@A:write=\nwo:@A:read=\n");
	const struct auth_user *all = auth_find(a, "all", 3);
	const struct auth_user *none = auth_find(a, "none", 4);
	const struct auth_user *ro = auth_find(a, "ro", 2);
	const struct auth_user *wo = auth_find(a, "wo", 2);
	static const char *dests[] = { "/queue/a", "/topic/b", "/x", "" };
	for (size_t i = 0; i < sizeof(dests) / sizeof(dests[0]); i++) {
		assert_true(may_read(all, dests[i]) && may_write(all, dests[i]));
		assert_false(may_read(none, dests[i]) || may_write(none, dests[i]));
		assert_true(may_read(ro, dests[i]) && !may_write(ro, dests[i]));
		assert_true(!may_read(wo, dests[i]) && may_write(wo, dests[i]));
	}
	auth_free(a);
}

static void
test_perm_temp_reply(void **state)
{
	(void)state;
	struct auth *a = load_ok("none:@A:read=:write=\nq:@A:read=/queue/:write=/queue/\n");
	const struct auth_user *users[] = { auth_find(a, "none", 4), auth_find(a, "q", 1) };
	for (size_t i = 0; i < 2; i++) {
		const struct auth_user *u = users[i];
		assert_true(may_read(u, "/temp-queue/replies") && may_write(u, "/temp-queue/replies"));
		assert_true(may_read(u, "/reply-queue/eft.gen-abc") &&
		    may_write(u, "/reply-queue/eft.gen-abc"));
		assert_false(may_read(u, "/temp-queue") || may_write(u, "/reply-queue"));
		assert_false(may_read(u, "/topic/x") || may_write(u, "/topic/x"));
	}
	auth_free(a);
}

static void
test_perm_anonymous(void **state)
{
	(void)state;
	assert_true(may_read(NULL, "/queue/a") && may_write(NULL, "/topic/b"));
}

/* ---- names and hashing ---- */

static void
test_name_valid(void **state)
{
	(void)state;
	assert_true(auth_name_valid("alice", 5));
	assert_true(auth_name_valid("a.b-c_d@e", 9));
	assert_true(auth_name_valid("h\xc3\xa9l\xc3\xa8ne", 8)); /* UTF-8 */
	assert_false(auth_name_valid("", 0));
	assert_false(auth_name_valid("a:b", 3));
	assert_false(auth_name_valid("a b", 3));
	assert_false(auth_name_valid("a\tb", 3));
	assert_false(auth_name_valid("a\nb", 3));
	assert_false(auth_name_valid("a\x7f", 2));
	assert_false(auth_name_valid("a\0b", 3));
}

static void
test_hash_password(void **state)
{
	(void)state;
	char h[AUTH_HASH_MAX], h2[AUTH_HASH_MAX];
	assert_int_equal(auth_hash_password("s3cret", 6, h, sizeof(h)), 0);
	assert_int_equal(strncmp(h, "$argon2id$v=19$m=16384,t=2,p=1$", 31), 0);
	assert_null(strchr(h, ':'));
	assert_int_equal(crypto_pwhash_str_verify(h, "s3cret", 6), 0);
	assert_int_not_equal(crypto_pwhash_str_verify(h, "s3creT", 6), 0);
	assert_int_equal(crypto_pwhash_str_needs_rehash(h, crypto_pwhash_OPSLIMIT_INTERACTIVE,
	    AUTH_HASH_MEMLIMIT), 0);
	/* A fresh salt every time. */
	assert_int_equal(auth_hash_password("s3cret", 6, h2, sizeof(h2)), 0);
	assert_string_not_equal(h, h2);
	/* Passwords may hold any bytes. */
	assert_int_equal(auth_hash_password("a\0b", 3, h2, sizeof(h2)), 0);
	assert_int_equal(crypto_pwhash_str_verify(h2, "a\0b", 3), 0);
	assert_int_not_equal(crypto_pwhash_str_verify(h2, "a", 1), 0);
	/* Too small for a hash. */
	assert_int_equal(auth_hash_password("s3cret", 6, h2, AUTH_HASH_MAX - 1), -1);

	/* And what it makes loads and checks. */
	char line[AUTH_HASH_MAX + 32];
	snprintf(line, sizeof(line), "zoe:%s\n", h);
	struct tmpfile t;
	write_tmp_bytes(&t, line, strlen(line));
	struct auth *a = NULL;
	char err[512] = "";
	int rc = auth_load(&a, t.path, err, sizeof(err));
	unlink(t.path);
	assert_int_equal(rc, 0);
	assert_non_null(check(a, "zoe", "s3cret"));
	assert_null(check(a, "zoe", "s3cre"));
	auth_free(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_valid),
		cmocka_unit_test(test_load_empty),
		cmocka_unit_test(test_load_example),
		cmocka_unit_test(test_load_malformed),
		cmocka_unit_test(test_load_duplicate),
		cmocka_unit_test(test_load_unreadable),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_check_cache),
		cmocka_unit_test(test_perm_prefix),
		cmocka_unit_test(test_perm_missing_and_empty),
		cmocka_unit_test(test_perm_temp_reply),
		cmocka_unit_test(test_perm_anonymous),
		cmocka_unit_test(test_name_valid),
		cmocka_unit_test(test_hash_password),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
