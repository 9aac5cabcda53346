/* tls.h - TLS client connections for eft-bench (--tls), on OpenSSL.
 *
 * conn.c keeps the sockets and the one poll() loop; this module only puts
 * an SSL object on a connected non-blocking socket and turns OpenSSL's
 * answers into what the loop needs to know: done, wait for input, wait
 * until writable, end of stream, or failed with a one-line reason.  One
 * tls_client (an SSL_CTX with the verification settings) is made per
 * invocation and serves every connection. */
#ifndef EFT_BENCH_TLS_H
#define EFT_BENCH_TLS_H

#include <stdbool.h>
#include <stddef.h>

/* The largest plaintext one TLS record carries: the most one write takes. */
#define TLS_RECORD_MAX 16384

enum tls_status {
	TLS_OK,          /* bytes moved, or the handshake finished */
	TLS_WANT_READ,   /* call again once the socket is readable */
	TLS_WANT_WRITE,  /* call again once the socket is writable */
	TLS_EOF,         /* the peer closed the connection */
	TLS_ERROR,       /* failed, tls_error() says why; nothing more may be done */
};

struct tls_client;
struct tls;

/* The client side of every connection of this invocation.  ca: a PEM file
 * of trusted CA certificates, NULL for the system's default store;
 * insecure: do not verify the certificate at all; name: sent as SNI and
 * checked against the certificate, except that an IP address literal is
 * checked against its IP entries and not sent; NULL for neither.  name is
 * kept, not copied: it must outlive tc.  NULL after writing why to err. */
struct tls_client *tls_client_new(const char *ca, bool insecure, const char *name, char *err,
    size_t errlen);
void tls_client_free(struct tls_client *tc);

/* TLS on the connected non-blocking socket fd, which stays the caller's.
 * NULL after writing why to err. */
struct tls *tls_new(struct tls_client *tc, int fd, char *err, size_t errlen);
/* Send close_notify if the connection is up (best effort, no waiting) and
 * free t; fd is not closed. */
void tls_free(struct tls *t);

enum tls_status tls_handshake(struct tls *t);
/* Read up to len bytes into p; *n says how many on TLS_OK. */
enum tls_status tls_read(struct tls *t, char *p, size_t len, size_t *n);
/* Write up to TLS_RECORD_MAX of p's len bytes; *n says how many on TLS_OK.
 * After TLS_WANT_*, call again with the same bytes, possibly moved, or more. */
enum tls_status tls_write(struct tls *t, const char *p, size_t len, size_t *n);
/* Bytes wait inside OpenSSL, where poll() cannot see them: read again. */
bool tls_pending(const struct tls *t);
/* Why the last TLS_ERROR (or TLS_EOF during the handshake) happened. */
const char *tls_error(const struct tls *t);

#endif
