/* temp.c - temp-queues: private reply queues made on demand by reply-to. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "eft/backend.h"
#include "eft/broker.h"
#include "eft/dest.h"
#include "eft/log.h"
#include "eft/session.h"
#include "eft/sub.h"
#include "eft/temp.h"

/* 16 random bytes as 22 URL-safe base64 characters: unguessable, header-safe. */
static void
random_name(char out[23])
{
	static const char alphabet[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	unsigned char bytes[17] = { 0 };
	if (getrandom(bytes, 16, 0) != 16) {
		/* getrandom from the kernel pool does not fail for 16 bytes once
		 * booted; if it somehow does, fall back to something unique. */
		for (int i = 0; i < 16; i++)
			bytes[i] = (unsigned char)random();
	}
	for (int i = 0; i < 22; i++) {
		int bit = i * 6, byte = bit / 8, shift = bit % 8;
		unsigned v = ((unsigned)bytes[byte] << 8 | bytes[byte + 1]) >> (10 - shift);
		out[i] = alphabet[v & 63];
	}
	out[22] = '\0';
}

struct temp *
temp_get(struct session *ss, const char *name, size_t len)
{
	struct temp *t;
	HASH_FIND(hh, ss->temps, name, len, t);
	if (t != NULL)
		return t;

	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->name = malloc(len + 1);
	if (t->name == NULL)
		goto fail;
	memcpy(t->name, name, len);
	t->name[len] = '\0';
	t->name_len = len;

	char qname[REPLY_PREFIX_LEN + 8 + 23 + 400];
	memcpy(qname, REPLY_PREFIX "eft.gen-", REPLY_PREFIX_LEN + 8);
	random_name(qname + REPLY_PREFIX_LEN + 8);
	/* In a cluster the name says which node has it: replies find their way. */
	const struct backend *be = ss->broker->backend;
	if (be != NULL && be->ops->temp_name != NULL) {
		char random[23];
		memcpy(random, qname + REPLY_PREFIX_LEN + 8, sizeof(random));
		if (be->ops->temp_name(be->impl, qname, sizeof(qname), random) == 0)
			goto fail;
	}
	t->dest = dests_get(&ss->broker->dests, qname, strlen(qname), DEST_QUEUE);
	if (t->dest == NULL)
		goto fail;
	dest_set_temp(t->dest, t);
	HASH_ADD_KEYPTR(hh, ss->temps, t->name, t->name_len, t);
	log_debug("%s: %s is %s", session_peer(ss), t->name, dest_name(t->dest));
	return t;
fail:
	free(t->name);
	free(t);
	return NULL;
}

int
temp_auto_subscribe(struct session *ss, struct temp *t)
{
	if (t->auto_sub != NULL || dest_subscribers(t->dest) > 0)
		return 0;
	/* The id is the name the client chose: RabbitMQ clients match replies on it. */
	struct sub *s;
	HASH_FIND(hh, ss->ep.subs, t->name, t->name_len, s);
	if (s != NULL)
		return -2; /* the client uses that id for another destination */
	t->auto_sub = sub_new(&ss->ep, t->dest, t->name, t->name_len, true,
	    &(struct sub_options){ .ack = ACK_AUTO }, NULL);
	if (t->auto_sub == NULL)
		return -1;
	t->auto_sub->owner_ref = &t->auto_sub; /* cleared when it ends */
	dest_dispatch(t->dest);
	return 0;
}

void
temp_free_all(struct session *ss)
{
	struct temp *t, *tmp;
	HASH_ITER(hh, ss->temps, t, tmp) {
		HASH_DEL(ss->temps, t);
		struct dest *d = t->dest;
		if (dest_depth(d) > 0)
			log_debug("%s: %s deleted with %zu messages", session_peer(ss), t->name,
			    dest_depth(d));
		dest_set_temp(d, NULL);
		dests_delete(&ss->broker->dests, d);
		free(t->name);
		free(t);
	}
}
