/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: durations ("90s", "5m", "2h", "1d", "1h30m") and UTC time stamps.
 *
 * Time convention of every sluice library module (switches, audit, plan): wall-clock time as
 * uint64_t SECONDS since the Unix epoch (UTC), always passed in by the caller as `now` (no module
 * reads the clock itself). Switch expiry must survive reboots and controller restarts, so it is
 * wall-clock time, not CLOCK_MONOTONIC. */
#ifndef SLUICE_DURATION_H
#define SLUICE_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Longest duration accepted by duration_parse(): 3650 days. */
#define DURATION_MAX_S (3650ull * 86400ull)

/* Parse a positive duration: one or more <digits><unit> groups, unit one of s m h d, units in
 * decreasing order and each at most once ("1d2h", "1h30m", "90s", "90m"). Refused, with a
 * message naming the problem in err: empty, missing unit ("90"), unknown unit, signs, spaces,
 * fractions, repeated / out-of-order units, zero total ("0s"), more than DURATION_MAX_S.
 * Returns 0 and *out_s in seconds, or -1. */
int duration_parse(const char *s, uint64_t *out_s, char *err, size_t errlen);

/* Seconds as "1d2h3m4s" (zero parts omitted; "0s" for 0). Returns buf. len >= 24 always suffices. */
char *duration_format(uint64_t secs, char *buf, size_t len);

/* "2024-05-01T12:00:00Z". Returns buf. len >= 21 (SLUICE_ISO_LEN) suffices. */
#define SLUICE_ISO_LEN 32
char *time_format_iso(uint64_t t, char *buf, size_t len);
/* Parse exactly "YYYY-MM-DDTHH:MM:SSZ" (UTC). Returns 0 and *out, or -1. */
int time_parse_iso(const char *s, uint64_t *out);
/* Parse exactly "YYYY-MM-DD" (a real calendar date, year 1970..9999) -> midnight UTC. 0 / -1. */
int date_parse_ymd(const char *s, uint64_t *out);

#endif
