/* parser.h - incremental STOMP frame parser.
 *
 * Bytes go into the parser's own buffer (parser_space + parser_commit, or
 * parser_feed); parser_next then hands out complete frames one at a time.
 * Each byte is looked at a bounded number of times, whatever way the input is
 * split, so parsing cost is linear in what was received. */
#ifndef EFT_PARSER_H
#define EFT_PARSER_H

#include <stddef.h>

#include "eft/frame.h"

struct parser_limits {
	size_t max_frame;       /* bytes in a frame, from command to NUL */
	size_t max_headers;     /* header lines, not counting the command */
	size_t max_header_line; /* bytes in one line */
	size_t max_body;        /* bytes in a body; 0: only max_frame applies */
};

enum parser_state { PARSER_EOL, PARSER_HEADERS, PARSER_BODY, PARSER_FAILED };
/* Which limit a frame broke (parser_limit names the setting). */
enum parser_limit_id {
	PARSER_LIMIT_NONE,
	PARSER_LIMIT_FRAME,
	PARSER_LIMIT_HEADERS,
	PARSER_LIMIT_LINE,
	PARSER_LIMIT_BODY,
};

struct parser {
	char *buf;
	size_t cap;
	size_t start;       /* first byte of the frame being parsed */
	size_t len;         /* bytes held in buf */
	size_t scan;        /* where the search for a line end or NUL resumes */
	size_t line_start;  /* start of the header line being scanned */
	size_t nlines;      /* lines taken from this frame, command included */
	size_t body_start;
	size_t body_end;    /* with content-length: offset of the closing NUL */
	int has_length;
	enum parser_state state;
	enum stomp_version version; /* escaping in use; CONNECT frames are never escaped */
	enum stomp_version escape;  /* escaping of the frame being parsed */
	struct parser_limits limits;
	struct frame frame;
	size_t hdr_cap;     /* entries allocated in frame.hdr */
	char error[160];
	int partial;        /* failed after taking some lines of a frame */
	enum parser_limit_id broken; /* the limit it failed on (parser_limit) */
};

enum parser_result { PARSE_NEED_MORE, PARSE_FRAME, PARSE_ERROR };

void parser_init(struct parser *p, const struct parser_limits *limits);
void parser_free(struct parser *p);
/* Room for at least `want` more bytes at the end of the buffer; *avail says
 * how many.  Invalidates frames handed out before.  NULL if out of memory. */
char *parser_space(struct parser *p, size_t want, size_t *avail);
void parser_commit(struct parser *p, size_t n);
/* Copy bytes in (tests, fuzzing); -1 if out of memory. */
int parser_feed(struct parser *p, const void *data, size_t n);
/* The next complete frame, if any.  After PARSE_ERROR, parser_error() says
 * why and the parser stays failed. */
enum parser_result parser_next(struct parser *p, struct frame **out);
const char *parser_error(const struct parser *p);
/* After PARSE_ERROR: the setting whose limit the frame broke
 * ("max-body-size", ...) with its value in *limit (bytes; header lines for
 * "max-headers"), or NULL if the frame was malformed instead. */
const char *parser_limit(const struct parser *p, size_t *limit);
/* After PARSE_ERROR: the lines of the bad frame parsed before the error
 * (command and headers, no body), or NULL. */
const struct frame *parser_failed_frame(const struct parser *p);
/* True when all of a frame's body (by its content-length) has come but not
 * the NUL that ends it. */
int parser_awaits_nul(const struct parser *p);
/* True when a frame has been started but not finished. */
int parser_mid_frame(const struct parser *p);
/* Release the buffer when nothing is pending (idle connections hold no memory). */
void parser_trim(struct parser *p);

#endif
