/* sbuf.h - a growable string for answers built at once (the admin API,
 * metrics): append, format, and quote for JSON.  An allocation that fails
 * marks the buffer failed and later appends do nothing, so a caller checks
 * once at the end. */
#ifndef EFT_SBUF_H
#define EFT_SBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sbuf {
	char *data;        /* NUL-terminated while not failed */
	size_t len, cap;
	bool failed;       /* out of memory: the contents are incomplete */
};

void sbuf_init(struct sbuf *s);
void sbuf_free(struct sbuf *s);
void sbuf_add(struct sbuf *s, const char *p, size_t n);
void sbuf_adds(struct sbuf *s, const char *str);
void sbuf_addc(struct sbuf *s, char c);
/* v in decimal (without printf: metrics write tens of thousands). */
void sbuf_add_u64(struct sbuf *s, uint64_t v);
void sbuf_printf(struct sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* p as a JSON string, quotes included (bytes >= 0x80 are passed as they
 * are; controls, '"' and '\' are escaped). */
void sbuf_json_string(struct sbuf *s, const char *p, size_t n);

#endif
