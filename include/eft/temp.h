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

#include "eft/address.h"

struct dest;
struct session;
struct sub;


struct temp {
	UT_hash_handle hh;     /* in session->temps, keyed by the client's /temp-queue/NAME */
	char *name;
	size_t name_len;
	struct dest *dest;     /* the /reply-queue/ queue; dest_temp() points back */
	struct sub *auto_sub;  /* the subscription eftd made, if the client made none */
};

/* The session's temp-queue called name (/temp-queue/NAME), made on first
 * use.  NULL if out of memory. */
struct temp *temp_get(struct session *ss, const char *name, size_t len);
/* Make sure replies to t reach ss: subscribe automatically unless ss has a
 * subscription of its own.  -1 if out of memory, -2 if ss already uses the
 * id /temp-queue/NAME for a subscription to something else. */
int temp_auto_subscribe(struct session *ss, struct temp *t);
/* Delete every temp-queue of ss with the messages in it (ss has no
 * subscriptions left). */
void temp_free_all(struct session *ss);

#endif
