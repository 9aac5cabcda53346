/* wire.c - encoding server frames straight into a connection's output
 * buffer.  Every frame is sized first and written into one reservation, so
 * it is written whole or not at all.  A MESSAGE is its prefix, the shared
 * header block and the body; a large body is not copied but referenced,
 * holding the message. */
#include <stdio.h>
#include <string.h>

#include "eft/sub.h"
#include "eft/wire.h"

static char *
put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

/* "name:value\n" with value escaped for v: its length, and writing it. */
static size_t
header_len(enum stomp_version v, const char *name, const char *value, size_t value_len)
{
	return strlen(name) + 1 + frame_escaped_len(v, value, value_len) + 1;
}

static char *
put_header(char *p, enum stomp_version v, const char *name, const char *value, size_t value_len)
{
	p = put(p, name, strlen(name));
	*p++ = ':';
	p = frame_escape(v, p, value, value_len);
	*p++ = '\n';
	return p;
}

/* MESSAGE: sub_line from byte skip, the ack line, then extra (extra_len
 * bytes, may be none).  Inlined twice: for a first delivery with constants
 * (nothing skipped, nothing extra), so the common path tests nothing, and
 * for a redelivery. */
static inline __attribute__((always_inline)) int
write_message(struct outbuf *out, enum stomp_version v, const struct sub *s, struct msg *m,
    const char *ack_id, size_t ack_len, size_t skip, const char *extra, size_t extra_len)
{
	/* Read once: the writes below go through char pointers, which the
	 * compiler must assume could change m. */
	const char *block = msg_block(m, v), *body = msg_body(m);
	size_t block_len = m->block_len[v], body_size = (size_t)m->body_len + 1; /* with its NUL */
	size_t head = 8 + s->sub_line_len - skip + block_len + 1 + extra_len;
	if (ack_id != NULL)
		head += 5 + ack_len;
	bool by_ref = body_size >= WIRE_REFERENCE_MIN;
	size_t total = head + (by_ref ? 0 : body_size);

	char *start = outbuf_space(out, total);
	if (start == NULL)
		return -1;
	char *p = put(start, "MESSAGE\n", 8);
	p = put(p, s->sub_line + skip, s->sub_line_len - skip);
	if (ack_id != NULL) {
		p = put(p, "ack:", 4);
		p = put(p, ack_id, ack_len);
		*p++ = '\n';
	}
	if (extra_len > 0)
		p = put(p, extra, extra_len);
	p = put(p, block, block_len);
	*p++ = '\n';
	if (!by_ref) {
		put(p, body, body_size);
		outbuf_wrote(out, total);
		return 0;
	}
	/* The head stays uncommitted in the reservation until the body's
	 * reference is in place behind it. */
	if (outbuf_add_with_reference(out, head, body, body_size, msg_unref_cb,
	    msg_ref(m)) != 0) {
		msg_unref(m);
		return -1;
	}
	return 0;
}

/* A redelivery says so; sub_line's redelivered:false (redelivered-always),
 * if any, is skipped. */
static __attribute__((noinline)) int
write_redelivered(struct outbuf *out, enum stomp_version v, const struct sub *s, struct msg *m,
    const char *ack_id, size_t ack_len)
{
	static const char line[] = "redelivered:true\n";
	return write_message(out, v, s, m, ack_id, ack_len, s->first_len, line, sizeof(line) - 1);
}

int
wire_message(struct outbuf *out, enum stomp_version v, const struct sub *s, struct msg *m,
    const char *ack_id, size_t ack_len, bool redelivered)
{
	if (__builtin_expect(redelivered, 0))
		return write_redelivered(out, v, s, m, ack_id, ack_len);
	return write_message(out, v, s, m, ack_id, ack_len, 0, NULL, 0);
}

int
wire_receipt(struct outbuf *out, enum stomp_version v, const char *receipt_id, size_t len)
{
	size_t total = 8 + header_len(v, "receipt-id", receipt_id, len) + 2;
	char *p = outbuf_space(out, total);
	if (p == NULL)
		return -1;
	p = put(p, "RECEIPT\n", 8);
	p = put_header(p, v, "receipt-id", receipt_id, len);
	put(p, "\n", 2); /* blank line and the NUL */
	outbuf_wrote(out, total);
	return 0;
}

int
wire_error(struct outbuf *out, enum stomp_version v, const char *message,
    const char *receipt_id, size_t receipt_len, const char *extra_line, const char *detail)
{
	char clen[32];
	size_t dlen = detail ? strlen(detail) : 0;
	snprintf(clen, sizeof(clen), "%zu", dlen);
	size_t total = 6 + (extra_line ? strlen(extra_line) : 0) +
	    header_len(v, "message", message, strlen(message)) +
	    (receipt_id ? header_len(v, "receipt-id", receipt_id, receipt_len) : 0) +
	    header_len(v, "content-type", "text/plain", 10) +
	    header_len(v, "content-length", clen, strlen(clen)) + 1 + dlen + 1;
	char *p = outbuf_space(out, total);
	if (p == NULL)
		return -1;
	p = put(p, "ERROR\n", 6);
	if (extra_line != NULL)
		p = put(p, extra_line, strlen(extra_line));
	p = put_header(p, v, "message", message, strlen(message));
	if (receipt_id != NULL)
		p = put_header(p, v, "receipt-id", receipt_id, receipt_len);
	p = put_header(p, v, "content-type", "text/plain", 10);
	p = put_header(p, v, "content-length", clen, strlen(clen));
	*p++ = '\n';
	p = put(p, detail ? detail : "", dlen);
	*p = '\0';
	outbuf_wrote(out, total);
	return 0;
}
