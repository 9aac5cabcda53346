/* stats.h - the clock, latency histograms and per-stream sequence checking. */
#ifndef EFT_BENCH_STATS_H
#define EFT_BENCH_STATS_H

#include <stdbool.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t now_ns(void);

/* Log-linear histogram of nanosecond values: exact below 256 ns, then 128
 * buckets per power of two (under 0.8% error), so memory is fixed (58 KB)
 * however many samples a run records. */
struct hist {
	uint64_t count, sum, min, max;
	uint64_t *b;
};

void hist_init(struct hist *h);
void hist_free(struct hist *h);
void hist_record(struct hist *h, uint64_t v);
/* The value below which fraction q (0..1) of the samples fall. */
uint64_t hist_quantile(const struct hist *h, double q);

/* Which of the sequence numbers 0..n-1 have arrived on one stream, and what
 * was wrong with the arrivals: duplicates, and sequence numbers lower than
 * one already seen (queues and topics promise per-producer order). */
struct tracker {
	uint64_t n;
	uint64_t *bits;
	uint64_t received;  /* every arrival, good or bad */
	uint64_t unique;
	uint64_t duplicated;
	uint64_t reordered;
	uint64_t corrupted; /* body failed its check, or a sequence number out of range */
	uint64_t high;      /* highest sequence number seen so far */
	bool any;
};

void tracker_init(struct tracker *t, uint64_t n);
void tracker_free(struct tracker *t);
/* Record arrival of seq; returns true if it is the first arrival of it. */
bool tracker_note(struct tracker *t, uint64_t seq);
/* Messages that never arrived: neither intact nor as a corrupted body. */
static inline uint64_t
tracker_lost(const struct tracker *t)
{
	uint64_t seen = t->unique + t->corrupted;
	return seen >= t->n ? 0 : t->n - seen;
}

#endif
