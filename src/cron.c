/* cron.c - a cron subset for scheduled messages (see cron.h).  The next
 * time is found day by day, then hour and minute within the day, so that a
 * rare date costs at most a few thousand steps, never a walk minute by
 * minute. */
#include <stdio.h>
#include <string.h>

#include "eft/cron.h"

struct field {
	const char *name;
	unsigned lo, hi;
};

static const struct field fields[5] = {
	{ "minute", 0, 59 },
	{ "hour", 0, 23 },
	{ "day-of-month", 1, 31 },
	{ "month", 1, 12 },
	{ "day-of-week", 0, 7 },
};

/* A number at *p (before end) into *n; false if there is none or it is
 * out of 0-99 (no field goes past 59). */
static bool
number(const char **p, const char *end, unsigned *n)
{
	const char *s = *p;
	unsigned v = 0;
	while (s < end && *s >= '0' && *s <= '9' && s - *p < 3)
		v = v * 10 + (unsigned)(*s++ - '0');
	if (s == *p || (s < end && *s >= '0' && *s <= '9'))
		return false;
	*n = v;
	*p = s;
	return true;
}

/* One field, (s, len), into the bits *out; false with err filled. */
static bool
parse_field(const char *s, size_t len, const struct field *f, uint64_t *out, bool *any,
    char *err, size_t errlen)
{
	const char *p = s, *end = s + len;
	*out = 0;
	*any = len == 1 && *s == '*';
	while (p < end) {
		unsigned a, b, step = 1;
		if (*p == '*') {
			a = f->lo;
			b = f->hi;
			p++;
		} else {
			if (!number(&p, end, &a))
				goto bad;
			b = a;
			if (p < end && *p == '-') {
				p++;
				if (!number(&p, end, &b))
					goto bad;
			}
		}
		if (p < end && *p == '/') {
			p++;
			if (!number(&p, end, &step) || step == 0)
				goto bad;
		}
		if (p < end && *p != ',')
			goto bad;
		if (a < f->lo || b > f->hi || a > b) {
			snprintf(err, errlen, "%s %u-%u is out of %u-%u", f->name, a, b, f->lo, f->hi);
			return false;
		}
		for (unsigned v = a; v <= b; v += step)
			*out |= 1ull << v;
		if (p < end && ++p == end)
			goto bad; /* a trailing ',' */
	}
	if (*out == 0)
		goto bad;
	return true;
bad:
	snprintf(err, errlen, "the %s field '%.*s' is not '*', a number, a list a,b, a range "
	    "a-b or a step */n", f->name, (int)(len > 40 ? 40 : len), s);
	return false;
}

int
cron_parse(const char *s, size_t len, struct cron *c, char *err, size_t errlen)
{
	const char *p = s, *end = s + len;
	uint64_t bits[5];
	bool any[5];
	int n = 0;
	memset(c, 0, sizeof(*c));
	while (p < end) {
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p == end)
			break;
		const char *start = p;
		while (p < end && *p != ' ' && *p != '\t')
			p++;
		if (n == 5) {
			snprintf(err, errlen, "more than five fields (minute hour day-of-month month "
			    "day-of-week)");
			return -1;
		}
		if (!parse_field(start, (size_t)(p - start), &fields[n], &bits[n], &any[n], err,
		    errlen))
			return -1;
		n++;
	}
	if (n != 5) {
		snprintf(err, errlen, "%d field%s, not five (minute hour day-of-month month "
		    "day-of-week)", n, n == 1 ? "" : "s");
		return -1;
	}
	c->minutes = bits[0];
	c->hours = (uint32_t)bits[1];
	c->days = (uint32_t)bits[2];
	c->months = (uint16_t)bits[3];
	c->weekdays = (uint8_t)((bits[4] | bits[4] >> 7) & 0x7f); /* 7 is Sunday too */
	c->days_any = any[2];
	c->weekdays_any = any[4];
	return 0;
}

/* The month and day of a day since 1970-01-01 (Howard Hinnant's
 * civil_from_days): no time zone, no library call. */
static void
civil_from_days(int64_t z, unsigned *m, unsigned *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
}

static bool
day_matches(const struct cron *c, int64_t day)
{
	unsigned m, d;
	civil_from_days(day, &m, &d);
	if (!(c->months >> m & 1))
		return false;
	unsigned wd = (unsigned)((day % 7 + 7 + 4) % 7); /* 1970-01-01 was a Thursday */
	bool dom = c->days >> d & 1, dow = c->weekdays >> wd & 1;
	if (c->days_any || c->weekdays_any)
		return dom && dow;
	return dom || dow;
}

#define CRON_SEARCH_DAYS (8 * 366)

uint64_t
cron_next(const struct cron *c, uint64_t after_ms)
{
	uint64_t minute = after_ms / 60000 + 1; /* the first whole minute after */
	int64_t day = (int64_t)(minute / 1440);
	unsigned from = (unsigned)(minute % 1440);
	for (int i = 0; i < CRON_SEARCH_DAYS; i++, day++, from = 0) {
		if (!day_matches(c, day))
			continue;
		for (unsigned h = from / 60; h < 24; h++) {
			if (!(c->hours >> h & 1))
				continue;
			for (unsigned mi = h == from / 60 ? from % 60 : 0; mi < 60; mi++)
				if (c->minutes >> mi & 1)
					return ((uint64_t)day * 1440 + h * 60 + mi) * 60000;
		}
	}
	return 0;
}
