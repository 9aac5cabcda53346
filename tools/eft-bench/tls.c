/* tls.c - OpenSSL behind tls.h.
 *
 * Every SSL call starts with ERR_clear_error(): SSL_get_error() consults
 * the thread's error queue, and a stale entry left by another connection
 * would turn a harmless WANT_READ into a failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "buf.h"
#include "tls.h"

struct tls_client {
	SSL_CTX *ctx;
	const char *sni;    /* the caller's string; NULL: send none */
};

struct tls {
	SSL *ssl;
	bool up;            /* the handshake finished */
	bool dead;          /* a fatal error: OpenSSL allows no further call, not even SSL_shutdown */
	char err[256];
};

static bool
is_ip_literal(const char *s)
{
	unsigned char a[16];
	return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

/* The reason of the oldest error queued, or fallback; empties the queue. */
static unsigned long
ssl_reason(char *out, size_t len, const char *fallback)
{
	unsigned long e = ERR_get_error();
	const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
	if (r != NULL)
		snprintf(out, len, "%s", r);
	else if (e != 0)
		ERR_error_string_n(e, out, len);
	else
		snprintf(out, len, "%s", fallback);
	ERR_clear_error();
	return e;
}

struct tls_client *
tls_client_new(const char *ca, bool insecure, const char *name, char *err, size_t errlen)
{
	struct tls_client *tc = xcalloc(1, sizeof(*tc));
	bool ip = name != NULL && is_ip_literal(name);
	char why[200];

	ERR_clear_error();
	tc->ctx = SSL_CTX_new(TLS_client_method());
	if (tc->ctx == NULL || SSL_CTX_set_min_proto_version(tc->ctx, TLS1_2_VERSION) != 1) {
		ssl_reason(why, sizeof(why), "unknown error");
		snprintf(err, errlen, "cannot set up TLS: %s", why);
		goto fail;
	}
	/* Output is written from a buffer that grows and moves: a write that
	 * had to wait is retried from a new address, often with more bytes.
	 * One record per write keeps reading and writing interleaved. */
	SSL_CTX_set_mode(tc->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
	    SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* Take up to four records per read(), not a header and then a body:
	 * receiving 100 MB through socat took 4,000 read() calls, against
	 * 9,400 with room for one record and 28,000 without read-ahead. */
	SSL_CTX_set_read_ahead(tc->ctx, 1);
	SSL_CTX_set_default_read_buffer_len(tc->ctx, 4 * (TLS_RECORD_MAX + 512));
	if (insecure) {
		SSL_CTX_set_verify(tc->ctx, SSL_VERIFY_NONE, NULL);
	} else {
		SSL_CTX_set_verify(tc->ctx, SSL_VERIFY_PEER, NULL);
		if (ca != NULL) {
			/* OpenSSL would only say "system lib": ask the file itself. */
			FILE *f = fopen(ca, "r");
			if (f == NULL) {
				snprintf(err, errlen, "--ca %s: %s", ca, strerror(errno));
				goto fail;
			}
			fclose(f);
			if (SSL_CTX_load_verify_locations(tc->ctx, ca, NULL) != 1) {
				ssl_reason(why, sizeof(why), "no certificate found");
				snprintf(err, errlen, "--ca %s: cannot load CA certificates: %s", ca, why);
				goto fail;
			}
		} else if (SSL_CTX_set_default_verify_paths(tc->ctx) != 1) {
			ssl_reason(why, sizeof(why), "unknown error");
			snprintf(err, errlen, "cannot load the system's CA certificates: %s", why);
			goto fail;
		}
		X509_VERIFY_PARAM *vp = SSL_CTX_get0_param(tc->ctx);
		int ok = 1;
		if (ip) {
			ok = X509_VERIFY_PARAM_set1_ip_asc(vp, name);
		} else if (name != NULL) {
			X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
			ok = X509_VERIFY_PARAM_set1_host(vp, name, 0);
		}
		if (ok != 1) {
			ssl_reason(why, sizeof(why), "not a usable name");
			snprintf(err, errlen, "cannot verify certificates for '%s': %s", name, why);
			goto fail;
		}
	}
	/* SNI carries host names only (RFC 6066, section 3). */
	tc->sni = ip ? NULL : name;
	return tc;

fail:
	tls_client_free(tc);
	return NULL;
}

void
tls_client_free(struct tls_client *tc)
{
	if (tc == NULL)
		return;
	SSL_CTX_free(tc->ctx);
	free(tc);
}

struct tls *
tls_new(struct tls_client *tc, int fd, char *err, size_t errlen)
{
	struct tls *t = xcalloc(1, sizeof(*t));

	ERR_clear_error();
	t->ssl = SSL_new(tc->ctx);
	if (t->ssl == NULL || SSL_set_fd(t->ssl, fd) != 1 ||
	    (tc->sni != NULL && SSL_set_tlsext_host_name(t->ssl, tc->sni) != 1)) {
		ssl_reason(err, errlen, "unknown error");
		goto fail;
	}
	SSL_set_connect_state(t->ssl);
	return t;

fail:
	SSL_free(t->ssl);
	free(t);
	return NULL;
}

void
tls_free(struct tls *t)
{
	if (t == NULL)
		return;
	/* close_notify says the stream ended here and was not cut; whether
	 * it leaves now or never is not worth waiting for. */
	if (t->up && !t->dead) {
		ERR_clear_error();
		(void)SSL_shutdown(t->ssl);
		ERR_clear_error();
	}
	SSL_free(t->ssl);
	free(t);
}

/* Why a handshake failed, with the detail OpenSSL keeps elsewhere. */
static void
explain(struct tls *t, unsigned long e)
{
	size_t n = strlen(t->err);
	if (ERR_GET_LIB(e) != ERR_LIB_SSL)
		return;
	switch (ERR_GET_REASON(e)) {
	case SSL_R_CERTIFICATE_VERIFY_FAILED: {
		long v = SSL_get_verify_result(t->ssl);
		if (v != X509_V_OK)
			snprintf(t->err + n, sizeof(t->err) - n, " (%s)",
			    X509_verify_cert_error_string(v));
		break;
	}
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_UNKNOWN_PROTOCOL:
	case SSL_R_PACKET_LENGTH_TOO_LONG:
		snprintf(t->err + n, sizeof(t->err) - n,
		    " (the answer is not TLS: is the port a plain one?)");
		break;
	}
}

/* What the failed SSL call's return value ret means; saved_errno is errno
 * right after that call. */
static enum tls_status
status_of(struct tls *t, int ret, int saved_errno)
{
	int code = SSL_get_error(t->ssl, ret);
	unsigned long e;

	switch (code) {
	case SSL_ERROR_WANT_READ:
		return TLS_WANT_READ;
	case SSL_ERROR_WANT_WRITE:
		return TLS_WANT_WRITE;
	case SSL_ERROR_ZERO_RETURN:
		snprintf(t->err, sizeof(t->err), "the other end closed the connection");
		return TLS_EOF;
	case SSL_ERROR_SYSCALL:
		t->dead = true;
		if (ERR_peek_error() == 0 && saved_errno == 0) {
			/* OpenSSL 1.1: end of stream without close_notify. */
			snprintf(t->err, sizeof(t->err), "the other end closed the connection");
			return TLS_EOF;
		}
		if (saved_errno != 0) {
			snprintf(t->err, sizeof(t->err), "%s", strerror(saved_errno));
			ERR_clear_error();
		} else {
			ssl_reason(t->err, sizeof(t->err), "system error");
		}
		return TLS_ERROR;
	case SSL_ERROR_SSL:
		t->dead = true;
		e = ssl_reason(t->err, sizeof(t->err), "protocol error");
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
		/* OpenSSL 3: end of stream without close_notify.  STOMP's own
		 * framing shows a cut frame, so this is an ordinary close. */
		if (ERR_GET_LIB(e) == ERR_LIB_SSL &&
		    ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
			snprintf(t->err, sizeof(t->err), "the other end closed the connection");
			return TLS_EOF;
		}
#endif
		explain(t, e);
		return TLS_ERROR;
	default:
		t->dead = true;
		ERR_clear_error();
		snprintf(t->err, sizeof(t->err), "unexpected OpenSSL state %d", code);
		return TLS_ERROR;
	}
}

enum tls_status
tls_handshake(struct tls *t)
{
	ERR_clear_error();
	errno = 0;
	int ret = SSL_connect(t->ssl);
	if (ret == 1) {
		t->up = true;
		return TLS_OK;
	}
	enum tls_status st = status_of(t, ret, errno);
	if (st == TLS_EOF) {
		t->dead = true;
		snprintf(t->err, sizeof(t->err), "the other end closed the connection during the "
		    "handshake");
		return TLS_ERROR;
	}
	return st;
}

enum tls_status
tls_read(struct tls *t, char *p, size_t len, size_t *n)
{
	ERR_clear_error();
	errno = 0;
	int ret = SSL_read_ex(t->ssl, p, len, n);
	return ret == 1 ? TLS_OK : status_of(t, ret, errno);
}

enum tls_status
tls_write(struct tls *t, const char *p, size_t len, size_t *n)
{
	if (len > TLS_RECORD_MAX)
		len = TLS_RECORD_MAX;
	ERR_clear_error();
	errno = 0;
	int ret = SSL_write_ex(t->ssl, p, len, n);
	return ret == 1 ? TLS_OK : status_of(t, ret, errno);
}

bool
tls_pending(const struct tls *t)
{
	return SSL_has_pending(t->ssl) == 1;
}

const char *
tls_error(const struct tls *t)
{
	return t->err;
}
