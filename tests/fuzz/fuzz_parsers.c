// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* libFuzzer harnesses for the files an operator (or a broken disk) hands sluice: the config
 * YAML, the switch file (JSON), response plans and budget chains (YAML). One source, built
 * once per parser with FUZZ_PARSER set to its name (the Makefile does it, with AddressSanitizer).
 * Besides not crashing, reading anything must give either a clean refusal or a result that
 * survives what the tools do next with it: a switch file written back reads back the same;
 * a plan can be checked; a budget file's report can be printed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/duration.h"
#include "ops/switches.h"
#include "ops/plan.h"
#include "ops/budget.h"

#define STR_(x) #x
#define STR(x) STR_(x)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const char *which = STR(FUZZ_PARSER);

	if (!strcmp(which, "config")) {
		static struct sluice_config cfg;
		struct doc_errors errs;

		memset(&cfg, 0, sizeof(cfg));
		sluice_config_parse(text, size, "fuzz", &cfg, &errs);
		sluice_config_free(&cfg);
	} else if (!strcmp(which, "switches")) {
		static struct sw_set set, again;
		char err[256], *out = NULL;
		size_t outlen = 0;

		if (sw_parse(text, size, "fuzz", &set, err, sizeof(err)) == 0 &&
		    sw_serialize(&set, &out, &outlen) == 0) {
			/* What sluice writes it must read back as the same switches. */
			if (sw_parse(out, outlen, "fuzz-again", &again, err, sizeof(err)) != 0 ||
			    again.n != set.n) {
				fprintf(stderr, "switch file written back does not read back: %s\n", err);
				abort();
			}
			for (int i = 0; i < set.n; i++)
				if (!sw_equal(&set.sw[i], &again.sw[i])) {
					fprintf(stderr, "switch %d changed on the way back\n", i);
					abort();
				}
		}
		free(out);
	} else if (!strcmp(which, "plan")) {
		static struct sluice_plan plan;
		struct doc_errors errs;

		memset(&plan, 0, sizeof(plan));
		if (plan_parse(text, size, "fuzz", &plan, &errs) == 0) {
			static const char *const known[] = { "web", "db" };
			struct plan_finding fnd[64];
			uint64_t now = 0;

			date_parse_ymd("2026-11-10", &now);
			plan_check(&plan, now, known, 2, fnd, 64);
		}
	} else if (!strcmp(which, "budget")) {
		static struct budget_file bf;
		struct doc_errors errs;

		memset(&bf, 0, sizeof(bf));
		if (budget_parse(text, size, "fuzz", &bf, &errs) == 0) {
			FILE *null = fopen("/dev/null", "w");
			if (null) {
				budget_report(null, &bf);
				fclose(null);
			}
		}
	}
	return 0;
}
