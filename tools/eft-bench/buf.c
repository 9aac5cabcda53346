/* buf.c - growable byte buffers and allocation that never returns NULL. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

void
fatal(const char *fmt, ...)
{
	va_list ap;
	fputs("eft-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (p == NULL)
		fatal("out of memory (%zu bytes)", n);
	return p;
}

void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (p == NULL)
		fatal("out of memory (%zu x %zu bytes)", n, size);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (q == NULL)
		fatal("out of memory (%zu bytes)", n);
	return q;
}

void
buf_init(struct buf *b, size_t cap)
{
	b->data = xmalloc(cap);
	b->start = b->len = 0;
	b->cap = cap;
}

void
buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->start = b->len = b->cap = 0;
}

char *
buf_reserve(struct buf *b, size_t n)
{
	if (b->cap - b->len >= n)
		return b->data + b->len;
	/* Move what is left to the front before growing: usually only a
	 * partial frame, so this is cheap and keeps the buffer one size. */
	if (b->start > 0) {
		size_t pending = b->len - b->start;
		memmove(b->data, b->data + b->start, pending);
		b->start = 0;
		b->len = pending;
		if (b->cap - b->len >= n)
			return b->data + b->len;
	}
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len < n)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
	return b->data + b->len;
}

void
buf_append(struct buf *b, const void *p, size_t n)
{
	memcpy(buf_reserve(b, n), p, n);
	b->len += n;
}

void
buf_consume(struct buf *b, size_t n)
{
	b->start += n;
	if (b->start == b->len)
		b->start = b->len = 0;
}
