/* frame.h - a parsed STOMP frame, the commands and headers eftd knows by
 * name, and header value escaping per protocol version. */
#ifndef EFT_FRAME_H
#define EFT_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum stomp_version { STOMP_1_0, STOMP_1_1, STOMP_1_2, STOMP_VERSIONS };

enum frame_cmd {
	CMD_UNKNOWN,
	CMD_CONNECT,
	CMD_STOMP,
	CMD_SEND,
	CMD_SUBSCRIBE,
	CMD_UNSUBSCRIBE,
	CMD_ACK,
	CMD_NACK,
	CMD_BEGIN,
	CMD_COMMIT,
	CMD_ABORT,
	CMD_DISCONNECT,
	CMD_COUNT
};

/* Headers the broker looks at; the parser records where each first appears
 * so that a lookup costs nothing however many headers a frame has. */
enum hdr_id {
	HDR_OTHER = -1,
	HDR_ACCEPT_VERSION,
	HDR_ACK,
	HDR_CONTENT_LENGTH,
	HDR_CONTENT_TYPE,
	HDR_DESTINATION,
	HDR_HEART_BEAT,
	HDR_HOST,
	HDR_ID,
	HDR_LOGIN,
	HDR_MESSAGE_ID,
	HDR_PASSCODE,
	HDR_RECEIPT,
	HDR_REPLY_TO,
	HDR_SUBSCRIPTION,
	HDR_TRANSACTION,
	HDR_PREFETCH_COUNT,
	/* A SEND's rare headers, side by side: a SEND with none of the four
	 * pays one test for all (proto.c). */
	HDR_PRIORITY,
	HDR_EXPIRES,
	HDR_EXPIRATION,
	/* Any of the schedule headers (schedule.h): AMQ_SCHEDULED_DELAY,
	 * _PERIOD, _REPEAT, _CRON and x-delay; the rare SEND that has one
	 * looks each up by name. */
	HDR_SCHEDULED,
	HDR_SELECTOR,
	HDR_COUNT
};

struct header {
	char *name;
	char *value;
	uint32_t name_len;
	uint32_t value_len;
	int id; /* enum hdr_id */
};

/* A frame points into the parser's buffer: it lives until the next read. */
struct frame {
	enum frame_cmd cmd;
	const char *cmd_name;
	size_t cmd_len;
	struct header *hdr;
	size_t nhdr;
	int32_t known[HDR_COUNT]; /* index into hdr of the first occurrence, or -1 */
	bool plain;               /* no header name or value needs escaping in any version */
	char *body;
	size_t body_len;
};

enum frame_cmd frame_cmd_lookup(const char *name, size_t len);
const char *frame_cmd_name(enum frame_cmd cmd);
enum hdr_id frame_hdr_lookup(const char *name, size_t len);
const char *frame_hdr_name(enum hdr_id id);

/* First value of a known header, or NULL. */
static inline const struct header *
frame_get(const struct frame *f, enum hdr_id id)
{
	return f->known[id] < 0 ? NULL : &f->hdr[f->known[id]];
}

/* Forget that f has a known header (a handler that takes it over: a SEND's
 * receipt in a transaction, answered at COMMIT). */
static inline void
frame_forget(struct frame *f, enum hdr_id id)
{
	f->known[id] = -1;
}

/* First header named name, for the rare ones the parser does not index
 * (persistent, client-id, activemq.*): a walk over the headers; or NULL. */
const struct header *frame_find(const struct frame *f, const char *name);
/* Is the first header named name exactly value? */
bool frame_header_is(const struct frame *f, const char *name, const char *value);
/* ... value in any case?  For true/false headers: Python clients send "True"
 * and "False" (str() of a bool), and RabbitMQ takes them. */
bool frame_header_is_nocase(const struct frame *f, const char *name, const char *value);

/* A header value that must be a plain decimal number (content-length,
 * message-id, prefetch-count...): digits only, at most 19 of them. */
int frame_parse_u64(const char *s, size_t len, uint64_t *out);

/* Does the string need escaping to be a header name or value in version v? */
bool frame_needs_escape(enum stomp_version v, const char *s, size_t len);
/* Length of s once escaped for version v. */
size_t frame_escaped_len(enum stomp_version v, const char *s, size_t len);
/* Write s escaped for version v at dst; returns the end of what was written. */
char *frame_escape(enum stomp_version v, char *dst, const char *s, size_t len);
/* Undo escaping in place; 0, or -1 on an undefined escape sequence. */
int frame_unescape(enum stomp_version v, char *s, uint32_t *len);

#endif
