/* report.h - what a run found, and how it is shown: a text table for
 * people, CSV or JSON Lines for scripts (columns documented in --help),
 * warnings and the progress line on stderr. */
#ifndef EFT_BENCH_REPORT_H
#define EFT_BENCH_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "stats.h"

/* One row of output: one size of one mode.  Times < 0 were not measured. */
struct result {
	char server[64];      /* the broker's CONNECTED server header */
	size_t size;
	uint64_t count;       /* messages (rpc: requests) asked for */
	int conns;            /* client connections, responder included */
	double send_s, recv_s, total_s;
	uint64_t delivered;   /* checked good deliveries (fanout: over all subscribers; rpc: replies) */
	double msgs_per_s;    /* delivered / total_s */
	double mb_per_s;      /* delivered body bytes / total_s, in 10^6 bytes */
	bool has_lat;
	double lat_us[7];     /* min, mean, p50, p90, p99, p99.9, max */
	uint64_t lost, duplicated, reordered, corrupted;
	bool complete;        /* every message went and came within the limits */
	bool expired;         /* --duration ran out during this run */
	bool unreached;       /* its first connection failed: no result, only error */
	char error[768];      /* why the run failed; "" if it did not */
};

void result_init(struct result *r, const struct opts *o, size_t size);
/* Fill the latency columns from a histogram of nanoseconds. */
void result_latency(struct result *r, const struct hist *h);
/* Rates from delivered and total_s. */
void result_rates(struct result *r);
/* True when the run counts as a success. */
bool result_ok(const struct result *r);

void report_init(const struct opts *o);
void report_row(const struct result *r);
void report_finish(void);

/* A problem worth telling about now (suppressed by --quiet). */
void report_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An error: always shown. */
void report_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Replace the progress line (only called when stderr is a terminal). */
void report_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void report_progress_clear(void);

#endif
