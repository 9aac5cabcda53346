/* qargs.h - RabbitMQ's queue arguments (x-max-length and the others) as
 * eftd's queue policy (policy.h).
 *
 * RabbitMQ takes them on the SUBSCRIBE that declares a queue; eftd reads
 * them on a /queue/ SUBSCRIBE, and on a topic SUBSCRIBE with a queue of its
 * own (durable.h):
 *
 *   x-max-length N             max-queue-messages (1 or more)
 *   x-max-length-bytes N       max-queue-bytes (1 or more)
 *   x-message-ttl MS           message-ttl (1 ms to ten years)
 *   x-overflow drop-head       queue-overflow = drop-head (reject-publish
 *                              and reject-publish-dlx are not eftd's:
 *                              refused)
 *   x-dead-letter-exchange ""  with x-dead-letter-routing-key NAME:
 *                              dead-letter-queue = /queue/NAME (eftd
 *                              dead-letters to queues only, so another
 *                              exchange is refused)
 *   x-max-priority N           a message priority above N counts as N
 *                              (1 to 255)
 *   x-expires MS               the queue is deleted, with what it holds,
 *                              once it has had no subscriber that long
 *                              (1 ms to ten years; lifetime.c)
 *
 * The arguments given make the policy of
 * a queue the SUBSCRIBE makes, over the one the configuration gives it
 * (which it keeps for what is not given); on a queue that exists each one
 * given must equal what the queue has, as RabbitMQ wants it
 * (PRECONDITION_FAILED, inequivalent arg). */
#ifndef EFT_QARGS_H
#define EFT_QARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "eft/policy.h"

struct frame;

enum {
	QARG_MAX_LENGTH = 1 << 0,
	QARG_MAX_LENGTH_BYTES = 1 << 1,
	QARG_MESSAGE_TTL = 1 << 2,
	QARG_OVERFLOW = 1 << 3,
	QARG_DEAD_LETTER = 1 << 4,
	QARG_MAX_PRIORITY = 1 << 5,
	QARG_EXPIRES = 1 << 6,
};

struct queue_args {
	unsigned given;               /* QARG_* bits */
	struct dest_policy values;    /* the given ones (the rest are zero) */
};

/* The arguments in f into *qa.  0 (qa->given is 0 without any), or -1
 * with *header the header at fault and why (one sentence) filled. */
int qargs_read(const struct frame *f, struct queue_args *qa, const char **header, char *why,
    size_t whylen);
/* p with the given arguments put over it. */
void qargs_apply(const struct queue_args *qa, struct dest_policy *p);
/* The first given argument whose value is not p's (its header's name), or
 * NULL if they all are. */
const char *qargs_differ(const struct queue_args *qa, const struct dest_policy *p);

#endif
