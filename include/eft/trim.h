/* trim.h - memory malloc holds unused, given back to the system after a
 * burst of messages has drained (trim.c).
 *
 * glibc's free gives back only the free top of the heap: one allocation
 * still live above a drained burst (a message queued late) keeps all of
 * the burst's pages resident.  malloc_trim gives back every free page, but
 * in one call whose stall grows with what it gives back, so it is called
 * from a timer, and only when the process's memory has grown by more than
 * its messages account for: memory freed and still resident.  A steady
 * stream, whose memory malloc reuses at once, never calls it. */
#ifndef EFT_TRIM_H
#define EFT_TRIM_H

#include <stdbool.h>
#include <stddef.h>

/* Trim once resident memory has grown by this much more than message
 * memory since the last trim, and message memory has stopped falling (a
 * drain is over, or paused) ... */
#define TRIM_AFTER_BYTES ((size_t)16 << 20)
/* ... or by this much while it is still falling: the stall of one call
 * grows with what it gives back (BENCHMARKS.md: about 10-25 ms for this
 * much), so a long drain gives its memory back in steps of about this
 * size, not all at the end. */
#define TRIM_WHILE_FALLING_BYTES ((size_t)256 << 20)
/* Allocations of at least this size get pages of their own (mmap), given
 * back as they are freed: a large message's body, not the heap's. */
#define TRIM_MMAP_BYTES ((size_t)1 << 20)

struct trim {
	size_t anon_base;  /* anonymous resident memory after the last trim (or at start) */
	size_t held_base;  /* message memory then */
	size_t held_seen;  /* message memory at the last look */
	size_t held_peak;  /* the most message memory since the last trim */
	bool settling;     /* it fell at the last look: look again at the next */
	/* The last trim, for the log: */
	size_t anon_before, anon_after;
	double ms;
};

/* held: the message memory now (messages and the message cache). */
void trim_init(struct trim *t, size_t held);
/* The rule: has anonymous resident memory (anon) grown by enough more
 * than message memory (held) has since the last trim?  falling: message
 * memory fell since the last look. */
bool trim_due(const struct trim *t, size_t anon, size_t held, bool falling);
/* From a timer: if message memory fell since the last look (or at the
 * one before), by at least TRIM_AFTER_BYTES from its peak since the last
 * trim, and trim_due, malloc_trim, and true (t's last-trim figures set).
 * Reads /proc/self/statm then (nothing if it cannot). */
bool trim_tick(struct trim *t, size_t held);
/* Once, at start, before the broker allocates: malloc's own trimming of
 * the heap's top waits for TRIM_AFTER_BYTES free there (glibc's default is
 * 128 KB, so each write that freed a connection's output chains gave their
 * pages back, and the next burst of output faulted fresh ones in: two
 * thirds of eftd's CPU in fan-out, BENCHMARKS.md).  trim_tick gives back
 * what a drained burst leaves.  Setting it fixes glibc's mmap threshold,
 * which it would otherwise move: TRIM_MMAP_BYTES.  0, or -1 if malloc
 * refused either (not glibc's, or under a sanitizer that ignores it). */
int trim_configure_malloc(void);
/* The process's anonymous resident memory in bytes (RssAnon: resident
 * less file-backed and shared pages), or 0 if /proc cannot tell. */
size_t trim_anon_rss(void);

#endif
