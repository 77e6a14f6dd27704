/* Userspace view of the pinned BPF maps: open them, read counters summed over CPUs, write
 * verdicts and configuration. Used by sluiced (through the skeleton's fds) and by sluicectl
 * (through the pins). No skeleton dependency here, so sluicectl works without loading BPF. */
#ifndef SLUICE_BPFMAPS_H
#define SLUICE_BPFMAPS_H

#include "sluice.h"
#include "config.h"

struct sluice_maps {
	int port_to_service, services, source_rules, verdicts, globals, replies;
	int flows, rejected_syns, clients, inflight, inflight_released;
	int class_stats, latency_hist, pkt_stats;
	int ncpus;
};

/* Map names as pinned (LIBBPF_PIN_BY_NAME uses the map's name). */
#define SLUICE_MAP_NAMES \
	X(port_to_service) X(services) X(source_rules) X(verdicts) X(globals) X(replies) \
	X(flows) X(rejected_syns) X(clients) X(inflight) X(inflight_released) X(class_stats) \
	X(latency_hist) X(pkt_stats)

/* Open every pinned map under pin_dir. Returns 0, or -errno of the first missing one (with
 * all fds closed). */
int maps_open_pinned(const char *pin_dir, struct sluice_maps *m);
void maps_close(struct sluice_maps *m);

/* Counters: summed over CPUs. */
int maps_read_class_stats(const struct sluice_maps *m, int svc, int cls,
			  struct sluice_class_stats *out);
int maps_read_hist(const struct sluice_maps *m, int svc, int cls, struct sluice_hist *out);
int maps_read_pkt_stats(const struct sluice_maps *m, struct sluice_pkt_stats *out);
/* In-flight as admission sees it: BPF's count minus what the controller's GC released. */
int maps_read_inflight(const struct sluice_maps *m, int svc, struct sluice_inflight *out);

int maps_read_service(const struct sluice_maps *m, int svc, struct sluice_service *out);
int maps_read_verdict(const struct sluice_maps *m, int svc, struct sluice_verdict *out);
int maps_write_verdict(const struct sluice_maps *m, int svc, const struct sluice_verdict *v);
int maps_read_globals(const struct sluice_maps *m, struct sluice_globals *out);
int maps_write_globals(const struct sluice_maps *m, const struct sluice_globals *g);

/* Stable service indices across reloads and restarts: a service keeps the index its name
 * already has in the `services` map; new names take free slots. idx[i] for cfg->services[i].
 * Returns 0, or -1 when no slot is free. */
int maps_assign_indices(const struct sluice_maps *m, const struct sluice_config *cfg, int *idx);

/* Write services, port_to_service, source_rules and replies for cfg (indices from
 * maps_assign_indices). Removed services lose their port and rules; their counters stay. */
int maps_program_services(const struct sluice_maps *m, const struct sluice_config *cfg,
			  const int *idx);

/* Build the complete HTTP reply for a rejected request (kind 429 or 503). */
void build_http_reply(struct sluice_reply *r, int kind, int retry_after_s);
int maps_write_reply(const struct sluice_maps *m, int svc, int kind, int retry_after_s);

/* Reclaim flows whose FIN/RST was never seen: SYN-state older than syn_timeout, or silent
 * longer than idle_timeout -- unless still_open (may be NULL) says the kernel still has the
 * connection (a quiet flow is not a dead one). Releases their in-flight slots via
 * inflight_released. Returns the number reclaimed, or -errno. */
typedef int (*flow_alive_fn)(void *ctx, const struct sluice_flow_key *k);
int maps_gc_flows(const struct sluice_maps *m, unsigned long long now_ns,
		  unsigned long long syn_timeout_ns, unsigned long long idle_timeout_ns,
		  flow_alive_fn still_open, void *ctx);

/* Count live flows per service (for status / reconciliation checks). */
int maps_count_flows(const struct sluice_maps *m, int *per_service, int n);

unsigned long long monotonic_ns(void);

#endif
