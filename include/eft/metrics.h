/* metrics.h - the broker's state in Prometheus's text format (0.0.4),
 * computed when scraped: the hot path only counts (broker_stats), and the
 * per-destination series are read from the destinations here. */
#ifndef EFT_METRICS_H
#define EFT_METRICS_H

#include "eft/sbuf.h"

struct broker;

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

void metrics_render(struct broker *b, struct sbuf *out);

#endif
