/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* What the data path is doing, read from the pinned maps: the one snapshot behind
 * `sluicectl status` (table and JSON), `sluicectl top`, `sluicectl hist` and /metrics. */
#ifndef SLUICE_STATUS_H
#define SLUICE_STATUS_H

#include <stdio.h>
#include "sluice.h"
#include "kernel/bpfmaps.h"
#include "kernel/attach.h"
#include "control/ctlslot.h"

struct class_status {
	struct sluice_class_stats st;            /* cumulative since attach */
	struct sluice_hist hist;                 /* cumulative since attach */
	long long in_flight;
	double p50_us, p99_us;                   /* from the cumulative histogram */
	unsigned threshold;                      /* in-flight threshold in force */
	double admit_prob, switch_admit;         /* 0..1 */
	double rate_per_s;                       /* arrivals/s between two snapshots, -1 unknown */
	double error_rate;                       /* errors / (completed - 429s), cumulative */
	long long open;                          /* tcp: open connections; -1 for http */
	unsigned conn_cap;                       /* tcp: open-connection cap of the class, 0 none */
	unsigned long long conn_rejected;        /* SYNs refused by the cap (reason connections) */
};

/* What the controller keeps for the service (map `ctl_state`), when sluiced wrote it. */
struct ctl_status {
	int known;                               /* 0: no entry for this service (an older
	                                          * sluiced, or none has ticked since the slot
	                                          * was given to this service) */
	int signal;                              /* enum sluice_signal_state: none, thin, ok */
	int algorithm;                           /* enum sluice_ctl_algorithm */
	unsigned baseline_us, objective_us;      /* 0 = not learned / not known yet */
	unsigned latency_us;                     /* last decided window, all classes */
	unsigned top_class_us;                   /* ... its highest busy classes': what the
	                                          * objective is judged on (0 = not known) */
	int ladder[SLUICE_NUM_CLASSES];          /* enum sluice_ladder_state */
	unsigned reset_ack;                      /* last baseline reset done */
	unsigned long long ticks;
	struct ctl_recovery rec;                 /* the ladder: shedding since, last recovery */
};

struct service_status {
	int idx;                                 /* map index */
	struct ctl_status ctl;
	struct sluice_service svc;
	struct sluice_verdict v;
	long long in_flight;                     /* http: requests; tcp: connections with a
	                                          * turn open (idle ones hold no capacity) */
	long long connections;                   /* tcp: open connections; -1 for http */
	long long untrusted_priority;            /* units whose priority mark was ignored (the
	                                          * source outside trust_from); -1: the pins
	                                          * predate the count */
	char addr[48];                           /* the local address of an ADDR:PORT service
	                                          * ("198.18.0.1", "[2001:db8::1]"), "" = any */
	struct class_status cls[SLUICE_NUM_CLASSES];
};

struct status_snapshot {
	unsigned long long now_ns;
	struct sluice_globals g;
	int controller_alive;                    /* heartbeat younger than its timeout */
	double heartbeat_age_s;
	struct sluice_pkt_stats pkt;
	int flows;                               /* entries in the flow table, -1 not counted */
	struct attached_iface ifaces[SLUICE_MAX_IFACES];   /* status_collect_ifaces (with the
	                                                    * XDP mode of each, "" unknown) */
	int n_ifaces;                            /* -1: not read */
	int n;
	struct service_status *s;                /* n of them, on the heap (cap allocated) */
	int cap;
};

/* Read everything. Services without a port (removed from config) are skipped. Counting the
 * flow table walks it key by key (a syscall per flow): only when count_flows is set. `out`
 * starts zeroed or from an earlier collect (its service array is reused and grown). */
int status_collect(const struct sluice_maps *m, struct status_snapshot *out, int count_flows);
void status_free(struct status_snapshot *s);
/* heartbeat_age_s (-1: never written; 0 for one stamped a moment after now_ns) and
 * controller_alive, from s->g and s->now_ns, judged as the data path judges them. */
void status_heartbeat(struct status_snapshot *s);
/* Where the data path runs: the interfaces of the pinned XDP links under pin_dir, and how
 * XDP runs on each. Call after status_collect (which forgets them). */
void status_collect_ifaces(struct status_snapshot *s, const char *pin_dir);

/* Request rates of cur from the arrivals counted since prev (taken a moment earlier). */
void status_rates(const struct status_snapshot *prev, struct status_snapshot *cur);

const char *protocol_name(int p);
/* enum sluice_ctl_algorithm -> "gradient" | "aimd" | "fixed". */
const char *ctl_algorithm_name(int a);
const char *breaker_name(int s);
/* The verdict's breaker as the data path reads it (bpf/admit.h): open refuses every unit,
 * half-open admits its step's share, any other state admits all as closed. The state is
 * enum sluice_breaker_state; the share admitted is 0..1. */
int breaker_state(const struct sluice_verdict *v);
double breaker_admit_ratio(const struct sluice_verdict *v);

/* The table: fits 120 columns (rejections summed, no error/429 counts); wide: every column
 * (a column per reject reason, errors, 429s, retransmits, fail-open admits). Both say what
 * their percentages measure in a legend under the services. */
void status_print_table(FILE *f, const struct status_snapshot *s, int wide);
/* One line of JSON; scripts read its keys and value types, so both stay as they are.
 * 0, or -1 when out of memory. */
int status_print_json(FILE *f, const struct status_snapshot *s);
/* runqlat-style histogram of one service (all classes, or one). */
void status_print_hist(FILE *f, const struct service_status *s, int cls);

#endif
