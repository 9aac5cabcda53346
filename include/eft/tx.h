/* tx.h - STOMP transactions: SEND, ACK and NACK frames held until COMMIT. */
#ifndef EFT_TX_H
#define EFT_TX_H

#include <stdbool.h>
#include <stddef.h>

#include <uthash.h>

#include "eft/sub.h"

enum tx_op_kind { TX_SEND, TX_ACK, TX_NACK };

struct tx_op {
	enum tx_op_kind kind;
	struct msg *msg;           /* TX_SEND */
	char *dest;                /* TX_SEND: destination name */
	size_t dest_len;
	enum address_kind dest_kind;
	struct delivery_key key;   /* TX_ACK, TX_NACK */
	struct tx_op *next;
};

struct tx {
	UT_hash_handle hh;         /* in conn->txs */
	char *name;
	size_t name_len;
	struct tx_op *head, *tail;
};

struct tx *tx_find(struct conn *c, const char *name, size_t len);
/* NULL if out of memory. */
struct tx *tx_begin(struct conn *c, const char *name, size_t len);
/* Queue an operation; the message reference passes to the transaction. -1 if out of memory. */
int tx_add_send(struct tx *t, struct msg *m, const char *dest, size_t dest_len, enum address_kind kind);
int tx_add_settle(struct tx *t, const struct delivery_key *k, bool nack);
/* Apply every operation in order, then forget the transaction. -1 if out of memory. */
int tx_commit(struct conn *c, struct tx *t);
void tx_abort(struct conn *c, struct tx *t);

#endif
