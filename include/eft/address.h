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
	ADDRESS_NO_EXCHANGE, /* /exchange/NAME/... of an exchange eftd does not have */
	ADDRESS_NO_KEY,   /* /exchange/amq.topic or amq.direct without a routing key */
};

/* RabbitMQ's destinations (its STOMP plugin's), and what eftd makes of them:
 *   /exchange/amq.topic/KEY   the topic /topic/KEY (wildcards in KEY)
 *   /exchange/amq.direct/KEY  a topic of its own per KEY, matched exactly
 *   /exchange/amq.fanout[/KEY] one topic, whatever the key
 *   /amq/queue/NAME           the queue /queue/NAME, which must exist */
enum address_alias_kind {
	ALIAS_NONE,               /* one of eftd's own names */
	ALIAS_TOPIC,              /* /exchange/amq.topic/KEY */
	ALIAS_DIRECT,             /* /exchange/amq.direct/KEY */
	ALIAS_FANOUT,             /* /exchange/amq.fanout[/KEY] */
	ALIAS_QUEUE,              /* /amq/queue/NAME */
};

/* eftd's name for a destination given in RabbitMQ's form: prefix, then
 * rest (a part of the name given).  For ADDRESS_NO_EXCHANGE, rest is the
 * exchange's name. */
struct address_alias {
	enum address_alias_kind kind;
	const char *prefix, *rest;
	size_t prefix_len, rest_len;
};

/* What name means.  unescaped: the value went through STOMP header
 * unescaping, so it may hold a CR or LF (a value read as is cannot). */
enum address_error address_parse(const char *name, size_t len, bool unescaped,
    enum address_kind *kind);
/* name in one of RabbitMQ's forms (above): ADDRESS_OK with *kind and *a
 * set, ADDRESS_UNKNOWN if it is in none of them, or ADDRESS_NO_EXCHANGE /
 * ADDRESS_NO_KEY. */
enum address_error address_alias(const char *name, size_t len, enum address_kind *kind,
    struct address_alias *a);
/* Does name start with prefix? */
bool address_has_prefix(const char *name, size_t len, const char *prefix, size_t plen);

#endif
