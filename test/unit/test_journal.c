/* test_journal.c - unit tests for the record journal: records come back in
 * order across commits, segments and reopenings; a torn last record is cut
 * at every byte offset; a flipped bit is refused with its file and offset,
 * and skipped with recover; one process per directory; a write that fails
 * half way leaves the file ending on a whole record.  The checkpoint: its
 * two copies, once a second, a torn copy; what is damage and what a crash
 * (a missing middle or oldest segment, a cut before or after what was
 * synced, an older segment cut at a record boundary, a damaged header),
 * each refused with the file named and reported under recover; released
 * segments go only after a checkpoint, and a file that is no segment never.
 * Each test works in a fresh directory under /tmp, removed afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "eft/crc32c.h"
#include "eft/journal.h"

struct seen {
	size_t n;
	uint8_t types[4096];
	char payloads[4096][64];
	size_t lens[4096];
	uint32_t segs[4096];
};

static int
collect(uint32_t seg, uint8_t type, const uint8_t *payload, size_t len, void *arg)
{
	struct seen *s = arg;
	if (s->n < 4096) {
		s->segs[s->n] = seg;
		s->types[s->n] = type;
		s->lens[s->n] = len;
		memcpy(s->payloads[s->n], payload, len < 64 ? len : 64);
	}
	s->n++;
	return 0;
}

static char dir[64];

/* Records into s, damage and the mark ignored. */
static struct journal_reader
reader_of(struct seen *s)
{
	return (struct journal_reader){ collect, NULL, NULL, s };
}

static int
make_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/eft-journal-XXXXXX");
	return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
remove_dir(void **state)
{
	(void)state;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		char p[400];
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	if (d != NULL)
		closedir(d);
	return rmdir(dir);
}

static struct journal *
open_ok(struct seen *s, bool recover, uint64_t segmax, struct journal_open_stats *st)
{
	char err[300] = "";
	memset(s, 0, sizeof(*s));
	struct journal_reader rd = reader_of(s);
	struct journal *j = journal_open(dir, JOURNAL_FSYNC_ALWAYS, recover, segmax, &rd, st, err,
	    sizeof(err));
	if (j == NULL) {
		print_error("journal_open: %s\n", err);
		fail();
	}
	return j;
}

static void
add(struct journal *j, uint8_t type, const char *text)
{
	struct journal_part parts[2] = { { text, 3 }, { text + 3, strlen(text) - 3 } };
	assert_int_equal(journal_append(j, type, parts, 2), 0);
}

static void
write_records(int n, int per_commit, uint64_t segmax)
{
	struct seen s;
	struct journal *j = open_ok(&s, false, segmax, NULL);
	for (int i = 0; i < n; i++) {
		char text[32];
		snprintf(text, sizeof(text), "record number %d", i);
		add(j, (uint8_t)(1 + i % 5), text);
		if ((i + 1) % per_commit == 0)
			assert_int_equal(journal_commit(j, 0), 0);
	}
	assert_int_equal(journal_commit(j, 0), 0);
	assert_int_equal(journal_pending(j), 0);
	journal_close(j);
}

static void
check_records(const struct seen *s, int from, int n)
{
	for (int i = 0; i < n; i++) {
		char text[32];
		snprintf(text, sizeof(text), "record number %d", from + i);
		assert_int_equal(s->types[i], 1 + (from + i) % 5);
		assert_int_equal(s->lens[i], strlen(text));
		assert_memory_equal(s->payloads[i], text, strlen(text));
	}
}

/* The newest segment file holding records, and its size. */
static void
last_segment(char *path, size_t len, off_t *size)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char best[300] = "";
	while ((e = readdir(d)) != NULL) {
		char p[400];
		struct stat st;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (strncmp(e->d_name, "journal-", 8) == 0 && stat(p, &st) == 0 &&
		    st.st_size > JOURNAL_SEGMENT_HEADER && strcmp(e->d_name, best) > 0)
			snprintf(best, sizeof(best), "%s", e->d_name);
	}
	closedir(d);
	assert_true(best[0] != '\0');
	snprintf(path, len, "%s/%s", dir, best);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	*size = st.st_size;
}

static void
test_crc32c_known_values(void **state)
{
	(void)state;
	assert_int_equal(crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(crc32c(0, "", 0), 0);
	/* In pieces: the same. */
	assert_int_equal(crc32c(crc32c(0, "1234", 4), "56789", 5), 0xe3069283);
	char big[1000];
	memset(big, 'x', sizeof(big));
	uint32_t whole = crc32c(0, big, sizeof(big)), split = 0;
	for (size_t i = 0; i < sizeof(big); i += 7)
		split = crc32c(split, big + i, sizeof(big) - i < 7 ? sizeof(big) - i : 7);
	assert_int_equal(whole, split);
}

static void
test_records_come_back_in_order(void **state)
{
	(void)state;
	write_records(100, 7, 1 << 20);
	struct seen s;
	struct journal_open_stats st;
	struct journal *j = open_ok(&s, false, 1 << 20, &st);
	assert_int_equal(s.n, 100);
	assert_int_equal(st.records, 100);
	assert_int_equal(st.torn_bytes, 0);
	check_records(&s, 0, 100);
	/* More after a reopening follow the first ones. */
	add(j, 1, "one more record");
	assert_int_equal(journal_commit(j, 0), 0);
	journal_close(j);
	journal_close(open_ok(&s, false, 1 << 20, NULL));
	assert_int_equal(s.n, 101);
	assert_memory_equal(s.payloads[100], "one more record", 15);
}

static void
test_segments_roll(void **state)
{
	(void)state;
	write_records(300, 1, 512); /* a new segment every ~20 records */
	struct seen s;
	struct journal_open_stats st;
	journal_close(open_ok(&s, false, 512, &st));
	assert_true(st.segments > 10);
	assert_int_equal(s.n, 300);
	check_records(&s, 0, 300);
}

static void
test_torn_tail_cut_at_every_offset(void **state)
{
	(void)state;
	write_records(20, 20, 1 << 20);
	char path[400];
	off_t size;
	last_segment(path, sizeof(path), &size);
	size_t last_len = JOURNAL_RECORD_HEADER + strlen("record number 19");
	uint8_t *copy = malloc((size_t)size);
	int fd = open(path, O_RDONLY);
	assert_int_equal(read(fd, copy, (size_t)size), size);
	close(fd);
	for (size_t cut = (size_t)size - last_len; cut < (size_t)size; cut++) {
		/* Back to the whole file minus the cut, every other segment gone. */
		remove_dir(NULL);
		assert_int_equal(mkdir(dir, 0700), 0);
		fd = open(path, O_WRONLY | O_CREAT, 0600);
		assert_int_equal(write(fd, copy, cut), (ssize_t)cut);
		close(fd);
		struct seen s;
		struct journal_open_stats st;
		journal_close(open_ok(&s, false, 1 << 20, &st));
		assert_int_equal(s.n, 19);
		check_records(&s, 0, 19);
		assert_int_equal(st.torn_bytes, cut - ((size_t)size - last_len));
		/* Cut for good: a second opening finds nothing torn. */
		journal_close(open_ok(&s, false, 1 << 20, &st));
		assert_int_equal(st.torn_bytes, 0);
		assert_int_equal(s.n, 19);
	}
	free(copy);
}

static void
test_flipped_bit_refused_then_recovered(void **state)
{
	(void)state;
	write_records(20, 20, 1 << 20);
	char path[400];
	off_t size;
	last_segment(path, sizeof(path), &size);
	/* Record 10 starts after the segment header and ten records of
	 * "record number N" (N < 10: 15 bytes). */
	size_t rec10 = JOURNAL_SEGMENT_HEADER + 10 * (JOURNAL_RECORD_HEADER + 15);
	size_t rec10_len = JOURNAL_RECORD_HEADER + 16;
	uint8_t *orig = malloc((size_t)size);
	int fd = open(path, O_RDONLY);
	assert_int_equal(read(fd, orig, (size_t)size), size);
	close(fd);
	for (size_t at = rec10; at < rec10 + rec10_len; at++) {
		for (int bit = 0; bit < 8; bit += 3) {
			remove_dir(NULL);
			assert_int_equal(mkdir(dir, 0700), 0);
			fd = open(path, O_WRONLY | O_CREAT, 0600);
			orig[at] ^= (uint8_t)(1 << bit);
			assert_int_equal(write(fd, orig, (size_t)size), size);
			orig[at] ^= (uint8_t)(1 << bit);
			close(fd);
			char err[600] = "", want[600];
			struct seen s;
			memset(&s, 0, sizeof(s));
			struct journal_reader rd = reader_of(&s);
			struct journal *bad = journal_open(dir, JOURNAL_FSYNC_ALWAYS, false, 1 << 20,
			    &rd, NULL, err, sizeof(err));
			if (bad != NULL) {
				print_error("byte %zu bit %d: opened, %zu records\n", at, bit, s.n);
				fail();
			}
			snprintf(want, sizeof(want), "%s: offset %zu: damaged record", path, rec10);
			if (strstr(err, want) == NULL) {
				print_error("byte %zu bit %d: '%s' lacks '%s'\n", at, bit, err, want);
				fail();
			}
			struct journal_open_stats st;
			journal_close(open_ok(&s, true, 1 << 20, &st));
			assert_int_equal(st.damaged, 1);
			assert_int_equal(s.n, 19);
			check_records(&s, 0, 10);
			assert_memory_equal(s.payloads[10], "record number 11", 16);
		}
	}
	free(orig);
}

static void
test_one_process_per_directory(void **state)
{
	(void)state;
	struct seen s;
	struct journal *j = open_ok(&s, false, 1 << 20, NULL);
	/* flock is per open file: another open of LOCK, even here, is refused. */
	char err[300] = "";
	struct journal_reader rd = reader_of(&s);
	assert_null(journal_open(dir, JOURNAL_FSYNC_ALWAYS, false, 1 << 20, &rd, NULL, err,
	    sizeof(err)));
	assert_non_null(strstr(err, "in use by another eftd"));
	journal_close(j);
	journal_close(open_ok(&s, false, 1 << 20, NULL));
}

static void
test_not_a_directory(void **state)
{
	(void)state;
	char file[96], err[300] = "";
	snprintf(file, sizeof(file), "%s/file", dir);
	int fd = open(file, O_WRONLY | O_CREAT, 0600);
	close(fd);
	assert_null(journal_open(file, JOURNAL_FSYNC_NO, false, 1 << 20, NULL, NULL, err,
	    sizeof(err)));
	assert_non_null(strstr(err, file));
	unlink(file);
}

static void
test_failed_write_is_cut_back(void **state)
{
	(void)state;
	/* In a child: RLIMIT_FSIZE makes a write stop part way (EFBIG). */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGXFSZ, SIG_IGN);
		struct seen s;
		char err[300];
		struct journal_reader rd = reader_of(&s);
		struct journal *j = journal_open(dir, JOURNAL_FSYNC_ALWAYS, false, 1 << 20, &rd, NULL,
		    err, sizeof(err));
		if (j == NULL)
			_exit(2);
		add(j, 1, "record number 0");
		if (journal_commit(j, 0) != 0)
			_exit(3);
		char big[600];
		memset(big, 'b', sizeof(big));
		struct journal_part part = { big, sizeof(big) };
		struct rlimit rl = { JOURNAL_SEGMENT_HEADER + JOURNAL_RECORD_HEADER + 15 + 300,
			RLIM_INFINITY };
		setrlimit(RLIMIT_FSIZE, &rl);
		if (journal_append(j, 2, &part, 1) != 0 || journal_commit(j, 0) != -1)
			_exit(4);
		if (journal_pending(j) == 0 || strstr(journal_error(j), "write") == NULL)
			_exit(5);
		/* Room again: the same record goes out whole. */
		rl.rlim_cur = RLIM_INFINITY;
		setrlimit(RLIMIT_FSIZE, &rl);
		if (journal_commit(j, 0) != 0 || journal_pending(j) != 0)
			_exit(6);
		journal_close(j);
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	struct seen s;
	struct journal_open_stats st;
	journal_close(open_ok(&s, false, 1 << 20, &st));
	assert_int_equal(st.torn_bytes, 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.lens[1], 600);
}


/* ---- the checkpoint, and damage ---- */

/* What an open reported besides records. */
static struct opened {
	struct seen s;
	size_t damages;
	struct journal_damage d[16];
	char what[16][400];
	bool marked;
	uint64_t mark;
	size_t records_at_mark;
} got;

static void
got_damage(const struct journal_damage *d, void *arg)
{
	struct opened *o = arg;
	if (o->damages < 16) {
		o->d[o->damages] = *d;
		snprintf(o->what[o->damages], sizeof(o->what[0]), "%s", d->what);
		o->d[o->damages].what = o->what[o->damages];
		o->d[o->damages].path = NULL;
	}
	o->damages++;
}

static void
got_mark(uint64_t mark, void *arg)
{
	struct opened *o = arg;
	assert_false(o->marked);
	o->marked = true;
	o->mark = mark;
	o->records_at_mark = o->s.n;
}

static int
got_record(uint32_t seg, uint8_t type, const uint8_t *payload, size_t len, void *arg)
{
	return collect(seg, type, payload, len, &((struct opened *)arg)->s);
}

/* Open dir into got: the journal, or NULL with the reason in err. */
static struct journal *
try_open(bool recover, uint64_t segmax, struct journal_open_stats *st, char *err, size_t errlen)
{
	memset(&got, 0, sizeof(got));
	struct journal_reader rd = { got_record, got_damage, got_mark, &got };
	err[0] = '\0';
	return journal_open(dir, JOURNAL_FSYNC_ALWAYS, recover, segmax, &rd, st, err, errlen);
}

static void
assert_has(const char *text, const char *want)
{
	if (strstr(text, want) == NULL) {
		print_error("'%s' lacks '%s'\n", text, want);
		fail();
	}
}

static void
path_of(uint32_t seg, char *out, size_t len)
{
	snprintf(out, len, "%s/journal-%08u.log", dir, seg);
}

static off_t
size_of(uint32_t seg)
{
	char path[400];
	struct stat st;
	path_of(seg, path, sizeof(path));
	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* n records, one commit each, in segments of segmax bytes; then a
 * checkpoint with mark n (unless no_checkpoint), and a clean close. */
static void
write_checkpointed(int n, uint64_t segmax, bool checkpoint)
{
	struct seen *s = &got.s;
	struct journal *j = open_ok(s, false, segmax, NULL);
	for (int i = 0; i < n; i++) {
		char text[32];
		snprintf(text, sizeof(text), "record number %d", i);
		add(j, (uint8_t)(1 + i % 5), text);
		assert_int_equal(journal_commit(j, 0), 0);
	}
	if (checkpoint)
		assert_int_equal(journal_checkpoint(j, 0, (uint64_t)n, true), 0);
	journal_close(j);
}

/* The records of segment seg in a full read (all of them: s). */
static size_t
records_in(const struct seen *s, uint32_t seg)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n; i++)
		n += s->segs[i] == seg;
	return n;
}

static void
flip_byte(const char *path, off_t at, uint8_t mask)
{
	int fd = open(path, O_RDWR);
	uint8_t b;
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, at), 1);
	b ^= mask;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

static void
test_checkpoint_two_copies_once_a_second(void **state)
{
	(void)state;
	struct seen *s = &got.s;
	char err[600], path[400];
	struct journal_checkpoint ck;
	struct journal *j = open_ok(s, false, 1 << 20, NULL);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 0); /* none yet */
	add(j, 1, "record number 0");
	assert_int_equal(journal_commit(j, 0), 0);
	assert_int_equal(journal_checkpoint(j, 5000, 7, true), 0);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 1);
	uint64_t end = JOURNAL_SEGMENT_HEADER + JOURNAL_RECORD_HEADER + 15;
	assert_int_equal(ck.seq, 1);
	assert_int_equal(ck.first, 1);
	assert_int_equal(ck.synced_seg, 1);
	assert_int_equal(ck.synced_off, end);
	assert_int_equal(ck.mark_seg, 1);
	assert_int_equal(ck.mark_off, end);
	assert_int_equal(ck.mark, 7);
	/* What is synced moved: written again, but not before a second. */
	add(j, 1, "record number 1");
	assert_int_equal(journal_commit(j, 5100), 0);
	assert_true(journal_checkpoint_wanted(j));
	assert_int_equal(journal_checkpoint(j, 5999, 8, false), 0);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 1);
	assert_int_equal(ck.seq, 1);
	assert_int_equal(journal_checkpoint(j, 6000, 8, false), 0);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 1);
	assert_int_equal(ck.seq, 2);
	assert_int_equal(ck.mark, 8);
	assert_int_equal(ck.synced_off, end + JOURNAL_RECORD_HEADER + 15);
	/* Nothing moved: nothing written, however long it has been. */
	assert_false(journal_checkpoint_wanted(j));
	assert_int_equal(journal_checkpoint(j, 99000, 9, false), 0);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 1);
	assert_int_equal(ck.seq, 2);
	journal_close(j);

	/* The newer copy (sequence 2: the first) torn: the older counts. */
	snprintf(path, sizeof(path), "%s/CHECKPOINT", dir);
	flip_byte(path, 40, 0x01);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 1);
	assert_int_equal(ck.seq, 1);
	assert_int_equal(ck.mark, 7);
	/* Both: damage, refused; recover goes on without it and a new one
	 * replaces it. */
	flip_byte(path, 64 + 40, 0x01);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), -1);
	assert_has(err, "CHECKPOINT: damaged (neither of its two copies is valid)");
	struct journal_open_stats st;
	assert_null(try_open(false, 1 << 20, &st, err, sizeof(err)));
	assert_has(err, "CHECKPOINT: damaged");
	assert_has(err, "start with --recover to go on without it");
	j = try_open(true, 1 << 20, &st, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(st.checkpoint, JOURNAL_CHECKPOINT_DAMAGED);
	assert_int_equal(got.damages, 1);
	assert_int_equal(got.d[0].kind, JOURNAL_DAMAGE_CHECKPOINT);
	assert_int_equal(got.s.n, 2);
	assert_int_equal(journal_checkpoint(j, 0, 2, true), 0);
	journal_close(j);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 1);
	assert_int_equal(ck.mark, 2);
	/* Cut short: damage too. */
	assert_int_equal(truncate(path, 100), 0);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), -1);
	assert_has(err, "CHECKPOINT: damaged (100 bytes, not 128)");
}

static void
test_missing_middle_segment(void **state)
{
	(void)state;
	char err[600], want[600], path[400];
	write_checkpointed(120, 512, true);
	struct journal_open_stats st;
	journal_close(try_open(false, 512, &st, err, sizeof(err)));
	assert_true(st.segments >= 5);
	size_t in3 = records_in(&got.s, 3);
	assert_true(in3 > 0);
	off_t size3 = size_of(3);
	path_of(3, path, sizeof(path));
	assert_int_equal(unlink(path), 0);

	assert_null(try_open(false, 512, &st, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s is missing: the journal runs from journal-00000002.log to "
	    "journal-00000004.log (put it back, or start with --recover", path);
	assert_has(err, want);
	struct journal *j = try_open(true, 512, &st, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(got.damages, 1);
	assert_int_equal(got.d[0].kind, JOURNAL_DAMAGE_MISSING);
	assert_int_equal(got.d[0].seg, 3);
	assert_true(got.d[0].bytes_known); /* from journal-00000004.log's header */
	assert_int_equal(got.d[0].bytes, size3);
	assert_true(got.d[0].before_mark);
	assert_true(got.d[0].stays);
	assert_int_equal(st.damaged, 1);
	assert_int_equal(got.s.n, 120 - in3);
	assert_true(got.marked);
	assert_int_equal(got.mark, 120);
	journal_close(j);
	/* Still there for the next open: the gap stays until the segments
	 * before it are gone. */
	assert_null(try_open(false, 512, &st, err, sizeof(err)));
	assert_has(err, "is missing");
}

static void
test_missing_oldest_segment(void **state)
{
	(void)state;
	char err[600], want[600], path[400];
	write_checkpointed(120, 512, true);
	path_of(1, path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	struct journal_open_stats st;
	assert_null(try_open(false, 512, &st, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s is missing: the checkpoint says the journal begins with "
	    "journal-00000001.log", path);
	assert_has(err, want);
	struct journal *j = try_open(true, 512, &st, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(got.damages, 1);
	assert_int_equal(got.d[0].kind, JOURNAL_DAMAGE_MISSING);
	assert_int_equal(got.d[0].seg, 1);
	assert_false(got.d[0].stays); /* the next checkpoint begins at 2 */
	assert_int_equal(st.first_segment, 2);
	assert_int_equal(journal_checkpoint(j, 0, 0, true), 0);
	journal_close(j);
	journal_close(try_open(false, 512, &st, err, sizeof(err)));
	assert_int_equal(got.damages, 0);

	/* Without a checkpoint (a data-dir from before it) the oldest
	 * segment's absence cannot be told from its deletion. */
	char ck[400];
	snprintf(ck, sizeof(ck), "%s/CHECKPOINT", dir);
	assert_int_equal(unlink(ck), 0);
	path_of(2, path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	j = try_open(false, 512, &st, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(st.checkpoint, JOURNAL_CHECKPOINT_NONE);
	assert_false(got.marked);
	journal_close(j);
}

static void
test_released_segments_go_after_a_checkpoint(void **state)
{
	(void)state;
	char err[600];
	struct journal_open_stats st;
	write_checkpointed(120, 512, true);
	struct journal *j = try_open(false, 512, &st, err, sizeof(err));
	assert_non_null(j);
	size_t all = got.s.n, in3 = records_in(&got.s, 3);
	journal_release(j, 3);
	assert_true(size_of(1) > 0 && size_of(2) > 0);
	assert_int_equal(journal_checkpoint(j, 0, 0, true), 0);
	assert_int_equal(size_of(1), -1);
	assert_int_equal(size_of(2), -1);
	/* A crash after release, before the checkpoint: the file stays and
	 * is read again. */
	journal_release(j, 4);
	journal_close(j);
	j = try_open(false, 512, &st, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(st.first_segment, 3);
	assert_int_equal(records_in(&got.s, 3), in3);
	/* A crash after the checkpoint, before the delete: below the first
	 * segment, a leftover deleted unread. */
	char path[400], keep[400];
	path_of(3, path, sizeof(path));
	snprintf(keep, sizeof(keep), "%s/keep", dir);
	assert_int_equal(link(path, keep), 0);
	journal_release(j, 4);
	assert_int_equal(journal_checkpoint(j, 0, 0, true), 0);
	assert_int_equal(size_of(3), -1);
	journal_close(j);
	assert_int_equal(rename(keep, path), 0);
	j = try_open(false, 512, &st, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(got.damages, 0);
	assert_int_equal(st.first_segment, 4);
	assert_int_equal(records_in(&got.s, 3), 0);
	assert_true(got.s.n < all);
	assert_int_equal(size_of(3), -1);
	journal_close(j);
}

/* A release counts in a checkpoint only after a sync of what was written
 * before it (compaction's copies of the live messages): else a power cut
 * after the checkpoint loses both the copies and, their segments deleted,
 * the originals.  Found by test_powercut.py.  Under everysec the release
 * waits for the next sync; under no, where that may never come, the
 * checkpoint syncs first. */
static void
test_release_waits_for_the_sync_of_what_came_before(void **state)
{
	(void)state;
	char err[600];
	struct journal_checkpoint ck;
	write_checkpointed(120, 512, true);
	memset(&got, 0, sizeof(got));
	struct journal_reader rd = { got_record, got_damage, got_mark, &got };
	struct journal *j = journal_open(dir, JOURNAL_FSYNC_EVERYSEC, false, 512, &rd, NULL, err,
	    sizeof(err));
	assert_non_null(j);
	assert_int_equal(journal_commit(j, 0), 0);
	assert_int_equal(journal_checkpoint(j, 0, 0, true), 0);
	/* Written (the copies), not synced; then released. */
	add(j, 1, "record number 0, again");
	assert_int_equal(journal_commit(j, 500), 0);
	assert_true(journal_dirty(j));
	journal_release(j, 3);
	assert_false(journal_checkpoint_wanted(j));
	assert_int_equal(journal_checkpoint(j, 600, 0, true), 0);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 1);
	assert_int_equal(ck.first, 1);
	assert_true(size_of(1) > 0 && size_of(2) > 0);
	/* Synced (everysec's second): now it counts. */
	assert_int_equal(journal_commit(j, 1000), 0);
	assert_false(journal_dirty(j));
	assert_true(journal_checkpoint_wanted(j));
	assert_int_equal(journal_checkpoint(j, 1000, 0, true), 0);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 1);
	assert_int_equal(ck.first, 3);
	assert_int_equal(size_of(1), -1);
	assert_int_equal(size_of(2), -1);
	/* Released with nothing written since the last sync: at once. */
	journal_release(j, 4);
	assert_int_equal(journal_checkpoint(j, 1000, 0, true), 0);
	assert_int_equal(size_of(3), -1);
	journal_close(j);

	/* Under no the checkpoint syncs what came before the release. */
	memset(&got, 0, sizeof(got));
	j = journal_open(dir, JOURNAL_FSYNC_NO, false, 512, &rd, NULL, err, sizeof(err));
	assert_non_null(j);
	uint32_t seg = journal_segment(j), first = seg - 1;
	assert_true(size_of(first) > 0);
	add(j, 1, "record number 1, again");
	assert_int_equal(journal_commit(j, 5000), 0);
	assert_true(journal_dirty(j));
	journal_release(j, seg);
	assert_true(journal_checkpoint_wanted(j));
	uint64_t syncs = journal_sync_stats(j)->count;
	assert_int_equal(journal_checkpoint(j, 5000, 0, false), 0);
	assert_int_equal(journal_sync_stats(j)->count, syncs + 1);
	assert_false(journal_dirty(j));
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 1);
	assert_int_equal(ck.first, seg);
	assert_int_equal(size_of(first), -1);
	journal_close(j);
}

/* The file and checkpoint of a journal, kept to start each case again. */
struct saved {
	uint8_t *seg, *ck;
	size_t seg_len, ck_len;
};

static uint8_t *
slurp(const char *path, size_t *len)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	uint8_t *b = malloc((size_t)st.st_size);
	int fd = open(path, O_RDONLY);
	assert_int_equal(read(fd, b, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return b;
}

static void
spill(const char *path, const uint8_t *b, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(write(fd, b, len), (ssize_t)len);
	close(fd);
}

/* A fresh directory with segment 1 (cut to len) and the checkpoint. */
static void
restore(const struct saved *sv, size_t len)
{
	char path[400];
	remove_dir(NULL);
	assert_int_equal(mkdir(dir, 0700), 0);
	path_of(1, path, sizeof(path));
	spill(path, sv->seg, len);
	snprintf(path, sizeof(path), "%s/CHECKPOINT", dir);
	spill(path, sv->ck, sv->ck_len);
}

static void
test_cut_before_what_was_synced_is_damage(void **state)
{
	(void)state;
	char err[600], want[600], path[400];
	struct seen *s = &got.s;
	struct journal_checkpoint ck;
	/* 20 records, a checkpoint, 5 more (synced, after the checkpoint). */
	struct journal *j = open_ok(s, false, 1 << 20, NULL);
	for (int i = 0; i < 25; i++) {
		char text[32];
		snprintf(text, sizeof(text), "record number %d", i);
		add(j, 1, text);
		assert_int_equal(journal_commit(j, 0), 0);
		if (i == 19)
			assert_int_equal(journal_checkpoint(j, 0, 20, true), 0);
	}
	journal_close(j);
	assert_int_equal(journal_checkpoint_read(dir, &ck, err, sizeof(err)), 1);
	struct saved sv;
	path_of(1, path, sizeof(path));
	sv.seg = slurp(path, &sv.seg_len);
	snprintf(path, sizeof(path), "%s/CHECKPOINT", dir);
	sv.ck = slurp(path, &sv.ck_len);
	path_of(1, path, sizeof(path));
	struct journal_open_stats st;

	/* Cut past the checkpoint: what a crash does. */
	restore(&sv, ck.synced_off + 40);
	j = try_open(false, 1 << 20, &st, err, sizeof(err));
	assert_non_null(j);
	assert_true(st.torn_bytes > 0);
	assert_int_equal(got.s.n, 21);
	assert_int_equal(got.records_at_mark, 20);
	journal_close(j);

	/* Cut before it: damage, whatever record boundary it falls on. */
	size_t rec19 = ck.synced_off - (JOURNAL_RECORD_HEADER + 16);
	for (size_t cut = rec19 - 3; cut <= ck.synced_off - 1; cut += 7) {
		restore(&sv, cut);
		assert_null(try_open(false, 1 << 20, &st, err, sizeof(err)));
		snprintf(want, sizeof(want), "%s: cut short: %zu bytes, but %llu were on disk at the "
		    "last checkpoint (start with --recover to go on without what was cut off)", path,
		    cut, (unsigned long long)ck.synced_off);
		assert_has(err, want);
		j = try_open(true, 1 << 20, &st, err, sizeof(err));
		assert_non_null(j);
		assert_int_equal(st.torn_bytes, 0);
		assert_int_equal(got.damages, 1);
		assert_int_equal(got.d[0].kind, JOURNAL_DAMAGE_SHORT);
		size_t whole = cut < rec19 ? rec19 - (JOURNAL_RECORD_HEADER + 16) : rec19;
		assert_int_equal(got.d[0].offset, whole);
		assert_int_equal(got.d[0].bytes, ck.synced_off - whole);
		assert_true(got.d[0].before_mark);
		assert_false(got.d[0].stays);
		assert_int_equal(got.s.n, cut < rec19 ? 18 : 19);
		assert_int_equal(got.mark, 20);
		assert_int_equal(got.records_at_mark, got.s.n);
		/* Gone on without it: what is written now is the journal. */
		assert_int_equal(journal_checkpoint(j, 0, 0, true), 0);
		journal_close(j);
		j = try_open(false, 1 << 20, &st, err, sizeof(err));
		assert_non_null(j);
		assert_int_equal(got.s.n, cut < rec19 ? 18 : 19);
		journal_close(j);
	}
	free(sv.seg);
	free(sv.ck);
}

static void
test_older_segment_cut_at_a_record_boundary(void **state)
{
	(void)state;
	char err[600], want[600], path[400];
	/* No checkpoint at all: the next segment's header knows. */
	write_checkpointed(120, 512, false);
	struct journal_open_stats st;
	journal_close(try_open(false, 512, &st, err, sizeof(err)));
	size_t last = 0;
	for (size_t i = 0; i < got.s.n; i++)
		if (got.s.segs[i] == 2)
			last = got.s.lens[i];
	off_t size2 = size_of(2);
	path_of(2, path, sizeof(path));
	assert_int_equal(truncate(path, size2 - (off_t)(JOURNAL_RECORD_HEADER + last)), 0);
	assert_null(try_open(false, 512, &st, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: cut short: %lld bytes, but %lld were on disk when the "
	    "next segment began", path, (long long)(size2 - (off_t)(JOURNAL_RECORD_HEADER + last)),
	    (long long)size2);
	assert_has(err, want);
	journal_close(try_open(true, 512, &st, err, sizeof(err)));
	assert_int_equal(got.damages, 1);
	assert_int_equal(got.d[0].kind, JOURNAL_DAMAGE_SHORT);
	assert_int_equal(got.d[0].bytes, JOURNAL_RECORD_HEADER + last);
	assert_true(got.d[0].stays);
	assert_false(got.d[0].before_mark); /* no checkpoint: nothing counts it */
}

static void
test_damaged_header_skipped_and_never_deleted(void **state)
{
	(void)state;
	char err[600], want[600], path[400];
	write_checkpointed(120, 512, true);
	struct journal_open_stats st;
	journal_close(try_open(false, 512, &st, err, sizeof(err)));
	size_t all = got.s.n, in2 = records_in(&got.s, 2);
	path_of(2, path, sizeof(path));
	flip_byte(path, 0, 0x01);
	assert_null(try_open(false, 512, &st, err, sizeof(err)));
	snprintf(want, sizeof(want), "%s: offset 0: not an eft journal segment (or not number 2) "
	    "(start with --recover to skip this segment", path);
	assert_has(err, want);
	struct journal *j = try_open(true, 512, &st, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(got.damages, 1);
	assert_int_equal(got.d[0].kind, JOURNAL_DAMAGE_HEADER);
	assert_int_equal(got.d[0].bytes, size_of(2));
	assert_true(got.d[0].stays);
	assert_int_equal(got.s.n, all - in2);
	assert_int_equal(records_in(&got.s, 2), 0);
	/* Released with the segments around it: it stays on disk. */
	journal_release(j, 4);
	assert_int_equal(journal_checkpoint(j, 0, 0, true), 0);
	assert_int_equal(size_of(1), -1);
	assert_int_equal(size_of(3), -1);
	assert_true(size_of(2) > 0);
	journal_close(j);
	/* Below the first segment now: left alone, and said so. */
	j = try_open(false, 512, &st, err, sizeof(err));
	assert_non_null(j);
	assert_int_equal(st.foreign, 1);
	assert_int_equal(st.foreign_seg, 2);
	assert_true(size_of(2) > 0);
	journal_close(j);
}

static void
test_mark_reached_at_the_checkpoint(void **state)
{
	(void)state;
	char err[600];
	struct seen *s = &got.s;
	struct journal *j = open_ok(s, false, 256, NULL);
	for (int i = 0; i < 40; i++) {
		char text[32];
		snprintf(text, sizeof(text), "record number %d", i);
		add(j, 1, text);
		assert_int_equal(journal_commit(j, 0), 0);
		if (i == 22)
			assert_int_equal(journal_checkpoint(j, 0, 1234, true), 0);
	}
	journal_close(j);
	struct journal_open_stats st;
	journal_close(try_open(false, 256, &st, err, sizeof(err)));
	assert_int_equal(got.s.n, 40);
	assert_true(got.marked);
	assert_int_equal(got.mark, 1234);
	assert_int_equal(got.records_at_mark, 23);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_known_values),
		cmocka_unit_test_setup_teardown(test_records_come_back_in_order, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_segments_roll, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_torn_tail_cut_at_every_offset, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_flipped_bit_refused_then_recovered, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_one_process_per_directory, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_not_a_directory, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_failed_write_is_cut_back, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_checkpoint_two_copies_once_a_second, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_missing_middle_segment, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_missing_oldest_segment, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_released_segments_go_after_a_checkpoint, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_release_waits_for_the_sync_of_what_came_before,
		    make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_cut_before_what_was_synced_is_damage, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_older_segment_cut_at_a_record_boundary, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_damaged_header_skipped_and_never_deleted, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_mark_reached_at_the_checkpoint, make_dir,
		    remove_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
