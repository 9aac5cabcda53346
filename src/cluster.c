/* cluster.c - the NATS side of a cluster node (cluster.h).
 *
 * One NATS connection, in libnats's event-loop mode on eftd's loop: our
 * adapter below reads and writes it from libevent callbacks, and after
 * every read takes what arrived off synchronous subscriptions (so no
 * libnats delivery thread ever calls into eftd).  libnats still has threads
 * of its own (reconnecting, pings): they touch libevent, which is why the
 * base is made thread-aware in cluster mode only, and their callbacks here
 * only wake the loop through state_ev.
 *
 * Subscriptions:
 *   INBOX.>          answers to this node: pub acks (INBOX.p.SEQ), pulled
 *                    queue messages (INBOX.q.QID) and JetStream API answers
 *                    (INBOX.a.ID);
 *   eft.n.NODE.*     replies to this node's temp-queues;
 *   eft.t.E1.E2.$    one per topic with subscribers here: per plain name,
 *                    or per pattern in NATS's wildcards (cluster_wire.h);
 *                    a pattern with '#' before its end subscribes wider, and
 *                    each message is matched again (topic_wanted).
 *
 * Queues live in cluster-queue-streams work-queue streams EFT_Q_0.., by a
 * hash of their name (cluster_wire.h): one stream's leader no longer carries
 * every queue of the cluster.
 *
 * Everything JetStream is spoken as plain NATS requests to $JS.API.*, not
 * through libnats's js_* calls, which block or deliver on their own threads. */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <nats/nats.h>
#include <sodium.h>
#include <uthash.h>

#include "eft/address.h"
#include "eft/backend.h"
#include "eft/cluster.h"
#include "eft/cluster_wire.h"
#include "eft/config.h"
#include "eft/dest.h"
#include "eft/log.h"
#include "eft/msg.h"
#include "eft/sub.h"
#include "eft/subject.h"

/* A pull request waits this long on the server.  It cannot be taken back:
 * a node whose subscribers left may still get a message for that long, and
 * gives it back (redelivered) to whoever pulls next. */
#define PULL_EXPIRES_MS 1000
#define AUTO_WINDOW 256          /* messages pulled ahead for an auto-ack subscriber */
#define MAX_WINDOW 1024          /* ... for a whole queue */
#define PUB_RETRY_MS 2000        /* no pub ack this long: publish again (deduplicated) */
#define API_TIMEOUT_MS 5000      /* a JetStream API request unanswered this long is lost
                                    (a NATS cluster electing a leader drops some): ask again */
#define TICK_MS 100
#define SWEEP_IDLE_MS 10000      /* a queue with messages in JetStream and none to pull: look
                                    (or every cluster-stats-ms, if longer) */
#define SWEEP_DELETES_MAX 100    /* messages a sweep removes one by one (what PURGE missed) */
#define HELD_SUBJECT "eft.held"  /* "does a subscriber of yours hold it?", to every node */
#define HELD_WAIT_MS 1000        /* ... no node answered yes in this long: none does */
#define MAX_PUBS 8192            /* queue SENDs waiting for acks before producers wait */
#define SUBJECT_MAX (CLUSTER_NAME_MAX + 64)
#define RENEWALS 4               /* send times of the last +WPI rounds kept (cut_off) */
/* libnats sees a silent cut only when its pings go unanswered:
 * SetPingInterval(2000) x SetMaxPingsOut(3). */
#define SILENT_CUT_MS 6000
#define QUIET_MS 3000            /* nothing read this long: the ping interval and then some */
/* natsMsgs done with, destroyed together (spent_add): libnats hands each
 * destroyed one to its collector thread and wakes that thread when it was
 * idle, a context switch or two per message when they go one by one. */
#define SPENT_MAX 256
#define SCRATCH_KEPT (64 << 10)  /* a SEND's encoding buffer up to this size is kept */

/* A nats-server killed and restarted may keep a message its consumer had
 * acknowledged (the ack floor moved, the removal was lost): below the floor
 * it is never delivered again, and waits for ever.  After an outage, each
 * queue caught up here sweeps such messages away, until a sweep finds
 * nothing unacknowledged that could hide one.  Above the floor, a message
 * no node holds is stuck (sweep_found). */
struct sweep_state {
	bool wanted;               /* sweep when caught up (after an outage) */
	bool after_outage;         /* the sweep under way was wanted so (only those look
	                              for stuck messages) */
	bool out;                  /* a request of the sweep is out */
	uint64_t last_ms;          /* when the last sweep began */
	uint64_t until_ms;         /* sweeps go on at least this long after the outage */
	uint64_t floor;            /* this sweep removes the queue's messages up to here */
	uint64_t stuck_to;         /* ... and looks for stuck ones above, up to here */
	uint64_t removed;          /* ... and removed this many so far */
	uint32_t deletes;          /* ... this many of them one by one */
	uint64_t from;             /* ... looking from this sequence on */
	uint64_t stuck_seq;        /* a stuck candidate seen by the last sweep (0: none) */
	uint64_t stuck_seen_ms;    /* ... first seen then */
	uint64_t held_asked;       /* ... every node asked whether it holds it (0: not) */
};

/* A queue this node has subscribers on. */
struct cq {
	UT_hash_handle hh;         /* in cl->queues, by qid */
	UT_hash_handle hh_consumer; /* in cl->by_consumer: pulled messages name it in their
	                              ack subject */
	const char *stream;        /* its partition's EFT_Q_P, or CLUSTER_TOPIC_STREAM ... */
	bool durable;              /* ... for a durable topic subscription */
	uint32_t part;             /* a queue's partition (nparts: the durable subscriptions'
	                              stream) */
	uint32_t qid;
	struct dest *dest;
	char consumer[CLUSTER_NAME_MAX + 8];
	char subject[SUBJECT_MAX]; /* the consumer's filter */
	bool consumer_ready;
	bool creating;             /* a consumer create request is out */
	bool pulling;              /* a pull request is out */
	uint32_t pull_left;        /* ... of which this many have not come */
	uint64_t pull_sent_ms;
	uint64_t max_consumer_seq; /* the highest consumer sequence pulled here */
	uint32_t window;           /* what its subscribers may hold: buffered + unacked */
	uint64_t ready_seq;        /* a durable subscription's SUBSCRIBE: its RECEIPT waits
	                              (as a SEND's does) until the consumer exists */
	struct sweep_state sw;     /* what JetStream kept wrongly after an outage */
	bool resetting;            /* its consumer is being deleted and made again */
	bool reset_deleted;        /* ... and was deleted */
	/* A durable subscription's lease (section "the lease" below): */
	uint64_t lease_rev;        /* its revision as this node last stored it; 0: none */
	bool lease_held;           /* this node holds it: pulls wait for that */
	bool lease_out;            /* a claim, renewal or read of it is out */
	bool lease_refused;        /* another node holds it: the subscriber here was ended */
	uint64_t lease_seq;        /* the SUBSCRIBE's RECEIPT waits for the claim too */
	uint64_t lease_renewed_ms; /* when it was last stored */
	uint64_t lease_retry_ms;   /* no claim or renewal before this (after a failure) */
	uint64_t lease_refused_ms; /* when a claim was first refused (0: not yet) */
};

/* A topic this node has subscribers on. */
struct ctopic {
	struct ctopic *next;
	struct dest *dest;
	natsSubscription *sub;
	bool exact;                /* false: the subject is wider than dest's pattern */
};

/* A queue SEND waiting for JetStream's ack (or, msg NULL, a durable
 * subscription waiting for its consumer). */
struct pub {
	uint64_t seq;
	natsMsg *msg;              /* to publish again after a reconnect */
	uint64_t sent_ms;
	bool acked;
};

/* A JetStream API request waiting for its answer. */
enum api_kind {
	API_STREAM,        /* queue partition qid's stream made */
	API_PART_INFO,     /* ... it exists with another configuration: whose? */
	API_OLD_INFO,      /* ... its subjects overlap: the old EFT_QUEUES? */
	API_MARK,          /* a stream's last sequence after an outage (qid: partition, or
	                      nparts for the durable subscriptions' stream) */
	API_TOPIC_STREAM,
	API_CONSUMER,
	API_DELETE,
	API_FLOOR,         /* a queue's consumer: its ack floor, for the sweep */
	API_PURGE,         /* ... what the stream kept below it */
	API_SWEEP_GET,     /* ... the first message of its subject from a sequence on */
	API_SWEEP_DELETE,  /* ... that message, below the floor: what PURGE missed */
	API_RESET,         /* a queue's consumer deleted: its stream lost what it delivered */
	API_HELD,          /* not JetStream: every node asked whether it holds a message */
	API_STATS,         /* what waits in partition qid (cluster-stats-ms) */
	API_LEASE_STREAM,
	API_LEASE_PUT,
	API_LEASE_GET,
	API_LEASE_DELETE
};
struct api {
	UT_hash_handle hh;         /* in cl->apis, by id */
	uint64_t id;
	uint64_t sent_ms;
	enum api_kind kind;
	uint32_t qid;              /* a cq's, or a partition */
};

/* A queue and how many messages wait for it in JetStream. */
struct cwait {
	UT_hash_handle hh;         /* by name */
	uint64_t count;
	size_t len;
	char name[];               /* /queue/NAME */
};

/* One of the queue streams (or, for its mark only, the durable
 * subscriptions' one). */
struct cpart {
	char name[24];             /* EFT_Q_P */
	bool ready;
	bool refused;              /* it belongs to another layout: no queue is clustered */
	/* A nats-server killed and restarted may have lost what its consumers
	 * delivered just before, and deliver it again as if for the first time
	 * (delivered = 1 in the ack subject: seen in test/e2e/test_cluster_chaos.py).
	 * So after an outage, whatever the stream held by then (sequence up to
	 * mark) may have been delivered before, and says so.  No pull goes out
	 * while the mark is asked for. */
	uint64_t mark;
	bool marking;
	/* A stream can also come back without messages it had delivered (its
	 * last writes lost: seen after kill -9 of an R1 nats-server).  Its
	 * consumers then point past the sequences it hands out again, never
	 * deliver those, and the sweep would take them for acknowledged: they
	 * are deleted and made again, and the mark waits for that. */
	uint64_t seen_seq;         /* the highest stream sequence pulled here */
	uint32_t resetting;        /* queues whose consumer is being made again */
	/* What waits in it (cluster-stats-ms): the last whole answer, and the
	 * one being read, page by page, until it is whole. */
	struct cwait *waiting, *building;
	uint64_t stats_ms;         /* when waiting was made whole; 0: not on this connection */
	uint64_t stats_started_ms; /* when the poll under way (or the last) began */
	uint64_t stats_asked_ms;   /* when its last page was asked for */
	uint64_t stats_offset;     /* entries read so far of the poll under way */
	bool stats_out;            /* a page was asked for and has not come */
	bool stats_failing;        /* its last answer could not be used (said once) */
};

struct cluster {
	struct backend_env env;          /* the core's state it may use */
	const struct config *cfg;
	struct event_base *base;
	natsOptions *opts;
	natsConnection *nc;
	char node[128];
	char token[3 * 128 + 1];         /* node, escaped: one subject token */
	char inbox[64];                  /* INBOX prefix of this run */
	size_t inbox_len;
	char instance[24];               /* names this run's Nats-Msg-Ids */
	size_t instance_len;
	char *scratch;                   /* a SEND's payload is encoded here (libnats copies it) */
	size_t scratch_cap;
	natsSubscription *inbox_sub, *reply_sub;
	natsSubscription *leader_sub;    /* JetStream's leader elections (a NATS cluster) */
	natsSubscription *held_sub;      /* other nodes' HELD_SUBJECT questions */
	struct ctopic *topics;
	struct cq *queues;               /* by qid */
	struct cq *by_consumer;          /* the same, by consumer name */
	uint32_t next_qid;
	struct pub *pubs;                /* a ring: pubs[head..head+npubs) by seq */
	size_t pubs_cap, pubs_head, npubs;
	uint64_t next_pub;               /* seq of the next queue SEND */
	uint64_t kept;                   /* every one up to this JetStream acknowledged */
	const struct backend_events *events; /* how the core hears of it */
	struct api *apis;                /* by id */
	uint64_t next_api;
	bool connected;                  /* as last seen on the loop */
	struct cpart *parts;             /* cfg->cluster_queue_streams of them, then EFT_TOPICS's
	                                    mark */
	uint32_t nparts, parts_ready;
	uint32_t parts_refused;
	bool refusal_logged;             /* this connection */
	uint64_t swept;                  /* acknowledged messages JetStream had kept, removed */
	uint64_t stream_asked_ms;        /* when the queue streams were last asked for */
	bool topics_ready;               /* the durable subscriptions' stream */
	uint64_t topics_asked_ms;
	bool leases_ready;               /* ... and their leases' (KV_EFT_LEASES) */
	uint64_t leases_asked_ms;
	size_t ndurable;                 /* cqs of durable subscriptions here */
	uint64_t topic_filtered;         /* copies an inexact topic subject brought in vain */
	bool ever_connected;
	struct event *state_ev;          /* libnats threads wake the loop with it */
	struct event *tick_ev;
	atomic_int reconnects;           /* attempts since the last connection */
	atomic_int connections;          /* made so far (libnats's threads count them) */
	atomic_bool closing;             /* cluster_stop: wake nothing any more */
	int connections_seen;            /* ... as the loop last handled them */
	int logged_attempts;
	uint64_t attempt_delay_ms;
	uint64_t progress_ms;            /* when +WPI was last sent for what is held here */
	/* A node cut off from NATS past the ack wait lets go of what it held
	 * (cut_off): */
	uint64_t renewals[RENEWALS];     /* when the last +WPI rounds were sent, a ring */
	uint64_t nrenewals;              /* ... rounds so far */
	uint64_t read_ms;                /* when the connection was last read from */
	uint64_t lost_ms;                /* when NATS was last lost */
	uint64_t renewed_ms;             /* ... the last renewal JetStream surely had then */
	bool revoke_due;                 /* lost, and not yet let go of this outage */
	uint64_t revoked;                /* messages let go of so far (metrics) */
	natsMsg *spent[SPENT_MAX];       /* to destroy, a batch at a time (spent_add) */
	size_t nspent;
};

/* ---- natsMsgs done with ---- */

static void
spent_flush(struct cluster *cl)
{
	for (size_t i = 0; i < cl->nspent; i++)
		natsMsg_Destroy(cl->spent[i]);
	cl->nspent = 0;
}

/* Destroyed with the next SPENT_MAX - 1, or at the next tick: one wake of
 * libnats's collector thread per batch. */
static void
spent_add(struct cluster *cl, natsMsg *nm)
{
	if (nm == NULL)
		return;
	if (cl->nspent == SPENT_MAX)
		spent_flush(cl);
	cl->spent[cl->nspent++] = nm;
}

/* libnats starts its threads at its first call, and a new thread takes the
 * scheduling policy of the one that made it.  Its message collector is
 * woken for each batch of natsMsgs destroyed here (spent_add); as
 * SCHED_BATCH it does not preempt the loop that woke it while the loop
 * still holds the collector's lock, which made the two threads take turns
 * on one core for every message of the batch (perf: four context switches
 * a wake).  It runs as soon as a core is free, or at the next tick; so do
 * libnats's timer (pings) and callback threads, which wake the loop only. */
static natsStatus
open_nats(void)
{
	struct sched_param normal = { 0 };
	bool batch = sched_getscheduler(0) == SCHED_OTHER &&
	    sched_setscheduler(0, SCHED_BATCH, &normal) == 0;
	natsStatus s = nats_Open(-1);
	if (batch && sched_setscheduler(0, SCHED_OTHER, &normal) != 0)
		log_warn("cluster: the loop's thread stays SCHED_BATCH: %s", strerror(errno));
	return s;
}

/* ---- the event-loop adapter (libnats calls these) ---- */

struct adapter {
	struct cluster *cl;
	natsConnection *nc;
	struct event *read, *write;
};

static void poll_all(struct cluster *cl);
static uint64_t now_ms(const struct cluster *cl);

static void
adapter_event(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	struct adapter *a = arg;
	if (what & EV_READ) {
		a->cl->read_ms = now_ms(a->cl);
		natsConnection_ProcessReadEvent(a->nc);
		poll_all(a->cl);
	}
	if (what & EV_WRITE)
		natsConnection_ProcessWriteEvent(a->nc);
}

/* The "loop" libnats hands back is our cluster (natsOptions_SetEventLoop). */
static natsStatus
adapter_attach(void **user, void *loop, natsConnection *nc, natsSock fd)
{
	struct cluster *cl = loop;
	struct adapter *a = *user;
	if (a == NULL) {
		a = calloc(1, sizeof(*a));
		if (a == NULL)
			return NATS_NO_MEMORY;
		a->cl = cl;
		a->nc = nc;
	} else {
		event_free(a->read);
		event_free(a->write);
	}
	a->read = event_new(cl->base, fd, EV_READ | EV_PERSIST, adapter_event, a);
	a->write = event_new(cl->base, fd, EV_WRITE | EV_PERSIST, adapter_event, a);
	if (a->read == NULL || a->write == NULL || event_add(a->read, NULL) != 0)
		return NATS_ERR;
	*user = a;
	return NATS_OK;
}

static natsStatus
adapter_read(void *user, bool add)
{
	struct adapter *a = user;
	return (add ? event_add(a->read, NULL) : event_del_noblock(a->read)) == 0 ? NATS_OK :
	    NATS_ERR;
}

static natsStatus
adapter_write(void *user, bool add)
{
	struct adapter *a = user;
	return (add ? event_add(a->write, NULL) : event_del_noblock(a->write)) == 0 ? NATS_OK :
	    NATS_ERR;
}

static natsStatus
adapter_detach(void *user)
{
	struct adapter *a = user;
	if (a->read)
		event_free(a->read);
	if (a->write)
		event_free(a->write);
	free(a);
	return NATS_OK;
}

/* ---- libnats's threads: wake the loop ---- */

static void
wake(natsConnection *nc, void *arg)
{
	(void)nc;
	struct cluster *cl = arg;
	if (!atomic_load(&cl->closing))
		event_active(cl->state_ev, EV_READ, 0);
}

/* Connected (at last, or again): counted, so that a quick drop and
 * reconnect between two loop turns is still seen as one. */
static void
wake_connected(natsConnection *nc, void *arg)
{
	struct cluster *cl = arg;
	atomic_fetch_add(&cl->connections, 1);
	wake(nc, arg);
}

static int64_t
reconnect_delay(natsConnection *nc, int attempts, void *arg)
{
	(void)nc;
	struct cluster *cl = arg;
	atomic_store(&cl->reconnects, attempts);
	if (!atomic_load(&cl->closing))
		event_active(cl->state_ev, EV_READ, 0);
	/* 100 ms doubling to 5 s */
	int64_t ms = 100;
	for (int i = 1; i < attempts && ms < 5000; i++)
		ms *= 2;
	return ms < 5000 ? ms : 5000;
}

/* ---- helpers ---- */

static uint64_t
now_ms(const struct cluster *cl)
{
	return cl->events->now_ms(cl->events->arg);
}

static natsStatus
publish_request(struct cluster *cl, const char *subject, const char *reply, const char *data,
    size_t len)
{
	return natsConnection_PublishRequest(cl->nc, subject, reply, data, (int)len);
}

static struct cq *
cq_of(struct cluster *cl, uint32_t qid)
{
	struct cq *q;
	HASH_FIND(hh, cl->queues, &qid, sizeof(qid), q);
	return q;
}

static const char *
queue_part(const char *name, size_t len, size_t *plen)
{
	/* /queue/NAME -> NAME */
	*plen = len > 7 ? len - 7 : 0;
	return name + 7;
}

/* ---- JetStream API ---- */

static int
api_request(struct cluster *cl, enum api_kind kind, uint32_t qid, const char *subject,
    const char *json)
{
	struct api *a = calloc(1, sizeof(*a));
	if (a == NULL)
		return -1;
	a->id = ++cl->next_api;
	a->sent_ms = now_ms(cl);
	a->kind = kind;
	a->qid = qid;
	char reply[128];
	snprintf(reply, sizeof(reply), "%s.a.%" PRIu64, cl->inbox, a->id);
	if (publish_request(cl, subject, reply, json, strlen(json)) != NATS_OK) {
		free(a);
		return -1;
	}
	HASH_ADD(hh, cl->apis, id, sizeof(a->id), a);
	return 0;
}

static void
forget_requests(struct cluster *cl)
{
	struct api *a, *tmp;
	HASH_ITER(hh, cl->apis, a, tmp) {
		HASH_DEL(cl->apis, a);
		free(a);
	}
}

static bool
queues_ready(const struct cluster *cl)
{
	return cl->parts_ready == cl->nparts && cl->parts_refused == 0;
}

/* A queue partition's stream (work queue: a message is gone once
 * acknowledged; its description names the layout, which every node of
 * the account must share), or the durable subscriptions' one (interest:
 * kept until every durable subscription whose topic it is has acknowledged
 * it; NATS-level topic publishes are stored only where one exists). */
static void
create_stream(struct cluster *cl, bool topics, uint32_t part)
{
	char json[512], subjects[32], desc[64] = "";
	const char *name = topics ? CLUSTER_TOPIC_STREAM : cl->parts[part].name;
	if (topics) {
		cl->topics_asked_ms = now_ms(cl);
		snprintf(subjects, sizeof(subjects), "%s", CLUSTER_TOPIC_SUBJECTS);
	} else {
		cl->stream_asked_ms = now_ms(cl);
		snprintf(subjects, sizeof(subjects), "eft.q.%" PRIu32 ".>", part);
		cluster_queue_stream_description(desc, sizeof(desc), part, cl->nparts);
	}
	snprintf(json, sizeof(json), "{\"name\":\"%s\",\"subjects\":[\"%s\"],"
	    "\"retention\":\"%s\",\"storage\":\"file\",\"num_replicas\":%u,"
	    "\"duplicate_window\":120000000000%s%s%s}", name, subjects,
	    topics ? "interest" : "workqueue", cl->cfg->cluster_replicas,
	    desc[0] ? ",\"description\":\"" : "", desc, desc[0] ? "\"" : "");
	char subject[96];
	snprintf(subject, sizeof(subject), "$JS.API.STREAM.CREATE.%s", name);
	if (api_request(cl, topics ? API_TOPIC_STREAM : API_STREAM, part, subject, json) != 0)
		log_error("cluster: cannot ask for stream %s (out of memory or disconnected)", name);
}

/* EFT_Q_0 first: its answer says whether the account has another layout
 * (the old EFT_QUEUES, another partition count), and then no other
 * partition is made.  again: ask for those made already too. */
static void
create_queue_streams(struct cluster *cl, bool again)
{
	if (!cl->parts[0].ready) {
		create_stream(cl, false, 0);
		return;
	}
	if (again)
		create_stream(cl, false, 0);
	for (uint32_t p = 1; p < cl->nparts; p++)
		if (again || !cl->parts[p].ready)
			create_stream(cl, false, p);
}

static bool
stream_ready(const struct cluster *cl, const struct cq *q)
{
	return q->durable ? cl->topics_ready : cl->parts[q->part].ready;
}

static void
create_consumer(struct cluster *cl, struct cq *q)
{
	char json[1024], subject[SUBJECT_MAX + 64];
	/* A new durable subscription gets what is published from now on. */
	snprintf(json, sizeof(json), "{\"stream_name\":\"%s\",\"config\":{"
	    "\"durable_name\":\"%s\",\"deliver_policy\":\"%s\",\"ack_policy\":\"explicit\","
	    "\"ack_wait\":%llu,\"max_deliver\":-1,\"filter_subject\":\"%s\","
	    "\"replay_policy\":\"instant\",\"max_waiting\":512,\"max_ack_pending\":-1}}",
	    q->stream, q->consumer, q->durable ? "new" : "all",
	    (unsigned long long)cl->cfg->cluster_ack_wait_ms * 1000000ull, q->subject);
	snprintf(subject, sizeof(subject), "$JS.API.CONSUMER.DURABLE.CREATE.%s.%s", q->stream,
	    q->consumer);
	if (api_request(cl, API_CONSUMER, q->qid, subject, json) == 0)
		q->creating = true;
}

static void refill(struct cluster *cl, struct cq *q);
static void swept_floor(struct cluster *cl, struct cq *q, bool failed, const char *data,
    size_t len);
static void swept(struct cluster *cl, struct cq *q, bool failed, const char *data, size_t len);
static void sweep_found(struct cluster *cl, struct cq *q, bool failed, const char *data,
    size_t len);
static void sweep_deleted(struct cluster *cl, struct cq *q, bool failed);
static void sweep_next(struct cluster *cl, struct cq *q, uint64_t from);
static void reset_queue(struct cluster *cl, struct cq *q);
static void held_somewhere(struct cq *q);
static void republish(struct cluster *cl);
static void cut_off(struct cluster *cl, uint64_t now);
static void release_seq(struct cluster *cl, uint64_t *seq);
static bool lease_answer(struct cluster *cl, const struct api *a, const char *data, size_t len);
static void lease_request_lost(struct cluster *cl, const struct api *a);

static void
ask_info(struct cluster *cl, enum api_kind kind, uint32_t part, const char *stream)
{
	char subject[96];
	snprintf(subject, sizeof(subject), "$JS.API.STREAM.INFO.%s", stream);
	api_request(cl, kind, part, subject, "");
}

/* A queue stream of another layout: no queue is clustered (topics, RPC
 * and durable subscriptions go on).  One line per connection says why. */
static void
refuse_queues(struct cluster *cl, uint32_t part, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
refuse_queues(struct cluster *cl, uint32_t part, const char *fmt, ...)
{
	struct cpart *cp = &cl->parts[part];
	if (!cp->refused) {
		cp->refused = true;
		cl->parts_refused++;
	}
	if (cl->refusal_logged)
		return;
	cl->refusal_logged = true;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_error("cluster: %s", line);
}

static void
part_ready(struct cluster *cl, uint32_t part)
{
	struct cpart *cp = &cl->parts[part];
	if (cp->refused) {
		cp->refused = false;
		cl->parts_refused--;
	}
	if (cp->ready)
		return;
	cp->ready = true;
	if (part == 0 && cl->parts_ready + 1 < cl->nparts)
		create_queue_streams(cl, false);
	if (++cl->parts_ready == cl->nparts) {
		log_info("cluster: queue streams " CLUSTER_QUEUE_STREAM_PREFIX "0.."
		    CLUSTER_QUEUE_STREAM_PREFIX "%" PRIu32 " ready (cluster-queue-streams = %" PRIu32 ")",
		    cl->nparts - 1, cl->nparts);
		republish(cl);
	}
}

/* What STREAM.INFO of a partition that exists with another configuration
 * says: the account's partition count, in its description. */
static void
part_info(struct cluster *cl, uint32_t part, const char *data, size_t len)
{
	const char *desc = "";
	size_t dlen = 0;
	uint32_t theirs = 0;
	cluster_json_string(data, len, "description", &desc, &dlen);
	if (cluster_queue_streams_of(desc, dlen, &theirs) && theirs != cl->nparts) {
		refuse_queues(cl, part, "this node has cluster-queue-streams = %" PRIu32 " but the "
		    "NATS account's queue streams were made with %" PRIu32 " (%s); give every node "
		    "the same value, or change it as docs/cluster.md \"Changing cluster-queue-streams\" "
		    "says; queues are not clustered until then", cl->nparts, theirs,
		    cl->parts[part].name);
		return;
	}
	log_warn("cluster: stream %s exists with other settings; using it",
	    cl->parts[part].name);
	part_ready(cl, part);
}

/* STREAM.INFO of EFT_QUEUES, asked when a partition's subjects overlap. */
static void
old_info(struct cluster *cl, uint32_t part, bool failed, const char *data, size_t len)
{
	int64_t msgs = 0, consumers = 0;
	if (failed) {
		refuse_queues(cl, part, "JetStream refused stream %s: its subjects overlap another "
		    "stream's in this NATS account (10065), which takes eft.q.; queues are not "
		    "clustered until it is removed", cl->parts[part].name);
		return;
	}
	cluster_json_int(data, len, "messages", &msgs);
	cluster_json_int(data, len, "consumer_count", &consumers);
	refuse_queues(cl, part, "the NATS account has the old queue stream " CLUSTER_OLD_QUEUE_STREAM
	    " (%" PRId64 " messages, %" PRId64 " consumers); this eftd spreads queues over "
	    "cluster-queue-streams streams and will not use it. Drain it with the old eftd, then "
	    "'nats stream rm " CLUSTER_OLD_QUEUE_STREAM "' (docs/cluster.md, \"Upgrading from one "
	    "queue stream\")", msgs, consumers);
}

static void stats_answer(struct cluster *cl, uint32_t part, bool failed, const char *data,
    size_t len);

static void
ask_mark(struct cluster *cl, uint32_t part)
{
	cl->parts[part].marking = true;
	ask_info(cl, API_MARK, part, cl->parts[part].name);
}

/* Stream part (nparts: the durable subscriptions') may deliver again what
 * it delivered before (NATS restarted, or a new leader): mark its backlog
 * (pulls wait for that) and sweep its queues.  again: ask even if a mark is
 * being asked for (that request was lost with the connection). */
static void
after_outage(struct cluster *cl, uint32_t part, bool again)
{
	uint64_t until = now_ms(cl) + 2 * (uint64_t)cl->cfg->cluster_ack_wait_ms;
	for (struct cq *q = cl->queues; q != NULL; q = q->hh.next) {
		if (q->part != part || q->durable)
			continue;
		q->sw.wanted = true;
		q->sw.until_ms = until;
	}
	if (again || !cl->parts[part].marking)
		ask_mark(cl, part);
}

static void
reset_consumer(struct cluster *cl, struct cq *q)
{
	char subject[SUBJECT_MAX + 64];
	snprintf(subject, sizeof(subject), "$JS.API.CONSUMER.DELETE.%s.%s", q->stream,
	    q->consumer);
	if (api_request(cl, API_RESET, q->qid, subject, "") != 0)
		q->creating = false;  /* made again as it is: the next outage mark tries again */
}

/* Delete queue q's consumer and make it again (deliver all), so that it
 * hands out what its stream holds.  Its stream's pulls wait, and what they
 * bring is marked, until all its queues being made again are, and the
 * mark is taken after that. */
static void
reset_queue(struct cluster *cl, struct cq *q)
{
	struct cpart *cp = &cl->parts[q->part];
	if (q->durable || q->resetting)
		return;
	q->resetting = true;
	q->reset_deleted = false;
	q->consumer_ready = false;
	q->creating = true;   /* not made again before it is deleted */
	q->sw.out = false;
	cp->resetting++;
	cp->marking = true;
	reset_consumer(cl, q);
}

/* Queue stream part came back at sequence last, below what was pulled
 * here: each of its queues' consumer is made again.  False if no queue
 * here needs it. */
static bool
reset_consumers(struct cluster *cl, uint32_t part, uint64_t last)
{
	struct cpart *cp = &cl->parts[part];
	log_warn("cluster: %s came back at sequence %" PRIu64 ", below the %" PRIu64 " pulled here "
	    "(nats-server lost its last writes); its consumers start again from its first "
	    "message, all of it marked redelivered", cp->name, last, cp->seen_seq);
	cp->seen_seq = last;
	for (struct cq *q = cl->queues; q != NULL; q = q->hh.next)
		if (q->part == part)
			reset_queue(cl, q);
	return cp->resetting > 0;
}

static void
mark_answer(struct cluster *cl, uint32_t part, bool failed, int64_t code, const char *data,
    size_t len)
{
	struct cpart *cp = &cl->parts[part];
	int64_t last = 0;
	if (failed && code != 10059) {
		ask_mark(cl, part); /* not known yet (a leader being elected): pulls still wait */
		return;
	}
	/* No such stream (new servers): nothing was stored, and sequences
	 * start again. */
	if (!failed && !cluster_json_int(data, len, "last_seq", &last))
		last = 0;
	if (last < 0)
		last = 0;
	if (part < cl->nparts && cp->seen_seq > (uint64_t)last && reset_consumers(cl, part,
	    (uint64_t)last))
		return;  /* marked once its consumers are made again */
	if (cp->resetting > 0)
		return;  /* a consumer is being made again: marked after that */
	cp->mark = (uint64_t)last;
	cp->marking = false;
	log_info("cluster: after the outage, what %s held (up to sequence %" PRIu64 ") is "
	    "delivered as redelivered", cp->name, cp->mark);
	for (struct cq *q = cl->queues; q != NULL; q = q->hh.next)
		if (q->part == part)
			refill(cl, q);
}

static void
api_answer(struct cluster *cl, uint64_t id, const char *data, size_t len)
{
	struct api *a;
	HASH_FIND(hh, cl->apis, &id, sizeof(id), a);
	if (a == NULL)
		return;
	HASH_DEL(cl->apis, a);
	if (lease_answer(cl, a, data, len)) {
		free(a);
		return;
	}
	int64_t code = 0;
	const char *desc = "";
	size_t dlen = 0;
	bool failed = cluster_json_error(data, len, &code, &desc, &dlen);
	/* already there with another configuration: use it as it is */
	bool exists = failed && (code == 10058 || code == 10013 || code == 10148);
	log_debug("cluster: JetStream answered request %" PRIu64 ": %.*s", id,
	    (int)(len > 300 ? 300 : len), data);
	switch (a->kind) {
	case API_STREAM:
		if (exists)
			ask_info(cl, API_PART_INFO, a->qid, cl->parts[a->qid].name);
		else if (failed && code == 10065)
			ask_info(cl, API_OLD_INFO, a->qid, CLUSTER_OLD_QUEUE_STREAM);
		else if (failed)
			log_error("cluster: JetStream refused stream %s: %.*s (%" PRId64 "); "
			    "is nats-server running with -js?", cl->parts[a->qid].name, (int)dlen, desc,
			    code);
		else
			part_ready(cl, a->qid);
		break;
	case API_PART_INFO:
		if (failed)
			log_error("cluster: JetStream did not describe stream %s: %.*s (%" PRId64 ")",
			    cl->parts[a->qid].name, (int)dlen, desc, code);
		else
			part_info(cl, a->qid, data, len);
		break;
	case API_OLD_INFO:
		old_info(cl, a->qid, failed, data, len);
		break;
	case API_MARK:
		mark_answer(cl, a->qid, failed, code, data, len);
		break;
	case API_LEASE_STREAM:
	case API_LEASE_PUT:
	case API_LEASE_GET:
	case API_LEASE_DELETE:
		break; /* lease_answer's */
	case API_FLOOR:
	case API_PURGE:
	case API_SWEEP_GET:
	case API_SWEEP_DELETE: {
		struct cq *q = cq_of(cl, a->qid);
		if (q == NULL)
			break;
		if (a->kind == API_FLOOR)
			swept_floor(cl, q, failed, data, len);
		else if (a->kind == API_PURGE)
			swept(cl, q, failed, data, len);
		else if (a->kind == API_SWEEP_GET)
			sweep_found(cl, q, failed, data, len);
		else
			sweep_deleted(cl, q, failed);
		break;
	}
	case API_TOPIC_STREAM:
		if (failed && !exists) {
			log_error("cluster: JetStream refused stream %s: %.*s (%" PRId64 "); "
			    "is nats-server running with -js?", CLUSTER_TOPIC_STREAM, (int)dlen, desc,
			    code);
			break;
		}
		if (exists)
			log_warn("cluster: stream %s exists with other settings (%.*s); using it",
			    CLUSTER_TOPIC_STREAM, (int)dlen, desc);
		if (!cl->topics_ready)
			log_info("cluster: durable subscriptions' stream %s ready", CLUSTER_TOPIC_STREAM);
		cl->topics_ready = true;
		break;
	case API_HELD:
		held_somewhere(cq_of(cl, a->qid));
		break;
	case API_RESET: {
		struct cq *q = cq_of(cl, a->qid);
		if (q == NULL)
			break;
		if (failed && code != 10014 && code != 10059)  /* not found: gone with its stream */
			log_warn("cluster: consumer %s not deleted: %.*s; made again as it is",
			    q->consumer, (int)dlen, desc);
		q->creating = false;
		q->reset_deleted = true;
		if (stream_ready(cl, q))
			create_consumer(cl, q);
		break;
	}
	case API_DELETE:
		if (failed)
			log_warn("cluster: a durable subscription's consumer was not deleted: %.*s",
			    (int)dlen, desc);
		break;
	case API_STATS:
		stats_answer(cl, a->qid, failed, data, len);
		break;
	case API_CONSUMER: {
		struct cq *q = cq_of(cl, a->qid);
		if (q == NULL)
			break;
		/* made (as it was) before the reset's delete: made again after */
		if (q->resetting && !q->reset_deleted)
			break;
		q->creating = false;
		release_seq(cl, &q->ready_seq);
		if (q->resetting) {
			q->resetting = false;
			if (cl->parts[q->part].resetting > 0 && --cl->parts[q->part].resetting == 0)
				ask_mark(cl, q->part);
		}
		if (failed && !exists) {
			log_error("cluster: JetStream refused consumer %s: %.*s (%" PRId64 ")",
			    q->consumer, (int)dlen, desc, code);
		} else {
			/* Its count as it stands: one that went back since (its
			 * state lost at a new leader) shows in what is pulled. */
			int64_t counted;
			if (!failed && cluster_json_member_int(data, len, "delivered", "consumer_seq",
			    &counted) && counted >= 0)
				q->max_consumer_seq = (uint64_t)counted;
			q->consumer_ready = true;
			refill(cl, q);
		}
		break;
	}
	}
	/* A stream made: the consumers that waited for it. */
	if (a->kind == API_STREAM || a->kind == API_PART_INFO || a->kind == API_OLD_INFO ||
	    a->kind == API_TOPIC_STREAM)
		for (struct cq *q = cl->queues; q != NULL; q = q->hh.next)
			if (!q->consumer_ready && !q->creating && stream_ready(cl, q))
				create_consumer(cl, q);
	free(a);
}

/* ---- queue SENDs and their acks ---- */

static struct pub *
pub_at(struct cluster *cl, size_t i)
{
	return &cl->pubs[(cl->pubs_head + i) % cl->pubs_cap];
}

static int
pubs_grow(struct cluster *cl)
{
	size_t cap = cl->pubs_cap ? 2 * cl->pubs_cap : 256;
	struct pub *n = malloc(cap * sizeof(*n));
	if (n == NULL)
		return -1;
	for (size_t i = 0; i < cl->npubs; i++)
		n[i] = *pub_at(cl, i);
	free(cl->pubs);
	cl->pubs = n;
	cl->pubs_cap = cap;
	cl->pubs_head = 0;
	return 0;
}

/* Acks came in order or not: what is acked from the front is done. */
static void
pubs_advance(struct cluster *cl)
{
	uint64_t before = cl->kept;
	while (cl->npubs > 0 && pub_at(cl, 0)->acked) {
		struct pub *p = pub_at(cl, 0);
		spent_add(cl, p->msg);
		cl->kept = p->seq;
		cl->pubs_head = (cl->pubs_head + 1) % cl->pubs_cap;
		cl->npubs--;
	}
	if (cl->npubs == 0)
		cl->kept = cl->next_pub - 1;
	if (cl->kept != before)
		cl->events->kept(cl->events->arg, cl->kept);
}

static void
pub_answer(struct cluster *cl, uint64_t seq, const char *data, size_t len)
{
	if (cl->npubs == 0 || seq < pub_at(cl, 0)->seq)
		return;
	size_t i = (size_t)(seq - pub_at(cl, 0)->seq);
	if (i >= cl->npubs)
		return;
	struct pub *p = pub_at(cl, i);
	int64_t code;
	const char *desc;
	size_t dlen;
	if (len == 0 || cluster_json_error(data, len, &code, &desc, &dlen)) {
		/* no stream (yet), or no responders: publish it again later */
		if (len != 0)
			log_warn("cluster: JetStream did not store a message: %.*s; retrying",
			    (int)dlen, desc);
		p->sent_ms = 0;
		return;
	}
	p->acked = true;
	pubs_advance(cl);
}

/* A number in the SENDs' sequence for something else a RECEIPT waits for;
 * 0 if out of memory (then nothing waits). */
static uint64_t
hold_seq(struct cluster *cl)
{
	if (cl->npubs == cl->pubs_cap && pubs_grow(cl) != 0)
		return 0;
	struct pub *p = &cl->pubs[(cl->pubs_head + cl->npubs) % cl->pubs_cap];
	p->seq = cl->next_pub++;
	p->msg = NULL;
	p->acked = false;
	p->sent_ms = 0;
	cl->npubs++;
	return p->seq;
}

static void
release_seq(struct cluster *cl, uint64_t *seq)
{
	if (*seq == 0 || cl->npubs == 0 || *seq < pub_at(cl, 0)->seq)
		return;
	size_t i = (size_t)(*seq - pub_at(cl, 0)->seq);
	*seq = 0;
	if (i < cl->npubs) {
		pub_at(cl, i)->acked = true;
		pubs_advance(cl);
	}
}

/* A publish sent before with no ack may have been stored and delivered
 * already (the ack lost): the copy says redelivered (design 3.2, fix 1),
 * under the same Nats-Msg-Id.  Once: a retry of a marked one is as it is.
 * Out of memory: it goes as it was. */
static void
mark_retry(struct pub *p)
{
	const char *data = natsMsg_GetData(p->msg), *id = NULL;
	int len = natsMsg_GetDataLength(p->msg);
	if (len < CLUSTER_MSG_FIXED || (data[4] & 4) != 0 ||
	    natsMsgHeader_Get(p->msg, "Nats-Msg-Id", &id) != NATS_OK)
		return;
	char *copy = malloc((size_t)len);
	if (copy == NULL)
		return;
	memcpy(copy, data, (size_t)len);
	natsMsg *nm = NULL;
	if (cluster_msg_set_redelivered(copy, (size_t)len) &&
	    natsMsg_Create(&nm, natsMsg_GetSubject(p->msg), natsMsg_GetReply(p->msg), copy,
	    len) == NATS_OK) {
		if (natsMsgHeader_Set(nm, "Nats-Msg-Id", id) == NATS_OK) {
			natsMsg_Destroy(p->msg);
			p->msg = nm;
		} else {
			natsMsg_Destroy(nm);
		}
	}
	free(copy);
}

static void
republish(struct cluster *cl)
{
	if (!cl->connected || !queues_ready(cl))
		return;
	uint64_t now = now_ms(cl);
	for (size_t i = 0; i < cl->npubs; i++) {
		struct pub *p = pub_at(cl, i);
		if (p->acked || p->msg == NULL || (p->sent_ms != 0 && now - p->sent_ms < PUB_RETRY_MS))
			continue;
		if (p->sent_ms != 0)
			mark_retry(p);
		if (natsConnection_PublishMsg(cl->nc, p->msg) == NATS_OK)
			p->sent_ms = now;
	}
}

static int
send_queue(struct cluster *cl, const char *subject, const char *payload, size_t len)
{
	if (cl->npubs == cl->pubs_cap && pubs_grow(cl) != 0)
		return -1;
	uint64_t seq = cl->next_pub;
	/* INBOX.p.SEQ and INSTANCE-SEQ, per SEND: no snprintf */
	char reply[sizeof(cl->inbox) + 24], id[sizeof(cl->instance) + 24];
	memcpy(reply, cl->inbox, cl->inbox_len);
	memcpy(reply + cl->inbox_len, ".p.", 3);
	msg_format_u64(reply + cl->inbox_len + 3, seq);
	memcpy(id, cl->instance, cl->instance_len);
	id[cl->instance_len] = '-';
	msg_format_u64(id + cl->instance_len + 1, seq);
	natsMsg *nm = NULL;
	if (natsMsg_Create(&nm, subject, reply, payload, (int)len) != NATS_OK)
		return -1;
	/* JetStream drops a second copy with the same id: a retry after a lost
	 * ack stores the message once. */
	if (natsMsgHeader_Set(nm, "Nats-Msg-Id", id) != NATS_OK) {
		natsMsg_Destroy(nm);
		return -1;
	}
	struct pub *p = &cl->pubs[(cl->pubs_head + cl->npubs) % cl->pubs_cap];
	p->seq = seq;
	p->msg = nm;
	p->acked = false;
	p->sent_ms = 0;
	cl->npubs++;
	cl->next_pub++;
	if (queues_ready(cl) && natsConnection_PublishMsg(cl->nc, nm) == NATS_OK)
		p->sent_ms = now_ms(cl);
	return 0;
}

/* ---- pulling queue messages ---- */

static void
refill(struct cluster *cl, struct cq *q)
{
	if (!q->consumer_ready || q->pulling || !cl->connected || cl->parts[q->part].marking)
		return;
	if (q->durable && !q->lease_held)
		return; /* another node may have a live subscriber */
	size_t held = dest_depth(q->dest) + dest_unacked(q->dest);
	if (held >= q->window || q->window - held < q->window / 2 + 1)
		return;
	uint32_t batch = (uint32_t)(q->window - held);
	char subject[SUBJECT_MAX + 64], reply[96], json[96];
	snprintf(subject, sizeof(subject), "$JS.API.CONSUMER.MSG.NEXT.%s.%s", q->stream,
	    q->consumer);
	snprintf(reply, sizeof(reply), "%s.q.%" PRIu32, cl->inbox, q->qid);
	snprintf(json, sizeof(json), "{\"batch\":%" PRIu32 ",\"expires\":%llu}", batch,
	    (unsigned long long)PULL_EXPIRES_MS * 1000000ull);
	if (publish_request(cl, subject, reply, json, strlen(json)) != NATS_OK)
		return;
	log_debug("cluster: pulling %" PRIu32 " for %s", batch, q->consumer);
	q->pulling = true;
	q->pull_left = batch;
	q->pull_sent_ms = now_ms(cl);
}

static void
hook_refill(void *arg, struct dest *d)
{
	struct cluster *cl = arg;
	struct cq *q = cq_of(cl, (uint32_t)(uintptr_t)dest_remote(d));
	if (q != NULL)
		refill(cl, q);
}

/* Tell JetStream what became of a message: "+ACK", "-NAK" or "+TERM". */
static void
settle(struct cluster *cl, struct msg *m, const char *how)
{
	if (m->kept == NULL)
		return;
	if (cl->nc != NULL)
		natsConnection_Publish(cl->nc, m->kept, how, (int)strlen(how));
	free(m->kept);
	m->kept = NULL;
}


/* Given back here (NACK, a subscriber gone): another node may have it. */
static void
hook_give_back(void *arg, struct dest *d, struct msg *m)
{
	(void)d;
	settle(arg, m, "-NAK");
	msg_unref(m);
}

static int64_t op_waiting(const void *impl, const char *name, size_t len);

/* A pull that ended found the queue caught up: time to sweep, at most once
 * a second after an outage; and, in case JetStream kept something without
 * an outage seen here, once every SWEEP_IDLE_MS (or cluster-stats-ms) while
 * what waits in JetStream for the queue is not 0. */
static void
sweep(struct cluster *cl, struct cq *q)
{
	uint64_t now = now_ms(cl);
	if (q->sw.out || !q->consumer_ready || q->durable || now - q->sw.last_ms < 1000)
		return;
	uint64_t idle = cl->cfg->cluster_stats_ms > SWEEP_IDLE_MS ? cl->cfg->cluster_stats_ms :
	    SWEEP_IDLE_MS;
	if (!q->sw.wanted && (now - q->sw.last_ms < idle ||
	    op_waiting(cl, dest_name(q->dest), dest_name_len(q->dest)) <= 0))
		return;
	char subject[SUBJECT_MAX + 64];
	snprintf(subject, sizeof(subject), "$JS.API.CONSUMER.INFO.%s.%s", q->stream, q->consumer);
	if (api_request(cl, API_FLOOR, q->qid, subject, "") == 0) {
		q->sw.out = true;
		q->sw.last_ms = now;
		q->sw.after_outage = q->sw.wanted;
	}
}

static void
swept_floor(struct cluster *cl, struct cq *q, bool failed, const char *data, size_t len)
{
	int64_t floor = 0, delivered = 0, unacked = -1, undelivered = -1;
	q->sw.out = false;
	/* (a consumer being made again: its old floor means nothing) */
	if (failed || !q->consumer_ready ||
	    !cluster_json_member_int(data, len, "ack_floor", "stream_seq", &floor) ||
	    !cluster_json_member_int(data, len, "delivered", "stream_seq", &delivered) ||
	    !cluster_json_int(data, len, "num_ack_pending", &unacked) ||
	    !cluster_json_int(data, len, "num_pending", &undelivered))
		return;
	/* Caught up, and nothing unacknowledged: this sweep is the last.  A
	 * message of the queue above the floor and up to the last delivery is
	 * then one the consumer will never deliver again, acknowledged or not
	 * (after a restart its state can say either wrongly: seen on 2.9.10),
	 * so it is not removed but delivered again (sweep_found). */
	bool caught_up = unacked == 0 && undelivered == 0;
	if (caught_up && now_ms(cl) >= q->sw.until_ms)
		q->sw.wanted = false;
	if (!caught_up)
		q->sw.stuck_seq = 0;  /* stuck means so at every look */
	q->sw.floor = floor > 0 ? (uint64_t)floor : 0;
	q->sw.stuck_to = caught_up && delivered > floor ? (uint64_t)delivered : 0;
	q->sw.removed = 0;
	q->sw.deletes = 0;
	if (floor <= 0) {
		if (q->sw.stuck_to != 0) {
			q->sw.out = true;
			sweep_next(cl, q, 0);
		}
		return;
	}
	/* Every message of this subject up to there was acknowledged, and on a
	 * work queue only this consumer takes this subject. */
	char subject[SUBJECT_MAX + 64], json[SUBJECT_MAX + 64];
	snprintf(subject, sizeof(subject), "$JS.API.STREAM.PURGE.%s", q->stream);
	snprintf(json, sizeof(json), "{\"filter\":\"%s\",\"seq\":%" PRId64 "}", q->subject,
	    floor + 1);
	if (api_request(cl, API_PURGE, q->qid, subject, json) == 0)
		q->sw.out = true;
}

/* The sweep's end: what it removed, if anything. */
static void
sweep_done(struct cluster *cl, struct cq *q)
{
	q->sw.out = false;
	if (q->sw.removed == 0)
		return;
	cl->swept += q->sw.removed;
	log_warn("cluster: JetStream still held %" PRIu64 " acknowledged message%s of %s (below "
	    "its consumer's ack floor, after a NATS outage): removed", q->sw.removed,
	    q->sw.removed == 1 ? "" : "s", dest_name(q->dest));
	q->sw.removed = 0;
}

/* Ask for the queue's first message from sequence `from` on. */
static void
sweep_next(struct cluster *cl, struct cq *q, uint64_t from)
{
	char subject[SUBJECT_MAX + 64], json[SUBJECT_MAX + 64];
	snprintf(subject, sizeof(subject), "$JS.API.STREAM.MSG.GET.%s", q->stream);
	snprintf(json, sizeof(json), "{\"seq\":%" PRIu64 ",\"next_by_subj\":\"%s\"}", from,
	    q->subject);
	if (api_request(cl, API_SWEEP_GET, q->qid, subject, json) != 0)
		sweep_done(cl, q);
}

/* The purge's answer.  nats-server 2.9.10's purge by subject can miss a
 * message after a kill -9 (its per-subject index of a block says the
 * subject starts later; seen in make cluster-chaos: purged 0, with or
 * without seq, while next_by_subj found the message and deleting it by
 * sequence worked), so what is left below the floor is looked for one by
 * one after it. */
static void
swept(struct cluster *cl, struct cq *q, bool failed, const char *data, size_t len)
{
	int64_t purged = 0;
	if (!failed && cluster_json_int(data, len, "purged", &purged) && purged > 0)
		q->sw.removed += (uint64_t)purged;
	sweep_next(cl, q, 0);
}

/* Whether a subscriber here holds (or this node buffers) queue q's message
 * at stream sequence seq.  A walk of what is held: only for a message a
 * sweep found stuck, rarely. */
struct held_probe {
	const char *consumer;
	size_t len;
	uint64_t seq;
	bool found;
};

static void
probe_held(const struct msg *m, void *arg)
{
	struct held_probe *p = arg;
	struct cluster_ack ack;
	if (!p->found && m->kept != NULL && cluster_ack_parse(m->kept, &ack) &&
	    ack.has_stream_seq && ack.stream_seq == p->seq && ack.consumer_len == p->len &&
	    memcmp(ack.consumer, p->consumer, p->len) == 0)
		p->found = true;
}

static void
probe_queued(const struct msg *m, bool redelivered, void *arg)
{
	(void)redelivered;
	probe_held(m, arg);
}

static bool
held_here(struct cluster *cl, struct cq *q, uint64_t seq)
{
	struct held_probe p = { q->consumer, strlen(q->consumer), seq, false };
	dest_foreach_queued(q->dest, probe_queued, &p);
	if (!p.found)
		cl->events->each_unacked(cl->events->arg, probe_held, &p);
	return p.found;
}

static void
sweep_found(struct cluster *cl, struct cq *q, bool failed, const char *data, size_t len)
{
	int64_t seq = 0;
	if (failed || !cluster_json_member_int(data, len, "message", "seq", &seq) || seq <= 0) {
		sweep_done(cl, q);  /* none (10037) */
		return;
	}
	/* Below the floor: acknowledged.  A bounded number one by one per
	 * sweep; the next sweep goes on. */
	if ((uint64_t)seq <= q->sw.floor && q->sw.deletes < SWEEP_DELETES_MAX) {
		char subject[SUBJECT_MAX + 64], json[64];
		snprintf(subject, sizeof(subject), "$JS.API.STREAM.MSG.DELETE.%s", q->stream);
		snprintf(json, sizeof(json), "{\"seq\":%" PRId64 ",\"no_erase\":true}", seq);
		q->sw.deletes++;
		q->sw.from = (uint64_t)seq + 1;
		if (api_request(cl, API_SWEEP_DELETE, q->qid, subject, json) != 0)
			sweep_done(cl, q);
		return;
	}
	/* (one a subscriber here holds is not stuck: JetStream may not count
	 * it as unacknowledged, seen in CutOffTest, but it is in hand) */
	bool stuck = q->sw.after_outage && (uint64_t)seq > q->sw.floor &&
	    (uint64_t)seq <= q->sw.stuck_to && !held_here(cl, q, (uint64_t)seq);
	sweep_done(cl, q);
	/* Seen stuck by sweeps an ack wait or more apart: for a moment a
	 * message can look so and not be (a message just acknowledged is
	 * removed a moment later), and JetStream itself would have delivered
	 * again one that is not stuck within the ack wait. */
	uint64_t now = now_ms(cl);
	if (!stuck) {
		q->sw.stuck_seq = 0;
		return;
	}
	if (q->sw.stuck_seq != (uint64_t)seq) {
		q->sw.stuck_seq = (uint64_t)seq;
		q->sw.stuck_seen_ms = now;
	}
	if (now - q->sw.stuck_seen_ms < cl->cfg->cluster_ack_wait_ms || q->sw.held_asked != 0) {
		q->sw.wanted = true;  /* looked at again */
		return;
	}
	/* JetStream can lose track of a message it delivered (seen in
	 * CutOffTest: its ack floor's consumer sequence reached the last
	 * delivery while a subscriber on another node held the last message),
	 * so only no node holding it makes it stuck.  Asked of every node. */
	char question[SUBJECT_MAX + 64];
	q->sw.wanted = true;
	if (cluster_held_format(question, sizeof(question), q->stream, q->consumer,
	    (uint64_t)seq) > 0 && api_request(cl, API_HELD, q->qid, HELD_SUBJECT, question) == 0)
		q->sw.held_asked = (uint64_t)seq;
}

/* A node answered that a subscriber of its holds the stuck candidate: it
 * is not stuck, only untracked by JetStream.  Looked at again an ack wait
 * later (it can still be let go of without an ack). */
static void
held_somewhere(struct cq *q)
{
	if (q == NULL || q->sw.held_asked == 0)
		return;
	log_info("cluster: a message of %s (sequence %" PRIu64 ") that JetStream counts as "
	    "delivered and acknowledged is held by a subscriber of another node: left to it",
	    dest_name(q->dest), q->sw.held_asked);
	q->sw.held_asked = 0;
	q->sw.stuck_seq = 0;
	q->sw.wanted = true;
}

/* No node answered in HELD_WAIT_MS: the candidate is stuck, unless a later
 * sweep found it gone meanwhile. */
static void
held_nowhere(struct cluster *cl, struct cq *q)
{
	if (q == NULL || q->sw.held_asked == 0)
		return;
	uint64_t asked = q->sw.held_asked;
	q->sw.held_asked = 0;
	if (q->sw.stuck_seq != asked)
		return;
	log_warn("cluster: JetStream holds a message of %s (sequence %" PRIu64 ") that its "
	    "consumer counts as delivered, with nothing unacknowledged and no node holding it "
	    "(its state went wrong in a NATS outage): the consumer is made again, and what the "
	    "queue holds comes again, marked redelivered", dest_name(q->dest), q->sw.stuck_seq);
	q->sw.stuck_seq = 0;
	reset_queue(cl, q);
}

/* Another node asks whether a subscriber here holds a message:
 * "STREAM CONSUMER SEQ".  Only yes is answered. */
static void
on_held(struct cluster *cl, void *arg, natsMsg *nm)
{
	(void)arg;
	const char *reply = natsMsg_GetReply(nm), *data = natsMsg_GetData(nm);
	int len = natsMsg_GetDataLength(nm);
	struct cluster_held held;
	if (reply == NULL || data == NULL || len <= 0 ||
	    !cluster_held_parse(data, (size_t)len, &held))
		return;
	struct cq *q;
	HASH_FIND(hh_consumer, cl->by_consumer, held.consumer, held.consumer_len, q);
	if (q != NULL && strlen(q->stream) == held.stream_len &&
	    memcmp(q->stream, held.stream, held.stream_len) == 0 && held_here(cl, q, held.seq))
		natsConnection_Publish(cl->nc, reply, "held", 4);
}

static void
sweep_deleted(struct cluster *cl, struct cq *q, bool failed)
{
	if (failed) {
		sweep_done(cl, q);
		return;
	}
	q->sw.removed++;
	sweep_next(cl, q, q->sw.from);
}

static void
nak_one(struct msg *m, void *arg)
{
	settle(arg, m, "-NAK");
}

/* Whether a pulled message may have been delivered before, though
 * JetStream counts this delivery as its first: after NATS restarted, or a
 * stream or consumer got a new leader, the consumer's state can go back
 * (seen on 2.9.10 with R1 and R3).  Three signs, any one enough:
 * - it is at or below the mark taken after the outage (after_outage);
 * - a mark is being taken: whatever comes before the answer is suspect;
 * - its consumer sequence is not above the highest this node saw for the
 *   queue: the consumer counts its deliveries again, so it lost some (the
 *   advisory of its new leader may come after its first deliveries, or
 *   not at all); the stream's backlog is marked then, as after an outage. */
static void
redelivered_or_not(struct cluster *cl, struct cq *q, struct msg *m, const struct cluster_ack *ack)
{
	struct cpart *cp = &cl->parts[q->part];
	bool counted_again = ack->has_consumer_seq && ack->consumer_seq <= q->max_consumer_seq;
	bool below_mark = ack->has_stream_seq && ack->stream_seq <= cp->mark;
	if ((ack->has_delivered && ack->delivered > 1) || cp->marking || below_mark ||
	    counted_again)
		m->redelivered = true;
	if (counted_again && !below_mark && !cp->marking) {
		log_info("cluster: %s counts its deliveries again (consumer sequence %" PRIu64
		    ", this node saw %" PRIu64 "): what %s held is delivered as redelivered",
		    q->consumer, ack->consumer_seq, q->max_consumer_seq, cp->name);
		after_outage(cl, q->part, false);
	}
	if (ack->has_consumer_seq && ack->consumer_seq > q->max_consumer_seq)
		q->max_consumer_seq = ack->consumer_seq;
	if (ack->has_stream_seq && ack->stream_seq > cp->seen_seq)
		cp->seen_seq = ack->stream_seq;
}

/* A pull's answer: a message (on its own subject, eft.q.NAME, with an ack
 * subject naming its consumer) or a status (on the pull's reply subject,
 * INBOX.q.QID). */
static void
pulled(struct cluster *cl, struct cq *q, natsMsg *nm, const struct cluster_ack *ack)
{
	const char *status = NULL;
	/* A message has an ack subject for a reply, a status none: only a
	 * status's headers are read (reading them costs libnats allocations). */
	const char *reply = natsMsg_GetReply(nm);
	if (reply == NULL && natsMsgHeader_Get(nm, "Status", &status) == NATS_OK &&
	    status != NULL) {
		/* 404 no messages, 408 the request expired, 409 ...: pull again */
		log_debug("cluster: pull for %s ended: %s", q ? q->consumer : "a queue gone", status);
		if (q != NULL) {
			q->pulling = false;
			q->pull_left = 0;
			sweep(cl, q);
			refill(cl, q);
		}
		return;
	}
	if (reply == NULL)
		return;
	if (q == NULL) {
		/* For a pull of a queue nobody here wants any more: back.  It may
		 * come back to that same pull until the pull ends (at most its
		 * batch, within PULL_EXPIRES_MS).  Not "-NAK {delay}": nats-server
		 * 2.9 then loses count of the deliveries, and redelivered:true
		 * with it (found by test_cluster under load). */
		natsConnection_Publish(cl->nc, reply, "-NAK", 4);
		return;
	}
	if (q->pull_left > 0 && --q->pull_left == 0)
		q->pulling = false;
	bool bad;
	struct msg *m = cluster_msg_decode(cl->env.pool, natsMsg_GetData(nm),
	    (size_t)natsMsg_GetDataLength(nm), (*cl->env.next_msg_id)++, &bad);
	if (m == NULL) {
		log_error("cluster: %s a message from %s: dropped", bad ? "malformed" :
		    "out of memory for", q->subject);
		natsConnection_Publish(cl->nc, reply, bad ? "+TERM" : "-NAK", bad ? 5 : 4);
		return;
	}
	if (ack != NULL)
		redelivered_or_not(cl, q, m, ack);
	/* One stream sequence twice: JetStream delivered it again; two
	 * sequences for one body: it was stored twice (design 3.1). */
	log_debug("cluster: pulled for %s: stream sequence %" PRIu64 ", consumer sequence %"
	    PRIu64 ", delivered %" PRIu64 "%s", q->consumer, ack ? ack->stream_seq : 0,
	    ack ? ack->consumer_seq : 0, ack ? ack->delivered : 0,
	    m->redelivered ? " (as redelivered)" : "");
	/* expiration:0 went through JetStream, where nobody could take it as
	 * it came: it has expired, whatever this node's clock says of its send
	 * time (a topic's goes to every node at once). */
	if (m->now_or_never) {
		m->now_or_never = false;
		m->expires_ms = 1;
	}
	m->kept = strdup(reply);
	if (m->kept == NULL) {
		msg_unref(m);
		natsConnection_Publish(cl->nc, reply, "-NAK", 4);
		return;
	}
	dest_publish(q->dest, m, cl->env.dropped_no_memory);
	if (!q->pulling)
		refill(cl, q);
}

/* ---- topics and replies from other nodes ---- */

static void
deliver_remote(struct cluster *cl, struct dest *d, natsMsg *nm)
{
	bool bad;
	struct msg *m = cluster_msg_decode(cl->env.pool, natsMsg_GetData(nm),
	    (size_t)natsMsg_GetDataLength(nm), (*cl->env.next_msg_id)++, &bad);
	if (m == NULL) {
		log_error("cluster: %s a message for %s: dropped", bad ? "malformed" :
		    "out of memory for", dest_name(d));
		*cl->env.dropped_no_memory += !bad;
		return;
	}
	dest_publish(d, m, cl->env.dropped_no_memory);
}

static void
reply_arrived(struct cluster *cl, natsMsg *nm)
{
	/* eft.n.NODE.RANDOM -> /reply-queue/eft.NODE.RANDOM */
	const char *subject = natsMsg_GetSubject(nm);
	const char *random = strrchr(subject, '.');
	char name[512];
	int n = snprintf(name, sizeof(name), REPLY_PREFIX "eft.%s%s", cl->token, random ? random :
	    "");
	struct dest *d = n > 0 && (size_t)n < sizeof(name) ? dests_find(cl->env.dests, name,
	    (size_t)n) : NULL;
	if (d == NULL || dest_temp(d) == NULL) {
		(*cl->env.dropped_reply_owner_gone)++;
		return;
	}
	deliver_remote(cl, d, nm);
}

static void
inbox_arrived(struct cluster *cl, natsMsg *nm)
{
	const char *subject = natsMsg_GetSubject(nm);
	const char *reply = natsMsg_GetReply(nm);
	/* its ack subject, read once for all pulled() needs of it */
	struct cluster_ack ack;
	bool acked = reply != NULL && cluster_ack_parse(reply, &ack);
	if (acked && ack.consumer_len > 0) {
		struct cq *q;
		HASH_FIND(hh_consumer, cl->by_consumer, ack.consumer, ack.consumer_len, q);
		pulled(cl, q, nm, &ack);
		return;
	}
	if (strncmp(subject, cl->inbox, cl->inbox_len) != 0 || subject[cl->inbox_len] != '.')
		return;
	const char *rest = subject + cl->inbox_len + 1;
	char kind = rest[0];
	if (kind == '\0' || rest[1] != '.')
		return;
	char *end;
	unsigned long long id = strtoull(rest + 2, &end, 10);
	if (*end != '\0')
		return;
	const char *data = natsMsg_GetData(nm);
	size_t len = (size_t)natsMsg_GetDataLength(nm);
	switch (kind) {
	case 'p':
		pub_answer(cl, id, data, len);
		break;
	case 'q':
		pulled(cl, cq_of(cl, (uint32_t)id), nm, acked ? &ack : NULL);
		break;
	case 'a':
		api_answer(cl, id, data ? data : "", len);
		break;
	}
}

/* Take what the last read brought off each subscription. */
static void
drain(natsSubscription *sub, struct cluster *cl, void (*fn)(struct cluster *, void *, natsMsg *),
    void *arg)
{
	int msgs = 0;
	if (sub == NULL || natsSubscription_GetPending(sub, &msgs, NULL) != NATS_OK)
		return;
	for (; msgs > 0; msgs--) {
		natsMsg *nm = NULL;
		if (natsSubscription_NextMsg(&nm, sub, 0) != NATS_OK)
			return;
		fn(cl, arg, nm);
		spent_add(cl, nm);
	}
}

static void
on_inbox(struct cluster *cl, void *arg, natsMsg *nm)
{
	(void)arg;
	inbox_arrived(cl, nm);
}

static void
on_reply(struct cluster *cl, void *arg, natsMsg *nm)
{
	(void)arg;
	reply_arrived(cl, nm);
}

/* Does a message that t's wider subject brought match t's pattern (one
 * with '#' before its end)?  Its name is read back from its subject. */
static bool
topic_wanted(struct cluster *cl, const struct ctopic *t, natsMsg *nm)
{
	const char *subject = natsMsg_GetSubject(nm);
	char name[SUBJECT_MAX];
	long n = cluster_topic_name(subject, strlen(subject), name, sizeof(name));
	size_t plen;
	const char *pat = queue_part(dest_name(t->dest), dest_name_len(t->dest), &plen);
	if (n >= 0 && subject_match(pat, plen, name, (size_t)n))
		return true;
	cl->topic_filtered++;
	log_debug("cluster: %s for %s: not a match, dropped", subject, dest_name(t->dest));
	return false;
}

static void
on_topic(struct cluster *cl, void *arg, natsMsg *nm)
{
	struct ctopic *t = arg;
	if (t->exact || topic_wanted(cl, t, nm))
		deliver_remote(cl, t->dest, nm);
}

/* A stream or consumer of a NATS cluster has a new leader (a server died,
 * or came back): as after an outage of our own, the new leader may deliver
 * again what the old one delivered, with delivered = 1 (seen with R3 in
 * test/e2e/test_cluster_chaos.py), so its stream's backlog is marked and its queues
 * swept.  $JS.EVENT.ADVISORY.{STREAM,CONSUMER}.LEADER_ELECTED.STREAM[.CONSUMER] */
static void
on_leader(struct cluster *cl, void *arg, natsMsg *nm)
{
	(void)arg;
	const char *subject = natsMsg_GetSubject(nm), *at = strstr(subject, "LEADER_ELECTED.");
	if (at == NULL)
		return;
	const char *stream = at + strlen("LEADER_ELECTED.");
	size_t len = strcspn(stream, ".");
	size_t plen = strlen(CLUSTER_QUEUE_STREAM_PREFIX);
	uint32_t part = UINT32_MAX;
	if (len == strlen(CLUSTER_TOPIC_STREAM) && memcmp(stream, CLUSTER_TOPIC_STREAM, len) == 0) {
		part = cl->nparts;
	} else if (len > plen && len < plen + 6 && memcmp(stream, CLUSTER_QUEUE_STREAM_PREFIX,
	    plen) == 0 && strspn(stream + plen, "0123456789") == len - plen) {
		part = (uint32_t)strtoul(stream + plen, NULL, 10);
	}
	if (part > cl->nparts || (part == cl->nparts && cl->ndurable == 0))
		return;
	log_info("cluster: %s has a new leader: what it held is delivered as redelivered", subject);
	after_outage(cl, part, false);
}

static void
poll_all(struct cluster *cl)
{
	/* a new leader's advisory before the pulled messages that came after
	 * it: their stream's mark is asked for first */
	drain(cl->leader_sub, cl, on_leader, NULL);
	drain(cl->inbox_sub, cl, on_inbox, NULL);
	drain(cl->reply_sub, cl, on_reply, NULL);
	drain(cl->held_sub, cl, on_held, NULL);
	for (struct ctopic *t = cl->topics; t != NULL; t = t->next)
		drain(t->sub, cl, on_topic, t);
}

/* ---- the durable subscription's lease: one live subscriber cluster-wide ----
 *
 * A key per durable subscription in a JetStream key-value bucket
 * (EFT_LEASES, stream KV_EFT_LEASES), key d_NAME (its consumer's name),
 * value {"node":"NODE"}.  The bucket's max_age is the ack wait: a lease not
 * renewed for that long (its node died) is gone.  Every write says which
 * revision it expects (Nats-Expected-Last-Subject-Sequence), so two nodes
 * cannot both hold it: a claim expects 0 (none), a renewal its own last
 * revision; JetStream refuses the other with 10071. */

#define LEASE_STREAM "KV_EFT_LEASES"
#define LEASE_SUBJECT "$KV.EFT_LEASES."  /* + d_NAME */
#define LEASE_RETRY_MS 1000     /* a claim or renewal that failed otherwise: again after this */
/* A claim refused is tried again for this long before the subscriber gets
 * the ERROR: the holder's release (its subscriber just left there) may be
 * on its way. */
#define LEASE_REFUSE_MS 500
#define LEASE_REFUSE_STEP_MS 100

static void
lease_create_stream(struct cluster *cl)
{
	char json[512];
	uint64_t ttl_ns = (uint64_t)cl->cfg->cluster_ack_wait_ms * 1000000ull;
	/* JetStream refuses a duplicate window longer than max_age. */
	uint64_t window_ns = ttl_ns < 120000000000ull ? ttl_ns : 120000000000ull;
	cl->leases_asked_ms = now_ms(cl);
	snprintf(json, sizeof(json), "{\"name\":\"" LEASE_STREAM "\",\"subjects\":[\""
	    LEASE_SUBJECT ">\"],\"retention\":\"limits\",\"max_msgs_per_subject\":1,"
	    "\"storage\":\"file\",\"num_replicas\":%u,\"max_age\":%llu,"
	    "\"duplicate_window\":%llu,\"deny_delete\":false,\"allow_rollup_hdrs\":true}",
	    cl->cfg->cluster_replicas, (unsigned long long)ttl_ns,
	    (unsigned long long)window_ns);
	if (api_request(cl, API_LEASE_STREAM, 0, "$JS.API.STREAM.CREATE." LEASE_STREAM, json) != 0)
		log_error("cluster: cannot ask for stream " LEASE_STREAM " (out of memory or "
		    "disconnected)");
}

/* Store q's lease, expecting revision q->lease_rev (0: nobody holds it). */
static void
lease_put(struct cluster *cl, struct cq *q)
{
	char subject[SUBJECT_MAX + 32], reply[128], value[sizeof(cl->token) + 16], expect[24];
	snprintf(subject, sizeof(subject), LEASE_SUBJECT "%s", q->consumer);
	int vlen = snprintf(value, sizeof(value), "{\"node\":\"%s\"}", cl->token);
	snprintf(expect, sizeof(expect), "%" PRIu64, q->lease_rev);
	struct api *a = calloc(1, sizeof(*a));
	if (a == NULL)
		return;
	a->id = ++cl->next_api;
	a->sent_ms = now_ms(cl);
	a->kind = API_LEASE_PUT;
	a->qid = q->qid;
	snprintf(reply, sizeof(reply), "%s.a.%" PRIu64, cl->inbox, a->id);
	natsMsg *nm = NULL;
	natsStatus st = natsMsg_Create(&nm, subject, reply, value, vlen);
	if (st == NATS_OK)
		st = natsMsgHeader_Set(nm, "Nats-Expected-Last-Subject-Sequence", expect);
	if (st == NATS_OK)
		st = natsConnection_PublishMsg(cl->nc, nm);
	natsMsg_Destroy(nm);
	if (st != NATS_OK) {
		free(a);
		q->lease_retry_ms = now_ms(cl) + LEASE_RETRY_MS;
		return;
	}
	HASH_ADD(hh, cl->apis, id, sizeof(a->id), a);
	q->lease_out = true;
}

static void
lease_claim(struct cluster *cl, struct cq *q)
{
	if (q->durable && cl->connected && cl->leases_ready && !q->lease_out && !q->lease_refused)
		lease_put(cl, q);
}

/* Who holds q's lease: read it (a refused claim or renewal). */
static void
lease_get(struct cluster *cl, struct cq *q)
{
	char json[SUBJECT_MAX + 64];
	snprintf(json, sizeof(json), "{\"last_by_subj\":\"" LEASE_SUBJECT "%s\"}", q->consumer);
	if (api_request(cl, API_LEASE_GET, q->qid, "$JS.API.STREAM.MSG.GET." LEASE_STREAM,
	    json) == 0)
		q->lease_out = true;
	else
		q->lease_retry_ms = now_ms(cl) + LEASE_RETRY_MS;
}

/* Delete revision rev, this node's: if the lease passed to another node
 * meanwhile, rev is gone already and the delete fails harmlessly (a purge by
 * subject would remove the other node's). */
static void
lease_delete(struct cluster *cl, uint64_t rev)
{
	char json[64];
	snprintf(json, sizeof(json), "{\"seq\":%" PRIu64 ",\"no_erase\":true}", rev);
	api_request(cl, API_LEASE_DELETE, 0, "$JS.API.STREAM.MSG.DELETE." LEASE_STREAM, json);
}

/* A durable subscription's first subscriber here: its RECEIPT waits for the
 * claim, made once the bucket is there. */
static void
lease_opened(struct cluster *cl, struct cq *q)
{
	q->lease_seq = hold_seq(cl);
	if (cl->leases_ready)
		lease_claim(cl, q);
	else if (cl->connected && (cl->leases_asked_ms == 0 ||
	    now_ms(cl) - cl->leases_asked_ms >= 1000))
		lease_create_stream(cl);
}

/* Its last subscriber here left (or eftd stops). */
static void
lease_release(struct cluster *cl, struct cq *q)
{
	if (q->durable && q->lease_rev != 0 && cl->connected)
		lease_delete(cl, q->lease_rev);
	q->lease_rev = 0;
	q->lease_held = false;
	release_seq(cl, &q->lease_seq);
}

/* Another node holds it: the subscriber here gets the ERROR (the core
 * closes its connection later, which frees q; q is not touched after the
 * call all the same). */
static void
lease_refuse(struct cluster *cl, struct cq *q, const char *node, size_t node_len)
{
	log_info("cluster: durable subscription %s has a live subscriber on node %.*s: the one "
	    "here gets an ERROR", q->consumer, (int)node_len, node);
	q->lease_held = false;
	q->lease_refused = true;
	q->lease_rev = 0;
	uint64_t seq = q->lease_seq;
	q->lease_seq = 0;
	if (cl->events->durable_refused != NULL)
		cl->events->durable_refused(cl->events->arg, q->dest);
	/* after the call: its RECEIPT, not kept, has been cut out */
	release_seq(cl, &seq);
}

static void
lease_put_answer(struct cluster *cl, struct cq *q, const char *data, size_t len)
{
	int64_t code = 0, seq = 0;
	const char *desc = "";
	size_t dlen = 0;
	bool failed = cluster_json_error(data, len, &code, &desc, &dlen);
	bool stored = !failed && cluster_json_int(data, len, "seq", &seq) && seq > 0;
	if (q == NULL) {
		/* its subscriber left before the answer came */
		if (stored && cl->connected)
			lease_delete(cl, (uint64_t)seq);
		return;
	}
	q->lease_out = false;
	if (stored) {
		if (!q->lease_held)
			log_debug("cluster: lease of %s claimed, revision %" PRId64, q->consumer, seq);
		q->lease_rev = (uint64_t)seq;
		q->lease_held = true;
		q->lease_renewed_ms = now_ms(cl);
		q->lease_refused_ms = 0;
		release_seq(cl, &q->lease_seq);
		refill(cl, q);
		return;
	}
	if (failed && code == 10071) {
		/* held: by whom? */
		lease_get(cl, q);
		return;
	}
	/* no bucket (NATS servers new), no JetStream: again later */
	if (!failed) {
		desc = "no answer from JetStream";
		dlen = strlen(desc);
	}
	log_warn("cluster: lease of %s not stored: %.*s; retrying", q->consumer, (int)dlen, desc);
	q->lease_retry_ms = now_ms(cl) + LEASE_RETRY_MS;
}

static void
lease_get_answer(struct cluster *cl, struct cq *q, const char *data, size_t len)
{
	if (q == NULL)
		return;
	q->lease_out = false;
	int64_t code = 0, seq = 0;
	const char *desc = "", *b64 = NULL, *node = NULL;
	size_t dlen = 0, blen = 0, nlen = 0, vlen = 0;
	bool failed = cluster_json_error(data, len, &code, &desc, &dlen);
	if (failed && code == 10037) {
		/* none now: aged out or released since */
		q->lease_rev = 0;
		lease_claim(cl, q);
		return;
	}
	char value[512];
	if (failed || !cluster_json_int(data, len, "seq", &seq) ||
	    !cluster_json_string(data, len, "data", &b64, &blen) ||
	    sodium_base642bin((unsigned char *)value, sizeof(value) - 1, b64, blen, NULL, &vlen,
	    NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
		log_warn("cluster: lease of %s cannot be read: %.*s; retrying", q->consumer,
		    (int)(failed ? dlen : len > 200 ? 200 : len), failed ? desc : data);
		q->lease_retry_ms = now_ms(cl) + LEASE_RETRY_MS;
		return;
	}
	value[vlen] = '\0';
	if (!cluster_json_string(value, vlen, "node", &node, &nlen)) {
		node = "?";
		nlen = 1;
	}
	if (nlen == strlen(cl->token) && memcmp(node, cl->token, nlen) == 0) {
		/* This node's: from before a restart (node names are unique), or
		 * an answer lost.  Nobody else subscribes here (proto.c): take it. */
		q->lease_rev = (uint64_t)seq;
		lease_claim(cl, q);
		return;
	}
	uint64_t now = now_ms(cl);
	if (!q->lease_held && q->lease_refused_ms == 0)
		q->lease_refused_ms = now;
	if (!q->lease_held && now - q->lease_refused_ms < LEASE_REFUSE_MS) {
		q->lease_rev = 0;
		q->lease_retry_ms = now + LEASE_REFUSE_STEP_MS;
		return;
	}
	lease_refuse(cl, q, node, nlen);
}

/* An answer to a lease request: true if a was one. */
static bool
lease_answer(struct cluster *cl, const struct api *a, const char *data, size_t len)
{
	int64_t code = 0;
	const char *desc = "";
	size_t dlen = 0;
	log_debug("cluster: JetStream answered lease request %" PRIu64 ": %.*s", a->id,
	    (int)(len > 300 ? 300 : len), data);
	switch (a->kind) {
	case API_LEASE_STREAM:
		if (cluster_json_error(data, len, &code, &desc, &dlen) && code != 10058) {
			log_error("cluster: JetStream refused stream " LEASE_STREAM ": %.*s (%" PRId64
			    ")", (int)dlen, desc, code);
			return true;
		}
		if (code == 10058)
			log_warn("cluster: stream " LEASE_STREAM " exists with other settings (%.*s); "
			    "using it", (int)dlen, desc);
		if (!cl->leases_ready)
			log_info("cluster: durable subscriptions' lease stream " LEASE_STREAM " ready");
		cl->leases_ready = true;
		for (struct cq *q = cl->queues; q != NULL; q = q->hh.next)
			if (!q->lease_held)
				lease_claim(cl, q);
		return true;
	case API_LEASE_PUT:
		lease_put_answer(cl, cq_of(cl, a->qid), data, len);
		return true;
	case API_LEASE_GET:
		lease_get_answer(cl, cq_of(cl, a->qid), data, len);
		return true;
	case API_LEASE_DELETE:
		if (cluster_json_error(data, len, &code, &desc, &dlen))
			log_debug("cluster: a lease was not deleted (passed on, or aged out): %.*s",
			    (int)dlen, desc);
		return true;
	default:
		return false;
	}
}

/* A lease request whose answer never came: tried again from the tick. */
static void
lease_request_lost(struct cluster *cl, const struct api *a)
{
	struct cq *q = a->kind == API_LEASE_PUT || a->kind == API_LEASE_GET ? cq_of(cl, a->qid) :
	    NULL;
	if (q != NULL)
		q->lease_out = false;
}

/* Connected again: every lease is claimed again (with the revision this
 * node last stored, or 0), and nothing is pulled until it is back. */
static void
leases_reconnected(struct cluster *cl)
{
	for (struct cq *q = cl->queues; q != NULL; q = q->hh.next) {
		q->lease_held = false;
		q->lease_out = false;
		q->lease_retry_ms = 0;
	}
	if (cl->ndurable == 0)
		return;
	lease_create_stream(cl);
	for (struct cq *q = cl->queues; q != NULL; q = q->hh.next)
		lease_claim(cl, q);
}

/* Renewed every third of the ack wait (its max_age), as the +WPI of what
 * is held here; claims refused or failed are tried again. */
static void
leases_tick(struct cluster *cl, uint64_t now)
{
	if (cl->ndurable == 0)
		return;
	if (!cl->leases_ready && now - cl->leases_asked_ms >= 1000)
		lease_create_stream(cl);
	for (struct cq *q = cl->queues; q != NULL; q = q->hh.next) {
		if (!q->durable || q->lease_out || q->lease_refused || now < q->lease_retry_ms)
			continue;
		if (!q->lease_held || now - q->lease_renewed_ms >= cl->cfg->cluster_ack_wait_ms / 3)
			lease_claim(cl, q);
	}
}

/* ---- connection state, on the loop ---- */

static int
subscribe_sync(struct cluster *cl, natsSubscription **sub, const char *subject)
{
	if (natsConnection_SubscribeSync(sub, cl->nc, subject) != NATS_OK)
		return -1;
	/* Drained after every read: no limit, never a slow consumer. */
	natsSubscription_SetPendingLimits(*sub, -1, -1);
	return 0;
}

static void waiting_reset(struct cluster *cl);

static void
connected(struct cluster *cl)
{
	char url[256] = "";
	natsConnection_GetConnectedUrl(cl->nc, url, sizeof(url));
	log_info("cluster: node %s connected to NATS at %s", cl->node, url);
	bool reconnect = cl->ever_connected;
	cl->connected = true;
	cl->ever_connected = true;
	cl->revoke_due = false;
	atomic_store(&cl->reconnects, 0);
	cl->logged_attempts = 0;
	if (cl->inbox_sub == NULL) {
		char subject[128];
		snprintf(subject, sizeof(subject), "%s.>", cl->inbox);
		char reply[512];
		snprintf(reply, sizeof(reply), "eft.n.%s.*", cl->token);
		if (subscribe_sync(cl, &cl->inbox_sub, subject) != 0 ||
		    subscribe_sync(cl, &cl->reply_sub, reply) != 0 ||
		    subscribe_sync(cl, &cl->leader_sub, "$JS.EVENT.ADVISORY.*.LEADER_ELECTED.>") != 0 ||
		    subscribe_sync(cl, &cl->held_sub, HELD_SUBJECT) != 0)
			log_error("cluster: cannot subscribe to this node's subjects");
	}
	/* Pull requests out before a disconnect are gone with it. */
	for (struct cq *q = cl->queues; q != NULL; q = q->hh.next) {
		q->sw.out = false;
		q->pulling = false;
		q->pull_left = 0;
		q->consumer_ready = false;
		q->creating = false;
		q->resetting = false;
		q->sw.held_asked = 0;
	}
	for (uint32_t p = 0; p < cl->nparts; p++)
		cl->parts[p].resetting = 0;
	forget_requests(cl);
	waiting_reset(cl);
	/* After an outage: where each stream was, before any pull. */
	if (reconnect) {
		for (uint32_t p = 0; p < cl->nparts; p++)
			after_outage(cl, p, true);
		if (cl->ndurable > 0)
			after_outage(cl, cl->nparts, true);
	}
	/* A stream once made stays (asked for again all the same, in case the
	 * NATS servers are new): SENDs need not wait for the answer.  A
	 * refusal is looked at again, and said again, on each connection. */
	cl->refusal_logged = false;
	create_queue_streams(cl, true);
	if (cl->ndurable > 0)
		create_stream(cl, true, 0);
	leases_reconnected(cl);
}

static void
state_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cluster *cl = arg;
	natsConnStatus st = natsConnection_Status(cl->nc);
	bool up = st == NATS_CONN_STATUS_CONNECTED;
	int made = atomic_load(&cl->connections);
	if (up && (!cl->connected || made != cl->connections_seen)) {
		cl->connections_seen = made;
		connected(cl);
	} else if (!up && cl->connected) {
		cl->connected = false;
		cut_off(cl, now_ms(cl));
		log_warn("cluster: lost NATS (%s); clustered destinations get an ERROR until it is "
		    "back, retrying", cl->cfg->cluster);
	}
	int attempts = atomic_load(&cl->reconnects);
	/* Each doubling of the attempts is logged: enough to see, not a flood. */
	if (!up && attempts > 0 && attempts >= 2 * cl->logged_attempts) {
		cl->logged_attempts = attempts;
		log_warn("cluster: NATS still unreachable after %d attempt%s; retrying", attempts,
		    attempts == 1 ? "" : "s");
	}
}

/* Requests whose answer never came: a consumer is asked for again (the
 * streams are asked for again while not ready anyway). */
static void
forget_lost_requests(struct cluster *cl, uint64_t now)
{
	struct api *a, *tmp;
	HASH_ITER(hh, cl->apis, a, tmp) {
		if (now - a->sent_ms < (a->kind == API_HELD ? HELD_WAIT_MS : API_TIMEOUT_MS))
			continue;
		HASH_DEL(cl->apis, a);
		if (a->kind == API_HELD)
			held_nowhere(cl, cq_of(cl, a->qid));
		if (a->kind == API_MARK)
			ask_mark(cl, a->qid);
		if (a->kind == API_RESET) {
			struct cq *rq = cq_of(cl, a->qid);
			if (rq != NULL)
				reset_consumer(cl, rq);
		}
		if (a->kind == API_FLOOR || a->kind == API_PURGE || a->kind == API_SWEEP_GET ||
		    a->kind == API_SWEEP_DELETE) {
			struct cq *sq = cq_of(cl, a->qid);
			if (sq != NULL)
				sq->sw.out = false;
		}
		lease_request_lost(cl, a);
		struct cq *q = a->kind == API_CONSUMER ? cq_of(cl, a->qid) : NULL;
		if (q != NULL) {
			log_info("cluster: no answer from JetStream for consumer %s; asking again",
			    q->consumer);
			q->creating = false;
		}
		free(a);
	}
}

/* "Still working on it": JetStream restarts the ack wait of m. */
static void
in_progress(struct cluster *cl, const struct msg *m)
{
	if (m->kept != NULL)
		natsConnection_Publish(cl->nc, m->kept, "+WPI", 4);
}

static void
progress_queued(const struct msg *m, bool redelivered, void *arg)
{
	(void)redelivered;
	in_progress(arg, m);
}

static void
progress_dest(const struct dest *d, void *arg)
{
	if (dest_kind(d) == DEST_QUEUE && dest_remote(d) != NULL)
		dest_foreach_queued(d, progress_queued, arg);
}

/* Every third of the ack wait, what this node holds (buffered, or handed
 * out and not yet acknowledged) is marked in progress, so that JetStream
 * gives it to nobody else while its subscriber is alive: one subscriber
 * cluster-wide at a time, however slow.  A node that dies stops doing it,
 * and the ack wait then hands its messages to other nodes. */
static void
in_progress_cb(const struct msg *m, void *arg)
{
	in_progress(arg, m);
}

static void
keep_held(struct cluster *cl)
{
	dests_foreach(cl->env.dests, progress_dest, cl);
	cl->events->each_unacked(cl->events->arg, in_progress_cb, cl);
	cl->renewals[cl->nrenewals++ % RENEWALS] = now_ms(cl);
}

/* ---- cut off from NATS ---- */

/* NATS lost at now: from when JetStream's ack wait surely runs for what is
 * held here.  JetStream restarts it when it handles a +WPI, no earlier than
 * it was sent, so a renewal that arrived gives a safe start; which one
 * arrived is the question.  Lost on EOF: the last may have sat unsent in
 * the socket, the one before it went out.  Lost silently (pings
 * unanswered): the last sent SILENT_CUT_MS before it was noticed.  What was
 * pulled since a renewal came later, so its wait ends later still. */
static void
cut_off(struct cluster *cl, uint64_t now)
{
	cl->lost_ms = now;
	cl->revoke_due = true;
	uint64_t n = cl->nrenewals, kept = n < RENEWALS ? n : RENEWALS;
	if (n == 0) {
		cl->renewed_ms = now; /* nothing was ever held here */
		return;
	}
	/* libnats keeps no word of which (its last error is NATS_OK after a
	 * stale connection): a live connection reads a PONG at least every
	 * ping interval, and an EOF is itself read just now. */
	bool silent = now - cl->read_ms > QUIET_MS;
	/* Without one to go by: the oldest kept, the earliest deadline. */
	cl->renewed_ms = cl->renewals[(n - kept) % RENEWALS];
	for (uint64_t i = 1; i <= kept; i++) {
		uint64_t t = cl->renewals[(n - i) % RENEWALS];
		if (silent ? t + SILENT_CUT_MS <= now : i == 2) {
			cl->renewed_ms = t;
			break;
		}
	}
	if (n == 1 && !silent)
		cl->renewed_ms -= cl->renewed_ms > TICK_MS ? TICK_MS : 0;
	log_debug("cluster: NATS lost %s: the ack wait of what is held here counts from %" PRIu64
	    " ms before", silent ? "silently (pings unanswered)" : "at once", now - cl->renewed_ms);
}

/* The message was JetStream's, and now is nobody's here: its ack subject
 * goes without a word (no connection to say it on, and JetStream gives it
 * to another node anyway). */
static bool
let_go(struct msg *m, void *arg)
{
	(void)arg;
	if (m->kept == NULL)
		return false;
	free(m->kept);
	m->kept = NULL;
	return true;
}

/* dest_purge's: let go of a buffered message, counted in *arg. */
static void
let_go_buffered(struct msg *m, void *arg)
{
	size_t *n = arg;
	*n += let_go(m, NULL);
}

/* Drop what a clustered queue or durable subscription buffers here. */
static void
let_go_dest(struct dest *d, void *arg)
{
	if (dest_kind(d) == DEST_QUEUE && dest_remote(d) != NULL)
		dest_purge(d, let_go_buffered, arg);
}

/* Cut off past the ack wait: JetStream has given (or is about to give)
 * everything held here to another node, so this node stops handing it out
 * (design 3.4): what is buffered is dropped, what its subscribers hold
 * unacknowledged is no longer pending (their ACKs do nothing).  Once per
 * outage, a tick early rather than late: one live copy cluster-wide. */
static void
revoke_if_due(struct cluster *cl, uint64_t now)
{
	if (!cl->revoke_due || now + TICK_MS < cl->renewed_ms + cl->cfg->cluster_ack_wait_ms)
		return;
	cl->revoke_due = false;
	size_t buffered = 0;
	/* The buffer first: the windows freed below must find nothing to hand out. */
	dests_foreach_mutable(cl->env.dests, let_go_dest, &buffered);
	size_t unacked = cl->events->revoke_unacked(cl->events->arg, let_go, NULL);
	cl->revoked += buffered + unacked;
	if (buffered + unacked > 0)
		log_warn("cluster: cut off from NATS for %" PRIu64 " ms, past the ack wait: let go "
		    "of %zu messages held here (%zu unacknowledged, %zu buffered); JetStream gives "
		    "them to other nodes", now - cl->lost_ms, buffered + unacked, unacked, buffered);
}

static void poll_waiting(struct cluster *cl, uint64_t now);

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cluster *cl = arg;
	uint64_t now = now_ms(cl);
	spent_flush(cl);
	if (!cl->connected) {
		revoke_if_due(cl, now);
		return;
	}
	/* JetStream may not be ready yet (a NATS cluster electing its leader):
	 * ask again every second. */
	/* Asked less often while another layout is in the way: the operator
	 * has to act first. */
	if (!queues_ready(cl) && now - cl->stream_asked_ms >= (cl->parts_refused ? 10000 : 1000))
		create_queue_streams(cl, false);
	if (cl->ndurable > 0 && !cl->topics_ready && now - cl->topics_asked_ms >= 1000)
		create_stream(cl, true, 0);
	republish(cl);
	forget_lost_requests(cl, now);
	leases_tick(cl, now);
	if (cl->queues != NULL && now - cl->progress_ms >= cl->cfg->cluster_ack_wait_ms / 3) {
		cl->progress_ms = now;
		keep_held(cl);
	}
	for (struct cq *q = cl->queues; q != NULL; q = q->hh.next) {
		/* A pull whose answer never came (lost in a reconnect): forget it. */
		if (q->pulling && now - q->pull_sent_ms > PULL_EXPIRES_MS + 2000) {
			q->pulling = false;
			q->pull_left = 0;
		}
		if (!q->consumer_ready && !q->creating && stream_ready(cl, q))
			create_consumer(cl, q);
		refill(cl, q);
	}
	poll_waiting(cl, now);
}

/* ---- subscribers here ---- */

static uint32_t
sub_window(const struct sub *s)
{
	return s->prefetch != 0 && s->prefetch < AUTO_WINDOW * 4 ? s->prefetch : AUTO_WINDOW;
}

static int pull_for(struct cluster *cl, struct dest *d, const struct sub *s, bool durable,
    uint32_t part, const char *filter, const char *topic, size_t topic_len, const char *prefix,
    const char *name, size_t name_len);

int
cluster_sub_added(struct cluster *cl, struct dest *d, const struct sub *s)
{
	if (dest_temp(d) != NULL)
		return 0;
	if (dest_kind(d) == DEST_TOPIC) {
		if (dest_subscribers(d) > 1)
			return 0;
		struct ctopic *t = calloc(1, sizeof(*t));
		char subject[SUBJECT_MAX];
		size_t plen;
		const char *part = queue_part(dest_name(d), dest_name_len(d), &plen);
		if (t == NULL || cluster_topic_filter(subject, sizeof(subject), part, plen,
		    &t->exact) == 0 || subscribe_sync(cl, &t->sub, subject) != 0) {
			free(t);
			return -1;
		}
		t->dest = d;
		t->next = cl->topics;
		cl->topics = t;
		return 0;
	}
	size_t plen;
	const char *part = queue_part(dest_name(d), dest_name_len(d), &plen);
	if (cl->parts_refused > 0)
		return BACKEND_DOWN; /* another layout's streams are in the way (logged) */
	uint32_t p = cluster_queue_partition(part, plen, cl->nparts);
	char filter[32];
	snprintf(filter, sizeof(filter), "eft.q.%" PRIu32 ".", p);
	return pull_for(cl, d, s, false, p, filter, part, plen, "q_", part, plen);
}

int
cluster_durable_added(struct cluster *cl, struct dest *d, const struct sub *s,
    const char *topic, size_t topic_len)
{
	/* /durable/NAME pulls from consumer d_NAME of the topic stream, whose
	 * filter is the topic's subject (a pattern's in NATS's wildcards: proto.c
	 * refuses one that cannot be exact) */
	size_t plen, nlen = dest_name_len(d) - strlen(DURABLE_PREFIX);
	const char *part = queue_part(topic, topic_len, &plen);
	char filter[SUBJECT_MAX];
	bool exact;
	if (cluster_topic_filter(filter, sizeof(filter), part, plen, &exact) == 0 || !exact)
		return -2;
	return pull_for(cl, d, s, true, 0, filter, "", 0, "d_",
	    dest_name(d) + strlen(DURABLE_PREFIX), nlen);
}

void
cluster_durable_end(struct cluster *cl, const char *name, size_t len)
{
	char consumer[CLUSTER_NAME_MAX + 8], subject[SUBJECT_MAX + 64];
	size_t plen = len - strlen(DURABLE_PREFIX);
	if (cluster_escape(consumer, CLUSTER_NAME_MAX, "d_", name + strlen(DURABLE_PREFIX),
	    plen) == 0)
		return;
	snprintf(subject, sizeof(subject), "$JS.API.CONSUMER.DELETE." CLUSTER_TOPIC_STREAM ".%s",
	    consumer);
	api_request(cl, API_DELETE, 0, subject, "");
}

/* d's subscriber s pulls from consumer PREFIX+NAME (both escaped) of the
 * queue stream, or of the topic stream if durable; its filter is
 * FILTER+TOPIC.  The cq is made with the first subscriber. */
static int
pull_for(struct cluster *cl, struct dest *d, const struct sub *s, bool durable, uint32_t part,
    const char *filter, const char *topic, size_t topic_len, const char *prefix,
    const char *name, size_t name_len)
{
	uint32_t qid = (uint32_t)(uintptr_t)dest_remote(d);
	struct cq *q = qid ? cq_of(cl, qid) : NULL;
	if (q == NULL) {
		q = calloc(1, sizeof(*q));
		if (q == NULL)
			return -1;
		if (cluster_escape(q->subject, sizeof(q->subject), filter, topic, topic_len) == 0 ||
		    cluster_escape(q->consumer, CLUSTER_NAME_MAX, prefix, name, name_len) == 0) {
			free(q);
			return -2;
		}
		q->durable = durable;
		q->part = durable ? cl->nparts : part;
		q->stream = durable ? CLUSTER_TOPIC_STREAM : cl->parts[part].name;
		q->qid = ++cl->next_qid;
		q->dest = d;
		HASH_ADD(hh, cl->queues, qid, sizeof(q->qid), q);
		HASH_ADD(hh_consumer, cl->by_consumer, consumer, strlen(q->consumer), q);
		dest_set_remote(d, (void *)(uintptr_t)q->qid);
		if (durable && cl->ndurable++ == 0 && !cl->topics_ready &&
		    cl->connected)
			create_stream(cl, true, 0);
		/* What is published before JetStream has the consumer is not kept
		 * for it: the SUBSCRIBE's RECEIPT waits for it. */
		if (durable) {
			q->ready_seq = hold_seq(cl);
			lease_opened(cl, q);
		}
		if (stream_ready(cl, q))
			create_consumer(cl, q);
	}
	q->window += sub_window(s);
	if (q->window > MAX_WINDOW)
		q->window = MAX_WINDOW;
	refill(cl, q);
	return 0;
}

void
cluster_sub_removed(struct cluster *cl, struct dest *d, const struct sub *s)
{
	if (dest_temp(d) != NULL)
		return;
	if (dest_kind(d) == DEST_TOPIC) {
		if (dest_subscribers(d) > 0)
			return;
		for (struct ctopic **pp = &cl->topics, *t; (t = *pp) != NULL; pp = &t->next) {
			if (t->dest != d)
				continue;
			*pp = t->next;
			natsSubscription_Unsubscribe(t->sub);
			natsSubscription_Destroy(t->sub);
			free(t);
			return;
		}
		return;
	}
	uint32_t qid = (uint32_t)(uintptr_t)dest_remote(d);
	struct cq *q = qid ? cq_of(cl, qid) : NULL;
	if (q == NULL)
		return;
	if (dest_subscribers(d) > 0) {
		uint32_t w = sub_window(s);
		q->window = q->window > w ? q->window - w : AUTO_WINDOW;
		return;
	}
	/* Nobody here wants what is buffered: other nodes may have it now. */
	dest_purge(d, nak_one, cl);
	dest_set_remote(d, NULL);
	if (q->durable)
		cl->ndurable--;
	release_seq(cl, &q->ready_seq);
	lease_release(cl, q);
	HASH_DEL(cl->queues, q);
	HASH_DELETE(hh_consumer, cl->by_consumer, q);
	free(q);
}

/* ---- SEND ---- */

/* The subject a SEND to name goes to, into subject (SUBJECT_MAX bytes), and
 * m's size on the wire: 0, or CLUSTER_NAME / CLUSTER_SIZE (cluster_send's
 * refusals that no retry mends). */
static int
check_send(const struct cluster *cl, enum address_kind kind, const char *name, size_t len,
    const struct msg *m, char *subject, size_t *size, const char **err)
{
	size_t plen;
	const char *part = queue_part(name, len, &plen);
	size_t n;
	if (kind == ADDR_REPLY_QUEUE) {
		/* /reply-queue/eft.NODE.RANDOM -> eft.n.NODE.RANDOM */
		const char *tail = name + REPLY_PREFIX_LEN + 4;
		n = (size_t)snprintf(subject, SUBJECT_MAX, "eft.n.%.*s", (int)(len -
		    REPLY_PREFIX_LEN - 4), tail);
		if (n >= SUBJECT_MAX)
			n = 0;
	} else if (kind == ADDR_QUEUE) {
		n = cluster_queue_subject(subject, SUBJECT_MAX, cluster_queue_partition(part, plen,
		    cl->nparts), part, plen);
	} else {
		n = cluster_topic_subject(subject, SUBJECT_MAX, part, plen);
	}
	if (n == 0) {
		*err = "destination name too long for the cluster";
		return CLUSTER_NAME;
	}
	*size = cluster_msg_size(m);
	/* Only the server we are connected to says how much it takes. */
	int64_t max = cl->connected ? natsConnection_GetMaxPayload(cl->nc) : 0;
	if (max > 0 && *size + 128 > (uint64_t)max) {
		*err = "message too large for the cluster";
		return CLUSTER_SIZE;
	}
	return 0;
}

int
cluster_check_send(const struct cluster *cl, enum address_kind kind, const char *name,
    size_t len, const struct msg *m, const char **err)
{
	char subject[SUBJECT_MAX];
	size_t size;
	return check_send(cl, kind, name, len, m, subject, &size, err);
}

int
cluster_send(struct cluster *cl, enum address_kind kind, const char *name,
    size_t len, const struct msg *m, const char **err)
{
	if (!cl->connected || (kind == ADDR_QUEUE && !queues_ready(cl))) {
		*err = "cluster unavailable";
		return CLUSTER_DOWN;
	}
	char subject[SUBJECT_MAX];
	size_t size;
	int rc = check_send(cl, kind, name, len, m, subject, &size, err);
	if (rc != 0)
		return rc;
	if (size > cl->scratch_cap) {
		/* kept for the next SEND: no malloc and free per message */
		char *grown = realloc(cl->scratch, size);
		if (grown == NULL) {
			*err = "out of memory";
			return CLUSTER_NOMEM;
		}
		cl->scratch = grown;
		cl->scratch_cap = size;
	}
	char *payload = cl->scratch;
	cluster_msg_encode(m, payload);
	if (kind == ADDR_QUEUE)
		rc = send_queue(cl, subject, payload, size);
	else
		rc = natsConnection_Publish(cl->nc, subject, payload, (int)size) == NATS_OK ? 0 : -1;
	if (cl->scratch_cap > SCRATCH_KEPT) {
		/* a rare large one is not held on to */
		free(cl->scratch);
		cl->scratch = NULL;
		cl->scratch_cap = 0;
	}
	if (rc != 0) {
		*err = "cluster unavailable";
		rc = CLUSTER_DOWN;
	}
	return rc;
}

bool
cluster_reply_is_remote(const struct cluster *cl, const char *name, size_t len)
{
	/* /reply-queue/eft.NODE.RANDOM: NODE is not this node's token */
	size_t tlen = strlen(cl->token);
	if (len < REPLY_PREFIX_LEN + 4 || memcmp(name + REPLY_PREFIX_LEN, "eft.", 4) != 0)
		return false;
	const char *node = name + REPLY_PREFIX_LEN + 4, *end = name + len;
	const char *dot = memchr(node, '.', (size_t)(end - node));
	if (dot == NULL || dot == node || dot + 1 == end)
		return false;
	/* Only NODE.RANDOM made of subject-safe bytes becomes a subject: any
	 * other name is nobody's temp-queue (dropped here as such). */
	for (const char *p = node; p < end; p++)
		if (p != dot && !(*p == '-' || *p == '_' || *p == '=' || (*p >= '0' && *p <= '9') ||
		    (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
			return false;
	return !((size_t)(dot - node) == tlen && memcmp(node, cl->token, tlen) == 0);
}

size_t
cluster_temp_name(const struct cluster *cl, char *out, size_t cap, const char *random)
{
	int n = snprintf(out, cap, REPLY_PREFIX "eft.%s.%s", cl->token, random);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

bool
cluster_busy(const struct cluster *cl)
{
	return cl->npubs >= MAX_PUBS;
}

uint64_t
cluster_promised(const struct cluster *cl)
{
	return cl->next_pub - 1;
}

bool
cluster_up(const struct cluster *cl)
{
	/* Queue streams of another layout keep queues away (their SENDs and
	 * SUBSCRIBEs are refused), not topics and replies. */
	return cl->connected && (queues_ready(cl) || cl->parts_refused > 0);
}

const char *
cluster_node(const struct cluster *cl)
{
	return cl->node;
}

uint64_t
cluster_revoked(const struct cluster *cl)
{
	return cl->revoked;
}

uint64_t
cluster_topic_filtered(const struct cluster *cl)
{
	return cl->topic_filtered;
}

uint64_t
cluster_swept(const struct cluster *cl)
{
	return cl->swept;
}

/* ---- the cluster as a backend ---- */

static void
op_gone(void *impl, struct msg *m, enum msg_fate fate)
{
	settle(impl, m, fate == FATE_CONSUMED ? "+ACK" : "+TERM");
}

static void
op_interest_removed(void *impl, struct dest *d, const struct sub *s)
{
	cluster_sub_removed(impl, d, s);
}

static uint64_t
op_promised(const void *impl)
{
	return cluster_promised(impl);
}

static enum backend_pressure
op_pressure(void *impl)
{
	if (!cluster_up(impl))
		return BACKEND_FAILING;
	return cluster_busy(impl) ? BACKEND_BUSY : BACKEND_OK;
}

static const char *
op_error(const void *impl)
{
	(void)impl;
	return "NATS cannot be reached";
}

static bool
op_carries(const void *impl, int kind, const char *name, size_t len)
{
	return kind == ADDR_QUEUE || kind == ADDR_TOPIC ||
	    (kind == ADDR_REPLY_QUEUE && cluster_reply_is_remote(impl, name, len));
}

static int
op_publish(void *impl, int kind, const char *name, size_t len, const struct msg *m,
    const char **why)
{
	return cluster_send(impl, (enum address_kind)kind, name, len, m, why);
}

static int
op_check(const void *impl, int kind, const char *name, size_t len, const struct msg *m,
    const char **why)
{
	const struct cluster *cl = impl;
	if (!cluster_up(cl) || (kind == ADDR_QUEUE && !queues_ready(cl))) {
		*why = "cluster unavailable";
		return CLUSTER_DOWN;
	}
	return cluster_check_send(impl, (enum address_kind)kind, name, len, m, why);
}

/* cluster_sub_added and cluster_durable_added say -2 for a name that
 * cannot be a subject. */
static int
op_interest_added(void *impl, struct dest *d, const struct sub *s)
{
	int rc = cluster_sub_added(impl, d, s);
	return rc == -2 ? BACKEND_NAME : rc;
}

static int
op_durable_open(void *impl, struct dest *d, const struct sub *s, const char *topic,
    size_t topic_len)
{
	int rc = cluster_durable_added(impl, d, s, topic, topic_len);
	return rc == -2 ? BACKEND_NAME : rc;
}

static void
op_durable_close(void *impl, const char *name, size_t len)
{
	cluster_durable_end(impl, name, len);
}

static size_t
op_temp_name(const void *impl, char *out, size_t cap, const char *random)
{
	return cluster_temp_name(impl, out, cap, random);
}

/* ---- what waits in JetStream, per queue ----
 *
 * Every cluster-stats-ms, one STREAM.INFO per queue partition with
 * subjects_filter: JetStream answers with the count of every subject that
 * holds messages.  Those are the messages stored for the queue, so they
 * include what some node holds unacknowledged.  One answer replaces the
 * partition's table (a queue that emptied leaves it); JetStream pages at
 * 100,000 subjects, and the next page is asked for until the whole is read. */

static void
cwaits_free(struct cwait **head)
{
	struct cwait *w, *tmp;
	HASH_ITER(hh, *head, w, tmp) {
		HASH_DEL(*head, w);
		free(w);
	}
}

/* Nothing is known on a new connection (or after the last). */
static void
waiting_reset(struct cluster *cl)
{
	for (uint32_t p = 0; p < cl->nparts; p++) {
		struct cpart *cp = &cl->parts[p];
		cwaits_free(&cp->waiting);
		cwaits_free(&cp->building);
		cp->stats_ms = cp->stats_started_ms = cp->stats_asked_ms = 0;
		cp->stats_offset = 0;
		cp->stats_out = false;
	}
}

static void
ask_stats(struct cluster *cl, uint32_t part, uint64_t now)
{
	struct cpart *cp = &cl->parts[part];
	char subject[96], json[128];
	snprintf(subject, sizeof(subject), "$JS.API.STREAM.INFO.%s", cp->name);
	snprintf(json, sizeof(json), "{\"subjects_filter\":\"eft.q.%" PRIu32 ".>\",\"offset\":%"
	    PRIu64 "}", part, cp->stats_offset);
	if (api_request(cl, API_STATS, part, subject, json) != 0)
		return;
	cp->stats_out = true;
	cp->stats_asked_ms = now;
}

static void
poll_waiting(struct cluster *cl, uint64_t now)
{
	uint64_t every = cl->cfg->cluster_stats_ms;
	if (every == 0 || !queues_ready(cl))
		return;
	for (uint32_t p = 0; p < cl->nparts; p++) {
		struct cpart *cp = &cl->parts[p];
		if (cp->stats_out && now - cp->stats_asked_ms < API_TIMEOUT_MS)
			continue;
		if (!cp->stats_out && cp->stats_started_ms != 0 && now - cp->stats_started_ms < every)
			continue;
		/* due, or its answer was lost: a new poll from the start */
		cwaits_free(&cp->building);
		cp->stats_offset = 0;
		cp->stats_started_ms = now;
		ask_stats(cl, p, now);
	}
}

struct stats_page {
	struct cluster *cl;
	uint32_t part;
	bool failed;
};

/* One "eft.q.P.TOKEN": count entry into the partition's table being read. */
static void
stats_entry(const char *subject, size_t len, uint64_t count, void *arg)
{
	struct stats_page *sp = arg;
	struct cpart *cp = &sp->cl->parts[sp->part];
	char prefix[32];
	int plen = snprintf(prefix, sizeof(prefix), "eft.q.%" PRIu32 ".", sp->part);
	if (sp->failed || len <= (size_t)plen || memcmp(subject, prefix, (size_t)plen) != 0)
		return;
	size_t tlen = len - (size_t)plen;
	struct cwait *w = malloc(sizeof(*w) + 7 + tlen + 1);
	if (w == NULL) {
		sp->failed = true;
		return;
	}
	memcpy(w->name, "/queue/", 7);
	memcpy(w->name + 7, subject + plen, tlen);
	long n = cluster_unescape(w->name + 7, tlen);
	if (n < 0) {
		free(w);  /* not one of eft's names */
		return;
	}
	w->len = 7 + (size_t)n;
	w->name[w->len] = '\0';
	w->count = count;
	struct cwait *had;
	HASH_FIND(hh, cp->building, w->name, w->len, had);
	if (had != NULL) {
		had->count += count;
		free(w);
		return;
	}
	HASH_ADD_KEYPTR(hh, cp->building, w->name, w->len, w);
}

static void
stats_answer(struct cluster *cl, uint32_t part, bool failed, const char *data, size_t len)
{
	struct cpart *cp = &cl->parts[part];
	cp->stats_out = false;
	struct stats_page sp = { cl, part, false };
	long entries = failed ? -1 : cluster_json_subjects(data, len, stats_entry, &sp);
	if (entries < 0 || sp.failed) {
		if (!cp->stats_failing)
			log_warn("cluster: JetStream's count of what waits in %s could not be read%s; "
			    "asking again every cluster-stats-ms", cp->name,
			    sp.failed ? " (out of memory)" : "");
		cp->stats_failing = true;
		cwaits_free(&cp->building);
		return;
	}
	cp->stats_failing = false;
	int64_t total = 0;
	cluster_json_int(data, len, "total", &total);
	cp->stats_offset += (uint64_t)entries;
	if (entries > 0 && total > 0 && cp->stats_offset < (uint64_t)total) {
		ask_stats(cl, part, now_ms(cl));  /* the next page */
		return;
	}
	cwaits_free(&cp->waiting);
	cp->waiting = cp->building;
	cp->building = NULL;
	cp->stats_ms = now_ms(cl);
	cp->stats_offset = 0;
}

/* How old the oldest partition's count is; -1 while one is unknown. */
static int64_t
op_waiting_age_ms(const void *impl)
{
	const struct cluster *cl = impl;
	if (cl->cfg->cluster_stats_ms == 0 || !cl->connected || !queues_ready(cl))
		return -1;
	uint64_t oldest = UINT64_MAX;
	for (uint32_t p = 0; p < cl->nparts; p++) {
		if (cl->parts[p].stats_ms == 0)
			return -1;
		if (cl->parts[p].stats_ms < oldest)
			oldest = cl->parts[p].stats_ms;
	}
	uint64_t now = now_ms(cl);
	return now > oldest ? (int64_t)(now - oldest) : 0;
}

static int64_t
op_waiting(const void *impl, const char *name, size_t len)
{
	const struct cluster *cl = impl;
	if (len <= 7 || memcmp(name, "/queue/", 7) != 0 || op_waiting_age_ms(impl) < 0)
		return -1;
	size_t plen;
	const char *qname = queue_part(name, len, &plen);
	const struct cpart *cp = &cl->parts[cluster_queue_partition(qname, plen, cl->nparts)];
	struct cwait *w;
	HASH_FIND(hh, cp->waiting, name, len, w);
	return w != NULL ? (int64_t)w->count : 0;
}

static void
op_each_waiting(const void *impl, void (*fn)(const char *name, size_t len, uint64_t count,
    void *arg), void *arg)
{
	const struct cluster *cl = impl;
	if (op_waiting_age_ms(impl) < 0)
		return;
	for (uint32_t p = 0; p < cl->nparts; p++)
		for (const struct cwait *w = cl->parts[p].waiting; w != NULL; w = w->hh.next)
			fn(w->name, w->len, w->count, arg);
}

const struct backend_ops cluster_backend_ops = {
	.name = "cluster",
	.carries = op_carries,
	.publish = op_publish,
	.check = op_check,
	.interest_added = op_interest_added,
	.durable_open = op_durable_open,
	.durable_close = op_durable_close,
	.temp_name = op_temp_name,
	.gone = op_gone,
	.give_back = hook_give_back,
	.refill = hook_refill,
	.interest_removed = op_interest_removed,
	.promised = op_promised,
	.pressure = op_pressure,
	.error = op_error,
	.waiting = op_waiting,
	.each_waiting = op_each_waiting,
	.waiting_age_ms = op_waiting_age_ms,
};

/* A message freed with its ack subject (never settled here: eftd stopping):
 * JetStream sends it again after the ack wait. */
static void
drop_ack(struct msg *m)
{
	free(m->kept);
	m->kept = NULL;
}

/* ---- start and stop ---- */

int
cluster_prepare_libevent(void)
{
	return evthread_use_pthreads();
}

static int
set_servers(struct cluster *cl, char *err, size_t errlen)
{
	char list[sizeof(cl->cfg->cluster)];
	const char *urls[32];
	int n = 0;
	snprintf(list, sizeof(list), "%s", cl->cfg->cluster);
	char *save = NULL;
	for (char *u = strtok_r(list, ", ", &save); u != NULL && n < 32; u = strtok_r(NULL, ", ",
	    &save))
		urls[n++] = u;
	if (natsOptions_SetServers(cl->opts, urls, n) != NATS_OK) {
		snprintf(err, errlen, "cluster: %s: %s", cl->cfg->cluster, nats_GetLastError(NULL));
		return -1;
	}
	return 0;
}

struct cluster *
cluster_start(const struct backend_env *env, char *err, size_t errlen)
{
	const struct config *cfg = env->cfg;
	struct cluster *cl = calloc(1, sizeof(*cl));
	if (cl == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	cl->env = *env;
	cl->cfg = cfg;
	cl->events = env->events;
	cl->base = env->base;
	env->pool->drop_kept = drop_ack;
	cl->next_pub = 1;
	cl->nparts = cfg->cluster_queue_streams ? cfg->cluster_queue_streams : 1;
	cl->parts = calloc(cl->nparts + 1, sizeof(*cl->parts));
	if (cl->parts == NULL) {
		snprintf(err, errlen, "out of memory");
		free(cl);
		return NULL;
	}
	for (uint32_t p = 0; p < cl->nparts; p++)
		snprintf(cl->parts[p].name, sizeof(cl->parts[p].name), CLUSTER_QUEUE_STREAM_PREFIX
		    "%" PRIu32, p);
	snprintf(cl->parts[cl->nparts].name, sizeof(cl->parts[0].name), "%s", CLUSTER_TOPIC_STREAM);
	if (cfg->node_name[0]) {
		snprintf(cl->node, sizeof(cl->node), "%s", cfg->node_name);
	} else {
		char host[64] = "eftd";
		gethostname(host, sizeof(host) - 1);
		unsigned port = cfg->nlisten > 0 ? cfg->listen[0].port : cfg->port;
		snprintf(cl->node, sizeof(cl->node), "%s-%u", host, port);
	}
	cluster_escape(cl->token, sizeof(cl->token), "", cl->node, strlen(cl->node));
	if (open_nats() != NATS_OK) {
		snprintf(err, errlen, "cannot start libnats");
		goto fail;
	}
	natsInbox *inbox = NULL;
	if (natsInbox_Create(&inbox) != NATS_OK) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	snprintf(cl->inbox, sizeof(cl->inbox), "%s", inbox);
	cl->inbox_len = strlen(cl->inbox);
	/* the inbox's random tail names this run */
	snprintf(cl->instance, sizeof(cl->instance), "%s", inbox + 7);
	cl->instance_len = strlen(cl->instance);
	natsInbox_Destroy(inbox);
	cl->state_ev = event_new(cl->base, -1, 0, state_cb, cl);
	cl->tick_ev = event_new(cl->base, -1, EV_PERSIST, tick_cb, cl);
	if (cl->state_ev == NULL || cl->tick_ev == NULL || natsOptions_Create(&cl->opts) != NATS_OK) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	char name[192];
	snprintf(name, sizeof(name), "eftd %s", cl->node);
	natsOptions *o = cl->opts;
	if (set_servers(cl, err, errlen) != 0)
		goto fail;
	natsStatus s = natsOptions_SetName(o, name);
	if (s == NATS_OK)
		s = natsOptions_SetNoEcho(o, true);    /* a topic SEND is delivered here directly */
	if (s == NATS_OK)
		s = natsOptions_SetSendAsap(o, true);  /* no flusher thread: the loop writes */
	if (s == NATS_OK)
		s = natsOptions_SetEventLoop(o, cl, adapter_attach, adapter_read, adapter_write,
		    adapter_detach);
	if (s == NATS_OK)
		s = natsOptions_SetMaxReconnect(o, -1);
	if (s == NATS_OK)
		s = natsOptions_SetCustomReconnectDelay(o, reconnect_delay, cl);
	if (s == NATS_OK)
		s = natsOptions_SetRetryOnFailedConnect(o, true, wake_connected, cl);
	if (s == NATS_OK)
		s = natsOptions_SetDisconnectedCB(o, wake, cl);
	if (s == NATS_OK)
		s = natsOptions_SetReconnectedCB(o, wake_connected, cl);
	if (s == NATS_OK)
		s = natsOptions_SetClosedCB(o, wake, cl);
	if (s == NATS_OK)
		s = natsOptions_SetPingInterval(o, 2000);
	if (s == NATS_OK)
		s = natsOptions_SetMaxPingsOut(o, 3);
	if (s == NATS_OK)
		s = natsOptions_SetReconnectBufSize(o, 64 << 20);
	if (s == NATS_OK && cfg->cluster_user[0])
		s = natsOptions_SetUserInfo(o, cfg->cluster_user, cfg->cluster_password);
	if (s == NATS_OK && cfg->cluster_creds_file[0])
		s = natsOptions_SetUserCredentialsFromFiles(o, cfg->cluster_creds_file, NULL);
	if (s != NATS_OK) {
		snprintf(err, errlen, "cluster: %s", nats_GetLastError(NULL));
		goto fail;
	}
	s = natsConnection_Connect(&cl->nc, o);
	if (s == NATS_NOT_YET_CONNECTED) {
		log_warn("cluster: cannot reach NATS at %s yet; clustered destinations get an ERROR "
		    "until it answers, retrying in the background", cfg->cluster);
	} else if (s != NATS_OK) {
		snprintf(err, errlen, "cluster: %s: %s", cfg->cluster, nats_GetLastError(NULL));
		goto fail;
	}
	struct timeval tick = { 0, TICK_MS * 1000 };
	event_add(cl->tick_ev, &tick);
	if (s == NATS_OK) {
		cl->connections_seen = atomic_load(&cl->connections);
		connected(cl);
	}
	return cl;
fail:
	if (cl->opts)
		natsOptions_Destroy(cl->opts);
	if (cl->state_ev)
		event_free(cl->state_ev);
	if (cl->tick_ev)
		event_free(cl->tick_ev);
	free(cl->parts);
	free(cl);
	return NULL;
}

static void
give_back_all(struct dest *d, void *arg)
{
	struct cluster *cl = arg;
	if (dest_kind(d) == DEST_QUEUE && dest_remote(d) != NULL) {
		dest_purge(d, nak_one, cl);
		dest_set_remote(d, NULL);
	}
}

void
cluster_stop(struct cluster *cl)
{
	if (cl == NULL)
		return;
	dests_foreach_mutable(cl->env.dests, give_back_all, cl);
	for (struct cq *q = cl->queues; q != NULL; q = q->hh.next)
		lease_release(cl, q);
	atomic_store(&cl->closing, true);
	if (cl->nc != NULL) {
		/* What was written to the connection's buffer goes out now: the
		 * loop will not run again to write it. */
		natsConnection_ProcessWriteEvent(cl->nc);
		for (struct ctopic *t = cl->topics; t != NULL; t = t->next)
			natsSubscription_Destroy(t->sub);
		natsSubscription_Destroy(cl->inbox_sub);
		natsSubscription_Destroy(cl->leader_sub);
		natsSubscription_Destroy(cl->held_sub);
		natsSubscription_Destroy(cl->reply_sub);
		natsConnection_Close(cl->nc);
		natsConnection_Destroy(cl->nc);
	}
	for (struct ctopic *t = cl->topics, *next; t != NULL; t = next) {
		next = t->next;
		free(t);
	}
	if (cl->topic_filtered > 0)
		log_info("cluster: %" PRIu64 " topic messages dropped: they came for a pattern with "
		    "'#' before its end, and did not match it", cl->topic_filtered);
	struct cq *q, *tmp;
	HASH_ITER(hh, cl->queues, q, tmp) {
		HASH_DEL(cl->queues, q);
		HASH_DELETE(hh_consumer, cl->by_consumer, q);
		free(q);
	}
	for (size_t i = 0; i < cl->npubs; i++)
		if (pub_at(cl, i)->msg != NULL)
			natsMsg_Destroy(pub_at(cl, i)->msg);
	spent_flush(cl);
	free(cl->scratch);
	free(cl->pubs);
	forget_requests(cl);
	waiting_reset(cl);
	free(cl->parts);
	natsOptions_Destroy(cl->opts);
	/* libnats's threads (one may be about to call wake) are gone after this. */
	nats_CloseAndWait(2000);
	event_free(cl->state_ev);
	event_free(cl->tick_ev);
	free(cl);
}
