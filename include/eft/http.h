/* http.h - the admin listener: libevent's evhttp on every http:// listen
 * URL, deciding who may ask (HTTP Basic auth against the users file's
 * admin users, or loopback only without a users file) and handing the
 * request to admin.c. */
#ifndef EFT_HTTP_H
#define EFT_HTTP_H

#include <stddef.h>

struct broker;
struct config_listen;
struct http_server;

/* One server for all admin listeners.  NULL if out of memory. */
struct http_server *http_server_new(struct broker *b);
/* Listen on where too; -1 with a one-line reason in err. */
int http_server_bind(struct http_server *h, const struct config_listen *where, char *err,
    size_t errlen);
/* The first admin listener's URL, with the port bound ("http://HOST:PORT/"),
 * or NULL if there is none (h may be NULL). */
const char *http_server_url(const struct http_server *h);
/* Stop listening and free (requests being answered are dropped). */
void http_server_free(struct http_server *h);

#endif
