/* store-fuzzer.c - libFuzzer harness for the durable store's journal replay.
 *
 * A journal is read back at every start, and what it holds decides which
 * messages come back in which queues: store.c's parsing of record payloads
 * (MSG, DELIVERED, CONSUMED, BATCH, IDS, SUB, UNSUB, SCHED, UNSCHED) must
 * survive any bytes that a CRC lets through.  So the input is made into records with correct
 * CRCs, and replay gets past the journal's checks to the store's parsing.
 *
 * Input: records, each 1 byte type, 2 bytes payload length (little-endian),
 * the payload (cut to what is left).  They become one valid segment,
 * journal-00000001.log, in a directory made once per process, and
 * store_open reads it.  If it refuses, nothing may leak.  If it opens, every
 * destination's bookkeeping must hold (dest_check), and every recovered id
 * must be below the next id; then the store is closed and opened again on
 * what it left (its own records): the same messages must come back in the
 * same queues, with the same durable subscriptions.  Scheduled messages
 * (SCHED) are handed, as eftd does, to a schedule (schedule_restore, with no
 * broker: the heap alone), which refuses states it cannot read; the ones it
 * took must come back the same too: id, destination, the state's bytes and
 * what schedule.c read from them (due time, firings left, spec), the
 * message.  Every queued message is then consumed as an acknowledgement
 * would (store_consumed), every scheduled one marked done as its last
 * delivery does (store_unschedule), and the store closed without a commit
 * that would let the old segments go: a third open reads the old records
 * and the marks, and must find none of the messages, and the subscriptions
 * still there; it lets the old segments go, and a fourth open must find
 * the same.  Any violation abort()s; ASan, UBSan and LeakSanitizer catch
 * the rest.
 *
 * The journal is opened with fsync = no; it still syncs each new segment's
 * header and its checkpoint once per open (up to four opens an input), so
 * the directory is on tmpfs (/dev/shm) when there is one. */
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eft/crc32c.h"
#include "eft/dest.h"
#include "eft/journal.h"
#include "eft/log.h"
#include "eft/msg.h"
#include "eft/schedule.h"
#include "eft/store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZER "store-fuzzer"
#include "check.h"

static char dir[64];

/* Empty the directory (segments, CHECKPOINT and LOCK) for the next input. */
static void
clean_dir(void)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char path[sizeof(dir) + 300];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
}

static void
remove_dir(void)
{
	clean_dir();
	rmdir(dir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(EFT_LOG_ERROR);
	/* On tmpfs when there is one: the journal's fsyncs (each open makes a
	 * segment and writes its checkpoint) then cost nothing (measured:
	 * 5,600 inputs a second, against 270 on this machine's ext4). */
	snprintf(dir, sizeof(dir), "%s/eft-store-fuzzer.XXXXXX",
	    access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (mkdtemp(dir) == NULL) {
		perror("store-fuzzer: mkdtemp");
		abort();
	}
	atexit(remove_dir);
	return 0;
}

static void
put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The input's records as segment 1, with the journal's header and CRCs. */
static void
write_segment(const uint8_t *data, size_t size)
{
	/* An input record of n payload bytes takes at least 1 + n input bytes
	 * (its head may be cut short) and 12 + n in the segment. */
	uint8_t *buf = malloc(JOURNAL_SEGMENT_HEADER + (JOURNAL_RECORD_HEADER + 1) * size);
	CHECK(buf != NULL, "out of memory");
	memcpy(buf, "EFTJRNL1", 8);
	put_u32(buf + 8, 2);             /* version 2 */
	put_u32(buf + 12, 1);            /* segment 1 */
	memset(buf + 16, 0, 8);          /* no segment before it */
	size_t len = JOURNAL_SEGMENT_HEADER, pos = 0;
	while (pos < size) {
		uint8_t type = data[pos++];
		size_t n = 0;
		if (pos < size)
			n = data[pos++];
		if (pos < size)
			n |= (size_t)data[pos++] << 8;
		if (n > size - pos)
			n = size - pos;
		uint8_t *hdr = buf + len;
		put_u32(hdr, (uint32_t)n);
		hdr[8] = type;
		hdr[9] = hdr[10] = hdr[11] = 0;
		memcpy(hdr + JOURNAL_RECORD_HEADER, data + pos, n);
		uint8_t around[8];
		memcpy(around, hdr, 4);
		memcpy(around + 4, hdr + 8, 4);
		put_u32(hdr + 4, crc32c(crc32c(0, around, 8), data + pos, n));
		len += JOURNAL_RECORD_HEADER + n;
		pos += n;
	}
	char path[sizeof(dir) + 32];
	snprintf(path, sizeof(path), "%s/journal-00000001.log", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0, "cannot create %s", path);
	CHECK(write(fd, buf, len) == (ssize_t)len, "cannot write %s", path);
	close(fd);
	free(buf);
}

/* ---- what a store recovered, as sorted lines ---- */

struct snap {
	char **line;
	size_t n, cap;
	uint64_t max_id;     /* of the recovered messages, queued or scheduled */
	size_t messages;
	size_t scheduled;
};

static void
snap_add(struct snap *sn, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	CHECK(len >= 0, "vsnprintf");
	char *s = malloc((size_t)len + 1);
	CHECK(s != NULL, "out of memory");
	va_start(ap, fmt);
	vsnprintf(s, (size_t)len + 1, fmt, ap);
	va_end(ap);
	if (sn->n == sn->cap) {
		sn->cap = sn->cap ? sn->cap * 2 : 16;
		sn->line = realloc(sn->line, sn->cap * sizeof(*sn->line));
		CHECK(sn->line != NULL, "out of memory");
	}
	sn->line[sn->n++] = s;
}

static void
snap_free(struct snap *sn)
{
	for (size_t i = 0; i < sn->n; i++)
		free(sn->line[i]);
	free(sn->line);
	memset(sn, 0, sizeof(*sn));
}

/* Names may hold any bytes: hex. */
static char *
hex(const char *p, size_t len)
{
	char *out = malloc(2 * len + 1);
	CHECK(out != NULL, "out of memory");
	for (size_t i = 0; i < len; i++)
		snprintf(out + 2 * i, 3, "%02x", (unsigned char)p[i]);
	out[2 * len] = '\0';
	return out;
}

struct walk {
	struct snap *sn;
	const char *queue;   /* hex */
	size_t index;
	bool messages;       /* list messages too, not only subscriptions */
};

static void
snap_msg(const struct msg *m, bool redelivered, void *arg)
{
	struct walk *w = arg;
	uint32_t blocks = 0;
	for (int v = 0; v < STOMP_VERSIONS; v++)
		blocks = crc32c(blocks, msg_block(m, v), m->block_len[v]);
	snap_add(w->sn, "M %s %08zu %llu %d %zu %08x %08x", w->queue, w->index++,
	    (unsigned long long)m->id, redelivered, m->body_len,
	    crc32c(0, msg_body(m), m->body_len), blocks);
	CHECK(msg_body(m)[m->body_len] == '\0', "body not NUL-terminated");
	CHECK(m->persistent && m->kept != NULL, "recovered message %llu not stored",
	    (unsigned long long)m->id);
	if (m->id > w->sn->max_id)
		w->sn->max_id = m->id;
	w->sn->messages++;
}

static void
snap_dest(const struct dest *d, void *arg)
{
	struct walk *w = arg;
	const char *bad = dest_check(d);
	CHECK(bad == NULL, "%s: %s", dest_name(d), bad);
	char *name = hex(dest_name(d), dest_name_len(d));
	const struct dest *t = dest_bound_topic(d);
	if (t != NULL) {
		char *topic = hex(dest_name(t), dest_name_len(t));
		snap_add(w->sn, "B %s %s", name, topic);
		free(topic);
	}
	if (w->messages && dest_kind(d) == DEST_QUEUE) {
		w->queue = name;
		w->index = 0;
		dest_foreach_queued(d, snap_msg, w);
	}
	free(name);
}

static int
cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}


static void
snap_compare(const struct snap *a, const struct snap *b, const char *when)
{
	for (size_t i = 0; i < a->n && i < b->n; i++)
		CHECK(strcmp(a->line[i], b->line[i]) == 0, "%s: %s became %s", when, a->line[i],
		    b->line[i]);
	CHECK(a->n == b->n, "%s: %zu lines became %zu (%s)", when, a->n, b->n,
	    a->n > b->n ? a->line[b->n] : b->line[a->n]);
}

/* ---- one store over the directory ---- */

struct env {
	struct dests dests;
	struct msg_pool pool;
	struct schedule sched;   /* the scheduled messages the store handed back */
	struct snap states;      /* ... the bytes of their states, as handed */
	uint64_t next_id;
	struct store *s;
	struct store_recovered rec;
	char err[600];
};

/* store_open's hook, as broker.c's: the schedule takes m or refuses the
 * state (then the store drops it).  What it took is noted with its state's
 * bytes. */
static int
restore_scheduled(void *arg, struct msg *m, const char *dest, size_t dest_len, const void *state,
    size_t state_len)
{
	struct env *e = arg;
	CHECK(dest_len > 0, "scheduled message %llu for no destination", (unsigned long long)m->id);
	CHECK(m->kept != NULL, "scheduled message %llu handed back not stored",
	    (unsigned long long)m->id);
	if (schedule_restore(&e->sched, m, dest, dest_len, state, state_len) != 0)
		return -1;
	char *h = hex(state, state_len);
	snap_add(&e->states, "S %llu %s", (unsigned long long)m->id, h);
	free(h);
	return 0;
}

/* A scheduled message as the schedule holds it. */
static void
snap_entry(struct snap *sn, const struct schedule_entry *en)
{
	const struct msg *m = en->m;
	CHECK(m != NULL && m->id == en->id, "schedule entry %llu without its message",
	    (unsigned long long)en->id);
	CHECK(m->kept != NULL, "scheduled message %llu not stored", (unsigned long long)m->id);
	CHECK(msg_body(m)[m->body_len] == '\0', "body not NUL-terminated");
	uint32_t blocks = 0;
	for (int v = 0; v < STOMP_VERSIONS; v++)
		blocks = crc32c(blocks, msg_block(m, v), m->block_len[v]);
	char *name = hex(en->dest, en->dest_len);
	const struct schedule_spec *sp = &en->spec;
	const struct cron *c = &sp->cron;
	snap_add(sn, "T %llu %s %d due %llu round %llu left %u repeat %u delay %llu period %llu "
	    "cron %d %llx %x %x %x %x %d %d msg %d %llu %u %d %zu %08x %08x",
	    (unsigned long long)en->id, name, (int)en->kind, (unsigned long long)en->due_ms,
	    (unsigned long long)en->round_ms, en->left, sp->repeat,
	    (unsigned long long)sp->delay_ms, (unsigned long long)sp->period_ms, sp->has_cron,
	    (unsigned long long)c->minutes, (unsigned)c->hours, (unsigned)c->days,
	    (unsigned)c->months, (unsigned)c->weekdays, c->days_any, c->weekdays_any,
	    m->delivered, (unsigned long long)m->expires_ms, (unsigned)m->priority, m->dead,
	    m->body_len, crc32c(0, msg_body(m), m->body_len), blocks);
	free(name);
	if (m->id > sn->max_id)
		sn->max_id = m->id;
	sn->scheduled++;
}

/* What the store recovered: bindings, and with messages the queued and the
 * scheduled messages. */
static void
snapshot(const struct env *e, bool messages, struct snap *sn)
{
	memset(sn, 0, sizeof(*sn));
	struct walk w = { .sn = sn, .messages = messages };
	dests_foreach(&e->dests, snap_dest, &w);
	if (messages) {
		for (size_t i = 0; i < e->sched.n; i++)
			snap_entry(sn, e->sched.heap[i]);
		for (size_t i = 0; i < e->states.n; i++)
			snap_add(sn, "%s", e->states.line[i]);
	}
	if (sn->n > 1)
		qsort(sn->line, sn->n, sizeof(*sn->line), cmp_line);
}

static struct store *
env_open(struct env *e)
{
	memset(e, 0, sizeof(*e));
	msg_pool_init(&e->pool, 0);
	schedule_init(&e->sched, NULL, NULL, SIZE_MAX);
	e->next_id = 1;
	struct store_options opt = { .dir = dir, .fsync = JOURNAL_FSYNC_NO, .recover = false,
		.segment_size = 1 << 20, .scheduled = restore_scheduled, .scheduled_arg = e };
	e->s = store_open(&opt, &e->dests, &e->pool, &e->next_id, &e->rec, e->err, sizeof(e->err));
	return e->s;
}

/* As eftd shuts down: the store (while its messages live), the schedule,
 * the queues, the message pool. */
static void
env_close(struct env *e)
{
	store_close(e->s);
	schedule_fini(&e->sched);
	snap_free(&e->states);
	dests_free(&e->dests);
	msg_pool_drain(&e->pool);
	e->s = NULL;
}

/* Ids handed out from next_id must never meet a recovered one.  (Ids near
 * 2^64 are left out: eftd cannot come near them, and the reservation ahead
 * wraps there.) */
static void
check_ids(const struct env *e, const struct snap *sn)
{
	CHECK(e->rec.messages == sn->messages, "%llu messages recovered, %zu queued",
	    (unsigned long long)e->rec.messages, sn->messages);
	CHECK(e->rec.scheduled == sn->scheduled && e->sched.n == sn->scheduled,
	    "%llu scheduled messages recovered, %zu in the schedule",
	    (unsigned long long)e->rec.scheduled, sn->scheduled);
	CHECK(store_live_messages(e->s) == sn->messages + sn->scheduled,
	    "%llu messages live, %zu queued and %zu scheduled",
	    (unsigned long long)store_live_messages(e->s), sn->messages, sn->scheduled);
	if (sn->max_id >= UINT64_MAX / 2 || e->next_id >= UINT64_MAX / 2)
		return;
	CHECK(sn->messages + sn->scheduled == 0 || sn->max_id < e->next_id,
	    "message %llu recovered, next id %llu", (unsigned long long)sn->max_id,
	    (unsigned long long)e->next_id);
}

static void
forget_stored(struct msg *m, void *arg)
{
	struct store *s = arg;
	if (m->kept != NULL)
		store_consumed(s, m);
}

struct names {
	char **name;
	size_t *len;
	size_t n;
};

static void
collect_queue(const struct dest *d, void *arg)
{
	struct names *q = arg;
	if (dest_kind(d) != DEST_QUEUE || dest_depth(d) == 0)
		return;
	char *copy = malloc(dest_name_len(d) + 1);
	CHECK(copy != NULL, "out of memory");
	memcpy(copy, dest_name(d), dest_name_len(d));
	copy[dest_name_len(d)] = '\0';
	q->name[q->n] = copy;
	q->len[q->n++] = dest_name_len(d);
}

/* Every queued message acknowledged, as durable.c drops a queue's. */
static void
consume_all(struct env *e)
{
	/* dests_foreach's callback must not change the table: names first. */
	struct names q = { malloc((e->dests.count + 1) * sizeof(char *)),
		malloc((e->dests.count + 1) * sizeof(size_t)), 0 };
	CHECK(q.name != NULL && q.len != NULL, "out of memory");
	dests_foreach(&e->dests, collect_queue, &q);
	for (size_t i = 0; i < q.n; i++) {
		struct dest *d = dests_find(&e->dests, q.name[i], q.len[i]);
		CHECK(d != NULL, "queue %s gone", q.name[i]);
		dest_purge(d, forget_stored, e->s);
		free(q.name[i]);
	}
	free(q.name);
	free(q.len);
	/* Every scheduled message at its last delivery: marked done.  The
	 * schedule still holds them (and frees them at env_close). */
	for (size_t i = 0; i < e->sched.n; i++) {
		struct msg *m = e->sched.heap[i]->m;
		store_unschedule(e->s, m);
		CHECK(m->kept == NULL, "scheduled message %llu still stored after store_unschedule",
		    (unsigned long long)m->id);
	}
	CHECK(store_live_messages(e->s) == 0, "%llu messages still live after consuming all",
	    (unsigned long long)store_live_messages(e->s));
}

/* Open again after everything was consumed: no message, queued or
 * scheduled, may come back, and the subscriptions must be subs. */
static void
reopen_empty(struct env *e, const struct snap *subs, const char *when)
{
	CHECK(env_open(e) != NULL, "%s: %s", when, e->err);
	struct snap all, bound;
	snapshot(e, true, &all);
	snapshot(e, false, &bound);
	CHECK(all.messages == 0, "%s: %zu consumed messages came back", when, all.messages);
	CHECK(all.scheduled == 0 && e->rec.scheduled == 0,
	    "%s: %zu scheduled messages came back after being marked done", when, all.scheduled);
	CHECK(store_live_messages(e->s) == 0, "%s: %llu messages live", when,
	    (unsigned long long)store_live_messages(e->s));
	snap_compare(subs, &bound, when);
	snap_free(&all);
	snap_free(&bound);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	clean_dir();
	write_segment(data, size);

	struct env e;
	if (env_open(&e) == NULL) {
		CHECK(e.err[0] != '\0', "store_open failed without a reason");
		schedule_fini(&e.sched); /* what it took before the open failed */
		snap_free(&e.states);
		dests_free(&e.dests);
		msg_pool_drain(&e.pool);
		clean_dir();
		return 0;
	}
	struct snap first;
	snapshot(&e, true, &first);
	check_ids(&e, &first);
	uint64_t next1 = e.next_id;
	env_close(&e);

	/* Again, on what the store left: the same must come back. */
	CHECK(env_open(&e) != NULL, "reopening: %s", e.err);
	struct snap second;
	snapshot(&e, true, &second);
	check_ids(&e, &second);
	snap_compare(&first, &second, "reopened");
	if (next1 < UINT64_MAX / 2)
		CHECK(e.next_id >= next1, "next id went back from %llu to %llu",
		    (unsigned long long)next1, (unsigned long long)e.next_id);
	/* Consumed, and closed with no commit of its own: store_close writes
	 * the marks but lets no segment go (as a kill -9 right after they were
	 * written would leave it), so the next open reads the old records and
	 * then the marks, which must hold.  (A commit would let the old
	 * segments go, and the marks would never be read.) */
	consume_all(&e);
	env_close(&e);

	/* Everything was acknowledged or done: nothing comes back but the
	 * subscriptions; this open lets the old segments go. */
	struct snap first_subs;
	memset(&first_subs, 0, sizeof(first_subs));
	for (size_t i = 0; i < first.n; i++)
		if (first.line[i][0] == 'B')
			snap_add(&first_subs, "%s", first.line[i]);
	reopen_empty(&e, &first_subs, "reopened after consuming");
	CHECK(store_commit(e.s, 0, e.next_id) == 0, "commit: %s", store_error(e.s));
	env_close(&e);
	/* Again without them: the subscriptions are in the new segments. */
	reopen_empty(&e, &first_subs, "reopened after the old segments went");
	env_close(&e);

	snap_free(&first_subs);
	snap_free(&first);
	snap_free(&second);
	clean_dir();
	return 0;
}
