// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: durations and UTC time stamps. See duration.h. */
#include "common/duration.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static int fail(char *err, size_t errlen, const char *s, const char *why)
{
	if (err && errlen)
		snprintf(err, errlen, "bad duration \"%s\": %s (use e.g. 90s, 5m, 2h, 1d, 1h30m)",
			 s, why);
	return -1;
}

static int unit_rank(char u, uint64_t *mult)
{
	switch (u) {
	case 'd': *mult = 86400; return 0;
	case 'h': *mult = 3600; return 1;
	case 'm': *mult = 60; return 2;
	case 's': *mult = 1; return 3;
	}
	return -1;
}

int duration_parse(const char *s, uint64_t *out_s, char *err, size_t errlen)
{
	const char *p = s;
	uint64_t total = 0;
	int last_rank = -1;

	if (!s || !*s)
		return fail(err, errlen, s ? s : "", "empty");
	while (*p) {
		uint64_t v = 0, mult;
		int digits = 0, rank;

		if (*p == '-' || *p == '+')
			return fail(err, errlen, s, "no sign allowed");
		while (*p >= '0' && *p <= '9') {
			v = v * 10 + (uint64_t)(*p - '0');
			if (v > DURATION_MAX_S)
				return fail(err, errlen, s, "too large (at most 3650d)");
			p++;
			digits++;
		}
		if (!digits)
			return fail(err, errlen, s, *p == ' ' ? "no spaces allowed"
					: *p == '.' ? "no fractions allowed" : "expected a number");
		if (!*p)
			return fail(err, errlen, s, "missing unit (s, m, h or d)");
		rank = unit_rank(*p, &mult);
		if (rank < 0)
			return fail(err, errlen, s, *p == '.' ? "no fractions allowed"
					: *p == ' ' ? "no spaces allowed" : "unknown unit (use s, m, h or d)");
		if (rank <= last_rank)
			return fail(err, errlen, s, "units must appear once each, largest first");
		last_rank = rank;
		p++;
		total += v * mult; /* v <= MAX_S and mult <= 86400: no overflow */
		if (total > DURATION_MAX_S)
			return fail(err, errlen, s, "too large (at most 3650d)");
	}
	if (total == 0)
		return fail(err, errlen, s, "must be greater than zero");
	*out_s = total;
	return 0;
}

char *duration_format(uint64_t secs, char *buf, size_t len)
{
	static const struct { uint64_t mult; char unit; } u[] = {
		{ 86400, 'd' }, { 3600, 'h' }, { 60, 'm' }, { 1, 's' },
	};
	size_t off = 0;

	if (!len)
		return buf;
	buf[0] = 0;
	if (secs == 0) {
		snprintf(buf, len, "0s");
		return buf;
	}
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		uint64_t q = secs / u[i].mult;
		int n;
		if (!q)
			continue;
		secs -= q * u[i].mult;
		n = snprintf(buf + off, len - off, "%llu%c", (unsigned long long)q, u[i].unit);
		if (n < 0 || (size_t)n >= len - off)
			break;
		off += (size_t)n;
	}
	return buf;
}

char *time_format_iso(uint64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!len)
		return buf;
	if (!gmtime_r(&tt, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, len, "@%llu", (unsigned long long)t);
	return buf;
}

static int digits(const char *s, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int days_in_month(int y, int m)
{
	static const int d[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return 29;
	return d[m - 1];
}

static int ymd(const char *s, struct tm *tm)
{
	int y, mo, d;
	if (digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) || s[7] != '-' ||
	    digits(s + 8, 2, &d))
		return -1;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
		return -1;
	memset(tm, 0, sizeof(*tm));
	tm->tm_year = y - 1900;
	tm->tm_mon = mo - 1;
	tm->tm_mday = d;
	return 0;
}

int date_parse_ymd(const char *s, uint64_t *out)
{
	struct tm tm;
	time_t t;

	if (!s || strlen(s) != 10 || ymd(s, &tm))
		return -1;
	t = timegm(&tm);
	if (t < 0)
		return -1;
	*out = (uint64_t)t;
	return 0;
}

int time_parse_iso(const char *s, uint64_t *out)
{
	struct tm tm;
	int h, mi, se;
	time_t t;

	if (!s || strlen(s) != 20 || ymd(s, &tm) || s[10] != 'T' || digits(s + 11, 2, &h) ||
	    s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' || digits(s + 17, 2, &se) ||
	    s[19] != 'Z' || h > 23 || mi > 59 || se > 59)
		return -1;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	t = timegm(&tm);
	if (t < 0)
		return -1;
	*out = (uint64_t)t;
	return 0;
}
