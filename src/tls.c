/* tls.c - TLS for tls:// listeners, with OpenSSL on the socket (see tls.h).
 *
 * OpenSSL is non-blocking here.  It reads from the socket itself (read-ahead,
 * so a call takes whatever has arrived), and SSL_read returns WANT_READ when
 * the socket has nothing; bytes OpenSSL has decrypted but not handed out are
 * invisible to epoll, so a read that leaves some behind makes the read event
 * active again by hand.  It writes its records into an evbuffer of ours (a
 * BIO of our own), which is written to the socket with writev: a burst of
 * 16 KB records costs one system call, not one each, and a write never
 * blocks inside OpenSSL.  At most TLS_OUT_MAX of ciphertext waits there;
 * transport_pending tells the connection about it. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "eft/config.h"
#include "eft/tls.h"
#include "eft/transport.h"

#define TLS_RECORD 16384 /* the most one record carries: one SSL_write each */
#define TLS_READ_BUFFER (64 * 1024) /* what OpenSSL reads from the socket at once */
#define TLS_OUT_MAX (256 * 1024) /* ciphertext gathered before more is encrypted */
#define TLS13_SUITES "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384"

struct tls_server {
	SSL_CTX *ctx;
	BIO_METHOD *out_method;            /* the BIO OpenSSL writes records into */
	unsigned char staging[TLS_RECORD]; /* output gathered into one record (one thread) */
};

struct tls {
	struct transport t;        /* first: a struct tls is a struct transport */
	struct tls_server *server;
	SSL *ssl;
	int fd;
	struct event *rd, *wr;
	struct evbuffer *out;      /* ciphertext written by OpenSSL, not yet by the socket */
	bool handshaking;
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

/* ---- the BIO OpenSSL writes into ---- */

static int
tls_bio_write(BIO *b, const char *data, int len)
{
	struct tls *x = BIO_get_data(b);
	BIO_clear_retry_flags(b);
	return evbuffer_add(x->out, data, (size_t)len) == 0 ? len : -1;
}

static long
tls_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)num;
	(void)ptr;
	struct tls *x = BIO_get_data(b);
	if (cmd == BIO_CTRL_FLUSH)
		return 1; /* tls_flush writes it */
	if (cmd == BIO_CTRL_WPENDING)
		return (long)evbuffer_get_length(x->out);
	return 0;
}

static int
tls_bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static BIO_METHOD *
tls_bio_method(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "eft output");
	if (m == NULL || BIO_meth_set_write(m, tls_bio_write) != 1 ||
	    BIO_meth_set_ctrl(m, tls_bio_ctrl) != 1 || BIO_meth_set_create(m, tls_bio_create) != 1) {
		BIO_meth_free(m);
		return NULL;
	}
	return m;
}

/* ---- the socket ---- */

/* Write the gathered ciphertext as far as the socket takes it: 0, or -1 if
 * the connection is broken. */
static int
tls_flush(struct tls *x)
{
	while (evbuffer_get_length(x->out) > 0) {
		int n = evbuffer_write(x->out, x->fd);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			transport_fail(&x->t, "TLS write failed: %s", strerror(errno));
			x->failed = true;
			return -1;
		}
		if (n == 0)
			break;
	}
	return 0;
}

/* Arm the socket's events for what is waited for: reads (the handshake,
 * the connection, a write that needs one) and writes (ciphertext left
 * over, or the connection's output). */
static void
tls_update_events(struct tls *x)
{
	bool r = x->handshaking || x->t.want_read || (x->t.want_write && x->write_wants_read);
	bool w = evbuffer_get_length(x->out) > 0 ||
	    (!x->handshaking && x->t.want_write && !x->write_wants_read);
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
	int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(x->ssl, r);
	if (tls_flush(x) != 0 || (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ)) {
		if (!x->failed)
			tls_fail(x, "TLS handshake failed");
		x->failed = true;
		/* The connection hears of it when it reads. */
		x->t.on_readable(x->t.arg);
		return;
	}
	if (e == SSL_ERROR_NONE) {
		x->handshaking = false;
		x->t.established = true;
		/* Application data may have come with the handshake, and output
		 * may be waiting (a refusal): look at both on the next turn. */
		if (x->t.want_read)
			event_active(x->rd, EV_READ, 1);
		if (x->t.want_write)
			event_active(x->wr, EV_WRITE, 1);
	}
	tls_update_events(x);
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
	if (evbuffer_get_length(x->out) > 0) {
		if (tls_flush(x) != 0) {
			/* The connection hears of it when it writes (or reads). */
			if (x->t.want_write)
				x->t.on_writable(x->t.arg);
			else if (x->t.want_read)
				x->t.on_readable(x->t.arg);
			return;
		}
		if (evbuffer_get_length(x->out) > 0 || x->handshaking) {
			tls_update_events(x);
			return;
		}
	}
	if (x->t.want_write && !x->handshaking)
		x->t.on_writable(x->t.arg);
	else
		tls_update_events(x);
}

static ssize_t
tls_read(struct transport *t, void *buf, size_t len)
{
	struct tls *x = (struct tls *)t;
	if (x->failed)
		return TRANSPORT_ERROR;
	if (x->handshaking || len == 0)
		return TRANSPORT_AGAIN;
	ERR_clear_error();
	errno = 0;
	/* SSL_read hands out one record (16 KB at most) a call: fill the space
	 * the connection offers from as many as are here, as read(2) would. */
	size_t got = 0;
	int n = 0;
	while (got < len && (n = SSL_read(x->ssl, (char *)buf + got,
	    len - got > INT_MAX ? INT_MAX : (int)(len - got))) > 0)
		got += (size_t)n;
	int e = got > 0 ? SSL_ERROR_NONE : SSL_get_error(x->ssl, n);
	ERR_clear_error();
	/* A read may make OpenSSL answer (a key update): send it. */
	if (evbuffer_get_length(x->out) > 0 && tls_flush(x) != 0)
		return TRANSPORT_ERROR;
	if (got > 0) {
		if (SSL_has_pending(x->ssl))
			event_active(x->rd, EV_READ, 1);
		tls_update_events(x);
		return (ssize_t)got;
	}
	switch (e) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		tls_update_events(x);
		return TRANSPORT_AGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0; /* close_notify, or an end without one (SSL_OP_IGNORE_UNEXPECTED_EOF) */
	case SSL_ERROR_SYSCALL:
		if (errno == 0)
			return 0;
		/* fall through */
	default:
		tls_fail(x, "TLS read failed");
		return TRANSPORT_ERROR;
	}
}

static ssize_t
tls_write(struct transport *t, struct evbuffer *plain)
{
	struct tls *x = (struct tls *)t;
	ssize_t total = 0;
	if (x->failed)
		return TRANSPORT_ERROR;
	if (x->handshaking)
		return 0; /* written once the handshake is done */
	if (tls_flush(x) != 0)
		return TRANSPORT_ERROR;
	size_t len;
	while ((len = evbuffer_get_length(plain)) > 0 && evbuffer_get_length(x->out) < TLS_OUT_MAX) {
		size_t n = len < TLS_RECORD ? len : TLS_RECORD;
		/* A record straight from the first chunk when it is most of one
		 * (a large body, a full reservation of small frames), else
		 * gathered from several small chunks. */
		struct evbuffer_iovec v;
		const void *p = x->server->staging;
		if (evbuffer_peek(plain, (ev_ssize_t)n, NULL, &v, 1) == 1 &&
		    (v.iov_len >= n || v.iov_len >= TLS_RECORD / 2)) {
			p = v.iov_base;
			n = v.iov_len < n ? v.iov_len : n;
		} else if (evbuffer_copyout(plain, x->server->staging, n) != (ev_ssize_t)n) {
			goto fail;
		}
		ERR_clear_error();
		errno = 0;
		int w = SSL_write(x->ssl, p, (int)n);
		if (w > 0) {
			evbuffer_drain(plain, (size_t)w);
			total += w;
			x->write_wants_read = false;
			continue;
		}
		if (SSL_get_error(x->ssl, w) == SSL_ERROR_WANT_READ) {
			x->write_wants_read = true;
			break;
		}
		goto fail;
	}
	if (tls_flush(x) != 0)
		return TRANSPORT_ERROR;
	tls_update_events(x);
	return total;
fail:
	tls_fail(x, "TLS write failed");
	return TRANSPORT_ERROR;
}

static size_t
tls_pending(const struct transport *t)
{
	return evbuffer_get_length(((const struct tls *)t)->out);
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
	(void)tls_flush(x);
}

static void
tls_shutdown(struct transport *t)
{
	struct tls *x = (struct tls *)t;
	tls_close_notify(x);
	/* The end of stream must not overtake ciphertext still waiting. */
	if (evbuffer_get_length(x->out) == 0)
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
	SSL_free(x->ssl); /* and its BIOs */
	if (x->out)
		evbuffer_free(x->out);
	evutil_closesocket(x->fd);
	free(x);
}

static const struct transport_ops tls_ops = {
	.kind = "tls",
	.read = tls_read,
	.write = tls_write,
	.pending = tls_pending,
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
	x->out = evbuffer_new();
	x->ssl = SSL_new(s->ctx);
	x->rd = event_new(base, fd, EV_READ | EV_PERSIST, tls_read_cb, x);
	x->wr = event_new(base, fd, EV_WRITE | EV_PERSIST, tls_write_cb, x);
	BIO *rbio = BIO_new_socket(fd, BIO_NOCLOSE), *wbio = BIO_new(s->out_method);
	if (x->out == NULL || x->ssl == NULL || x->rd == NULL || x->wr == NULL || rbio == NULL ||
	    wbio == NULL) {
		BIO_free(rbio);
		BIO_free(wbio);
		goto fail;
	}
	BIO_set_data(wbio, x);
	SSL_set_bio(x->ssl, rbio, wbio); /* the SSL owns both now */
	event_add(x->rd, NULL); /* the client speaks first */
	return &x->t;
fail:
	if (x->rd)
		event_free(x->rd);
	if (x->wr)
		event_free(x->wr);
	SSL_free(x->ssl);
	if (x->out)
		evbuffer_free(x->out);
	free(x);
	ERR_clear_error();
	return NULL;
}

/* ---- the server context ---- */

/* What a PEM file holds. */
struct pem_kinds {
	bool cert;      /* a certificate */
	bool key;       /* a private key ... */
	bool encrypted; /* ... with a passphrase */
};

/* Read path's PEM blocks into *k; -1 with errno set if it cannot be read. */
static int
pem_kinds(const char *path, struct pem_kinds *k)
{
	*k = (struct pem_kinds){ 0 };
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		errno = EISDIR;
		return -1;
	}
	char *name = NULL, *header = NULL;
	unsigned char *data = NULL;
	long len;
	while (PEM_read(f, &name, &header, &data, &len) == 1) {
		if (strstr(name, "CERTIFICATE") != NULL && strstr(name, "REQUEST") == NULL)
			k->cert = true;
		if (strstr(name, "PRIVATE KEY") != NULL) {
			k->key = true;
			k->encrypted |= strncmp(name, "ENCRYPTED", 9) == 0 ||
			    strstr(header, "ENCRYPTED") != NULL;
		}
		OPENSSL_free(name);
		OPENSSL_free(header);
		OPENSSL_free(data);
	}
	ERR_clear_error(); /* the end of the file reads as "no start line" */
	int failed = ferror(f);
	fclose(f);
	if (failed) {
		errno = EIO;
		return -1;
	}
	return 0;
}

/* "eftd.conf:7: " when the setting k is from the config file, else "". */
static void
setting_origin(const struct config *cfg, enum config_key k, char *out, size_t outlen)
{
	if (cfg->origin[k] > 0 && cfg->path[0] != '\0')
		snprintf(out, outlen, "%s:%d: ", cfg->path, cfg->origin[k]);
	else
		out[0] = '\0';
}

/* The certificate, key and CA files, looked at before OpenSSL is given
 * them: its reasons ("system lib", "PEM lib") name neither the file nor
 * what is wrong with it. */
static int
tls_check_files(const struct config *cfg, char *err, size_t errlen)
{
	char at[PATH_MAX + 32];
	struct pem_kinds cert, key, ca;
	setting_origin(cfg, CFG_TLS_CERT_FILE, at, sizeof(at));
	if (pem_kinds(cfg->tls_cert_file, &cert) != 0) {
		snprintf(err, errlen, "%stls-cert-file %s: %s", at, cfg->tls_cert_file, strerror(errno));
		return -1;
	}
	setting_origin(cfg, CFG_TLS_KEY_FILE, at, sizeof(at));
	if (pem_kinds(cfg->tls_key_file, &key) != 0) {
		snprintf(err, errlen, "%stls-key-file %s: %s", at, cfg->tls_key_file, strerror(errno));
		return -1;
	}
	if (!cert.cert && cert.key && key.cert && !key.key) {
		snprintf(err, errlen, "%s%stls-cert-file %s holds a private key and tls-key-file %s a "
		    "certificate: the two are swapped", cfg->path, cfg->path[0] ? ": " : "",
		    cfg->tls_cert_file, cfg->tls_key_file);
		return -1;
	}
	setting_origin(cfg, CFG_TLS_CERT_FILE, at, sizeof(at));
	if (!cert.cert) {
		snprintf(err, errlen, "%stls-cert-file %s holds %s", at, cfg->tls_cert_file,
		    cert.key ? "a private key, not a certificate" :
		    "no PEM certificate (-----BEGIN CERTIFICATE-----)");
		return -1;
	}
	setting_origin(cfg, CFG_TLS_KEY_FILE, at, sizeof(at));
	if (!key.key) {
		snprintf(err, errlen, "%stls-key-file %s holds %s", at, cfg->tls_key_file,
		    key.cert ? "a certificate, not a private key" :
		    "no PEM private key");
		return -1;
	}
	if (key.encrypted) {
		snprintf(err, errlen, "%stls-key-file %s is encrypted: eftd reads no passphrase; "
		    "give it the key unencrypted (openssl pkey -in KEY -out KEY.plain), readable "
		    "only by eftd's user", at, cfg->tls_key_file);
		return -1;
	}
	if (cfg->tls_ca_file[0] == '\0')
		return 0;
	setting_origin(cfg, CFG_TLS_CA_FILE, at, sizeof(at));
	if (pem_kinds(cfg->tls_ca_file, &ca) != 0) {
		snprintf(err, errlen, "%stls-ca-file %s: %s", at, cfg->tls_ca_file, strerror(errno));
		return -1;
	}
	if (!ca.cert) {
		snprintf(err, errlen, "%stls-ca-file %s holds no PEM certificate "
		    "(-----BEGIN CERTIFICATE-----)", at, cfg->tls_ca_file);
		return -1;
	}
	return 0;
}

/* A key with a passphrase is refused (tls_check_files), never asked for
 * on a terminal eftd may not have. */
static int
no_passphrase(char *buf, int size, int rwflag, void *arg)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)arg;
	return -1;
}

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
	/* TLS 1.3: AES-128-GCM first, the fastest where AES-NI is (and as
	 * strong as needed); ChaCha20 for clients without it. */
	if (SSL_CTX_set_ciphersuites(ctx, TLS13_SUITES) != 1)
		return tls_ctx_error(err, errlen, "TLS 1.3 cipher suites", NULL);
	/* A peer that closes without close_notify has ended its stream: STOMP
	 * frames say where they end, so no truncation goes unnoticed. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* Partial writes of a moving buffer: what tls_write does; idle
	 * connections give their 34 KB of OpenSSL buffers back. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
	    SSL_MODE_RELEASE_BUFFERS);
	/* Read what the socket has, not a record header and then its body:
	 * half the read calls (bytes left in OpenSSL: see tls_read). */
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_default_read_buffer_len(ctx, TLS_READ_BUFFER);
	if (tls_check_files(cfg, err, errlen) != 0)
		return -1;
	SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
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
	if (SSL_CTX_check_private_key(ctx) != 1) {
		/* (A key of another type than the certificate's lands here.) */
		ERR_clear_error();
		snprintf(err, errlen, "tls-key-file: %s does not match tls-cert-file %s",
		    cfg->tls_key_file, cfg->tls_cert_file);
		return -1;
	}
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
	s->out_method = tls_bio_method();
	if (s->ctx == NULL || s->out_method == NULL) {
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

int
tls_server_reload(struct tls_server *s, const struct config *cfg, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (ctx == NULL) {
		tls_ctx_error(err, errlen, "cannot make a TLS context", NULL);
		return -1;
	}
	if (tls_ctx_setup(ctx, cfg, err, errlen) != 0) {
		SSL_CTX_free(ctx);
		return -1;
	}
	/* Connections made with the old context hold a reference to it: it
	 * lives until the last of them closes. */
	SSL_CTX_free(s->ctx);
	s->ctx = ctx;
	return 0;
}

void
tls_server_free(struct tls_server *s)
{
	if (s == NULL)
		return;
	SSL_CTX_free(s->ctx);
	BIO_meth_free(s->out_method);
	free(s);
}
