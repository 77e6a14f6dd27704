/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice configuration: the parsed form of the one YAML file (see README "Configuration").
 * sluice_config_load() never touches the running state: the caller swaps configs only when
 * loading succeeded, so a bad file leaves the last good config in force. */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <net/if.h>
#include "sluice.h"
#include "common/yamldoc.h"

#define SLUICE_MAX_RULES       16
#define SLUICE_MAX_HO_STEPS    8
#define SLUICE_MAX_LADDER_STEPS 8
#define SLUICE_MAX_IFSPECS     16         /* entries of `interfaces` */
#define SLUICE_MAX_TRUST       16
/* What the controller can hold: a ring of 64 opening times (control/cascade.h) tells at most
 * 63 opens apart; a breaker's window is 64 one-second buckets (control/breaker.h). The parser
 * refuses more, rather than the controller clamping a written value in silence. */
#define SLUICE_MAX_CASCADE_OPENS  63
#define SLUICE_MAX_BREAKER_WINDOW_S 64

enum rule_kind { RULE_SOURCE, RULE_DSCP, RULE_HEADER, RULE_PATH };

struct class_rule {
	enum rule_kind kind;
	int line;                         /* where it was written, for messages */
	int class;                        /* 0..3, or SLUICE_CLASS_FROM_HEADER for header rules */
	/* RULE_SOURCE: v4 addresses stored v4-mapped, prefix_len counted on the 128-bit form */
	uint8_t addr[16];
	int prefix_len;
	int is_v4;
	int dscp;                         /* RULE_DSCP: 0..63 */
	char header[SLUICE_HEADER_LEN];   /* RULE_HEADER: as written; BPF gets it lower-cased */
	char path[SLUICE_PATH_LEN];       /* RULE_PATH */
};

/* 1 when r is an IPv6 prefix whose range holds the v4-mapped one (::ffff:0:0/96, where IPv4
 * addresses are stored): ::/0, ::/64 and the like. Such a prefix must not match IPv4 clients,
 * so the v4-mapped range gets an entry of its own beside it (see program_source_rules). */
int prefix_spans_v4(const struct class_rule *r);

struct breaker_conf {
	int min_calls;                    /* 20 */
	double error_rate;                /* 0.5 */
	int slow_call_ms;                 /* 800 */
	double slow_call_rate;            /* 0.6 */
	double open_s;                    /* 5 */
	int half_open_steps[SLUICE_MAX_HO_STEPS]; /* percent: 10 30 60 100 */
	int n_half_open_steps;
	double step_s;                    /* 5 */
	double half_open_success;         /* 0.9: a step passes only while success >= this */
	double window_s;                  /* sliding window length, 10 */
};

struct service_conf {
	char name[SLUICE_NAME_LEN];
	int line;
	int port;                         /* 1..65535 */
	int has_addr;                     /* `port: ADDR:PORT`: only this local address */
	uint8_t addr[16];                 /* v4-mapped for IPv4 */
	int protocol;                     /* enum sluice_protocol */
	int reject;                       /* enum sluice_reject_mode */
	int retry_after_s;                /* 1 */
	int limit_min, limit_max;         /* adaptive limit's bounds; 4, 512 */
	int limit_fixed;                  /* > 0: static limit, AIMD off */
	double target_latency_ms;         /* 0 = auto (latency_slo x the learned baseline) */
	int aimd_window_ms;               /* 1000 */
	int headroom[SLUICE_NUM_CLASSES]; /* percent of limit: 100 90 75 50 */
	int headroom_mode;                /* HEADROOM_ADAPTIVE (default): the percentages are
					   * floors and classes above keep their measured peak;
					   * HEADROOM_FIXED: threshold = limit x headroom, exactly */
	int default_class;                /* L2 */
	struct class_rule rules[SLUICE_MAX_RULES];
	int n_rules;
	/* trust_from: sources whose X-Priority header and DSCP marks are believed (prefix in
	 * addr/prefix_len as for RULE_SOURCE); none = header and DSCP rules are ignored */
	struct class_rule trust[SLUICE_MAX_TRUST];
	int n_trust;
	struct breaker_conf breaker;
	int ladder_steps[SLUICE_MAX_LADDER_STEPS]; /* recovery, percent: 10 30 50 80 100 */
	int n_ladder_steps;
	double recovery_step_s;           /* 0.5 s (config_ctl.c) */
	/* client_limit: per client address (one tenant cannot take the whole service), 0 = off */
	int client_max_in_flight;         /* units of one client at once */
	int client_rate;                  /* units per second (token bucket) */
	int client_burst;                 /* bucket size; 0 = 1 */
	/* The controller's objective and evidence (defaults: sluice_service_ctl_defaults) */
	int limit_algorithm;              /* LIMIT_ALG_AUTO (= gradient), _GRADIENT, _AIMD */
	double latency_slo_ratio;         /* 1.2: objective = ratio x the unloaded baseline */
	double latency_slo_ms;            /* > 0: an absolute objective instead of the ratio */
	int min_samples;                  /* 20: latency samples a window needs to decide */
	int limit_algorithm_written;      /* the key was written (--check: a fixed limit has none) */
	int latency_slo_written;          /* the key was written (--check: beside a numeric
	                                   * target_latency_ms one of the two is ignored) */
	int headroom_set;                 /* `headroom` was written: its percentages are caps */
	unsigned headroom_written;        /* bit k: headroom's key Lk was written */
	int max_connections;              /* tcp: open connections at most (L0's share), 0 = off */
	int connection_cap;               /* http, CONN_CAP_*: when a lower class's connections are
	                                   * capped (control/conncap.h) */
	int read_gate;                    /* http, READ_GATE_*: whether the wait probe's evidence
	                                   * may arm the read gate (sluice.h) */
};

/* service_conf.read_gate, in the order of the config's names */
enum { READ_GATE_OFF = 0, READ_GATE_AUTO = 1 };

/* service_conf.connection_cap, in the order of the config's names */
enum { CONN_CAP_OFF = 0, CONN_CAP_AUTO = 1, CONN_CAP_CHURN = 2 };

/* The open-connection cap per class of a service (0 = no cap): L0 up to max_connections, class
 * k up to max(1, max_connections x headroom[k] / 100), all compared with the service's open
 * connections, so the connections a lower class holds never take the slots above its share.
 * All zero when the service has no cap. */
void service_conn_cap(const struct service_conf *s, unsigned threshold[SLUICE_NUM_CLASSES]);

struct cascade_conf {
	int max_opens;                    /* 5: the 6th opening within window_s suspends */
	double window_s;                  /* 10 */
	double suspend_s;                 /* 0 = operator only (default); > 0: resume after this */
};

struct retry_storm_conf {
	double ratio;                     /* 0.2 */
	int windows;                      /* 3 */
};

/* Node-wide arbitration (off unless written): shed L3, then L2, across every service while
 * the node's CPU pressure is above cpu_pressure_pct (user/control/nodearb.h). */
enum { NODE_ARB_OFF = 0, NODE_ARB_PSI = 1 };

struct node_conf {
	int arbitration;                  /* NODE_ARB_OFF */
	double cpu_pressure_pct;          /* 40: share of time some task waited for a CPU */
	double step_s;                    /* 2: at most one cut per this */
	double recover_s;                 /* 3: calm with traffic for this gives one step back */
	char pressure_file[256];          /* /proc/pressure/cpu (or a cgroup's cpu.pressure) */
};

struct sluice_config {
	char interface[IF_NAMESIZE];      /* the first entry of ifspecs (messages) */
	/* Where to attach: interface names, shell patterns (`ens*`, matched with fnmatch) and
	 * `auto` (the interfaces that carry a default route), from `interfaces` or from the
	 * single `interface` key (kernel/ifaces.c resolves them). */
	char ifspecs[SLUICE_MAX_IFSPECS][IF_NAMESIZE];
	int n_ifspecs;
	int xdp_mode;                     /* 0 auto, 1 native, 2 generic */
	int control_interval_ms;          /* 100 */
	int heartbeat_timeout_ms;         /* 1000 */
	char metrics_address[64];         /* 127.0.0.1:9477 */
	char state_dir[256];              /* /var/lib/sluice */
	char pin_dir[256];                /* /sys/fs/bpf/sluice */
	char switch_group[32];            /* group allowed to change switches besides root; "" none */
	int switch_max_renewals;          /* `switch renew` of one switch at most this often: 3 */
	int flow_idle_timeout_s;          /* flows silent this long are reclaimed: 600 */
	int syn_timeout_s;                /* admitted SYNs never completed are reclaimed: 30 */
	struct cascade_conf cascade;
	struct retry_storm_conf retry_storm;
	struct node_conf node;
	struct service_conf *services;    /* on the heap: n_services of them (sluice_config_free) */
	int n_services;
};

enum { XDP_MODE_AUTO = 0, XDP_MODE_NATIVE = 1, XDP_MODE_GENERIC = 2 };
enum { HEADROOM_ADAPTIVE = 0, HEADROOM_FIXED = 1 };
enum { LIMIT_ALG_AUTO = 0, LIMIT_ALG_GRADIENT = 1, LIMIT_ALG_AIMD = 2 };

/* Fill `out` with defaults (no services). Overwrites `out` without freeing it. */
void sluice_config_defaults(struct sluice_config *out);

/* The interface entries as written, comma-separated ("eth0, ens*"), into buf. */
const char *sluice_config_ifaces(const struct sluice_config *c, char *buf, size_t len);

/* Free the services list and leave `c` with none. */
void sluice_config_free(struct sluice_config *c);

/* Parse and validate `path`. Returns 0 when valid; otherwise -1 and `errs` lists every error
 * found (up to DOC_MAX_ERRORS), each with its line and column (print them with
 * doc_errors_print()). `out` is overwritten (free it first if it held a config); on failure
 * its contents are unspecified but still to be freed with sluice_config_free(). A list of
 * more than SLUICE_MAX_SERVICES services is refused. */
int sluice_config_load(const char *path, struct sluice_config *out, struct doc_errors *errs);

/* Same, from a string (tests, --check of stdin). `name` is used in messages. */
int sluice_config_parse(const char *text, size_t len, const char *name,
			struct sluice_config *out, struct doc_errors *errs);

/* sluice_class_from_name(), sluice_class_name(): common/names.h */
#include "common/names.h"

/* Fill one service with the per-service defaults (no name, no port, no rules). */
void sluice_service_defaults(struct service_conf *s);

/* The controller keys of a service (common/config_ctl.c): defaults, called by
 * sluice_service_defaults(); and one key's scalar text. Returns 1 when `key` is one of them and
 * was applied, 0 when `key` is not one of them, -1 (message in err) when the value is bad. */
void sluice_service_ctl_defaults(struct service_conf *s);
int sluice_service_ctl_key(struct service_conf *s, const char *key, const char *val,
			   char *err, size_t errlen);
extern const char *const sluice_service_ctl_keys[];

/* XDP_MODE_* -> "auto" | "native" | "generic". */
const char *sluice_xdp_mode_name(int mode);

/* A hash of a service name (at most SLUICE_NAME_LEN bytes), for tables of many services. */
unsigned sluice_service_name_hash(const char *name);

/* Index of the service called `name`, or -1. */
int sluice_config_service_index(const struct sluice_config *cfg, const char *name);

/* For each service of `to`, the index of the service of the same name in `from`, or -1:
 * from_index holds to->n_services. A name looked up in a table, not in the list: a reload
 * that removes or adds a service near the top of 65536 moves every later one's index, and a
 * search of the list for each held the control loop for tens of seconds (the data path's
 * heartbeat lapses after one second, and it then admits everything). 0, or -1 out of memory. */
int sluice_config_match_services(const struct sluice_config *from, const struct sluice_config *to,
				 int *from_index);

#endif
