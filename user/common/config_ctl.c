// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The controller's per-service keys: their defaults and their parsing from one scalar, kept
 * apart from the YAML walk so that any YAML layer can hand them the text it found. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/config.h"

const char *const sluice_service_ctl_keys[] = { "limit_algorithm", "latency_slo",
	"min_samples", NULL };

void sluice_service_ctl_defaults(struct service_conf *s)
{
	s->limit_algorithm = LIMIT_ALG_AUTO;
	s->latency_slo_ratio = 1.2;
	s->latency_slo_ms = 0;
	s->min_samples = 20;
	s->limit_algorithm_written = 0;
	s->latency_slo_written = 0;
	s->headroom_set = 0;
	s->headroom_written = 0;
	/* Recovery steps pass on evidence (enough samples within the objective) and wait at least
	 * the loop's feedback delay, so the hold can be short: ten steps (L2 and L3 from off) fit
	 * in 5 s. */
	s->recovery_step_s = 0.5;
	/* an http lower class's connections are capped only while its refusals churn them
	 * (control/conncap.h): a cap costs an open loop goodput, the churn costs a closed loop
	 * more */
	s->connection_cap = CONN_CAP_CHURN;
	s->read_gate = READ_GATE_AUTO;
}

/* "12.5" -> 12.5 with nothing after the number but `suffix`. A plain decimal only: no sign,
 * no leading blank, no hex, no nan/inf (strtod takes all of them, and a NaN passes every
 * range check). */
static int num_with(const char *v, const char *suffix, double *out)
{
	char *end;
	double d;

	if (!isdigit((unsigned char)v[0]) && !(v[0] == '.' && isdigit((unsigned char)v[1])))
		return 0;
	if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X'))
		return 0;
	d = strtod(v, &end);
	if (end == v || strcmp(end, suffix) != 0 || !isfinite(d))
		return 0;
	*out = d;
	return 1;
}

int sluice_service_ctl_key(struct service_conf *s, const char *key, const char *val,
			   char *err, size_t errlen)
{
	double d;

	if (!strcmp(key, "limit_algorithm")) {
		static const char *const names[] = { "auto", "gradient", "aimd" };
		for (int i = 0; i < 3; i++)
			if (!strcmp(val, names[i])) {
				s->limit_algorithm = i;
				s->limit_algorithm_written = 1;
				return 1;
			}
		snprintf(err, errlen, "expected auto, gradient or aimd");
		return -1;
	}
	if (!strcmp(key, "latency_slo")) {
		if (num_with(val, "x", &d)) {
			if (d < 1.0 || d > 100) {
				snprintf(err, errlen, "a ratio must be >= 1x and <= 100x of the baseline");
				return -1;
			}
			s->latency_slo_ratio = d;
			s->latency_slo_ms = 0;
			s->latency_slo_written = 1;
			return 1;
		}
		if (num_with(val, "ms", &d) || (num_with(val, "s", &d) && (d *= 1000, 1))) {
			if (d <= 0 || d > 3600000) {
				snprintf(err, errlen, "must be > 0 and <= 3600 s");
				return -1;
			}
			s->latency_slo_ms = d;
			s->latency_slo_written = 1;
			return 1;
		}
		snprintf(err, errlen, "expected a ratio of the baseline (1.2x) or a latency (50ms, 0.2s)");
		return -1;
	}
	if (!strcmp(key, "min_samples")) {
		char *end;
		long n = strtol(val, &end, 10);
		if (!isdigit((unsigned char)val[0]) || end == val || *end || n < 1 || n > 100000) {
			snprintf(err, errlen, "expected a whole number from 1 to 100000");
			return -1;
		}
		s->min_samples = (int)n;
		return 1;
	}
	return 0;
}
