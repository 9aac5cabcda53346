/* crc32c.c - CRC-32C (see crc32c.h). */
#include <string.h>

#include "eft/crc32c.h"

#define POLY 0x82f63b78u /* reflected Castagnoli */

static uint32_t table[256];

static void
make_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[i] = c;
	}
}

static uint32_t
crc32c_table(uint32_t crc, const unsigned char *p, size_t len)
{
	if (table[1] == 0)
		make_table();
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
	}
	uint32_t c32 = (uint32_t)c;
	for (; len > 0; p++, len--)
		c32 = _mm_crc32_u8(c32, *p);
	return c32;
}

uint32_t
crc32c(uint32_t crc, const void *data, size_t len)
{
	static int have_hw = -1;
	if (have_hw < 0)
		have_hw = __builtin_cpu_supports("sse4.2");
	crc = ~crc;
	crc = have_hw ? crc32c_hw(crc, data, len) : crc32c_table(crc, data, len);
	return ~crc;
}
#else
uint32_t
crc32c(uint32_t crc, const void *data, size_t len)
{
	return ~crc32c_table(~crc, data, len);
}
#endif
