/* policy.h - what a destination does with its messages: queue limits,
 * overflow, message lifetimes and dead letters.
 *
 * The global settings (max-queue-messages, queue-overflow, message-ttl, ...)
 * are one policy; each `policy = PATTERN key=value ...` line of the config
 * makes another, for the destinations whose names match PATTERN.  The first
 * matching line wins, and a key it does not give falls back to the global
 * setting.  A destination takes its policy once, when it is made. */
#ifndef EFT_POLICY_H
#define EFT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POLICY_NAME_MAX 256       /* a pattern or a dead-letter queue, with its NUL */

enum queue_overflow {
	OVERFLOW_BLOCK,           /* a producer to a full queue waits (flow control) */
	OVERFLOW_DROP_HEAD,       /* the oldest message is dead-lettered to make room */
};

struct dest_policy {
	size_t max_queue_messages;      /* 0: no limit */
	size_t max_queue_bytes;         /* message memory; 0: no limit */
	enum queue_overflow overflow;
	uint64_t message_ttl_ms;        /* 0: none; else the lifetime of messages sent without one */
	uint32_t max_redeliveries;      /* 0: no limit */
	char dead_letter_queue[POLICY_NAME_MAX]; /* "/queue/NAME", or "": dead messages are dropped */
	uint8_t max_priority;           /* 0: none; else a higher message priority counts as
	                                   this (RabbitMQ's x-max-priority, qargs.h) */
	uint64_t expires_ms;            /* 0: never; else a queue is deleted after that long
	                                   without a subscriber (RabbitMQ's x-expires) */
};

/* Does the destination name (len bytes, not NUL-terminated) match pattern?
 * Names and patterns are cut into segments at '/' and '.'; a '*' segment
 * matches any one segment, a '>' segment (the last) matches one or more.
 * Everything else matches byte for byte, separators included. */
bool policy_match(const char *pattern, const char *name, size_t len);
/* NULL if pattern is well-formed, else why not (one sentence). */
const char *policy_pattern_check(const char *pattern);

#endif
