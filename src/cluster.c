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
 * Everything JetStream is spoken as plain NATS requests to $JS.API.*, not
 * through libnats's js_* calls, which block or deliver on their own threads. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <nats/nats.h>
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
#define MAX_PUBS 8192            /* queue SENDs waiting for acks before producers wait */
#define SUBJECT_MAX (CLUSTER_NAME_MAX + 64)

/* A queue this node has subscribers on. */
struct cq {
	UT_hash_handle hh;         /* in cl->queues, by qid */
	UT_hash_handle hh_consumer; /* in cl->by_consumer: pulled messages name it in their
	                              ack subject */
	const char *stream;        /* CLUSTER_STREAM, or CLUSTER_TOPIC_STREAM ... */
	bool durable;              /* ... for a durable topic subscription */
	uint32_t qid;
	struct dest *dest;
	char consumer[CLUSTER_NAME_MAX + 8];
	char subject[SUBJECT_MAX]; /* the consumer's filter */
	bool consumer_ready;
	bool creating;             /* a consumer create request is out */
	bool pulling;              /* a pull request is out */
	uint32_t pull_left;        /* ... of which this many have not come */
	uint64_t pull_sent_ms;
	uint32_t window;           /* what its subscribers may hold: buffered + unacked */
	uint64_t ready_seq;        /* a durable subscription's SUBSCRIBE: its RECEIPT waits
	                              (as a SEND's does) until the consumer exists */
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
enum api_kind { API_STREAM, API_TOPIC_STREAM, API_CONSUMER, API_DELETE };
struct api {
	struct api *next;
	uint64_t id;
	uint64_t sent_ms;
	enum api_kind kind;
	uint32_t qid;
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
	natsSubscription *inbox_sub, *reply_sub;
	struct ctopic *topics;
	struct cq *queues;               /* by qid */
	struct cq *by_consumer;          /* the same, by consumer name */
	uint32_t next_qid;
	struct pub *pubs;                /* a ring: pubs[head..head+npubs) by seq */
	size_t pubs_cap, pubs_head, npubs;
	uint64_t next_pub;               /* seq of the next queue SEND */
	uint64_t kept;                   /* every one up to this JetStream acknowledged */
	const struct backend_events *events; /* how the core hears of it */
	struct api *apis;
	uint64_t next_api;
	bool connected;                  /* as last seen on the loop */
	bool stream_ready;
	uint64_t stream_asked_ms;        /* when the stream was last asked for */
	bool topics_ready;               /* the durable subscriptions' stream */
	uint64_t topics_asked_ms;
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
};

/* ---- the event-loop adapter (libnats calls these) ---- */

struct adapter {
	struct cluster *cl;
	natsConnection *nc;
	struct event *read, *write;
};

static void poll_all(struct cluster *cl);

static void
adapter_event(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	struct adapter *a = arg;
	if (what & EV_READ) {
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
	a->next = cl->apis;
	cl->apis = a;
	return 0;
}

/* The queue stream (work queue: a message is gone once acknowledged), or
 * the durable subscriptions' one (interest: kept until every durable
 * subscription whose topic it is has acknowledged it; NATS-level topic
 * publishes are stored only where one exists). */
static void
create_stream(struct cluster *cl, bool topics)
{
	char json[512];
	const char *name = topics ? CLUSTER_TOPIC_STREAM : CLUSTER_STREAM;
	if (topics)
		cl->topics_asked_ms = now_ms(cl);
	else
		cl->stream_asked_ms = now_ms(cl);
	snprintf(json, sizeof(json), "{\"name\":\"%s\",\"subjects\":[\"%s\"],"
	    "\"retention\":\"%s\",\"storage\":\"file\",\"num_replicas\":%u,"
	    "\"duplicate_window\":120000000000}", name,
	    topics ? CLUSTER_TOPIC_SUBJECTS : CLUSTER_QUEUE_SUBJECTS,
	    topics ? "interest" : "workqueue", cl->cfg->cluster_replicas);
	char subject[96];
	snprintf(subject, sizeof(subject), "$JS.API.STREAM.CREATE.%s", name);
	if (api_request(cl, topics ? API_TOPIC_STREAM : API_STREAM, 0, subject, json) != 0)
		log_error("cluster: cannot ask for stream %s (out of memory or disconnected)", name);
}

static bool
stream_ready(const struct cluster *cl, const struct cq *q)
{
	return q->durable ? cl->topics_ready : cl->stream_ready;
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
static void republish(struct cluster *cl);
static void release_seq(struct cluster *cl, uint64_t *seq);

static void
api_answer(struct cluster *cl, uint64_t id, const char *data, size_t len)
{
	struct api **pp = &cl->apis, *a;
	while ((a = *pp) != NULL && a->id != id)
		pp = &a->next;
	if (a == NULL)
		return;
	*pp = a->next;
	int64_t code = 0;
	const char *desc = "";
	size_t dlen = 0;
	bool failed = cluster_json_error(data, len, &code, &desc, &dlen);
	/* already there with another configuration: use it as it is */
	bool exists = failed && (code == 10058 || code == 10013 || code == 10148);
	log_debug("cluster: JetStream answered request %" PRIu64 ": %.*s", id,
	    (int)(len > 300 ? 300 : len), data);
	if (a->kind == API_STREAM || a->kind == API_TOPIC_STREAM) {
		bool topics = a->kind == API_TOPIC_STREAM;
		const char *name = topics ? CLUSTER_TOPIC_STREAM : CLUSTER_STREAM;
		if (failed && !exists) {
			log_error("cluster: JetStream refused stream %s: %.*s (%" PRId64 "); "
			    "is nats-server running with -js?", name, (int)dlen, desc, code);
		} else {
			if (exists)
				log_warn("cluster: stream %s exists with other settings (%.*s); using it",
				    name, (int)dlen, desc);
			bool *ready = topics ? &cl->topics_ready : &cl->stream_ready;
			if (!*ready)
				log_info("cluster: %s stream %s ready", topics ? "durable subscriptions'" :
				    "queue", name);
			*ready = true;
			if (!topics)
				republish(cl);
			for (struct cq *q = cl->queues; q != NULL; q = q->hh.next)
				if (!q->consumer_ready && !q->creating && stream_ready(cl, q))
					create_consumer(cl, q);
		}
	} else if (a->kind == API_DELETE) {
		if (failed)
			log_warn("cluster: a durable subscription's consumer was not deleted: %.*s",
			    (int)dlen, desc);
	} else {
		struct cq *q = cq_of(cl, a->qid);
		if (q != NULL) {
			q->creating = false;
			release_seq(cl, &q->ready_seq);
			if (failed && !exists) {
				log_error("cluster: JetStream refused consumer %s: %.*s (%" PRId64 ")",
				    q->consumer, (int)dlen, desc, code);
			} else {
				q->consumer_ready = true;
				refill(cl, q);
			}
		}
	}
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
		if (p->msg != NULL)
			natsMsg_Destroy(p->msg);
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

static void
republish(struct cluster *cl)
{
	if (!cl->connected || !cl->stream_ready)
		return;
	uint64_t now = now_ms(cl);
	for (size_t i = 0; i < cl->npubs; i++) {
		struct pub *p = pub_at(cl, i);
		if (p->acked || p->msg == NULL || (p->sent_ms != 0 && now - p->sent_ms < PUB_RETRY_MS))
			continue;
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
	char reply[96], id[64];
	snprintf(reply, sizeof(reply), "%s.p.%" PRIu64, cl->inbox, seq);
	snprintf(id, sizeof(id), "%s-%" PRIu64, cl->instance, seq);
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
	if (cl->stream_ready && natsConnection_PublishMsg(cl->nc, nm) == NATS_OK)
		p->sent_ms = now_ms(cl);
	return 0;
}

/* ---- pulling queue messages ---- */

static void
refill(struct cluster *cl, struct cq *q)
{
	if (!q->consumer_ready || q->pulling || !cl->connected)
		return;
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

static void
nak_one(struct msg *m, void *arg)
{
	settle(arg, m, "-NAK");
}

/* A pull's answer: a message (on its own subject, eft.q.NAME, with an ack
 * subject naming its consumer) or a status (on the pull's reply subject,
 * INBOX.q.QID). */
static void
pulled(struct cluster *cl, struct cq *q, natsMsg *nm)
{
	const char *status = NULL;
	if (natsMsgHeader_Get(nm, "Status", &status) == NATS_OK && status != NULL) {
		/* 404 no messages, 408 the request expired, 409 ...: pull again */
		log_debug("cluster: pull for %s ended: %s", q ? q->consumer : "a queue gone", status);
		if (q != NULL) {
			q->pulling = false;
			q->pull_left = 0;
			refill(cl, q);
		}
		return;
	}
	const char *reply = natsMsg_GetReply(nm);
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
	uint64_t delivered = 1;
	if (cluster_ack_delivered(reply, &delivered) && delivered > 1)
		m->redelivered = true;
	/* expiration:0 went through JetStream, where nobody could take it as
	 * it came: it has expired, whatever this node's clock says of its send
	 * time (a topic's goes to every node at once). */
	if (m->now_or_never) {
		m->now_or_never = false;
		m->expires_ms = 1;
	}
	log_debug("cluster: pulled for %s: %s", q->consumer, reply);
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
	const char *subject = natsMsg_GetSubject(nm), *consumer;
	const char *reply = natsMsg_GetReply(nm);
	size_t clen;
	if (reply != NULL && cluster_ack_consumer(reply, &consumer, &clen)) {
		struct cq *q;
		HASH_FIND(hh_consumer, cl->by_consumer, consumer, clen, q);
		pulled(cl, q, nm);
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
		pulled(cl, cq_of(cl, (uint32_t)id), nm);
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
		natsMsg_Destroy(nm);
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

static void
poll_all(struct cluster *cl)
{
	drain(cl->inbox_sub, cl, on_inbox, NULL);
	drain(cl->reply_sub, cl, on_reply, NULL);
	for (struct ctopic *t = cl->topics; t != NULL; t = t->next)
		drain(t->sub, cl, on_topic, t);
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

static void
connected(struct cluster *cl)
{
	char url[256] = "";
	natsConnection_GetConnectedUrl(cl->nc, url, sizeof(url));
	log_info("cluster: node %s connected to NATS at %s", cl->node, url);
	cl->connected = true;
	cl->ever_connected = true;
	atomic_store(&cl->reconnects, 0);
	cl->logged_attempts = 0;
	if (cl->inbox_sub == NULL) {
		char subject[128];
		snprintf(subject, sizeof(subject), "%s.>", cl->inbox);
		char reply[512];
		snprintf(reply, sizeof(reply), "eft.n.%s.*", cl->token);
		if (subscribe_sync(cl, &cl->inbox_sub, subject) != 0 ||
		    subscribe_sync(cl, &cl->reply_sub, reply) != 0)
			log_error("cluster: cannot subscribe to this node's subjects");
	}
	/* Pull requests out before a disconnect are gone with it. */
	for (struct cq *q = cl->queues; q != NULL; q = q->hh.next) {
		q->pulling = false;
		q->pull_left = 0;
		q->consumer_ready = false;
		q->creating = false;
	}
	for (struct api *a = cl->apis, *next; a != NULL; a = next) {
		next = a->next;
		free(a);
	}
	cl->apis = NULL;
	/* A stream once made stays (asked for again all the same, in case the
	 * NATS servers are new): SENDs need not wait for the answer. */
	create_stream(cl, false);
	if (cl->ndurable > 0)
		create_stream(cl, true);
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
	for (struct api **pp = &cl->apis, *a; (a = *pp) != NULL; ) {
		if (now - a->sent_ms < API_TIMEOUT_MS) {
			pp = &a->next;
			continue;
		}
		*pp = a->next;
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
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct cluster *cl = arg;
	uint64_t now = now_ms(cl);
	if (!cl->connected)
		return;
	/* JetStream may not be ready yet (a NATS cluster electing its leader):
	 * ask again every second. */
	if (!cl->stream_ready && now - cl->stream_asked_ms >= 1000)
		create_stream(cl, false);
	if (cl->ndurable > 0 && !cl->topics_ready && now - cl->topics_asked_ms >= 1000)
		create_stream(cl, true);
	republish(cl);
	forget_lost_requests(cl, now);
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
}

/* ---- subscribers here ---- */

static uint32_t
sub_window(const struct sub *s)
{
	return s->prefetch != 0 && s->prefetch < AUTO_WINDOW * 4 ? s->prefetch : AUTO_WINDOW;
}

static int pull_for(struct cluster *cl, struct dest *d, const struct sub *s, bool durable,
    const char *filter, const char *topic, size_t topic_len, const char *prefix,
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
	return pull_for(cl, d, s, false, "eft.q.", part, plen, "q_", part, plen);
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
	return pull_for(cl, d, s, true, filter, "", 0, "d_",
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
pull_for(struct cluster *cl, struct dest *d, const struct sub *s, bool durable,
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
		q->stream = durable ? CLUSTER_TOPIC_STREAM : CLUSTER_STREAM;
		q->qid = ++cl->next_qid;
		q->dest = d;
		HASH_ADD(hh, cl->queues, qid, sizeof(q->qid), q);
		HASH_ADD(hh_consumer, cl->by_consumer, consumer, strlen(q->consumer), q);
		dest_set_remote(d, (void *)(uintptr_t)q->qid);
		if (durable && cl->ndurable++ == 0 && !cl->topics_ready &&
		    cl->connected)
			create_stream(cl, true);
		/* What is published before JetStream has the consumer is not kept
		 * for it: the SUBSCRIBE's RECEIPT waits for it. */
		if (durable)
			q->ready_seq = hold_seq(cl);
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
	} else if (kind == ADDR_TOPIC) {
		n = cluster_topic_subject(subject, SUBJECT_MAX, part, plen);
	} else {
		n = cluster_escape(subject, SUBJECT_MAX, "eft.q.", part, plen);
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
	if (!cl->connected || (kind == ADDR_QUEUE && !cl->stream_ready)) {
		*err = "cluster unavailable";
		return CLUSTER_DOWN;
	}
	char subject[SUBJECT_MAX];
	size_t size;
	int rc = check_send(cl, kind, name, len, m, subject, &size, err);
	if (rc != 0)
		return rc;
	char *payload = malloc(size);
	if (payload == NULL) {
		*err = "out of memory";
		return CLUSTER_NOMEM;
	}
	cluster_msg_encode(m, payload);
	if (kind == ADDR_QUEUE)
		rc = send_queue(cl, subject, payload, size);
	else
		rc = natsConnection_Publish(cl->nc, subject, payload, (int)size) == NATS_OK ? 0 : -1;
	free(payload);
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
	return cl->connected && cl->stream_ready;
}

const char *
cluster_node(const struct cluster *cl)
{
	return cl->node;
}

uint64_t
cluster_topic_filtered(const struct cluster *cl)
{
	return cl->topic_filtered;
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
	if (!cluster_up(impl)) {
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
	if (cfg->node_name[0]) {
		snprintf(cl->node, sizeof(cl->node), "%s", cfg->node_name);
	} else {
		char host[64] = "eftd";
		gethostname(host, sizeof(host) - 1);
		unsigned port = cfg->nlisten > 0 ? cfg->listen[0].port : cfg->port;
		snprintf(cl->node, sizeof(cl->node), "%s-%u", host, port);
	}
	cluster_escape(cl->token, sizeof(cl->token), "", cl->node, strlen(cl->node));
	natsInbox *inbox = NULL;
	if (natsInbox_Create(&inbox) != NATS_OK) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	snprintf(cl->inbox, sizeof(cl->inbox), "%s", inbox);
	cl->inbox_len = strlen(cl->inbox);
	/* the inbox's random tail names this run */
	snprintf(cl->instance, sizeof(cl->instance), "%s", inbox + 7);
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
	atomic_store(&cl->closing, true);
	if (cl->nc != NULL) {
		/* What was written to the connection's buffer goes out now: the
		 * loop will not run again to write it. */
		natsConnection_ProcessWriteEvent(cl->nc);
		for (struct ctopic *t = cl->topics; t != NULL; t = t->next)
			natsSubscription_Destroy(t->sub);
		natsSubscription_Destroy(cl->inbox_sub);
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
	free(cl->pubs);
	for (struct api *a = cl->apis, *next; a != NULL; a = next) {
		next = a->next;
		free(a);
	}
	natsOptions_Destroy(cl->opts);
	/* libnats's threads (one may be about to call wake) are gone after this. */
	nats_CloseAndWait(2000);
	event_free(cl->state_ev);
	event_free(cl->tick_ev);
	free(cl);
}
