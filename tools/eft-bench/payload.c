/* payload.c - building and checking message bodies (layout in payload.h).
 * Both run once per message, so they are table look-ups, three multiplies
 * and one memcpy/memcmp of the filler against a pattern made once per run. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "payload.h"

/* 61 characters: a prime, so consecutive sequence numbers shift the phase. */
static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY";
#define PERIOD (sizeof(alphabet) - 1)

static char *pattern;
static size_t pattern_len;

/* Hex digit pairs for each byte value, and each character's digit value
 * (0xff when not a lowercase hex digit). */
static char hex_pair[256][2];
static unsigned char hex_value[256];

void
payload_init(size_t max_size)
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < 256; i++) {
		hex_pair[i][0] = digits[i >> 4];
		hex_pair[i][1] = digits[i & 15];
		hex_value[i] = 0xff;
	}
	for (int i = 0; i < 16; i++)
		hex_value[(unsigned char)digits[i]] = (unsigned char)i;

	size_t want = max_size + PERIOD;
	if (pattern != NULL && pattern_len >= want)
		return;
	free(pattern);
	pattern = xmalloc(want);
	pattern_len = want;
	for (size_t i = 0; i < want; i++)
		pattern[i] = alphabet[i % PERIOD];
}

/* The check value of bytes 0..23: three independent multiplies rather than
 * a byte-at-a-time hash, since it runs for every message sent and received.
 * A change to any one byte changes the result. */
static uint32_t
check_of(const char *p)
{
	uint64_t a, b, c;
	memcpy(&a, p, 8);
	memcpy(&b, p + 8, 8);
	memcpy(&c, p + 16, 8);
	uint64_t h = a * 0x9e3779b97f4a7c15ull + b * 0xc2b2ae3d27d4eb4full +
	    c * 0x165667b19e3779f9ull;
	return (uint32_t)(h ^ (h >> 29) ^ (h >> 47));
}

/* v as 2 * bytes hex digits, most significant first. */
static void
put_hex(char *dst, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--) {
		memcpy(dst + 2 * i, hex_pair[v & 0xff], 2);
		v >>= 8;
	}
}

static int
get_hex(const char *s, int digits, uint64_t *out)
{
	uint64_t v = 0;
	unsigned bad = 0;
	for (int i = 0; i < digits; i++) {
		unsigned d = hex_value[(unsigned char)s[i]];
		bad |= d;
		v = v << 4 | (d & 15);
	}
	*out = v;
	return (bad & 0xf0) ? -1 : 0;
}

void
payload_write(char *dst, size_t size, uint64_t seq, uint64_t sent_ns)
{
	put_hex(dst, seq, 4);
	put_hex(dst + 8, sent_ns, 8);
	put_hex(dst + 24, check_of(dst), 4);
	memcpy(dst + PAYLOAD_MIN, pattern + seq % PERIOD, size - PAYLOAD_MIN);
}

int
payload_read(const char *p, size_t len, size_t size, uint64_t *seq, uint64_t *sent_ns)
{
	uint64_t check;
	if (len != size || len < PAYLOAD_MIN)
		return -1;
	if (get_hex(p, 8, seq) != 0 || get_hex(p + 8, 16, sent_ns) != 0 ||
	    get_hex(p + 24, 8, &check) != 0 || check != check_of(p))
		return -1;
	return memcmp(p + PAYLOAD_MIN, pattern + *seq % PERIOD, size - PAYLOAD_MIN) == 0 ? 0 : -1;
}
