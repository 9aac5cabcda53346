/* proto.c - STOMP command handlers, one per client command, in a table.
 *
 * A handler returns RESULT_OK when the frame took effect (a requested RECEIPT
 * is then sent by proto_handle), RESULT_DONE when it sent what it had to
 * itself, and RESULT_FAILED after proto_error.  Bad input always gets an
 * ERROR frame naming the problem, then the connection is closed. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "eft/auth.h"
#include "eft/backend.h"
#include "eft/broker.h"
#include "eft/conn.h"
#include "eft/dest.h"
#include "eft/durable.h"
#include "eft/qargs.h"
#include "eft/hold.h"
#include "eft/log.h"
#include "eft/msg.h"
#include "eft/proto.h"
#include "eft/route.h"
#include "eft/schedule.h"
#include "eft/selector.h"
#include "eft/sub.h"
#include "eft/subject.h"
#include "eft/temp.h"
#include "eft/tx.h"
#include "eft/version.h"
#include "eft/wire.h"

enum result { RESULT_OK, RESULT_DONE, RESULT_FAILED };

/* At most max bytes of (p, len) shown back in an ERROR: the arguments of a
 * "%.*s".  SHOWN(h): a header's value, at most 200 bytes. */
#define SHOWN_N(p, len, max) (int)((len) > (max) ? (max) : (len)), (p)
#define SHOWN(h) SHOWN_N((h)->value, (h)->value_len, 200)

typedef enum result (*handler_fn)(struct conn *c, struct frame *f);

/* What an error was about, for its log line: "SEND /queue/x, user alice". */
static void
error_context(const struct conn *c, const struct frame *f, char *out, size_t outlen)
{
	char cmd[40], dest[160], user[80];
	const struct header *d = f ? frame_get(f, HDR_DESTINATION) : NULL;
	cmd[0] = dest[0] = user[0] = '\0';
	if (f != NULL && f->cmd != CMD_UNKNOWN)
		snprintf(cmd, sizeof(cmd), "%s", frame_cmd_name(f->cmd));
	else if (f != NULL && f->cmd_name != NULL)
		log_clean(cmd, sizeof(cmd), f->cmd_name, f->cmd_len);
	if (d != NULL)
		log_clean(dest, sizeof(dest), d->value, d->value_len);
	if (c->session->user != NULL)
		log_clean(user, sizeof(user), auth_user_name(c->session->user),
		    strlen(auth_user_name(c->session->user)));
	snprintf(out, outlen, "%s%s%s%s%s%s", cmd, cmd[0] && dest[0] ? " " : "", dest,
	    (cmd[0] || dest[0]) && user[0] ? ", " : "", user[0] ? "user " : "", user);
}

/* The ERROR (with receipt-id if f asked for a receipt, and one extra
 * header line if extra is not NULL), then the close once it is written. */
static void
write_error(struct conn *c, const struct frame *f, const char *message, const char *extra,
    const char *detail)
{
	const struct header *r = f ? frame_get(f, HDR_RECEIPT) : NULL;
	c->broker->stats.frames_out[STAT_OUT_ERROR]++;
	if (wire_error(&c->out, c->session->version, message, r ? r->value : NULL,
	    r ? r->value_len : 0, extra, detail) != 0)
		log_error("%s: out of memory writing ERROR", c->peer);
	conn_close_after_flush(c);
}

/* write_error, logged as a protocol error at `level` (warn for refusals
 * that concern security). */
static void
send_error(struct conn *c, const struct frame *f, enum log_level level, const char *message,
    const char *extra, const char *detail)
{
	char context[320];
	error_context(c, f, context, sizeof(context));
	log_msg(level, "%s: protocol error: %s%s%s%s", c->peer, message, context[0] ? " [" : "",
	    context, context[0] ? "]" : "");
	write_error(c, f, message, extra, detail);
}

void
proto_error(struct conn *c, const struct frame *f, const char *message, const char *detail)
{
	send_error(c, f, EFT_LOG_INFO, message, NULL, detail);
}

void
proto_end(struct conn *c, const char *message, const char *detail)
{
	write_error(c, NULL, message, NULL, detail);
}

static enum result
vfail(struct conn *c, const struct frame *f, enum log_level level, const char *message,
    const char *fmt, va_list ap)
{
	char detail[512];
	vsnprintf(detail, sizeof(detail), fmt, ap);
	send_error(c, f, level, message, NULL, detail);
	return RESULT_FAILED;
}

static enum result
fail(struct conn *c, const struct frame *f, const char *message, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum result
fail(struct conn *c, const struct frame *f, const char *message, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum result r = vfail(c, f, EFT_LOG_INFO, message, fmt, ap);
	va_end(ap);
	return r;
}

/* A refusal that concerns security (permissions, logins): logged at warn. */
static enum result
refuse(struct conn *c, const struct frame *f, const char *message, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum result
refuse(struct conn *c, const struct frame *f, const char *message, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum result r = vfail(c, f, EFT_LOG_WARN, message, fmt, ap);
	va_end(ap);
	return r;
}

static enum result
fail_oom(struct conn *c, const struct frame *f)
{
	return fail(c, f, "server out of memory", "The %s frame could not be handled.",
	    frame_cmd_name(f->cmd));
}

/* A required header, or NULL after an ERROR naming it. */
static const struct header *
require(struct conn *c, const struct frame *f, enum hdr_id id)
{
	const struct header *h = frame_get(f, id);
	if (h != NULL)
		return h;
	char message[64];
	snprintf(message, sizeof(message), "missing '%s' header", frame_hdr_name(id));
	fail(c, f, message, "A %s frame must have a '%s' header.", frame_cmd_name(f->cmd),
	    frame_hdr_name(id));
	return NULL;
}

/* A frame's destination: eftd's name for it, and the name MESSAGEs carry
 * (RabbitMQ's forms, address.h, have one of eftd's: /exchange/amq.topic/K
 * is /topic/K). */
#define DEST_REF_MAX 1024
struct dest_ref {
	const struct header *h;           /* the destination header, as given */
	enum address_kind kind;
	enum address_alias_kind alias;
	const char *name;                 /* eftd's name for it */
	size_t len;
	const char *shown;                /* the name its MESSAGEs carry */
	size_t shown_len;
	char buf[DEST_REF_MAX];           /* ... when it is made from a RabbitMQ form */
};

/* /amq/queue/NAME names a queue that must exist already (RabbitMQ's rule:
 * it declares nothing).  In cluster mode JetStream has every queue, so
 * any is taken. */
static bool
queue_exists(struct conn *c, const char *name, size_t len)
{
	const struct backend *be = c->broker->backend;
	return (be != NULL && be->ops->interest_added != NULL) ||
	    dests_find(&c->broker->dests, name, len) != NULL;
}

static __attribute__((noinline, cold)) enum result
fail_no_queue(struct conn *c, const struct frame *f, const struct header *dh)
{
	return fail(c, f, "not_found", "There is no queue '%.*s': /amq/queue/NAME names a queue "
	    "that exists already (use /queue/NAME to make one).", SHOWN_N(dh->value + 11,
	    dh->value_len - 11, 200));
}

/* One of RabbitMQ's forms (address.h): RESULT_OK with ref's name made,
 * else RESULT_FAILED after the ERROR. */
static __attribute__((noinline, cold)) enum result
alias_dest(struct conn *c, const struct frame *f, struct dest_ref *ref)
{
	const struct header *h = ref->h;
	struct address_alias a;
	switch (address_alias(h->value, h->value_len, &ref->kind, &a)) {
	case ADDRESS_OK:
		break;
	case ADDRESS_NO_EXCHANGE:
		fail(c, f, "not_found", "There is no exchange '%.*s' ('%.*s'): eftd has amq.topic, "
		    "amq.direct and amq.fanout (/exchange/NAME/ROUTING-KEY).",
		    SHOWN_N(a.rest, a.rest_len, 200), SHOWN(h));
		return RESULT_FAILED;
	case ADDRESS_NO_KEY:
		fail(c, f, "no routing key", "'%.*s' needs a routing key: /exchange/NAME/ROUTING-KEY.",
		    SHOWN(h));
		return RESULT_FAILED;
	default:
		fail(c, f, "unknown destination",
		    "'%.*s' is not a destination: use /queue/NAME (each message to one "
		    "subscriber), /topic/NAME (each message to every subscriber) or "
		    "/temp-queue/NAME (a private reply queue); RabbitMQ's /exchange/amq.topic/KEY, "
		    "/exchange/amq.direct/KEY, /exchange/amq.fanout and /amq/queue/NAME work too.",
		    SHOWN(h));
		return RESULT_FAILED;
	}
	if (a.prefix_len + a.rest_len > sizeof(ref->buf)) {
		fail(c, f, "destination too long", "'%.*s...': a RabbitMQ-style destination may be "
		    "at most %zu bytes here.", SHOWN(h), sizeof(ref->buf));
		return RESULT_FAILED;
	}
	memcpy(ref->buf, a.prefix, a.prefix_len);
	memcpy(ref->buf + a.prefix_len, a.rest, a.rest_len);
	ref->alias = a.kind;
	ref->name = ref->buf;
	ref->len = a.prefix_len + a.rest_len;
	/* RabbitMQ's topic and queue forms arrive as eftd's names; its
	 * exchanges as they were sent. */
	if (a.kind == ALIAS_TOPIC || a.kind == ALIAS_QUEUE) {
		ref->shown = ref->name;
		ref->shown_len = ref->len;
	}
	if (a.kind == ALIAS_QUEUE && !queue_exists(c, ref->name, ref->len)) {
		fail_no_queue(c, f, h);
		return RESULT_FAILED;
	}
	return RESULT_OK;
}

/* A destination eftd serves into *ref, or RESULT_FAILED after an ERROR. */
static enum result
require_dest(struct conn *c, const struct frame *f, struct dest_ref *ref)
{
	const struct header *h = require(c, f, HDR_DESTINATION);
	if (h == NULL)
		return RESULT_FAILED;
	ref->h = h;
	ref->alias = ALIAS_NONE;
	ref->name = ref->shown = h->value;
	ref->len = ref->shown_len = h->value_len;
	enum address_error e = address_parse(h->value, h->value_len, !f->plain, &ref->kind);
	if (e == ADDRESS_CRLF) {
		fail(c, f, "invalid destination", "A destination name may not contain a CR or LF.");
		return RESULT_FAILED;
	}
	if (e != ADDRESS_OK)
		return alias_dest(c, f, ref);
	return RESULT_OK;
}

/* The transaction a frame names, or NULL with *failed set after an ERROR. */
static struct tx *
frame_tx(struct conn *c, const struct frame *f, bool *failed)
{
	const struct header *h = frame_get(f, HDR_TRANSACTION);
	*failed = false;
	if (h == NULL)
		return NULL;
	struct tx *t = tx_find(c->session, h->value, h->value_len);
	if (t == NULL) {
		*failed = true;
		fail(c, f, "unknown transaction", "%s names transaction '%.*s', which was not begun.",
		    frame_cmd_name(f->cmd), SHOWN(h));
	}
	return t;
}

/* The RECEIPT a frame asked for, if it did.  With a backend on, where it
 * went is noted: it may have to wait for the backend (proto_handle).  -1
 * if out of memory. */
static __attribute__((noinline)) int
send_receipt_tracked(struct conn *c, const char *id, size_t len)
{
	uint64_t at = conn_out_pos(c);
	if (wire_receipt(&c->out, c->session->version, id, len) != 0)
		return -1;
	/* A COMMIT writes its SENDs' RECEIPTs before its own: one range. */
	if (c->receipt_end == 0)
		c->receipt_at = at;
	c->receipt_end = conn_out_pos(c);
	return 0;
}

static inline int
send_receipt_id(struct conn *c, const char *id, size_t len)
{
	c->broker->stats.frames_out[STAT_OUT_RECEIPT]++;
	if (__builtin_expect(c->receipt_tracked, 0))
		return send_receipt_tracked(c, id, len);
	return wire_receipt(&c->out, c->session->version, id, len);
}

static inline int
send_receipt(struct conn *c, const struct frame *f)
{
	const struct header *r = frame_get(f, HDR_RECEIPT);
	return r != NULL ? send_receipt_id(c, r->value, r->value_len) : 0;
}

/* ---- CONNECT / STOMP ---- */

/* A number between optional spaces, e.g. the " 0" in "10000, 0". */
static int
parse_trimmed_u64(const char *s, size_t len, uint64_t *out)
{
	while (len && *s == ' ')
		s++, len--;
	while (len && s[len - 1] == ' ')
		len--;
	return frame_parse_u64(s, len, out);
}

static int
parse_heartbeat(const struct header *h, unsigned *cx, unsigned *cy)
{
	const char *comma = memchr(h->value, ',', h->value_len);
	uint64_t a, b;
	if (comma == NULL)
		return -1;
	size_t alen = (size_t)(comma - h->value);
	if (parse_trimmed_u64(h->value, alen, &a) != 0 ||
	    parse_trimmed_u64(comma + 1, h->value_len - alen - 1, &b) != 0 ||
	    a > 86400000 || b > 86400000)
		return -1;
	*cx = (unsigned)a;
	*cy = (unsigned)b;
	return 0;
}

/* The highest version in an accept-version list, or -1. */
static int
pick_version(const struct header *h)
{
	int best = -1;
	const char *p = h->value, *end = h->value + h->value_len;
	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *tok_end = comma ? comma : end;
		while (p < tok_end && *p == ' ')
			p++;
		size_t n = (size_t)(tok_end - p);
		while (n && p[n - 1] == ' ')
			n--;
		if (n == 3 && p[0] == '1' && p[1] == '.' && p[2] >= '0' && p[2] <= '2') {
			int v = p[2] - '0';
			if (v > best)
				best = v;
		}
		p = tok_end + 1;
	}
	return best;
}

static unsigned
heartbeat_interval(unsigned asked, unsigned floor)
{
	return asked == 0 ? 0 : (asked < floor ? floor : asked);
}

/* With a users file: a known login must bring its passcode; an unknown
 * login or none is let in only with allow-anonymous.  False after the ERROR
 * (for a wrong login or passcode, a delayed one). */
static bool
authenticate(struct conn *c, const struct frame *f, const struct header *login)
{
	struct broker *b = c->broker;
	if (b->auth == NULL)
		return true;
	bool anonymous_ok = b->cfg->allow_anonymous;
	if (login == NULL && !anonymous_ok) {
		refuse(c, f, "login required", "This server requires a login and passcode "
		    "in CONNECT (allow-anonymous = no).");
		return false;
	}
	const struct header *pass = frame_get(f, HDR_PASSCODE);
	if (login != NULL && (!anonymous_ok || auth_find(b->auth, login->value, login->value_len))) {
		c->session->user = auth_check(b->auth, login->value, login->value_len,
		    pass ? pass->value : NULL, pass ? pass->value_len : 0);
		if (c->session->user != NULL)
			return true;
	} else {
		return true;
	}
	char name[80];
	log_warn("%s: authentication failed for login '%s'", c->peer,
	    log_clean(name, sizeof(name), login->value, login->value_len));
	b->stats.rejected[STAT_REJECT_LOGIN]++;
	conn_reject_later(c, b->cfg->auth_delay_ms);
	return false;
}

static enum result
handle_connect(struct conn *c, struct frame *f)
{
	if (c->state != CONN_AWAIT_CONNECT)
		return fail(c, f, "already connected", "%s was sent twice on one connection.",
		    frame_cmd_name(f->cmd));
	const struct header *av = frame_get(f, HDR_ACCEPT_VERSION);
	int v = av ? pick_version(av) : STOMP_1_0;
	if (v < 0) {
		/* The one ERROR with an extra header: which versions we speak. */
		char detail[256];
		snprintf(detail, sizeof(detail),
		    "Supported protocol versions are 1.0, 1.1 and 1.2; the client accepts '%.*s'.",
		    SHOWN_N(av->value, av->value_len, 100));
		send_error(c, f, EFT_LOG_INFO, "unsupported protocol version", "version:1.0,1.1,1.2\n",
		    detail);
		return RESULT_FAILED;
	}
	unsigned cx = 0, cy = 0;
	const struct header *hb = frame_get(f, HDR_HEART_BEAT);
	if (v >= STOMP_1_1 && hb != NULL && parse_heartbeat(hb, &cx, &cy) != 0)
		return fail(c, f, "malformed heart-beat header",
		    "heart-beat must be two numbers of milliseconds, 'cx,cy'; got '%.*s'.",
		    SHOWN_N(hb->value, hb->value_len, 100));

	const struct header *login = frame_get(f, HDR_LOGIN);
	if (!authenticate(c, f, login))
		return RESULT_FAILED;

	const struct header *cid = frame_find(f, "client-id");
	if (cid != NULL && (c->session->client_id = strndup(cid->value, cid->value_len)) == NULL)
		return fail_oom(c, f);
	session_set_version(c->session, (enum stomp_version)v);
	c->parser.version = c->session->version;
	c->state = CONN_OPEN;
	c->session->ep.open = true;
	c->session->id = c->broker->next_session++;
	unsigned floor = c->broker->cfg->heartbeat_min_ms;
	c->hb_send_ms = heartbeat_interval(cy, floor);
	c->hb_recv_ms = heartbeat_interval(cx, floor);

	char connected[256];
	int n;
	if (av == NULL) {
		/* A 1.0 client that never heard of versions gets a 1.0 reply. */
		n = snprintf(connected, sizeof(connected), "CONNECTED\nsession:eft-%" PRIu64 "\n\n",
		    c->session->id);
	} else {
		n = snprintf(connected, sizeof(connected),
		    "CONNECTED\nversion:1.%d\nheart-beat:%u,%u\nserver:eft/%s\nsession:eft-%" PRIu64
		    "\n\n", v, c->hb_send_ms, c->hb_recv_ms, EFT_VERSION, c->session->id);
	}
	/* The frame's NUL is the one snprintf wrote. */
	if (outbuf_add(&c->out, connected, (size_t)n + 1) != 0)
		return fail_oom(c, f);
	c->broker->stats.frames_out[STAT_OUT_CONNECTED]++;
	conn_schedule(c);
	/* Who it is, in the admin API's and the dashboard's words: the login it
	 * was let in as, or anonymous (a login given is not who it is then). */
	char name[80] = "", given[120] = "";
	if (c->session->user != NULL) {
		log_clean(name, sizeof(name), auth_user_name(c->session->user),
		    strlen(auth_user_name(c->session->user)));
	} else if (login != NULL) {
		log_clean(name, sizeof(name), login->value, login->value_len);
		snprintf(given, sizeof(given), " (login '%s' %s)", name, c->broker->auth == NULL ?
		    "not checked: no users-file" : "not in the users-file");
	}
	log_info("%s: connected, STOMP 1.%d, session eft-%" PRIu64 ", %s%s%s", c->peer, v,
	    c->session->id, c->session->user != NULL ? "login " : "anonymous",
	    c->session->user != NULL ? name : "", given);
	return RESULT_DONE; /* CONNECT takes no receipt */
}

/* ---- SEND ---- */

/* A persistent SEND or COMMIT while the journal cannot be written. */
static enum result
fail_unstored(struct conn *c, const struct frame *f)
{
	conn_cut_held(c); /* what they promised was not written either */
	return fail(c, f, "cannot store persistent message", "The journal cannot be written (%s): "
	    "this %s was not applied and nothing of it was stored; try again later.",
	    backend_error(c->broker->backend), frame_cmd_name(f->cmd));
}

/* Cluster mode: NATS is down, or the name cannot be a NATS subject. */
static enum result
fail_cluster(struct conn *c, const struct frame *f, int why)
{
	if (why == BACKEND_NAME)
		return fail(c, f, "destination name too long for the cluster", "A clustered "
		    "destination's name becomes a NATS subject; this one is too long.");
	if (why == BACKEND_SIZE)
		return fail(c, f, "message too large for the cluster", "A clustered message must "
		    "fit NATS's max_payload (1 MB unless nats-server is set otherwise); this one "
		    "does not.");
	conn_cut_held(c); /* what they promised may never be kept */
	return fail(c, f, "cluster unavailable", "This eftd node cannot reach NATS (%s) just now: "
	    "this %s was not applied; try again, or another node.", c->broker->cfg->cluster,
	    frame_cmd_name(f->cmd));
}


static enum result
fail_schedule_full(struct conn *c, const struct frame *f)
{
	return fail(c, f, "too many scheduled messages", "eftd holds as many scheduled messages "
	    "as it may (max-scheduled-messages, %zu); this %s was not applied. Try again once "
	    "some have been delivered.", c->broker->cfg->max_scheduled_messages,
	    frame_cmd_name(f->cmd));
}

/* A SEND with schedule headers (schedule.h): read them into *spec, or an
 * ERROR naming the one that is wrong, or saying where eftd does not
 * schedule.  Out of the common path: a SEND without them never comes here. */
static enum result
send_schedule_read(struct conn *c, const struct frame *f, enum address_kind kind, bool in_tx,
    struct schedule_spec *spec)
{
	struct broker *b = c->broker;
	const char *bad;
	char why[320];
	if (schedule_read(f, broker_now_ms(b), spec, &bad, why, sizeof(why)) != 0) {
		char message[64];
		snprintf(message, sizeof(message), "bad %s header", bad);
		return fail(c, f, message, "%s", why);
	}
	if (b->cluster != NULL)
		return fail(c, f, "scheduled delivery is not supported in cluster mode",
		    "This SEND has a schedule header (AMQ_SCHEDULED_* or x-delay); in cluster mode "
		    "eftd does not schedule messages yet. Send it without them.");
	if (kind == ADDR_TEMP_QUEUE || kind == ADDR_REPLY_QUEUE)
		return fail(c, f, "scheduled delivery to a temp-queue is not supported",
		    "A temp-queue lives only as long as its owner's connection; eftd schedules "
		    "messages to /queue/ and /topic/ destinations only.");
	if (!in_tx && !schedule_has_room(&b->sched, 1))
		return fail_schedule_full(c, f);
	return RESULT_OK;
}

/* A message's priority and expiry from the SEND's headers, in either
 * dialect: priority 0-9 (JMS/ActiveMQ; RabbitMQ's larger ones count as 9),
 * expires (ActiveMQ: absolute, ms since the epoch, 0 never) and expiration
 * (RabbitMQ: ms from now; 0, as RabbitMQ's TTL 0, goes to a consumer that
 * can take it as it arrives or dies).  With both, the sooner wins.  False
 * after an ERROR. */
static inline bool
parse_lifetime(struct conn *c, const struct frame *f, struct msg_spec *spec)
{
	const struct header *h;
	uint64_t n;
	if ((h = frame_get(f, HDR_PRIORITY)) != NULL) {
		if (frame_parse_u64(h->value, h->value_len, &n) != 0) {
			fail(c, f, "bad priority header", "priority must be a number from 0 (lowest) "
			    "to 9 (highest); got '%.*s'.", SHOWN(h));
			return false;
		}
		spec->priority = n > 9 ? 9 : (uint8_t)n;
	}
	if ((h = frame_get(f, HDR_EXPIRES)) != NULL) {
		if (frame_parse_u64(h->value, h->value_len, &n) != 0) {
			fail(c, f, "bad expires header", "expires must be a time in milliseconds "
			    "since the epoch, or 0 for never; got '%.*s'.", SHOWN(h));
			return false;
		}
		spec->expires_ms = n;
	}
	if ((h = frame_get(f, HDR_EXPIRATION)) != NULL) {
		if (frame_parse_u64(h->value, h->value_len, &n) != 0) {
			fail(c, f, "bad expiration header", "expiration must be a number of "
			    "milliseconds the message may wait; got '%.*s'.", SHOWN(h));
			return false;
		}
		uint64_t now = broker_now_ms(c->broker);
		uint64_t at = n < UINT64_MAX - now ? now + n : UINT64_MAX;
		if (spec->expires_ms == 0 || at < spec->expires_ms)
			spec->expires_ms = at;
		spec->now_or_never = n == 0 && spec->expires_ms == at; /* not if expires was past */
	}
	return true;
}

/* Does SEND f have any of priority, expires, expiration or a schedule
 * header?  Their known[] slots sit side by side (frame.h): one test. */
_Static_assert(HDR_EXPIRES == HDR_PRIORITY + 1 && HDR_EXPIRATION == HDR_PRIORITY + 2 &&
    HDR_SCHEDULED == HDR_PRIORITY + 3, "frame.h keeps a SEND's rare headers together");

static inline bool
send_has_rare(const struct frame *f)
{
	uint64_t a, b;
	memcpy(&a, &f->known[HDR_PRIORITY], sizeof(a));
	memcpy(&b, &f->known[HDR_EXPIRATION], sizeof(b));
	return (a & b) != UINT64_MAX; /* each -1 (absent) is all ones */
}

/* The rare headers of a SEND (send_has_rare): its lifetime into *spec, its
 * schedule into *sched_spec with *sched pointing at it.  Not RESULT_OK
 * after the ERROR. */
static __attribute__((noinline, cold)) enum result
send_read_rare(struct conn *c, const struct frame *f, enum address_kind kind, bool in_tx,
    struct msg_spec *spec, struct schedule_spec *sched_spec, struct schedule_spec **sched)
{
	if (!parse_lifetime(c, f, spec))
		return RESULT_FAILED;
	if (frame_get(f, HDR_SCHEDULED) == NULL)
		return RESULT_OK;
	if (send_schedule_read(c, f, kind, in_tx, sched_spec) != RESULT_OK)
		return RESULT_FAILED;
	*sched = sched_spec;
	return RESULT_OK;
}

static enum result
handle_send(struct conn *c, struct frame *f)
{
	struct dest_ref ref;
	if (require_dest(c, f, &ref) != RESULT_OK)
		return RESULT_FAILED;
	enum address_kind kind = ref.kind;
	const struct header *dh = ref.h;
	if (!auth_may_write(c->session->user, ref.name, ref.len))
		return refuse(c, f, "permission denied", "User '%s' may not send to '%.*s'.",
		    auth_user_name(c->session->user), SHOWN(dh));
	bool failed;
	struct tx *t = frame_tx(c, f, &failed);
	if (failed)
		return RESULT_FAILED;

	struct msg_spec spec = {
		.pool = &c->broker->msg_pool,
		.frame = f,
		.dest = ref.shown,
		.dest_len = ref.shown_len,
		.id = c->broker->next_msg_id++,
		.priority = MSG_PRIORITY_DEFAULT,
	};
	struct schedule_spec sched_spec, *sched = NULL;
	if (__builtin_expect(send_has_rare(f), 0) &&
	    send_read_rare(c, f, kind, t != NULL, &spec, &sched_spec, &sched) != RESULT_OK)
		return RESULT_FAILED;
	/* reply-to:/temp-queue/NAME: the receiver sees our private queue's
	 * broker-wide name, and we are subscribed to it. */
	const struct header *rt = frame_get(f, HDR_REPLY_TO);
	enum address_kind rt_kind;
	if (rt != NULL && address_parse(rt->value, rt->value_len, false, &rt_kind) == ADDRESS_OK &&
	    rt_kind == ADDR_TEMP_QUEUE) {
		/* The name becomes a subscription id: same rule as destinations. */
		if (address_parse(rt->value, rt->value_len, !f->plain, &rt_kind) != ADDRESS_OK)
			return fail(c, f, "invalid reply-to", "A temp-queue name may not contain a CR or LF.");
		struct temp *tq = temp_get(c->session, rt->value, rt->value_len);
		int rc = tq ? temp_auto_subscribe(c->session, tq) : -1;
		if (rc == -2)
			return fail(c, f, "subscription id already in use",
			    "Replies to reply-to:%s would arrive on subscription id '%s', but this "
			    "connection uses that id for another destination.", tq->name, tq->name);
		if (rc != 0)
			return fail_oom(c, f);
		spec.reply_to = dest_name(tq->dest);
		spec.reply_to_len = dest_name_len(tq->dest);
	}
	struct msg *m = msg_new(&spec);
	if (m == NULL)
		return fail_oom(c, f);
	/* Kept when it reaches a queue (or a durable subscription's), if a
	 * backend keeps queued messages (the journal); refused while it cannot. */
	const struct backend *be = c->broker->backend;
	if (__builtin_expect(be != NULL, 0) && be->ops->keep != NULL) {
		bool persistent = (kind == ADDR_QUEUE && c->broker->cfg->persistent_default) ||
		    (kind <= ADDR_TOPIC && frame_header_is_nocase(f, "persistent", "true"));
		m->persistent = persistent;
		if (persistent && backend_pressure(be) == BACKEND_FAILING) {
			msg_unref(m);
			return fail_unstored(c, f);
		}
	}
	struct dest *d = NULL;
	int rc;
	if (__builtin_expect(sched != NULL, 0)) {
		/* Held until its time (at COMMIT in a transaction, where its
		 * RECEIPT is answered too), then routed. */
		const struct header *rh = t != NULL ? frame_get(f, HDR_RECEIPT) : NULL;
		rc = t == NULL ? schedule_add(&c->broker->sched, sched, m, ref.name, ref.len, kind,
		    broker_now_ms(c->broker)) : tx_add_scheduled(t, m, ref.name, ref.len, kind,
		    rh ? rh->value : NULL, rh ? rh->value_len : 0, sched);
		if (rc == 0 && t != NULL)
			frame_forget(f, HDR_RECEIPT);
		if (rc == SCHEDULE_FULL) {
			msg_unref(m);
			return fail_schedule_full(c, f);
		}
	} else if (t == NULL) {
		rc = route_send(c->session, ref.name, ref.len, kind, m, &d);
	} else {
		/* A SEND the cluster could never take is refused now, as it is
		 * outside a transaction: at COMMIT it would refuse all of it. */
		const char *why;
		rc = route_carried(c->session, ref.name, ref.len, kind) ?
		    be->ops->check(be->impl, (int)kind, ref.name, ref.len, m, &why) : 0;
		if (rc == BACKEND_DOWN)
			rc = 0; /* the COMMIT finds out, when it checks again */
		const struct header *rh = frame_get(f, HDR_RECEIPT);
		if (rc == 0 && (rc = tx_add_send(t, m, ref.name, ref.len, kind,
		    rh ? rh->value : NULL, rh ? rh->value_len : 0)) == 0)
			frame_forget(f, HDR_RECEIPT); /* answered at COMMIT (RabbitMQ's way) */
	}
	if (rc != 0) {
		msg_unref(m); /* a failed call leaves the reference with us */
		return rc == -1 ? fail_oom(c, f) : fail_cluster(c, f, rc);
	}
	/* Flow control: a producer that filled a queue or memory waits, and so
	 * does one while the backend is busy (over max-disk, too many SENDs
	 * waiting for JetStream) or its RECEIPTs held for it pile up. */
	if (broker_memory_full(c->broker) || (__builtin_expect(be != NULL, 0) &&
	    (backend_pressure(be) == BACKEND_BUSY || conn_held_full(c))))
		conn_pause(c, NULL);
	else if (d != NULL && dest_full(d))
		conn_pause(c, d);
	return RESULT_OK;
}

/* ---- SUBSCRIBE / UNSUBSCRIBE ---- */

static bool
blank(const char *s, size_t len)
{
	while (len > 0 && (*s == ' ' || *s == '\t'))
		s++, len--;
	return len == 0;
}

/* What a SUBSCRIBE asks for, read and checked (subscribe_read). */
struct sub_request {
	enum address_kind kind;
	struct dest_ref ref;              /* its destination */
	const char *id;
	size_t id_len;
	bool has_id;
	struct sub_options opt;           /* ack, prefetch, priority, exclusive, lock */
	struct temp *tq;                  /* our own temp-queue, or NULL */
	bool durable;
	char durable_name[DURABLE_NAME_MAX];
	size_t durable_len;
	/* A topic subscription that reads from a queue of its own
	 * (durable.h), named in durable_name: RabbitMQ's x-queue-name, or
	 * one for its prefetch-count. */
	bool sub_queue;
	/* RabbitMQ's durable and auto-delete on a /queue/ SUBSCRIBE: given
	 * (has_), and their values (defaults: durable, not auto-delete). */
	bool has_durable, has_auto_delete, queue_durable, queue_auto_delete;
	struct queue_args qargs;          /* RabbitMQ's x- arguments for its queue (qargs.h) */
	const struct header *selector;    /* NULL: every message */
	bool queue_pattern;               /* a wildcard queue subscription (dest.h) */
};

/* A wildcard pattern in a SUBSCRIBE's queue or topic name (subject.h):
 * *fixed becomes the length of the part every name it matches begins with.
 * RESULT_OK for a plain name or a pattern eftd serves; RESULT_FAILED after
 * the ERROR for a malformed one, or one it does not serve yet. */
static enum result
subscribe_pattern(struct conn *c, struct frame *f, struct sub_request *rq, size_t *fixed)
{
	const struct header *dh = rq->ref.h;
	/* amq.direct and amq.fanout bind by the key as it is */
	if (rq->ref.alias == ALIAS_DIRECT || rq->ref.alias == ALIAS_FANOUT)
		return RESULT_OK;
	size_t prefix = rq->kind == ADDR_TOPIC ? TOPIC_PREFIX_LEN : QUEUE_PREFIX_LEN;
	const char *subject = rq->ref.name + prefix;
	size_t len = rq->ref.len - prefix;
	struct subject_error err;
	int rc = subject_parse(subject, len, &err);
	if (rc == 0)
		return RESULT_OK;
	if (rc < 0)
		return fail(c, f, "malformed wildcard pattern",
		    "'%.*s': %s at byte %zu of the name after %s ('*' is one element, '#' "
		    "any number, '>' one or more at the end; elements are separated by '.').",
		    SHOWN(dh), err.why, err.pos, rq->kind == ADDR_TOPIC ? TOPIC_PREFIX : QUEUE_PREFIX);
	/* The cluster carries topic patterns (NATS's own wildcards), not queue
	 * ones: JetStream refuses overlapping consumers on a work queue. */
	const struct backend *be = c->broker->backend;
	if (be != NULL && be->ops->interest_added != NULL && rq->kind == ADDR_QUEUE)
		return fail(c, f, "wildcard queue subscriptions are not supported in cluster mode",
		    "'%.*s' is a pattern; in cluster mode eftd carries wildcard subscriptions to "
		    "topics only. Subscribe to each queue by its name.", SHOWN(dh));
	*fixed = prefix + subject_fixed_prefix(subject, len);
	rq->queue_pattern = rq->kind == ADDR_QUEUE;
	return RESULT_OK;
}

/* A durable subscription to a topic pattern in cluster mode: its JetStream
 * consumer filters by the pattern in NATS's wildcards, which cannot say a
 * '#' before the end (cluster_wire.h).  RESULT_FAILED after the ERROR. */
static enum result
subscribe_durable_pattern(struct conn *c, struct frame *f, const struct sub_request *rq)
{
	const struct backend *be = c->broker->backend;
	if (be == NULL || be->ops->durable_open == NULL || rq->ref.alias == ALIAS_DIRECT ||
	    rq->ref.alias == ALIAS_FANOUT)
		return RESULT_OK;
	const char *subject = rq->ref.name + TOPIC_PREFIX_LEN;
	size_t len = rq->ref.len - TOPIC_PREFIX_LEN;
	if (subject_parse(subject, len, NULL) != 1)
		return RESULT_OK;
	size_t at = subject_inner_hash(subject, len);
	if (at == len)
		return RESULT_OK;
	return fail(c, f, "wildcard subscriptions are not supported in cluster mode",
	    "'%.*s' is a durable subscription to a pattern with '#' at byte %zu of the name "
	    "after " TOPIC_PREFIX ", before its end; in cluster mode a durable subscription's "
	    "pattern may have '#' only at the end ('*', '>' anywhere they are allowed). "
	    "Subscribe without a durable name, or with a pattern such as '%.*s'.",
	    SHOWN(rq->ref.h), at, (int)(at + 1), subject);
}

/* A true/false header, in any case (clients in Python send "True"), as
 * RabbitMQ takes it; *out is false without it.  RESULT_FAILED after an
 * ERROR naming the header for any other value. */
static enum result
header_flag(struct conn *c, struct frame *f, const char *name, bool *out)
{
	const struct header *h = frame_find(f, name);
	*out = h != NULL && h->value_len == 4 && strncasecmp(h->value, "true", 4) == 0;
	if (h == NULL || *out || (h->value_len == 5 && strncasecmp(h->value, "false", 5) == 0))
		return RESULT_OK;
	char message[64];
	snprintf(message, sizeof(message), "bad %s", name);
	return fail(c, f, message, "%s must be true or false; got '%.*s'.", name,
	    SHOWN_N(h->value, h->value_len, 100));
}

/* A whole number header from lo to hi into *out, left as it is without
 * the header; RESULT_FAILED after an ERROR naming the header. */
static enum result
header_int(struct conn *c, struct frame *f, const char *name, int32_t lo, int32_t hi,
    int32_t *out)
{
	const struct header *h = frame_find(f, name);
	if (h == NULL)
		return RESULT_OK;
	size_t neg = h->value_len > 0 && h->value[0] == '-';
	uint64_t n;
	if (frame_parse_u64(h->value + neg, h->value_len - neg, &n) == 0 && n <= INT32_MAX + neg) {
		int64_t v = neg ? -(int64_t)n : (int64_t)n;
		if (v >= lo && v <= hi) {
			*out = (int32_t)v;
			return RESULT_OK;
		}
	}
	char message[64];
	snprintf(message, sizeof(message), "bad %s", name);
	return fail(c, f, message, "%s must be a whole number from %" PRId32 " to %" PRId32
	    "; got '%.*s'.", name, lo, hi, SHOWN_N(h->value, h->value_len, 100));
}

/* What a queue subscription asks of its consumer: a priority
 * (activemq.priority 0-127, or RabbitMQ's x-priority, any int; x-priority
 * counts if both are there), to be the single active consumer
 * (activemq.exclusive, x-single-active-consumer) and RabbitMQ's
 * exclusive:true, the queue to this connection alone.  Each is checked on
 * any SUBSCRIBE; a topic's subscribers each get every message, so there
 * they mean nothing and are dropped.  RESULT_FAILED after the ERROR. */
static enum result
subscribe_consumer(struct conn *c, struct frame *f, struct sub_request *rq)
{
	bool amq_exclusive, single_active, locks;
	int32_t priority = 0;
	if (header_int(c, f, "activemq.priority", 0, 127, &priority) != RESULT_OK ||
	    header_int(c, f, "x-priority", INT32_MIN, INT32_MAX, &priority) != RESULT_OK ||
	    header_flag(c, f, "activemq.exclusive", &amq_exclusive) != RESULT_OK ||
	    header_flag(c, f, "x-single-active-consumer", &single_active) != RESULT_OK ||
	    header_flag(c, f, "exclusive", &locks) != RESULT_OK)
		return RESULT_FAILED;
	bool queue = rq->kind == ADDR_QUEUE || rq->kind == ADDR_TEMP_QUEUE;
	rq->opt.priority = queue ? priority : 0;
	rq->opt.exclusive = queue && (amq_exclusive || single_active);
	rq->opt.locks = rq->kind == ADDR_QUEUE && locks;
	if (rq->opt.locks && rq->queue_pattern)
		return fail(c, f, "wildcard queue subscriptions cannot be exclusive",
		    "'%.*s' is a pattern: it cannot lock the queues it matches to this "
		    "connection. Subscribe without exclusive:true, or to each queue by name.",
		    SHOWN(rq->ref.h));
	return RESULT_OK;
}

/* RabbitMQ's x-queue-name on a topic SUBSCRIBE, checked: a queue name
 * eftd can serve, which the user may read, and not in cluster mode.
 * RESULT_FAILED after the ERROR. */
static enum result
subscribe_queue_name(struct conn *c, struct frame *f)
{
	const struct header *h = frame_find(f, "x-queue-name");
	if (h == NULL)
		return RESULT_OK;
	const struct backend *be = c->broker->backend;
	if (be != NULL && be->ops->interest_added != NULL)
		return fail(c, f, "x-queue-name is not supported in cluster mode",
		    "In cluster mode a topic subscription has no queue of its own to name; "
		    "subscribe without x-queue-name.");
	char name[DURABLE_NAME_MAX];
	int n = snprintf(name, sizeof(name), QUEUE_PREFIX "%.*s", (int)h->value_len, h->value);
	enum address_kind kind;
	if (h->value_len == 0 || n < 0 || (size_t)n >= sizeof(name) ||
	    address_parse(name, (size_t)n, true, &kind) != ADDRESS_OK || kind != ADDR_QUEUE)
		return fail(c, f, "bad x-queue-name", "x-queue-name must be a queue name of 1 to "
		    "%zu bytes without CR or LF; got '%.*s'.", sizeof(name) - QUEUE_PREFIX_LEN - 1,
		    SHOWN_N(h->value, h->value_len, 100));
	if (!auth_may_read(c->session->user, name, (size_t)n))
		return refuse(c, f, "permission denied", "User '%s' may not read queue '%s', "
		    "which x-queue-name names.", auth_user_name(c->session->user), name);
	return RESULT_OK;
}

/* RabbitMQ's durable and auto-delete headers on a /queue/ SUBSCRIBE (not
 * /amq/queue/, which only names a queue that exists): what the queue is
 * made as, and checked against one there already.  Not in cluster mode,
 * where JetStream keeps every queue.  RESULT_FAILED after the ERROR. */
static enum result
subscribe_queue_flags(struct conn *c, struct frame *f, struct sub_request *rq)
{
	if (rq->kind != ADDR_QUEUE || rq->ref.alias == ALIAS_QUEUE)
		return RESULT_OK;
	bool durable, auto_delete;
	if (header_flag(c, f, "durable", &durable) != RESULT_OK ||
	    header_flag(c, f, "auto-delete", &auto_delete) != RESULT_OK)
		return RESULT_FAILED;
	rq->has_durable = frame_find(f, "durable") != NULL;
	rq->has_auto_delete = frame_find(f, "auto-delete") != NULL;
	rq->queue_durable = !rq->has_durable || durable;
	rq->queue_auto_delete = auto_delete;
	const struct backend *be = c->broker->backend;
	if ((!rq->queue_durable || rq->queue_auto_delete) && be != NULL &&
	    be->ops->interest_added != NULL)
		return fail(c, f, "durable:false and auto-delete:true are not supported in cluster "
		    "mode", "In cluster mode every queue is kept in JetStream; subscribe without "
		    "durable:false or auto-delete:true.");
	return RESULT_OK;
}

/* RabbitMQ's x- arguments on a SUBSCRIBE that has a queue to make: a
 * /queue/ one, or a topic's (which they give a queue of its own).  Not on a
 * durable subscription, and not in cluster mode.  RESULT_FAILED after the
 * ERROR naming the header. */
static enum result
subscribe_qargs(struct conn *c, struct frame *f, struct sub_request *rq)
{
	const char *header;
	char why[320];
	if (qargs_read(f, &rq->qargs, &header, why, sizeof(why)) != 0) {
		char message[64];
		snprintf(message, sizeof(message), "bad %s", header);
		return fail(c, f, message, "%s", why);
	}
	if (rq->qargs.given == 0)
		return RESULT_OK;
	const struct backend *be = c->broker->backend;
	if (be != NULL && be->ops->interest_added != NULL)
		return fail(c, f, "x- arguments are not supported in cluster mode",
		    "In cluster mode JetStream keeps the queues; set limits with the "
		    "configuration's policies instead.");
	if (rq->durable)
		return fail(c, f, "x- arguments on durable subscriptions are not supported",
		    "Subscribe to the durable subscription without x- arguments; a policy in the "
		    "configuration can set its limits.");
	const char *dlq = rq->qargs.values.dead_letter_queue;
	if ((rq->qargs.given & QARG_DEAD_LETTER) &&
	    !auth_may_write(c->session->user, dlq, strlen(dlq)))
		return refuse(c, f, "permission denied", "User '%s' may not send to '%s', which "
		    "x-dead-letter-routing-key names.", auth_user_name(c->session->user), dlq);
	return RESULT_OK;
}

/* Does a (not durable) topic subscription get a queue of its own (durable.h)?
 * With x-queue-name it does; with client acks and a prefetch-count too, but
 * not with a selector (messages it does not want would wait in its queue),
 * nor in cluster mode (the cluster carries topic subscriptions itself).
 * RESULT_FAILED after the ERROR. */
static enum result
subscribe_sub_queue(struct conn *c, struct frame *f, struct sub_request *rq)
{
	if (rq->kind != ADDR_TOPIC || rq->durable)
		return RESULT_OK;
	const struct header *xq = frame_find(f, "x-queue-name");
	if (xq != NULL && rq->selector != NULL)
		return fail(c, f, "selectors with x-queue-name are not supported",
		    "Subscribe to the topic without a selector, or without x-queue-name.");
	const struct backend *be = c->broker->backend;
	bool limits = rq->opt.ack != ACK_AUTO && rq->opt.prefetch > 0 && rq->selector == NULL;
	if (xq == NULL && rq->qargs.given == 0 &&
	    (!limits || (be != NULL && be->ops->interest_added != NULL)))
		return RESULT_OK;
	if (rq->qargs.given != 0 && rq->selector != NULL)
		return fail(c, f, "selectors with x- arguments on a topic are not supported",
		    "Subscribe to the topic without a selector, or without x- arguments.");
	int n = xq != NULL ?
	    snprintf(rq->durable_name, sizeof(rq->durable_name), QUEUE_PREFIX "%.*s",
	    (int)xq->value_len, xq->value) :
	    snprintf(rq->durable_name, sizeof(rq->durable_name),
	    QUEUE_PREFIX "stomp-subscription-%" PRIu64, c->broker->dests.next_sub_seq);
	if (n < 0 || (size_t)n >= sizeof(rq->durable_name))
		return fail_oom(c, f);  /* cannot be: checked (subscribe_queue_name) */
	rq->durable_len = (size_t)n;
	rq->sub_queue = true;
	return RESULT_OK;
}

/* The destination, id, ack mode, prefetch, consumer options and durable
 * name of a SUBSCRIBE; RESULT_OK, or RESULT_FAILED after the ERROR. */
static enum result
subscribe_read(struct conn *c, struct frame *f, struct sub_request *rq)
{
	if (require_dest(c, f, &rq->ref) != RESULT_OK)
		return RESULT_FAILED;
	rq->kind = rq->ref.kind;
	const struct header *dh = rq->ref.h;
	size_t fixed = rq->ref.len;
	if (rq->kind <= ADDR_TOPIC && subscribe_pattern(c, f, rq, &fixed) != RESULT_OK)
		return RESULT_FAILED;
	/* A pattern: the user's read permission must cover every name it can
	 * match, which all begin with its fixed part. */
	if (!auth_may_read(c->session->user, rq->ref.name, fixed))
		return refuse(c, f, "permission denied", "User '%s' may not subscribe to '%.*s'%s.",
		    auth_user_name(c->session->user), SHOWN(dh), fixed < rq->ref.len ?
		    " (a pattern needs read permission for every name it can match)" : "");
	if (rq->kind == ADDR_REPLY_QUEUE)
		return fail(c, f, "reply queues are private",
		    "Only the connection that made a temp-queue receives from it: "
		    "SUBSCRIBE to /temp-queue/NAME, or just SEND with reply-to:/temp-queue/NAME.");
	const struct header *idh = frame_get(f, HDR_ID);
	if (idh == NULL && c->session->version != STOMP_1_0 && require(c, f, HDR_ID) == NULL)
		return RESULT_FAILED;
	/* STOMP 1.0 lets the destination name a subscription without an id. */
	rq->id = idh ? idh->value : dh->value;
	rq->id_len = idh ? idh->value_len : dh->value_len;
	rq->has_id = idh != NULL;

	/* Our own temp-queue: the client's subscription replaces the one
	 * eftd made for it (ActiveMQ-style clients subscribe themselves). */
	if (rq->kind == ADDR_TEMP_QUEUE) {
		rq->tq = temp_get(c->session, dh->value, dh->value_len);
		if (rq->tq == NULL)
			return fail_oom(c, f);
		if (rq->tq->auto_sub != NULL)
			sub_end(rq->tq->auto_sub);
	}
	struct sub *dup;
	HASH_FIND(hh, c->session->ep.subs, rq->id, rq->id_len, dup);
	if (dup != NULL)
		return fail(c, f, "subscription id already in use",
		    "This connection already has a subscription '%.*s'.",
		    SHOWN_N(rq->id, rq->id_len, 200));

	rq->opt.ack = ACK_AUTO;
	const struct header *ah = frame_get(f, HDR_ACK);
	if (ah != NULL && sub_ack_mode_parse(ah->value, ah->value_len, &rq->opt.ack) != 0)
		return fail(c, f, "bad ack mode",
		    "ack must be auto, client or client-individual; got '%.*s'.",
		    SHOWN_N(ah->value, ah->value_len, 100));
	size_t max = c->broker->cfg->max_subscriptions;
	if (HASH_COUNT(c->session->ep.subs) >= max) {
		char message[96];
		snprintf(message, sizeof(message), "too many subscriptions: over %zu "
		    "(max-subscriptions is %zu)", max, max);
		return fail(c, f, message,
		    "This connection has %u subscriptions, the most allowed (max-subscriptions).",
		    HASH_COUNT(c->session->ep.subs));
	}
	uint64_t prefetch = 0;
	const struct header *ph = frame_get(f, HDR_PREFETCH_COUNT);
	if (ph == NULL)
		ph = frame_find(f, "activemq.prefetchSize");
	if (ph != NULL && (frame_parse_u64(ph->value, ph->value_len, &prefetch) != 0 ||
	    prefetch > UINT32_MAX))
		return fail(c, f, "bad prefetch-count", "prefetch-count must be a number; got '%.*s'.",
		    SHOWN_N(ph->value, ph->value_len, 100));
	rq->opt.prefetch = (uint32_t)prefetch;
	if (subscribe_consumer(c, f, rq) != RESULT_OK ||
	    subscribe_queue_flags(c, f, rq) != RESULT_OK)
		return RESULT_FAILED;

	if (rq->kind == ADDR_TOPIC && subscribe_queue_name(c, f) != RESULT_OK)
		return RESULT_FAILED;
	rq->durable = rq->kind == ADDR_TOPIC && durable_name(c->session, f, rq->durable_name,
	    sizeof(rq->durable_name), &rq->durable_len);
	if (rq->durable && subscribe_durable_pattern(c, f, rq) != RESULT_OK)
		return RESULT_FAILED;
	/* RabbitMQ names a durable subscription by its id: without one (STOMP
	 * 1.0 allows that) it would silently be a plain subscription. */
	if (rq->kind == ADDR_TOPIC && !rq->has_id && (frame_header_is_nocase(f, "durable", "true") ||
	    frame_header_is_nocase(f, "persistent", "true")))
		return fail(c, f, "missing 'id' header",
		    "A durable subscription (durable:true or persistent:true) is named by its "
		    "'id' header: give one.");
	rq->selector = frame_get(f, HDR_SELECTOR);
	if (rq->selector != NULL && blank(rq->selector->value, rq->selector->value_len))
		rq->selector = NULL; /* every message, as with none */
	if (rq->selector != NULL && rq->durable)
		return fail(c, f, "selectors on durable subscriptions are not supported",
		    "Subscribe to the topic without a selector, or without a durable name.");
	bool makes_queue = rq->kind == ADDR_TOPIC ||
	    (rq->kind == ADDR_QUEUE && rq->ref.alias != ALIAS_QUEUE);
	if (makes_queue && subscribe_qargs(c, f, rq) != RESULT_OK)
		return RESULT_FAILED;
	return subscribe_sub_queue(c, f, rq);
}

/* The compiled selector into *sel (NULL if none); RESULT_FAILED after the
 * ERROR. */
static enum result
subscribe_selector(struct conn *c, struct frame *f, const struct header *selh,
    struct selector **sel)
{
	*sel = NULL;
	if (selh == NULL)
		return RESULT_OK;
	char why[160], message[192];
	*sel = selector_compile(selh->value, selh->value_len, why, sizeof(why));
	if (*sel != NULL)
		return RESULT_OK;
	const char *text = strncmp(why, "selector: ", 10) == 0 ? why + 10 : why;
	snprintf(message, sizeof(message), "invalid selector: %s", text);
	return fail(c, f, message, "The selector '%.*s' is not a JMS selector: %s.", SHOWN(selh),
	    text);
}

static enum result
fail_durable_in_use(struct conn *c, const struct frame *f, const char *name)
{
	return fail(c, f, "durable subscription in use", "Another connection is subscribed to "
	    "durable subscription '%s'.", durable_shown(name));
}

/* A queue's durable or auto-delete header that differs from what the queue
 * is: RabbitMQ's PRECONDITION_FAILED (inequivalent arg). */
static enum result
fail_inequivalent(struct conn *c, const struct frame *f, const struct dest *d, const char *header,
    bool asked, bool is)
{
	return fail(c, f, "precondition_failed", "Queue '%s' exists with %s:%s, and this "
	    "SUBSCRIBE asks for %s:%s.", dest_name(d) + QUEUE_PREFIX_LEN, header,
	    is ? "true" : "false", header, asked ? "true" : "false");
}

/* A queue just made takes the x- arguments given over its policy: 0, or -1
 * if out of memory. */
static int
queue_set_qargs(struct dest *d, const struct queue_args *qa)
{
	if (qa->given == 0)
		return 0;
	struct dest_policy p = *dest_policy(d);
	qargs_apply(qa, &p);
	return dest_set_policy(d, &p);
}

/* An x- argument unlike the queue's: RabbitMQ's PRECONDITION_FAILED. */
static enum result
fail_qarg_differs(struct conn *c, const struct frame *f, const struct dest *d, const char *header)
{
	return fail(c, f, "precondition_failed", "Queue '%s' exists with another %s than this "
	    "SUBSCRIBE gives (inequivalent arg).", dest_name(d) + QUEUE_PREFIX_LEN, header);
}

/* A /queue/ SUBSCRIBE's queue: made as its durable and auto-delete headers
 * say, or, if it is there, checked against those given.  NULL with *res
 * as for subscribe_target. */
static struct dest *
subscribe_queue(struct conn *c, struct frame *f, const struct sub_request *rq, enum result *res)
{
	struct dests *dests = &c->broker->dests;
	struct dest *d = dests_find(dests, rq->ref.name, rq->ref.len);
	if (d == NULL) {
		d = dests_get(dests, rq->ref.name, rq->ref.len, DEST_QUEUE);
		if (d == NULL || dest_kind(d) != DEST_QUEUE)
			return d;
		if (queue_set_qargs(d, &rq->qargs) != 0) {
			dests_release(dests, d);
			return NULL;
		}
		dest_set_transient(d, !rq->queue_durable || rq->queue_auto_delete);
		dest_set_auto_delete(d, rq->queue_auto_delete);
		return d;
	}
	if (dest_kind(d) != DEST_QUEUE)
		return d;
	const char *differs = qargs_differ(&rq->qargs, dest_policy(d));
	if (differs != NULL)
		*res = fail_qarg_differs(c, f, d, differs);
	else if (rq->has_auto_delete && rq->queue_auto_delete != dest_auto_delete(d))
		*res = fail_inequivalent(c, f, d, "auto-delete", rq->queue_auto_delete,
		    dest_auto_delete(d));
	else if (rq->has_durable && rq->queue_durable == dest_transient(d))
		*res = fail_inequivalent(c, f, d, "durable", rq->queue_durable, !dest_transient(d));
	else
		return d;
	return NULL;
}

/* The destination the subscription takes messages from: a durable
 * subscription's own queue (kept by a backend that keeps durable
 * subscriptions itself, or fed by the topic here), our temp-queue, or the
 * queue or topic named.  NULL with *res set: RESULT_FAILED after an ERROR,
 * RESULT_OK when out of memory. */
static struct dest *
subscribe_target(struct conn *c, struct frame *f, const struct sub_request *rq,
    enum result *res)
{
	struct dests *dests = &c->broker->dests;
	const struct backend *be = c->broker->backend;
	struct dest *d;
	*res = RESULT_OK;
	if (rq->durable && be != NULL && be->ops->durable_open != NULL) {
		/* JetStream keeps it: the queue here only buffers. */
		d = dests_get(dests, rq->durable_name, rq->durable_len, DEST_QUEUE);
		if (d != NULL && dest_subscribers(d) > 0) {
			dests_release(dests, d);
			*res = fail_durable_in_use(c, f, rq->durable_name);
			return NULL;
		}
		return d;
	}
	if (rq->durable) {
		/* A queue of its own, fed by the topic, kept while we are away. */
		enum durable_open_error why;
		d = durable_open(c->broker, rq->durable_name, rq->durable_len, rq->ref.name,
		    rq->ref.len, &why);
		if (d == NULL && why == DURABLE_IN_USE)
			*res = fail_durable_in_use(c, f, rq->durable_name);
		return d;
	}
	if (rq->sub_queue) {
		enum durable_open_error why;
		d = subscription_queue_open(c->broker, rq->durable_name, rq->durable_len,
		    rq->ref.name, rq->ref.len, &why);
		if (d == NULL && why == DURABLE_TAKEN)
			*res = fail(c, f, "precondition_failed", "x-queue-name names queue '%s', "
			    "which exists and is not a subscription queue of '%.*s'.",
			    rq->durable_name, SHOWN(rq->ref.h));
		if (d == NULL)
			return NULL;
		/* Just made (nobody subscribed yet), or shared. */
		const char *differs = dest_subscribers(d) > 0 ?
		    qargs_differ(&rq->qargs, dest_policy(d)) : NULL;
		if (differs != NULL) {
			*res = fail_qarg_differs(c, f, d, differs);
			return NULL;
		}
		if (dest_subscribers(d) == 0 && queue_set_qargs(d, &rq->qargs) != 0) {
			dests_release(dests, d);
			return NULL;
		}
		return d;
	}
	if (rq->tq != NULL)
		return rq->tq->dest;
	if (rq->queue_pattern)
		return dests_get_queue_pattern(dests, rq->ref.name, rq->ref.len);
	if (rq->kind == ADDR_QUEUE && rq->ref.alias != ALIAS_QUEUE)
		return subscribe_queue(c, f, rq, res);
	return dests_get(dests, rq->ref.name, rq->ref.len,
	    rq->kind == ADDR_TOPIC ? DEST_TOPIC : DEST_QUEUE);
}

/* A backend that carries subscriptions (the cluster) hears of s: 0, or
 * BACKEND_NOMEM / BACKEND_NAME. */
static int
subscribe_tell_backend(struct conn *c, const struct sub_request *rq, struct dest *d,
    const struct sub *s)
{
	const struct backend *be = c->broker->backend;
	if (be == NULL || rq->tq != NULL)
		return 0;
	if (rq->durable && be->ops->durable_open != NULL)
		return be->ops->durable_open(be->impl, d, s, rq->ref.name, rq->ref.len);
	return be->ops->interest_added ? be->ops->interest_added(be->impl, d, s) : 0;
}

/* RabbitMQ's exclusive queues: a queue locked to another connection, or
 * one that another connection consumes from when this one asks for the
 * lock, is refused with RabbitMQ's word for it.  RESULT_FAILED after the
 * ERROR. */
static enum result
subscribe_lock(struct conn *c, struct frame *f, const struct sub_request *rq,
    const struct dest *d)
{
	switch (dest_lock_check(d, &c->session->ep, rq->opt.locks)) {
	case DEST_LOCK_OK:
		return RESULT_OK;
	case DEST_LOCK_HELD:
		return fail(c, f, "resource_locked", "Queue '%.*s' is locked: another connection "
		    "subscribed to it with exclusive:true, and only that connection may consume "
		    "from it while that subscription lasts.", SHOWN(rq->ref.h));
	case DEST_LOCK_SHARED:
		break;
	}
	return fail(c, f, "resource_locked", "Queue '%.*s' cannot be locked to this connection "
	    "(exclusive:true): another connection consumes from it.", SHOWN(rq->ref.h));
}

static enum result
handle_subscribe(struct conn *c, struct frame *f)
{
	struct sub_request rq = { 0 };
	if (subscribe_read(c, f, &rq) != RESULT_OK)
		return RESULT_FAILED;
	const struct backend *be = c->broker->backend;
	if (rq.tq == NULL && be != NULL && be->ops->interest_added != NULL &&
	    backend_pressure(be) == BACKEND_FAILING)
		return fail_cluster(c, f, BACKEND_DOWN);
	struct selector *sel;
	if (subscribe_selector(c, f, rq.selector, &sel) != RESULT_OK)
		return RESULT_FAILED;
	enum result res;
	struct dest *d = subscribe_target(c, f, &rq, &res);
	if (d == NULL) {
		selector_free(sel);
		return res == RESULT_OK ? fail_oom(c, f) : res;
	}
	if (dest_kind(d) == DEST_QUEUE && subscribe_lock(c, f, &rq, d) != RESULT_OK) {
		dests_release(&c->broker->dests, d);
		selector_free(sel);
		return RESULT_FAILED;
	}
	struct sub *s = sub_new(&c->session->ep, d, rq.id, rq.id_len, rq.has_id, &rq.opt, sel);
	if (s == NULL) {
		dests_release(&c->broker->dests, d);
		return fail_oom(c, f);
	}
	int rc = subscribe_tell_backend(c, &rq, d, s);
	if (rc != 0) {
		sub_end(s);
		return rc == BACKEND_NOMEM ? fail_oom(c, f) : fail_cluster(c, f, rc);
	}
	log_debug("%s: subscribed to %s as '%s'", c->peer, dest_name(d), s->id);
	/* RECEIPT first, then whatever was waiting in the queue. */
	if (send_receipt(c, f) != 0)
		return fail_oom(c, f);
	sub_wake(s); /* a queue's, or each of a wildcard subscription's queues */
	return RESULT_DONE;
}

/* UNSUBSCRIBE with a durable subscription's headers ends it. */
static enum result
end_durable(struct conn *c, struct frame *f, const char *name, size_t len, bool had_sub)
{
	struct dest *q = dests_find(&c->broker->dests, name, len);
	const char *shown = durable_shown(name);
	const struct backend *be = c->broker->backend;
	if (be != NULL && be->ops->durable_close != NULL) {
		/* JetStream knows whether it exists; ending one that does not is
		 * logged there, not an error here. */
		if (q != NULL && dest_subscribers(q) > 0)
			return fail_durable_in_use(c, f, name);
		if (backend_pressure(be) == BACKEND_FAILING)
			return fail_cluster(c, f, BACKEND_DOWN);
		be->ops->durable_close(be->impl, name, len);
		return RESULT_OK;
	}
	if (q == NULL || dest_bound_topic(q) == NULL) {
		if (had_sub)
			return RESULT_OK;
		return fail(c, f, "no such subscription", "There is no durable subscription '%s'.",
		    shown);
	}
	if (dest_subscribers(q) > 0)
		return fail_durable_in_use(c, f, name);
	durable_remove(c->broker, q);
	return RESULT_OK;
}

static enum result
handle_unsubscribe(struct conn *c, struct frame *f)
{
	char durable[DURABLE_NAME_MAX];
	size_t durable_len;
	bool is_durable = durable_name(c->session, f, durable, sizeof(durable), &durable_len);
	const struct header *h = frame_get(f, HDR_ID);
	if (h == NULL && c->session->version == STOMP_1_0)
		h = frame_get(f, HDR_DESTINATION);
	if (h == NULL && !is_durable && require(c, f, HDR_ID) == NULL)
		return RESULT_FAILED;
	struct sub *s = NULL;
	if (h != NULL)
		HASH_FIND(hh, c->session->ep.subs, h->value, h->value_len, s);
	if (s == NULL && !is_durable)
		return fail(c, f, "no such subscription",
		    "UNSUBSCRIBE names '%.*s', which is not a subscription of this connection.",
		    SHOWN(h));
	if (s != NULL)
		sub_end(s);
	return is_durable ? end_durable(c, f, durable, durable_len, s != NULL) : RESULT_OK;
}

/* ---- ACK / NACK ---- */

/* Which delivery an ACK or NACK means.  1.2 names it by `id` (our ack
 * header); 1.1 by subscription + message-id; 1.0 by message-id alone.  Any
 * of these is accepted in any version.  Returns false if none is pending. */
static bool
find_delivery(struct conn *c, const struct frame *f, struct delivery_key *k)
{
	const struct header *idh = frame_get(f, HDR_ID);
	const struct header *mh = frame_get(f, HDR_MESSAGE_ID);
	const struct header *sh = frame_get(f, HDR_SUBSCRIPTION);
	if (idh != NULL && sub_ack_id_parse(idh->value, idh->value_len, k) == 0)
		return true;
	if (mh == NULL)
		mh = idh;
	if (mh == NULL || frame_parse_u64(mh->value, mh->value_len, &k->msg_id) != 0)
		return false;
	struct sub *s, *tmp;
	if (sh != NULL) {
		HASH_FIND(hh, c->session->ep.subs, sh->value, sh->value_len, s);
		if (s == NULL)
			return false;
		k->sub_seq = s->seq;
		return true;
	}
	HASH_ITER(hh, c->session->ep.subs, s, tmp) {
		k->sub_seq = s->seq;
		if (sub_find_delivery(&c->session->ep, k) != NULL)
			return true;
	}
	return false;
}

static enum result
settle(struct conn *c, struct frame *f, bool nack)
{
	if (frame_get(f, HDR_ID) == NULL && frame_get(f, HDR_MESSAGE_ID) == NULL)
		return fail(c, f, "missing 'id' header",
		    "%s must name the message: 'id' (the MESSAGE's ack header) in STOMP 1.2, "
		    "'message-id' in 1.0 and 1.1.", frame_cmd_name(f->cmd));
	bool failed;
	struct tx *t = frame_tx(c, f, &failed);
	if (failed)
		return RESULT_FAILED;
	struct delivery_key k;
	if (!find_delivery(c, f, &k)) {
		/* Already settled (e.g. by an earlier cumulative ACK): harmless. */
		log_debug("%s: %s for a message not pending", c->peer, frame_cmd_name(f->cmd));
		return RESULT_OK;
	}
	/* NACK requeue:false (RabbitMQ; in any case, as it takes stomp.py's
	 * "False") rejects: the message dies. */
	enum settle how = !nack ? SETTLE_ACK :
	    frame_header_is_nocase(f, "requeue", "false") ? SETTLE_REJECT : SETTLE_NACK;
	if (t != NULL)
		return tx_add_settle(t, &k, how) == 0 ? RESULT_OK : fail_oom(c, f);
	sub_settle(&c->session->ep, &k, how);
	return RESULT_OK;
}

static enum result
handle_ack(struct conn *c, struct frame *f)
{
	return settle(c, f, false);
}

static enum result
handle_nack(struct conn *c, struct frame *f)
{
	return settle(c, f, true);
}

/* ---- BEGIN / COMMIT / ABORT ---- */

static enum result
handle_begin(struct conn *c, struct frame *f)
{
	const struct header *h = require(c, f, HDR_TRANSACTION);
	if (h == NULL)
		return RESULT_FAILED;
	if (tx_find(c->session, h->value, h->value_len) != NULL)
		return fail(c, f, "transaction already begun", "Transaction '%.*s' is already open.",
		    SHOWN(h));
	return tx_begin(c->session, h->value, h->value_len) ? RESULT_OK : fail_oom(c, f);
}

/* The RECEIPT of a SEND in a committed transaction. */
static void
commit_receipt(void *arg, const char *id, size_t len)
{
	struct conn *c = arg;
	if (send_receipt_id(c, id, len) != 0)
		log_error("%s: out of memory writing RECEIPT", c->peer);
}

static enum result
end_tx(struct conn *c, struct frame *f, bool commit)
{
	if (require(c, f, HDR_TRANSACTION) == NULL)
		return RESULT_FAILED;
	bool failed;
	struct tx *t = frame_tx(c, f, &failed);
	if (failed)
		return RESULT_FAILED;
	if (!commit) {
		tx_abort(c->session, t);
		return RESULT_OK;
	}
	if (c->broker->backend != NULL && c->broker->backend->ops->keep != NULL &&
	    broker_pressure(c->broker) == BACKEND_FAILING && tx_persistent(t)) {
		tx_abort(c->session, t);
		return fail_unstored(c, f);
	}
	int rc = tx_commit(c->session, t, commit_receipt, c);
	if (rc == SCHEDULE_FULL)
		return fail_schedule_full(c, f);
	return rc == 0 ? RESULT_OK : rc == -1 ? fail_oom(c, f) : fail_cluster(c, f, rc);
}

static enum result
handle_commit(struct conn *c, struct frame *f)
{
	return end_tx(c, f, true);
}

static enum result
handle_abort(struct conn *c, struct frame *f)
{
	return end_tx(c, f, false);
}

/* ---- DISCONNECT ---- */

static enum result
handle_disconnect(struct conn *c, struct frame *f)
{
	if (send_receipt(c, f) != 0)
		log_error("%s: out of memory writing RECEIPT", c->peer);
	log_debug("%s: DISCONNECT", c->peer);
	conn_close_after_flush(c);
	return RESULT_DONE;
}

/* ---- a reloaded users file ---- */

size_t
proto_replace_users(struct broker *b, struct auth *users)
{
	size_t closed = 0;
	for (struct conn *c = b->set->conns, *next; c != NULL; c = next) {
		next = c->next;
		if (c->session->user == NULL)
			continue;
		const char *name = auth_user_name(c->session->user);
		const struct auth_user *u = auth_find(users, name, strlen(name));
		if (u != NULL) {
			c->session->user = u; /* new permissions apply at once */
			continue;
		}
		if (c->state == CONN_OPEN) {
			char detail[200];
			snprintf(detail, sizeof(detail), "User '%.*s' is no longer in the users file.",
			    SHOWN_N(name, strlen(name), 120));
			log_warn("%s: closing: user removed from the users file [user %s]", c->peer,
			    name);
			proto_end(c, "user removed", detail);
			closed++;
		}
		c->session->user = NULL; /* closing: it handles no more frames */
	}
	auth_free(b->auth);
	b->auth = users;
	return closed;
}

static const handler_fn handlers[CMD_COUNT] = {
	[CMD_CONNECT] = handle_connect,
	[CMD_STOMP] = handle_connect,
	[CMD_SEND] = handle_send,
	[CMD_SUBSCRIBE] = handle_subscribe,
	[CMD_UNSUBSCRIBE] = handle_unsubscribe,
	[CMD_ACK] = handle_ack,
	[CMD_NACK] = handle_nack,
	[CMD_BEGIN] = handle_begin,
	[CMD_COMMIT] = handle_commit,
	[CMD_ABORT] = handle_abort,
	[CMD_DISCONNECT] = handle_disconnect,
};

static inline void handle(struct conn *c, struct frame *f);

/* With a backend (the journal or JetStream): a frame that asked something
 * of it makes the connection's promise number move, and a RECEIPT written
 * while that is not yet kept is held until it is (hold.h), whichever frame
 * it answers: a RECEIPT says that everything before it was done. */
static __attribute__((noinline)) void
handle_kept(struct conn *c, struct frame *f)
{
	struct broker *b = c->broker;
	if (hold_reserve(&c->holds) != 0) {
		fail_oom(c, f);
		return;
	}
	uint64_t before = broker_promised(b);
	c->receipt_tracked = true;
	c->receipt_at = c->receipt_end = 0;
	handle(c, f);
	c->receipt_tracked = false;
	uint64_t after = broker_promised(b);
	if (after != before)
		c->promised = after;
	if (c->receipt_end != 0 && c->promised > b->kept)
		conn_hold(c, c->receipt_at, c->receipt_end);
}

void
proto_handle(struct conn *c, struct frame *f)
{
	if (__builtin_expect(c->broker->backend == NULL, 1))
		handle(c, f);
	else
		handle_kept(c, f);
}

static inline __attribute__((always_inline)) void
handle(struct conn *c, struct frame *f)
{
	c->broker->stats.frames_in[f->cmd]++;
	if (f->cmd == CMD_UNKNOWN) {
		fail(c, f, "unknown command", "'%.*s' is not a STOMP client command.",
		    SHOWN_N(f->cmd_name, f->cmd_len, 64));
		return;
	}
	if (c->state == CONN_AWAIT_CONNECT && f->cmd != CMD_CONNECT && f->cmd != CMD_STOMP) {
		fail(c, f, "not connected", "The first frame must be CONNECT or STOMP, not %s.",
		    frame_cmd_name(f->cmd));
		return;
	}
	if (handlers[f->cmd](c, f) == RESULT_OK && send_receipt(c, f) != 0)
		fail_oom(c, f);
}
