/* trim.c - memory malloc holds unused, given back to the system after a
 * burst of messages has drained (see trim.h).
 *
 * malloc_trim(0) walks malloc's free chunks in every arena and madvises
 * (MADV_DONTNEED) the whole pages inside each: about 40 ms a gigabyte on
 * the machine of BENCHMARKS.md, nearly all of it the kernel freeing pages.
 * The pages of malloc's bins stay mapped: a later burst takes them again
 * (a page fault each), as it would fresh ones. */
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "eft/trim.h"

size_t
trim_anon_rss(void)
{
	/* "size resident shared ..." in pages; read without stdio, which
	 * would cost ten times the instructions of the rest of a look. */
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	unsigned long long field[3];
	const char *p = buf;
	for (int i = 0; i < 3; i++) {
		char *end;
		field[i] = strtoull(p, &end, 10);
		if (end == p)
			return 0;
		p = end;
	}
	long page = sysconf(_SC_PAGESIZE);
	if (page <= 0 || field[2] > field[1])
		return 0;
	return (size_t)(field[1] - field[2]) * (size_t)page;
}

int
trim_configure_malloc(void)
{
	int ok = mallopt(M_TRIM_THRESHOLD, (int)TRIM_AFTER_BYTES);
	ok &= mallopt(M_MMAP_THRESHOLD, (int)TRIM_MMAP_BYTES);
	return ok == 1 ? 0 : -1;
}

void
trim_init(struct trim *t, size_t held)
{
	*t = (struct trim){ .anon_base = trim_anon_rss(), .held_base = held, .held_seen = held,
	    .held_peak = held };
}

bool
trim_due(const struct trim *t, size_t anon, size_t held, bool falling)
{
	/* Signed: either may have shrunk since the last trim. */
	int64_t grown = (int64_t)anon - (int64_t)t->anon_base;
	int64_t messages = (int64_t)held - (int64_t)t->held_base;
	int64_t unused = grown - messages;
	return unused >= (int64_t)(falling ? TRIM_WHILE_FALLING_BYTES : TRIM_AFTER_BYTES);
}

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

bool
trim_tick(struct trim *t, size_t held)
{
	bool falling = held < t->held_seen;
	t->held_seen = held;
	if (held > t->held_peak)
		t->held_peak = held;
	/* Less message memory freed than a trim's step cannot leave a step
	 * unused: no /proc read for the small ups and downs of a steady load
	 * (RPC, a queue that fills and empties by a few MB). */
	if (t->held_peak - held < TRIM_AFTER_BYTES)
		return false;
	/* Only message memory that fell leaves memory unused: no /proc read
	 * while it rises or stays (idle), but once more after it stopped
	 * falling. */
	if (!falling && !t->settling)
		return false;
	t->settling = falling;
	size_t anon = trim_anon_rss();
	if (anon == 0 || !trim_due(t, anon, held, falling))
		return false;
	double start = now_ms();
	malloc_trim(0);
	t->ms = now_ms() - start;
	t->anon_before = anon;
	t->anon_after = trim_anon_rss();
	t->anon_base = t->anon_after != 0 ? t->anon_after : anon;
	t->held_base = held;
	t->held_peak = held;
	t->settling = false;
	return true;
}
