/* lifetime.h - the end of a queue message's life: where messages that
 * expire, are rejected, come back too often or overflow a drop-head queue
 * go (their dead-letter queue, or nowhere, counted), and the timer that
 * finds expired messages wherever they wait. */
#ifndef EFT_LIFETIME_H
#define EFT_LIFETIME_H

struct broker;

/* Give the broker's destinations their clock, policies and dead hook, and
 * start the expiry timer.  -1 if out of memory. */
int lifetime_start(struct broker *b);

#endif
