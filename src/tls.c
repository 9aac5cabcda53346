/* tls.c - TLS for tls:// listeners, with OpenSSL on the socket (see tls.h).
 *
 * OpenSSL is non-blocking here: SSL_accept, SSL_read and SSL_write return
 * WANT_READ or WANT_WRITE when the socket would block, and a read may need
 * the socket writable (and a write readable), so the transport keeps track of
 * what each direction waits for and arms the socket's events to match.
 * Bytes OpenSSL has decrypted but not handed out are invisible to epoll: a
 * read that leaves some behind makes the read event active again by hand. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "eft/config.h"
#include "eft/tls.h"
#include "eft/transport.h"

#define TLS_RECORD 16384 /* the most one record carries: one SSL_write each */

struct tls_server {
	SSL_CTX *ctx;
	unsigned char staging[TLS_RECORD]; /* output gathered into one record (one thread) */
};

struct tls {
	struct transport t;        /* first: a struct tls is a struct transport */
	struct tls_server *server;
	SSL *ssl;
	int fd;
	struct event *rd, *wr;
	bool handshaking;
	bool handshake_wants_write;
	bool read_wants_write;     /* the last SSL_read needs the socket writable */
	bool write_wants_read;     /* the last SSL_write needs the socket readable */
	bool failed;
	bool shut;
};

/* OpenSSL's reason for the last failure, or the system's. */
static void
tls_fail(struct tls *x, const char *what)
{
	unsigned long e = ERR_peek_last_error();
	const char *reason = e ? ERR_reason_error_string(e) : NULL;
	if (reason == NULL)
		reason = errno ? strerror(errno) : "the peer closed the connection";
	transport_fail(&x->t, "%s: %s", what, reason);
	ERR_clear_error();
	x->failed = true;
}

/* Arm the socket's events for what the handshake, reads and writes wait for. */
static void
tls_update_events(struct tls *x)
{
	bool r, w;
	if (x->handshaking) {
		r = !x->handshake_wants_write;
		w = x->handshake_wants_write;
	} else {
		r = (x->t.want_read && !x->read_wants_write) || (x->t.want_write && x->write_wants_read);
		w = (x->t.want_write && !x->write_wants_read) || (x->t.want_read && x->read_wants_write);
	}
	if (r)
		event_add(x->rd, NULL);
	else
		event_del(x->rd);
	if (w)
		event_add(x->wr, NULL);
	else
		event_del(x->wr);
}

static void
tls_handshake(struct tls *x)
{
	ERR_clear_error();
	errno = 0;
	int r = SSL_accept(x->ssl);
	if (r == 1) {
		x->handshaking = false;
		x->t.established = true;
		tls_update_events(x);
		/* Application data may have come with the handshake, and output
		 * may be waiting (a refusal): look at both on the next turn. */
		if (x->t.want_read)
			event_active(x->rd, EV_READ, 1);
		if (x->t.want_write)
			event_active(x->wr, EV_WRITE, 1);
		return;
	}
	int e = SSL_get_error(x->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		x->handshake_wants_write = e == SSL_ERROR_WANT_WRITE;
		tls_update_events(x);
		return;
	}
	tls_fail(x, "TLS handshake failed");
	/* The connection hears of it when it reads. */
	x->t.on_readable(x->t.arg);
}

static void
tls_read_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct tls *x = arg;
	if (x->handshaking)
		tls_handshake(x);
	else if (x->write_wants_read && x->t.want_write)
		x->t.on_writable(x->t.arg);
	else if (x->t.want_read)
		x->t.on_readable(x->t.arg);
}

static void
tls_write_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct tls *x = arg;
	if (x->handshaking)
		tls_handshake(x);
	else if (x->read_wants_write && x->t.want_read)
		x->t.on_readable(x->t.arg);
	else if (x->t.want_write)
		x->t.on_writable(x->t.arg);
}

static ssize_t
tls_read(struct transport *t, void *buf, size_t len)
{
	struct tls *x = (struct tls *)t;
	if (x->failed)
		return TRANSPORT_ERROR;
	if (x->handshaking)
		return TRANSPORT_AGAIN;
	ERR_clear_error();
	errno = 0;
	int n = SSL_read(x->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
	if (n > 0) {
		if (x->read_wants_write) {
			x->read_wants_write = false;
			tls_update_events(x);
		}
		if (SSL_has_pending(x->ssl))
			event_active(x->rd, EV_READ, 1);
		return n;
	}
	int e = SSL_get_error(x->ssl, n);
	switch (e) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		if (x->read_wants_write != (e == SSL_ERROR_WANT_WRITE)) {
			x->read_wants_write = e == SSL_ERROR_WANT_WRITE;
			tls_update_events(x);
		}
		return TRANSPORT_AGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0; /* close_notify */
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_error() == 0 && errno == 0)
			return 0; /* end of stream (see SSL_OP_IGNORE_UNEXPECTED_EOF) */
		/* fall through */
	default:
		tls_fail(x, "TLS read failed");
		return TRANSPORT_ERROR;
	}
}

static ssize_t
tls_write(struct transport *t, struct evbuffer *out)
{
	struct tls *x = (struct tls *)t;
	ssize_t total = 0;
	if (x->failed)
		return TRANSPORT_ERROR;
	if (x->handshaking)
		return 0; /* written once the handshake is done */
	size_t len;
	while ((len = evbuffer_get_length(out)) > 0) {
		size_t n = len < TLS_RECORD ? len : TLS_RECORD;
		/* One record from the first chunk if it is long enough (a large
		 * body), else gathered from several small frames. */
		struct evbuffer_iovec v;
		const void *p = x->server->staging;
		if (evbuffer_peek(out, (ev_ssize_t)n, NULL, &v, 1) == 1 && v.iov_len >= n)
			p = v.iov_base;
		else if (evbuffer_copyout(out, x->server->staging, n) != (ev_ssize_t)n)
			goto fail;
		ERR_clear_error();
		errno = 0;
		int w = SSL_write(x->ssl, p, (int)n);
		if (w > 0) {
			evbuffer_drain(out, (size_t)w);
			total += w;
			if (x->write_wants_read) {
				x->write_wants_read = false;
				tls_update_events(x);
			}
			continue;
		}
		int e = SSL_get_error(x->ssl, w);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			if (x->write_wants_read != (e == SSL_ERROR_WANT_READ)) {
				x->write_wants_read = e == SSL_ERROR_WANT_READ;
				tls_update_events(x);
			}
			break;
		}
		goto fail;
	}
	return total;
fail:
	tls_fail(x, "TLS write failed");
	return TRANSPORT_ERROR;
}

static void
tls_want(struct transport *t, bool read, bool write)
{
	(void)write;
	struct tls *x = (struct tls *)t;
	tls_update_events(x);
	/* Reading again (after a pause) with bytes already decrypted. */
	if (read && !x->handshaking && !x->failed && SSL_has_pending(x->ssl))
		event_active(x->rd, EV_READ, 1);
}

/* close_notify, once; best effort (a full socket or a gone peer is fine). */
static void
tls_close_notify(struct tls *x)
{
	if (x->shut || !x->t.established || x->failed)
		return;
	x->shut = true;
	ERR_clear_error();
	(void)SSL_shutdown(x->ssl);
	ERR_clear_error();
}

static void
tls_shutdown(struct transport *t)
{
	struct tls *x = (struct tls *)t;
	tls_close_notify(x);
	(void)shutdown(x->fd, SHUT_WR);
}

static void
tls_free(struct transport *t)
{
	struct tls *x = (struct tls *)t;
	tls_close_notify(x);
	if (x->rd)
		event_free(x->rd);
	if (x->wr)
		event_free(x->wr);
	SSL_free(x->ssl);
	evutil_closesocket(x->fd);
	free(x);
}

static const struct transport_ops tls_ops = {
	.kind = "tls",
	.read = tls_read,
	.write = tls_write,
	.want = tls_want,
	.shutdown = tls_shutdown,
	.free = tls_free,
};

struct transport *
transport_tls_new(struct event_base *base, struct tls_server *s, int fd)
{
	struct tls *x = calloc(1, sizeof(*x));
	if (x == NULL)
		return NULL;
	x->t.ops = &tls_ops;
	x->server = s;
	x->fd = fd;
	x->handshaking = true;
	evutil_make_socket_nonblocking(fd);
	x->ssl = SSL_new(s->ctx);
	x->rd = event_new(base, fd, EV_READ | EV_PERSIST, tls_read_cb, x);
	x->wr = event_new(base, fd, EV_WRITE | EV_PERSIST, tls_write_cb, x);
	if (x->ssl == NULL || x->rd == NULL || x->wr == NULL || SSL_set_fd(x->ssl, fd) != 1) {
		if (x->rd)
			event_free(x->rd);
		if (x->wr)
			event_free(x->wr);
		SSL_free(x->ssl);
		free(x);
		ERR_clear_error();
		return NULL;
	}
	event_add(x->rd, NULL); /* the client speaks first */
	return &x->t;
}

/* ---- the server context ---- */

static int
tls_ctx_error(char *err, size_t errlen, const char *what, const char *file)
{
	unsigned long e = ERR_peek_last_error();
	const char *reason = e ? ERR_reason_error_string(e) : NULL;
	snprintf(err, errlen, "%s%s%s: %s", what, file ? " " : "", file ? file : "",
	    reason ? reason : (errno ? strerror(errno) : "failed"));
	ERR_clear_error();
	return -1;
}

static int
tls_ctx_setup(SSL_CTX *ctx, const struct config *cfg, char *err, size_t errlen)
{
	int min = strcmp(cfg->tls_min_version, "1.3") == 0 ? TLS1_3_VERSION : TLS1_2_VERSION;
	if (SSL_CTX_set_min_proto_version(ctx, min) != 1)
		return tls_ctx_error(err, errlen, "tls-min-version", NULL);
	if (SSL_CTX_set_cipher_list(ctx, cfg->tls_ciphers) != 1)
		return tls_ctx_error(err, errlen, "tls-ciphers: no usable cipher in", cfg->tls_ciphers);
	/* A peer that closes without close_notify has ended its stream: STOMP
	 * frames say where they end, so no truncation goes unnoticed. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* Partial writes of a moving buffer: what tls_write does; idle
	 * connections give their 34 KB of OpenSSL buffers back. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
	    SSL_MODE_RELEASE_BUFFERS);
	errno = 0;
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert_file) != 1)
		return tls_ctx_error(err, errlen, "tls-cert-file: cannot use", cfg->tls_cert_file);
	errno = 0;
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key_file, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
			ERR_clear_error();
			snprintf(err, errlen, "tls-key-file: %s does not match tls-cert-file %s",
			    cfg->tls_key_file, cfg->tls_cert_file);
			return -1;
		}
		return tls_ctx_error(err, errlen, "tls-key-file: cannot use", cfg->tls_key_file);
	}
	if (SSL_CTX_check_private_key(ctx) != 1)
		return tls_ctx_error(err, errlen, "tls-key-file: does not match tls-cert-file",
		    cfg->tls_key_file);
	/* Resumed sessions must carry the same verification as new ones. */
	static const unsigned char sid[] = "eftd";
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	/* No TLS 1.3 session tickets: they arrive after the handshake, while a
	 * client may be writing its CONNECT from one thread and reading from
	 * another, and stomp.py's shared SSL object then fails about one
	 * connect in twenty (measured here).  RabbitMQ (Erlang) sends none by
	 * default either; TLS 1.2 clients still resume from the session cache. */
	SSL_CTX_set_num_tickets(ctx, 0);
	if (cfg->tls_ca_file[0] != '\0') {
		errno = 0;
		if (SSL_CTX_load_verify_locations(ctx, cfg->tls_ca_file, NULL) != 1)
			return tls_ctx_error(err, errlen, "tls-ca-file: cannot use", cfg->tls_ca_file);
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->tls_ca_file);
		if (names != NULL)
			SSL_CTX_set_client_CA_list(ctx, names);
	}
	if (cfg->tls_verify_client)
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	return 0;
}

struct tls_server *
tls_server_new(const struct config *cfg, char *err, size_t errlen)
{
	struct tls_server *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->ctx = SSL_CTX_new(TLS_server_method());
	if (s->ctx == NULL) {
		tls_ctx_error(err, errlen, "cannot make a TLS context", NULL);
		goto fail;
	}
	if (tls_ctx_setup(s->ctx, cfg, err, errlen) != 0)
		goto fail;
	return s;
fail:
	tls_server_free(s);
	return NULL;
}

void
tls_server_free(struct tls_server *s)
{
	if (s == NULL)
		return;
	SSL_CTX_free(s->ctx);
	free(s);
}
