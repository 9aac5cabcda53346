/* store.c - durable queue messages on the journal (see store.h).
 *
 * Record payloads, integers little-endian:
 *   MSG        u64 id, u8 flags (1: delivered, 2: lifetime part), u8 nblocks,
 *              u16 queue name length, u32 body length, u32 length of each
 *              header block, with flag 2 the lifetime part (u64 expiry in
 *              ms since the epoch or 0, u8 priority, u8 1 for a dead
 *              letter), then the name, the blocks and the body
 *   DELIVERED  u64 id
 *   CONSUMED   u64 id
 *   BATCH      records, each u32 payload length, u8 type, 3 zero bytes,
 *              payload (no CRC of their own: the BATCH's covers them)
 *   IDS        u64: no message id at or above it has been used
 *   SUB        u16 queue name length, u16 topic name length, the names:
 *              a durable subscription's queue, fed by the topic
 *   UNSUB      the queue name: no longer a durable subscription
 *   SCHED      u32 length of the schedule's state, the state (schedule.c's,
 *              opaque here), then a MSG payload whose name is the
 *              destination it is for: a persistent scheduled message
 *              waiting for its time; written again (the newest counts) when
 *              its state changes, or when it moves off an old segment
 *   UNSCHED    u64 id: the scheduled message waits no more (its last
 *              delivery, a MSG record when it reached a queue, follows)
 * SCHED and UNSCHED came with scheduled delivery: a journal without them
 * reads as before; an older eftd refuses one with them (unknown type). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "eft/dest.h"
#include "eft/le.h"
#include "eft/log.h"
#include "eft/msg.h"
#include "eft/store.h"

enum { REC_MSG = 1, REC_DELIVERED = 2, REC_CONSUMED = 3, REC_BATCH = 4, REC_IDS = 5, REC_SUB = 6,
	REC_UNSUB = 7, REC_SCHED = 8, REC_UNSCHED = 9 };

#define MSG_FLAG_DELIVERED 1
#define MSG_FLAG_LIFE 2
#define MSG_HEAD 16                  /* the fixed part of a MSG payload */
#define MSG_LIFE 10                  /* the lifetime part, for messages that need it */
#define BATCH_SUB_HEAD 8
/* Ids are reserved this far ahead, and again when half is used. */
#define IDS_AHEAD ((uint64_t)1 << 22)
/* Moving long-lived messages forward: at most this many record bytes a turn. */
#define COMPACT_BUDGET (4u << 20)
/* "disk limit reached" again and again: a count at most this often. */
#define DISK_LOG_MS 60000
/* An fsync this slow is logged. */
#define SLOW_SYNC_US 1000000

/* A stored message's place: on its segment's list, and the queue it was
 * stored for (its MSG record is written again there when it moves). */
/* A stored message's handle (m->kept): where its record is. */
struct store_link {
	struct msg *prev, *next;   /* its segment's live messages */
	struct dest *home;
	uint32_t seg;              /* the segment of its record; 0: being moved */
	uint32_t bytes;            /* its record's size, as counted in its segment */
};

static inline struct store_link *
link_of(const struct msg *m)
{
	return m->kept;
}

/* A scheduled message's handle: home is NULL, and what its SCHED record
 * holds besides the message is here, to write it again. */
struct store_sched_link {
	struct store_link l;
	uint32_t state_len;
	uint16_t name_len;
	uint8_t data[];            /* the state, then the destination's name */
};

static inline struct store_sched_link *
sched_of(const struct msg *m)
{
	return m->kept;
}

struct segment {
	uint64_t live;         /* stored messages whose record is here */
	uint64_t live_bytes;   /* their records' bytes */
	struct msg *head;      /* ... listed by their links */
};

/* Messages by id, while the journal is read: open addressing, linear
 * probing, deletion by shifting back (no tombstones). */
struct idtab {
	struct msg **slot;
	size_t cap, n;         /* cap a power of two */
};

struct store {
	struct journal *j;
	uint64_t segment_size;
	struct segment *segs;  /* segs[i] is segment first + i, up to the current one */
	uint32_t first;
	size_t nsegs, cap;
	uint64_t live, live_bytes;
	uint8_t *batch;        /* a COMMIT's records, gathered */
	size_t batch_len, batch_cap;
	unsigned batching;      /* begin/end nesting depth (a dead letter inside a COMMIT) */
	bool batch_broken;     /* a record of the batch did not fit: logged at its end */
	uint64_t ids_reserved;
	uint32_t ids_seg;      /* segment of the newest IDS record gathered */
	uint32_t ids_written_seg; /* ... and of the newest written */
	uint64_t next_id_seen;
	bool gathering;        /* records gathered since the last commit */
	uint64_t gathered_total; /* bytes of records gathered since open */
	bool failing;
	uint64_t syncs_seen;   /* journal fsyncs already looked at */
	const struct backend_events *events; /* or NULL */
	uint64_t max_disk;     /* busy above this many bytes on disk */
	bool disk_alarm;       /* over max_disk (until below 90% of it), or failing */
	struct log_every alarm_log; /* "disk limit reached": first in full, then a count */
	bool alarm_told;       /* ... this alarm was logged: log its end too */
	uint64_t now_ms;       /* the caller's clock, as of the last commit */
	bool checkpoint_failing; /* the last checkpoint could not be written (logged) */
	uint32_t damaged_through; /* recover: damage found again at each open up to this
	                             segment: its live messages are moved on so it goes */
	/* while opening */
	struct idtab tab;
	bool marked;           /* the journal's replay passed the checkpoint's mark */
	uint64_t mark;         /* live messages at the checkpoint */
	uint64_t back_at_mark; /* ... and read back up to its position */
	struct damage_seen {
		uint64_t bytes;            /* known bytes lost */
		bool bytes_unknown;        /* a missing segment whose size nobody knew */
		bool after_mark;           /* damage the checkpoint's count does not cover */
		char files[256];           /* the files, named */
	} dmg;
	struct dests *dests;
	struct msg_pool *pool;
	struct dest *last_dest;
	store_scheduled_fn scheduled;  /* scheduled messages found at open go here */
	void *scheduled_arg;
	char error[512];
};

/* ---- the id table ---- */

static size_t
idtab_home(const struct idtab *t, uint64_t id)
{
	return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (t->cap - 1);
}

static struct msg **
idtab_find(struct idtab *t, uint64_t id)
{
	if (t->cap == 0)
		return NULL;
	for (size_t i = idtab_home(t, id);; i = (i + 1) & (t->cap - 1)) {
		if (t->slot[i] == NULL)
			return NULL;
		if (t->slot[i]->id == id)
			return &t->slot[i];
	}
}

static int
idtab_add(struct idtab *t, struct msg *m)
{
	if ((t->n + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct msg **slot = calloc(cap, sizeof(*slot));
		if (slot == NULL)
			return -1;
		struct idtab bigger = { slot, cap, 0 };
		for (size_t i = 0; i < t->cap; i++)
			if (t->slot[i] != NULL)
				idtab_add(&bigger, t->slot[i]); /* cannot grow: room made */
		free(t->slot);
		*t = bigger;
	}
	size_t i = idtab_home(t, m->id);
	while (t->slot[i] != NULL)
		i = (i + 1) & (t->cap - 1);
	t->slot[i] = m;
	t->n++;
	return 0;
}

static void
idtab_remove(struct idtab *t, struct msg **at)
{
	size_t i = (size_t)(at - t->slot);
	t->slot[i] = NULL;
	t->n--;
	/* Shift back the entries after it that would no longer be found. */
	for (size_t j = (i + 1) & (t->cap - 1); t->slot[j] != NULL; j = (j + 1) & (t->cap - 1)) {
		size_t home = idtab_home(t, t->slot[j]->id);
		bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!stays) {
			t->slot[i] = t->slot[j];
			t->slot[j] = NULL;
			i = j;
		}
	}
}

/* ---- segments ---- */

static struct segment *
segment_of(struct store *s, uint32_t seg)
{
	return &s->segs[seg - s->first];
}

/* Room in segs for `need` segments. */
static int
segments_room(struct store *s, size_t need)
{
	if (need > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		while (cap < need)
			cap *= 2;
		struct segment *n = realloc(s->segs, cap * sizeof(*n));
		if (n == NULL)
			return -1;
		s->segs = n;
		s->cap = cap;
	}
	return 0;
}

/* Make segs reach segment `upto`. */
static int
segments_extend(struct store *s, uint32_t upto)
{
	size_t need = (size_t)(upto - s->first) + 1;
	if (need <= s->nsegs)
		return 0;
	if (segments_room(s, need) != 0)
		return -1;
	memset(&s->segs[s->nsegs], 0, (need - s->nsegs) * sizeof(*s->segs));
	s->nsegs = need;
	return 0;
}

static void
segment_link(struct store *s, struct msg *m, uint32_t seg, size_t bytes)
{
	struct segment *sg = segment_of(s, seg);
	link_of(m)->seg = seg;
	link_of(m)->bytes = (uint32_t)bytes;
	link_of(m)->prev = NULL;
	link_of(m)->next = sg->head;
	if (sg->head != NULL)
		link_of(sg->head)->prev = m;
	sg->head = m;
	sg->live++;
	sg->live_bytes += bytes;
	s->live++;
	s->live_bytes += bytes;
}

static void
segment_unlink(struct store *s, struct msg *m)
{
	struct store_link *l = link_of(m);
	size_t bytes = l->bytes;
	struct segment *sg = segment_of(s, l->seg);
	if (l->prev != NULL)
		link_of(l->prev)->next = l->next;
	else
		sg->head = l->next;
	if (l->next != NULL)
		link_of(l->next)->prev = l->prev;
	sg->live--;
	sg->live_bytes -= bytes;
	s->live--;
	s->live_bytes -= bytes;
	l->seg = 0;
	l->prev = l->next = NULL;
}

/* m is no longer stored: its bookkeeping goes. */
static void
link_free(struct msg *m)
{
	free(m->kept);
	m->kept = NULL;
}

/* Every stored message's bookkeeping, at close (the messages live on). */
static void
free_links(struct store *s)
{
	for (size_t i = 0; i < s->nsegs; i++) {
		for (struct msg *m = s->segs[i].head, *next; m != NULL; m = next) {
			next = link_of(m)->next;
			link_free(m);
		}
		s->segs[i].head = NULL;
	}
}

/* ---- gathering records ---- */

static void
gathered(struct store *s)
{
	if (!s->gathering) {
		s->gathering = true;
		if (s->events != NULL)
			s->events->wakeup(s->events->arg);
	}
}

static int
batch_room(struct store *s, size_t extra)
{
	if (s->batch_len + extra <= s->batch_cap)
		return 0;
	size_t cap = s->batch_cap ? s->batch_cap : 4096;
	while (cap < s->batch_len + extra)
		cap *= 2;
	uint8_t *b = realloc(s->batch, cap);
	if (b == NULL)
		return -1;
	s->batch = b;
	s->batch_cap = cap;
	return 0;
}

static int
append(struct store *s, uint8_t type, const struct journal_part *parts, int n)
{
	s->gathered_total += JOURNAL_RECORD_HEADER;
	for (int i = 0; i < n; i++)
		s->gathered_total += parts[i].len;
	if (!s->batching) {
		if (journal_append(s->j, type, parts, n) != 0)
			return -1;
		gathered(s);
		return 0;
	}
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += parts[i].len;
	if (batch_room(s, BATCH_SUB_HEAD + len) != 0) {
		s->batch_broken = true;
		return -1;
	}
	uint8_t *p = s->batch + s->batch_len;
	le_put32(p, (uint32_t)len);
	p[4] = type;
	p[5] = p[6] = p[7] = 0;
	p += BATCH_SUB_HEAD;
	for (int i = 0; i < n; i++) {
		memcpy(p, parts[i].data, parts[i].len);
		p += parts[i].len;
	}
	s->batch_len += BATCH_SUB_HEAD + len;
	return 0;
}

static int
append_id(struct store *s, uint8_t type, uint64_t id)
{
	uint8_t b[8];
	le_put64(b, id);
	struct journal_part part = { b, sizeof(b) };
	return append(s, type, &part, 1);
}

/* Only messages with an expiry, a priority or a death have the lifetime
 * part: plain ones are stored as before. */
static bool
has_life(const struct msg *m)
{
	return m->expires_ms != 0 || m->priority != MSG_PRIORITY_DEFAULT || m->dead;
}

size_t
store_msg_record_size(const struct msg *m, size_t dest_len)
{
	int nblocks = msg_nblocks(m);
	size_t n = JOURNAL_RECORD_HEADER + MSG_HEAD + 4 * (size_t)nblocks + dest_len +
	    msg_blocks_len(m) + m->body_len + (has_life(m) ? MSG_LIFE : 0);
	return n + BATCH_SUB_HEAD;
}

/* The bytes of stored message m's record, a MSG or a SCHED. */
static size_t
record_size(const struct msg *m)
{
	const struct store_link *l = link_of(m);
	if (l->home != NULL)
		return store_msg_record_size(m, dest_name_len(l->home));
	const struct store_sched_link *sl = sched_of(m);
	return store_msg_record_size(m, sl->name_len) + 4 + sl->state_len;
}

/* The MSG payload of m (named name) after `before` (the SCHED record's
 * state, or nothing), as a record of type. */
static inline __attribute__((always_inline)) int
append_msg_as(struct store *s, uint8_t type, const struct journal_part *before, int nbefore,
    const char *name, size_t name_len, const struct msg *m)
{
	int nblocks = msg_nblocks(m);
	uint8_t head[MSG_HEAD + 4 * STOMP_VERSIONS + MSG_LIFE];
	bool life = has_life(m);
	le_put64(head, m->id);
	head[8] = (m->delivered ? MSG_FLAG_DELIVERED : 0) | (life ? MSG_FLAG_LIFE : 0);
	head[9] = (uint8_t)nblocks;
	le_put16(head + 10, (uint16_t)name_len);
	le_put32(head + 12, (uint32_t)m->body_len);
	size_t head_len = MSG_HEAD + 4 * (size_t)nblocks;
	if (life) {
		le_put64(head + head_len, m->expires_ms);
		head[head_len + 8] = m->priority;
		head[head_len + 9] = m->dead;
		head_len += MSG_LIFE;
	}
	struct journal_part parts[5];
	int n = 0;
	for (int i = 0; i < nbefore; i++)
		parts[n++] = before[i];
	parts[n++] = (struct journal_part){ head, head_len };
	parts[n++] = (struct journal_part){ name, name_len };
	for (int v = 0; v < nblocks; v++)
		le_put32(head + MSG_HEAD + 4 * v, m->block_len[v]);
	size_t run;
	const char *data = msg_blocks_and_body(m, &run);
	parts[n++] = (struct journal_part){ data, run };
	return append(s, type, parts, n);
}

/* The MSG record of m, queued at d. */
static int
append_msg(struct store *s, const struct dest *d, const struct msg *m)
{
	return append_msg_as(s, REC_MSG, NULL, 0, dest_name(d), dest_name_len(d), m);
}

/* The SCHED record of scheduled message m (its link filled in). */
static int
append_sched(struct store *s, const struct msg *m)
{
	const struct store_sched_link *sl = sched_of(m);
	uint8_t len[4];
	le_put32(len, sl->state_len);
	struct journal_part before[2] = { { len, 4 }, { sl->data, sl->state_len } };
	return append_msg_as(s, REC_SCHED, before, 2, (const char *)sl->data + sl->state_len,
	    sl->name_len, m);
}

int
store_publish(struct store *s, struct dest *d, struct msg *m)
{
	if (dest_name_len(d) > UINT16_MAX || m->body_len > UINT32_MAX)
		return -1;
	m->delivered = false;
	if ((m->kept = calloc(1, sizeof(struct store_link))) == NULL)
		return -1;
	if (append_msg(s, d, m) != 0) {
		link_free(m);
		return -1;
	}
	link_of(m)->home = d;
	segment_link(s, m, journal_segment(s->j), store_msg_record_size(m, dest_name_len(d)));
	return 0;
}

void
store_delivered(struct store *s, struct msg *m)
{
	if (m->delivered)
		return;
	m->delivered = true;
	if (append_id(s, REC_DELIVERED, m->id) != 0)
		log_error("out of memory: message %llu not marked delivered in the journal",
		    (unsigned long long)m->id);
}

void
store_consumed(struct store *s, struct msg *m)
{
	if (append_id(s, REC_CONSUMED, m->id) != 0)
		log_error("out of memory: message %llu not marked consumed in the journal (it "
		    "would come back after a restart)", (unsigned long long)m->id);
	segment_unlink(s, m);
	link_free(m);
}

/* A scheduled message's link, holding state and name; NULL if out of memory. */
static struct store_sched_link *
sched_link_new(const char *name, size_t name_len, const void *state, size_t state_len)
{
	struct store_sched_link *sl = calloc(1, sizeof(*sl) + state_len + name_len);
	if (sl == NULL)
		return NULL;
	sl->state_len = (uint32_t)state_len;
	sl->name_len = (uint16_t)name_len;
	memcpy(sl->data, state, state_len);
	memcpy(sl->data + state_len, name, name_len);
	return sl;
}

int
store_schedule(struct store *s, struct msg *m, const char *dest, size_t dest_len,
    const void *state, size_t state_len)
{
	if (dest_len == 0 || dest_len > UINT16_MAX || m->body_len > UINT32_MAX ||
	    state_len > UINT16_MAX)
		return -1;
	struct store_sched_link *sl = sched_link_new(dest, dest_len, state, state_len);
	if (sl == NULL)
		return -1;
	void *old = m->kept;
	m->kept = sl;
	m->delivered = false;
	if (append_sched(s, m) != 0) {
		m->kept = old;
		free(sl);
		return -1;
	}
	/* Written again: the newest record counts, the old one is dead. */
	if (old != NULL) {
		m->kept = old;
		segment_unlink(s, m);
		link_free(m);
		m->kept = sl;
	}
	segment_link(s, m, journal_segment(s->j), record_size(m));
	return 0;
}

void
store_unschedule(struct store *s, struct msg *m)
{
	if (append_id(s, REC_UNSCHED, m->id) != 0)
		log_error("out of memory: scheduled message %llu not marked done in the journal (it "
		    "would be scheduled again after a restart)", (unsigned long long)m->id);
	segment_unlink(s, m);
	link_free(m);
}

static int
reserve_ids(struct store *s, uint64_t next_id)
{
	uint64_t want = next_id < UINT64_MAX - IDS_AHEAD ? next_id + IDS_AHEAD : UINT64_MAX;
	if (append_id(s, REC_IDS, want) != 0)
		return -1;
	s->ids_reserved = want;
	s->ids_seg = journal_segment(s->j);
	return 0;
}

int
store_bind(struct store *s, const struct dest *queue, const struct dest *topic)
{
	uint8_t head[4];
	le_put16(head, (uint16_t)dest_name_len(queue));
	le_put16(head + 2, (uint16_t)dest_name_len(topic));
	struct journal_part parts[3] = {
		{ head, sizeof(head) },
		{ dest_name(queue), dest_name_len(queue) },
		{ dest_name(topic), dest_name_len(topic) },
	};
	if (dest_name_len(queue) > UINT16_MAX || dest_name_len(topic) > UINT16_MAX)
		return -1;
	return append(s, REC_SUB, parts, 3);
}

void
store_unbind(struct store *s, const struct dest *queue)
{
	struct journal_part part = { dest_name(queue), dest_name_len(queue) };
	if (append(s, REC_UNSUB, &part, 1) != 0)
		log_error("out of memory: the end of durable subscription %s is not in the journal",
		    dest_name(queue));
}

static void
bind_again(const struct dest *d, void *arg)
{
	struct store *s = arg;
	const struct dest *topic = dest_bound_topic(d);
	if (topic != NULL && store_bind(s, d, topic) != 0)
		log_error("out of memory: durable subscription %s not written again", dest_name(d));
}

/* A new segment begins with every durable subscription (and the id
 * reservation), so that no older one is needed for them. */
static int
segment_preamble(struct store *s, uint64_t next_id)
{
	dests_foreach(s->dests, bind_again, s);
	return reserve_ids(s, next_id);
}

int
store_batch_reserve(struct store *s, size_t bytes)
{
	return batch_room(s, bytes);
}

void
store_batch_begin(struct store *s)
{
	if (s->batching++ > 0)
		return;
	s->batch_broken = false;
	s->batch_len = 0;
}

void
store_batch_end(struct store *s)
{
	if (--s->batching > 0)
		return;
	if (s->batch_len == 0)
		return;
	struct journal_part part = { s->batch, s->batch_len };
	if (s->batch_broken || journal_append(s->j, REC_BATCH, &part, 1) != 0)
		log_error("out of memory: a transaction was applied but not written to the journal");
	else
		gathered(s);
	s->batch_len = 0;
}

/* ---- commit ---- */

/* Release the oldest segments while nothing on them is live (and a newer
 * one holds the id reservation): the journal deletes them after its next
 * checkpoint. */
static void
drop_dead_segments(struct store *s)
{
	size_t dead = 0;
	while (dead + 1 < s->nsegs && s->segs[dead].live == 0 &&
	    s->first + dead < s->ids_written_seg)
		dead++;
	if (dead == 0)
		return;
	memmove(s->segs, s->segs + dead, (s->nsegs - dead) * sizeof(*s->segs));
	s->nsegs -= dead;
	s->first += (uint32_t)dead;
	journal_release(s->j, s->first);
	if (s->damaged_through != 0 && s->first > s->damaged_through) {
		log_info("journal: the damaged segments are no longer needed: from the next "
		    "checkpoint on (within a second) eftd starts without --recover again");
		s->damaged_through = 0;
	}
}

/* Write the oldest segment's live messages again at the end, up to the
 * budget, when the journal is much bigger than what is live. */
static void
compact_step(struct store *s)
{
	uint64_t disk = journal_bytes(s->j);
	/* After --recover, the damaged segments go as soon as can be: until
	 * then every start finds the damage again. */
	bool damaged = s->damaged_through != 0 && s->first <= s->damaged_through;
	/* Not while writes fail: each retry would gather the copies again. */
	if (s->failing || s->nsegs < 2 || (!damaged && (s->nsegs < 3 ||
	    disk <= 2 * s->live_bytes + 2 * s->segment_size)))
		return;
	struct segment *old = &s->segs[0];
	uint32_t cur = journal_segment(s->j);
	size_t budget = COMPACT_BUDGET;
	while (old->head != NULL && budget > 0) {
		struct msg *m = old->head;
		size_t bytes = link_of(m)->bytes;
		if ((link_of(m)->home != NULL ? append_msg(s, link_of(m)->home, m) :
		    append_sched(s, m)) != 0)
			return;
		segment_unlink(s, m);
		segment_link(s, m, cur, bytes);
		budget = bytes < budget ? budget - bytes : 0;
	}
}

/* A commit failed for `why`: logged when the failing starts; -1. */
static int
commit_failed(struct store *s, const char *why)
{
	if (!s->failing)
		log_error("journal cannot be written (%s): receipts wait, persistent messages are "
		    "refused, retrying", why);
	snprintf(s->error, sizeof(s->error), "%s", why);
	s->failing = true;
	s->disk_alarm = true;
	return -1;
}

/* Everything gathered is written: the checkpoint, once a second. */
static void
checkpoint(struct store *s, uint64_t now_ms, bool force)
{
	if (journal_checkpoint(s->j, now_ms, s->live, force) != 0) {
		if (!s->checkpoint_failing)
			log_error("journal checkpoint cannot be written (%s): segments nothing needs "
			    "are kept until it can", journal_error(s->j));
		s->checkpoint_failing = true;
		return;
	}
	if (s->checkpoint_failing)
		log_info("journal checkpoint written again");
	s->checkpoint_failing = false;
}

int
store_commit(struct store *s, uint64_t now_ms, uint64_t next_msg_id)
{
	s->now_ms = now_ms;
	s->next_id_seen = next_msg_id;
	if (next_msg_id + IDS_AHEAD / 2 > s->ids_reserved && reserve_ids(s, next_msg_id) != 0)
		return commit_failed(s, "out of memory reserving message ids");
	/* A commit may begin the next segment: its room is made first, so
	 * that following it cannot fail. */
	if (segments_room(s, s->nsegs + 1) != 0)
		return commit_failed(s, "out of memory");
	compact_step(s);
	uint32_t ids_seg = s->ids_seg;
	if (journal_commit(s->j, now_ms) != 0)
		return commit_failed(s, journal_error(s->j));
	const struct journal_sync_stats *ss = journal_sync_stats(s->j);
	if (ss->count != s->syncs_seen) {
		s->syncs_seen = ss->count;
		/* Every loop turn waits for it, under fsync = always. */
		if (ss->last_us >= SLOW_SYNC_US)
			log_warn("journal: fdatasync took %llu ms (is the disk busy?)",
			    (unsigned long long)(ss->last_us / 1000));
	}
	if (s->failing)
		log_info("journal: writing again");
	s->failing = false;
	s->gathering = false;
	s->ids_written_seg = ids_seg;
	uint32_t cur = journal_segment(s->j);
	if (cur != s->first + s->nsegs - 1) {
		/* A new segment begins with the id reservation, so that the old
		 * ones can go. */
		segments_extend(s, cur); /* room was made */
		if (segment_preamble(s, next_msg_id) != 0)
			log_error("out of memory starting journal segment %u", cur);
	}
	drop_dead_segments(s);
	/* (A new segment's preamble may be gathered: it changes no count.) */
	checkpoint(s, now_ms, false);
	return 0;
}

uint32_t
store_msg_segment(const struct msg *m)
{
	return m->kept != NULL ? link_of(m)->seg : 0;
}

uint64_t
store_gathered(const struct store *s)
{
	return s->gathered_total;
}

bool
store_pending(const struct store *s)
{
	return s->gathering || journal_pending(s->j) > 0;
}

static void log_disk_summary(struct store *s, uint64_t times, uint64_t since_ms);

int
store_tick(struct store *s, uint64_t now_ms)
{
	uint64_t since_ms = now_ms - s->alarm_log.last_ms;
	uint64_t flaps = log_every_due(&s->alarm_log, now_ms);
	if (flaps > 0)
		log_disk_summary(s, flaps, since_ms);
	if (!journal_dirty(s->j) && !store_pending(s) && !journal_checkpoint_wanted(s->j) &&
	    !(s->damaged_through != 0 && s->first <= s->damaged_through))
		return 0;
	return store_commit(s, now_ms, s->next_id_seen);
}

const char *
store_error(const struct store *s)
{
	return s->error;
}

bool
store_failing(const struct store *s)
{
	return s->failing;
}

const struct journal_sync_stats *
store_sync_stats(const struct store *s)
{
	return journal_sync_stats(s->j);
}

uint64_t
store_disk_bytes(const struct store *s)
{
	return journal_bytes(s->j);
}

uint64_t
store_live_bytes(const struct store *s)
{
	return s->live_bytes;
}

uint64_t
store_live_messages(const struct store *s)
{
	return s->live;
}

void
store_set_events(struct store *s, const struct backend_events *ev)
{
	s->events = ev;
}

/* ---- the journal as a backend ---- */

static int
op_keep(void *impl, struct dest *d, struct msg *m)
{
	return store_publish(impl, d, m);
}

static void
op_delivered(void *impl, struct msg *m)
{
	if (m->kept != NULL)
		store_delivered(impl, m);
}

/* However it went, the journal forgets it. */
static void
op_gone(void *impl, struct msg *m, enum msg_fate fate)
{
	(void)fate;
	if (m->kept != NULL)
		store_consumed(impl, m);
}

static int
op_bind(void *impl, const struct dest *queue, const struct dest *topic)
{
	return store_bind(impl, queue, topic);
}

static void
op_unbind(void *impl, const struct dest *queue)
{
	store_unbind(impl, queue);
}

static int
op_batch_begin(void *impl, size_t room)
{
	if (store_batch_reserve(impl, room) != 0)
		return -1;
	store_batch_begin(impl);
	return 0;
}

static void
op_batch_end(void *impl)
{
	store_batch_end(impl);
}

static uint64_t
op_promised(const void *impl)
{
	return store_gathered(impl);
}

/* The disk alarm ends: said so if its start was. */
static __attribute__((noinline, cold)) void
alarm_end(struct store *s, uint64_t disk)
{
	s->disk_alarm = false;
	if (s->alarm_told)
		log_info("journal writable and below 90%% of max-disk again (%llu MB): producers "
		    "resume", (unsigned long long)(disk >> 20));
	s->alarm_told = false;
}


/* The disk alarm starts.  Under a load that keeps reaching the limit this
 * comes once a second: the first in full, then a count at most once a
 * minute.  (Out of line: op_pressure runs for every persistent SEND.) */
static __attribute__((noinline, cold)) void
alarm_start(struct store *s, uint64_t disk)
{
	s->disk_alarm = true;
	uint64_t times = 0, since_ms = s->now_ms - s->alarm_log.last_ms;
	switch (log_every_event(&s->alarm_log, s->now_ms, &times)) {
	case LOG_EVERY_FULL:
		log_warn("disk limit reached: the journal holds %llu MB (max-disk %llu MB); producers "
		    "wait until consumers drain it", (unsigned long long)(disk >> 20),
		    (unsigned long long)(s->max_disk >> 20));
		s->alarm_told = true;
		break;
	case LOG_EVERY_SUMMARY:
		log_disk_summary(s, times, since_ms);
		break;
	case LOG_EVERY_QUIET:
		break;
	}
}

/* Hysteresis: busy until below 90% of max-disk again, so producers do not
 * flap. */
static enum backend_pressure
op_pressure(void *impl)
{
	struct store *s = impl;
	if (s->failing)
		return BACKEND_FAILING;
	uint64_t disk = journal_bytes(s->j);
	if (s->disk_alarm) {
		if (s->max_disk != 0 && disk >= s->max_disk - s->max_disk / 10)
			return BACKEND_BUSY;
		alarm_end(s, disk);
		return BACKEND_OK;
	}
	if (s->max_disk == 0 || disk < s->max_disk)
		return BACKEND_OK;
	alarm_start(s, disk);
	return BACKEND_BUSY;
}

/* How often the disk limit was reached since the last line about it. */
static void
log_disk_summary(struct store *s, uint64_t times, uint64_t since_ms)
{
	log_warn("disk limit reached %llu more time%s in the last %llu s (producers waited each "
	    "time until the journal was below 90%% of max-disk); it holds %llu MB, max-disk %llu MB",
	    (unsigned long long)times, times == 1 ? "" : "s", (unsigned long long)(since_ms / 1000),
	    (unsigned long long)(journal_bytes(s->j) >> 20), (unsigned long long)(s->max_disk >> 20));
}

/* The group commit; its success keeps everything gathered. */
static int
op_flush(void *impl, uint64_t now_ms, uint64_t next_msg_id)
{
	struct store *s = impl;
	if (store_commit(s, now_ms, next_msg_id) != 0)
		return -1;
	if (s->events != NULL)
		s->events->kept(s->events->arg, s->gathered_total);
	return 0;
}

static const char *
op_error(const void *impl)
{
	return store_error(impl);
}

static void
op_stats(const void *impl, struct backend_stats *out)
{
	const struct store *s = impl;
	out->disk_bytes = journal_bytes(s->j);
	out->disk_limit = s->max_disk;
	out->messages = s->live;
	out->alarm = s->disk_alarm || s->failing;
	const struct journal_sync_stats *ss = journal_sync_stats(s->j);
	out->syncs = ss->count;
	out->sync_total_us = ss->total_us;
	out->sync_max_us = ss->max_us;
}

static int
op_schedule(void *impl, struct msg *m, const char *dest, size_t dest_len, const void *state,
    size_t state_len)
{
	return store_schedule(impl, m, dest, dest_len, state, state_len);
}

static void
op_unschedule(void *impl, struct msg *m)
{
	store_unschedule(impl, m);
}

const struct backend_ops store_backend_ops = {
	.name = "journal",
	.keep = op_keep,
	.schedule = op_schedule,
	.unschedule = op_unschedule,
	.delivered = op_delivered,
	.gone = op_gone,
	.bind = op_bind,
	.unbind = op_unbind,
	.batch_begin = op_batch_begin,
	.batch_end = op_batch_end,
	.keep_room = store_msg_record_size,
	.settle_room = STORE_SETTLE_RECORD_SIZE,
	.promised = op_promised,
	.pressure = op_pressure,
	.flush = op_flush,
	.error = op_error,
	.stats = op_stats,
};

/* ---- opening: replay ---- */

static int replay_record(uint32_t seg, uint8_t type, const uint8_t *p, size_t len, void *arg);

/* A MSG payload, read and checked. */
struct msg_payload {
	uint64_t id;
	bool delivered, life;
	int nblocks;
	const char *name;
	size_t name_len;
	uint32_t lens[STOMP_VERSIONS];
	const char *blocks[STOMP_VERSIONS];
	const char *body;
	size_t body_len;
	const uint8_t *lp;         /* the lifetime part, if life */
};

static int
msg_payload_read(const uint8_t *p, size_t len, struct msg_payload *out)
{
	if (len < MSG_HEAD)
		return -1;
	out->id = le_get64(p);
	out->delivered = (p[8] & MSG_FLAG_DELIVERED) != 0;
	out->life = (p[8] & MSG_FLAG_LIFE) != 0;
	int nblocks = out->nblocks = p[9];
	size_t name_len = le_get16(p + 10), body_len = le_get32(p + 12);
	if (nblocks != 1 && nblocks != STOMP_VERSIONS)
		return -1;
	size_t head = MSG_HEAD + 4 * (size_t)nblocks + (out->life ? MSG_LIFE : 0);
	size_t total = head + name_len + body_len;
	if (len < head)
		return -1;
	for (int v = 0; v < nblocks; v++) {
		out->lens[v] = le_get32(p + MSG_HEAD + 4 * v);
		total += out->lens[v];
	}
	out->lp = p + MSG_HEAD + 4 * (size_t)nblocks;
	if (total != len || name_len == 0 || (out->life && out->lp[8] >= MSG_PRIORITIES))
		return -1;
	out->name = (const char *)p + head;
	out->name_len = name_len;
	const char *at = out->name + name_len;
	for (int v = 0; v < nblocks; v++) {
		out->blocks[v] = at;
		at += out->lens[v];
	}
	out->body = at;
	out->body_len = body_len;
	return 0;
}

/* The message of a payload read, with its lifetime; NULL if out of memory. */
static struct msg *
msg_of_payload(struct store *s, const struct msg_payload *mp)
{
	struct msg *m = msg_restore(s->pool, mp->id, mp->nblocks, mp->blocks, mp->lens, mp->body,
	    mp->body_len);
	if (m == NULL)
		return NULL;
	m->delivered = mp->delivered;
	if (mp->life) {
		m->expires_ms = le_get64(mp->lp);
		m->priority = mp->lp[8];
		m->dead = mp->lp[9] != 0;
	}
	return m;
}

static int
replay_msg(struct store *s, uint32_t seg, const uint8_t *p, size_t len)
{
	struct msg_payload mp;
	if (msg_payload_read(p, len, &mp) != 0)
		return -1;
	struct msg **found = idtab_find(&s->tab, mp.id);
	if (found != NULL) {
		/* Written again further on (moved off an old segment). */
		if (link_of(*found)->home == NULL)
			return -1; /* a scheduled message's id: no MSG before its UNSCHED */
		link_of(*found)->seg = seg;
		(*found)->delivered |= mp.delivered;
		return 0;
	}
	struct dest *d = s->last_dest;
	if (d == NULL || !dest_is(d, mp.name, mp.name_len)) {
		d = dests_get(s->dests, mp.name, mp.name_len, DEST_QUEUE);
		if (d == NULL || dest_kind(d) != DEST_QUEUE)
			return -1;
		s->last_dest = d;
	}
	struct msg *m = msg_of_payload(s, &mp);
	if (m == NULL)
		return -1;
	if ((m->kept = calloc(1, sizeof(struct store_link))) == NULL ||
	    idtab_add(&s->tab, m) != 0) {
		link_free(m);
		msg_unref(m);
		return -1;
	}
	link_of(m)->seg = seg;
	link_of(m)->home = d;
	return 0;
}

/* A message out of the table: its record is dead. */
static void
replay_forget(struct store *s, struct msg **found)
{
	struct msg *m = *found;
	idtab_remove(&s->tab, found);
	link_free(m);
	msg_unref(m);
}

/* A SCHED record: the newest of an id counts. */
static int
replay_sched(struct store *s, uint32_t seg, const uint8_t *p, size_t len)
{
	if (len < 4)
		return -1;
	size_t state_len = le_get32(p);
	struct msg_payload mp;
	if (state_len > len - 4 || msg_payload_read(p + 4 + state_len, len - 4 - state_len, &mp) != 0)
		return -1;
	struct msg **found = idtab_find(&s->tab, mp.id);
	if (found != NULL) {
		if (link_of(*found)->home != NULL)
			return -1; /* a queued message's id */
		replay_forget(s, found);
	}
	struct store_sched_link *sl = sched_link_new(mp.name, mp.name_len, p + 4, state_len);
	struct msg *m = sl != NULL ? msg_of_payload(s, &mp) : NULL;
	if (m == NULL) {
		free(sl);
		return -1;
	}
	m->kept = sl;
	if (idtab_add(&s->tab, m) != 0) {
		link_free(m);
		msg_unref(m);
		return -1;
	}
	sl->l.seg = seg;
	return 0;
}

static int
replay_sub(struct store *s, const uint8_t *p, size_t len)
{
	if (len < 4)
		return -1;
	size_t qlen = le_get16(p), tlen = le_get16(p + 2);
	if (qlen == 0 || tlen == 0 || 4 + qlen + tlen != len)
		return -1;
	struct dest *q = dests_get(s->dests, (const char *)p + 4, qlen, DEST_QUEUE);
	struct dest *t = dests_get(s->dests, (const char *)p + 4 + qlen, tlen, DEST_TOPIC);
	if (q == NULL || t == NULL || dest_kind(q) != DEST_QUEUE || dest_kind(t) != DEST_TOPIC)
		return -1;
	if (dest_bound_topic(q) == t)
		return 0;
	dest_unbind(q);
	return dest_bind(q, t);
}

static int
replay_batch(struct store *s, uint32_t seg, const uint8_t *p, size_t len)
{
	size_t pos = 0;
	while (pos < len) {
		if (len - pos < BATCH_SUB_HEAD)
			return -1;
		size_t n = le_get32(p + pos);
		uint8_t type = p[pos + 4];
		if (n > len - pos - BATCH_SUB_HEAD || type == REC_BATCH)
			return -1;
		if (replay_record(seg, type, p + pos + BATCH_SUB_HEAD, n, s) != 0)
			return -1;
		pos += BATCH_SUB_HEAD + n;
	}
	return 0;
}

static int
replay_record(uint32_t seg, uint8_t type, const uint8_t *p, size_t len, void *arg)
{
	struct store *s = arg;
	struct msg **found;
	switch (type) {
	case REC_MSG:
		return replay_msg(s, seg, p, len);
	case REC_DELIVERED:
	case REC_CONSUMED:
		if (len != 8)
			return -1;
		/* Not found: its MSG was on a segment already deleted. */
		if ((found = idtab_find(&s->tab, le_get64(p))) == NULL)
			return 0;
		if (link_of(*found)->home == NULL)
			return -1; /* a scheduled message is never delivered or consumed */
		if (type == REC_DELIVERED)
			(*found)->delivered = true;
		else
			replay_forget(s, found);
		return 0;
	case REC_SCHED:
		return replay_sched(s, seg, p, len);
	case REC_UNSCHED:
		if (len != 8)
			return -1;
		if ((found = idtab_find(&s->tab, le_get64(p))) == NULL)
			return 0; /* its SCHED was on a segment already deleted */
		if (link_of(*found)->home != NULL)
			return -1;
		replay_forget(s, found);
		return 0;
	case REC_BATCH:
		return replay_batch(s, seg, p, len);
	case REC_SUB:
		return replay_sub(s, p, len);
	case REC_UNSUB: {
		struct dest *q = dests_find(s->dests, (const char *)p, len);
		if (q != NULL)
			dest_unbind(q);
		return 0;
	}
	case REC_IDS:
		if (len != 8)
			return -1;
		if (le_get64(p) > s->ids_reserved)
			s->ids_reserved = le_get64(p);
		return 0;
	default:
		return -1;
	}
}

static int
cmp_msg_id(const void *a, const void *b)
{
	uint64_t x = (*(struct msg *const *)a)->id, y = (*(struct msg *const *)b)->id;
	return x < y ? -1 : x > y;
}

/* Put all[] in id order.  A radix sort, 16 bits a pass, passes where every
 * id has the same digit skipped: a restart puts a million messages in order
 * in a few passes over an array, where qsort chased every pointer 20 times
 * (12% of a restart).  qsort if the memory is not there. */
static void
order_by_id(struct msg **all, size_t n)
{
	struct keyed {
		uint64_t id;
		struct msg *m;
	} *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b));
	size_t *count = malloc(65536 * sizeof(*count));
	if (a == NULL || b == NULL || count == NULL) {
		free(a);
		free(b);
		free(count);
		qsort(all, n, sizeof(*all), cmp_msg_id);
		return;
	}
	for (size_t i = 0; i < n; i++)
		a[i] = (struct keyed){ all[i]->id, all[i] };
	for (int shift = 0; shift < 64; shift += 16) {
		memset(count, 0, 65536 * sizeof(*count));
		for (size_t i = 0; i < n; i++)
			count[(a[i].id >> shift) & 0xffff]++;
		if (count[(a[0].id >> shift) & 0xffff] == n)
			continue;
		size_t at = 0;
		for (size_t d = 0; d < 65536; d++) {
			size_t c = count[d];
			count[d] = at;
			at += c;
		}
		for (size_t i = 0; i < n; i++)
			b[count[(a[i].id >> shift) & 0xffff]++] = a[i];
		struct keyed *t = a;
		a = b;
		b = t;
	}
	for (size_t i = 0; i < n; i++)
		all[i] = a[i].m;
	free(a);
	free(b);
	free(count);
}

/* Every message left in the table back in its queue, in id order. */
static int
requeue_recovered(struct store *s, struct store_recovered *rec, uint64_t *max_id)
{
	size_t n = 0;
	struct msg **all = malloc((s->tab.n ? s->tab.n : 1) * sizeof(*all));
	if (all == NULL)
		return -1;
	for (size_t i = 0; i < s->tab.cap; i++)
		if (s->tab.slot[i] != NULL)
			all[n++] = s->tab.slot[i];
	if (n > 1)
		order_by_id(all, n);
	for (size_t i = 0; i < n; i++) {
		struct msg *m = all[i];
		struct store_link *l = link_of(m);
		if (m->id > *max_id)
			*max_id = m->id;
		if (l->home == NULL) {
			/* Scheduled: the schedule takes it (and the reference). */
			struct store_sched_link *sl = sched_of(m);
			segment_link(s, m, l->seg, record_size(m));
			rec->scheduled++;
			if (s->scheduled == NULL || s->scheduled(s->scheduled_arg, m,
			    (const char *)sl->data + sl->state_len, sl->name_len, sl->data,
			    sl->state_len) != 0) {
				log_error("journal: scheduled message %llu for %.*s could not be scheduled "
				    "again (out of memory, or a state this eftd cannot read): dropped",
				    (unsigned long long)m->id, (int)sl->name_len,
				    (const char *)sl->data + sl->state_len);
				rec->scheduled--;
				segment_unlink(s, m);
				link_free(m);
				msg_unref(m);
			}
			continue;
		}
		dest_restore(l->home, m, m->delivered);
		segment_link(s, m, l->seg, record_size(m));
		rec->redelivered += m->delivered;
		rec->messages++;
	}
	free(all);
	free(s->tab.slot);
	s->tab = (struct idtab){ 0 };
	return 0;
}

/* ---- opening: damage that --recover goes past ---- */

/* The journal's replay passed the checkpoint: how many of the messages
 * live then are back. */
static void
replay_mark(uint64_t mark, void *arg)
{
	struct store *s = arg;
	s->marked = true;
	s->mark = mark;
	s->back_at_mark = s->tab.n;
}

/* Name the file in the open's list of damaged files (once). */
static void
damage_file(struct damage_seen *ds, const char *path)
{
	const char *name = strrchr(path, '/');
	name = name != NULL ? name + 1 : path;
	if (strstr(ds->files, name) != NULL)
		return;
	size_t n = strlen(ds->files);
	if (n + strlen(name) + 3 >= sizeof(ds->files)) {
		if (n + 5 < sizeof(ds->files) && strstr(ds->files, "...") == NULL)
			strcat(ds->files, ", ...");
		return;
	}
	snprintf(ds->files + n, sizeof(ds->files) - n, "%s%s", n ? ", " : "", name);
}

static void
replay_damage(const struct journal_damage *d, void *arg)
{
	struct store *s = arg;
	char bytes[64] = "";
	if (d->bytes_known && d->kind != JOURNAL_DAMAGE_CHECKPOINT)
		snprintf(bytes, sizeof(bytes), " (%llu bytes)", (unsigned long long)d->bytes);
	switch (d->kind) {
	case JOURNAL_DAMAGE_MISSING:
		log_warn("journal: --recover: %s: going on without the messages in it%s", d->what,
		    d->bytes_known ? bytes : " (its size is not known)");
		break;
	case JOURNAL_DAMAGE_HEADER:
		log_warn("journal: --recover: %s: segment skipped%s; eftd leaves the file alone: move "
		    "%s out of the data-dir", d->what, bytes, d->path);
		break;
	case JOURNAL_DAMAGE_SHORT:
		log_warn("journal: --recover: %s: going on without the %llu bytes cut off", d->what,
		    (unsigned long long)d->bytes);
		break;
	case JOURNAL_DAMAGE_RECORDS:
		log_warn("journal: --recover: %s: %llu bytes skipped (eftd deletes the file once "
		    "nothing in it is live: copy it out of the data-dir to keep it)", d->what,
		    (unsigned long long)d->bytes);
		break;
	case JOURNAL_DAMAGE_CHECKPOINT:
		log_warn("journal: --recover: %s: going on without it (a new one is written); what "
		    "is missing from the journal cannot be checked this time", d->what);
		return;
	}
	struct damage_seen *ds = &s->dmg;
	ds->bytes += d->bytes;
	ds->bytes_unknown |= !d->bytes_known;
	ds->after_mark |= !d->before_mark;
	damage_file(ds, d->path);
	if (d->stays && d->seg > s->damaged_through)
		s->damaged_through = d->seg;
}

/* After --recover: how many messages did not come back, and where. */
static void
log_losses(struct store *s, struct store_recovered *rec, const char *dir)
{
	const struct damage_seen *ds = &s->dmg;
	if (ds->files[0] == '\0')
		return; /* the checkpoint alone */
	char bytes[64];
	snprintf(bytes, sizeof(bytes), "%s%llu bytes", ds->bytes_unknown ? "at least " : "",
	    (unsigned long long)ds->bytes);
	if (rec->journal.checkpoint != JOURNAL_CHECKPOINT_READ || !s->marked) {
		log_warn("journal: --recover lost %s in %s; how many messages were in them cannot be "
		    "known (no checkpoint to count against)", bytes, ds->files);
	} else {
		rec->lost = s->mark > s->back_at_mark ? s->mark - s->back_at_mark : 0;
		log_warn("journal: --recover lost %llu message%s (%s) in %s: %llu were stored at the "
		    "last checkpoint, %llu of them are back%s", (unsigned long long)rec->lost,
		    rec->lost == 1 ? "" : "s", bytes, ds->files, (unsigned long long)s->mark,
		    (unsigned long long)s->back_at_mark, ds->after_mark ? "; the damage after the "
		    "checkpoint may have held more, which cannot be counted" : "");
	}
	if (s->damaged_through != 0)
		log_warn("journal %s: until the damaged segments are gone (their live messages are "
		    "written again at the end, then they are deleted), each start needs --recover",
		    dir);
}

/* Like the memory default: 80% of what the disk has free, on top of what
 * the journal already holds. */
static uint64_t
default_max_disk(const char *dir, uint64_t used)
{
	struct statvfs sv;
	if (statvfs(dir, &sv) != 0)
		return 0;
	return used + (uint64_t)sv.f_bavail * sv.f_frsize / 10 * 8;
}

struct store *
store_open(const struct store_options *opt, struct dests *dests, struct msg_pool *pool,
    uint64_t *next_msg_id, struct store_recovered *rec, char *err, size_t errlen)
{
	struct store *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memset(rec, 0, sizeof(*rec));
	s->segment_size = opt->segment_size;
	s->dests = dests;
	s->pool = pool;
	s->scheduled = opt->scheduled;
	s->scheduled_arg = opt->scheduled_arg;
	s->alarm_log.interval_ms = DISK_LOG_MS;
	const struct journal_reader reader = { replay_record, replay_damage, replay_mark, s };
	s->j = journal_open(opt->dir, opt->fsync, opt->recover, opt->segment_size, &reader,
	    &rec->journal, err, errlen);
	if (s->j == NULL)
		goto fail;
	if (rec->journal.foreign > 0)
		log_warn("journal: %s/journal-%08u.log%s, below the journal's first segment, %s no "
		    "eft journal segment (an earlier --recover skipped it): eftd leaves it alone; move "
		    "it out of the data-dir", opt->dir, rec->journal.foreign_seg,
		    rec->journal.foreign > 1 ? " and others" : "", rec->journal.foreign > 1 ?
		    "are" : "is");
	if (rec->journal.checkpoint == JOURNAL_CHECKPOINT_NONE && rec->journal.segments > 0)
		log_info("journal %s: no %s yet (it is written from now on): this start cannot tell "
		    "a missing oldest segment, or a newest one cut short, from a clean stop",
		    opt->dir, JOURNAL_CHECKPOINT_FILE);
	uint32_t cur = journal_segment(s->j);
	s->first = rec->journal.first_segment ? rec->journal.first_segment : cur;
	uint64_t max_id = 0;
	if (segments_extend(s, cur) != 0 || requeue_recovered(s, rec, &max_id) != 0) {
		snprintf(err, errlen, "data-dir %s: out of memory putting messages back", opt->dir);
		goto fail;
	}
	rec->checkpoint_live = s->mark;
	rec->back_at_checkpoint = s->back_at_mark;
	if (rec->journal.damaged > 0)
		log_losses(s, rec, opt->dir);
	dests_prune(dests);
	size_t nqueues;
	dests_queued(dests, &nqueues);
	rec->queues = nqueues;
	uint64_t next = s->ids_reserved > max_id + 1 ? s->ids_reserved : max_id + 1;
	if (next < *next_msg_id)
		next = *next_msg_id;
	/* On disk before any id is used. */
	if (segment_preamble(s, next) != 0 || journal_commit(s->j, 0) != 0 ||
	    journal_sync(s->j) != 0) {
		snprintf(err, errlen, "data-dir %s: %s", opt->dir, journal_error(s->j));
		goto fail;
	}
	s->ids_written_seg = s->ids_seg;
	s->gathering = false;
	s->next_id_seen = next;
	*next_msg_id = next;
	drop_dead_segments(s);
	/* What this open found (and accepted, under --recover) is the
	 * journal from now on. */
	if (journal_checkpoint(s->j, 0, s->live, true) != 0) {
		snprintf(err, errlen, "data-dir %s: %s", opt->dir, journal_error(s->j));
		goto fail;
	}
	s->max_disk = opt->max_disk ? opt->max_disk : default_max_disk(opt->dir, journal_bytes(s->j));
	return s;
fail:
	if (s->tab.slot != NULL) {
		for (size_t i = 0; i < s->tab.cap; i++)
			if (s->tab.slot[i] != NULL) {
				link_free(s->tab.slot[i]);
				msg_unref(s->tab.slot[i]);
			}
		free(s->tab.slot);
	}
	journal_close(s->j);
	free_links(s);
	free(s->segs);
	free(s);
	return NULL;
}

void
store_close(struct store *s)
{
	if (s == NULL)
		return;
	/* A clean stop: everything is synced, and the checkpoint says so. */
	if (!s->batching && journal_commit(s->j, s->now_ms) == 0 && journal_sync(s->j) == 0)
		checkpoint(s, s->now_ms, true);
	journal_close(s->j);
	free_links(s);
	free(s->segs);
	free(s->batch);
	free(s);
}
