/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: timeout budget check (`sluicectl budget check CHAINS.yaml`): does the worst path
 * of each call chain fit the time its caller waits, and how many attempts does each service
 * receive per entry request? (docs/OPERATIONS.md)
 *
 * File format (keys not listed are refused):
 *   chains:
 *     - name: order-api            # required, unique
 *       budget_ms: 1000            # required: the entry timeout (what the caller waits), 1..3600000
 *       self_ms: 40                # optional (0): the entry's own processing time
 *       hops:                      # required: what the entry calls, one after another
 *         - { name: payment-gateway, timeout_ms: 2000, retries: 2, backoff_ms: 1400 }
 *         - name: inventory
 *           timeout_ms: 800
 *           retries: 1
 *           backoff_ms: 200        # optional (0)
 *           self_ms: 100           # optional (0): the hop's own processing per attempt
 *           calls:                 # optional: what this hop calls on each attempt, one after another
 *             - { name: order-db, timeout_ms: 300, retries: 0 }
 *
 * The hops form a call tree of at most BUDGET_MAX_HOPS hops, BUDGET_MAX_DEPTH levels deep.
 * Definitions:
 *   retries     = extra attempts after the first (max attempts = retries + 1), 0..10.
 *   backoff_ms  = the TOTAL time slept between attempts, summed over all retries of that hop
 *                 (not the per-retry delay); must be 0 when retries is 0.
 *   hop worst   = timeout_ms * (retries + 1) + backoff_ms  (every attempt runs to its timeout;
 *                 the caller stops waiting there, whatever the hop's own calls still do)
 *   worst path  = sum of the entry's hop worsts + self_ms  (siblings run one after another)
 *   calls worst = sum of a hop's callees' hop worsts + the hop's self_ms: what one attempt of
 *                 the hop may take; over when it exceeds the hop's timeout_ms (the caller gives
 *                 up while the work goes on, and retries it on top)
 *   over budget = worst path > budget_ms, or any hop's calls worst > its timeout_ms
 *                 (equal is within)
 *   attempts    = attempts a hop receives per entry request: the product of (1 + retries)
 *                 along its path from the entry, itself included. Nested calls multiply
 *                 (3 layers x 2 retries = 27 at the bottom); siblings do not multiply each
 *                 other. A service that appears at several places in the tree receives the
 *                 sum (its per-service figure); the chain's amplification is the largest.
 * Warnings (reported, do not fail the check): a single attempt of a hop longer than 60% of its
 * caller's budget (one slow attempt alone eats most of it); a retrying hop below another
 * retrying hop (retries in layers multiply: retry in one layer only).
 * No global state. */
#ifndef SLUICE_BUDGET_H
#define SLUICE_BUDGET_H

#include <stdint.h>
#include <stdio.h>
#include "common/yamldoc.h"

#define BUDGET_MAX_CHAINS   64
#define BUDGET_MAX_HOPS     32           /* per chain, every level counted */
#define BUDGET_MAX_DEPTH    8            /* levels of calls; with <= 10 retries and 32 hops the
					  * attempt figures stay below 32 * 11^8 < 2^33 */
#define BUDGET_NAME_LEN     64
#define BUDGET_MAX_MS       3600000      /* one hour: larger values are refused as typos */
#define BUDGET_MAX_RETRIES  10
#define BUDGET_WARN_PCT     60           /* one attempt above this share of the budget: warning */

struct budget_hop {
	char name[BUDGET_NAME_LEN];
	uint64_t timeout_ms;
	int retries;
	uint64_t backoff_ms;                 /* total over all retries */
	uint64_t self_ms;                    /* own processing per attempt */
	int parent;                          /* index of the calling hop, -1: called by the entry */
	int depth;                           /* 0: called by the entry */
	int line;
	/* computed by budget_compute() */
	uint64_t worst_ms;                   /* what the caller may wait for this hop */
	uint64_t calls_ms;                   /* self_ms + callees' worst: one attempt's worst */
	uint64_t attempts;                   /* attempts per entry request (path product) */
	int over;                            /* calls_ms > timeout_ms */
};

/* One service's figure: attempts it receives per entry request, summed over its places. */
struct budget_service {
	char name[BUDGET_NAME_LEN];
	uint64_t attempts;
};

struct budget_chain {
	char name[BUDGET_NAME_LEN];
	uint64_t budget_ms;
	uint64_t self_ms;
	int line;
	int n_hops;
	struct budget_hop hops[BUDGET_MAX_HOPS];   /* the call tree in pre-order: parents first */
	/* computed by budget_compute() */
	uint64_t worst_ms;
	int n_services;
	struct budget_service services[BUDGET_MAX_HOPS];   /* in order of first appearance */
	uint64_t amplification;              /* the largest per-service figure */
	int retrying_hops;                   /* hops with retries > 0 */
	int layered_retries;                 /* retrying hops below a retrying hop */
	int over_hops;                       /* hops with over set */
	int over;                            /* worst_ms > budget_ms or over_hops > 0 */
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
/* Per-chain report: a verdict line, a table of hops (nested calls indented) with each hop's
 * attempts per entry request, the per-service figures, warnings. Returns chains over budget
 * (the CLI exits non-zero when this is > 0). */
int budget_report(FILE *out, const struct budget_file *bf);

#endif
