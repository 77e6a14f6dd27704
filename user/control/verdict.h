/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Turning a service's limit and the controller's decisions into the BPF verdict. */
#ifndef SLUICE_VERDICT_H
#define SLUICE_VERDICT_H

#include "sluice.h"
#include "common/config.h"

/* The AIMD starting point: 0.3 x max, within [min, max]; or the fixed limit. Starting low and
 * growing is safe on a backend whose capacity is not known yet. */
int verdict_initial_limit(const struct service_conf *sc);

/* In-flight threshold of a class from a limit and a headroom percentage: floor, but never 0
 * for a class that has any headroom (a 50% class of a limit of 1 still gets one slot). */
unsigned verdict_class_threshold(int limit, int headroom_pct);

/* A verdict that admits by headroom only: no switch, breaker closed, ladder fully open. */
void verdict_default(const struct service_conf *sc, int limit, struct sluice_verdict *v);

#endif
