/* http.c - the admin listener on libevent's evhttp (see http.h).
 *
 * Requests are answered at once, on the broker's loop: what they read is
 * computed then (admin.c, metrics.c), and nothing on the STOMP path waits
 * for them.  Access:
 *   - with a users file, HTTP Basic auth by a user with the admin mark
 *     (401 without credentials or with wrong ones, 403 without the mark);
 *   - without one, the listener is on loopback (config_check), and the Host
 *     header must name loopback too (421), so that a web page cannot reach
 *     it through DNS rebinding;
 *   - POST and DELETE from a page of another origin are refused (403). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sodium.h>

#include "eft/admin.h"
#include "eft/auth.h"
#include "eft/broker.h"
#include "eft/config.h"
#include "eft/http.h"
#include "eft/log.h"

#define HTTP_MAX_HEADERS (16u << 10)
#define HTTP_MAX_BODY (64u << 10)    /* the API takes no body: this only bounds one */
#define HTTP_TIMEOUT_S 30

struct http_server {
	struct broker *broker;
	struct evhttp *evh;
	char url[320];      /* the first listener, with the port bound: "" before */
};

static const char *
reason_phrase(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 421: return "Misdirected Request";
	case 500: return "Internal Server Error";
	default: return "Error";
	}
}

static const char *
method_name(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_PATCH: return "PATCH";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	default: return "OTHER";
	}
}

/* The host of a Host header ("127.0.0.1:15672", "[::1]:15672",
 * "localhost") into out; false if it is malformed. */
static bool
host_of(const char *hdr, char *out, size_t outlen)
{
	const char *end;
	if (hdr[0] == '[') {
		end = strchr(hdr, ']');
		if (end == NULL)
			return false;
		hdr++;
	} else {
		end = strchr(hdr, ':');
		if (end == NULL)
			end = hdr + strlen(hdr);
	}
	size_t n = (size_t)(end - hdr);
	if (n == 0 || n >= outlen)
		return false;
	memcpy(out, hdr, n);
	out[n] = '\0';
	return true;
}

/* Who asks, and may they?  0, or the status to refuse with (and why). */
static int
http_access(struct http_server *h, struct evhttp_request *req, enum evhttp_cmd_type cmd,
    const char **why)
{
	struct broker *b = h->broker;
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	const char *host = evhttp_find_header(in, "Host");
	char hostname[256];

	if (b->auth == NULL) {
		if (host == NULL || !host_of(host, hostname, sizeof(hostname)) ||
		    !config_host_is_loopback(hostname)) {
			*why = "without a users-file the admin listener answers only requests for a "
			    "loopback host (127.0.0.1, [::1] or localhost)";
			return 421;
		}
	} else {
		const char *authz = evhttp_find_header(in, "Authorization");
		unsigned char cred[512];
		size_t len = 0;
		const char *sep = NULL;
		if (authz != NULL && strncasecmp(authz, "Basic ", 6) == 0 &&
		    sodium_base642bin(cred, sizeof(cred) - 1, authz + 6, strlen(authz + 6), " ", &len,
		    NULL, sodium_base64_VARIANT_ORIGINAL) == 0) {
			cred[len] = '\0';
			sep = memchr(cred, ':', len);
		}
		if (sep == NULL) {
			*why = "log in with the name and password of an admin user of the users file "
			    "(HTTP Basic auth)";
			return 401;
		}
		const char *name = (const char *)cred;
		size_t name_len = (size_t)(sep - name);
		const struct auth_user *u = auth_check(b->auth, name, name_len, sep + 1,
		    len - name_len - 1);
		char shown[80];
		log_clean(shown, sizeof(shown), name, name_len);
		sodium_memzero(cred, sizeof(cred));
		if (u == NULL) {
			log_warn("admin listener: authentication failed for '%s'", shown);
			*why = "wrong name or password";
			return 401;
		}
		if (!auth_user_is_admin(u)) {
			*why = "this user has no admin mark in the users file (eft-passwd --admin)";
			return 403;
		}
	}
	/* A page elsewhere may make the browser POST here, but it sends its Origin. */
	const char *origin = evhttp_find_header(in, "Origin");
	if (origin != NULL && (cmd == EVHTTP_REQ_POST || cmd == EVHTTP_REQ_DELETE ||
	    cmd == EVHTTP_REQ_PUT || cmd == EVHTTP_REQ_PATCH)) {
		if (host == NULL || strncmp(origin, "http://", 7) != 0 ||
		    strcmp(origin + 7, host) != 0) {
			*why = "a request from a page of another origin";
			return 403;
		}
	}
	return 0;
}

static void
free_body(const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	free(arg);
}

static void
http_request_cb(struct evhttp_request *req, void *arg)
{
	struct http_server *h = arg;
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	struct evkeyvalq *hdrs = evhttp_request_get_output_headers(req);
	struct evbuffer *body = evbuffer_new();
	const char *accept = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept");
	enum admin_format fmt = accept && strstr(accept, "text/tab-separated-values") ?
	    ADMIN_TSV : ADMIN_JSON;
	const char *why = NULL;
	struct admin_reply r;
	int status;

	if (body == NULL) {
		evhttp_send_error(req, 500, "Internal Server Error");
		return;
	}
	/* evhttp writes the head and the body apart: without this the body
	 * would wait for the peer's delayed ACK of the head (40 ms). */
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	int one = 1;
	if (fd >= 0)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	evhttp_add_header(hdrs, "Cache-Control", "no-store");
	evhttp_add_header(hdrs, "X-Content-Type-Options", "nosniff");
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	if ((status = http_access(h, req, cmd, &why)) != 0) {
		if (status == 401)
			evhttp_add_header(hdrs, "WWW-Authenticate", "Basic realm=\"eft\", charset=\"UTF-8\"");
		evhttp_add_header(hdrs, "Content-Type", "text/plain; charset=utf-8");
		evbuffer_add_printf(body, "%s\n", why);
		evhttp_send_reply(req, status, reason_phrase(status), body);
		evbuffer_free(body);
		return;
	}
	admin_handle(h->broker, method_name(cmd), path && path[0] ? path : "/", fmt, &r);
	evhttp_add_header(hdrs, "Content-Type", r.content_type);
	if (r.allow != NULL)
		evhttp_add_header(hdrs, "Allow", r.allow);
	if (r.fixed != NULL)
		/* The page: nothing it may load comes from anywhere but here. */
		evhttp_add_header(hdrs, "Content-Security-Policy", "default-src 'none'; "
		    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
		    "img-src 'self' data:; base-uri 'none'; form-action 'none'; "
		    "frame-ancestors 'none'");
	size_t len;
	const char *data = admin_reply_body(&r, &len);
	/* The answer is handed over, not copied (a scrape may be megabytes).
	 * HEAD: its length, and no body (evhttp would send one). */
	if (cmd == EVHTTP_REQ_HEAD) {
		char n[24];
		snprintf(n, sizeof(n), "%zu", len);
		evhttp_add_header(hdrs, "Content-Length", n);
	} else if (r.fixed != NULL) {
		evbuffer_add_reference(body, data, len, NULL, NULL);
	} else if (len > 0 && evbuffer_add_reference(body, data, len, free_body, r.body.data) == 0) {
		sbuf_init(&r.body);
	}
	log_debug("admin listener: %s %s: %d", method_name(cmd), path ? path : "", r.status);
	evhttp_send_reply(req, r.status, reason_phrase(r.status), body);
	evbuffer_free(body);
	admin_reply_free(&r);
}

struct http_server *
http_server_new(struct broker *b)
{
	struct http_server *h = calloc(1, sizeof(*h));
	if (h == NULL)
		return NULL;
	h->broker = b;
	h->evh = evhttp_new(b->base);
	if (h->evh == NULL) {
		free(h);
		return NULL;
	}
	/* Every method reaches admin.c, which says 405 with what a path takes. */
	evhttp_set_allowed_methods(h->evh, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
	    EVHTTP_REQ_DELETE | EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH | EVHTTP_REQ_OPTIONS);
	evhttp_set_max_headers_size(h->evh, HTTP_MAX_HEADERS);
	evhttp_set_max_body_size(h->evh, HTTP_MAX_BODY);
	evhttp_set_timeout(h->evh, HTTP_TIMEOUT_S);
	evhttp_set_gencb(h->evh, http_request_cb, h);
	return h;
}

int
http_server_bind(struct http_server *h, const struct config_listen *where, char *err,
    size_t errlen)
{
	struct evhttp_bound_socket *s = evhttp_bind_socket_with_handle(h->evh, where->host,
	    where->port);
	if (s == NULL) {
		snprintf(err, errlen, "cannot listen on %s: %s", where->url,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	unsigned port = where->port;
	if (getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&ss, &len) == 0)
		port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
		    ((struct sockaddr_in *)&ss)->sin_port);
	bool v6 = strchr(where->host, ':') != NULL;
	char url[sizeof(h->url)];
	snprintf(url, sizeof(url), "http://%s%s%s:%u/", v6 ? "[" : "", where->host, v6 ? "]" : "",
	    port);
	if (h->url[0] == '\0')
		memcpy(h->url, url, sizeof(url));
	log_info("admin listener on %.*s: %s", (int)strlen(url) - 1, url,
	    h->broker->auth != NULL ? "admin users of the users file (HTTP Basic auth)" :
	    "no users-file, so anyone on this machine (loopback only)");
	return 0;
}

const char *
http_server_url(const struct http_server *h)
{
	return h != NULL && h->url[0] != '\0' ? h->url : NULL;
}

void
http_server_free(struct http_server *h)
{
	if (h == NULL)
		return;
	evhttp_free(h->evh);
	free(h);
}
