/* metrics.c - Prometheus text exposition (see metrics.h).  Names follow
 * Prometheus's conventions: the eft_ prefix, _total on counters, base units
 * (_bytes, _seconds), and the process_* metrics of its client libraries.
 * Temp-queues are counted, not listed: their names are random and live as
 * long as one connection, which would only grow a Prometheus server's
 * series without end. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "eft/broker.h"
#include "eft/cluster.h"
#include "eft/dest.h"
#include "eft/frame.h"
#include "eft/metrics.h"
#include "eft/server.h"
#include "eft/version.h"

static void
family(struct sbuf *out, const char *name, const char *type, const char *help)
{
	sbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: '\', '"' and newlines escaped. */
static void
label_value(struct sbuf *out, const char *p, size_t n)
{
	size_t start = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\\' && p[i] != '"' && p[i] != '\n')
			continue;
		sbuf_add(out, p + start, i - start);
		sbuf_add(out, p[i] == '\n' ? "\\n" : p[i] == '"' ? "\\\"" : "\\\\", 2);
		start = i + 1;
	}
	sbuf_add(out, p + start, n - start);
}

static void
sample(struct sbuf *out, const char *name, uint64_t v)
{
	sbuf_adds(out, name);
	sbuf_addc(out, ' ');
	sbuf_add_u64(out, v);
	sbuf_addc(out, '\n');
}

static void
sample_label(struct sbuf *out, const char *name, const char *label, const char *value,
    size_t len, uint64_t v)
{
	sbuf_adds(out, name);
	sbuf_addc(out, '{');
	sbuf_adds(out, label);
	sbuf_add(out, "=\"", 2);
	label_value(out, value, len);
	sbuf_add(out, "\"} ", 3);
	sbuf_add_u64(out, v);
	sbuf_addc(out, '\n');
}

static void
counter(struct sbuf *out, const char *name, const char *help, uint64_t v)
{
	family(out, name, "counter", help);
	sample(out, name, v);
}

static void
gauge(struct sbuf *out, const char *name, const char *help, uint64_t v)
{
	family(out, name, "gauge", help);
	sample(out, name, v);
}

/* ---- destinations ---- */

/* One family over every queue (temp-queues aside) or topic. */
static void
dest_family(struct sbuf *out, struct dest **ds, size_t n, enum dest_kind kind, const char *name,
    const char *type, const char *help, uint64_t (*value)(const struct dest *d))
{
	family(out, name, type, help);
	for (size_t i = 0; i < n; i++) {
		const struct dest *d = ds[i];
		if (dest_kind(d) != kind || dest_temp(d) != NULL)
			continue;
		sample_label(out, name, kind == DEST_QUEUE ? "queue" : "topic", dest_name(d),
		    dest_name_len(d), value(d));
	}
}

static uint64_t q_depth(const struct dest *d) { return dest_depth(d); }
static uint64_t q_bytes(const struct dest *d) { return dest_bytes(d); }
static uint64_t q_unacked(const struct dest *d) { return dest_unacked(d); }
static uint64_t q_consumers(const struct dest *d) { return dest_subscribers(d); }
static uint64_t d_published(const struct dest *d) { return dest_published(d); }

static bool
name_before(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);
	return c < 0 || (c == 0 && alen < blen);
}

/* What waits for each queue in the cluster's JetStream, as last counted:
 * the queues here (not temp-queues) and those with messages there only.
 * Nothing without a cluster; HELP and TYPE alone while not counted. */
static void
in_cluster(struct broker *b, struct sbuf *out, struct dest **ds, size_t n)
{
	static const char name[] = "eft_queue_messages_in_cluster";
	if (!backend_counts_waiting(b->backend))
		return;
	size_t nw = 0;
	struct waiting_queue *ws = broker_waiting_elsewhere(b, &nw);
	if (ws == NULL) {
		out->failed = true;
		return;
	}
	family(out, name, "gauge", "Messages stored in JetStream for the queue, cluster-wide "
	    "(those handed out and not yet acknowledged included), as last counted.");
	/* in name order, those here and those elsewhere merged */
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		const struct dest *d = ds[i];
		if (dest_kind(d) != DEST_QUEUE || dest_temp(d) != NULL)
			continue;
		for (; w < nw && name_before(ws[w].name, ws[w].len, dest_name(d), dest_name_len(d));
		    w++)
			sample_label(out, name, "queue", ws[w].name, ws[w].len, ws[w].count);
		int64_t v = backend_waiting(b->backend, dest_name(d), dest_name_len(d));
		if (v >= 0)
			sample_label(out, name, "queue", dest_name(d), dest_name_len(d), (uint64_t)v);
	}
	for (; w < nw; w++)
		sample_label(out, name, "queue", ws[w].name, ws[w].len, ws[w].count);
	free(ws);
	int64_t age = backend_waiting_age_ms(b->backend);
	family(out, "eft_cluster_stats_age_seconds", "gauge", "How old the count of what waits in "
	    "JetStream is (absent until counted).");
	if (age >= 0)
		sbuf_printf(out, "eft_cluster_stats_age_seconds %.3f\n", (double)age / 1e3);
}

static void
destinations(struct broker *b, struct sbuf *out)
{
	size_t n;
	struct dests_totals totals;
	dests_totals(&b->dests, &totals);
	struct dest **ds = dests_sorted(&b->dests, &n);
	if (ds == NULL) {
		out->failed = true;
		return;
	}
	gauge(out, "eft_queues", "Queues, temp-queues and durable subscriptions' queues included.",
	    totals.queues);
	gauge(out, "eft_topics", "Topics with a subscriber or a durable subscription.", totals.topics);
	gauge(out, "eft_temp_queues", "Temp-queues (their owners' private reply queues).", totals.temp_queues);
	gauge(out, "eft_durable_subscriptions", "Durable topic subscriptions.", b->durables);
	gauge(out, "eft_messages_queued", "Messages waiting in all queues.", totals.queued);
	gauge(out, "eft_scheduled_messages", "Scheduled SENDs waiting for their time "
	    "(AMQ_SCHEDULED_*, x-delay).", b->sched.n);
	counter(out, "eft_scheduled_deliveries_total", "Deliveries of scheduled messages published "
	    "at their time.", b->sched.fired);
	dest_family(out, ds, n, DEST_QUEUE, "eft_queue_messages", "gauge",
	    "Messages waiting in the queue (its depth).", q_depth);
	dest_family(out, ds, n, DEST_QUEUE, "eft_queue_messages_bytes", "gauge",
	    "Memory held by the messages waiting in the queue.", q_bytes);
	dest_family(out, ds, n, DEST_QUEUE, "eft_queue_messages_unacknowledged", "gauge",
	    "Messages of the queue handed to consumers and not yet acknowledged.", q_unacked);
	dest_family(out, ds, n, DEST_QUEUE, "eft_queue_consumers", "gauge",
	    "Subscribers of the queue.", q_consumers);
	dest_family(out, ds, n, DEST_QUEUE, "eft_queue_messages_published_total", "counter",
	    "Messages published to the queue since it was made.", d_published);
	in_cluster(b, out, ds, n);
	dest_family(out, ds, n, DEST_TOPIC, "eft_topic_subscribers", "gauge",
	    "Subscribers of the topic.", q_consumers);
	dest_family(out, ds, n, DEST_TOPIC, "eft_topic_messages_published_total", "counter",
	    "Messages published to the topic since it was made.", d_published);
	free(ds);
}

/* ---- the process ---- */

/* Resident and virtual memory, CPU seconds and the open descriptors, from
 * /proc (Linux). */
static void
process(struct broker *b, struct sbuf *out)
{
	long page = sysconf(_SC_PAGESIZE), ticks = sysconf(_SC_CLK_TCK);
	unsigned long long vsize = 0, rss = 0, utime = 0, stime = 0;
	FILE *f = fopen("/proc/self/stat", "r");
	if (f != NULL) {
		char buf[1024];
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		fclose(f);
		/* After the command name in parentheses, which may hold anything. */
		const char *p = strrchr(buf, ')');
		if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
		    "%*d %*d %*d %*d %*d %*d %*u %llu %llu", &utime, &stime, &vsize, &rss) != 4)
			vsize = rss = utime = stime = 0;
	}
	size_t fds = 0;
	DIR *dir = opendir("/proc/self/fd");
	if (dir != NULL) {
		for (struct dirent *e; (e = readdir(dir)) != NULL;)
			fds += e->d_name[0] != '.';
		closedir(dir);
		fds--; /* the one opendir holds */
	}
	struct rlimit rl = { 0, 0 };
	getrlimit(RLIMIT_NOFILE, &rl);
	family(out, "process_cpu_seconds_total", "counter", "User and system CPU time spent.");
	sbuf_printf(out, "process_cpu_seconds_total %.2f\n",
	    ticks > 0 ? (double)(utime + stime) / (double)ticks : 0.0);
	gauge(out, "process_resident_memory_bytes", "Resident memory size.",
	    rss * (unsigned long long)(page > 0 ? page : 4096));
	gauge(out, "process_virtual_memory_bytes", "Virtual memory size.", vsize);
	gauge(out, "process_open_fds", "Open file descriptors.", fds);
	gauge(out, "process_max_fds", "The open-file limit.", rl.rlim_cur);
	family(out, "process_start_time_seconds", "gauge",
	    "Start time of the process since the epoch, in seconds.");
	sbuf_printf(out, "process_start_time_seconds %.3f\n", (double)b->started_ms / 1000.0);
}

/* ---- all of it ---- */

void
metrics_render(struct broker *b, struct sbuf *out)
{
	static const char *const out_names[STAT_OUT_COUNT] = { "CONNECTED", "RECEIPT", "ERROR" };
	static const char *const drop_names[STAT_DROP_COUNT] = { "no_subscriber", "no_memory",
		"reply_owner_gone", "purged", "deleted", "expired", "rejected", "max_redeliveries",
		"overflow" };
	static const char *const death_names[DEATH_COUNT] = { "expired", "rejected",
		"max_redeliveries", "overflow" };
	static const char *const reject_names[STAT_REJECT_COUNT] = { "limit", "login" };
	const struct broker_stats *st = &b->stats;
	const struct config *cfg = b->cfg;

	family(out, "eft_build_info", "gauge", "The eft version, as a label; always 1.");
	sbuf_printf(out, "eft_build_info{version=\"%s\"} 1\n", EFT_VERSION);

	family(out, "eft_connections", "gauge", "Open client connections, by listener.");
	for (size_t i = 0; i < cfg->nlisten; i++)
		if (!config_listen_is_http(&cfg->listen[i]))
			sample_label(out, "eft_connections", "listener", cfg->listen[i].url,
			    strlen(cfg->listen[i].url), b->set->listener_conns[i]);
	counter(out, "eft_connections_accepted_total", "Client connections accepted.",
	    st->connections);
	family(out, "eft_connections_rejected_total", "counter",
	    "Client connections turned away: over max-connections, or a failed login.");
	for (int i = 0; i < STAT_REJECT_COUNT; i++)
		sample_label(out, "eft_connections_rejected_total", "reason", reject_names[i],
		    strlen(reject_names[i]), st->rejected[i]);

	family(out, "eft_frames_received_total", "counter", "STOMP frames received, by command.");
	for (int i = 0; i < CMD_COUNT; i++) {
		const char *name = i == CMD_UNKNOWN ? "unknown" : frame_cmd_name((enum frame_cmd)i);
		sample_label(out, "eft_frames_received_total", "command", name, strlen(name),
		    st->frames_in[i]);
	}
	family(out, "eft_frames_sent_total", "counter", "STOMP frames sent, by command.");
	sample_label(out, "eft_frames_sent_total", "command", "MESSAGE", 7, st->subs.deliveries);
	for (int i = 0; i < STAT_OUT_COUNT; i++)
		sample_label(out, "eft_frames_sent_total", "command", out_names[i],
		    strlen(out_names[i]), st->frames_out[i]);

	counter(out, "eft_messages_published_total",
	    "Messages sent to a destination (in a transaction: at its COMMIT).", st->msgs_in);
	counter(out, "eft_messages_delivered_total", "Messages delivered to subscribers.",
	    st->subs.deliveries);
	counter(out, "eft_messages_acknowledged_total", "Queue deliveries acknowledged.", st->subs.acked);
	counter(out, "eft_messages_redelivered_total",
	    "Deliveries of messages a consumer had been given before.", st->subs.redelivered);
	family(out, "eft_messages_dropped_total", "counter",
	    "Messages that reached nobody, by reason.");
	for (int i = 0; i < STAT_DROP_COUNT; i++)
		sample_label(out, "eft_messages_dropped_total", "reason", drop_names[i],
		    strlen(drop_names[i]), st->dropped[i]);
	family(out, "eft_messages_dead_lettered_total", "counter",
	    "Messages that died and went to a dead-letter queue, by reason.");
	for (int i = 0; i < DEATH_COUNT; i++)
		sample_label(out, "eft_messages_dead_lettered_total", "reason", death_names[i],
		    strlen(death_names[i]), st->dead_lettered[i]);

	destinations(b, out);

	gauge(out, "eft_message_memory_bytes", "Memory held by messages.", b->msg_pool.live_bytes);
	gauge(out, "eft_message_memory_limit_bytes",
	    "max-memory: above it producers wait.", b->max_memory);
	gauge(out, "eft_producers_paused", "Producers not read from until a limit clears.",
	    server_paused_count(b));
	gauge(out, "eft_memory_alarm", "1 while message memory is over max-memory.",
	    b->memory_alarm);
	struct backend_stats bs;
	if (broker_backend_stats(b, &bs)) {
		gauge(out, "eft_journal_bytes", "Bytes in the journal's segment files.", bs.disk_bytes);
		gauge(out, "eft_journal_messages", "Persistent messages the journal keeps.",
		    bs.messages);
		gauge(out, "eft_journal_disk_limit_bytes", "max-disk: above it producers wait.",
		    bs.disk_limit);
		gauge(out, "eft_disk_alarm", "1 while the journal is over max-disk or cannot be written.",
		    bs.alarm);
		family(out, "eft_journal_fsync_seconds", "summary", "Time the journal's fsyncs took.");
		sbuf_printf(out, "eft_journal_fsync_seconds_sum %.6f\neft_journal_fsync_seconds_count "
		    "%llu\n", (double)bs.sync_total_us / 1e6, (unsigned long long)bs.syncs);
		family(out, "eft_journal_fsync_max_seconds", "gauge", "The longest fsync since start.");
		sbuf_printf(out, "eft_journal_fsync_max_seconds %.6f\n", (double)bs.sync_max_us / 1e6);
	}
	if (b->cluster != NULL) {
		counter(out, "eft_cluster_revoked_total", "Messages a node cut off from NATS past "
		    "cluster-ack-wait-ms let go of: JetStream gives them to other nodes.",
		    cluster_revoked(b->cluster));
		counter(out, "eft_cluster_topic_filtered_total", "Topic messages from NATS that a "
		    "pattern with '#' before its end did not match (its NATS subject is wider).",
		    cluster_topic_filtered(b->cluster));
		counter(out, "eft_cluster_swept_total", "Acknowledged queue messages JetStream still "
		    "held after a NATS outage (below the consumer's ack floor), removed by this node.",
		    cluster_swept(b->cluster));
	}
	process(b, out);
}
