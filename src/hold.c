/* hold.c - output that waits for a backend to keep a promise (hold.h).
 * The holds of a connection are a ring, oldest first. */
#include <stdlib.h>

#include <event2/buffer.h>

#include "eft/hold.h"

static struct hold *
hold_at(const struct holds *h, uint32_t i)
{
	return &h->ring[(h->head + i) % h->cap];
}

int
hold_reserve(struct holds *h)
{
	if (h->n < h->cap)
		return 0;
	uint32_t cap = h->cap ? 2 * h->cap : 16;
	struct hold *ring = malloc((size_t)cap * sizeof(*ring));
	if (ring == NULL)
		return -1;
	for (uint32_t i = 0; i < h->n; i++)
		ring[i] = *hold_at(h, i);
	free(h->ring);
	h->ring = ring;
	h->cap = cap;
	h->head = 0;
	return 0;
}

void
hold_add(struct holds *h, uint64_t at, uint64_t end, uint64_t seq)
{
	*hold_at(h, h->n) = (struct hold){ .at = at, .end = end, .seq = seq };
	h->n++;
}

bool
hold_release(struct holds *h, uint64_t kept)
{
	uint32_t before = h->n;
	while (h->n > 0 && h->ring[h->head].seq <= kept) {
		h->head = (h->head + 1) % h->cap;
		h->n--;
	}
	return h->n != before;
}

int
hold_cut(struct holds *h, struct evbuffer *buf, uint64_t base)
{
	struct evbuffer *kept = evbuffer_new();
	if (kept == NULL)
		return -1;
	/* Move what stays into kept, piece by piece, dropping each RECEIPT;
	 * whole chains move without copying. */
	uint64_t pos = base;
	int rc = 0;
	for (uint32_t i = 0; i < h->n && rc == 0; i++) {
		const struct hold *x = hold_at(h, i);
		size_t len = (size_t)(x->at - pos);
		if (evbuffer_remove_buffer(buf, kept, len) != (int)len ||
		    evbuffer_drain(buf, (size_t)(x->end - x->at)) != 0)
			rc = -1;
		pos = x->end;
	}
	if (rc == 0 && (evbuffer_add_buffer(kept, buf) != 0 || evbuffer_add_buffer(buf, kept) != 0))
		rc = -1;
	evbuffer_free(kept);
	h->n = 0;
	h->head = 0;
	return rc;
}

void
hold_free(struct holds *h)
{
	free(h->ring);
	*h = (struct holds){ 0 };
}
