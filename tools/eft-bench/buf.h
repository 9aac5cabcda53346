/* buf.h - a growable byte buffer, the unit of all I/O in eft-bench, and
 * allocation helpers that cannot return NULL (a benchmark that runs out of
 * memory has nothing sensible left to report). */
#ifndef EFT_BENCH_BUF_H
#define EFT_BENCH_BUF_H

#include <stddef.h>

/* Valid bytes are data[start, len); free room is data[len, cap). */
struct buf {
	char *data;
	size_t start, len, cap;
};

void buf_init(struct buf *b, size_t cap);
void buf_free(struct buf *b);
/* Room for at least n more bytes at data + len (compacting or growing). */
char *buf_reserve(struct buf *b, size_t n);
void buf_append(struct buf *b, const void *p, size_t n);
/* Drop n bytes from the front. */
void buf_consume(struct buf *b, size_t n);

static inline size_t
buf_pending(const struct buf *b)
{
	return b->len - b->start;
}

static inline void
buf_commit(struct buf *b, size_t n)
{
	b->len += n;
}

static inline void
buf_clear(struct buf *b)
{
	b->start = b->len = 0;
}

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
