/* qargs.c - RabbitMQ's queue arguments as eftd's queue policy (see qargs.h). */
#include <stdio.h>
#include <string.h>

#include "eft/address.h"
#include "eft/frame.h"
#include "eft/qargs.h"

#define TEN_YEARS_MS (10ull * 365 * 24 * 3600 * 1000)

/* A whole number header from lo to hi into *out; 1 if there, 0 if not, -1
 * with why if bad. */
static int
number(const struct frame *f, const char *name, uint64_t lo, uint64_t hi, uint64_t *out,
    char *why, size_t whylen)
{
	const struct header *h = frame_find(f, name);
	if (h == NULL)
		return 0;
	if (frame_parse_u64(h->value, h->value_len, out) == 0 && *out >= lo && *out <= hi)
		return 1;
	snprintf(why, whylen, "%s must be a whole number from %llu to %llu; got '%.*s'.", name,
	    (unsigned long long)lo, (unsigned long long)hi,
	    (int)(h->value_len > 100 ? 100 : h->value_len), h->value);
	return -1;
}

static bool
value_is(const struct header *h, const char *s)
{
	return h->value_len == strlen(s) && memcmp(h->value, s, h->value_len) == 0;
}

/* x-overflow; -1 with why if it is not drop-head. */
static int
overflow(const struct frame *f, struct queue_args *qa, char *why, size_t whylen)
{
	const struct header *h = frame_find(f, "x-overflow");
	if (h == NULL)
		return 0;
	if (value_is(h, "drop-head")) {
		qa->values.overflow = OVERFLOW_DROP_HEAD;
		qa->given |= QARG_OVERFLOW;
		return 0;
	}
	if (value_is(h, "reject-publish") || value_is(h, "reject-publish-dlx"))
		snprintf(why, whylen, "x-overflow %.*s is not supported: a full eftd queue makes its "
		    "producers wait, or with drop-head lets its oldest message die.",
		    (int)h->value_len, h->value);
	else
		snprintf(why, whylen, "x-overflow must be drop-head (or reject-publish, which eftd "
		    "does not do); got '%.*s'.", (int)(h->value_len > 100 ? 100 : h->value_len),
		    h->value);
	return -1;
}

/* x-dead-letter-exchange and x-dead-letter-routing-key: the default
 * exchange ("") and a key is the queue of that name.  -1 with *header and
 * why otherwise. */
static int
dead_letter(const struct frame *f, struct queue_args *qa, const char **header, char *why,
    size_t whylen)
{
	const struct header *x = frame_find(f, "x-dead-letter-exchange");
	const struct header *k = frame_find(f, "x-dead-letter-routing-key");
	if (x == NULL && k == NULL)
		return 0;
	*header = x != NULL ? "x-dead-letter-exchange" : "x-dead-letter-routing-key";
	if (x == NULL) {
		snprintf(why, whylen, "x-dead-letter-routing-key needs x-dead-letter-exchange.");
		return -1;
	}
	if (x->value_len != 0) {
		snprintf(why, whylen, "x-dead-letter-exchange '%.*s': eftd dead-letters to queues "
		    "only; give the default exchange (an empty value) and the queue's name as "
		    "x-dead-letter-routing-key.", (int)(x->value_len > 100 ? 100 : x->value_len),
		    x->value);
		return -1;
	}
	*header = "x-dead-letter-routing-key";
	enum address_kind kind;
	int n = k == NULL ? -1 : snprintf(qa->values.dead_letter_queue,
	    sizeof(qa->values.dead_letter_queue), QUEUE_PREFIX "%.*s", (int)k->value_len, k->value);
	if (k == NULL || k->value_len == 0 || n < 0 ||
	    (size_t)n >= sizeof(qa->values.dead_letter_queue) ||
	    address_parse(qa->values.dead_letter_queue, (size_t)n, true, &kind) != ADDRESS_OK ||
	    kind != ADDR_QUEUE) {
		snprintf(why, whylen, "x-dead-letter-routing-key must name the dead-letter queue "
		    "(1 to %zu bytes, no CR or LF) with the default exchange.",
		    sizeof(qa->values.dead_letter_queue) - QUEUE_PREFIX_LEN - 1);
		return -1;
	}
	qa->given |= QARG_DEAD_LETTER;
	return 0;
}

int
qargs_read(const struct frame *f, struct queue_args *qa, const char **header, char *why,
    size_t whylen)
{
	memset(qa, 0, sizeof(*qa));
	uint64_t v;
	int rc;
	*header = "x-expires";
	if ((rc = number(f, *header, 1, TEN_YEARS_MS, &v, why, whylen)) < 0)
		return -1;
	if (rc > 0) {
		qa->values.expires_ms = v;
		qa->given |= QARG_EXPIRES;
	}
	*header = "x-max-length";
	if ((rc = number(f, *header, 1, SIZE_MAX, &v, why, whylen)) < 0)
		return -1;
	if (rc > 0) {
		qa->values.max_queue_messages = (size_t)v;
		qa->given |= QARG_MAX_LENGTH;
	}
	*header = "x-max-length-bytes";
	if ((rc = number(f, *header, 1, SIZE_MAX, &v, why, whylen)) < 0)
		return -1;
	if (rc > 0) {
		qa->values.max_queue_bytes = (size_t)v;
		qa->given |= QARG_MAX_LENGTH_BYTES;
	}
	*header = "x-message-ttl";
	if ((rc = number(f, *header, 1, TEN_YEARS_MS, &v, why, whylen)) < 0)
		return -1;
	if (rc > 0) {
		qa->values.message_ttl_ms = v;
		qa->given |= QARG_MESSAGE_TTL;
	}
	*header = "x-max-priority";
	if ((rc = number(f, *header, 1, 255, &v, why, whylen)) < 0)
		return -1;
	if (rc > 0) {
		qa->values.max_priority = (uint8_t)v;
		qa->given |= QARG_MAX_PRIORITY;
	}
	*header = "x-overflow";
	if (overflow(f, qa, why, whylen) != 0)
		return -1;
	return dead_letter(f, qa, header, why, whylen);
}

void
qargs_apply(const struct queue_args *qa, struct dest_policy *p)
{
	const struct dest_policy *v = &qa->values;
	if (qa->given & QARG_MAX_LENGTH)
		p->max_queue_messages = v->max_queue_messages;
	if (qa->given & QARG_MAX_LENGTH_BYTES)
		p->max_queue_bytes = v->max_queue_bytes;
	if (qa->given & QARG_MESSAGE_TTL)
		p->message_ttl_ms = v->message_ttl_ms;
	if (qa->given & QARG_OVERFLOW)
		p->overflow = v->overflow;
	if (qa->given & QARG_DEAD_LETTER)
		memcpy(p->dead_letter_queue, v->dead_letter_queue, sizeof(p->dead_letter_queue));
	if (qa->given & QARG_MAX_PRIORITY)
		p->max_priority = v->max_priority;
	if (qa->given & QARG_EXPIRES)
		p->expires_ms = v->expires_ms;
}

const char *
qargs_differ(const struct queue_args *qa, const struct dest_policy *p)
{
	const struct dest_policy *v = &qa->values;
	if ((qa->given & QARG_MAX_LENGTH) && p->max_queue_messages != v->max_queue_messages)
		return "x-max-length";
	if ((qa->given & QARG_MAX_LENGTH_BYTES) && p->max_queue_bytes != v->max_queue_bytes)
		return "x-max-length-bytes";
	if ((qa->given & QARG_MESSAGE_TTL) && p->message_ttl_ms != v->message_ttl_ms)
		return "x-message-ttl";
	if ((qa->given & QARG_OVERFLOW) && p->overflow != v->overflow)
		return "x-overflow";
	if ((qa->given & QARG_DEAD_LETTER) &&
	    strcmp(p->dead_letter_queue, v->dead_letter_queue) != 0)
		return "x-dead-letter-routing-key";
	if ((qa->given & QARG_MAX_PRIORITY) && p->max_priority != v->max_priority)
		return "x-max-priority";
	if ((qa->given & QARG_EXPIRES) && p->expires_ms != v->expires_ms)
		return "x-expires";
	return NULL;
}
