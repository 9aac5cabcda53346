/* journal.c - the append-only record log (see journal.h).
 *
 * Telling damage from a crash.  A crash (kill -9, a power cut) can only
 * lose or tear what was written after the last fdatasync, and only at the
 * end of the newest segment.  So the journal writes down, at most once a
 * second, how far it was synced (the CHECKPOINT), and each new segment's
 * header records how long the one before it was.  At open, a file missing
 * from the numbered sequence (or below the checkpoint's first segment, or
 * above its synced one), a segment shorter than either says, a header that
 * is not one, or a bad record anywhere but the very end is damage: the open
 * is refused, naming the file, unless recover says to go on without it.
 * Segments are deleted only after a checkpoint that no longer counts them
 * is on disk, so that a crash in between never looks like a missing oldest
 * segment: files below the checkpoint's first one are leftovers, deleted
 * unread. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "eft/crc32c.h"
#include "eft/journal.h"
#include "eft/le.h"

/* everysec: ask for writeback each time this much more is written. */
#define WRITEBACK_STEP (8u << 20)
#define SEGMENT_HEADER_V1 16
#define CHECKPOINT_COPY 64

static const char segment_magic[8] = { 'E', 'F', 'T', 'J', 'R', 'N', 'L', '1' };
static const char checkpoint_magic[8] = { 'E', 'F', 'T', 'C', 'K', 'P', 'T', '1' };

struct journal {
	char dir[PATH_MAX];
	int lock_fd;
	int fd;                  /* the segment being appended to */
	uint32_t seg;            /* its number */
	uint64_t seg_size;       /* bytes written to it */
	uint64_t segment_max;
	uint64_t total;          /* bytes in all segments */
	enum journal_fsync policy;
	uint8_t *buf;            /* records gathered, not written */
	size_t len, cap;
	uint64_t last_sync_ms;
	bool dirty;              /* written, not synced */
	struct journal_sync_stats sync_stats;
	uint64_t writeback_from; /* everysec: writeback asked for up to here */
	/* the checkpoint */
	int ck_fd;               /* CHECKPOINT, open to write its copies; -1 until made */
	struct journal_checkpoint ck; /* the last one written (or read) */
	uint64_t ck_ms;          /* when it was written */
	uint32_t synced_seg;     /* on disk (fdatasync done) up to here */
	uint64_t synced_off;
	uint32_t first;          /* the oldest segment still needed (released below it) */
	uint32_t synced_first;   /* first as it was when the last sync began */
	uint32_t oldest_file;    /* the oldest segment file that may still be there */
	char error[PATH_MAX + 128];
};

/* The CRC of a record: its length and type bytes, then its payload. */
static uint32_t
record_crc(const uint8_t *hdr, const uint8_t *payload, size_t len)
{
	uint8_t around[8];
	memcpy(around, hdr, 4);
	memcpy(around + 4, hdr + 8, 4);
	return crc32c(crc32c(0, around, 8), payload, len);
}

/* Is there a whole, valid record at p (n bytes available)?  Its length in
 * *total if so. */
static bool
record_valid(const uint8_t *p, size_t n, size_t *total)
{
	if (n < JOURNAL_RECORD_HEADER)
		return false;
	uint32_t len = le_get32(p);
	if (len > JOURNAL_RECORD_MAX || len > n - JOURNAL_RECORD_HEADER ||
	    p[9] != 0 || p[10] != 0 || p[11] != 0)
		return false;
	if (record_crc(p, p + JOURNAL_RECORD_HEADER, len) != le_get32(p + 4))
		return false;
	*total = JOURNAL_RECORD_HEADER + len;
	return true;
}

static void
segment_path(const char *dir, uint32_t seg, char *out, size_t len)
{
	snprintf(out, len, "%s/journal-%08u.log", dir, seg);
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* The segment numbers in dir, ascending; *n of them.  -1 on error. */
static int
list_segments(const char *dir, uint32_t **out, size_t *n, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	if (d == NULL) {
		snprintf(err, errlen, "data-dir %s: %s", dir, strerror(errno));
		return -1;
	}
	uint32_t *segs = NULL;
	size_t count = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		unsigned num;
		char tail[8];
		if (sscanf(e->d_name, "journal-%8u.%7s", &num, tail) != 2 || strcmp(tail, "log") != 0 ||
		    strlen(e->d_name) != strlen("journal-00000000.log") || num == 0)
			continue;
		if (count == cap) {
			cap = cap ? cap * 2 : 16;
			uint32_t *s = realloc(segs, cap * sizeof(*s));
			if (s == NULL) {
				free(segs);
				closedir(d);
				snprintf(err, errlen, "data-dir %s: out of memory", dir);
				return -1;
			}
			segs = s;
		}
		segs[count++] = num;
	}
	closedir(d);
	if (count > 1)
		qsort(segs, count, sizeof(*segs), cmp_u32);
	*out = segs;
	*n = count;
	return 0;
}

/* Map a segment to read it: no copy out of the page cache, and no fresh
 * buffer for the kernel to zero (a restart reads every segment once). */
static int
map_file(const char *path, uint8_t **data, size_t *size, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*size = (size_t)st.st_size;
	*data = NULL;
	if (*size > 0) {
		void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		(void)madvise(p, *size, MADV_SEQUENTIAL);
		*data = p;
	}
	close(fd);
	return 0;
}

static int
sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	close(fd);
	return rc;
}

/* ---- the checkpoint ---- */

static void
checkpoint_encode(const struct journal_checkpoint *ck, uint8_t *p)
{
	memset(p, 0, CHECKPOINT_COPY);
	memcpy(p, checkpoint_magic, 8);
	le_put32(p + 8, 1);
	le_put32(p + 12, ck->first);
	le_put64(p + 16, ck->seq);
	le_put32(p + 24, ck->synced_seg);
	le_put32(p + 28, ck->mark_seg);
	le_put64(p + 32, ck->synced_off);
	le_put64(p + 40, ck->mark_off);
	le_put64(p + 48, ck->mark);
	le_put32(p + 56, crc32c(0, p, 56));
}

static bool
checkpoint_decode(const uint8_t *p, struct journal_checkpoint *ck)
{
	if (memcmp(p, checkpoint_magic, 8) != 0 || le_get32(p + 8) != 1 ||
	    le_get32(p + 56) != crc32c(0, p, 56) || le_get32(p + 12) == 0)
		return false;
	ck->first = le_get32(p + 12);
	ck->seq = le_get64(p + 16);
	ck->synced_seg = le_get32(p + 24);
	ck->mark_seg = le_get32(p + 28);
	ck->synced_off = le_get64(p + 32);
	ck->mark_off = le_get64(p + 40);
	ck->mark = le_get64(p + 48);
	return true;
}

int
journal_checkpoint_read(const char *dir, struct journal_checkpoint *ck, char *err, size_t errlen)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/" JOURNAL_CHECKPOINT_FILE, dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	uint8_t buf[2 * CHECKPOINT_COPY + 1];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	int e = errno;
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -1;
	}
	if (n != 2 * CHECKPOINT_COPY) {
		snprintf(err, errlen, "%s: damaged (%zd bytes, not %d)", path, n, 2 * CHECKPOINT_COPY);
		return -1;
	}
	struct journal_checkpoint a, b;
	bool va = checkpoint_decode(buf, &a), vb = checkpoint_decode(buf + CHECKPOINT_COPY, &b);
	if (!va && !vb) {
		snprintf(err, errlen, "%s: damaged (neither of its two copies is valid)", path);
		return -1;
	}
	*ck = va && (!vb || a.seq >= b.seq) ? a : b;
	return 1;
}

/* Write ck: the first time as a new file (both copies, renamed into
 * place), then into the copy its sequence number picks, and fdatasync. */
static int
checkpoint_write(struct journal *j, const struct journal_checkpoint *ck)
{
	char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
	uint8_t copy[2 * CHECKPOINT_COPY];
	snprintf(path, sizeof(path), "%s/" JOURNAL_CHECKPOINT_FILE, j->dir);
	checkpoint_encode(ck, copy);
	if (j->ck_fd >= 0) {
		if (pwrite(j->ck_fd, copy, CHECKPOINT_COPY, (off_t)(ck->seq % 2) * CHECKPOINT_COPY) !=
		    CHECKPOINT_COPY || fdatasync(j->ck_fd) != 0)
			goto fail;
		return 0;
	}
	memcpy(copy + CHECKPOINT_COPY, copy, CHECKPOINT_COPY);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	if (write(fd, copy, sizeof(copy)) != (ssize_t)sizeof(copy) || fdatasync(fd) != 0 ||
	    rename(tmp, path) != 0 || sync_dir(j->dir) != 0) {
		int e = errno ? errno : EIO;
		close(fd);
		unlink(tmp);
		errno = e;
		goto fail;
	}
	j->ck_fd = fd; /* the same file, renamed */
	return 0;
fail:
	snprintf(j->error, sizeof(j->error), "%s: %s", path, strerror(errno ? errno : EIO));
	return -1;
}

/* Does the file at path begin with segment num's header?  A file that
 * does not (damage --recover skipped) is never deleted: it is the
 * operator's to look at. */
static bool
segment_is_ours(const char *path, uint32_t num)
{
	uint8_t h[SEGMENT_HEADER_V1];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ours = pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
	    memcmp(h, segment_magic, 8) == 0 && le_get32(h + 12) == num;
	close(fd);
	return ours;
}

/* Delete the segment files the checkpoint no longer counts. */
static int
drop_released(struct journal *j)
{
	for (; j->oldest_file < j->ck.first; j->oldest_file++) {
		char path[PATH_MAX + 32];
		struct stat st;
		segment_path(j->dir, j->oldest_file, path, sizeof(path));
		if (stat(path, &st) != 0) {
			if (errno == ENOENT)
				continue; /* gone already (a torn segment that never got its header) */
			goto fail;
		}
		if (!segment_is_ours(path, j->oldest_file))
			continue;
		if (unlink(path) != 0)
			goto fail;
		j->total -= (uint64_t)st.st_size < j->total ? (uint64_t)st.st_size : j->total;
		continue;
fail:
		snprintf(j->error, sizeof(j->error), "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* The first segment a checkpoint may name.  A release counts only once
 * what was written before it is synced: the copies compaction wrote of the
 * live messages it moved, and the acknowledgements that emptied the
 * segments.  Else a power cut after the checkpoint could take both the
 * copies (not synced) and the originals (their segments deleted). */
static uint32_t
checkpoint_first(const struct journal *j)
{
	return j->dirty ? j->synced_first : j->first;
}

/* Under fsync = no nothing else syncs until a new segment begins: a
 * release waiting for a sync gets one with the next checkpoint (at most
 * once a second), or the files it frees would stay, and max-disk with them
 * (producers paused for room that never comes). */
static bool
release_needs_sync(const struct journal *j)
{
	return j->policy == JOURNAL_FSYNC_NO && j->first != checkpoint_first(j);
}

bool
journal_checkpoint_wanted(const struct journal *j)
{
	return checkpoint_first(j) != j->ck.first || release_needs_sync(j) ||
	    j->synced_seg != j->ck.synced_seg || j->synced_off != j->ck.synced_off ||
	    j->oldest_file < j->ck.first;
}

int
journal_checkpoint(struct journal *j, uint64_t now_ms, uint64_t mark, bool force)
{
	if (!force && (now_ms - j->ck_ms < JOURNAL_CHECKPOINT_MS || !journal_checkpoint_wanted(j)))
		return 0;
	if (release_needs_sync(j) && journal_sync(j) != 0)
		return -1;
	if (checkpoint_first(j) != j->ck.first || j->synced_seg != j->ck.synced_seg ||
	    j->synced_off != j->ck.synced_off || j->ck_fd < 0 || force) {
		struct journal_checkpoint ck = {
			.seq = j->ck.seq + 1,
			.first = checkpoint_first(j),
			.synced_seg = j->synced_seg,
			.synced_off = j->synced_off,
			.mark_seg = j->seg,
			.mark_off = j->seg_size,
			.mark = mark,
		};
		if (checkpoint_write(j, &ck) != 0)
			return -1;
		j->ck = ck;
		j->ck_ms = now_ms;
	}
	return drop_released(j);
}

void
journal_release(struct journal *j, uint32_t first)
{
	if (first > j->first && first <= j->seg)
		j->first = first;
}

/* ---- opening: reading back, telling damage from a crash ---- */

/* What a segment file looks like before it is read. */
struct seg_info {
	uint32_t num;
	uint64_t size;
	size_t hdr;              /* its header's length (16, 24); 0: not a header */
	uint64_t prev_size;      /* version 2: the size of num - 1 when num began */
	bool short_header;       /* fewer bytes than a header */
	uint64_t known;          /* bytes it had on disk at least (0: not known) */
	bool known_by_checkpoint; /* ... says the checkpoint, else the next header */
	size_t cut;              /* where its torn end is to be cut (SIZE_MAX: nowhere) */
};

static int
probe_segment(const char *dir, struct seg_info *si, char *err, size_t errlen)
{
	char path[PATH_MAX + 32];
	segment_path(dir, si->num, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t h[JOURNAL_SEGMENT_HEADER];
	ssize_t n = -1;
	if (fd >= 0 && fstat(fd, &st) == 0)
		n = pread(fd, h, sizeof(h), 0);
	if (n < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	si->size = (uint64_t)st.st_size;
	bool ours = n >= SEGMENT_HEADER_V1 && memcmp(h, segment_magic, 8) == 0 &&
	    le_get32(h + 12) == si->num;
	if (ours && le_get32(h + 8) == 1) {
		si->hdr = SEGMENT_HEADER_V1;
	} else if (ours && le_get32(h + 8) == 2 && n == JOURNAL_SEGMENT_HEADER) {
		si->hdr = JOURNAL_SEGMENT_HEADER;
		si->prev_size = le_get64(h + 16);
	} else if (si->size < JOURNAL_SEGMENT_HEADER) {
		si->short_header = true;
	}
	return 0;
}

/* One open's state. */
struct opening {
	struct journal *j;
	const struct journal_reader *rd;
	bool recover;
	bool have_ck;
	struct journal_checkpoint ck;
	bool marked;             /* rd->mark called */
	struct journal_open_stats *st;
	char *err;
	size_t errlen;
};

/* Is (seg, off) at or past what the checkpoint knew was synced? */
static bool
past_synced(const struct opening *o, uint32_t seg, uint64_t off)
{
	return !o->have_ck || seg > o->ck.synced_seg ||
	    (seg == o->ck.synced_seg && off >= o->ck.synced_off);
}

static bool
before_mark(const struct opening *o, uint32_t seg, uint64_t off)
{
	return o->have_ck && (seg < o->ck.mark_seg || (seg == o->ck.mark_seg && off < o->ck.mark_off));
}

/* Everything before the checkpoint's mark is read: tell the caller. */
static void
mark_reached(struct opening *o)
{
	if (o->marked || !o->have_ck)
		return;
	o->marked = true;
	if (o->rd->mark != NULL)
		o->rd->mark(o->ck.mark, o->rd->arg);
}

/* Damage d: without recover, the open's error (what it is, and hint);
 * with it, counted and handed on.  -1 to stop. */
static int
damage(struct opening *o, struct journal_damage *d, const char *hint)
{
	if (!o->recover) {
		snprintf(o->err, o->errlen, "%s (%s)", d->what, hint);
		return -1;
	}
	o->st->damaged++;
	o->st->damaged_bytes += d->bytes;
	if (o->rd->damage != NULL)
		o->rd->damage(d, o->rd->arg);
	return 0;
}

/* Replay one segment.  last: the newest, whose end may be torn. */
static int
replay_segment(struct opening *o, struct seg_info *si, bool last)
{
	struct journal *j = o->j;
	char path[PATH_MAX + 32], what[PATH_MAX + 200];
	segment_path(j->dir, si->num, path, sizeof(path));
	uint8_t *data;
	size_t size;
	if (map_file(path, &data, &size, o->err, o->errlen) != 0)
		return -1;
	size_t mapped = size;
	int rc = -1;
	size_t pos = si->hdr, cut = SIZE_MAX, short_from = size;
	bool is_short = si->known > size;
	while (pos < size) {
		size_t n;
		if (!o->marked && si->num == o->ck.mark_seg && pos >= o->ck.mark_off)
			mark_reached(o);
		if (record_valid(data + pos, size - pos, &n)) {
			if (o->rd->record != NULL && o->rd->record(si->num, data[pos + 8],
			    data + pos + JOURNAL_RECORD_HEADER, n - JOURNAL_RECORD_HEADER, o->rd->arg) != 0) {
				snprintf(o->err, o->errlen, "%s: offset %zu: record refused by the store",
				    path, pos);
				goto out;
			}
			o->st->records++;
			pos += n;
			continue;
		}
		/* Not a valid record here.  A torn tail is a record that runs
		 * past the end of the newest segment, past what was synced, with
		 * nothing valid after its start; in a segment cut short it is
		 * part of the cut; anything else is damage. */
		size_t next = pos + 1;
		while (next < size && !record_valid(data + next, size - next, &n))
			next++;
		bool tail = next == size && (size - pos < JOURNAL_RECORD_HEADER ||
		    (uint64_t)le_get32(data + pos) + JOURNAL_RECORD_HEADER > size - pos);
		if (tail && last && past_synced(o, si->num, pos)) {
			cut = pos;
			break;
		}
		if (tail && is_short) {
			short_from = pos;
			break;
		}
		snprintf(what, sizeof(what), "%s: offset %zu: damaged record", path, pos);
		struct journal_damage d = { JOURNAL_DAMAGE_RECORDS, si->num, pos, next - pos, true,
			before_mark(o, si->num, pos), true, path, what };
		if (damage(o, &d, "start with --recover to skip damaged records") != 0)
			goto out;
		pos = next;
	}
	if (is_short) {
		snprintf(what, sizeof(what), "%s: cut short: %zu bytes, but %llu were on disk %s", path,
		    size, (unsigned long long)si->known, si->known_by_checkpoint ?
		    "at the last checkpoint" : "when the next segment began");
		struct journal_damage d = { JOURNAL_DAMAGE_SHORT, si->num, short_from,
			si->known - short_from, true, before_mark(o, si->num, short_from), !last, path,
			what };
		if (damage(o, &d, "start with --recover to go on without what was cut off") != 0)
			goto out;
		if (last && short_from < size)
			cut = short_from; /* the newest must end on a whole record */
	}
	if (cut != SIZE_MAX) {
		/* Cut once the whole journal is read (and found sound). */
		if (!is_short)
			o->st->torn_bytes += size - cut;
		si->cut = cut;
		size = cut;
	}
	o->st->bytes += size;
	j->total += size;
	rc = 0;
out:
	if (data != NULL)
		munmap(data, mapped);
	return rc;
}

/* Segment num is not there (si: the next one, or NULL). */
static int
missing_segment(struct opening *o, uint32_t num, const struct seg_info *below,
    const struct seg_info *above)
{
	char path[PATH_MAX + 32], what[2 * PATH_MAX + 200];
	segment_path(o->j->dir, num, path, sizeof(path));
	if (below != NULL && above != NULL)
		snprintf(what, sizeof(what), "%s is missing: the journal runs from journal-%08u.log "
		    "to journal-%08u.log", path, below->num, above->num);
	else if (above != NULL)
		snprintf(what, sizeof(what), "%s is missing: the checkpoint says the journal begins "
		    "with journal-%08u.log", path, o->ck.first);
	else
		snprintf(what, sizeof(what), "%s is missing: the last checkpoint was written when "
		    "journal-%08u.log existed", path, o->ck.synced_seg > o->ck.mark_seg ?
		    o->ck.synced_seg : o->ck.mark_seg);
	bool known = above != NULL && above->num == num + 1 && above->prev_size > 0;
	struct journal_damage d = { JOURNAL_DAMAGE_MISSING, num, 0, known ? above->prev_size : 0,
		known, before_mark(o, num, 0), below != NULL && above != NULL, path, what };
	return damage(o, &d, "put it back, or start with --recover to go on without the messages "
	    "in it");
}

/* A segment whose header is not one: skipped whole. */
static int
bad_header(struct opening *o, const struct seg_info *si)
{
	char path[PATH_MAX + 32], what[PATH_MAX + 200];
	segment_path(o->j->dir, si->num, path, sizeof(path));
	if (si->short_header)
		snprintf(what, sizeof(what), "%s: offset 0: segment header cut short", path);
	else
		snprintf(what, sizeof(what), "%s: offset 0: not an eft journal segment (or not "
		    "number %u)", path, si->num);
	struct journal_damage d = { JOURNAL_DAMAGE_HEADER, si->num, 0, si->size, true,
		before_mark(o, si->num, 0), true, path, what };
	if (damage(o, &d, "start with --recover to skip this segment and go on without the "
	    "messages in it") != 0)
		return -1;
	o->st->bytes += si->size;
	o->j->total += si->size;
	return 0;
}

/* Start segment seg: its header, on disk with its directory entry.
 * prev_size: the size of the segment before it (0: none). */
static int
new_segment(struct journal *j, uint32_t seg, uint64_t prev_size)
{
	char path[PATH_MAX + 32];
	segment_path(j->dir, seg, path, sizeof(path));
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(j->error, sizeof(j->error), "%s: %s", path, strerror(errno));
		return -1;
	}
	uint8_t hdr[JOURNAL_SEGMENT_HEADER];
	memcpy(hdr, segment_magic, 8);
	le_put32(hdr + 8, 2);
	le_put32(hdr + 12, seg);
	le_put64(hdr + 16, prev_size);
	if (write(fd, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr) || fdatasync(fd) != 0 ||
	    sync_dir(j->dir) != 0) {
		snprintf(j->error, sizeof(j->error), "%s: %s", path, strerror(errno ? errno : EIO));
		close(fd);
		unlink(path);
		return -1;
	}
	if (j->fd >= 0)
		close(j->fd);
	j->fd = fd;
	j->seg = seg;
	j->seg_size = sizeof(hdr);
	j->writeback_from = 0;
	j->total += sizeof(hdr);
	j->synced_seg = seg;
	j->synced_off = sizeof(hdr);
	j->dirty = false;
	return 0;
}

/* The newest segment read is on disk as it is now (a crash may have left
 * its last writes, or the cut of its torn end, in the page cache only)
 * before the next segment's header says how long it is. */
static int
sync_segment(const char *dir, uint32_t seg, char *err, size_t errlen)
{
	char path[PATH_MAX + 32];
	segment_path(dir, seg, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fdatasync(fd) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Read the segments nums[from, to) in order, and find the gaps between
 * them and in the checkpoint's range; *hi_out: the newest segment number
 * the files or the checkpoint know of. */
static int
replay_all(struct opening *o, const uint32_t *nums, struct seg_info *info, size_t from,
    size_t to, uint32_t *hi_out)
{
	/* What each segment had on disk at least: the next header says, and
	 * the checkpoint for the segment it was synced in. */
	for (size_t i = from; i < to; i++) {
		struct seg_info *si = &info[i];
		if (i + 1 < to && nums[i + 1] == si->num + 1 && info[i + 1].prev_size > 0)
			si->known = info[i + 1].prev_size;
		if (o->have_ck && si->num == o->ck.synced_seg && o->ck.synced_off > si->known) {
			si->known = o->ck.synced_off;
			si->known_by_checkpoint = true;
		}
	}
	uint32_t lo = o->have_ck ? o->ck.first : from < to ? nums[from] : 1;
	uint32_t hi = from < to ? nums[to - 1] : 0;
	if (o->have_ck) {
		if (o->ck.synced_seg > hi)
			hi = o->ck.synced_seg;
		if (o->ck.mark_seg > hi)
			hi = o->ck.mark_seg;
	}
	size_t i = from;
	for (uint32_t num = lo; num != 0 && num <= hi; num++) {
		if (o->have_ck && num > o->ck.mark_seg)
			mark_reached(o);
		if (i < to && nums[i] == num) {
			struct seg_info *si = &info[i];
			int rc = si->hdr == 0 ? bad_header(o, si) : replay_segment(o, si, i + 1 == to);
			if (rc != 0)
				return -1;
			i++;
		} else if (missing_segment(o, num, i > from ? &info[i - 1] : NULL,
		    i < to ? &info[i] : NULL) != 0) {
			return -1;
		}
		if (o->have_ck && num >= o->ck.mark_seg)
			mark_reached(o);
	}
	mark_reached(o);
	*hi_out = hi;
	return 0;
}

struct journal *
journal_open(const char *dir, enum journal_fsync policy, bool recover, uint64_t segment_max,
    const struct journal_reader *rd, struct journal_open_stats *stats, char *err, size_t errlen)
{
	static const struct journal_reader none = { 0 };
	struct journal_open_stats st = { 0 };
	uint32_t *segs = NULL;
	struct seg_info *info = NULL;
	size_t nsegs = 0;
	struct journal *j = calloc(1, sizeof(*j));
	if (j == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	struct opening o = { .j = j, .rd = rd != NULL ? rd : &none, .recover = recover, .st = &st,
		.err = err, .errlen = errlen };
	j->fd = -1;
	j->lock_fd = -1;
	j->ck_fd = -1;
	j->policy = policy;
	j->segment_max = segment_max;
	if (strlen(dir) >= sizeof(j->dir) - 32) {
		snprintf(err, errlen, "data-dir: path too long");
		goto fail;
	}
	snprintf(j->dir, sizeof(j->dir), "%s", dir);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "data-dir %s: cannot create: %s", dir, strerror(errno));
		goto fail;
	}
	char lock[PATH_MAX + 32];
	snprintf(lock, sizeof(lock), "%s/LOCK", dir);
	j->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (j->lock_fd < 0) {
		snprintf(err, errlen, "data-dir %s: %s: %s", dir, errno == ENOTDIR ?
		    "not a directory" : "cannot open LOCK", strerror(errno));
		goto fail;
	}
	if (flock(j->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		snprintf(err, errlen, errno == EWOULDBLOCK ? "data-dir %s is in use by another eftd "
		    "(its LOCK is held)" : "data-dir %s: cannot lock: %s", dir, strerror(errno));
		goto fail;
	}

	char ckerr[PATH_MAX + 100], ckpath[PATH_MAX + 32];
	snprintf(ckpath, sizeof(ckpath), "%s/" JOURNAL_CHECKPOINT_FILE, dir);
	int ckr = journal_checkpoint_read(dir, &o.ck, ckerr, sizeof(ckerr));
	if (ckr < 0) {
		struct journal_damage d = { JOURNAL_DAMAGE_CHECKPOINT, 0, 0, 0, true, false, false,
			ckpath, ckerr };
		if (damage(&o, &d, "start with --recover to go on without it: a new one is written") != 0)
			goto fail;
		st.checkpoint = JOURNAL_CHECKPOINT_DAMAGED;
	} else if (ckr == 1) {
		o.have_ck = true;
		st.checkpoint = JOURNAL_CHECKPOINT_READ;
		st.ck = o.ck;
		j->ck = o.ck;
		j->ck_fd = open(ckpath, O_RDWR | O_CLOEXEC);
		if (j->ck_fd < 0) {
			snprintf(err, errlen, "%s: %s", ckpath, strerror(errno));
			goto fail;
		}
	}

	if (list_segments(dir, &segs, &nsegs, err, errlen) != 0)
		goto fail;
	info = calloc(nsegs ? nsegs : 1, sizeof(*info));
	if (info == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < nsegs; i++) {
		info[i].num = segs[i];
		info[i].cut = SIZE_MAX;
		if (probe_segment(dir, &info[i], err, errlen) != 0)
			goto fail;
	}
	/* Below the checkpoint's first segment: leftovers of a deletion that a
	 * crash stopped, holding nothing live. */
	size_t from = 0, to = nsegs;
	if (o.have_ck)
		while (from < to && segs[from] < o.ck.first)
			from++;
	/* The newest, begun after the last sync and cut short before its
	 * header was whole: a crash while it was made. */
	bool torn_new = to > from && info[to - 1].short_header && past_synced(&o, segs[to - 1], 0);
	if (torn_new)
		to--;
	uint32_t hi;
	if (replay_all(&o, segs, info, from, to, &hi) != 0)
		goto fail;

	/* Nothing was damaged (or recover goes on without it): only now is
	 * anything on disk changed. */
	for (size_t i = from; i < to; i++) {
		char path[PATH_MAX + 32];
		segment_path(dir, segs[i], path, sizeof(path));
		if (info[i].cut != SIZE_MAX && truncate(path, (off_t)info[i].cut) != 0) {
			snprintf(err, errlen, "%s: cannot cut the torn end: %s", path, strerror(errno));
			goto fail;
		}
	}
	for (size_t i = 0; i < nsegs; i++) {
		if (i >= from && !(torn_new && i == to))
			continue;
		char path[PATH_MAX + 32];
		segment_path(dir, segs[i], path, sizeof(path));
		if (i < from && info[i].hdr == 0) {
			if (st.foreign++ == 0)
				st.foreign_seg = segs[i]; /* not ours: left alone */
			continue;
		}
		if (unlink(path) != 0 && errno != ENOENT) {
			snprintf(err, errlen, "%s: cannot delete: %s", path, strerror(errno));
			goto fail;
		}
		if (i == to)
			st.torn_bytes += info[i].size;
	}
	st.segments = (uint32_t)(to - from);
	st.first_segment = from < to ? segs[from] : 0;
	uint32_t next = to > from ? segs[to - 1] + 1 : o.have_ck ? hi + 1 : 1;
	uint64_t prev_size = 0;
	if (to > from) {
		prev_size = info[to - 1].cut != SIZE_MAX ? info[to - 1].cut : info[to - 1].size;
		if (sync_segment(dir, segs[to - 1], err, errlen) != 0)
			goto fail;
	}
	if (new_segment(j, next, prev_size) != 0) {
		snprintf(err, errlen, "%s", j->error);
		goto fail;
	}
	j->first = j->oldest_file = st.first_segment ? st.first_segment : next;
	j->synced_first = j->first;
	free(segs);
	free(info);
	if (stats != NULL)
		*stats = st;
	return j;
fail:
	free(segs);
	free(info);
	if (j->lock_fd >= 0)
		close(j->lock_fd);
	if (j->fd >= 0)
		close(j->fd);
	if (j->ck_fd >= 0)
		close(j->ck_fd);
	free(j);
	return NULL;
}

int
journal_append(struct journal *j, uint8_t type, const struct journal_part *parts, int n)
{
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += parts[i].len;
	if (len > JOURNAL_RECORD_MAX)
		return -1;
	size_t need = j->len + JOURNAL_RECORD_HEADER + len;
	if (need > j->cap) {
		size_t cap = j->cap ? j->cap : 64 * 1024;
		while (cap < need)
			cap *= 2;
		uint8_t *b = realloc(j->buf, cap);
		if (b == NULL)
			return -1;
		j->buf = b;
		j->cap = cap;
	}
	uint8_t *hdr = j->buf + j->len, *p = hdr + JOURNAL_RECORD_HEADER;
	for (int i = 0; i < n; i++) {
		memcpy(p, parts[i].data, parts[i].len);
		p += parts[i].len;
	}
	le_put32(hdr, (uint32_t)len);
	hdr[8] = type;
	hdr[9] = hdr[10] = hdr[11] = 0;
	le_put32(hdr + 4, record_crc(hdr, hdr + JOURNAL_RECORD_HEADER, len));
	j->len = need;
	return 0;
}

size_t
journal_pending(const struct journal *j)
{
	return j->len;
}

int
journal_sync(struct journal *j)
{
	if (!j->dirty)
		return 0;
	uint32_t first = j->first; /* released after what this sync covers was written */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = fdatasync(j->fd);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	uint64_t us = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000 +
	    (uint64_t)((t1.tv_nsec - t0.tv_nsec) / 1000);
	struct journal_sync_stats *st = &j->sync_stats;
	st->count++;
	st->total_us += us;
	st->last_us = us;
	if (us > st->max_us)
		st->max_us = us;
	if (rc != 0) {
		int e = errno;
		snprintf(j->error, sizeof(j->error), "journal segment %u: fdatasync: %s", j->seg,
		    strerror(e));
		errno = e;
		return -1;
	}
	j->dirty = false;
	j->synced_seg = j->seg;
	j->synced_off = j->seg_size;
	j->synced_first = first;
	return 0;
}

int
journal_commit(struct journal *j, uint64_t now_ms)
{
	if (j->len > 0) {
		size_t done = 0;
		while (done < j->len) {
			ssize_t w = write(j->fd, j->buf + done, j->len - done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				int e = w < 0 ? errno : ENOSPC;
				snprintf(j->error, sizeof(j->error), "journal segment %u: write: %s", j->seg,
				    strerror(e));
				/* The file must end on a whole record: cut what got out. */
				if (done > 0 && ftruncate(j->fd, (off_t)j->seg_size) != 0)
					snprintf(j->error, sizeof(j->error), "journal segment %u: write: %s, "
					    "and cutting it back failed", j->seg, strerror(e));
				(void)lseek(j->fd, (off_t)j->seg_size, SEEK_SET);
				errno = e;
				return -1;
			}
			done += (size_t)w;
		}
		j->seg_size += j->len;
		/* everysec: start writing back every few MB, so that the fsync
		 * once a second finds little left to do and does not hold the
		 * loop up (a second's worth at 200 MB/s took 25-40 ms).  Not
		 * every turn: many small requests cost throughput. */
		if (j->policy == JOURNAL_FSYNC_EVERYSEC &&
		    j->seg_size - j->writeback_from >= WRITEBACK_STEP) {
			(void)sync_file_range(j->fd, (off64_t)j->writeback_from,
			    (off64_t)(j->seg_size - j->writeback_from), SYNC_FILE_RANGE_WRITE);
			j->writeback_from = j->seg_size;
		}
		j->total += j->len;
		j->len = 0;
		j->dirty = true;
	}
	bool due = j->policy == JOURNAL_FSYNC_ALWAYS ||
	    (j->policy == JOURNAL_FSYNC_EVERYSEC && now_ms - j->last_sync_ms >= 1000);
	if (j->dirty && due) {
		if (journal_sync(j) != 0)
			return -1;
		j->last_sync_ms = now_ms;
	}
	if (j->seg_size >= j->segment_max) {
		/* What the old segment holds is on disk before the next begins. */
		if (journal_sync(j) != 0 || new_segment(j, j->seg + 1, j->seg_size) != 0)
			return -1;
	}
	return 0;
}

bool
journal_dirty(const struct journal *j)
{
	return j->dirty;
}

const struct journal_sync_stats *
journal_sync_stats(const struct journal *j)
{
	return &j->sync_stats;
}

const char *
journal_error(const struct journal *j)
{
	return j->error;
}

uint32_t
journal_segment(const struct journal *j)
{
	return j->seg;
}

uint64_t
journal_bytes(const struct journal *j)
{
	return j->total;
}

void
journal_close(struct journal *j)
{
	if (j == NULL)
		return;
	(void)journal_commit(j, 0);
	(void)journal_sync(j);
	if (j->fd >= 0)
		close(j->fd);
	if (j->ck_fd >= 0)
		close(j->ck_fd);
	if (j->lock_fd >= 0)
		close(j->lock_fd); /* and the lock with it */
	free(j->buf);
	free(j);
}
