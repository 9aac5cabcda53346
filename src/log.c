/* log.c - leveled logging to stderr with a timestamp, one line per call. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/time.h>

#include "eft/log.h"

static enum log_level current_level = EFT_LOG_INFO;
static const char *level_names[] = { "error", "warn", "info", "debug" };

void
log_set_level(enum log_level level)
{
	current_level = level;
}

enum log_level
log_get_level(void)
{
	return current_level;
}

int
log_level_parse(const char *name, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(name, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
	if (level > current_level)
		return;
	struct timeval tv;
	struct tm tm;
	char stamp[32];
	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);

	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s.%03ld eftd %s: %s\n", stamp, (long)(tv.tv_usec / 1000),
	    level_names[level], line);
}

int
log_open_file(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open log-file %s: %s", path, strerror(errno));
		return -1;
	}
	/* stderr itself: libevent's and OpenSSL's complaints land there too. */
	if (fd != STDERR_FILENO && dup2(fd, STDERR_FILENO) < 0) {
		snprintf(err, errlen, "cannot log to %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (fd != STDERR_FILENO)
		close(fd);
	return 0;
}

const char *
log_clean(char *out, size_t outlen, const char *s, size_t len)
{
	if (outlen == 0)
		return out;
	size_t room = outlen - 1, n = len < room ? len : room;
	if (len > room && room >= 3)
		n = room - 3;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		out[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	if (len > n && room >= 3) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
	return out;
}

enum log_every_verdict
log_every_event(struct log_every *r, uint64_t now_ms, uint64_t *count)
{
	bool quiet_long = now_ms - r->last_ms >= r->interval_ms;
	if (!r->logged || (quiet_long && r->since == 0)) {
		r->logged = true;
		r->last_ms = now_ms;
		return LOG_EVERY_FULL;
	}
	r->since++;
	if (!quiet_long)
		return LOG_EVERY_QUIET;
	*count = r->since;
	r->since = 0;
	r->last_ms = now_ms;
	return LOG_EVERY_SUMMARY;
}

uint64_t
log_every_due(struct log_every *r, uint64_t now_ms)
{
	if (r->since == 0 || now_ms - r->last_ms < r->interval_ms)
		return 0;
	uint64_t n = r->since;
	r->since = 0;
	r->last_ms = now_ms;
	return n;
}
