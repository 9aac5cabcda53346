/* tx.c - transactions.  Frames inside BEGIN ... COMMIT are recorded, already
 * parsed, and applied in order at COMMIT; ABORT or a disconnect drops them. */
#include <stdlib.h>
#include <string.h>

#include "eft/conn.h"
#include "eft/log.h"
#include "eft/route.h"
#include "eft/tx.h"

struct tx *
tx_find(struct conn *c, const char *name, size_t len)
{
	struct tx *t;
	HASH_FIND(hh, c->txs, name, len, t);
	return t;
}

struct tx *
tx_begin(struct conn *c, const char *name, size_t len)
{
	struct tx *t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->name = malloc(len + 1);
	if (t->name == NULL) {
		free(t);
		return NULL;
	}
	memcpy(t->name, name, len);
	t->name[len] = '\0';
	t->name_len = len;
	HASH_ADD_KEYPTR(hh, c->txs, t->name, t->name_len, t);
	return t;
}

static void
tx_append(struct tx *t, struct tx_op *op)
{
	if (t->tail)
		t->tail->next = op;
	else
		t->head = op;
	t->tail = op;
}

int
tx_add_send(struct tx *t, struct msg *m, const char *dest, size_t dest_len, enum address_kind kind)
{
	struct tx_op *op = calloc(1, sizeof(*op));
	char *name = malloc(dest_len);
	if (op == NULL || name == NULL) {
		free(op);
		free(name);
		msg_unref(m);
		return -1;
	}
	memcpy(name, dest, dest_len);
	op->kind = TX_SEND;
	op->msg = m;
	op->dest = name;
	op->dest_len = dest_len;
	op->dest_kind = kind;
	tx_append(t, op);
	return 0;
}

int
tx_add_settle(struct tx *t, const struct delivery_key *k, bool nack)
{
	struct tx_op *op = calloc(1, sizeof(*op));
	if (op == NULL)
		return -1;
	op->kind = nack ? TX_NACK : TX_ACK;
	op->key = *k;
	tx_append(t, op);
	return 0;
}

static void
tx_free(struct conn *c, struct tx *t)
{
	struct tx_op *op = t->head;
	while (op != NULL) {
		struct tx_op *next = op->next;
		if (op->msg)
			msg_unref(op->msg);
		free(op->dest);
		free(op);
		op = next;
	}
	HASH_DEL(c->txs, t);
	free(t->name);
	free(t);
}

int
tx_commit(struct conn *c, struct tx *t)
{
	int rc = 0;
	for (struct tx_op *op = t->head; op != NULL; op = op->next) {
		if (op->kind != TX_SEND) {
			/* The delivery may be gone (already settled): nothing to do then. */
			sub_settle(c, &op->key, op->kind == TX_NACK);
			continue;
		}
		/* Destinations are looked up now: one may have come and gone since SEND. */
		struct msg *m = op->msg;
		op->msg = NULL;
		if (route_send(c, op->dest, op->dest_len, op->dest_kind, m, NULL) != 0) {
			log_error("out of memory committing transaction %s", t->name);
			rc = -1;
		}
	}
	tx_free(c, t);
	return rc;
}

void
tx_abort(struct conn *c, struct tx *t)
{
	tx_free(c, t);
}
