/* store.h - durable queue messages: what the journal's records mean.
 *
 * A persistent message is stored when it is queued (a MSG record: its id,
 * queue, header blocks and body), marked when it is first handed to a
 * consumer that must acknowledge it (DELIVERED: it comes back redelivered
 * after a restart), and forgotten when it is gone for good: acknowledged,
 * or handed to an auto-ack consumer (CONSUMED).  The records of one COMMIT
 * are one BATCH record, so that a transaction is replayed whole or not at
 * all.  SUB and UNSUB records keep durable topic subscriptions (a queue
 * of their own, fed by the topic).  IDS records reserve message ids ahead, so that ids stay unique
 * across restarts.  SCHED and UNSCHED records keep persistent scheduled
 * messages (schedule.h) while they wait: the message, its destination and
 * the schedule's state, which the store keeps without reading it.
 *
 * Records are gathered as frames are handled and written once per loop turn
 * by store_commit (group commit); output that depends on them (RECEIPTs,
 * under fsync = always) is written only after that.
 *
 * The journal stays proportional to what is live: every stored message is
 * on the list of the segment that holds its record, and a segment is
 * deleted, oldest first, when nothing on it is live.  A few messages that
 * live long would keep old segments (and everything after them) forever, so
 * when the journal is much larger than what is live, the oldest segment's
 * messages are written again at the end, a bounded number per turn, and the
 * segment goes. */
#ifndef EFT_STORE_H
#define EFT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eft/backend.h"
#include "eft/journal.h"

struct dest;
struct dests;
struct msg;
struct msg_pool;

struct store;

/* A persistent scheduled message found at open: m (the reference is the
 * callee's on 0), for dest, with the state schedule.c wrote.  Not 0: it is
 * dropped (logged). */
typedef int (*store_scheduled_fn)(void *arg, struct msg *m, const char *dest, size_t dest_len,
    const void *state, size_t state_len);

struct store_options {
	const char *dir;
	enum journal_fsync fsync;
	bool recover;
	uint64_t segment_size;
	uint64_t max_disk;        /* journal bytes above which it is busy; 0: 80% of the
	                             disk's free space at open, on top of what it holds */
	store_scheduled_fn scheduled; /* or NULL: scheduled messages are dropped */
	void *scheduled_arg;
};

/* What was found at open, for the start-up log. */
struct store_recovered {
	struct journal_open_stats journal;
	uint64_t messages;        /* put back in their queues */
	uint64_t queues;
	uint64_t redelivered;     /* of them, handed out before: marked redelivered */
	uint64_t scheduled;       /* scheduled messages handed to the schedule again */
	/* The checkpoint's count of live messages, and how many of them the
	 * journal gave back up to its position (equal but for damage). */
	uint64_t checkpoint_live;
	uint64_t back_at_checkpoint;
	uint64_t lost;            /* recover: the difference, when damage was skipped */
};

/* Open the journal in opt->dir, put every message nobody acknowledged back
 * in its queue (in dests, allocated from pool, in id order), and set
 * *next_msg_id past every id that may have been used.  NULL with one line in
 * err (see journal_open; also out of memory, and unknown record types). */
struct store *store_open(const struct store_options *opt, struct dests *dests,
    struct msg_pool *pool, uint64_t *next_msg_id, struct store_recovered *rec, char *err,
    size_t errlen);
/* Commit what is gathered (best effort), close the journal, and drop the
 * bookkeeping of every message still stored: call it while they are alive
 * (before the destinations are freed). */
void store_close(struct store *s);

/* The journal as a backend (backend.h): keep is store_publish, delivered
 * store_delivered, gone store_consumed, flush store_commit, and so on. */
extern const struct backend_ops store_backend_ops;
/* Tell ev of commits (kept) and of records starting to gather after one
 * (wakeup). */
void store_set_events(struct store *s, const struct backend_events *ev);

/* m (persistent) is being queued at d: gather its MSG record.  -1 if out of
 * memory (nothing gathered, m is not stored). */
int store_publish(struct store *s, struct dest *d, struct msg *m);
/* Stored message m was handed to a consumer that must acknowledge it. */
void store_delivered(struct store *s, struct msg *m);
/* Stored message m is gone for good. */
void store_consumed(struct store *s, struct msg *m);

/* Scheduled message m waits for its time, for dest, with the schedule's
 * state: gather its SCHED record (again, when m is stored already: the
 * newest counts).  -1 if out of memory (then nothing changed). */
int store_schedule(struct store *s, struct msg *m, const char *dest, size_t dest_len,
    const void *state, size_t state_len);
/* Stored scheduled message m waits no more: an UNSCHED record. */
void store_unschedule(struct store *s, struct msg *m);

/* Durable subscriptions: queue is fed by topic from now on (a SUB record;
 * -1 if out of memory), or no longer (UNSUB).  Every segment begins with a
 * SUB record for each durable subscription, so old segments can go. */
int store_bind(struct store *s, const struct dest *queue, const struct dest *topic);
void store_unbind(struct store *s, const struct dest *queue);

/* The records gathered between begin and end are one BATCH record (a
 * begin/end pair inside another adds to the outer one).
 * store_reserve(bytes) before begin makes sure gathering them cannot fail
 * for want of memory (-1 if it cannot). */
int store_batch_reserve(struct store *s, size_t bytes);
void store_batch_begin(struct store *s);
void store_batch_end(struct store *s);
/* The bytes store_publish gathers for m queued at a destination named
 * dest_len bytes long (for store_batch_reserve). */
size_t store_msg_record_size(const struct msg *m, size_t dest_len);
#define STORE_SETTLE_RECORD_SIZE 24

/* Write what was gathered (and fsync as the policy says); also reserve more
 * message ids when next_msg_id comes near the reserved end, drop segments
 * that hold nothing live, and move a bounded number of long-lived messages
 * off the oldest segment when the journal is much bigger than what is live.
 * 0 when everything gathered is written; -1 when a write or fsync failed
 * (the reason in store_error): the records stay gathered, and the next call
 * tries again. */
int store_commit(struct store *s, uint64_t now_ms, uint64_t next_msg_id);
/* Bytes of records gathered since open (it only grows): a caller compares
 * it before and after handling a frame to know whether the frame's effects
 * wait for the next commit. */
uint64_t store_gathered(const struct store *s);
/* Is anything gathered and not yet written? */
bool store_pending(const struct store *s);
/* everysec: sync now if written data has waited a second (the caller's
 * timer).  -1 on failure, as store_commit. */
int store_tick(struct store *s, uint64_t now_ms);
const char *store_error(const struct store *s);
bool store_failing(const struct store *s);   /* the last commit failed */

/* fdatasync timings of the journal. */
const struct journal_sync_stats *store_sync_stats(const struct store *s);
/* The segment that holds stored message m's record; 0 if m is not stored
 * (tests look at where compaction moved it). */
uint32_t store_msg_segment(const struct msg *m);
/* Journal bytes on disk, and the bytes of live messages' records. */
uint64_t store_disk_bytes(const struct store *s);
uint64_t store_live_bytes(const struct store *s);
uint64_t store_live_messages(const struct store *s);

#endif
