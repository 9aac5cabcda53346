/* frame.h - STOMP frames: an incremental parser for what brokers send and
 * builders for what clients send.  Pure bytes in, bytes out: no sockets. */
#ifndef EFT_BENCH_FRAME_H
#define EFT_BENCH_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

enum frame_cmd { FRAME_OTHER, FRAME_CONNECTED, FRAME_MESSAGE, FRAME_RECEIPT, FRAME_ERROR };

/* The only headers eft-bench reads.  Others are skipped without being split. */
enum frame_hdr {
	HDR_ACK,
	HDR_CONTENT_LENGTH,
	HDR_CORRELATION_ID,
	HDR_DESTINATION,
	HDR_MESSAGE,
	HDR_MESSAGE_ID,
	HDR_RECEIPT_ID,
	HDR_REPLY_TO,
	HDR_SERVER,
	HDR_SUBSCRIPTION,
	HDR_VERSION,
	HDR_COUNT
};

/* A header value as it was on the wire (still escaped); p is NULL when absent. */
struct hval {
	const char *p;
	size_t len;
};

/* Points into the parser's input: valid until that input is consumed. */
struct frame {
	enum frame_cmd cmd;
	const char *name;
	size_t name_len;
	struct hval h[HDR_COUNT];
	const char *body;
	size_t body_len;
};

enum frame_status { FRAME_OK, FRAME_MORE, FRAME_BAD };

/* Parse one frame from the front of p[0, len).  FRAME_OK: *used is the bytes
 * it took (with any heart-beat EOLs before it).  FRAME_MORE: *used is how
 * many bytes are needed before trying again.  FRAME_BAD: *why says what is
 * wrong. */
enum frame_status frame_parse(const char *p, size_t len, struct frame *f, size_t *used,
    const char **why);

/* True when header value v (as on the wire) equals the plain string s. */
int frame_hval_is(struct hval v, const char *s);

/* Undo STOMP 1.2 header escaping into out (NUL-terminated, truncated to
 * outlen); for showing values to people. */
void frame_unescape(char *out, size_t outlen, struct hval v);

/* Builders: "COMMAND\n", then headers, then frame_finish adds the blank
 * line, the body and the NUL. */
void frame_begin(struct buf *b, const char *command);
void frame_header(struct buf *b, const char *name, const char *value);    /* escapes value */
void frame_header_raw(struct buf *b, const char *name, struct hval value); /* already escaped */
void frame_header_u64(struct buf *b, const char *name, uint64_t value);
/* "name:value" given by a user: the value part is escaped. */
void frame_header_line(struct buf *b, const char *line);
void frame_finish(struct buf *b, const char *body, size_t len);

#endif
