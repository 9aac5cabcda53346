/* tls.h - TLS for tls:// listeners (OpenSSL): the server context made from
 * the tls-* settings, and the TLS transport.
 *
 * TLS runs on the socket directly (SSL_set_fd), not through libevent's
 * bufferevent_openssl: the connection reads decrypted bytes straight into
 * its parser's buffer and hands its output evbuffer over in 16 KB records,
 * with the same non-blocking events as plain TCP, so that the connection
 * code is the same for both and no bytes are copied through an extra
 * buffer. */
#ifndef EFT_TLS_H
#define EFT_TLS_H

#include <stddef.h>

struct config;
struct event_base;
struct tls_server;
struct transport;

/* From cfg's tls-* settings.  NULL with a one-line reason in err: a
 * certificate or key that cannot be read, a key that does not match its
 * certificate, a CA file that cannot be read, a cipher list OpenSSL
 * rejects. */
struct tls_server *tls_server_new(const struct config *cfg, char *err, size_t errlen);
/* Read the certificate, key and CA file again (SIGHUP: certificate
 * rotation): new connections get them, open ones keep what they had.  -1
 * with a reason in err, and s unchanged. */
int tls_server_reload(struct tls_server *s, const struct config *cfg, char *err, size_t errlen);
void tls_server_free(struct tls_server *s);

/* TLS on an accepted socket; the handshake runs as the connection waits to
 * read (and counts against its CONNECT timeout).  NULL if out of memory (fd
 * is then left open). */
struct transport *transport_tls_new(struct event_base *base, struct tls_server *s, int fd);

#endif
