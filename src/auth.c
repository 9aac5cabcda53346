/* auth.c - the users file, password checks and destination permissions.
 *
 * Passwords are Argon2id hashes checked with libsodium's crypto_pwhash_str_verify.
 * That is slow on purpose, and eftd has one thread, so a successful check is
 * remembered per user as a BLAKE2b of the passcode keyed with a random key
 * made when the file is loaded (see auth.h).  The file format is described in
 * auth.h and etc/users.example. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>
#include <uthash.h>

#include "eft/auth.h"
#include "eft/log.h"
#include "eft/address.h"

_Static_assert(AUTH_HASH_MAX == crypto_pwhash_STRBYTES, "AUTH_HASH_MAX must match libsodium");

#define AUTH_HASH_PREFIX "$argon2id$"

struct auth_prefix {
	char *s;
	size_t len;
};

struct auth_perm {
	bool all;               /* no read=/write= field: everything */
	size_t n;
	struct auth_prefix *p;
};

struct auth_user {
	UT_hash_handle hh;      /* in auth->users, keyed by name */
	char *name;
	size_t name_len;
	int lineno;             /* where the users file defines it */
	char hash[AUTH_HASH_MAX];
	struct auth_perm read, write;
	bool admin;             /* the :admin mark: may use the admin HTTP listener */
	bool cached;            /* cache holds the last passcode verified */
	unsigned char cache[crypto_generichash_BYTES];
};

struct auth {
	struct auth_user *users;
	unsigned char key[crypto_generichash_KEYBYTES]; /* keys the passcode cache */
};

static void
auth_perm_free(struct auth_perm *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->p[i].s);
	free(p->p);
}

static void
auth_user_free(struct auth_user *u)
{
	if (u == NULL)
		return;
	auth_perm_free(&u->read);
	auth_perm_free(&u->write);
	free(u->name);
	sodium_memzero(u->cache, sizeof(u->cache));
	free(u);
}

void
auth_free(struct auth *a)
{
	if (a == NULL)
		return;
	struct auth_user *u, *tmp;
	HASH_ITER(hh, a->users, u, tmp) {
		HASH_DEL(a->users, u);
		auth_user_free(u);
	}
	sodium_memzero(a->key, sizeof(a->key));
	free(a);
}

size_t
auth_count(const struct auth *a)
{
	return HASH_COUNT(a->users);
}

const struct auth_user *
auth_find(const struct auth *a, const char *name, size_t len)
{
	struct auth_user *u = NULL;
	if (name != NULL)
		HASH_FIND(hh, a->users, name, len, u);
	return u;
}

bool
auth_user_is_admin(const struct auth_user *u)
{
	return u != NULL && u->admin;
}

const char *
auth_user_name(const struct auth_user *u)
{
	return u->name;
}

/* Whitespace or a control character: not allowed in names and prefixes. */
static bool
auth_is_blank(unsigned char ch)
{
	return isspace(ch) || iscntrl(ch);
}

bool
auth_name_valid(const char *name, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (name[i] == ':' || auth_is_blank((unsigned char)name[i]))
			return false;
	return true;
}

/* ---- loading ---- */

/* "/queue/,/topic/news." into p; -1 with a reason. */
static int
auth_parse_perm(struct auth_perm *p, const char *field, char *list, char *reason,
    size_t reasonlen)
{
	p->all = false;
	if (*list == '\0')
		return 0; /* "write=": nothing */
	size_t n = 1;
	for (const char *s = list; *s; s++)
		n += *s == ',';
	p->p = calloc(n, sizeof(*p->p));
	if (p->p == NULL)
		goto oom;
	char *item;
	while ((item = strsep(&list, ",")) != NULL) {
		size_t len = strlen(item);
		if (len == 0) {
			snprintf(reason, reasonlen, "empty prefix in %s= list", field);
			goto fail;
		}
		if (item[0] != '/') {
			snprintf(reason, reasonlen, "%s= prefix '%.100s' does not start with '/'",
			    field, item);
			goto fail;
		}
		for (size_t i = 0; i < len; i++) {
			if (auth_is_blank((unsigned char)item[i])) {
				snprintf(reason, reasonlen, "%s= prefix '%.100s' contains a blank or "
				    "control character", field, item);
				goto fail;
			}
		}
		p->p[p->n].s = strdup(item);
		if (p->p[p->n].s == NULL)
			goto oom;
		p->p[p->n].len = len;
		p->n++;
	}
	return 0;
oom:
	snprintf(reason, reasonlen, "out of memory");
fail:
	return -1; /* the caller frees what is in p */
}

/* Warn about a hash costlier to verify than eft-passwd's: each CONNECT with a
 * wrong password would hold up the whole broker for longer. */
static void
auth_warn_cost(const char *path, const struct auth_user *u)
{
	unsigned m, t, par;
	if (sscanf(u->hash, AUTH_HASH_PREFIX "v=%*u$m=%u,t=%u,p=%u$", &m, &t, &par) != 3)
		return;
	if ((unsigned long long)m * 1024 > AUTH_HASH_MEMLIMIT ||
	    t > crypto_pwhash_OPSLIMIT_INTERACTIVE)
		log_warn("%s:%d: the hash of '%s' (m=%u KiB, t=%u) is slower to verify than "
		    "eft-passwd's (m=%u KiB, t=%u); every CONNECT that checks it blocks eftd",
		    path, u->lineno, u->name, m, t, AUTH_HASH_MEMLIMIT / 1024,
		    (unsigned)crypto_pwhash_OPSLIMIT_INTERACTIVE);
}

/* One line of the users file (its NUL-free text, blanks stripped); -1 with a
 * reason. */
static int
auth_parse_user(struct auth *a, char *s, const char *path, int lineno, char *reason,
    size_t reasonlen)
{
	struct auth_user *u = NULL;
	char *name = strsep(&s, ":");
	char *hash = strsep(&s, ":");
	if (hash == NULL) {
		snprintf(reason, reasonlen, "expected NAME:HASH[:read=PREFIX,...][:write=PREFIX,...][:admin]");
		goto fail;
	}
	size_t name_len = strlen(name);
	if (name_len == 0) {
		snprintf(reason, reasonlen, "empty user name");
		goto fail;
	}
	if (!auth_name_valid(name, name_len)) {
		snprintf(reason, reasonlen, "user name '%.100s' contains a blank or control character",
		    name);
		goto fail;
	}
	struct auth_user *dup;
	HASH_FIND(hh, a->users, name, name_len, dup);
	if (dup != NULL) {
		snprintf(reason, reasonlen, "duplicate user '%.100s' (first on line %d)", name,
		    dup->lineno);
		goto fail;
	}
	/* needs_rehash decodes the whole string: -1 means it is not a hash at all. */
	if (strncmp(hash, AUTH_HASH_PREFIX, strlen(AUTH_HASH_PREFIX)) != 0 ||
	    strlen(hash) >= AUTH_HASH_MAX ||
	    crypto_pwhash_str_needs_rehash(hash, crypto_pwhash_OPSLIMIT_INTERACTIVE,
	    AUTH_HASH_MEMLIMIT) < 0) {
		snprintf(reason, reasonlen, "the password of '%.100s' is not a libsodium "
		    "crypto_pwhash_str (argon2id) hash; make the line with eft-passwd", name);
		goto fail;
	}

	u = calloc(1, sizeof(*u));
	if (u == NULL || (u->name = strdup(name)) == NULL) {
		snprintf(reason, reasonlen, "out of memory");
		goto fail;
	}
	u->name_len = name_len;
	u->lineno = lineno;
	snprintf(u->hash, sizeof(u->hash), "%s", hash);
	u->read.all = u->write.all = true;

	char *field;
	while ((field = strsep(&s, ":")) != NULL) {
		struct auth_perm *p;
		const char *which;
		if (strcmp(field, "admin") == 0) {
			if (u->admin) {
				snprintf(reason, reasonlen, "admin given twice");
				goto fail;
			}
			u->admin = true;
			continue;
		}
		if (strncmp(field, "read=", 5) == 0)
			p = &u->read, which = "read";
		else if (strncmp(field, "write=", 6) == 0)
			p = &u->write, which = "write";
		else {
			snprintf(reason, reasonlen, "unknown field '%.100s' (expected read=, write= or admin)",
			    field);
			goto fail;
		}
		if (!p->all) {
			snprintf(reason, reasonlen, "%s= given twice", which);
			goto fail;
		}
		if (auth_parse_perm(p, which, strchr(field, '=') + 1, reason, reasonlen) != 0)
			goto fail;
	}
	auth_warn_cost(path, u);
	HASH_ADD_KEYPTR(hh, a->users, u->name, u->name_len, u);
	return 0;
fail:
	auth_user_free(u);
	return -1;
}

/* One line as getline read it; -1 with a reason. */
static int
auth_parse_line(struct auth *a, char *line, size_t len, const char *path, int lineno,
    char *reason, size_t reasonlen)
{
	if (memchr(line, '\0', len) != NULL) {
		snprintf(reason, reasonlen, "NUL byte in line");
		return -1;
	}
	while (len > 0 && isspace((unsigned char)line[len - 1]))
		line[--len] = '\0';
	while (isspace((unsigned char)*line))
		line++;
	if (*line == '\0' || *line == '#')
		return 0;
	return auth_parse_user(a, line, path, lineno, reason, reasonlen);
}

int
auth_load(struct auth **out, const char *path, char *err, size_t errlen)
{
	struct auth *a = NULL;
	FILE *f = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0;
	char reason[256];

	*out = NULL;
	if (sodium_init() < 0) {
		snprintf(err, errlen, "%s: libsodium failed to initialise", path);
		goto fail;
	}
	a = calloc(1, sizeof(*a));
	if (a == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	crypto_generichash_keygen(a->key);
	f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "%s: cannot read users file: %s", path, strerror(errno));
		goto fail;
	}
	/* Like ssh with a key file: hashes others can read can be guessed offline. */
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0)
		log_warn("%s: the users file is open to group or others (mode %04o): "
		    "chmod 600 it, owned by the user eftd runs as", path,
		    (unsigned)(st.st_mode & 07777));
	while ((n = getline(&line, &cap, f)) != -1) {
		lineno++;
		if (auth_parse_line(a, line, (size_t)n, path, lineno, reason, sizeof(reason)) != 0) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, reason);
			goto fail;
		}
	}
	/* getline also stops on a read error or out of memory. */
	if (!feof(f)) {
		snprintf(err, errlen, "%s: cannot read users file: %s", path, strerror(errno));
		goto fail;
	}
	free(line);
	fclose(f);
	*out = a;
	return 0;
fail:
	free(line);
	if (f != NULL)
		fclose(f);
	auth_free(a);
	return -1;
}

/* ---- comparing ---- */

static bool
auth_perm_equal(const struct auth_perm *a, const struct auth_perm *b)
{
	if (a->all != b->all || a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (a->p[i].len != b->p[i].len || memcmp(a->p[i].s, b->p[i].s, a->p[i].len) != 0)
			return false;
	return true;
}

/* Append "; added a, b, c" (what = "added ") to out: the users of `from`
 * that `other` lacks, or, if changed, that `other` has in another form; at
 * most SHOWN names, then "and N more". */
static void
auth_list(char *out, size_t outlen, const char *what, const struct auth *from,
    const struct auth *other, bool changed)
{
	enum { SHOWN = 8 };
	size_t n = 0, used = strlen(out);
	const struct auth_user *u, *tmp, *o;
	HASH_ITER(hh, from->users, u, tmp) {
		o = auth_find(other, u->name, u->name_len);
		bool listed = changed ? o != NULL && (strcmp(o->hash, u->hash) != 0 ||
		    !auth_perm_equal(&o->read, &u->read) || !auth_perm_equal(&o->write, &u->write) ||
		    o->admin != u->admin)
		    : o == NULL;
		if (!listed)
			continue;
		if (n < SHOWN && used < outlen)
			used += (size_t)snprintf(out + used, outlen - used, "%s%s%s",
			    n == 0 ? (used ? "; " : "") : ", ", n == 0 ? what : "", u->name);
		n++;
	}
	if (n > SHOWN && used < outlen)
		snprintf(out + used, outlen - used, " and %zu more", n - SHOWN);
}

void
auth_diff(const struct auth *old, const struct auth *new, char *out, size_t outlen)
{
	out[0] = '\0';
	auth_list(out, outlen, "added ", new, old, false);
	auth_list(out, outlen, "removed ", old, new, false);
	auth_list(out, outlen, "changed ", new, old, true);
	if (out[0] == '\0')
		snprintf(out, outlen, "no user added, removed or changed");
}

/* ---- checking ---- */

const struct auth_user *
auth_check(struct auth *a, const char *login, size_t login_len, const char *passcode,
    size_t passcode_len)
{
	const struct auth_user *found = NULL;
	struct auth_user *u = NULL;
	unsigned char digest[crypto_generichash_BYTES];

	if (passcode == NULL)
		passcode = "", passcode_len = 0;
	if (login != NULL)
		HASH_FIND(hh, a->users, login, login_len, u);
	if (u == NULL) {
		/* Cost an unknown name what a wrong password costs, so timing does
		 * not tell which names exist: verify against some user's hash and
		 * ignore the answer. */
		int ignored = a->users != NULL ?
		    crypto_pwhash_str_verify(a->users->hash, passcode, passcode_len) : -1;
		(void)ignored;
		goto done;
	}
	if (crypto_generichash(digest, sizeof(digest), (const unsigned char *)passcode,
	    passcode_len, a->key, sizeof(a->key)) != 0)
		goto done;
	if (u->cached && sodium_memcmp(digest, u->cache, sizeof(digest)) == 0) {
		found = u;
		goto done;
	}
	if (crypto_pwhash_str_verify(u->hash, passcode, passcode_len) != 0)
		goto done; /* a wrong passcode never replaces a right one in the cache */
	memcpy(u->cache, digest, sizeof(digest));
	u->cached = true;
	found = u;
done:
	sodium_memzero(digest, sizeof(digest));
	return found;
}

int
auth_hash_password(const char *password, size_t len, char *out, size_t outlen)
{
	if (outlen < crypto_pwhash_STRBYTES || sodium_init() < 0)
		return -1;
	if (crypto_pwhash_str(out, password, len, crypto_pwhash_OPSLIMIT_INTERACTIVE,
	    AUTH_HASH_MEMLIMIT) != 0)
		return -1;
	/* The users file splits on ':'; Argon2's encoding (base64, '$', ',', '=')
	 * never has one, but a line we cannot read back would be worse than an error. */
	if (strchr(out, ':') != NULL)
		return -1;
	return 0;
}

/* ---- permissions ---- */

static bool
auth_perm_allows(const struct auth_perm *p, const char *dest, size_t len)
{
	/* Private reply queues must work for everyone, or RPC breaks. */
	if (p->all || address_has_prefix(dest, len, TEMP_PREFIX, TEMP_PREFIX_LEN) ||
	    address_has_prefix(dest, len, REPLY_PREFIX, REPLY_PREFIX_LEN))
		return true;
	for (size_t i = 0; i < p->n; i++)
		if (address_has_prefix(dest, len, p->p[i].s, p->p[i].len))
			return true;
	return false;
}

bool
auth_may_read(const struct auth_user *u, const char *dest, size_t len)
{
	return u == NULL || auth_perm_allows(&u->read, dest, len);
}

bool
auth_may_write(const struct auth_user *u, const char *dest, size_t len)
{
	return u == NULL || auth_perm_allows(&u->write, dest, len);
}
