/* crc32c.h - CRC-32C (Castagnoli), the checksum on every journal record:
 * the SSE4.2 crc32 instruction where the CPU has it, a table otherwise. */
#ifndef EFT_CRC32C_H
#define EFT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue crc over data; start with 0.  crc32c(0, "123456789", 9) is
 * 0xe3069283. */
uint32_t crc32c(uint32_t crc, const void *data, size_t len);

#endif
