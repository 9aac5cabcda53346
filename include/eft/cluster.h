/* cluster.h - several eftd nodes as one broker, on NATS (cluster = ...).
 *
 * Topics go over core NATS, queues live in one JetStream work-queue stream
 * with a durable pull consumer per queue shared by every node, and replies
 * to a temp-queue go to the node that owns it.  The NATS connection runs on
 * eftd's own libevent loop (libnats's event-loop mode); the few callbacks
 * libnats makes from its own threads only wake the loop.  Without a
 * cluster setting none of this is made and b->cluster is NULL.
 * docs/cluster.md gives the semantics and guarantees. */
#ifndef EFT_CLUSTER_H
#define EFT_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eft/address.h"
#include "eft/backend.h"

struct backend_env;
struct dest;
struct msg;
struct sub;
struct cluster;

/* The cluster as a backend (backend.h): gone acknowledges (+ACK) or
 * terminates (+TERM), give_back is -NAK, refill pulls. */
extern const struct backend_ops cluster_backend_ops;
/* Before the event base is made: libnats calls libevent from its threads. */
int cluster_prepare_libevent(void);
/* Connect (retrying in the background if NATS cannot be reached yet: one
 * log line, then retries with backoff).  NULL with a reason in err if the
 * settings are refused or out of memory. */
struct cluster *cluster_start(const struct backend_env *env, char *err, size_t errlen);
/* Give back what this node holds (buffered and unacknowledged queue
 * messages go to other nodes at once), then close. */
void cluster_stop(struct cluster *cl);
/* Connected, and the queue stream is there: clustered destinations work. */
bool cluster_up(const struct cluster *cl);
/* So many queue SENDs wait for JetStream's ack that producers should wait. */
bool cluster_busy(const struct cluster *cl);
/* The number of the last queue SEND (or durable subscription) that waits
 * for JetStream; b->kept follows the ones acknowledged, all up to it. */
uint64_t cluster_promised(const struct cluster *cl);
/* This node's name, and its token in subjects and temp-queue names. */
const char *cluster_node(const struct cluster *cl);
/* Messages this node let go of, cut off from NATS past the ack wait (they
 * were no longer pending for their subscribers here). */
uint64_t cluster_revoked(const struct cluster *cl);
/* Topic messages that came for a pattern with '#' before its end (whose
 * NATS subject is wider) and did not match it: dropped, since start. */
uint64_t cluster_topic_filtered(const struct cluster *cl);
/* Acknowledged queue messages JetStream still held after a NATS outage
 * (below the consumer's ack floor), removed by this node since start. */
uint64_t cluster_swept(const struct cluster *cl);

/* Why cluster_send did not send: backend.h's codes. */
#define CLUSTER_NOMEM BACKEND_NOMEM
#define CLUSTER_DOWN BACKEND_DOWN      /* NATS is not connected (or JetStream not ready) */
#define CLUSTER_NAME BACKEND_NAME      /* the name is too long for a NATS subject */
#define CLUSTER_SIZE BACKEND_SIZE      /* the message is over NATS's max_payload */

/* A SEND to a queue, a topic or another node's temp-queue.  For a topic
 * the caller also delivers it here.  0: sent (m's reference is the
 * caller's still); else a CLUSTER_* code, and *err says it in words.
 * A queue SEND moves cluster_promised: a receipt waits for JetStream's ack. */
int cluster_send(struct cluster *cl, enum address_kind kind, const char *name,
    size_t len, const struct msg *m, const char **err);
/* Could the cluster ever take this SEND (the name makes a subject, m fits
 * the connected server's max_payload)?  0, or CLUSTER_NAME / CLUSTER_SIZE
 * and *err in words: cluster_send's refusals that no retry mends, asked
 * ahead of it by a transaction. */
int cluster_check_send(const struct cluster *cl, enum address_kind kind, const char *name,
    size_t len, const struct msg *m, const char **err);
/* Is /reply-queue/name another node's temp-queue? */
bool cluster_reply_is_remote(const struct cluster *cl, const char *name, size_t len);
/* The broker-wide name of a new temp-queue of this node, into out (cap
 * bytes): /reply-queue/eft.NODE.RANDOM. */
size_t cluster_temp_name(const struct cluster *cl, char *out, size_t cap, const char *random);

/* s was added to, or is leaving, its destination d. */
int cluster_sub_added(struct cluster *cl, struct dest *d, const struct sub *s);
void cluster_sub_removed(struct cluster *cl, struct dest *d, const struct sub *s);
/* s subscribed to durable subscription d (/durable/NAME, a local queue)
 * on topic: d is fed from JetStream (made there if new). */
int cluster_durable_added(struct cluster *cl, struct dest *d, const struct sub *s,
    const char *topic, size_t topic_len);
/* End durable subscription name (/durable/NAME): JetStream forgets it. */
void cluster_durable_end(struct cluster *cl, const char *name, size_t len);

#endif
