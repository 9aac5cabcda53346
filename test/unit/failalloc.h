/* failalloc.h - allocations that fail on demand, for the unit tests that
 * check what eft's code does when malloc, calloc or realloc returns NULL.
 * The Makefile links those tests with -Wl,--wrap=malloc,--wrap=calloc,
 * --wrap=realloc (WRAP_ALLOC), so every allocation of eft's own code comes
 * here.  Include it in exactly one file of a test binary. */
#ifndef EFT_TEST_FAILALLOC_H
#define EFT_TEST_FAILALLOC_H

#include <stdbool.h>
#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);

static long allocs_left = -1; /* -1: no limit; 0: every allocation fails */
static bool fail_once;        /* ... only the next one */
static long failed;           /* allocations failed since fail_after/fail_only */

static inline int
alloc_fails(void)
{
	if (allocs_left == 0) {
		failed++;
		if (fail_once)
			allocs_left = -1;
		return 1;
	}
	if (allocs_left > 0)
		allocs_left--;
	return 0;
}

void *
__wrap_malloc(size_t n)
{
	return alloc_fails() ? NULL : __real_malloc(n);
}

void *
__wrap_calloc(size_t n, size_t size)
{
	return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *
__wrap_realloc(void *p, size_t n)
{
	return alloc_fails() ? NULL : __real_realloc(p, n);
}

/* Allocations after the first n fail (n = -1: none does). */
static inline void
fail_after(long n)
{
	allocs_left = n;
	failed = 0;
	fail_once = false;
}

/* Allocation n fails, the others succeed. */
static inline void
fail_only(long n)
{
	fail_after(n);
	fail_once = true;
}

#endif
