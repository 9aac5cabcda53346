/* test_journal.c - unit tests for the record journal: records come back in
 * order across commits, segments and reopenings; a torn last record is cut
 * at every byte offset; a flipped bit is refused with its file and offset,
 * and skipped with recover; one process per directory; a write that fails
 * half way leaves the file ending on a whole record.  Each test works in a
 * fresh directory under /tmp, removed afterwards. */
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
};

static int
collect(uint32_t seg, uint8_t type, const uint8_t *payload, size_t len, void *arg)
{
	struct seen *s = arg;
	(void)seg;
	if (s->n < 4096) {
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
