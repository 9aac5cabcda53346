/* test_store.c - unit tests for the durable message store: stored messages
 * come back on their queues in id order, consumed ones do not and delivered
 * ones come back redelivered; message ids stay unique across restarts; a
 * transaction cut anywhere comes back whole or not at all; segments go when
 * nothing on them is live, and long-lived messages are moved forward so that
 * the journal stays small (also when a crash leaves both copies); a damaged
 * record is refused with its file and offset, and skipped with recover; one
 * store per directory; the checkpoint's count of live messages matches
 * what comes back up to it after a crash, and tells how many a missing
 * segment took (the damaged segments then go).  Each test works in a fresh directory under /tmp,
 * removed afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "eft/dest.h"
#include "eft/journal.h"
#include "eft/msg.h"
#include "eft/store.h"

#define KiB 1024u

static char dir[64];

static int
make_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/eft-store-XXXXXX");
	return mkdtemp(dir) == NULL ? -1 : 0;
}

/* Remove path and everything under it. */
static int
remove_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		char p[400];
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			remove_tree(p);
		else
			unlink(p);
	}
	if (d != NULL)
		closedir(d);
	return rmdir(path);
}

static int
remove_dir(void **state)
{
	(void)state;
	return remove_tree(dir);
}

/* ---- files ---- */

static bool
is_segment_name(const char *name)
{
	size_t n = strlen(name);
	return strncmp(name, "journal-", 8) == 0 && n > 12 && strcmp(name + n - 4, ".log") == 0;
}

/* Segment files in dir, and the bytes in them (*bytes, if not NULL). */
static size_t
count_segments(uint64_t *bytes)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	size_t n = 0;
	uint64_t total = 0;
	while ((e = readdir(d)) != NULL) {
		char p[400];
		struct stat st;
		if (!is_segment_name(e->d_name))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		assert_int_equal(stat(p, &st), 0);
		total += (uint64_t)st.st_size;
		n++;
	}
	closedir(d);
	if (bytes != NULL)
		*bytes = total;
	return n;
}

/* The path of the newest (highest numbered) segment file. */
static void
newest_segment(char *path, size_t len)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	char best[300] = "";
	while ((e = readdir(d)) != NULL)
		if (is_segment_name(e->d_name) && strcmp(e->d_name, best) > 0)
			snprintf(best, sizeof(best), "%s", e->d_name);
	closedir(d);
	assert_true(best[0] != '\0');
	snprintf(path, len, "%s/%s", dir, best);
}

static uint8_t *
read_whole(const char *path, size_t *size)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	uint8_t *data = malloc((size_t)st.st_size + 1);
	assert_non_null(data);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, data, (size_t)st.st_size), st.st_size);
	close(fd);
	*size = (size_t)st.st_size;
	return data;
}

static void
write_whole(const char *path, const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, size), (ssize_t)size);
	close(fd);
}

static uint32_t
le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- a store with the queues and message pool it fills, as eftd holds them ---- */

struct env {
	struct dests dests;
	struct msg_pool pool;
	uint64_t next_id;
	struct store *s;
	struct store_recovered rec;
};

/* opt as given, in the test's directory. */
static struct store *
try_open(struct env *e, struct store_options opt, char *err, size_t errlen)
{
	memset(e, 0, sizeof(*e));
	msg_pool_init(&e->pool, 0);
	e->next_id = 1;
	opt.dir = dir;
	err[0] = '\0';
	e->s = store_open(&opt, &e->dests, &e->pool, &e->next_id, &e->rec, err, errlen);
	return e->s;
}

static void
open_with(struct env *e, struct store_options opt)
{
	char err[600];
	if (try_open(e, opt, err, sizeof(err)) == NULL) {
		print_error("store_open: %s\n", err);
		fail();
	}
}

static struct store_options
options(uint64_t segment_size)
{
	return (struct store_options){ .fsync = JOURNAL_FSYNC_NO, .segment_size = segment_size };
}

static void
open_env(struct env *e, uint64_t segment_size)
{
	open_with(e, options(segment_size));
}

/* What a failed open leaves (queues it made while reading) is freed too. */
static void
free_env(struct env *e)
{
	dests_free(&e->dests);
	msg_pool_drain(&e->pool);
}

static void
close_env(struct env *e)
{
	store_close(e->s);
	e->s = NULL;
	free_env(e);
}

/* The clock each commit is given: a checkpoint's second passes between
 * two (segments nothing needs are deleted after a checkpoint). */
static uint64_t clock_ms = 1000000;

static void
commit(struct env *e)
{
	/* (Pending may stay true: a new segment's id reservation waits for
	 * the next commit.) */
	clock_ms += JOURNAL_CHECKPOINT_MS;
	assert_int_equal(store_commit(e->s, clock_ms, e->next_id), 0);
}

/* Body bytes that say which message they belong to. */
static void
fill_body(char *out, uint64_t id, size_t len)
{
	for (size_t i = 0; i < len; i++)
		out[i] = (char)('a' + (id * 31 + i) % 26);
	char tag[32];
	int n = snprintf(tag, sizeof(tag), "#%" PRIu64 "#", id);
	memcpy(out, tag, (size_t)n < len ? (size_t)n : len);
}

/* Bodies of different lengths, from the id. */
static size_t
body_len_for(uint64_t id)
{
	return 20 + (size_t)(id * 37 % 300);
}

/* A SEND's message for queue, as msg_new builds it from the frame.  With
 * escaped, a header value needs escaping in 1.2: one header block per
 * version. */
static struct msg *
new_msg(struct msg_pool *pool, const char *queue, uint64_t id, size_t body_len, bool escaped)
{
	char dest_name[64], seq_name[] = "x-seq", seq[24], k_name[] = "k", k[] = "a:b";
	snprintf(dest_name, sizeof(dest_name), "%s", queue);
	snprintf(seq, sizeof(seq), "%" PRIu64, id);
	char *body = malloc(body_len + 1);
	assert_non_null(body);
	fill_body(body, id, body_len);
	char destination[] = "destination";
	struct header hdr[3] = {
		{ destination, dest_name, 11, (uint32_t)strlen(dest_name), HDR_DESTINATION },
		{ seq_name, seq, 5, (uint32_t)strlen(seq), HDR_OTHER },
		{ k_name, k, 1, 3, HDR_OTHER },
	};
	struct frame f = { .cmd = CMD_SEND, .cmd_name = "SEND", .cmd_len = 4, .hdr = hdr,
		.nhdr = escaped ? 3 : 2, .plain = !escaped, .body = body, .body_len = body_len };
	for (int i = 0; i < HDR_COUNT; i++)
		f.known[i] = -1;
	f.known[HDR_DESTINATION] = 0;
	struct msg_spec spec = { .pool = pool, .frame = &f, .dest = dest_name,
		.dest_len = strlen(dest_name), .id = id };
	struct msg *m = msg_new(&spec);
	free(body);
	assert_non_null(m);
	assert_int_equal(msg_nblocks(m), escaped ? STOMP_VERSIONS : 1);
	return m;
}

/* Queue a persistent message the way the broker does: stored, then queued.
 * The caller gets a reference of its own (to consume it later). */
static struct msg *
publish(struct env *e, const char *queue, uint64_t id, size_t body_len, bool escaped)
{
	struct msg *m = new_msg(&e->pool, queue, id, body_len, escaped);
	m->persistent = true;
	struct dest *d = dests_get(&e->dests, queue, strlen(queue), DEST_QUEUE);
	assert_non_null(d);
	assert_int_equal(store_publish(e->s, d, m), 0);
	assert_int_not_equal(store_msg_segment(m), 0);
	msg_ref(m);
	uint64_t dropped = 0;
	dest_publish(d, m, &dropped);
	return m;
}

/* Gone for good (acknowledged); drops the caller's reference. */
static void
consume(struct env *e, struct msg *m)
{
	store_consumed(e->s, m);
	assert_int_equal(store_msg_segment(m), 0);
	msg_unref(m);
}

/* ---- what a queue holds ---- */

struct listing {
	size_t n;
	const struct msg *m[8192];
	bool redelivered[8192];
};

static void
list_one(const struct msg *m, bool redelivered, void *arg)
{
	struct listing *l = arg;
	assert_true(l->n < 8192);
	l->m[l->n] = m;
	l->redelivered[l->n] = redelivered;
	l->n++;
}

/* The listing is big: one, reused. */
static struct listing listed;

static struct listing *
list_queue(struct env *e, const char *queue)
{
	listed.n = 0;
	struct dest *d = dests_find(&e->dests, queue, strlen(queue));
	if (d != NULL) {
		assert_int_equal(dest_kind(d), DEST_QUEUE);
		dest_foreach_queued(d, list_one, &listed);
		assert_int_equal(dest_depth(d), listed.n);
	}
	return &listed;
}

static void
check_body(const struct msg *m, size_t body_len)
{
	char *want = malloc(body_len + 1);
	assert_non_null(want);
	fill_body(want, m->id, body_len);
	assert_int_equal(m->body_len, body_len);
	assert_memory_equal(msg_body(m), want, body_len);
	assert_int_equal(msg_body(m)[body_len], '\0');
	free(want);
}

/* m came back as it was stored: id, header blocks, body. */
static void
check_same(const struct msg *got, const struct msg *orig)
{
	assert_int_equal(got->id, orig->id);
	assert_int_equal(msg_nblocks(got), msg_nblocks(orig));
	for (int v = 0; v < STOMP_VERSIONS; v++) {
		assert_int_equal(got->block_len[v], orig->block_len[v]);
		assert_memory_equal(msg_block(got, v), msg_block(orig, v), orig->block_len[v]);
	}
	assert_int_equal(got->body_len, orig->body_len);
	assert_memory_equal(msg_body(got), msg_body(orig), orig->body_len + 1);
	assert_true(got->persistent);
	assert_int_not_equal(store_msg_segment(got), 0);
}

/* ---- tests ---- */

static const char *
queue_for(uint64_t id)
{
	return id % 3 == 0 ? "/queue/b" : "/queue/a";
}

static void
test_messages_come_back_in_id_order(void **state)
{
	(void)state;
	enum { N = 600 }; /* enough that the id table grows while reading */
	struct env a, b;
	open_with(&a, (struct store_options){ .fsync = JOURNAL_FSYNC_ALWAYS,
	    .segment_size = 64 * KiB });
	assert_int_equal(a.rec.messages, 0);
	uint64_t base = a.next_id;
	struct msg *orig[N];
	/* Ids out of order (as a transaction commits messages sent earlier):
	 * they come back sorted. */
	for (uint64_t i = 0; i < N; i++) {
		uint64_t id = base + i * 7 % N;
		orig[id - base] = publish(&a, queue_for(id), id, body_len_for(id), id % 10 == 0);
		if (i % 50 == 49)
			commit(&a);
	}
	a.next_id = base + N;
	commit(&a);
	assert_int_equal(store_live_messages(a.s), N);
	store_close(a.s);

	open_env(&b, 64 * KiB);
	assert_int_equal(b.rec.messages, N);
	assert_int_equal(b.rec.queues, 2);
	assert_int_equal(b.rec.redelivered, 0);
	assert_int_equal(b.rec.journal.torn_bytes, 0);
	assert_int_equal(store_live_messages(b.s), N);
	assert_true(b.next_id > base + N - 1);
	size_t seen = 0;
	const char *queues[] = { "/queue/a", "/queue/b" };
	for (int q = 0; q < 2; q++) {
		struct listing *l = list_queue(&b, queues[q]);
		for (size_t i = 0; i < l->n; i++) {
			const struct msg *m = l->m[i];
			assert_true(m->id >= base && m->id < base + N);
			if (i > 0)
				assert_true(m->id > l->m[i - 1]->id);
			assert_string_equal(queue_for(m->id), queues[q]);
			assert_false(l->redelivered[i]);
			check_same(m, orig[m->id - base]);
			check_body(m, body_len_for(m->id));
		}
		seen += l->n;
	}
	assert_int_equal(seen, N);
	close_env(&b);
	for (int i = 0; i < N; i++)
		msg_unref(orig[i]);
	free_env(&a);
}

/* Where id is in ids (ascending), or n. */
static size_t
index_of(const uint64_t *ids, size_t n, uint64_t id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && ids[lo] == id ? lo : n;
}

static void
test_consumed_gone_delivered_redelivered(void **state)
{
	(void)state;
	enum { N = 2000 };
	const char *q = "/queue/work";
	struct env a, b, c;
	open_env(&a, 64 * KiB);
	/* Ids with gaps (the ids between went to messages not stored), which
	 * also makes them collide in the table that finds them while reading. */
	static uint64_t ids[N];
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		ids[i] = (i ? ids[i - 1] + 1 : a.next_id) + x % 1000;
	}
	static struct msg *m[N];
	for (size_t i = 0; i < N; i++) {
		m[i] = publish(&a, q, ids[i], 32, false);
		if (i % 100 == 99)
			commit(&a);
	}
	a.next_id = ids[N - 1] + 1;
	commit(&a);
	/* Later turns: every 5th handed to a client-ack consumer, every 3rd
	 * acknowledged (some of them after being delivered). */
	size_t consumed = 0, redelivered = 0;
	for (size_t i = 0; i < N; i++) {
		if (i % 5 == 0)
			store_delivered(a.s, m[i]);
		if (i % 3 == 0) {
			consume(&a, m[i]);
			m[i] = NULL;
			consumed++;
		} else if (i % 5 == 0) {
			redelivered++;
		}
		if (i % 100 == 99)
			commit(&a);
	}
	commit(&a);
	assert_int_equal(store_live_messages(a.s), N - consumed);
	for (size_t i = 0; i < N; i++)
		if (m[i] != NULL)
			msg_unref(m[i]);
	close_env(&a);

	open_env(&b, 64 * KiB);
	assert_int_equal(b.rec.messages, N - consumed);
	assert_int_equal(b.rec.redelivered, redelivered);
	assert_int_equal(b.rec.queues, 1);
	struct listing *l = list_queue(&b, q);
	assert_int_equal(l->n, N - consumed);
	static struct msg *back[N];
	memset(back, 0, sizeof(back));
	for (size_t k = 0; k < l->n; k++) {
		size_t i = index_of(ids, N, l->m[k]->id);
		assert_true(i < N);
		assert_true(i % 3 != 0);
		if (k > 0)
			assert_true(l->m[k]->id > l->m[k - 1]->id);
		if (l->redelivered[k] != (i % 5 == 0)) {
			print_error("message %" PRIu64 ": redelivered %d\n", l->m[k]->id, l->redelivered[k]);
			fail();
		}
		assert_int_equal(l->m[k]->delivered, i % 5 == 0);
		check_body(l->m[k], 32);
		back[i] = msg_ref((struct msg *)l->m[k]);
	}
	/* A second life: the redelivered ones are acknowledged now, every 7th
	 * of the others handed out. */
	size_t left = 0, delivered = 0;
	for (size_t i = 0; i < N; i++) {
		if (back[i] == NULL)
			continue;
		if (i % 5 == 0) {
			consume(&b, back[i]);
			continue;
		}
		left++;
		if (i % 7 == 0) {
			store_delivered(b.s, back[i]);
			delivered++;
		}
		msg_unref(back[i]);
	}
	commit(&b);
	close_env(&b);

	open_env(&c, 64 * KiB);
	assert_int_equal(c.rec.messages, left);
	assert_int_equal(c.rec.redelivered, delivered);
	l = list_queue(&c, q);
	assert_int_equal(l->n, left);
	for (size_t k = 0; k < l->n; k++) {
		size_t i = index_of(ids, N, l->m[k]->id);
		assert_true(i < N && i % 3 != 0 && i % 5 != 0);
		assert_int_equal(l->redelivered[k], i % 7 == 0);
	}
	close_env(&c);
}

static void
test_ids_unique_across_reopen(void **state)
{
	(void)state;
	struct env e;
	open_env(&e, 64 * KiB);
	/* Ids used by messages that are never stored (not persistent). */
	uint64_t used = e.next_id + 1000;
	assert_int_equal(store_commit(e.s, 0, used), 0);
	close_env(&e);
	open_env(&e, 64 * KiB);
	assert_int_equal(e.rec.messages, 0);
	assert_true(e.next_id > used);
	/* Many turns using ids fast: well past every reservation made. */
	used = e.next_id;
	for (int turn = 0; turn < 40; turn++) {
		used += (uint64_t)1 << 20;
		assert_int_equal(store_commit(e.s, 0, used), 0);
	}
	close_env(&e);
	open_env(&e, 64 * KiB);
	assert_true(e.next_id > used);
	/* Ids handed to messages and consumed: none left, still past them. */
	used = e.next_id;
	struct msg *m = publish(&e, "/queue/x", used, 10, false);
	e.next_id = used + 1;
	commit(&e);
	consume(&e, m);
	commit(&e);
	close_env(&e);
	open_env(&e, 64 * KiB);
	assert_int_equal(e.rec.messages, 0);
	assert_true(e.next_id > used);
	close_env(&e);
}

/* In a child: turns that each store a message and consume it, until a
 * commit starts a new segment (the third) and deletes the old ones; then
 * the process dies without closing the store.  The last id used goes down
 * fd. */
static void
crash_after_new_segment(int fd)
{
	struct env e;
	char err[600];
	if (try_open(&e, options(8 * KiB), err, sizeof(err)) == NULL)
		_exit(2);
	int new_segments = 0;
	for (int turn = 0; turn < 10000; turn++) {
		uint64_t id = e.next_id++;
		consume(&e, publish(&e, "/queue/c", id, 1000, false));
		if (store_commit(e.s, 0, e.next_id) != 0)
			_exit(3);
		/* Pending right after a commit: the new segment's id reservation. */
		if (store_pending(e.s) && ++new_segments == 3) {
			if (write(fd, &id, sizeof(id)) != (ssize_t)sizeof(id))
				_exit(4);
			_exit(0);
		}
	}
	_exit(5);
}

static void
test_ids_unique_after_crash(void **state)
{
	(void)state;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		crash_after_new_segment(fds[1]);
	}
	close(fds[1]);
	uint64_t used = 0;
	assert_int_equal(read(fds[0], &used, sizeof(used)), sizeof(used));
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(used > 0);
	struct env e;
	open_env(&e, 8 * KiB);
	assert_int_equal(e.rec.messages, 0);
	assert_int_equal(e.rec.journal.torn_bytes, 0);
	if (e.next_id <= used) {
		print_error("id %" PRIu64 " used before the crash, next id after it %" PRIu64 "\n",
		    used, e.next_id);
		fail();
	}
	close_env(&e);
}

/* What a reopening after the cut finds on /queue/a and /queue/b. */
static void
check_batch_cut(const uint64_t *ids, bool batch_back)
{
	struct env e;
	open_env(&e, 64 * KiB);
	/* ids[0..4] before the batch; the batch consumed ids[1] and queued
	 * ids[5..8], 5 and 7 on /queue/a, 6 and 8 on /queue/b. */
	uint64_t want_a[8], want_b[2];
	size_t na = 0, nb = 0;
	for (int i = 0; i < 5; i++)
		if (!(batch_back && i == 1))
			want_a[na++] = ids[i];
	if (batch_back) {
		want_a[na++] = ids[5];
		want_a[na++] = ids[7];
		want_b[nb++] = ids[6];
		want_b[nb++] = ids[8];
	}
	assert_int_equal(e.rec.messages, na + nb);
	struct listing *l = list_queue(&e, "/queue/a");
	assert_int_equal(l->n, na);
	for (size_t i = 0; i < na; i++) {
		assert_int_equal(l->m[i]->id, want_a[i]);
		check_body(l->m[i], body_len_for(want_a[i]));
	}
	l = list_queue(&e, "/queue/b");
	assert_int_equal(l->n, nb);
	for (size_t i = 0; i < nb; i++) {
		assert_int_equal(l->m[i]->id, want_b[i]);
		check_body(l->m[i], body_len_for(want_b[i]));
	}
	assert_true(e.next_id > ids[8]);
	close_env(&e);
}

static void
test_batch_all_or_nothing(void **state)
{
	(void)state;
	struct env e;
	open_env(&e, 64 * KiB);
	uint64_t ids[9];
	struct msg *m[9];
	for (int i = 0; i < 9; i++)
		ids[i] = e.next_id + (uint64_t)i;
	for (int i = 0; i < 5; i++)
		m[i] = publish(&e, "/queue/a", ids[i], body_len_for(ids[i]), false);
	e.next_id = ids[8] + 1;
	commit(&e);
	char path[400];
	newest_segment(path, sizeof(path));
	size_t before, size;
	free(read_whole(path, &before));
	/* A COMMIT: one consumed, four queued on two queues.  Room for them:
	 * bodies are under 320 bytes, an escaped message's blocks under 400. */
	size_t reserve = STORE_SETTLE_RECORD_SIZE;
	for (int i = 5; i < 9; i++)
		reserve += store_msg_record_size(m[0], strlen("/queue/a")) + 400;
	assert_int_equal(store_batch_reserve(e.s, reserve), 0);
	store_batch_begin(e.s);
	consume(&e, m[1]);
	m[1] = NULL;
	for (int i = 5; i < 9; i++)
		m[i] = publish(&e, i % 2 ? "/queue/a" : "/queue/b", ids[i], body_len_for(ids[i]),
		    i == 6);
	store_batch_end(e.s);
	commit(&e);
	for (int i = 0; i < 9; i++)
		if (m[i] != NULL)
			msg_unref(m[i]);
	close_env(&e);

	assert_int_equal(count_segments(NULL), 1);
	uint8_t *whole = read_whole(path, &size);
	/* The batch is one record (type 4: BATCH, see store.c), the last. */
	assert_true(size > before + JOURNAL_RECORD_HEADER);
	assert_int_equal(le32(whole + before) + JOURNAL_RECORD_HEADER, size - before);
	assert_int_equal(whole[before + 8], 4);
	for (size_t cut = before; cut <= size; cut++) {
		/* Every offset in the header, then a sample of the payload. */
		if (cut > before + JOURNAL_RECORD_HEADER && cut < size - 1 && cut % 13 != 0)
			continue;
		remove_dir(NULL);
		assert_int_equal(mkdir(dir, 0700), 0);
		write_whole(path, whole, cut);
		check_batch_cut(ids, cut == size);
		/* The torn end is cut for good: the same again. */
		check_batch_cut(ids, cut == size);
	}
	free(whole);
}

static void
test_dead_segments_deleted(void **state)
{
	(void)state;
	enum { N = 400 };
	const uint64_t segment = 64 * KiB;
	struct env e;
	open_env(&e, segment);
	struct msg *m[N];
	for (int i = 0; i < N; i++) {
		m[i] = publish(&e, "/queue/bulk", e.next_id++, 1000, false);
		if (i % 10 == 9)
			commit(&e);
	}
	commit(&e);
	uint64_t on_disk;
	size_t full = count_segments(&on_disk);
	uint64_t full_bytes = store_disk_bytes(e.s);
	assert_true(full >= 5);
	assert_int_equal(full_bytes, on_disk);
	/* Consumed a few at a time, oldest first. */
	size_t fewest = full;
	for (int i = 0; i < N; i++) {
		consume(&e, m[i]);
		if (i % 50 == 49) {
			commit(&e);
			size_t now = count_segments(&on_disk);
			assert_true(now <= fewest + 1);
			if (now < fewest)
				fewest = now;
			assert_int_equal(store_disk_bytes(e.s), on_disk);
		}
	}
	for (int turn = 0; turn < 3; turn++)
		commit(&e);
	assert_int_equal(store_live_messages(e.s), 0);
	assert_int_equal(store_live_bytes(e.s), 0);
	size_t left = count_segments(&on_disk);
	if (left > 2) {
		print_error("%zu segment files left of %zu, nothing live\n", left, full);
		fail();
	}
	assert_int_equal(store_disk_bytes(e.s), on_disk);
	assert_true(store_disk_bytes(e.s) < full_bytes / 2);
	assert_true(store_disk_bytes(e.s) <= 2 * segment);
	uint64_t last_used = e.next_id - 1;
	close_env(&e);
	open_env(&e, segment);
	assert_int_equal(e.rec.messages, 0);
	assert_true(e.rec.journal.segments <= 2);
	assert_int_equal(list_queue(&e, "/queue/bulk")->n, 0);
	assert_null(dests_find(&e.dests, "/queue/bulk", 11));
	assert_true(e.next_id > last_used);
	close_env(&e);
}

static void
test_long_lived_message_moved_forward(void **state)
{
	(void)state;
	const uint64_t segment = 16 * KiB;
	struct env e;
	open_env(&e, segment);
	uint64_t keep_id = e.next_id++;
	struct msg *keep = publish(&e, "/queue/keep", keep_id, 300, false);
	store_delivered(e.s, keep); /* a client-ack consumer holds it, for long */
	commit(&e);
	uint32_t first_seg = store_msg_segment(keep);
	size_t most = 0, moves = 0;
	uint32_t seg = store_msg_segment(keep);
	for (int turn = 0; turn < 200; turn++) {
		struct msg *churn[10];
		for (int i = 0; i < 10; i++)
			churn[i] = publish(&e, "/queue/churn", e.next_id++, 500, false);
		commit(&e);
		for (int i = 0; i < 10; i++)
			consume(&e, churn[i]);
		commit(&e);
		/* Consumed: no longer queued either. */
		dests_delete(&e.dests, dests_find(&e.dests, "/queue/churn", 12));
		uint64_t on_disk;
		size_t n = count_segments(&on_disk);
		assert_int_equal(store_disk_bytes(e.s), on_disk);
		if (n > most)
			most = n;
		if (store_msg_segment(keep) != seg) {
			assert_true(store_msg_segment(keep) > seg);
			seg = store_msg_segment(keep);
			moves++;
		}
	}
	assert_int_equal(store_live_messages(e.s), 1);
	/* 200 turns of 6 KB: about 75 segments written, few kept. */
	if (most > 4 || moves < 10) {
		print_error("at most %zu segment files, the message moved %zu times (from %u to %u)\n",
		    most, moves, first_seg, store_msg_segment(keep));
		fail();
	}
	assert_true(store_disk_bytes(e.s) <= 4 * segment);
	msg_unref(keep);
	close_env(&e);

	open_env(&e, segment);
	assert_int_equal(e.rec.messages, 1);
	assert_int_equal(e.rec.redelivered, 1);
	assert_true(e.rec.journal.segments <= 4);
	struct listing *l = list_queue(&e, "/queue/keep");
	assert_int_equal(l->n, 1);
	assert_int_equal(l->m[0]->id, keep_id);
	assert_true(l->redelivered[0]);
	check_body(l->m[0], 300);
	assert_int_equal(list_queue(&e, "/queue/churn")->n, 0);
	/* Acknowledged at last: gone for good. */
	consume(&e, msg_ref((struct msg *)l->m[0]));
	commit(&e);
	close_env(&e);
	open_env(&e, segment);
	assert_int_equal(e.rec.messages, 0);
	assert_int_equal(list_queue(&e, "/queue/keep")->n, 0);
	close_env(&e);
}

/* Scheduled messages handed back at open (store_options.scheduled). */
static struct {
	size_t n;
	struct msg *m[4];
	char dest[4][32];
	char state[4][16];
} found_sched;

static int
take_scheduled(void *arg, struct msg *m, const char *dest, size_t dest_len, const void *state,
    size_t state_len)
{
	(void)arg;
	assert_true(found_sched.n < 4 && dest_len < 32 && state_len < 16);
	size_t i = found_sched.n++;
	found_sched.m[i] = m;
	memcpy(found_sched.dest[i], dest, dest_len);
	found_sched.dest[i][dest_len] = '\0';
	memcpy(found_sched.state[i], state, state_len);
	found_sched.state[i][state_len] = '\0';
	return 0;
}

static void
open_sched(struct env *e, uint64_t segment)
{
	memset(&found_sched, 0, sizeof(found_sched));
	struct store_options opt = options(segment);
	opt.scheduled = take_scheduled;
	open_with(e, opt);
}

/* Persistent scheduled messages: kept with their state (SCHED), the newest
 * state counts, moved off old segments like any long-lived message, gone
 * after UNSCHED; the last delivery's MSG record after UNSCHED comes back in
 * its queue. */
static void
test_scheduled_kept_updated_moved_and_done(void **state)
{
	(void)state;
	const uint64_t segment = 16 * KiB;
	struct env e;
	open_sched(&e, segment);
	uint64_t a_id = e.next_id++, b_id = e.next_id++, c_id = e.next_id++;
	struct msg *a = new_msg(&e.pool, "/queue/x", a_id, 200, false);
	struct msg *b = new_msg(&e.pool, "/topic/y", b_id, 100, true);
	struct msg *c = new_msg(&e.pool, "/queue/z", c_id, 50, false);
	a->persistent = b->persistent = c->persistent = true;
	assert_int_equal(store_schedule(e.s, a, "/queue/x", 8, "a-one", 5), 0);
	assert_int_equal(store_schedule(e.s, b, "/topic/y", 8, "b-one", 5), 0);
	assert_int_equal(store_schedule(e.s, c, "/queue/z", 8, "c-one", 5), 0);
	commit(&e);
	assert_int_equal(store_live_messages(e.s), 3);
	assert_int_equal(store_schedule(e.s, a, "/queue/x", 8, "a-two!", 6), 0); /* a firing */
	assert_int_equal(store_live_messages(e.s), 3);
	commit(&e);
	uint32_t seg = store_msg_segment(a);
	for (int turn = 0; turn < 100; turn++) {
		struct msg *churn[10];
		for (int i = 0; i < 10; i++)
			churn[i] = publish(&e, "/queue/churn", e.next_id++, 500, false);
		commit(&e);
		for (int i = 0; i < 10; i++)
			consume(&e, churn[i]);
		commit(&e);
		dests_delete(&e.dests, dests_find(&e.dests, "/queue/churn", 12));
	}
	assert_true(store_msg_segment(a) > seg); /* moved forward, as SCHED */
	assert_true(store_disk_bytes(e.s) <= 4 * segment);
	/* b waits no more; c's last firing: UNSCHED, then queued (MSG). */
	store_unschedule(e.s, b);
	assert_int_equal(store_msg_segment(b), 0);
	store_unschedule(e.s, c);
	struct dest *z = dests_get(&e.dests, "/queue/z", 8, DEST_QUEUE);
	assert_int_equal(store_publish(e.s, z, c), 0);
	uint64_t dropped = 0;
	dest_publish(z, c, &dropped);
	commit(&e);
	assert_int_equal(store_live_messages(e.s), 2);
	store_close(e.s);
	e.s = NULL;
	msg_unref(a);
	msg_unref(b);
	free_env(&e);

	open_sched(&e, segment);
	assert_int_equal(e.rec.scheduled, 1);
	assert_int_equal(e.rec.messages, 1);
	assert_int_equal(found_sched.n, 1);
	assert_int_equal(found_sched.m[0]->id, a_id);
	assert_string_equal(found_sched.dest[0], "/queue/x");
	assert_string_equal(found_sched.state[0], "a-two!");
	check_body(found_sched.m[0], 200);
	assert_true(found_sched.m[0]->persistent);
	assert_true(e.next_id > c_id);
	struct listing *l = list_queue(&e, "/queue/z");
	assert_int_equal(l->n, 1);
	assert_int_equal(l->m[0]->id, c_id);
	/* Its last firing, then gone for good. */
	struct msg *back = found_sched.m[0];
	store_unschedule(e.s, back);
	commit(&e);
	store_close(e.s);
	e.s = NULL;
	msg_unref(back);
	free_env(&e);
	open_sched(&e, segment);
	assert_int_equal(e.rec.scheduled, 0);
	assert_int_equal(found_sched.n, 0);
	close_env(&e);
}

/* Hard links to every segment file in dir, in dir/snap (emptied first). */
static void
snapshot_segments(void)
{
	char snap[96];
	snprintf(snap, sizeof(snap), "%s/snap", dir);
	remove_tree(snap);
	assert_int_equal(mkdir(snap, 0700), 0);
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char from[400], to[400];
		if (!is_segment_name(e->d_name))
			continue;
		snprintf(from, sizeof(from), "%s/%s", dir, e->d_name);
		snprintf(to, sizeof(to), "%s/%s", snap, e->d_name);
		assert_int_equal(link(from, to), 0);
	}
	closedir(d);
}

/* Put back the segment files of the snapshot deleted since; how many. */
static size_t
restore_deleted_segments(void)
{
	char snap[96];
	snprintf(snap, sizeof(snap), "%s/snap", dir);
	DIR *d = opendir(snap);
	assert_non_null(d);
	struct dirent *e;
	size_t n = 0;
	while ((e = readdir(d)) != NULL) {
		char from[400], to[400];
		struct stat st;
		if (!is_segment_name(e->d_name))
			continue;
		snprintf(from, sizeof(from), "%s/%s", snap, e->d_name);
		snprintf(to, sizeof(to), "%s/%s", dir, e->d_name);
		if (stat(to, &st) == 0)
			continue;
		assert_int_equal(link(from, to), 0);
		n++;
	}
	closedir(d);
	remove_tree(snap);
	return n;
}

static void
test_moved_message_and_old_copy_come_back_once(void **state)
{
	(void)state;
	const uint64_t segment = 16 * KiB;
	struct env e;
	open_env(&e, segment);
	uint64_t keep_id = e.next_id++;
	struct msg *keep = publish(&e, "/queue/keep", keep_id, 300, false);
	commit(&e);
	store_delivered(e.s, keep);
	uint32_t seg = store_msg_segment(keep);
	int turn;
	for (turn = 0; turn < 200 && store_msg_segment(keep) == seg; turn++) {
		/* Each turn's messages consumed in the same turn: only keep is
		 * live between turns. */
		for (int i = 0; i < 10; i++)
			consume(&e, publish(&e, "/queue/churn", e.next_id++, 500, false));
		dests_delete(&e.dests, dests_find(&e.dests, "/queue/churn", 12));
		snapshot_segments();
		commit(&e);
	}
	assert_int_not_equal(store_msg_segment(keep), seg);
	msg_unref(keep);
	close_env(&e);
	/* A crash after the moved copy was written, before the segments it
	 * left were deleted: both copies on disk. */
	assert_true(restore_deleted_segments() > 0);
	open_env(&e, segment);
	assert_int_equal(e.rec.messages, 1);
	assert_int_equal(e.rec.redelivered, 1);
	struct listing *l = list_queue(&e, "/queue/keep");
	assert_int_equal(l->n, 1);
	assert_int_equal(l->m[0]->id, keep_id);
	assert_true(l->redelivered[0]);
	check_body(l->m[0], 300);
	assert_int_equal(list_queue(&e, "/queue/churn")->n, 0);
	assert_int_equal(store_live_messages(e.s), 1);
	uint64_t on_disk;
	count_segments(&on_disk);
	assert_int_equal(store_disk_bytes(e.s), on_disk);
	close_env(&e);
	open_env(&e, segment);
	assert_int_equal(e.rec.messages, 1);
	assert_int_equal(list_queue(&e, "/queue/keep")->n, 1);
	close_env(&e);
}

static void
test_damaged_record_refused_then_skipped(void **state)
{
	(void)state;
	enum { N = 120 };
	const uint64_t segment = 8 * KiB;
	struct env e;
	open_env(&e, segment);
	uint64_t base = e.next_id;
	for (int i = 0; i < N; i++) {
		msg_unref(publish(&e, "/queue/d", e.next_id++, 200, false));
		if (i % 5 == 4)
			commit(&e);
	}
	commit(&e);
	close_env(&e);
	assert_true(count_segments(NULL) >= 3);

	/* The middle MSG record (type 1, its payload starting with the id:
	 * see store.c) of the oldest segment. */
	char path[400];
	snprintf(path, sizeof(path), "%s/journal-%08u.log", dir, 1u);
	size_t size;
	uint8_t *data = read_whole(path, &size);
	size_t starts[256], n = 0;
	for (size_t pos = JOURNAL_SEGMENT_HEADER; pos < size;
	    pos += JOURNAL_RECORD_HEADER + le32(data + pos)) {
		assert_true(size - pos >= JOURNAL_RECORD_HEADER);
		if (data[pos + 8] == 1 && n < 256)
			starts[n++] = pos;
	}
	assert_true(n >= 3);
	size_t at = starts[n / 2], len = le32(data + at);
	uint64_t lost = 0;
	for (int i = 7; i >= 0; i--)
		lost = lost << 8 | data[at + JOURNAL_RECORD_HEADER + i];
	assert_true(lost >= base && lost < base + N);
	data[at + JOURNAL_RECORD_HEADER + len / 2] ^= 0x10;
	write_whole(path, data, size);
	free(data);

	char err[600], want[600];
	assert_null(try_open(&e, options(segment), err, sizeof(err)));
	free_env(&e);
	snprintf(want, sizeof(want), "%s: offset %zu", path, at);
	if (strstr(err, want) == NULL) {
		print_error("'%s' lacks '%s'\n", err, want);
		fail();
	}

	struct store_options opt = options(segment);
	opt.recover = true;
	open_with(&e, opt);
	assert_int_equal(e.rec.journal.damaged, 1);
	assert_int_equal(e.rec.messages, N - 1);
	struct listing *l = list_queue(&e, "/queue/d");
	assert_int_equal(l->n, N - 1);
	for (size_t i = 0; i < l->n; i++) {
		assert_int_not_equal(l->m[i]->id, lost);
		check_body(l->m[i], 200);
	}
	close_env(&e);
}


/* A busy life ended by a crash (the child _exits without closing): the
 * messages live at the last checkpoint are exactly the ones read back up
 * to its position, through consumption, redelivery marks and moves. */
static void
busy_then_crash(void)
{
	struct env e;
	open_env(&e, 8 * KiB);
	struct msg *keep = publish(&e, "/queue/keep", e.next_id++, 300, false);
	store_delivered(e.s, keep);
	for (int turn = 0; turn < 120; turn++) {
		struct msg *m[6];
		for (int i = 0; i < 6; i++) {
			uint64_t id = e.next_id++;
			m[i] = publish(&e, i % 2 ? "/queue/a" : "/queue/b", id, body_len_for(id), i == 3);
		}
		if (turn % 3 == 0)
			store_delivered(e.s, m[1]);
		commit(&e);
		for (int i = 0; i < 6; i++) {
			if (i < 4 || turn % 4 == 0)
				consume(&e, m[i]);
			else
				msg_unref(m[i]);
		}
		/* The last turns after the last checkpoint: same clock. */
		if (turn < 100)
			commit(&e);
		else
			assert_int_equal(store_commit(e.s, clock_ms, e.next_id), 0);
	}
	_exit(0);
}

static void
test_checkpoint_count_matches_after_a_crash(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		busy_then_crash();
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	struct env e;
	open_env(&e, 8 * KiB);
	assert_int_equal(e.rec.journal.checkpoint, JOURNAL_CHECKPOINT_READ);
	assert_true(e.rec.checkpoint_live > 1);
	assert_int_equal(e.rec.back_at_checkpoint, e.rec.checkpoint_live);
	/* The mark is not at the end: what came after it changed the count.
	 * (Not always upwards: the last checkpoint may be written in the last
	 * turns, between a turn's publishing and its consuming.) */
	assert_int_not_equal(e.rec.messages, e.rec.checkpoint_live);
	assert_int_equal(e.rec.lost, 0);
	close_env(&e);
	/* A clean stop's checkpoint is at the very end. */
	open_env(&e, 8 * KiB);
	assert_int_equal(e.rec.checkpoint_live, e.rec.messages);
	assert_int_equal(e.rec.back_at_checkpoint, e.rec.messages);
	close_env(&e);
}

/* MSG records (type 1) in a segment file. */
static size_t
msg_records_in(const char *path)
{
	size_t size, n = 0;
	uint8_t *data = read_whole(path, &size);
	for (size_t pos = JOURNAL_SEGMENT_HEADER; pos + JOURNAL_RECORD_HEADER <= size;
	    pos += JOURNAL_RECORD_HEADER + le32(data + pos))
		n += data[pos + 8] == 1;
	free(data);
	return n;
}

static void
test_missing_segment_counts_lost_messages(void **state)
{
	(void)state;
	enum { N = 300 };
	const uint64_t segment = 8 * KiB;
	struct env e;
	open_env(&e, segment);
	for (int i = 0; i < N; i++) {
		msg_unref(publish(&e, "/queue/m", e.next_id++, 200, false));
		if (i % 5 == 4)
			commit(&e);
	}
	commit(&e);
	close_env(&e);
	assert_true(count_segments(NULL) >= 5);
	char path[400];
	snprintf(path, sizeof(path), "%s/journal-%08u.log", dir, 3u);
	size_t in3 = msg_records_in(path);
	assert_true(in3 > 0);
	assert_int_equal(unlink(path), 0);

	char err[600];
	assert_null(try_open(&e, options(segment), err, sizeof(err)));
	free_env(&e);
	if (strstr(err, "journal-00000003.log is missing") == NULL ||
	    strstr(err, "--recover") == NULL) {
		print_error("'%s'\n", err);
		fail();
	}
	struct store_options opt = options(segment);
	opt.recover = true;
	open_with(&e, opt);
	assert_int_equal(e.rec.messages, N - in3);
	assert_int_equal(e.rec.checkpoint_live, N);
	assert_int_equal(e.rec.lost, in3);
	/* The segments up to the gap are moved on and go: then a start
	 * without --recover works again. */
	for (int turn = 0; turn < 20 && count_segments(NULL) > 2; turn++)
		commit(&e);
	close_env(&e);
	open_env(&e, segment);
	assert_int_equal(e.rec.messages, N - in3);
	assert_int_equal(e.rec.journal.damaged, 0);
	assert_int_equal(list_queue(&e, "/queue/m")->n, N - in3);
	close_env(&e);
}

static void
test_one_store_per_directory(void **state)
{
	(void)state;
	struct env a, b;
	open_env(&a, 64 * KiB);
	uint64_t id = a.next_id++;
	msg_unref(publish(&a, "/queue/l", id, 50, false));
	commit(&a);
	char err[600];
	assert_null(try_open(&b, options(64 * KiB), err, sizeof(err)));
	free_env(&b);
	if (strstr(err, "in use") == NULL) {
		print_error("'%s' lacks 'in use'\n", err);
		fail();
	}
	/* The first is undisturbed; once it is closed the directory opens. */
	assert_int_equal(count_segments(NULL), 1);
	commit(&a);
	close_env(&a);
	open_env(&b, 64 * KiB);
	assert_int_equal(b.rec.messages, 1);
	struct listing *l = list_queue(&b, "/queue/l");
	assert_int_equal(l->n, 1);
	assert_int_equal(l->m[0]->id, id);
	close_env(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_messages_come_back_in_id_order, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_consumed_gone_delivered_redelivered, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_ids_unique_across_reopen, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_ids_unique_after_crash, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_batch_all_or_nothing, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_dead_segments_deleted, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_long_lived_message_moved_forward, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_scheduled_kept_updated_moved_and_done, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_moved_message_and_old_copy_come_back_once,
		    make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_damaged_record_refused_then_skipped, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_one_store_per_directory, make_dir, remove_dir),
		cmocka_unit_test_setup_teardown(test_checkpoint_count_matches_after_a_crash, make_dir,
		    remove_dir),
		cmocka_unit_test_setup_teardown(test_missing_segment_counts_lost_messages, make_dir,
		    remove_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
