/* log.h - leveled logging to stderr (which log-file may point at a file). */
#ifndef EFT_LOG_H
#define EFT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* EFT_LOG_QUIET logs nothing (tests); it is not a level a message has. */
enum log_level { EFT_LOG_QUIET = -1, EFT_LOG_ERROR, EFT_LOG_WARN, EFT_LOG_INFO, EFT_LOG_DEBUG };

/* The level is process-wide, like syslog's mask: every module logs. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
int log_level_parse(const char *name, enum log_level *out);
/* Send stderr, and so every log line, to the end of the file at path (made
 * mode 0640 if new); called again after a log rotation moved it (SIGHUP).
 * -1 with a reason in err, and stderr unchanged. */
int log_open_file(const char *path, char *err, size_t errlen);
void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Client text fit for a log line: at most outlen - 1 bytes of s, control
 * characters as '?', "..." when cut.  Returns out. */
const char *log_clean(char *out, size_t outlen, const char *s, size_t len);

/* An event that may repeat for as long as a load lasts (the disk limit
 * reached, then left, once a second): the first is logged in full, those
 * that follow only as a count, at most once per interval.  Zero it, then
 * set interval_ms. */
struct log_every {
	uint64_t interval_ms;
	uint64_t last_ms;        /* when a line was last logged */
	uint64_t since;          /* events since, not logged */
	bool logged;             /* anything logged yet */
};
enum log_every_verdict {
	LOG_EVERY_FULL,          /* log this one in full */
	LOG_EVERY_SUMMARY,       /* log the summary: *count events (this one too) */
	LOG_EVERY_QUIET,         /* counted, say nothing */
};
/* An event at now_ms: what to log. */
enum log_every_verdict log_every_event(struct log_every *r, uint64_t now_ms, uint64_t *count);
/* The caller's timer: the number of events to log as a summary if one is
 * due (an interval has passed since the last line), else 0. */
uint64_t log_every_due(struct log_every *r, uint64_t now_ms);

#define log_error(...) log_msg(EFT_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(EFT_LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(EFT_LOG_INFO, __VA_ARGS__)
#define log_debug(...) \
	do { if (log_get_level() >= EFT_LOG_DEBUG) log_msg(EFT_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
