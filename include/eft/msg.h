/* msg.h - a published message: parsed once, immutable, reference-counted.
 *
 * Every queue slot, pending acknowledgement and output buffer that holds the
 * message holds a reference; the body is never copied per delivery.  The
 * headers that are the same for every delivery (destination, message-id, the
 * sender's own headers, content-length) are encoded once per STOMP version
 * into a ready-to-write block; a delivery only adds MESSAGE, subscription and
 * ack lines in front of it. */
#ifndef EFT_MSG_H
#define EFT_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "eft/frame.h"

/* Freed message blocks kept for reuse, by size: a burst of sends then
 * receives recycles memory instead of going through malloc and fresh pages
 * each time.  A class per 16 bytes up to MSG_POOL_MAX, the steps of glibc's
 * own chunks, so a pooled block wastes no more than malloc would.  Bounded
 * by max_bytes; single-threaded like the rest. */
#define MSG_ALLOC_STEP 16
#define MSG_POOL_MAX 8192
#define MSG_POOL_CLASSES (MSG_POOL_MAX / MSG_ALLOC_STEP)

struct msg_pool {
	struct msg *free[MSG_POOL_CLASSES];
	size_t bytes;      /* held in the free lists */
	size_t max_bytes;
	size_t live_bytes; /* held by messages still referenced: queued, unacked, in output */
	/* A message freed while its backend still has a handle on it (m->kept,
	 * never settled: eftd stopping): the backend lets go of the handle.
	 * Registered by the backend that needs it, or NULL. */
	void (*drop_kept)(struct msg *m);
	/* The decimal text of the last id msg_new wrote: ids come one after
	 * another, and the next one's text is this one's plus one, without a
	 * division (id_len 0: none yet). */
	uint64_t id_last;
	char id_text[24];
	size_t id_len;
};

/* Most a message counts of its returns (max-redeliveries is below it). */
#define MSG_RETURNS_MAX ((1u << 21) - 1)

/* One per message queued or in flight, so it is kept small (80 bytes): no
 * pointers into its own data, the small fields in bits. */
struct msg {
	uint32_t refs;
	uint32_t size;                     /* bytes allocated (msg_alloc_size), for accounting */
	uint32_t expiry_slot;              /* 1 + its index in the expiry heap; 0: not there */
	uint32_t body_len;                 /* the body: after the blocks, then a NUL */
	/* Encoded common headers, per version, at the start of data: one block
	 * serving every version (all three lengths the same), or, with
	 * multi_block, the three one after another. */
	uint32_t block_len[STOMP_VERSIONS];
	union {
		struct {
			/* priority and the flags in the first byte: read with one load */
			uint32_t priority : 4;   /* 0-9 (JMS), 4 unless the SEND said otherwise */
			bool multi_block : 1;
			bool persistent : 1;     /* to be stored when it is queued */
			bool delivered : 1;      /* stored as handed to a consumer */
			bool dead : 1;           /* a dead letter: never dead-lettered again */
			bool redelivered : 1;    /* queued again after a consumer had it */
			bool queued : 1;         /* on its queue's list (qprev, qnext) */
			/* expiration:0 (RabbitMQ's TTL 0): taken by a consumer as it
			 * arrives, or it dies then (dest_publish); expires_ms is its
			 * SEND's time. */
			bool now_or_never : 1;
			uint32_t returns : 21;   /* times given back unacknowledged, up to MSG_RETURNS_MAX */
		};
		uint32_t bits; /* all of them: a new message clears them in one store */
	};
	uint64_t expires_ms;               /* wall clock, ms since the epoch; 0: never */
	struct msg *qprev, *qnext;         /* its queue's list at its priority (dest.c) */
	union {
		struct msg_pool *pool;     /* in use: where to return it */
		struct msg *next_free;     /* in a pool's free list */
	};
	uint64_t id;
	/* The backend's handle on it while the backend keeps it (backend.h):
	 * the journal's bookkeeping of its record, or JetStream's ack subject.
	 * NULL: it lives in memory only.  Only the backend looks inside. */
	void *kept;
	char data[];
};

/* The header blocks' bytes in all. */
static inline size_t
msg_blocks_len(const struct msg *m)
{
	size_t len = m->block_len[0];
	if (m->multi_block)
		len += m->block_len[1] + m->block_len[2];
	return len;
}

/* m's header block for version v: block_len[v] bytes. */
static inline const char *
msg_block(const struct msg *m, enum stomp_version v)
{
	size_t off = 0;
	if (m->multi_block)
		for (int i = 0; i < (int)v; i++)
			off += m->block_len[i];
	return m->data + off;
}

/* The body: body_len bytes, then a NUL. */
static inline const char *
msg_body(const struct msg *m)
{
	return m->data + msg_blocks_len(m);
}

/* The blocks (msg_nblocks of them) and then the body, without its NUL: one
 * run of *len bytes, which the journal and the cluster store as it is
 * behind their own heads. */
static inline const char *
msg_blocks_and_body(const struct msg *m, size_t *len)
{
	*len = msg_blocks_len(m) + m->body_len;
	return m->data;
}

/* The bytes a message of n bytes (struct, blocks, body and its NUL) takes:
 * n rounded so that with malloc's 8-byte head it fills a 16-byte step,
 * the way glibc lays out its chunks. */
static inline size_t
msg_alloc_size(size_t n)
{
	return ((n + 8 + MSG_ALLOC_STEP - 1) & ~(size_t)(MSG_ALLOC_STEP - 1)) - 8;
}

struct msg_spec {
	struct msg_pool *pool;
	const struct frame *frame;  /* the SEND frame as the parser gave it: headers unescaped,
	                               its content-length (if any) the body's length */
	const char *dest;
	size_t dest_len;
	uint64_t id;
	const char *reply_to;       /* replaces the frame's reply-to, if not NULL */
	size_t reply_to_len;
	uint8_t priority;           /* 0-9 */
	bool now_or_never;          /* expiration:0 */
	uint64_t expires_ms;        /* 0: never */
};

#define MSG_PRIORITY_DEFAULT 4
#define MSG_PRIORITIES 10

void msg_pool_init(struct msg_pool *pool, size_t max_bytes);
void msg_pool_drain(struct msg_pool *pool);

/* NULL if out of memory.  The new message has one reference. */
struct msg *msg_new(const struct msg_spec *spec);

static inline struct msg *
msg_ref(struct msg *m)
{
	m->refs++;
	return m;
}

/* A message as the journal stored it: its id, its header block(s) (one
 * serves every version, or one per version) and its body.  NULL if out of
 * memory or nblocks is neither. */
struct msg *msg_restore(struct msg_pool *pool, uint64_t id, int nblocks, const char *const *blocks,
    const uint32_t *block_lens, const char *body, size_t body_len);
/* As msg_restore, with id in place of the value of each block's message-id
 * line.  NULL if out of memory, nblocks is neither, or a block has no
 * message-id line. */
struct msg *msg_restore_as(struct msg_pool *pool, uint64_t id, int nblocks,
    const char *const *blocks, const uint32_t *block_lens, const char *body, size_t body_len);
/* A copy of m with another id (its message-id header too), for a durable
 * subscription's queue; persistent, priority and expiry as m.  NULL if out
 * of memory or a block of m has no message-id line. */
struct msg *msg_clone(struct msg_pool *pool, const struct msg *m, uint64_t id);
/* A copy of m for the dead-letter queue dlq (dlq_len bytes) with id id, as
 * the journal would restore it (msg_restore), the body copied.  Its header
 * block(s), for every version m has one for, hold in this order:
 * destination:<dlq>, message-id:<id>, x-death-reason:<reason>,
 * x-original-destination:<m's destination>, x-death-time:<time_ms>, then
 * m's other lines in their order, content-length last as it was, without
 * expires, expiration or an earlier death record (x-death-reason,
 * x-original-destination, x-death-time): a dead letter does not expire with
 * the TTL it had and carries one death record.  dlq and reason (a string)
 * come raw and are escaped per version as msg_new does, a 1.0 block leaving
 * out what 1.0 cannot carry (then one block for every version becomes one
 * per version); m's destination is copied from m's block of that version,
 * already encoded for it (absent from a 1.0 block, it is absent there too).
 * Persistent and priority as m, dead, no expiry, not redelivered, one
 * reference.  NULL if out of memory or a block of m is malformed (a line
 * without its newline, no message-id line).  m is not changed either way:
 * the caller keeps its reference. */
struct msg *msg_dead_letter(struct msg_pool *pool, const struct msg *m, uint64_t id,
    const char *dlq, size_t dlq_len, const char *reason, uint64_t time_ms);
/* How many distinct header blocks m has (1, or STOMP_VERSIONS). */
static inline int
msg_nblocks(const struct msg *m)
{
	return m->multi_block ? STOMP_VERSIONS : 1;
}

/* A header block is a run of "name:value\n" lines encoded for its version:
 * raw in 1.0, escaped in 1.1 and 1.2 (where a ':' in a name or value is
 * written "\c").  No block holds a name with a ':' in it as it is, so the
 * first ':' of a line ends its name.  These two walk one; the rest of msg.c
 * and whoever reads a block goes through them.
 *
 * The line at *pos (before end), without its '\n', into *line and *len;
 * *pos moves past the '\n'.  False at the end of the block, and where what
 * is left has no '\n': a malformed block, then *pos != end. */
static inline bool
msg_line_next(const char **pos, const char *end, const char **line, size_t *len)
{
	const char *p = *pos;
	if (p >= end)
		return false;
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	if (nl == NULL)
		return false;
	*line = p;
	*len = (size_t)(nl - p);
	*pos = nl + 1;
	return true;
}

/* Is the line (line, len) the header named name (nlen bytes, encoded as the
 * block encodes it)?  If so its value, as encoded, into *value and *vlen. */
static inline bool
msg_line_is(const char *line, size_t len, const char *name, size_t nlen, const char **value,
    size_t *vlen)
{
	if (len <= nlen || line[nlen] != ':' || memcmp(line, name, nlen) != 0)
		return false;
	*value = line + nlen + 1;
	*vlen = len - nlen - 1;
	return true;
}

/* The value of the first header named name (len bytes) in m, from its
 * STOMP 1.0 block: raw, as the sender meant it, not escaped.  *value points
 * into the block and lives as long as m.  The block holds the destination,
 * message-id, the sender's headers and content-length; a header 1.0 cannot
 * carry (a newline or CR in its value; a ':', newline or CR in its name) is
 * not in it, and is not found, nor is a destination with a newline; a name
 * asked for with a ':' in it is never found.  False if absent.  Per
 * delivery for selectors: one pass, no allocation. */
bool msg_header(const struct msg *m, const char *name, size_t len, const char **value,
    size_t *vlen);

void msg_unref(struct msg *m);
/* Decimal digits of n and a NUL at out (room for 21 bytes); returns the length. */
size_t msg_format_u64(char *out, uint64_t n);
/* For evbuffer_add_reference: drop the reference an output buffer held. */
void msg_unref_cb(const void *data, size_t len, void *msg);

#endif
