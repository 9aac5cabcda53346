/* temp.h - temp-queues for request/reply, as RabbitMQ's STOMP plugin has them.
 *
 * `reply-to:/temp-queue/NAME` on a SEND gives the sending connection a private
 * queue with an unguessable broker-wide name (/reply-queue/eft.gen-...), made
 * once per connection and NAME, and subscribes the connection to it with
 * subscription id /temp-queue/NAME.  Anyone may SEND to the /reply-queue/
 * name; the queue and its messages die with the connection. */
#ifndef EFT_TEMP_H
#define EFT_TEMP_H

#include <stdbool.h>
#include <stddef.h>

#include <uthash.h>

struct conn;
struct dest;
struct sub;

#define TEMP_PREFIX "/temp-queue/"
#define TEMP_PREFIX_LEN 12
#define REPLY_PREFIX "/reply-queue/"
#define REPLY_PREFIX_LEN 13

struct temp {
	UT_hash_handle hh;     /* in conn->temps, keyed by the client's /temp-queue/NAME */
	char *name;
	size_t name_len;
	struct dest *dest;     /* the /reply-queue/ queue; dest->temp points back */
	struct sub *auto_sub;  /* the subscription eftd made, if the client made none */
};

/* The connection's temp-queue called name (/temp-queue/NAME), made on first
 * use.  NULL if out of memory. */
struct temp *temp_get(struct conn *c, const char *name, size_t len);
/* Make sure replies to t reach c: subscribe automatically unless c has a
 * subscription of its own.  -1 if out of memory, -2 if c already uses the
 * id /temp-queue/NAME for a subscription to something else. */
int temp_auto_subscribe(struct conn *c, struct temp *t);
/* Delete every temp-queue of c with the messages in it. */
void temp_free_all(struct conn *c);

#endif
