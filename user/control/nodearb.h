/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Node-wide arbitration: when the node itself is saturated (its CPU pressure, from the kernel's
 * pressure stall information), classes are shed across every service of the node, lowest
 * first: L3 of every service is cut to nothing before L2 of any is touched; L0 and L1 are
 * never shed by the node (their shedding stays the services' own ladders' business). One step
 * at a time (halving a class's admit fraction, at most once per step_ns: the next observation
 * must show what the last cut did), and back the same way on evidence only: pressure
 * observed below the threshold while the services had traffic, for recover_ns, gives one step
 * back (L2 restored in full before L3 gets anything back). No observation (a read failed, the
 * file went away) is no evidence either way: nothing moves.
 * Pure over its inputs and the clock; the daemon reads the pressure file and applies the
 * admit fractions to every service's verdict. */
#ifndef SLUICE_NODEARB_H
#define SLUICE_NODEARB_H

#include <stdint.h>
#include "sluice.h"
#include "control/events.h"

/* Below this a class is cut to nothing; restoring starts from it. */
#define SLUICE_NODE_FLOOR (SLUICE_PROB_ONE / 8)
/* The classes the node sheds, lowest first. */
#define SLUICE_NODE_LOWEST 3
#define SLUICE_NODE_HIGHEST_SHED 2

struct sluice_node_params {
	double threshold_pct;         /* saturated while the pressure is above this */
	uint64_t step_ns;             /* at most one cut per this */
	uint64_t recover_ns;          /* calm evidence for one step back */
};

/* One observation of the node, or none (valid = 0). */
struct sluice_node_obs {
	int valid;
	double pressure_pct;          /* share of the observed interval some task waited for CPU */
	uint64_t arrivals;            /* arrivals at all services over that interval */
};

struct sluice_node_arb {
	uint32_t admit[SLUICE_NUM_CLASSES];   /* fixed point; L0 and L1 stay SLUICE_PROB_ONE */
	uint64_t last_change_ns;
	int changed_once;
	uint64_t good_ns;             /* calm evidence since the last change */
	uint64_t last_obs_ns;         /* the last valid observation, 0 = none since a gap */
	int saturated;                /* the last observation's verdict */
	double last_pct;
	uint64_t cuts, restores;
};

void sluice_node_init(struct sluice_node_arb *a);
/* One observation at now. Returns 1 when an admit fraction changed (events to sink). */
int sluice_node_tick(struct sluice_node_arb *a, const struct sluice_node_params *p,
		     const struct sluice_node_obs *obs, uint64_t now_ns,
		     const struct sluice_event_sink *sink);
/* 1 while any class is shed by the node. */
int sluice_node_shedding(const struct sluice_node_arb *a);
/* A service's admit fraction of class c with the node's applied (the product). */
uint32_t sluice_node_combine(uint32_t service_admit, uint32_t node_admit);

/* Pressure file text (/proc/pressure/cpu, or a cgroup's cpu.pressure): the "some" line's
 * total stall time in microseconds and its avg10. Returns 0, or -1 when the text has no such
 * line. */
int sluice_psi_parse(const char *text, uint64_t *some_total_us, double *some_avg10);

#endif
