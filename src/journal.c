/* journal.c - the append-only record log (see journal.h). */
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

static const char segment_magic[8] = { 'E', 'F', 'T', 'J', 'R', 'N', 'L', '1' };

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

/* Replay one segment.  last: the newest, whose end may be torn. */
static int
replay_segment(struct journal *j, uint32_t seg, bool last, bool recover, journal_record_cb cb,
    void *arg, struct journal_open_stats *st, char *err, size_t errlen)
{
	char path[PATH_MAX + 32];
	segment_path(j->dir, seg, path, sizeof(path));
	uint8_t *data;
	size_t size;
	if (map_file(path, &data, &size, err, errlen) != 0)
		return -1;
	size_t mapped = size;
	int rc = -1;
	size_t pos = JOURNAL_SEGMENT_HEADER, cut = SIZE_MAX;
	if (size < JOURNAL_SEGMENT_HEADER) {
		if (!last) {
			snprintf(err, errlen, "%s: offset 0: segment header cut short", path);
			goto out;
		}
		cut = 0; /* a crash while the segment was being made */
		pos = size;
	} else if (memcmp(data, segment_magic, 8) != 0 || le_get32(data + 8) != 1 ||
	    le_get32(data + 12) != seg) {
		snprintf(err, errlen, "%s: offset 0: not an eft journal segment (or not number %u)",
		    path, seg);
		goto out;
	}
	while (pos < size) {
		size_t n;
		if (record_valid(data + pos, size - pos, &n)) {
			if (cb != NULL && cb(seg, data[pos + 8], data + pos + JOURNAL_RECORD_HEADER,
			    n - JOURNAL_RECORD_HEADER, arg) != 0) {
				snprintf(err, errlen, "%s: offset %zu: record refused by the store", path,
				    pos);
				goto out;
			}
			st->records++;
			pos += n;
			continue;
		}
		/* Not a valid record here.  A torn tail is a record that runs
		 * past the end of the newest segment with nothing valid after
		 * its start; anything else is damage. */
		size_t next = pos + 1;
		while (next < size && !record_valid(data + next, size - next, &n))
			next++;
		bool runs_past = size - pos < JOURNAL_RECORD_HEADER ||
		    (uint64_t)le_get32(data + pos) + JOURNAL_RECORD_HEADER > size - pos;
		if (last && next == size && runs_past) {
			cut = pos;
			break;
		}
		if (!recover) {
			snprintf(err, errlen, "%s: offset %zu: damaged record (start with --recover to "
			    "skip damaged records)", path, pos);
			goto out;
		}
		st->skipped++;
		pos = next;
	}
	if (cut != SIZE_MAX) {
		st->torn_bytes += size - cut;
		if (cut < JOURNAL_SEGMENT_HEADER ? unlink(path) != 0 : truncate(path, (off_t)cut) != 0) {
			snprintf(err, errlen, "%s: cannot cut the torn end: %s", path, strerror(errno));
			goto out;
		}
		size = cut;
	}
	st->bytes += size;
	j->total += size;
	rc = 0;
out:
	if (data != NULL)
		munmap(data, mapped);
	return rc;
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

/* Start segment seg: its header, on disk with its directory entry. */
static int
new_segment(struct journal *j, uint32_t seg)
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
	le_put32(hdr + 8, 1);
	le_put32(hdr + 12, seg);
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
	return 0;
}

struct journal *
journal_open(const char *dir, enum journal_fsync policy, bool recover, uint64_t segment_max,
    journal_record_cb cb, void *arg, struct journal_open_stats *stats, char *err, size_t errlen)
{
	struct journal_open_stats st = { 0 };
	uint32_t *segs = NULL;
	size_t nsegs = 0;
	struct journal *j = calloc(1, sizeof(*j));
	if (j == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	j->fd = -1;
	j->lock_fd = -1;
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
	if (list_segments(dir, &segs, &nsegs, err, errlen) != 0)
		goto fail;
	for (size_t i = 0; i < nsegs; i++)
		if (replay_segment(j, segs[i], i + 1 == nsegs, recover, cb, arg, &st, err, errlen) != 0)
			goto fail;
	st.segments = (uint32_t)nsegs;
	st.first_segment = nsegs ? segs[0] : 0;
	if (new_segment(j, nsegs ? segs[nsegs - 1] + 1 : 1) != 0) {
		snprintf(err, errlen, "%s", j->error);
		goto fail;
	}
	free(segs);
	if (stats != NULL)
		*stats = st;
	return j;
fail:
	free(segs);
	if (j->lock_fd >= 0)
		close(j->lock_fd);
	if (j->fd >= 0)
		close(j->fd);
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
		if (journal_sync(j) != 0 || new_segment(j, j->seg + 1) != 0)
			return -1;
	}
	return 0;
}

int
journal_drop_segment(struct journal *j, uint32_t seg)
{
	char path[PATH_MAX + 32];
	struct stat st;
	if (seg == j->seg) {
		snprintf(j->error, sizeof(j->error), "journal segment %u is being written", seg);
		return -1;
	}
	segment_path(j->dir, seg, path, sizeof(path));
	if (stat(path, &st) != 0 && errno == ENOENT)
		return 0; /* gone already (a torn segment that never got its header) */
	if (stat(path, &st) != 0 || unlink(path) != 0) {
		snprintf(j->error, sizeof(j->error), "%s: %s", path, strerror(errno));
		return -1;
	}
	j->total -= (uint64_t)st.st_size < j->total ? (uint64_t)st.st_size : j->total;
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
	if (j->lock_fd >= 0)
		close(j->lock_fd); /* and the lock with it */
	free(j->buf);
	free(j);
}
