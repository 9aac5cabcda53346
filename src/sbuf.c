/* sbuf.c - a growable string (see sbuf.h). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eft/sbuf.h"

void
sbuf_init(struct sbuf *s)
{
	memset(s, 0, sizeof(*s));
}

void
sbuf_free(struct sbuf *s)
{
	free(s->data);
	sbuf_init(s);
}

/* Room for n more bytes and a NUL; false if there is none (failed). */
static bool
sbuf_room(struct sbuf *s, size_t n)
{
	if (s->failed)
		return false;
	if (s->len + n + 1 <= s->cap)
		return true;
	size_t cap = s->cap ? s->cap : 256;
	while (cap < s->len + n + 1) {
		if (cap > SIZE_MAX / 2) {
			s->failed = true;
			return false;
		}
		cap *= 2;
	}
	char *p = realloc(s->data, cap);
	if (p == NULL) {
		s->failed = true;
		return false;
	}
	s->data = p;
	s->cap = cap;
	return true;
}

void
sbuf_add(struct sbuf *s, const char *p, size_t n)
{
	if (!sbuf_room(s, n))
		return;
	memcpy(s->data + s->len, p, n);
	s->len += n;
	s->data[s->len] = '\0';
}

void
sbuf_adds(struct sbuf *s, const char *str)
{
	sbuf_add(s, str, strlen(str));
}

void
sbuf_addc(struct sbuf *s, char c)
{
	sbuf_add(s, &c, 1);
}

void
sbuf_add_u64(struct sbuf *s, uint64_t v)
{
	char digits[20];
	size_t n = 0;
	do {
		digits[sizeof(digits) - 1 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	sbuf_add(s, digits + sizeof(digits) - n, n);
}

void
sbuf_printf(struct sbuf *s, const char *fmt, ...)
{
	va_list ap;
	size_t room = s->cap > s->len ? s->cap - s->len : 0;
	va_start(ap, fmt);
	int n = s->failed ? -1 : vsnprintf(s->data ? s->data + s->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n < 0) {
		s->failed = true;
		return;
	}
	if ((size_t)n >= room) {
		if (!sbuf_room(s, (size_t)n))
			return;
		va_start(ap, fmt);
		vsnprintf(s->data + s->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	s->len += (size_t)n;
}

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t
utf8_len(const unsigned char *p, size_t n)
{
	size_t len = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
	if (len == 0 || len > n || p[0] > 0xf4)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	/* No overlong forms, surrogates or code points past U+10FFFF. */
	if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
	    (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
		return 0;
	return len;
}

void
sbuf_json_string(struct sbuf *s, const char *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)p;
	sbuf_addc(s, '"');
	size_t start = 0;
	for (size_t i = 0; i < n;) {
		unsigned char c = u[i];
		size_t seq = c >= 0x80 ? utf8_len(u + i, n - i) : 1;
		if (seq > 1 || (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')) {
			i += seq;
			continue;
		}
		sbuf_add(s, p + start, i - start);
		if (c == '"' || c == '\\') {
			char esc[2] = { '\\', (char)c };
			sbuf_add(s, esc, 2);
		} else if (c == '\n') {
			sbuf_add(s, "\\n", 2);
		} else if (c >= 0x80) {
			sbuf_add(s, "\\ufffd", 6); /* not UTF-8: JSON must be */
		} else {
			char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			sbuf_add(s, esc, 6);
		}
		start = ++i;
	}
	sbuf_add(s, p + start, n - start);
	sbuf_addc(s, '"');
}
