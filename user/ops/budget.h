/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: timeout budget check (`sluicectl budget check CHAINS.yaml`): does the worst path
 * of each call chain fit the time its caller waits? (docs/OPERATIONS.md)
 *
 * File format (keys not listed are refused):
 *   chains:
 *     - name: order-api            # required, unique
 *       budget_ms: 1000            # required: the entry timeout (what the caller waits), 1..3600000
 *       self_ms: 40                # optional (0): the entry's own processing time
 *       hops:                      # required, 1..BUDGET_MAX_HOPS dependencies called on the path
 *         - { name: payment-gateway, timeout_ms: 2000, retries: 2, backoff_ms: 1400 }
 *         - { name: inventory, timeout_ms: 800, retries: 1, backoff_ms: 200 }
 *         - { name: order-db, timeout_ms: 300, retries: 0 }      # backoff_ms optional (0)
 *
 * Definitions:
 *   retries     = extra attempts after the first (max attempts = retries + 1), 0..10.
 *   backoff_ms  = the TOTAL time slept between attempts, summed over all retries of that hop
 *                 (not the per-retry delay); must be 0 when retries is 0.
 *   hop worst   = timeout_ms * (retries + 1) + backoff_ms  (every attempt runs to its timeout)
 *   worst path  = sum of hop worst + self_ms               (hops are called one after another)
 *   over budget = worst path > budget_ms  (equal is within budget)
 *   retry amplification = product of (1 + retries) over the hops (the load the
 *                 last hop sees per entry request when every layer retries; 3 layers x 2 retries
 *                 = 27). Saturates at UINT64_MAX (amp_saturated set).
 * Warnings (reported, do not fail the check): a single attempt of a hop longer than 60% of the
 * entry budget (one slow attempt alone eats most of it); more than one hop retrying (retries in
 * several layers multiply: retry in one layer only).
 * No global state. */
#ifndef SLUICE_BUDGET_H
#define SLUICE_BUDGET_H

#include <stdint.h>
#include <stdio.h>
#include "common/yamldoc.h"

#define BUDGET_MAX_CHAINS   64
#define BUDGET_MAX_HOPS     32
#define BUDGET_NAME_LEN     64
#define BUDGET_MAX_MS       3600000      /* one hour: larger values are refused as typos */
#define BUDGET_MAX_RETRIES  10
#define BUDGET_WARN_PCT     60           /* one attempt above this share of the budget: warning */

struct budget_hop {
	char name[BUDGET_NAME_LEN];
	uint64_t timeout_ms;
	int retries;
	uint64_t backoff_ms;                 /* total over all retries */
	int line;
	uint64_t worst_ms;                   /* computed */
};

struct budget_chain {
	char name[BUDGET_NAME_LEN];
	uint64_t budget_ms;
	uint64_t self_ms;
	int line;
	int n_hops;
	struct budget_hop hops[BUDGET_MAX_HOPS];
	/* computed by budget_compute() */
	uint64_t worst_ms;
	uint64_t amplification;
	int amp_saturated;
	int retrying_hops;                   /* hops with retries > 0 */
	int over;                            /* worst_ms > budget_ms */
};

struct budget_file {
	int n_chains;
	struct budget_chain chains[BUDGET_MAX_CHAINS];
};

/* Load and validate. 0, or -1 with every error (file:line:column) in errs. Computes results too. */
int budget_load(const char *path, struct budget_file *out, struct doc_errors *errs);
int budget_parse(const char *text, size_t len, const char *name, struct budget_file *out,
		 struct doc_errors *errs);
/* (Re)compute every chain's results. Returns the number of chains over budget. */
int budget_compute(struct budget_file *bf);
/* Per-chain report: a verdict line, a table of hops, warnings. Returns chains over budget
 * (the CLI exits non-zero when this is > 0). */
int budget_report(FILE *out, const struct budget_file *bf);

#endif
