/* log.c - leveled logging to stderr with a timestamp, one line per call. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
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
