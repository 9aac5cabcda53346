/* cluster_wire.h - what eftd nodes send each other over NATS, apart from the
 * connection: subject and JetStream names made from destination names, the
 * message payload, and the few fields of JetStream's JSON answers eftd reads.
 * Pure functions, so that the unit tests and the fuzzer reach them. */
#ifndef EFT_CLUSTER_WIRE_H
#define EFT_CLUSTER_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eft/msg.h"

/* Subjects:  eft.q.P.NAME (queues, in stream EFT_Q_P), eft.t.E1.E2....$
 * (topics, below), eft.n.NODE.TEMP (a node's temp-queue replies).  NAME and NODE are
 * escaped as one token (cluster_escape).
 *
 * Queues are spread over cluster-queue-streams streams EFT_Q_0.., each a
 * work queue over eft.q.P.>: queue NAME is in partition
 * fnv1a32(NAME) % streams.  That hash is part of the wire format: every node
 * must compute the same, so it never changes. */
#define CLUSTER_QUEUE_STREAM_PREFIX "EFT_Q_"
#define CLUSTER_QUEUE_STREAMS_MAX 1024
/* The one queue stream of eftd before the partitions: refused, not used. */
#define CLUSTER_OLD_QUEUE_STREAM "EFT_QUEUES"
/* Durable topic subscriptions: an interest-retention stream over every
 * topic subject, made when the first one is. */
#define CLUSTER_TOPIC_STREAM "EFT_TOPICS"
#define CLUSTER_TOPIC_SUBJECTS "eft.t.>"
/* A JetStream consumer name is a file name on the NATS servers. */
#define CLUSTER_NAME_MAX 200

/* name as one subject token: letters, digits, '-' and '_' as they are, every
 * other byte as "=XX" (so '.', '*', '>', spaces and '=' itself cannot split
 * or widen a subject).  Not '%': nats-server 2.9 formats ack subjects with
 * the consumer name as a printf format, and a '%' in it breaks them.  Writes prefix then the token, NUL-terminated,
 * into out (cap bytes); the length, or 0 if it would not fit. */
size_t cluster_escape(char *out, size_t cap, const char *prefix, const char *name, size_t len);
/* The reverse, in place on a token; the length, or -1 if malformed. */
long cluster_unescape(char *token, size_t len);

/* The partition (0..parts-1) of queue NAME (after /queue/, unescaped). */
uint32_t cluster_queue_partition(const char *name, size_t len, uint32_t parts);
/* Queue NAME's subject, eft.q.P.NAME, into out; its length, or 0 if it
 * would not fit. */
size_t cluster_queue_subject(char *out, size_t cap, uint32_t partition, const char *name,
    size_t len);
/* The description a partition's stream is made with, "eft queues: partition
 * P of N": how a node learns the account's N (cluster_queue_streams_of). */
size_t cluster_queue_stream_description(char *out, size_t cap, uint32_t partition,
    uint32_t parts);
/* N from such a description (json string contents); false if it is not one. */
bool cluster_queue_streams_of(const char *desc, size_t len, uint32_t *parts);
/* Topic subjects: eft.t. + one token per element of the name (escaped on
 * its own as cluster_escape does, an empty element as "=", which no escaped
 * element is) + the end token "$" (escaped elements never are "$"):
 * "chat.a.b" -> "eft.t.chat.a.b.$", "a..b" -> "eft.t.a.=.b.$".  So NATS's
 * wildcards, which match whole tokens, can stand for eft's patterns.  Both
 * write a NUL-terminated subject into out (cap bytes): its length, or 0 if
 * it would not fit.  A name (after /topic/), wildcard elements included,
 * which are then plain elements (escaped): */
#define CLUSTER_TOPIC_PREFIX "eft.t."
#define CLUSTER_TOPIC_END "$"
size_t cluster_topic_subject(char *out, size_t cap, const char *name, size_t len);
/* A subscription's pattern (subject.h; a plain name maps as above): '*' ->
 * "*", a final '>' -> "*.>", a final '#' (or run of them) -> ">" with no end
 * token; elsewhere ".$" ends it.  A '#' before the end (subject_inner_hash)
 * cannot be said in NATS: the elements before it, then ">", with *exact
 * false (the subject is wider: match each message's name again).  0 for a
 * malformed pattern too. */
size_t cluster_topic_filter(char *out, size_t cap, const char *pat, size_t len, bool *exact);
/* The name a topic subject (subject, len bytes, as cluster_topic_subject
 * makes them) stands for, into out (cap bytes, not NUL-terminated): its
 * length, or -1 if subject is not one or out is too small. */
long cluster_topic_name(const char *subject, size_t len, char *out, size_t cap);

/* The payload of a message between nodes:
 *   "EFT1", flags (1 persistent, 2 dead, 4 redelivered, 8 now-or-never), priority,
 *   nblocks (1 or STOMP_VERSIONS), 0, expires_ms (8 bytes, little-endian),
 *   nblocks block lengths (4 bytes each), the blocks, then the body. */
#define CLUSTER_MSG_MAGIC "EFT1"
#define CLUSTER_MSG_FIXED 16
size_t cluster_msg_size(const struct msg *m);
/* Encode m into out (cluster_msg_size(m) bytes). */
void cluster_msg_encode(const struct msg *m, char *out);
/* A message from a payload, as a new one of this node with id id (its
 * message-id line rewritten).  NULL if out of memory or the payload is
 * malformed (*bad set then). */
struct msg *cluster_msg_decode(struct msg_pool *pool, const char *data, size_t len, uint64_t id,
    bool *bad);
/* Mark an encoded payload redelivered (flag 4), in place: a copy that may
 * not be the first (a publish retried).  False if it is no payload. */
bool cluster_msg_set_redelivered(char *payload, size_t len);

/* JetStream's JSON answers.  The value of the first "key": string (escapes
 * left as they are) in json, as a pointer into it and a length; false if
 * none.  Enough for the flat answers JetStream gives (pub acks, errors). */
bool cluster_json_string(const char *json, size_t len, const char *key, const char **value,
    size_t *vlen);
/* The first "key": integer; false if none. */
bool cluster_json_int(const char *json, size_t len, const char *key, int64_t *value);
/* The integer "key" inside the first "object": {...} (a flat one, such as
 * CONSUMER.INFO's "ack_floor":{"consumer_seq":N,"stream_seq":N}); false if
 * none. */
bool cluster_json_member_int(const char *json, size_t len, const char *object, const char *key,
    int64_t *value);
/* An "error" object's code and description: true if json holds one. */
bool cluster_json_error(const char *json, size_t len, int64_t *err_code, const char **desc,
    size_t *desc_len);

/* The "subjects" map in the "state" of a STREAM.INFO answer asked with
 * subjects_filter (JetStream lists each subject that holds messages, with
 * its count): fn(subject, len, count, arg) for each entry, the subject as it
 * stands in the JSON (eft's own subjects need no JSON escapes).  The number
 * of entries (0 where the answer has no map: no messages), or -1 if the
 * answer or the map is malformed; fn may have been called for some entries
 * then, so the caller keeps nothing of it. */
long cluster_json_subjects(const char *json, size_t len,
    void (*fn)(const char *subject, size_t len, uint64_t count, void *arg), void *arg);

/* What a JetStream ack subject $JS.ACK.<stream>.<consumer>.<delivered>.
 * <stream seq>.<consumer seq>.<time>.<pending> says of a delivery (2.9
 * also adds a domain and account hash in front: $JS.ACK.<domain>.<hash>.
 * <stream>...), read in one pass (once per pulled message).  False if it is
 * not an ack subject; consumer_len 0, and has_* false, for the parts that
 * are not what they should be (a number is plain digits). */
struct cluster_ack {
	const char *consumer;      /* into subject, consumer_len bytes */
	size_t consumer_len;
	bool has_delivered, has_stream_seq, has_consumer_seq;
	uint64_t delivered;        /* times JetStream delivered it, this time included */
	uint64_t stream_seq;
	uint64_t consumer_seq;     /* the consumer's count of deliveries, this one included */
};
bool cluster_ack_parse(const char *subject, struct cluster_ack *ack);

/* The question a sweeping node asks every node: does a subscriber of yours
 * hold the message at stream sequence seq of this stream and consumer?
 * "STREAM CONSUMER SEQ", into out (cap bytes with the NUL); 0 if it does
 * not fit. */
size_t cluster_held_format(char *out, size_t cap, const char *stream, const char *consumer,
    uint64_t seq);

/* Such a question read back: false unless it is two non-empty names and a
 * sequence (plain digits, not 0), one space apart. */
struct cluster_held {
	const char *stream;        /* into the question, stream_len bytes */
	size_t stream_len;
	const char *consumer;      /* ... consumer_len bytes */
	size_t consumer_len;
	uint64_t seq;
};
bool cluster_held_parse(const char *data, size_t len, struct cluster_held *held);

#endif
