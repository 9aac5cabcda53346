/* journal.h - an append-only log of records in segment files, with a CRC on
 * every record and group commit: what eftd's durable messages are written
 * to (the meaning of the records is the store's, not the journal's).
 *
 * A data directory holds a LOCK file (one eftd per directory), a CHECKPOINT
 * (below) and segments named journal-NNNNNNNN.log, numbered from 1.  A
 * segment starts with a 24-byte header:
 *
 *     8 bytes "EFTJRNL1", u32 version (2), u32 the segment's number,
 *     u64 the size of the segment before it when this one began (0: none)
 *
 * (version 1, before the checkpoint, had the first 16 bytes only; such
 * segments are still read).  A record is
 *
 *     u32 length of the payload (little-endian)
 *     u32 CRC-32C of the 8 bytes around it (length, type, 3 zero bytes)
 *         and of the payload
 *     u8  type, 3 bytes 0
 *     payload
 *
 * Records are gathered in memory by journal_append and written by
 * journal_commit, once per loop turn: one write for every record of the
 * turn, and one fdatasync when the policy asks (group commit).  A failed
 * write is cut back off the file, so that the file always ends on a whole
 * record; the records stay gathered to be tried again.
 *
 * The CHECKPOINT says what the journal knew at a moment: the oldest segment
 * that must exist, how far it was on disk (fdatasync done), and how far it
 * was written together with a number of the caller's for that point (the
 * store's live messages).  It is two 64-byte copies, written in turn with
 * pwrite and fdatasync, so that a crash while one is written leaves the
 * other; each copy is
 *
 *     8 bytes "EFTCKPT1", u32 version (1), u32 first segment,
 *     u64 sequence (the higher valid copy counts),
 *     u32 synced segment, u32 mark segment, u64 synced offset,
 *     u64 mark offset, u64 mark, u32 CRC-32C of the 56 bytes before it, u32 0
 *
 * It is written at most once a second (journal_checkpoint, from the loop's
 * commit after a sync, never per record), and segments the caller no
 * longer needs are deleted only after a checkpoint no longer lists them:
 * a crash in between leaves files below the checkpoint's first segment,
 * which are known to hold nothing live and are deleted at the next open.
 * A file whose header is not its segment's is never deleted.
 *
 * At open, every segment is read in order and each record handed to a
 * callback.  What is damage and what is a crash:
 * - a record cut short at the very end of the newest segment, past the
 *   checkpoint's synced offset, is a crash during a write: it is cut off
 *   and reported (torn_bytes);
 * - a segment missing between the checkpoint's first segment (or the
 *   oldest there) and the newest one the checkpoint or the files know of;
 *   a segment shorter than the checkpoint's synced offset or than the next
 *   segment's header says; a segment header that is not one; bytes that are
 *   no valid record; a CHECKPOINT with no valid copy: all damage.  The open
 *   fails with one line naming the file and what to do, unless `recover`
 *   is set: then damaged segments and bytes are skipped and each place is
 *   reported to the damage callback.
 * What cannot be told: a segment begun after the last checkpoint, deleted
 * whole while it was the newest; a cut of the newest segment that stays
 * past the last checkpoint (the last second of writes) looks like a crash. */
#ifndef EFT_JOURNAL_H
#define EFT_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JOURNAL_RECORD_HEADER 12
#define JOURNAL_SEGMENT_HEADER 24 /* version 2; version 1's was 16 */
#define JOURNAL_RECORD_MAX (1u << 30) /* payload bytes in one record */
#define JOURNAL_CHECKPOINT_FILE "CHECKPOINT"
#define JOURNAL_CHECKPOINT_MS 1000 /* at most one checkpoint this often */

enum journal_fsync { JOURNAL_FSYNC_NO, JOURNAL_FSYNC_EVERYSEC, JOURNAL_FSYNC_ALWAYS };

struct journal;

/* A checkpoint (see above). */
struct journal_checkpoint {
	uint64_t seq;
	uint32_t first;          /* the oldest segment that must exist */
	uint32_t synced_seg;     /* on disk up to here */
	uint64_t synced_off;
	uint32_t mark_seg;       /* written up to here when the mark was taken */
	uint64_t mark_off;
	uint64_t mark;           /* the caller's number for that point */
};

/* Read dir's CHECKPOINT into *ck: 1 read, 0 there is none, -1 it is
 * damaged or cannot be read (the reason in err). */
int journal_checkpoint_read(const char *dir, struct journal_checkpoint *ck, char *err,
    size_t errlen);

enum journal_checkpoint_state {
	JOURNAL_CHECKPOINT_NONE,     /* no CHECKPOINT: nothing to check against */
	JOURNAL_CHECKPOINT_READ,
	JOURNAL_CHECKPOINT_DAMAGED,  /* recover only: gone on without it */
};

/* What opening found. */
struct journal_open_stats {
	uint64_t records;         /* handed to the callback */
	uint64_t bytes;           /* in all segments */
	uint32_t segments;
	uint32_t first_segment;   /* the oldest read (0: none) */
	uint64_t torn_bytes;      /* cut off the end of the last segment */
	uint32_t damaged;         /* places skipped as damaged (recover only) */
	uint64_t damaged_bytes;   /* bytes in them, as far as known */
	uint32_t foreign;         /* files below the first segment that are no segment
	                             (skipped by an earlier --recover): left alone */
	uint32_t foreign_seg;     /* the first of them */
	enum journal_checkpoint_state checkpoint;
	struct journal_checkpoint ck; /* when READ */
};

/* Damage that recover skipped. */
enum journal_damage_kind {
	JOURNAL_DAMAGE_MISSING,    /* a segment of the sequence is not there */
	JOURNAL_DAMAGE_HEADER,     /* not a segment header: the whole segment skipped */
	JOURNAL_DAMAGE_SHORT,      /* shorter than it was known to be on disk */
	JOURNAL_DAMAGE_RECORDS,    /* bytes that are no valid record, skipped */
	JOURNAL_DAMAGE_CHECKPOINT, /* the CHECKPOINT itself: gone on without it */
};

struct journal_damage {
	enum journal_damage_kind kind;
	uint32_t seg;             /* the segment (0 for the checkpoint) */
	uint64_t offset;          /* where the damage begins in it */
	uint64_t bytes;           /* lost there: skipped, missing or cut off */
	bool bytes_known;         /* false: how many cannot be known (a missing file) */
	bool before_mark;         /* it lies before the checkpoint's mark */
	bool stays;               /* found again at each open until the segment is deleted */
	const char *path;         /* the file */
	const char *what;         /* one line saying what is wrong, naming the file */
};

/* What journal_open calls.  record: each record in order, with the
 * segment it is in; its payload is valid during the call, and a non-zero
 * return stops the open with that error.  damage (recover only, may be
 * NULL): each damaged place, in the order of the files.  mark (may be
 * NULL): once, when everything before the checkpoint's mark position has
 * been read (or skipped), with the checkpoint's mark; not called without a
 * checkpoint. */
typedef int (*journal_record_cb)(uint32_t seg, uint8_t type, const uint8_t *payload, size_t len,
    void *arg);
struct journal_reader {
	journal_record_cb record;
	void (*damage)(const struct journal_damage *d, void *arg);
	void (*mark)(uint64_t mark, void *arg);
	void *arg;
};

/* Create dir if needed, lock it, read every record through rd, then get
 * ready to append (to a new segment).  Files below the checkpoint's first
 * segment are deleted unread.  NULL with one line in err: the directory
 * cannot be made or read, another process holds the lock, damage (the
 * file, what is wrong, and a hint to --recover), the callback failed. */
struct journal *journal_open(const char *dir, enum journal_fsync policy, bool recover,
    uint64_t segment_max, const struct journal_reader *rd, struct journal_open_stats *stats,
    char *err, size_t errlen);

/* Gather one record, its payload given in n parts; -1 if out of memory or
 * too large (nothing gathered). */
struct journal_part {
	const void *data;
	size_t len;
};
int journal_append(struct journal *j, uint8_t type, const struct journal_part *parts, int n);

/* Bytes gathered and not yet written. */
size_t journal_pending(const struct journal *j);

/* Write what was gathered, then fdatasync if the policy is always, or if
 * it is everysec and a second has passed since the last (now_ms is the
 * caller's clock).  0 when all of it is written (and synced as the policy
 * says); -1 with errno (EIO, ENOSPC...) and the reason in journal_error:
 * the file is cut back to its last whole record and the records stay
 * gathered. */
int journal_commit(struct journal *j, uint64_t now_ms);

/* Everything written so far is on disk (everysec's timer; shutdown). */
int journal_sync(struct journal *j);

/* Write the CHECKPOINT if a second (JOURNAL_CHECKPOINT_MS) has passed since
 * the last one and something it holds moved (what is synced, the first
 * segment), or now if force: mark is the caller's number for everything
 * written so far.  Then delete the segments released.  0 when done or not
 * due; -1 with the reason in journal_error (nothing is deleted). */
int journal_checkpoint(struct journal *j, uint64_t now_ms, uint64_t mark, bool force);
/* Is a checkpoint waiting for its second (for the caller's timer)? */
bool journal_checkpoint_wanted(const struct journal *j);

/* How long fdatasync took: for the log and for metrics. */
struct journal_sync_stats {
	uint64_t count;
	uint64_t total_us;
	uint64_t max_us;
	uint64_t last_us;
};
const struct journal_sync_stats *journal_sync_stats(const struct journal *j);

const char *journal_error(const struct journal *j);
/* The segment the next record goes to, and the bytes in all the files. */
uint32_t journal_segment(const struct journal *j);
uint64_t journal_bytes(const struct journal *j);

/* The segments below first hold nothing live any more (the store decides
 * that, and releases only from the oldest on, so that a later record never
 * outlives the one it refers to): they are deleted after the next
 * checkpoint records first.  first must not pass the current segment. */
void journal_release(struct journal *j, uint32_t first);

/* Written and not yet synced (everysec's timer looks). */
bool journal_dirty(const struct journal *j);

/* Commit and sync what is gathered (best effort), unlock, free. */
void journal_close(struct journal *j);

#endif
