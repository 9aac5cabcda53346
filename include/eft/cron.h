/* cron.h - the cron subset that AMQ_SCHEDULED_CRON takes: five fields
 * (minute hour day-of-month month day-of-week) of '*', numbers, lists
 * "a,b", ranges "a-b" and steps "* /n" or "a-b/n", read in UTC.  As in
 * Vixie cron, when both day fields are restricted a day matches either.
 * Pure: no clock, no allocation. */
#ifndef EFT_CRON_H
#define EFT_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cron {
	uint64_t minutes;     /* bit n: minute n (0-59) */
	uint32_t hours;       /* 0-23 */
	uint32_t days;        /* 1-31 */
	uint16_t months;      /* 1-12 */
	uint8_t weekdays;     /* 0-6, Sunday 0 (7 is read as 0) */
	bool days_any;        /* day-of-month was '*' */
	bool weekdays_any;    /* day-of-week was '*' */
};

/* Read s (len bytes) into *c: 0, or -1 with what is wrong in err. */
int cron_parse(const char *s, size_t len, struct cron *c, char *err, size_t errlen);
/* The first whole minute strictly after after_ms (ms since the epoch, UTC)
 * that c matches, in ms; 0 if none within the next eight years (e.g.
 * "0 0 30 2 *"). */
uint64_t cron_next(const struct cron *c, uint64_t after_ms);

#endif
