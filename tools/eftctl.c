/* eftctl.c - the command line for eftd's admin HTTP API (docs/admin-api.md).
 *
 *     eftctl [-u URL] [--user USER[:PASSWORD]] [--json] [-t SECONDS] COMMAND
 *
 * One request per run, made with libevent's evhttp client.  Answers are
 * asked for as tab-separated values and printed for people (lists as an
 * aligned table, actions as one line); --json asks for JSON and prints it as
 * it came, for scripts.  So eftctl never parses JSON.  Every failure
 * is one line on stderr: exit 1 when the broker or the request failed, 2
 * for a bad command line.
 *
 * The whole request is bounded by one timer: evhttp's own timeouts are per
 * connect, read or write, so a server that trickles could hold us longer. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netdb.h>
#include <sodium.h>

#include "eft/version.h"

#include "ask.h"

#define CTL_DEFAULT_URL "http://127.0.0.1:15672"
#define CTL_PASSWORD_MAX 1024

enum ctl_kind {
	CTL_TABLE,      /* a list: a table, or JSON with --json */
	CTL_PURGE,
	CTL_DELETE,
	CTL_CLOSE,
};

struct ctl_command {
	const char *name;
	enum ctl_kind kind;
	enum evhttp_cmd_type method;
	const char *path;       /* after the URL's own path; an argument is appended */
	const char *suffix;     /* after the argument */
	const char *arg;        /* the argument's name in usage, NULL for none */
};

static const struct ctl_command ctl_commands[] = {
	{ "overview", CTL_TABLE, EVHTTP_REQ_GET, "/api/overview", "", NULL },
	{ "queues", CTL_TABLE, EVHTTP_REQ_GET, "/api/queues", "", NULL },
	{ "topics", CTL_TABLE, EVHTTP_REQ_GET, "/api/topics", "", NULL },
	{ "connections", CTL_TABLE, EVHTTP_REQ_GET, "/api/connections", "", NULL },
	{ "scheduled", CTL_TABLE, EVHTTP_REQ_GET, "/api/scheduled", "", NULL },
	{ "purge", CTL_PURGE, EVHTTP_REQ_POST, "/api/queues/", "/purge", "QUEUE" },
	{ "delete", CTL_DELETE, EVHTTP_REQ_DELETE, "/api/queues/", "", "QUEUE" },
	{ "close", CTL_CLOSE, EVHTTP_REQ_DELETE, "/api/connections/", "", "ID" },
};

/* Where the broker is, from the URL. */
struct ctl_target {
	const char *url;        /* as given, for messages */
	char *host;             /* to connect to (no brackets) */
	char *host_header;      /* host[:port] as in the URL */
	char *base;             /* the URL's path without a trailing '/' */
	int port;
};

/* What came back, copied out of libevent's request. */
struct ctl_reply {
	struct event_base *base;
	struct evhttp_connection *evcon;
	int done;               /* the request callback ran */
	int timed_out;          /* our timer fired first */
	int failed;             /* evhttp reported an error ... */
	enum evhttp_request_error error;        /* ... this one */
	int connect_errno;      /* why the connect failed, 0 if it did not */
	bufferevent_event_cb connect_cb;        /* evhttp's, while connecting */
	void *connect_arg;
	int oom;
	int code;               /* 0: no HTTP answer */
	char *reason;
	char *type;             /* Content-Type, or NULL */
	char *body;
	size_t len;
};

/* ---- the command line ---- */

static void
ctl_usage(FILE *to)
{
	fprintf(to, "usage: eftctl [-u URL] [--user USER[:PASSWORD]] [--json] [-t SECONDS] COMMAND\n"
	    "\n"
	    "Commands (eftd's admin HTTP API, docs/admin-api.md):\n"
	    "  overview         counts: connections, queues, messages, memory, listeners\n"
	    "  queues           every queue: depth, bytes, unacked, consumers, published,\n"
	    "                   cluster_waiting (in JetStream, with cluster)\n"
	    "  topics           every topic: subscribers, durable subscriptions, published\n"
	    "  connections      every connection: id, peer, login, subscriptions\n"
	    "  scheduled        scheduled messages waiting, soonest first: due, deliveries left\n"
	    "  purge QUEUE      drop the messages waiting in QUEUE\n"
	    "  delete QUEUE     delete QUEUE (it must have no consumers) and its messages\n"
	    "  close ID         close connection ID (the client gets an ERROR first)\n"
	    "A QUEUE without a leading '/' means /queue/QUEUE.\n"
	    "\n"
	    "Options:\n"
	    "  -u, --url URL       the admin listener (default $EFTCTL_URL, else %s)\n"
	    "      --user USER[:PASSWORD]\n"
	    "                      HTTP Basic auth, for an eftd with a users-file; without\n"
	    "                      :PASSWORD it comes from $EFTCTL_PASSWORD, else the terminal\n"
	    "  -j, --json          print the server's JSON instead of a table\n"
	    "  -t, --timeout SECONDS\n"
	    "                      give up on the request after this long (default 5)\n"
	    "  -h, --help          this text\n"
	    "  -V, --version       print the version\n"
	    "\n"
	    "Exit status: 0 done, 1 the request failed, 2 a bad command line.\n",
	    CTL_DEFAULT_URL);
}

/* A bad command line: one line, exit status 2. */
static int
ctl_bad_usage(const char *what, const char *detail)
{
	fprintf(stderr, "eftctl: %s%s (eftctl --help shows how)\n", what, detail);
	return 2;
}

static const struct ctl_command *
ctl_command_find(const char *name)
{
	for (size_t i = 0; i < sizeof(ctl_commands) / sizeof(ctl_commands[0]); i++)
		if (strcmp(ctl_commands[i].name, name) == 0)
			return &ctl_commands[i];
	return NULL;
}

/* Fill t from url: http only, a host, no user, query or fragment.  Returns
 * NULL, or what is wrong with it. */
static const char *
ctl_target_parse(struct ctl_target *t, const char *url)
{
	struct evhttp_uri *uri = evhttp_uri_parse_with_flags(url, 0);
	const char *why = NULL, *scheme, *host, *path;

	if (uri == NULL)
		return "not a URL";
	scheme = evhttp_uri_get_scheme(uri);
	host = evhttp_uri_get_host(uri);
	path = evhttp_uri_get_path(uri);
	if (scheme == NULL || strcasecmp(scheme, "http") != 0)
		why = "eftd's admin listener speaks http://";
	else if (host == NULL || *host == '\0')
		why = "no host";
	else if (evhttp_uri_get_userinfo(uri) != NULL)
		why = "give the user with --user, not in the URL";
	else if (evhttp_uri_get_query(uri) != NULL || evhttp_uri_get_fragment(uri) != NULL)
		why = "a query or fragment has no place in it";
	if (why != NULL)
		goto done;
	t->url = url;
	t->port = evhttp_uri_get_port(uri) < 0 ? 80 : evhttp_uri_get_port(uri);
	/* libevent keeps an IPv6 literal's brackets; the Host header wants them,
	 * the resolver does not. */
	size_t hlen = strlen(host);
	if (host[0] == '[' && hlen > 2 && host[hlen - 1] == ']')
		t->host = strndup(host + 1, hlen - 2);
	else
		t->host = strdup(host);
	if (evhttp_uri_get_port(uri) < 0)
		t->host_header = strdup(host);
	else if (asprintf(&t->host_header, "%s:%d", host, t->port) < 0)
		t->host_header = NULL;
	t->base = strdup(path != NULL ? path : "");
	if (t->host == NULL || t->host_header == NULL || t->base == NULL) {
		why = "out of memory";
		goto done;
	}
	for (size_t n = strlen(t->base); n > 0 && t->base[n - 1] == '/'; n--)
		t->base[n - 1] = '\0';
done:
	evhttp_uri_free(uri);
	return why;
}

static void
ctl_target_free(struct ctl_target *t)
{
	free(t->host);
	free(t->host_header);
	free(t->base);
}

/* ---- the password ---- */

/* "Basic base64(user:password)", malloc'd, or NULL when out of memory. */
static char *
ctl_basic_auth(const char *user, const char *password)
{
	size_t ulen = strlen(user), plen = strlen(password), n = ulen + 1 + plen;
	size_t b64 = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *plain = malloc(n), *header = malloc(6 + b64);

	if (plain == NULL || header == NULL) {
		free(header);
		header = NULL;
		goto done;
	}
	memcpy(plain, user, ulen);
	plain[ulen] = ':';
	memcpy(plain + ulen + 1, password, plen);
	memcpy(header, "Basic ", 6);
	sodium_bin2base64(header + 6, b64, (const unsigned char *)plain, n,
	    sodium_base64_VARIANT_ORIGINAL);
done:
	if (plain != NULL)
		sodium_memzero(plain, n);
	free(plain);
	return header;
}

/* ---- the request ---- */

static void
ctl_on_libevent_log(int severity, const char *msg)
{
	/* Our own line says what went wrong; libevent's "[warn] ..." would be a
	 * second one. */
	(void)severity;
	(void)msg;
}

static void
ctl_on_error(enum evhttp_request_error error, void *arg)
{
	struct ctl_reply *r = arg;

	r->failed = 1;
	r->error = error;
}

/* evhttp shuts the socket down before it says that a connect failed, which
 * leaves ENOTCONN in errno; this sits in front of its connect callback to
 * see the real reason (set from SO_ERROR by libevent), then passes on. */
static void
ctl_on_connect_event(struct bufferevent *bev, short what, void *arg)
{
	struct ctl_reply *r = arg;

	if (!(what & BEV_EVENT_CONNECTED))
		r->connect_errno = (what & BEV_EVENT_TIMEOUT) ? ETIMEDOUT : EVUTIL_SOCKET_ERROR();
	r->connect_cb(bev, what, r->connect_arg);
}

static char *
ctl_strdup_or(const char *s, int *oom)
{
	char *d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		*oom = 1;
	return d;
}

/* The request is done, one way or another: keep what came back. */
static void
ctl_on_reply(struct evhttp_request *req, void *arg)
{
	struct ctl_reply *r = arg;

	r->done = 1;
	if (req != NULL && (r->code = evhttp_request_get_response_code(req)) != 0) {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		r->reason = ctl_strdup_or(evhttp_request_get_response_code_line(req), &r->oom);
		r->type = ctl_strdup_or(evhttp_find_header(evhttp_request_get_input_headers(req),
		    "Content-Type"), &r->oom);
		r->len = evbuffer_get_length(in);
		if ((r->body = malloc(r->len + 1)) == NULL) {
			r->oom = 1;
		} else {
			evbuffer_copyout(in, r->body, r->len);
			r->body[r->len] = '\0';
		}
	}
	event_base_loopbreak(r->base);
}

static void
ctl_on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_reply *r = arg;

	(void)fd;
	(void)what;
	r->timed_out = 1;
	event_base_loopbreak(r->base);
}

/* Why there is no HTTP answer in r, as a phrase; buf holds it if needed. */
static const char *
ctl_failure(const struct ctl_reply *r, const struct ctl_target *t, double timeout, char *buf,
    size_t size)
{
	struct bufferevent *bev = evhttp_connection_get_bufferevent(r->evcon);
	int dns = bev != NULL ? bufferevent_socket_get_dns_error(bev) : 0;

	if (r->timed_out || (r->failed && r->error == EVREQ_HTTP_TIMEOUT)) {
		snprintf(buf, size, "no answer within %g s", timeout);
		return buf;
	}
	if (dns != 0) {
		snprintf(buf, size, "cannot resolve %s: %s", t->host, gai_strerror(dns));
		return buf;
	}
	if (r->connect_errno != 0) {
		snprintf(buf, size, "%s", strerror(r->connect_errno));
		buf[0] = (char)tolower((unsigned char)buf[0]);
		return buf;
	}
	if (!r->failed)
		return "cannot connect";
	switch (r->error) {
	case EVREQ_HTTP_EOF:
		return "the connection closed without an answer";
	case EVREQ_HTTP_INVALID_HEADER:
		return "the answer is not HTTP (is that eftd's http:// listener?)";
	case EVREQ_HTTP_DATA_TOO_LONG:
		return "the answer is too long";
	default:
		return "the connection failed";
	}
}

/* Make one request and wait for its answer, at most timeout seconds.
 * 0 with r filled, or -1 after saying why on stderr. */
static int
ctl_request(const struct ctl_target *t, enum evhttp_cmd_type method, const char *path,
    const char *accept, const char *auth, double timeout, struct ctl_reply *r)
{
	struct evhttp_request *req = NULL;
	struct event *timer = NULL;
	struct timeval tv;
	char why[256];
	int rc = -1;

	event_set_log_callback(ctl_on_libevent_log);
	if ((r->base = event_base_new()) == NULL ||
	    (r->evcon = evhttp_connection_base_new(r->base, NULL, t->host,
	    (ev_uint16_t)t->port)) == NULL ||
	    (timer = evtimer_new(r->base, ctl_on_timeout, r)) == NULL ||
	    (req = evhttp_request_new(ctl_on_reply, r)) == NULL) {
		fprintf(stderr, "eftctl: cannot set up the request: out of memory\n");
		goto done;
	}
	/* evhttp's timeouts a second or two later than ours, so that ours, for
	 * the whole request, is the one that fires. */
	evhttp_connection_set_timeout(r->evcon, (int)timeout + 2);
	evhttp_connection_set_retries(r->evcon, 0);
	evhttp_request_set_error_cb(req, ctl_on_error);
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	if (evhttp_add_header(h, "Host", t->host_header) != 0 ||
	    evhttp_add_header(h, "Accept", accept) != 0 ||
	    evhttp_add_header(h, "User-Agent", "eftctl/" EFT_VERSION) != 0 ||
	    evhttp_add_header(h, "Connection", "close") != 0 ||
	    (auth != NULL && evhttp_add_header(h, "Authorization", auth) != 0)) {
		fprintf(stderr, "eftctl: cannot set up the request: bad header\n");
		evhttp_request_free(req);
		goto done;
	}
	tv.tv_sec = (time_t)timeout;
	tv.tv_usec = (suseconds_t)((timeout - (double)tv.tv_sec) * 1e6);
	evtimer_add(timer, &tv);
	/* The request is libevent's from here on.  A connect that fails at once
	 * has run ctl_on_reply already. */
	if (evhttp_make_request(r->evcon, req, method, path) != 0) {
		if (!r->done)
			r->connect_errno = errno;
	} else if (!r->done) {
		struct bufferevent *bev = evhttp_connection_get_bufferevent(r->evcon);
		bufferevent_data_cb readcb, writecb;
		bufferevent_getcb(bev, &readcb, &writecb, &r->connect_cb, &r->connect_arg);
		if (r->connect_cb != NULL)
			bufferevent_setcb(bev, readcb, writecb, ctl_on_connect_event, r);
		event_base_dispatch(r->base);
	}
	if (r->oom) {
		fprintf(stderr, "eftctl: out of memory reading the answer\n");
		goto done;
	}
	if (r->code == 0) {
		fprintf(stderr, "eftctl: cannot reach eftd at %s: %s\n", t->url,
		    ctl_failure(r, t, timeout, why, sizeof(why)));
		goto done;
	}
	rc = 0;
done:
	if (timer != NULL)
		event_free(timer);
	if (r->evcon != NULL)
		evhttp_connection_free(r->evcon);
	r->evcon = NULL;
	if (r->base != NULL)
		event_base_free(r->base);
	r->base = NULL;
	return rc;
}

static void
ctl_reply_free(struct ctl_reply *r)
{
	free(r->reason);
	free(r->type);
	free(r->body);
}

/* ---- reading a record ---- */

/* The value of field key in a tab-separated record ("name\tvalue" lines,
 * as the API answers purge, delete and close), malloc'd, or NULL. */
static char *
tsv_member(const char *body, size_t len, const char *key)
{
	size_t klen = strlen(key);

	for (const char *p = body, *end = body + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl != NULL ? nl : end;
		if ((size_t)(eol - p) > klen && memcmp(p, key, klen) == 0 && p[klen] == '\t')
			return strndup(p + klen + 1, (size_t)(eol - p - klen - 1));
		p = eol + 1;
	}
	return NULL;
}

/* ---- printing ---- */

/* Characters on screen: UTF-8 sequences count once (wide ones wrongly). */
static size_t
ctl_width(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* An integer: what the API's counts are (a version like 1.2 is not one). */
static int
ctl_is_number(const char *s)
{
	if (*s == '-')
		s++;
	if (!isdigit((unsigned char)*s))
		return 0;
	while (isdigit((unsigned char)*s))
		s++;
	return *s == '\0';
}

/* Print the TSV in body (which is cut up in place) as a table: columns
 * padded with spaces, two apart, numbers right-aligned, the header in upper
 * case, as rabbitmqctl and kubectl print theirs.  -1 when out of memory. */
static int
ctl_print_table(char *body, size_t len)
{
	size_t nrows = 0, ncols = 1, cols = 1;
	const char **cell = NULL;
	size_t *width = NULL;
	int *numeric = NULL, rc = -1;

	for (size_t i = 0; i < len; i++) {
		if (body[i] == '\t' && ++cols > ncols)
			ncols = cols;
		if (body[i] == '\n' || i + 1 == len) {
			nrows++;
			cols = 1;
		}
	}
	if (nrows == 0)
		return 0;
	cell = calloc(nrows * ncols, sizeof(*cell));
	width = calloc(ncols, sizeof(*width));
	numeric = calloc(ncols, sizeof(*numeric));
	if (cell == NULL || width == NULL || numeric == NULL)
		goto fail;
	char *p = body, *end = body + len;
	for (size_t r = 0; r < nrows; r++) {
		char *eol = memchr(p, '\n', (size_t)(end - p));
		if (eol == NULL)
			eol = end;
		*eol = '\0';    /* body has a byte to spare after len */
		if (eol > p && eol[-1] == '\r')
			eol[-1] = '\0';
		for (size_t c = 0; c < ncols && p != NULL; c++) {
			char *tab = strchr(p, '\t');
			if (tab != NULL)
				*tab++ = '\0';
			cell[r * ncols + c] = p;
			p = tab;
		}
		p = eol + 1;
	}
	/* A column is numeric when its cells are numbers, "-" (null) or empty,
	 * and at least one is a number. */
	for (size_t c = 0; c < ncols; c++) {
		int numbers = 0, others = 0;
		for (size_t r = 0; r < nrows; r++) {
			const char *s = cell[r * ncols + c] != NULL ? cell[r * ncols + c] : "";
			size_t w = ctl_width(s);
			if (w > width[c])
				width[c] = w;
			if (r == 0 || *s == '\0' || strcmp(s, "-") == 0)
				continue;
			if (ctl_is_number(s))
				numbers++;
			else
				others++;
		}
		numeric[c] = numbers > 0 && others == 0;
	}
	/* Blanks are written only before text, so no line ends in them. */
	for (size_t r = 0; r < nrows; r++) {
		size_t blanks = 0;
		for (size_t c = 0; c < ncols; c++) {
			const char *s = cell[r * ncols + c] != NULL ? cell[r * ncols + c] : "";
			size_t pad = width[c] - ctl_width(s);
			blanks += (c > 0 ? 2 : 0) + (numeric[c] ? pad : 0);
			if (*s != '\0') {
				printf("%*s", (int)blanks, "");
				blanks = 0;
			}
			if (r == 0)
				for (const char *h = s; *h != '\0'; h++)
					putchar(toupper((unsigned char)*h));
			else
				fputs(s, stdout);
			blanks += numeric[c] ? 0 : pad;
		}
		putchar('\n');
	}
	rc = 0;
fail:
	free(cell);
	free(width);
	free(numeric);
	return rc;
}

/* The one-line result of purge, delete or close; what the server said as it
 * came if it is not the record the spec gives. */
static int
ctl_print_result(const struct ctl_command *cmd, const struct ctl_reply *r)
{
	const char *key = cmd->kind == CTL_PURGE ? "purged" : cmd->kind == CTL_DELETE ? "deleted" :
	    "closed";
	char *count = tsv_member(r->body, r->len, key);
	char *queue = tsv_member(r->body, r->len, "queue");

	if (count == NULL || (cmd->kind != CTL_CLOSE && queue == NULL)) {
		printf("%s%s", r->body, r->len > 0 && r->body[r->len - 1] == '\n' ? "" : "\n");
	} else {
		const char *s = strcmp(count, "1") == 0 ? "" : "s";
		if (cmd->kind == CTL_PURGE)
			printf("purged %s message%s from %s\n", count, s, queue);
		else if (cmd->kind == CTL_DELETE)
			printf("deleted %s (%s message%s)\n", queue, count, s);
		else
			printf("closed connection %s\n", count);
	}
	free(count);
	free(queue);
	return 0;
}

/* An HTTP error: one line with the status, the server's reason and a hint
 * where one helps. */
static void
ctl_print_http_error(const struct ctl_reply *r, const char *user)
{
	char *why = NULL;
	const char *hint = "";

	if (r->len > 0) {
		/* TSV (the line itself), or with --json the JSON: its first line */
		size_t n = strcspn(r->body, "\r\n");
		if ((why = strndup(r->body, n > 200 ? 200 : n)) != NULL)
			for (char *c = why; *c != '\0'; c++)
				if ((unsigned char)*c < 0x20)
					*c = ' ';
	}
	if (r->code == 401 && user == NULL)
		hint = " (pass --user NAME of a user with the admin mark)";
	else if (r->code == 401)
		hint = " (check the user and password given with --user)";
	else if (r->code == 403 && user != NULL && (why == NULL || *why == '\0'))
		hint = " (a user needs the admin mark: eft-passwd --admin)"; /* else eftd's reason says */
	fprintf(stderr, "eftctl: %d %s%s%s%s\n", r->code, r->reason != NULL ? r->reason : "",
	    why != NULL && *why != '\0' ? ": " : "", why != NULL ? why : "", hint);
	free(why);
}

int
main(int argc, char **argv)
{
	struct ctl_target t;
	struct ctl_reply r;
	const struct ctl_command *cmd;
	const char *url = getenv("EFTCTL_URL"), *why;
	char *user = NULL, *auth = NULL, *path = NULL, *arg = NULL, *full = NULL;
	char password[CTL_PASSWORD_MAX], prompt[128];
	double timeout = 5;
	int json = 0, status = 1, printed, opt;
	static const struct option longopts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "user", required_argument, NULL, 'U' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};

	memset(&t, 0, sizeof(t));
	memset(&r, 0, sizeof(r));
	password[0] = '\0';
	if (url == NULL || *url == '\0')
		url = CTL_DEFAULT_URL;
	opterr = 0;     /* our own one line instead of getopt's */
	while ((opt = getopt_long(argc, argv, ":u:jt:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'u':
			url = optarg;
			break;
		case 'U': {
			char *colon = strchr(optarg, ':');
			free(user);
			if ((user = strdup(optarg)) == NULL) {
				fprintf(stderr, "eftctl: out of memory\n");
				goto done;
			}
			/* Keep the password out of ps from now on. */
			if (colon != NULL)
				sodium_memzero(colon + 1, strlen(colon + 1));
			break;
		}
		case 'j':
			json = 1;
			break;
		case 't': {
			char *end;
			errno = 0;
			timeout = strtod(optarg, &end);
			if (errno != 0 || end == optarg || *end != '\0' || !(timeout > 0) ||
			    timeout > 86400) {
				status = ctl_bad_usage("--timeout wants seconds, more than 0, not ",
				    optarg);
				goto done;
			}
			break;
		}
		case 'h':
			ctl_usage(stdout);
			status = 0;
			goto done;
		case 'V':
			printf("eftctl %s\n", EFT_VERSION);
			status = 0;
			goto done;
		case ':':
			status = ctl_bad_usage("this option needs a value: ", argv[optind - 1]);
			goto done;
		default:
			if (optopt != 0) {
				char flag[3] = { '-', (char)optopt, '\0' };
				status = ctl_bad_usage("unknown option ", flag);
			} else {
				status = ctl_bad_usage("unknown option ", argv[optind - 1]);
			}
			goto done;
		}
	}
	if (optind == argc) {
		status = ctl_bad_usage("no command", "");
		goto done;
	}
	if ((cmd = ctl_command_find(argv[optind])) == NULL) {
		status = ctl_bad_usage("unknown command ", argv[optind]);
		goto done;
	}
	if (argc - optind != (cmd->arg != NULL ? 2 : 1)) {
		char what[64];
		snprintf(what, sizeof(what), "%s takes %s%s", cmd->name,
		    cmd->arg != NULL ? "one argument, " : "no arguments", cmd->arg != NULL ?
		    cmd->arg : "");
		status = ctl_bad_usage(what, "");
		goto done;
	}
	if (cmd->arg != NULL && argv[optind + 1][0] == '\0') {
		status = ctl_bad_usage(cmd->arg, " is empty");
		goto done;
	}

	/* A bare host:port is surely meant as http. */
	if (strstr(url, "://") == NULL) {
		if (asprintf(&full, "http://%s", url) < 0) {
			fprintf(stderr, "eftctl: out of memory\n");
			goto done;
		}
		url = full;
	}
	why = ctl_target_parse(&t, url);
	if (why != NULL) {
		fprintf(stderr, "eftctl: bad URL %s: %s (eftctl --help shows how)\n", url, why);
		status = 2;
		goto done;
	}

	if (user != NULL) {
		char *colon = strchr(user, ':');
		const char *env = getenv("EFTCTL_PASSWORD");
		if (colon != NULL) {
			*colon = '\0';
			snprintf(password, sizeof(password), "%s", colon + 1);
		} else if (env != NULL) {
			snprintf(password, sizeof(password), "%s", env);
		} else if (snprintf(prompt, sizeof(prompt), "Password for %s: ", user) < 0 ||
		    ask_password(prompt, password, sizeof(password)) != 0) {
			fprintf(stderr, "eftctl: no password for %s: give --user %s:PASSWORD, set "
			    "EFTCTL_PASSWORD, or run eftctl on a terminal\n", user, user);
			goto done;
		}
		if ((auth = ctl_basic_auth(user, password)) == NULL) {
			fprintf(stderr, "eftctl: out of memory\n");
			goto done;
		}
	}

	if (cmd->arg != NULL && (arg = evhttp_uriencode(argv[optind + 1], -1, 0)) == NULL) {
		fprintf(stderr, "eftctl: out of memory\n");
		goto done;
	}
	if (asprintf(&path, "%s%s%s%s", t.base, cmd->path, arg != NULL ? arg : "",
	    cmd->suffix) < 0) {
		path = NULL;
		fprintf(stderr, "eftctl: out of memory\n");
		goto done;
	}
	/* People get tables and lines made from the tab-separated answers. */
	if (ctl_request(&t, cmd->method, path, json ? "application/json" :
	    "text/tab-separated-values", auth, timeout, &r) != 0)
		goto done;
	if (r.code < 200 || r.code > 299) {
		ctl_print_http_error(&r, user);
		goto done;
	}
	if (json || r.type == NULL || strncasecmp(r.type, "text/tab-separated-values", 25) != 0)
		/* JSON as it came (and an answer that is not TSV as well). */
		printed = printf("%s%s", r.body, r.len > 0 && r.body[r.len - 1] == '\n' ? "" :
		    "\n") < 0 ? -1 : 0;
	else if (cmd->kind == CTL_TABLE)
		printed = ctl_print_table(r.body, r.len);
	else
		printed = ctl_print_result(cmd, &r);
	if (printed != 0) {
		fprintf(stderr, "eftctl: out of memory\n");
		goto done;
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "eftctl: cannot write the answer: %s\n", strerror(errno));
		goto done;
	}
	status = 0;
done:
	sodium_memzero(password, sizeof(password));
	if (auth != NULL)
		sodium_memzero(auth, strlen(auth));
	if (user != NULL)
		sodium_memzero(user, strlen(user));
	free(auth);
	free(user);
	free(arg);
	free(path);
	free(full);
	ctl_target_free(&t);
	ctl_reply_free(&r);
	return status;
}
