/* check.h - the fuzz harnesses' invariant check: name the condition and
 * where it failed, say why, and abort so that libFuzzer keeps the input.
 * Define FUZZER as the harness's name before including it. */
#ifndef EFT_FUZZ_CHECK_H
#define EFT_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                            \
	do {                                                                        \
		if (!(cond)) {                                                      \
			fprintf(stderr, FUZZER ": %s (%s:%d): ", #cond, __FILE__,   \
			    __LINE__);                                              \
			fprintf(stderr, __VA_ARGS__);                               \
			fputc('\n', stderr);                                        \
			abort();                                                    \
		}                                                                   \
	} while (0)

#endif
