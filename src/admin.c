/* admin.c - the admin API's routes and answers (see admin.h and
 * docs/admin-api.md).  Lists are written through one small table writer,
 * so that the JSON and the tab-separated form of a list cannot disagree. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <uthash.h>

#include "eft/admin.h"
#include "eft/auth.h"
#include "eft/broker.h"
#include "eft/conn.h"
#include "eft/durable.h"
#include "eft/log.h"
#include "eft/metrics.h"
#include "eft/proto.h"
#include "eft/server.h"
#include "eft/sub.h"
#include "eft/version.h"

#define JSON_TYPE "application/json"
#define TSV_TYPE "text/tab-separated-values; charset=utf-8"
#define QUEUE_PREFIX "/queue/"

/* ---- the table writer ---- */

/* A JSON array of objects, or a header line and tab-separated rows.  A
 * record (the overview) is one JSON object, or one name-value row per field. */
struct table {
	struct sbuf *out;
	enum admin_format fmt;
	bool record;
	size_t rows, col;
};

static void
tsv_field(struct sbuf *out, const char *p, size_t n)
{
	size_t start = 0;
	for (size_t i = 0; i < n; i++) {
		const char *esc = p[i] == '\t' ? "\\t" : p[i] == '\n' ? "\\n" : p[i] == '\r' ? "\\r" :
		    p[i] == '\\' ? "\\\\" : NULL;
		if (esc == NULL)
			continue;
		sbuf_add(out, p + start, i - start);
		sbuf_add(out, esc, 2);
		start = i + 1;
	}
	sbuf_add(out, p + start, n - start);
}

static void
table_begin(struct table *t, struct sbuf *out, enum admin_format fmt, const char *const *cols,
    size_t ncols)
{
	*t = (struct table){ .out = out, .fmt = fmt };
	if (fmt == ADMIN_JSON) {
		sbuf_addc(out, '[');
		return;
	}
	for (size_t i = 0; i < ncols; i++) {
		sbuf_adds(out, cols[i]);
		sbuf_addc(out, i + 1 < ncols ? '\t' : '\n');
	}
}

static void
record_begin(struct table *t, struct sbuf *out, enum admin_format fmt)
{
	*t = (struct table){ .out = out, .fmt = fmt, .record = true };
	sbuf_adds(out, fmt == ADMIN_JSON ? "{" : "name\tvalue\n");
}

static void
table_row(struct table *t)
{
	if (t->fmt == ADMIN_JSON)
		sbuf_adds(t->out, t->rows ? ",{" : "{");
	t->rows++;
	t->col = 0;
}

static void
table_row_end(struct table *t)
{
	sbuf_addc(t->out, t->fmt == ADMIN_JSON ? '}' : '\n');
}

static void
table_end(struct table *t)
{
	if (t->fmt == ADMIN_JSON)
		sbuf_addc(t->out, t->record ? '}' : ']');
}

/* Before a field's value: its key (JSON, and a record's TSV row). */
static void
table_key(struct table *t, const char *key)
{
	if (t->fmt == ADMIN_JSON) {
		sbuf_adds(t->out, t->col ? ",\"" : "\"");
		sbuf_adds(t->out, key);
		sbuf_add(t->out, "\":", 2);
	} else if (t->record) {
		sbuf_adds(t->out, key);
		sbuf_addc(t->out, '\t');
	}
	else if (t->col)
		sbuf_addc(t->out, '\t');
	t->col++;
}

static void
table_value_end(struct table *t)
{
	if (t->fmt == ADMIN_TSV && t->record)
		sbuf_addc(t->out, '\n');
}

static void
table_str(struct table *t, const char *key, const char *p, size_t n)
{
	table_key(t, key);
	if (t->fmt == ADMIN_JSON)
		sbuf_json_string(t->out, p, n);
	else
		tsv_field(t->out, p, n);
	table_value_end(t);
}

static void
table_cstr(struct table *t, const char *key, const char *s)
{
	if (s == NULL) {
		table_key(t, key);
		sbuf_adds(t->out, t->fmt == ADMIN_JSON ? "null" : "-");
		table_value_end(t);
		return;
	}
	table_str(t, key, s, strlen(s));
}

static void
table_u64(struct table *t, const char *key, uint64_t v)
{
	table_key(t, key);
	sbuf_add_u64(t->out, v);
	table_value_end(t);
}

/* ---- replies ---- */

static void
reply_error(struct admin_reply *r, enum admin_format fmt, int status, const char *fmtstr, ...)
    __attribute__((format(printf, 4, 5)));

static void
reply_error(struct admin_reply *r, enum admin_format fmt, int status, const char *fmtstr, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmtstr);
	vsnprintf(text, sizeof(text), fmtstr, ap);
	va_end(ap);
	sbuf_free(&r->body);
	r->status = status;
	if (fmt == ADMIN_JSON) {
		r->content_type = JSON_TYPE;
		sbuf_adds(&r->body, "{\"error\":");
		sbuf_json_string(&r->body, text, strlen(text));
		sbuf_adds(&r->body, "}\n");
	} else {
		r->content_type = TSV_TYPE;
		tsv_field(&r->body, text, strlen(text));
		sbuf_addc(&r->body, '\n');
	}
}

static void
reply_ok(struct admin_reply *r, enum admin_format fmt)
{
	r->status = 200;
	r->content_type = fmt == ADMIN_JSON ? JSON_TYPE : TSV_TYPE;
	if (fmt == ADMIN_JSON)
		sbuf_addc(&r->body, '\n');
}

void
admin_reply_free(struct admin_reply *r)
{
	sbuf_free(&r->body);
}

const char *
admin_reply_body(const struct admin_reply *r, size_t *len)
{
	if (r->fixed != NULL) {
		*len = r->fixed_len;
		return r->fixed;
	}
	*len = r->body.len;
	return r->body.data ? r->body.data : "";
}

/* ---- what is read ---- */

static uint64_t
wall_ms(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

static const char *
queue_type(const struct dest *d)
{
	if (dest_temp(d) != NULL)
		return "temp-queue";
	if (dest_bound_topic(d) != NULL) /* a subscription queue goes with its subscribers */
		return dest_auto_delete(d) ? "subscription" : "durable";
	return "queue";
}

static void
api_overview(struct broker *b, struct table *t)
{
	struct dests_totals n;
	dests_totals(&b->dests, &n);
	const struct broker_stats *st = &b->stats;
	uint64_t dropped = 0;
	for (int i = 0; i < STAT_DROP_COUNT; i++)
		dropped += st->dropped[i];
	uint64_t now = wall_ms();
	table_cstr(t, "version", EFT_VERSION);
	table_u64(t, "started_at", b->started_ms / 1000);
	table_u64(t, "uptime_seconds", now > b->started_ms ? (now - b->started_ms) / 1000 : 0);
	table_u64(t, "connections", b->set->nconns);
	table_u64(t, "connections_accepted", st->connections);
	table_u64(t, "connections_rejected", st->rejected[STAT_REJECT_LIMIT] +
	    st->rejected[STAT_REJECT_LOGIN]);
	table_u64(t, "queues", n.queues);
	table_u64(t, "topics", n.topics);
	table_u64(t, "temp_queues", n.temp_queues);
	table_u64(t, "durable_subscriptions", b->durables);
	table_u64(t, "messages_queued", n.queued);
	table_u64(t, "messages_unacked", n.unacked);
	table_u64(t, "messages_published", st->msgs_in);
	table_u64(t, "messages_delivered", st->subs.deliveries);
	table_u64(t, "messages_acknowledged", st->subs.acked);
	table_u64(t, "messages_redelivered", st->subs.redelivered);
	table_u64(t, "messages_dropped", dropped);
	table_u64(t, "messages_scheduled", b->sched.n);
	table_u64(t, "memory_bytes", b->msg_pool.live_bytes);
	table_u64(t, "memory_limit_bytes", b->max_memory);
	table_u64(t, "producers_paused", server_paused_count(b));
	struct backend_stats bs;
	if (broker_backend_stats(b, &bs))
		table_u64(t, "journal_bytes", bs.disk_bytes);
	else
		table_cstr(t, "journal_bytes", NULL);
	/* How old the cluster's count of what waits is (null: not clustered,
	 * or not counted yet). */
	int64_t age = backend_waiting_age_ms(b->backend);
	if (age < 0)
		table_cstr(t, "cluster_waiting_age_ms", NULL);
	else
		table_u64(t, "cluster_waiting_age_ms", (uint64_t)age);
	const struct config *cfg = b->cfg;
	if (t->fmt == ADMIN_TSV) {
		for (size_t i = 0; i < cfg->nlisten; i++) {
			if (config_listen_is_http(&cfg->listen[i]))
				continue;
			char key[320];
			snprintf(key, sizeof(key), "listener %s", cfg->listen[i].url);
			table_u64(t, key, b->set->listener_conns[i]);
		}
		return;
	}
	sbuf_adds(t->out, ",\"listeners\":[");
	bool first = true;
	for (size_t i = 0; i < cfg->nlisten; i++) {
		if (config_listen_is_http(&cfg->listen[i]))
			continue;
		sbuf_adds(t->out, first ? "{\"url\":" : ",{\"url\":");
		sbuf_json_string(t->out, cfg->listen[i].url, strlen(cfg->listen[i].url));
		sbuf_printf(t->out, ",\"connections\":%zu}", b->set->listener_conns[i]);
		first = false;
	}
	sbuf_addc(t->out, ']');
}

/* What waits for a queue in the cluster's JetStream (null when unknown). */
static void
table_waiting(struct table *t, int64_t waiting)
{
	if (waiting < 0)
		table_cstr(t, "cluster_waiting", NULL);
	else
		table_u64(t, "cluster_waiting", (uint64_t)waiting);
}

/* A queue that waits in the cluster with no destination here. */
static void
waiting_row(struct table *t, const struct waiting_queue *w)
{
	table_row(t);
	table_str(t, "name", w->name, w->len);
	table_cstr(t, "type", "queue");
	table_u64(t, "depth", 0);
	table_u64(t, "bytes", 0);
	table_u64(t, "unacked", 0);
	table_u64(t, "consumers", 0);
	table_u64(t, "published", 0);
	table_waiting(t, (int64_t)w->count);
	table_row_end(t);
}

static bool
name_before(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);
	return c < 0 || (c == 0 && alen < blen);
}

static void
api_dests(struct broker *b, enum admin_format fmt, enum dest_kind kind, struct sbuf *out)
{
	static const char *const qcols[] = { "name", "type", "depth", "bytes", "unacked",
		"consumers", "published", "cluster_waiting" };
	static const char *const tcols[] = { "name", "subscribers", "durable_subscriptions",
		"published" };
	struct table t;
	if (kind == DEST_QUEUE)
		table_begin(&t, out, fmt, qcols, sizeof(qcols) / sizeof(qcols[0]));
	else
		table_begin(&t, out, fmt, tcols, sizeof(tcols) / sizeof(tcols[0]));
	size_t n, nw = 0, w = 0;
	struct dest **ds = dests_sorted(&b->dests, &n);
	/* Queues with messages in the cluster and none here are rows too. */
	struct waiting_queue *ws = kind == DEST_QUEUE ? broker_waiting_elsewhere(b, &nw) : NULL;
	if (ds == NULL || (kind == DEST_QUEUE && ws == NULL)) {
		free(ds);
		free(ws);
		out->failed = true;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct dest *d = ds[i];
		if (dest_kind(d) != kind)
			continue;
		for (; w < nw && name_before(ws[w].name, ws[w].len, dest_name(d), dest_name_len(d)); w++)
			waiting_row(&t, &ws[w]);
		table_row(&t);
		table_str(&t, "name", dest_name(d), dest_name_len(d));
		if (kind == DEST_QUEUE) {
			table_cstr(&t, "type", queue_type(d));
			table_u64(&t, "depth", dest_depth(d));
			table_u64(&t, "bytes", dest_bytes(d));
			table_u64(&t, "unacked", dest_unacked(d));
			table_u64(&t, "consumers", dest_subscribers(d));
		} else {
			/* A subscription queue's subscribers are the topic's too. */
			size_t nfeeds, durables = 0, subscribers = dest_subscribers(d);
			struct dest *const *feeds = dest_feeds(d, &nfeeds);
			for (size_t f = 0; f < nfeeds; f++) {
				if (dest_auto_delete(feeds[f]))
					subscribers += dest_subscribers(feeds[f]);
				else
					durables++;
			}
			table_u64(&t, "subscribers", subscribers);
			table_u64(&t, "durable_subscriptions", durables);
		}
		table_u64(&t, "published", dest_published(d));
		if (kind == DEST_QUEUE)
			table_waiting(&t, backend_waiting(b->backend, dest_name(d), dest_name_len(d)));
		table_row_end(&t);
	}
	for (; w < nw; w++)
		waiting_row(&t, &ws[w]);
	free(ds);
	free(ws);
	table_end(&t);
}

/* The soonest scheduled messages, a page of at most this many. */
#define SCHEDULED_PAGE 1000

static void
api_scheduled(struct broker *b, enum admin_format fmt, struct sbuf *out)
{
	static const char *const cols[] = { "id", "destination", "due", "deliveries_left",
		"period_ms", "cron", "size" };
	const struct schedule_entry **page = malloc(SCHEDULED_PAGE * sizeof(*page));
	size_t n = page ? schedule_soonest(&b->sched, page, SCHEDULED_PAGE) : SIZE_MAX;
	if (n == SIZE_MAX) {
		free(page);
		out->failed = true;
		return;
	}
	struct table t;
	table_begin(&t, out, fmt, cols, sizeof(cols) / sizeof(cols[0]));
	for (size_t i = 0; i < n; i++) {
		const struct schedule_entry *e = page[i];
		table_row(&t);
		table_u64(&t, "id", e->id);
		table_str(&t, "destination", e->dest, e->dest_len);
		table_u64(&t, "due", e->due_ms);
		/* With cron, those of this round: rounds go on. */
		table_u64(&t, "deliveries_left", e->left);
		table_u64(&t, "period_ms", e->spec.period_ms);
		table_cstr(&t, "cron", e->spec.has_cron ? "yes" : "no");
		table_u64(&t, "size", e->size);
		table_row_end(&t);
	}
	table_end(&t);
	free(page);
}

static const char *
ack_name(enum ack_mode a)
{
	return a == ACK_AUTO ? "auto" : a == ACK_CLIENT ? "client" : "client-individual";
}

static int
conn_cmp_id(const void *a, const void *b)
{
	const struct conn *x = *(const struct conn *const *)a, *y = *(const struct conn *const *)b;
	return (x->id > y->id) - (x->id < y->id);
}

/* One connection's subscriptions: a JSON array, or its destinations joined
 * with ','. */
static void
conn_subscriptions(struct table *t, const struct conn *c)
{
	table_key(t, "subscriptions");
	if (t->fmt == ADMIN_JSON)
		sbuf_addc(t->out, '[');
	bool first = true;
	for (const struct sub *s = c->session->ep.subs; s != NULL; s = s->hh.next) {
		const char *dn = dest_name(s->dest);
		size_t dlen = dest_name_len(s->dest);
		if (t->fmt == ADMIN_TSV) {
			if (!first)
				sbuf_addc(t->out, ',');
			tsv_field(t->out, dn, dlen);
		} else {
			sbuf_adds(t->out, first ? "{\"id\":" : ",{\"id\":");
			sbuf_json_string(t->out, s->id, s->id_len);
			sbuf_adds(t->out, ",\"destination\":");
			sbuf_json_string(t->out, dn, dlen);
			sbuf_printf(t->out, ",\"ack\":\"%s\"}", ack_name(s->ack));
		}
		first = false;
	}
	if (t->fmt == ADMIN_JSON)
		sbuf_addc(t->out, ']');
}

static void
api_connections(struct broker *b, enum admin_format fmt, struct sbuf *out)
{
	static const char *const cols[] = { "id", "peer", "listener", "login", "version", "state",
		"connected_seconds", "unacked", "subscriptions" };
	static const char *const versions[] = { "1.0", "1.1", "1.2" };
	struct table t;
	size_t n = 0, i = 0;
	for (const struct conn *c = b->set->conns; c != NULL; c = c->next)
		n++;
	struct conn **all = malloc((n ? n : 1) * sizeof(*all));
	if (all == NULL) {
		out->failed = true;
		return;
	}
	for (struct conn *c = b->set->conns; c != NULL; c = c->next)
		if (!c->refused)
			all[i++] = c;
	n = i;
	qsort(all, n, sizeof(*all), conn_cmp_id);
	table_begin(&t, out, fmt, cols, sizeof(cols) / sizeof(cols[0]));
	uint64_t now = n ? conn_now_ms(all[0]) : 0;
	for (i = 0; i < n; i++) {
		const struct conn *c = all[i];
		const struct session *ss = c->session;
		const char *peer = strchr(c->peer, ' ');
		size_t unacked = 0;
		for (const struct sub *s = ss->ep.subs; s != NULL; s = s->hh.next)
			unacked += s->n_unacked;
		table_row(&t);
		table_u64(&t, "id", c->id);
		table_cstr(&t, "peer", peer ? peer + 1 : c->peer);
		table_cstr(&t, "listener", b->cfg->listen[c->listen_idx].url);
		table_cstr(&t, "login", ss->user ? auth_user_name(ss->user) : NULL);
		table_cstr(&t, "version", c->state == CONN_AWAIT_CONNECT ? NULL : versions[ss->version]);
		table_cstr(&t, "state", c->state == CONN_AWAIT_CONNECT ? "connecting" :
		    c->state == CONN_OPEN ? "open" : "closing");
		table_u64(&t, "connected_seconds", now > c->opened_ms ? (now - c->opened_ms) / 1000 : 0);
		table_u64(&t, "unacked", unacked);
		conn_subscriptions(&t, c);
		table_row_end(&t);
	}
	free(all);
	table_end(&t);
}

/* ---- what is done ---- */

static int
hex_value(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	    c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decode p[0..n) into out (NUL-terminated); -1 if malformed, holding
 * a NUL, or longer than outlen - 1. */
static int
percent_decode(const char *p, size_t n, char *out, size_t outlen)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (c == '%') {
			if (i + 2 >= n)
				return -1;
			int h = hex_value(p[i + 1]), l = hex_value(p[i + 2]);
			if (h < 0 || l < 0)
				return -1;
			c = (char)(h * 16 + l);
			i += 2;
		}
		if (c == '\0' || len + 1 >= outlen)
			return -1;
		out[len++] = c;
	}
	out[len] = '\0';
	return 0;
}

/* The queue a path segment names (a name without a leading '/' is
 * /queue/NAME) into name; -1 (400) if it cannot be one. */
static int
queue_name(const char *seg, size_t n, char *name, size_t namelen)
{
	char decoded[DURABLE_NAME_MAX];
	if (n == 0 || percent_decode(seg, n, decoded, sizeof(decoded)) != 0 || decoded[0] == '\0')
		return -1;
	int len = snprintf(name, namelen, "%s%s", decoded[0] == '/' ? "" : QUEUE_PREFIX, decoded);
	return len < 0 || (size_t)len >= namelen ? -1 : 0;
}

struct purge_count {
	struct broker *b;
	uint64_t n;
};

static void
purge_one(struct msg *m, void *arg)
{
	struct purge_count *pc = arg;
	if (m->kept != NULL)
		backend_gone(pc->b->backend, m, FATE_PURGED);
	pc->n++;
}

/* The queue called name, or NULL with the reply made. */
static struct dest *
find_queue(struct broker *b, const char *name, enum admin_format fmt, struct admin_reply *r)
{
	struct dest *d = dests_find(&b->dests, name, strlen(name));
	if (d == NULL || dest_kind(d) != DEST_QUEUE) {
		reply_error(r, fmt, 404, "no queue %s", name);
		return NULL;
	}
	return d;
}

static void
api_purge(struct broker *b, const char *name, enum admin_format fmt, struct admin_reply *r)
{
	struct dest *d = find_queue(b, name, fmt, r);
	if (d == NULL)
		return;
	struct purge_count pc = { b, 0 };
	dest_purge(d, purge_one, &pc);
	b->stats.dropped[STAT_DROP_PURGED] += pc.n;
	dests_release(&b->dests, d);   /* a queue nothing holds now is forgotten */
	broker_commit(b);              /* the journal forgets them too (retried if it fails) */
	log_info("admin: purged %llu message%s from %s", (unsigned long long)pc.n,
	    pc.n == 1 ? "" : "s", name);
	struct table t;
	record_begin(&t, &r->body, fmt);
	table_cstr(&t, "queue", name);
	table_u64(&t, "purged", pc.n);
	table_end(&t);
	reply_ok(r, fmt);
}

static void
api_delete_queue(struct broker *b, const char *name, enum admin_format fmt, struct admin_reply *r)
{
	struct dest *d = find_queue(b, name, fmt, r);
	if (d == NULL)
		return;
	if (dest_temp(d) != NULL) {
		reply_error(r, fmt, 409, "%s is a temp-queue: it lives as its owner's connection does",
		    name);
		return;
	}
	if (dest_subscribers(d) > 0) {
		reply_error(r, fmt, 409, "%s has %zu consumer%s: it can be deleted once they "
		    "unsubscribe", name, dest_subscribers(d), dest_subscribers(d) == 1 ? "" : "s");
		return;
	}
	struct purge_count pc = { b, 0 };
	dest_purge(d, purge_one, &pc);
	b->stats.dropped[STAT_DROP_DELETED] += pc.n;
	if (dest_bound_topic(d) != NULL)
		durable_remove(b, d);  /* the subscription ends, in the journal too */
	else
		dests_delete(&b->dests, d);
	broker_commit(b);
	log_info("admin: deleted %s with %llu message%s", name, (unsigned long long)pc.n,
	    pc.n == 1 ? "" : "s");
	struct table t;
	record_begin(&t, &r->body, fmt);
	table_cstr(&t, "queue", name);
	table_u64(&t, "deleted", pc.n);
	table_end(&t);
	reply_ok(r, fmt);
}

static void
api_close(struct broker *b, const char *seg, enum admin_format fmt, struct admin_reply *r)
{
	char *end;
	unsigned long long id = strtoull(seg, &end, 10);
	if (seg[0] < '0' || seg[0] > '9' || *end != '\0') {
		reply_error(r, fmt, 400, "'%.64s' is not a connection ID", seg);
		return;
	}
	struct conn *c = b->set->conns;
	while (c != NULL && (c->id != id || c->refused))
		c = c->next;
	if (c == NULL) {
		reply_error(r, fmt, 404, "no connection %llu", id);
		return;
	}
	/* Not a protocol error: an operator's decision, logged as one line. */
	log_info("admin: closing %s (connection %llu), as asked through the admin API", c->peer,
	    id);
	if (!conn_is_closing(c))
		proto_end(c, "closed by an administrator",
		    "An administrator closed this connection (the admin API or eftctl).");
	struct table t;
	record_begin(&t, &r->body, fmt);
	table_u64(&t, "closed", id);
	table_end(&t);
	reply_ok(r, fmt);
}

/* ---- routes ---- */

static bool
is(const char *method, const char *m)
{
	return strcmp(method, m) == 0;
}

static void
method_not_allowed(struct admin_reply *r, enum admin_format fmt, const char *method,
    const char *allow)
{
	reply_error(r, fmt, 405, "%s is not allowed here (allowed: %s)", method, allow);
	r->allow = allow;
}

void
admin_handle(struct broker *b, const char *method, const char *path, enum admin_format fmt,
    struct admin_reply *r)
{
	static const char api[] = "/api/", queues[] = "/api/queues/", conns[] = "/api/connections/";
	memset(r, 0, sizeof(*r));
	sbuf_init(&r->body);
	bool get = is(method, "GET") || is(method, "HEAD");
	struct table t;

	if (strcmp(path, "/") == 0 || strcmp(path, "/metrics") == 0) {
		if (!get) {
			method_not_allowed(r, fmt, method, "GET, HEAD");
			return;
		}
		r->status = 200;
		if (path[1] == '\0') {
			r->content_type = "text/html; charset=utf-8";
			r->fixed = eft_dashboard_html;
			r->fixed_len = (size_t)(eft_dashboard_html_end - eft_dashboard_html);
		} else {
			r->content_type = METRICS_CONTENT_TYPE;
			metrics_render(b, &r->body);
		}
	} else if (strncmp(path, api, sizeof(api) - 1) != 0) {
		reply_error(r, fmt, 404, "no such page: %.200s (see docs/admin-api.md)", path);
	} else if (strcmp(path, "/api/overview") == 0 || strcmp(path, "/api/queues") == 0 ||
	    strcmp(path, "/api/topics") == 0 || strcmp(path, "/api/connections") == 0) {
		if (!get) {
			method_not_allowed(r, fmt, method, "GET, HEAD");
			return;
		}
		if (path[5] == 'o') {
			record_begin(&t, &r->body, fmt);
			api_overview(b, &t);
			table_end(&t);
		} else if (path[5] == 'q') {
			api_dests(b, fmt, DEST_QUEUE, &r->body);
		} else if (path[5] == 't') {
			api_dests(b, fmt, DEST_TOPIC, &r->body);
		} else {
			api_connections(b, fmt, &r->body);
		}
		reply_ok(r, fmt);
	} else if (strcmp(path, "/api/scheduled") == 0) {
		if (!get) {
			method_not_allowed(r, fmt, method, "GET, HEAD");
			return;
		}
		api_scheduled(b, fmt, &r->body);
		reply_ok(r, fmt);
	} else if (strncmp(path, queues, sizeof(queues) - 1) == 0) {
		const char *seg = path + sizeof(queues) - 1;
		size_t n = strlen(seg);
		bool purge = n > 6 && strcmp(seg + n - 6, "/purge") == 0;
		char name[DURABLE_NAME_MAX + sizeof(QUEUE_PREFIX)];
		if (purge ? !is(method, "POST") : !is(method, "DELETE")) {
			method_not_allowed(r, fmt, method, purge ? "POST" : "DELETE");
			return;
		}
		if (queue_name(seg, purge ? n - 6 : n, name, sizeof(name)) != 0) {
			reply_error(r, fmt, 400, "bad queue name in %.200s", path);
			return;
		}
		if (purge)
			api_purge(b, name, fmt, r);
		else
			api_delete_queue(b, name, fmt, r);
	} else if (strncmp(path, conns, sizeof(conns) - 1) == 0) {
		if (!is(method, "DELETE")) {
			method_not_allowed(r, fmt, method, "DELETE");
			return;
		}
		api_close(b, path + sizeof(conns) - 1, fmt, r);
	} else {
		reply_error(r, fmt, 404, "no such API call: %.200s (see docs/admin-api.md)", path);
	}
	if (r->body.failed)
		reply_error(r, fmt, 500, "out of memory");
}
