/* wire.c - encoding server frames straight into a connection's output
 * buffer.  A MESSAGE is one reserved extent (prefix, shared header block,
 * body); a large body is not copied but referenced, holding the message. */
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>


#include "eft/sub.h"
#include "eft/wire.h"

static char *
put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

int
wire_message(struct outbuf *out, enum stomp_version v, const struct sub *s, struct msg *m,
    const char *ack_id, size_t ack_len, bool redelivered)
{
	static const char redelivered_line[] = "redelivered:true\n";
	size_t head = 8 + s->sub_line_len + m->block_len[v] + 1;
	if (ack_id != NULL)
		head += 5 + ack_len;
	if (redelivered)
		head += sizeof(redelivered_line) - 1;
	bool by_ref = m->body_len + 1 >= WIRE_REFERENCE_MIN;
	size_t total = head + (by_ref ? 0 : m->body_len + 1);

	char *p = outbuf_space(out, total);
	if (p == NULL)
		return -1;
	p = put(p, "MESSAGE\n", 8);
	p = put(p, s->sub_line, s->sub_line_len);
	if (ack_id != NULL) {
		p = put(p, "ack:", 4);
		p = put(p, ack_id, ack_len);
		*p++ = '\n';
	}
	if (redelivered)
		p = put(p, redelivered_line, sizeof(redelivered_line) - 1);
	p = put(p, m->block[v], m->block_len[v]);
	*p++ = '\n';
	if (!by_ref)
		p = put(p, m->body, m->body_len + 1);
	outbuf_wrote(out, total);
	if (by_ref && outbuf_add_reference(out, m->body, m->body_len + 1, msg_unref_cb,
	    msg_ref(m)) != 0) {
		msg_unref(m);
		return -1;
	}
	return 0;
}

int
wire_header(struct outbuf *out, enum stomp_version v, const char *name, const char *value,
    size_t value_len)
{
	size_t nlen = strlen(name);
	size_t total = nlen + 1 + frame_escaped_len(v, value, value_len) + 1;
	char *p = outbuf_space(out, total);
	if (p == NULL)
		return -1;
	p = put(p, name, nlen);
	*p++ = ':';
	p = frame_escape(v, p, value, value_len);
	*p++ = '\n';
	outbuf_wrote(out, total);
	return 0;
}

int
wire_receipt(struct outbuf *out, enum stomp_version v, const char *receipt_id, size_t len)
{
	if (outbuf_add(out, "RECEIPT\n", 8) != 0 ||
	    wire_header(out, v, "receipt-id", receipt_id, len) != 0)
		return -1;
	return outbuf_add(out, "\n", 2); /* blank line and the NUL */
}

int
wire_error(struct outbuf *out, enum stomp_version v, const char *message,
    const char *receipt_id, size_t receipt_len, const char *extra_line, const char *detail)
{
	char clen[32];
	size_t dlen = detail ? strlen(detail) : 0;
	snprintf(clen, sizeof(clen), "%zu", dlen);
	if (outbuf_add(out, "ERROR\n", 6) != 0 ||
	    (extra_line != NULL && outbuf_add(out, extra_line, strlen(extra_line)) != 0) ||
	    wire_header(out, v, "message", message, strlen(message)) != 0)
		return -1;
	if (receipt_id != NULL && wire_header(out, v, "receipt-id", receipt_id, receipt_len) != 0)
		return -1;
	if (wire_header(out, v, "content-type", "text/plain", 10) != 0 ||
	    wire_header(out, v, "content-length", clen, strlen(clen)) != 0 ||
	    outbuf_add(out, "\n", 1) != 0 || (dlen && outbuf_add(out, detail, dlen) != 0))
		return -1;
	return outbuf_add(out, "", 1);
}
