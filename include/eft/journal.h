/* journal.h - an append-only log of records in segment files, with a CRC on
 * every record and group commit: what eftd's durable messages are written
 * to (the meaning of the records is the store's, not the journal's).
 *
 * A data directory holds a LOCK file (one eftd per directory) and segments
 * named journal-NNNNNNNN.log, numbered from 1, each starting with a 16-byte
 * header.  A record is
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
 * At open, every segment is read in order and each record handed to a
 * callback.  A partial record at the very end (a crash during a write) is
 * cut off and reported; anything else that is not a valid record is an
 * error naming the file and offset, unless `recover` is set, in which case
 * bad records are skipped (the next valid record is searched for) and
 * counted. */
#ifndef EFT_JOURNAL_H
#define EFT_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JOURNAL_RECORD_HEADER 12
#define JOURNAL_SEGMENT_HEADER 16
#define JOURNAL_RECORD_MAX (1u << 30) /* payload bytes in one record */

enum journal_fsync { JOURNAL_FSYNC_NO, JOURNAL_FSYNC_EVERYSEC, JOURNAL_FSYNC_ALWAYS };

struct journal;

/* What opening found. */
struct journal_open_stats {
	uint64_t records;         /* handed to the callback */
	uint64_t bytes;           /* in all segments */
	uint32_t segments;
	uint32_t first_segment;   /* the oldest found (0: none) */
	uint64_t torn_bytes;      /* cut off the end of the last segment */
	uint64_t skipped;         /* bad records passed over (recover only) */
};

/* Called with each record in order, with the segment it is in; its payload
 * is valid during the call.  A non-zero return stops the open with that
 * error. */
typedef int (*journal_record_cb)(uint32_t seg, uint8_t type, const uint8_t *payload, size_t len,
    void *arg);

/* Create dir if needed, lock it, read every record through cb, then get
 * ready to append (to a new segment).  NULL with one line in err: the
 * directory cannot be made or read, another process holds the lock, a
 * record is damaged (file and offset), cb failed. */
struct journal *journal_open(const char *dir, enum journal_fsync policy, bool recover,
    uint64_t segment_max, journal_record_cb cb, void *arg, struct journal_open_stats *stats,
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

/* How long fdatasync took: for the log and for metrics. */
struct journal_sync_stats {
	uint64_t count;
	uint64_t total_us;
	uint64_t max_us;
	uint64_t last_us;
};
const struct journal_sync_stats *journal_sync_stats(const struct journal *j);

const char *journal_error(const struct journal *j);
/* The segment the next record goes to, and the bytes written in all. */
uint32_t journal_segment(const struct journal *j);
uint64_t journal_bytes(const struct journal *j);

/* Delete segment seg, which holds nothing live any more (the store decides
 * that, and deletes only from the oldest on, so that a later record never
 * outlives the one it refers to).  -1 with the reason in journal_error. */
int journal_drop_segment(struct journal *j, uint32_t seg);

/* Written and not yet synced (everysec's timer looks). */
bool journal_dirty(const struct journal *j);

/* Commit and sync what is gathered (best effort), unlock, free. */
void journal_close(struct journal *j);

#endif
