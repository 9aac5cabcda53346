/* address.h - destination names as clients write them, and the one place
 * that says which names eftd serves.
 *
 *   /queue/NAME        each message to one subscriber, kept until taken
 *   /topic/NAME        each message to every current subscriber, kept never
 *   /temp-queue/NAME   the session's own reply queue (RabbitMQ style)
 *   /reply-queue/...   another session's temp-queue, by its broker-wide name
 *
 * NAME is not empty.  A name must not hold a CR or LF: it could not be
 * written in a STOMP 1.0 frame (which has no escapes) or a log line. */
#ifndef EFT_ADDRESS_H
#define EFT_ADDRESS_H

#include <stdbool.h>
#include <stddef.h>

#define QUEUE_PREFIX "/queue/"
#define QUEUE_PREFIX_LEN 7
#define TOPIC_PREFIX "/topic/"
#define TOPIC_PREFIX_LEN 7
#define TEMP_PREFIX "/temp-queue/"
#define TEMP_PREFIX_LEN 12
#define REPLY_PREFIX "/reply-queue/"
#define REPLY_PREFIX_LEN 13
/* The queue of durable subscription NAME is /durable/NAME (durable.c). */
#define DURABLE_PREFIX "/durable/"
#define DURABLE_NAME_MAX 512

enum address_kind {
	ADDR_QUEUE,       /* /queue/NAME */
	ADDR_TOPIC,       /* /topic/NAME */
	ADDR_TEMP_QUEUE,  /* /temp-queue/NAME: the session's own temp-queue */
	ADDR_REPLY_QUEUE, /* /reply-queue/...: someone's temp-queue, by its broker-wide name */
};

enum address_error {
	ADDRESS_OK,
	ADDRESS_UNKNOWN,  /* not a kind of destination eftd serves */
	ADDRESS_CRLF,     /* holds a CR or LF */
};

/* What name means.  unescaped: the value went through STOMP header
 * unescaping, so it may hold a CR or LF (a value read as is cannot). */
enum address_error address_parse(const char *name, size_t len, bool unescaped,
    enum address_kind *kind);
/* Does name start with prefix? */
bool address_has_prefix(const char *name, size_t len, const char *prefix, size_t plen);

#endif
