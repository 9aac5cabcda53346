/* auth.h - who may connect to eftd, and where they may SEND and SUBSCRIBE.
 *
 * Users come from a users file (etc/users.example), one per line:
 *
 *     NAME:HASH[:read=PREFIX,PREFIX...][:write=PREFIX,...][:admin]
 *
 * - A line whose first non-blank character is '#' is a comment; blank lines
 *   are ignored; blanks around a line are ignored.  There are no trailing
 *   comments, and no blanks inside a line.
 * - NAME: the STOMP `login`; not empty, no ':', whitespace or control
 *   characters; each name once per file.
 * - HASH: libsodium crypto_pwhash_str output ("$argon2id$v=19$m=...").  It
 *   never contains ':'.  Make one with `eft-passwd NAME`.
 * - read=: destination prefixes the user may SUBSCRIBE to; write=: those it
 *   may SEND to.  A prefix starts with '/' and is matched byte for byte
 *   (end it with '/' or '.' to mean "everything below": `/queue/` or
 *   `/topic/news.`).  No read= (or write=) field: everything is allowed that
 *   way.  An empty list (`write=`): nothing is.
 * - admin: the user may use the admin HTTP listener (metrics, the API,
 *   eftctl, the dashboard); it changes nothing over STOMP.
 * - /temp-queue/ and /reply-queue/ destinations are always allowed, both
 *   ways: a client may always make and use its own private reply queues, and
 *   anyone may answer a request (RPC replies must work).
 *
 * Checking a password is deliberately slow (Argon2id, ~tens of ms) and eftd
 * has one thread, so auth_check remembers the last passcode verified for each
 * user (a keyed BLAKE2b of it, never the passcode): a client reconnecting with
 * the same password costs microseconds.  A failed check always costs a full
 * verification, for a known or unknown user alike, so timing does not tell
 * which names exist; the caller adds the delay before its ERROR.  eft-passwd
 * hashes with modest parameters (opslimit 2, 16 MiB); auth_load warns about
 * hashes that are more expensive than that. */
#ifndef EFT_AUTH_H
#define EFT_AUTH_H

#include <stdbool.h>
#include <stddef.h>

struct auth;
struct auth_user;

/* Room for a hash and its NUL (libsodium's crypto_pwhash_STRBYTES). */
#define AUTH_HASH_MAX 128
/* The Argon2id memory cost of the hashes auth_hash_password makes. */
#define AUTH_HASH_MEMLIMIT (16u << 20)

/* Read a users file (and warn in the log if group or others may read it).
 * 0 and *out set, or -1 with "path:line: reason" (or
 * "path: reason") in err and *out NULL. */
int auth_load(struct auth **out, const char *path, char *err, size_t errlen);
void auth_free(struct auth *a);
/* Users in the file. */
size_t auth_count(const struct auth *a);
/* What changed from old to new, for a log line: "added carol; removed bob;
 * changed alice" (a user changes with its hash or its permissions). */
void auth_diff(const struct auth *old, const struct auth *new, char *out, size_t outlen);
/* The user called name, or NULL; checks no password. */
const struct auth_user *auth_find(const struct auth *a, const char *name, size_t len);

/* The user if login names one and passcode is its password, else NULL.
 * login or passcode may be NULL (a header the CONNECT did not have). */
const struct auth_user *auth_check(struct auth *a, const char *login, size_t login_len,
    const char *passcode, size_t passcode_len);

/* May u SUBSCRIBE to (read) or SEND to (write) dest?  A NULL u is a
 * connection eftd let in without credentials (no users file, or anonymous
 * access allowed): it may do everything. */
bool auth_may_read(const struct auth_user *u, const char *dest, size_t len);
bool auth_may_write(const struct auth_user *u, const char *dest, size_t len);

const char *auth_user_name(const struct auth_user *u);
/* Does u carry the admin mark?  (False for NULL.) */
bool auth_user_is_admin(const struct auth_user *u);
/* Could name be a NAME in the users file? */
bool auth_name_valid(const char *name, size_t len);

/* Hash a password for the users file (Argon2id, opslimit
 * crypto_pwhash_OPSLIMIT_INTERACTIVE, AUTH_HASH_MEMLIMIT) into out, which
 * needs AUTH_HASH_MAX bytes.  -1 if out is too small or out of memory. */
int auth_hash_password(const char *password, size_t len, char *out, size_t outlen);

#endif
