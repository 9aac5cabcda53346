/* stats.c - the clock, latency histograms and sequence tracking.  All of it
 * is allocated before a run starts: recording a sample never allocates. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "stats.h"

#define SUB_BITS 7
#define SUB (1u << SUB_BITS)
#define NBUCKETS ((64 - SUB_BITS + 1) * SUB)

uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Values below 2*SUB map to themselves; above, the top SUB_BITS+1 bits of a
 * value pick its bucket within its power of two. */
static size_t
bucket_of(uint64_t v)
{
	if (v < 2 * SUB)
		return (size_t)v;
	unsigned shift = (unsigned)(63 - __builtin_clzll(v)) - SUB_BITS;
	return (size_t)shift * SUB + (size_t)(v >> shift);
}

/* The middle of bucket i. */
static uint64_t
bucket_value(size_t i)
{
	if (i < 2 * SUB)
		return i;
	unsigned shift = (unsigned)(i / SUB) - 1;
	uint64_t top = i - (uint64_t)shift * SUB;
	return (top << shift) + ((1ull << shift) >> 1);
}

void
hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
	h->b = xcalloc(NBUCKETS, sizeof(*h->b));
}

void
hist_free(struct hist *h)
{
	free(h->b);
	h->b = NULL;
}

void
hist_record(struct hist *h, uint64_t v)
{
	h->b[bucket_of(v)]++;
	h->count++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

uint64_t
hist_quantile(const struct hist *h, double q)
{
	if (h->count == 0)
		return 0;
	if (q >= 1.0)
		return h->max;
	double want = q * (double)h->count;
	uint64_t rank = (uint64_t)want;
	if ((double)rank < want)
		rank++;
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (size_t i = 0; i < NBUCKETS; i++) {
		seen += h->b[i];
		if (seen >= rank) {
			uint64_t v = bucket_value(i);
			return v < h->min ? h->min : v > h->max ? h->max : v;
		}
	}
	return h->max;
}

void
tracker_init(struct tracker *t, uint64_t n)
{
	memset(t, 0, sizeof(*t));
	t->n = n;
	t->bits = xcalloc((size_t)((n + 63) / 64), sizeof(uint64_t));
}

void
tracker_free(struct tracker *t)
{
	free(t->bits);
	t->bits = NULL;
}

bool
tracker_note(struct tracker *t, uint64_t seq)
{
	t->received++;
	if (seq >= t->n) {
		t->corrupted++;
		return false;
	}
	uint64_t bit = 1ull << (seq & 63);
	if (t->bits[seq >> 6] & bit) {
		t->duplicated++;
		return false;
	}
	t->bits[seq >> 6] |= bit;
	t->unique++;
	if (t->any && seq < t->high) {
		t->reordered++;
	} else {
		t->high = seq;
		t->any = true;
	}
	return true;
}
