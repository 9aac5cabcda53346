/* sub.c - subscriptions, deliveries and acknowledgements.
 *
 * Deliveries that wait for an ACK are found by (subscription seq, message id)
 * in a per-connection hash, and kept oldest-first per subscription so a
 * cumulative ACK in client mode walks only what it acknowledges. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eft/backend.h"
#include "eft/log.h"
#include "eft/selector.h"
#include "eft/sub.h"
#include "eft/wire.h"

int
sub_ack_mode_parse(const char *s, size_t len, enum ack_mode *out)
{
	if (len == 4 && memcmp(s, "auto", 4) == 0)
		*out = ACK_AUTO;
	else if (len == 6 && memcmp(s, "client", 6) == 0)
		*out = ACK_CLIENT;
	else if (len == 17 && memcmp(s, "client-individual", 17) == 0)
		*out = ACK_CLIENT_INDIVIDUAL;
	else
		return -1;
	return 0;
}

/* Consumed here: the backend that keeps it (the journal or JetStream)
 * forgets it.  Out of the common path, where nothing keeps messages. */
static __attribute__((noinline)) void
consumed(const struct dest *d, struct msg *m)
{
	backend_gone(dest_backend(d), m, FATE_CONSUMED);
}

/* A wildcard subscription's children leave their queues (nothing is given
 * back yet: a message given back is not to reach them again). */
static void
children_detach(struct sub *root)
{
	for (struct sub *c = root->children; c != NULL; c = c->sibling)
		dest_sub_remove(c->dest, c);
}

/* ... then their queues hand out what they hold, and forget them if empty. */
static void
children_free(struct sub *root)
{
	while (root->children != NULL) {
		struct sub *c = root->children;
		struct dest *d = c->dest;
		root->children = c->sibling;
		free(c);
		dest_dispatch(d);
		dests_release(root->ep->dests, d);
	}
}

int
sub_attach(struct sub *root, struct dest *d)
{
	if (dest_lock_check(d, root->ep, false) != DEST_LOCK_OK)
		return 0; /* RabbitMQ's exclusive queue, another connection's */
	struct sub *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -1;
	/* What it shows and how it takes are the root's; its place on the queue its own. */
	c->id = root->id;
	c->id_len = root->id_len;
	c->sub_line = root->sub_line;
	c->sub_line_len = root->sub_line_len;
	c->ep = root->ep;
	c->dest = d;
	c->ack = root->ack;
	c->prefetch = root->prefetch;
	c->priority = root->priority;
	c->exclusive = root->exclusive;
	c->selector = root->selector;
	c->root = root;
	c->seq = root->ep->dests->next_sub_seq++;
	if (dest_sub_add(d, c) != 0) {
		free(c);
		return -1;
	}
	c->sibling = root->children;
	root->children = c;
	if (sub_can_take(c))
		dest_ready_add(d, c);
	return 0;
}

struct sub *
sub_new(struct endpoint *ep, struct dest *d, const char *id, size_t id_len, bool has_id,
    const struct sub_options *opt, struct selector *sel)
{
	struct sub *s = calloc(1, sizeof(*s));
	if (s == NULL)
		goto fail;
	size_t esc = has_id ? frame_escaped_len(ep->version, id, id_len) : 0;
	s->id = malloc(id_len + 1);
	/* RabbitMQ's redelivered:false on first deliveries is part of the
	 * line written with each MESSAGE, so that it costs nothing per
	 * message (a redelivery skips it: wire.c). */
	static const char first[] = "redelivered:false\n";
	s->first_len = ep->redelivered_false ? sizeof(first) - 1 : 0;
	s->sub_line = malloc(s->first_len + (has_id ? esc + 15 : 1));
	if (s->id == NULL || s->sub_line == NULL)
		goto fail;
	memcpy(s->id, id, id_len);
	s->id[id_len] = '\0';
	s->id_len = id_len;
	memcpy(s->sub_line, first, s->first_len);
	s->sub_line_len = s->first_len;
	if (has_id) {
		char *p = s->sub_line + s->first_len;
		memcpy(p, "subscription:", 13);
		p = frame_escape(ep->version, p + 13, id, id_len);
		*p++ = '\n';
		s->sub_line_len = (size_t)(p - s->sub_line);
	}
	s->sub_line[s->sub_line_len] = '\0';
	s->ep = ep;
	s->dest = d;
	s->ack = opt->ack;
	s->prefetch = opt->prefetch;
	s->priority = opt->priority;
	s->exclusive = opt->exclusive;
	s->locks = opt->locks;
	s->selector = sel;
	s->seq = ep->dests->next_sub_seq++; /* before dest_sub_add: it orders by arrival */
	s->root = s;
	if (dest_sub_add(d, s) != 0)
		goto fail;
	HASH_ADD_KEYPTR(hh, ep->subs, s->id, s->id_len, s);
	if (dest_kind(d) == DEST_QUEUE && dest_is_pattern(d)) {
		/* Its children take; the pattern queue itself holds nothing. */
		if (dests_attach_pattern(ep->dests, d, s) != 0) {
			children_detach(s);
			children_free(s);
			HASH_DEL(ep->subs, s);
			dest_sub_remove(d, s);
			goto fail;
		}
	} else if (dest_kind(d) == DEST_QUEUE && sub_can_take(s)) {
		dest_ready_add(d, s);
	}
	return s;
fail:
	if (s != NULL) {
		free(s->id);
		free(s->sub_line);
		free(s);
	}
	selector_free(sel);
	return NULL;
}

static void
delivery_unlink(struct endpoint *ep, struct delivery *dl)
{
	struct sub *s = dl->sub->root;
	if (dl->prev)
		dl->prev->next = dl->next;
	else
		s->unacked_head = dl->next;
	if (dl->next)
		dl->next->prev = dl->prev;
	else
		s->unacked_tail = dl->prev;
	s->n_unacked--;
	HASH_DEL(ep->deliveries, dl);
}

void
sub_end(struct sub *s)
{
	struct endpoint *ep = s->ep;
	struct dest *d = s->dest;

	dest_sub_remove(d, s);
	children_detach(s);
	HASH_DEL(ep->subs, s);
	if (s->owner_ref != NULL)
		*s->owner_ref = NULL;

	/* Newest first onto the head of the queue keeps the original order
	 * (each to its own queue: a wildcard subscription's come from many). */
	while (s->unacked_tail != NULL) {
		struct delivery *dl = s->unacked_tail;
		delivery_unlink(ep, dl);
		dest_give_back(dl->sub->dest, dl->msg);
		free(dl);
	}
	children_free(s);
	const struct backend *be = dest_backend(d);
	if (be != NULL && be->ops->interest_removed != NULL)
		be->ops->interest_removed(be->impl, d, s);
	dest_dispatch(d);
	dests_release(ep->dests, d);
	selector_free(s->selector);
	free(s->id);
	free(s->sub_line);
	free(s);
}

/* What a selector sees of a message: its headers, and JMS's own names for
 * the headers ActiveMQ maps them to. */
struct match_view {
	const struct msg *m;
	char priority[2];
	char expiration[24];
};

static bool
is_name(const char *name, size_t len, const char *want)
{
	return len == strlen(want) && memcmp(name, want, len) == 0;
}

static bool
view_lookup(void *arg, const char *name, size_t len, const char **value, size_t *vlen)
{
	struct match_view *v = arg;
	const struct msg *m = v->m;
	if (len > 3 && memcmp(name, "JMS", 3) == 0) {
		if (is_name(name, len, "JMSPriority")) {
			v->priority[0] = (char)('0' + m->priority);
			*value = v->priority;
			*vlen = 1;
			return true;
		}
		if (is_name(name, len, "JMSExpiration")) {
			*vlen = msg_format_u64(v->expiration, m->expires_ms);
			*value = v->expiration;
			return true;
		}
		if (is_name(name, len, "JMSDeliveryMode")) {
			/* Stored or not (no data-dir), what the sender asked for. */
			const char *p;
			size_t plen;
			bool asked = msg_header(m, "persistent", 10, &p, &plen) && plen == 4 &&
			    memcmp(p, "true", 4) == 0;
			*value = m->persistent || asked ? "PERSISTENT" : "NON_PERSISTENT";
			*vlen = strlen(*value);
			return true;
		}
		static const char *const mapped[][2] = {
			{ "JMSMessageID", "message-id" },
			{ "JMSCorrelationID", "correlation-id" },
			{ "JMSType", "type" },
			{ "JMSTimestamp", "timestamp" },
			{ "JMSDestination", "destination" },
			{ "JMSReplyTo", "reply-to" },
		};
		for (size_t i = 0; i < sizeof(mapped) / sizeof(mapped[0]); i++)
			if (is_name(name, len, mapped[i][0]))
				return msg_header(m, mapped[i][1], strlen(mapped[i][1]), value, vlen);
	}
	return msg_header(m, name, len, value, vlen);
}

bool
sub_matches(const struct sub *s, const struct msg *m)
{
	if (s->selector == NULL)
		return true;
	struct match_view v = { .m = m };
	return selector_match(s->selector, view_lookup, &v);
}

bool
sub_can_take(const struct sub *s)
{
	/* The window is the root's, across all its queues. */
	return s->ep->open && !s->ep->blocked && (s->prefetch == 0 ||
	    s->root->n_unacked < s->prefetch);
}

void
sub_wake(struct sub *s)
{
	if (dest_kind(s->dest) != DEST_QUEUE)
		return;
	if (s->children == NULL && !dest_is_pattern(s->dest)) {
		if (sub_can_take(s))
			dest_ready_add(s->dest, s);
		dest_dispatch(s->dest);
		return;
	}
	for (struct sub *c = s->children; c != NULL; c = c->sibling) {
		if (sub_can_take(c))
			dest_ready_add(c->dest, c);
		dest_dispatch(c->dest);
	}
}

size_t
sub_ack_id(char *buf, size_t size, uint64_t sub_seq, uint64_t msg_id)
{
	if (size < 42)
		return 0;
	size_t n = msg_format_u64(buf, sub_seq);
	buf[n++] = '-';
	return n + msg_format_u64(buf + n, msg_id);
}

int
sub_ack_id_parse(const char *s, size_t len, struct delivery_key *out)
{
	const char *dash = memchr(s, '-', len);
	if (dash == NULL)
		return -1;
	size_t a = (size_t)(dash - s);
	if (frame_parse_u64(s, a, &out->sub_seq) != 0 || frame_parse_u64(dash + 1, len - a - 1, &out->msg_id) != 0)
		return -1;
	return 0;
}

int
sub_deliver(struct sub *s, struct msg *m, bool redelivered)
{
	struct endpoint *ep = s->ep;
	char ack[48];
	size_t ack_len = 0;
	struct delivery *dl = NULL;

	if (s->ack != ACK_AUTO && ep->version == STOMP_1_2)
		ack_len = sub_ack_id(ack, sizeof(ack), s->root->seq, m->id);
	/* Topics keep nothing to give back, so only queue deliveries wait for an ACK. */
	if (s->ack != ACK_AUTO && dest_kind(s->dest) == DEST_QUEUE) {
		dl = calloc(1, sizeof(*dl));
		if (dl == NULL)
			return -1;
		dl->key.sub_seq = s->root->seq;
		dl->key.msg_id = m->id;
		dl->msg = m;
		dl->sub = s;
		dl->redelivered = redelivered;
	}
	if (wire_message(ep->out, ep->version, s, m, ack_len ? ack : NULL, ack_len, redelivered) != 0) {
		free(dl);
		return -1;
	}
	if (dl != NULL) {
		struct sub *root = s->root; /* the list is the root's (a plain one's own) */
		struct delivery *dup;
		HASH_FIND(hh, ep->deliveries, &dl->key, sizeof(dl->key), dup);
		if (dup != NULL) {
			/* The same message again on the same subscription (NACKed and
			 * redelivered while an older copy is still listed): keep one. */
			delivery_unlink(ep, dup);
			dest_settled(dup->sub->dest);
			msg_unref(dup->msg);
			free(dup);
		}
		dl->prev = root->unacked_tail;
		if (root->unacked_tail)
			root->unacked_tail->next = dl;
		else
			root->unacked_head = dl;
		root->unacked_tail = dl;
		root->n_unacked++;
		HASH_ADD(hh, ep->deliveries, key, sizeof(dl->key), dl);
		if (m->kept != NULL)
			backend_delivered(dest_backend(s->dest), m);
	} else {
		if (m->kept != NULL) /* auto-ack: handed out is gone */
			consumed(s->dest, m);
		msg_unref(m);
	}
	ep->counts->deliveries++;
	ep->counts->redelivered += redelivered;
	ep->output_added(ep->arg);
	return 0;
}

struct delivery *
sub_find_delivery(struct endpoint *ep, const struct delivery_key *k)
{
	struct delivery *dl;
	HASH_FIND(hh, ep->deliveries, k, sizeof(*k), dl);
	return dl;
}

static void
settle_one(struct endpoint *ep, struct delivery *dl, enum settle how)
{
	struct dest *d = dl->sub->dest;
	delivery_unlink(ep, dl);
	if (how == SETTLE_NACK) {
		dest_give_back(d, dl->msg);
	} else if (how == SETTLE_REJECT) {
		dest_reject(d, dl->msg);
	} else {
		dest_settled(d);
		ep->counts->acked++;
		if (dl->msg->kept != NULL)
			consumed(d, dl->msg);
		msg_unref(dl->msg);
	}
	free(dl);
}

/* sub_settle for a wildcard queue subscription: the deliveries settled may
 * come from several of its queues, each of which may hand out more; if the
 * window was full, every queue may.  Without allocating: the children to
 * look at are linked through wake_next. */
static __attribute__((noinline)) bool
settle_children(struct endpoint *ep, struct delivery *dl, enum settle how)
{
	struct sub *root = dl->sub->root;
	bool was_full = root->prefetch != 0 && root->n_unacked >= root->prefetch;
	struct sub *wake = NULL;
	struct delivery *stop = root->ack == ACK_CLIENT ? NULL : dl->prev;
	while (dl != stop) {
		struct delivery *prev = dl->prev;
		struct sub *c = dl->sub;
		if (!c->waking) {
			c->waking = true;
			c->wake_next = wake;
			wake = c;
		}
		settle_one(ep, dl, how);
		dl = prev;
	}
	while (wake != NULL) {
		struct sub *c = wake;
		wake = c->wake_next;
		c->waking = false;
		c->wake_next = NULL;
		if (!was_full) {
			if (sub_can_take(c))
				dest_ready_add(c->dest, c);
			dest_dispatch(c->dest);
		}
	}
	if (was_full)
		sub_wake(root);
	return true;
}

size_t
sub_revoke(struct endpoint *ep, bool (*revoke)(struct msg *m, void *arg), void *arg)
{
	size_t n = 0;
	struct delivery *dl, *tmp;
	HASH_ITER(hh, ep->deliveries, dl, tmp) {
		if (!revoke(dl->msg, arg))
			continue;
		/* Neither settled nor given back: the message is no longer this
		 * broker's, only the window it took is. */
		delivery_unlink(ep, dl);
		dest_settled(dl->sub->dest);
		msg_unref(dl->msg);
		free(dl);
		n++;
	}
	return n;
}

bool
sub_settle(struct endpoint *ep, const struct delivery_key *k, enum settle how)
{
	struct delivery *dl = sub_find_delivery(ep, k);
	if (dl == NULL)
		return false;
	struct sub *s = dl->sub->root;
	if (s->children != NULL)
		return settle_children(ep, dl, how);
	/* client mode settles this delivery and all before it; walk back from it
	 * so that NACKed messages return to the queue in their first order. */
	struct delivery *stop = s->ack == ACK_CLIENT ? NULL : dl->prev;
	while (dl != stop) {
		struct delivery *prev = dl->prev;
		settle_one(ep, dl, how);
		dl = prev;
	}
	if (sub_can_take(s))
		dest_ready_add(s->dest, s);
	dest_dispatch(s->dest);
	return true;
}
