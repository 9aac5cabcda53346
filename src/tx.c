/* tx.c - transactions.  Frames inside BEGIN ... COMMIT are recorded, already
 * parsed, and applied in order at COMMIT; ABORT or a disconnect drops them.
 * COMMIT first prepares (finds destinations, makes room in queues) so that
 * applying the frames cannot fail halfway. */
#include <stdlib.h>
#include <string.h>

#include "eft/backend.h"
#include "eft/broker.h"
#include "eft/dest.h"
#include "eft/log.h"
#include "eft/route.h"
#include "eft/session.h"
#include "eft/tx.h"

struct tx *
tx_find(struct session *ss, const char *name, size_t len)
{
	struct tx *t;
	HASH_FIND(hh, ss->txs, name, len, t);
	return t;
}

struct tx *
tx_begin(struct session *ss, const char *name, size_t len)
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
	HASH_ADD_KEYPTR(hh, ss->txs, t->name, t->name_len, t);
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
tx_add_send(struct tx *t, struct msg *m, const char *dest, size_t dest_len, enum address_kind kind,
    const char *receipt, size_t receipt_len)
{
	struct tx_op *op = calloc(1, sizeof(*op));
	char *name = malloc(dest_len + (receipt != NULL ? receipt_len : 0) + 1);
	if (op == NULL || name == NULL) {
		free(op);
		free(name);
		return -1;
	}
	memcpy(name, dest, dest_len);
	if (receipt != NULL) {
		memcpy(name + dest_len, receipt, receipt_len);
		op->receipt = name + dest_len;
		op->receipt_len = receipt_len;
	}
	op->kind = TX_SEND;
	op->msg = m;
	op->dest = name;
	op->dest_len = dest_len;
	op->dest_kind = kind;
	tx_append(t, op);
	return 0;
}

int
tx_add_scheduled(struct tx *t, struct msg *m, const char *dest, size_t dest_len,
    enum address_kind kind, const char *receipt, size_t receipt_len,
    const struct schedule_spec *spec)
{
	struct schedule_spec *copy = malloc(sizeof(*copy));
	if (copy == NULL)
		return -1;
	*copy = *spec;
	if (tx_add_send(t, m, dest, dest_len, kind, receipt, receipt_len) != 0) {
		free(copy);
		return -1;
	}
	t->tail->sched = copy;
	return 0;
}

int
tx_add_settle(struct tx *t, const struct delivery_key *k, enum settle how)
{
	struct tx_op *op = calloc(1, sizeof(*op));
	if (op == NULL)
		return -1;
	op->kind = TX_SETTLE;
	op->key = *k;
	op->how = how;
	tx_append(t, op);
	return 0;
}

static void
tx_free(struct session *ss, struct tx *t)
{
	struct tx_op *op = t->head;
	while (op != NULL) {
		struct tx_op *next = op->next;
		if (op->msg)
			msg_unref(op->msg);
		free(op->dest);
		free(op->sched);
		free(op);
		op = next;
	}
	HASH_DEL(ss->txs, t);
	free(t->name);
	free(t);
}

/* Let go of the destinations held for the SENDs before `upto`, and forget the
 * queues made for them that nothing else holds. */
static void
tx_unhold(struct session *ss, struct tx *t, struct tx_op *upto)
{
	for (struct tx_op *op = t->head; op != upto; op = op->next) {
		if (op->kind == TX_SEND && op->target != NULL) {
			dest_unhold(op->target);
			dests_release(&ss->broker->dests, op->target);
			op->target = NULL;
		}
	}
}

/* The backend's room for what applying t keeps (the journal: one record
 * per frame; a cumulative ACK that settles more grows it then). */
static size_t
tx_backend_room(const struct backend *be, const struct tx *t)
{
	size_t bytes = 0;
	for (const struct tx_op *op = t->head; op != NULL; op = op->next) {
		if (op->kind != TX_SEND)
			bytes += be->ops->settle_room;
		else if (op->msg->persistent && op->target != NULL && be->ops->keep_room != NULL)
			bytes += be->ops->keep_room(op->msg, op->dest_len);
	}
	return bytes;
}

int
tx_commit(struct session *ss, struct tx *t, void (*receipt)(void *arg, const char *id, size_t len),
    void *arg)
{
	struct tx_op *op;
	const struct backend *be = ss->broker->backend;
	/* Through a backend that carries destinations (the cluster), all of it
	 * or none: it must be there now, and take every SEND (one it refuses
	 * after others went would be lost). */
	for (op = t->head; be != NULL && op != NULL; op = op->next) {
		if (op->kind != TX_SEND || !route_carried(ss, op->dest, op->dest_len, op->dest_kind))
			continue;
		const char *why = "";
		int rc = be->ops->check(be->impl, (int)op->dest_kind, op->dest, op->dest_len, op->msg,
		    &why);
		if (rc != 0) {
			log_info("%s: transaction %s not committed: %s (SEND to %.*s)",
			    session_peer(ss), t->name, why, (int)(op->dest_len > 200 ? 200 :
			    op->dest_len), op->dest);
			tx_free(ss, t);
			return rc;
		}
	}
	/* Scheduled SENDs must all fit, or none is applied. */
	size_t nsched = 0;
	for (op = t->head; op != NULL; op = op->next)
		nsched += op->kind == TX_SEND && op->sched != NULL;
	if (nsched > 0 && !schedule_has_room(&ss->broker->sched, nsched)) {
		log_info("%s: transaction %s not committed: max-scheduled-messages reached",
		    session_peer(ss), t->name);
		tx_free(ss, t);
		return SCHEDULE_FULL;
	}
	/* Destinations are looked up now: one may have come and gone since SEND. */
	for (op = t->head; op != NULL; op = op->next) {
		if (op->kind != TX_SEND || op->sched != NULL ||
		    route_carried(ss, op->dest, op->dest_len, op->dest_kind))
			continue;
		int err;
		op->target = route_resolve(ss, op->dest, op->dest_len, op->dest_kind, &err);
		if (op->target != NULL)
			dest_hold(op->target);
		if (err != 0) {
			tx_unhold(ss, t, op);
			log_error("%s: out of memory committing transaction %s: nothing applied",
			    session_peer(ss), t->name);
			tx_free(ss, t);
			return -1;
		}
	}
	if (be != NULL && backend_batch_begin(be, tx_backend_room(be, t)) != 0) {
		tx_unhold(ss, t, NULL);
		log_error("%s: out of memory committing transaction %s: nothing applied",
		    session_peer(ss), t->name);
		tx_free(ss, t);
		return -1;
	}
	/* Kept as one (one journal record): after a crash, all or nothing. */
	for (op = t->head; op != NULL; op = op->next) {
		if (op->kind != TX_SEND) {
			/* The delivery may be gone (already settled): nothing to do then. */
			sub_settle(&ss->ep, &op->key, op->how);
			continue;
		}
		if (op->sched != NULL) {
			/* Its time counts from the COMMIT. */
			if (schedule_add(&ss->broker->sched, op->sched, op->msg, op->dest, op->dest_len,
			    op->dest_kind, broker_now_ms(ss->broker)) != 0) {
				log_error("%s: transaction %s: a scheduled SEND to %.*s was lost: out of "
				    "memory", session_peer(ss), t->name, (int)op->dest_len, op->dest);
				msg_unref(op->msg);
			}
			op->msg = NULL;
			continue;
		}
		if (route_carried(ss, op->dest, op->dest_len, op->dest_kind)) {
			/* Checked above: only out of memory (or NATS gone this instant) is left. */
			if (route_through_backend(ss, op->dest, op->dest_len, op->dest_kind,
			    op->msg) != 0) {
				log_error("%s: transaction %s: a SEND to %.*s was lost (cluster)",
				    session_peer(ss), t->name, (int)op->dest_len, op->dest);
				msg_unref(op->msg);
			}
			op->msg = NULL;
			continue;
		}
		bool may_die = op->msg->expires_ms != 0;
		if (op->target != NULL)
			dest_unhold(op->target);
		/* Cannot fail but for out of memory among wildcard topics. */
		if (route_publish_named(ss, op->target, op->dest, op->dest_len, op->dest_kind,
		    op->msg) != 0) {
			log_error("%s: transaction %s: a SEND to %.*s was lost: out of memory",
			    session_peer(ss), t->name, (int)op->dest_len, op->dest);
			msg_unref(op->msg);
		}
		op->msg = NULL;
		/* A queue made for a message that died as it came holds nothing. */
		if (may_die && op->target != NULL)
			dests_release(&ss->broker->dests, op->target);
	}
	if (be != NULL)
		backend_batch_end(be);
	for (op = t->head; receipt != NULL && op != NULL; op = op->next)
		if (op->kind == TX_SEND && op->receipt != NULL)
			receipt(arg, op->receipt, op->receipt_len);
	tx_free(ss, t);
	return 0;
}

void
tx_abort(struct session *ss, struct tx *t)
{
	tx_free(ss, t);
}

bool
tx_persistent(const struct tx *t)
{
	for (const struct tx_op *op = t->head; op != NULL; op = op->next)
		if (op->kind == TX_SEND && op->msg->persistent)
			return true;
	return false;
}
