/* tx.h - STOMP transactions: SEND, ACK and NACK frames held until COMMIT.
 *
 * A COMMIT applies all of its frames or none: every destination is found or
 * made, and room is made in every queue, before the first frame takes
 * effect; once that has worked nothing can fail. */
#ifndef EFT_TX_H
#define EFT_TX_H

#include <stdbool.h>
#include <stddef.h>

#include <uthash.h>

#include "eft/broker.h"
#include "eft/schedule.h"
#include "eft/sub.h"

struct session;

enum tx_op_kind { TX_SEND, TX_SETTLE };

struct tx_op {
	enum tx_op_kind kind;
	struct msg *msg;           /* TX_SEND */
	char *dest;                /* TX_SEND: destination name */
	size_t dest_len;
	const char *receipt;       /* TX_SEND: its receipt header's value (in dest's
	                              allocation), or NULL: answered at COMMIT */
	size_t receipt_len;
	enum address_kind dest_kind;
	struct dest *target;       /* TX_SEND, during COMMIT: where it goes (NULL: nowhere) */
	struct schedule_spec *sched; /* TX_SEND: held until its time from COMMIT, or NULL */
	struct delivery_key key;   /* TX_SETTLE */
	enum settle how;           /* TX_SETTLE */
	struct tx_op *next;
};

struct tx {
	UT_hash_handle hh;         /* in session->txs */
	char *name;
	size_t name_len;
	struct tx_op *head, *tail;
};

struct tx *tx_find(struct session *ss, const char *name, size_t len);
/* NULL if out of memory. */
struct tx *tx_begin(struct session *ss, const char *name, size_t len);
/* Hold a SEND until COMMIT, with its receipt header's value (NULL: none),
 * which is answered then, as RabbitMQ does.  0: the message reference is the
 * transaction's; -1: out of memory, the caller keeps it. */
int tx_add_send(struct tx *t, struct msg *m, const char *dest, size_t dest_len,
    enum address_kind kind, const char *receipt, size_t receipt_len);
/* tx_add_send for a scheduled SEND: at COMMIT it goes to the schedule
 * (schedule.h) as spec says, from then. */
int tx_add_scheduled(struct tx *t, struct msg *m, const char *dest, size_t dest_len,
    enum address_kind kind, const char *receipt, size_t receipt_len,
    const struct schedule_spec *spec);
/* Hold an ACK or NACK until COMMIT.  -1 if out of memory. */
int tx_add_settle(struct tx *t, const struct delivery_key *k, enum settle how);
/* Apply every frame in order, then call receipt (if not NULL) with each
 * SEND's receipt, in order, and forget the transaction.  -1 if out of
 * memory, SCHEDULE_FULL if its scheduled SENDs do not fit, or a BACKEND_*
 * code if the cluster is down or could not take one of its SENDs: then
 * nothing was applied, no receipt is called for, and the transaction is
 * forgotten all the same (its messages dropped). */
int tx_commit(struct session *ss, struct tx *t,
    void (*receipt)(void *arg, const char *id, size_t len), void *arg);
/* Forget t: its SENDs go nowhere and get no RECEIPT (RabbitMQ's ABORT). */
void tx_abort(struct session *ss, struct tx *t);
/* Does t hold a persistent SEND? */
bool tx_persistent(const struct tx *t);

#endif
