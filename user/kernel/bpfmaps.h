/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Userspace view of the pinned BPF maps: open them, read counters summed over CPUs, write
 * verdicts and globals. Used by sluiced (through the skeleton's fds) and by sluicectl
 * (through the pins). No skeleton dependency here, so sluicectl works without loading BPF. */
#ifndef SLUICE_BPFMAPS_H
#define SLUICE_BPFMAPS_H

#include <stddef.h>
#include "sluice.h"

struct sluice_maps {
	int port_to_service, services, source_rules, verdicts, globals, replies;
	int flows, rejected_syns, clients, inflight, inflight_released, busy, busy_released;
	int class_stats, latency_hist, pkt_stats;
	int ctl_state, ctl_requests;     /* -1 when the pins predate them (layout < 4) */
	int conn_cap, addr_services;     /* -1 when the pins predate them (layout < 6) */
	int inflight_pcpu;               /* in-flight striped per CPU; -1 before layout 6 */
	int untrusted_marks;             /* ignored priority marks; -1 before layout 7 */
	int http_conns, http_conn_cap;   /* http services' open connections and their cap; -1
	                                 * before layout 9 */
	int latency_hist1, latency_hist2, latency_hist3;  /* L1..L3's histograms (latency_hist:
	                                 * L0's); -1 before layout 8, whose latency_hist held
	                                 * every class's (maps_hist_fd) */
	/* Not pinned, from the loaded object only (sluiced, tests; -1 otherwise): the flow GC's
	 * program, the data path's change counts (flowgc.h), the request scan
	 * (maps_pending_requests), and the copies of `busy` and of in-flight and the program
	 * that fills them (read through mappings by maps_reader_read), and the program that
	 * fills the in-flight estimate (maps_fold_estimate), the one that sets a connection
	 * cap's thresholds (maps_write_conn_cap), the bitmap of the service ports, and
	 * `addr_class` (a slot new to its service forgets its entries: mapconfig.c).
	 * Never closed by maps_close. */
	int reclaim_prog, own_ops, pending_prog, copy_prog, busy_copy, inflight_copy;
	int publish_prog, conncap_prog;
	int service_ports;           /* the bitmap of port_to_service's ports (mapconfig.h) */
	int addr_class;              /* the class clients' requests were given lately */
	int unread;                  /* the read gate's counts (sluice_unread) */
	int ncpus;
	int n_slots;                 /* service slots: max_entries of `services` (sized at load) */
};

/* Map names as pinned (LIBBPF_PIN_BY_NAME uses the map's name). */
#define SLUICE_MAP_NAMES \
	X(port_to_service) X(services) X(source_rules) X(verdicts) X(globals) X(replies) \
	X(flows) X(rejected_syns) X(clients) X(inflight) X(inflight_released) X(class_stats) \
	X(latency_hist) X(pkt_stats) X(busy) X(busy_released)

/* Maps opened when pinned, and left at -1 otherwise: a sluicectl still reads pins written
 * before they existed. */
#define SLUICE_MAP_NAMES_OPTIONAL X(ctl_state) X(ctl_requests) X(conn_cap) X(inflight_pcpu) \
				  X(addr_services) X(untrusted_marks) X(latency_hist1) \
				  X(latency_hist2) X(latency_hist3) X(http_conns) \
				  X(http_conn_cap)

/* Open every pinned map under pin_dir. Returns 0, or -errno of the first missing one (with
 * all fds closed). */
int maps_open_pinned(const char *pin_dir, struct sluice_maps *m);
/* Fill m->ncpus and m->n_slots from the open `services` map (maps_open_pinned does it). */
int maps_learn_sizes(struct sluice_maps *m);

/* Every entry of a hash map (keys of ksize, values of vsize bytes): in batches of 1024, one
 * syscall each, where the kernel has batch lookups for it, else key by key. fn(ctx, key,
 * value) returns non-zero to stop the walk, and the walk returns that value; else 0, or
 * -errno when a batch lookup failed (-ENOMEM: no room for a batch). */
typedef int (*maps_entry_fn)(void *ctx, const void *key, const void *value);
int maps_walk_hash(int fd, size_t ksize, size_t vsize, maps_entry_fn fn, void *ctx);

/* Entries [first, first + n) of an array map in one syscall (bpf_map_lookup_batch; entry by
 * entry where the kernel has no batch lookup). vals holds n values of `stride` bytes: the
 * value size, or for a per-CPU map round_up(value size, 8) x ncpus. keys: room for n keys
 * (scratch), or NULL to allocate it. */
int maps_read_array(int fd, __u32 first, __u32 n, size_t stride, void *vals, __u32 *keys);

/* The tick's read path: the counters (class_stats, one entry a service) in one batch syscall, the in-flight and
 * histograms only of the services the caller runs (in-flight batched too when many changed).
 * In-flight only moves with a counter (admitted, completed) or with a GC release, so an
 * unchanged service needs neither. A tcp turn opens without a counter: `busy` is read with the
 * counters, and a slot whose busy moved counts as changed. Buffers are kept: no allocation per read.
 * With more than MAPS_SCAN_SLOTS slots in use, a read covers the `hot` slots (the services
 * the caller still runs) and one of up to MAPS_SCAN_PARTS parts of the rest in turn: the
 * cost per tick of services at rest is bounded by the part, and their first traffic is seen
 * within MAPS_SCAN_PARTS reads. Much moving (over a quarter hot) reads everything. */
#define MAPS_SCAN_SLOTS 256
#define MAPS_SCAN_PARTS 4

struct maps_reader {
	int n_slots, ncpus;
	/* called after each batch of histograms read (NULL: none): a read of tens of thousands
	 * of services' takes a second, and the daemon's heartbeat must not age meanwhile */
	void (*beat)(void *ctx);
	void *beat_ctx;
	size_t stats_len;            /* bytes of one service's class_stats entry (all CPUs) */
	unsigned char *stats;        /* raw per-CPU class_stats, as last read, per slot */
	unsigned char *scratch;      /* one batch as it arrives */
	unsigned char *changed;      /* per slot: counters moved since it was last read */
	int have_prev, n_changed;
	unsigned turn;               /* which part of the slots at rest this read covers */
	int inflight_read;           /* inflight[] was read in one batch this time */
	/* per slot: the caller limits requests (http) and so reads in-flight; a tcp service's
	 * concurrency is busy, read with the counters. Only changed slots marked here count
	 * towards reading every in-flight in one batch. Zero (none) until set. */
	unsigned char *wants_inflight;
	struct sluice_inflight *inflight, *released;  /* released: the GC's, cached */
	int released_stale;          /* the releases' last re-read failed: done by the next read */
	unsigned char *stripes;      /* inflight_pcpu as read, all CPUs (scratch) */
	/* tcp turns: busy as last read with the counters (a turn opens without moving a
	 * counter, so a change of busy marks the slot changed too), the GC's releases (cached),
	 * and per slot whether this read covered it. */
	struct sluice_inflight *busy, *busy_released;
	unsigned char *busy_read;
	/* `busy_copy` mapped (copy_map_len bytes, as inflight_map), when the object has it: the
	 * read copies `busy` there in the kernel and compares from memory; NULL: batch lookups. */
	const struct sluice_inflight *busy_map;
	size_t copy_map_len;
	/* `inflight_copy` mapped, the same way for the in-flight batch of http services */
	const struct sluice_inflight *inflight_map;
	int copy_prog;                   /* sluice_copy_counts, which fills both */
	/* Latency samples per slot and class (summed over CPUs), read with the counters: a
	 * histogram is read only when its count moved, and a count that moved marks the slot
	 * changed (a tcp turn moves no other counter). */
	__u64 *samples;
	void *hist;                  /* one service's 4 histograms, all CPUs */
	__u32 *keys;                 /* scratch for the batch lookups */
	/* Histograms read ahead for the whole tick (maps_reader_want_hist, then
	 * maps_reader_prefetch_hists): per slot the classes asked for and those read this
	 * round (valid while hgen[slot] == gen), summed over CPUs into hsum, slot s's class c
	 * at hpos[s * 4 + c]. */
	unsigned char *hwant, *hdone;
	unsigned *hgen, gen;
	int *hpos;
	struct sluice_hist *hsum;
	int hsum_cap;
	void *hraw;                  /* one run of a class's histograms, all CPUs */
	int hraw_entries;            /* room of hraw, in entries */
	long long hist_syscalls;     /* lookups made by the read-ahead (for the benchmark) */
};
int maps_reader_init(struct maps_reader *r, const struct sluice_maps *m);
void maps_reader_free(struct maps_reader *r);
/* Read the counters of slots [0, n_used) as described above (hot: n_hot slot numbers). */
int maps_reader_read(struct maps_reader *r, const struct sluice_maps *m, int n_used,
		     const int *hot, int n_hot);
/* inflight_released and busy_released are written by the flow GC only: re-read them after a
 * GC pass released. One that fails is tried again by the next maps_reader_read. */
int maps_reader_reread_released(struct maps_reader *r, const struct sluice_maps *m);
/* Latency samples of slot svc, class cls, as last read. */
long long maps_reader_samples(const struct maps_reader *r, int svc, int cls);
/* Did slot svc's counters move since it was last read (always 1 on the first read)? */
int maps_reader_changed(const struct maps_reader *r, int svc);
/* From the last read: counters summed over CPUs. */
void maps_reader_stats(const struct maps_reader *r, int svc, struct sluice_class_stats *out);
/* In-flight as admission sees it (BPF's count minus the GC's releases). */
int maps_reader_inflight(struct maps_reader *r, const struct sluice_maps *m, int svc,
			 struct sluice_inflight *out);
/* tcp: busy connections as admission sees them (BPF's count minus the GC's releases). */
int maps_reader_busy(struct maps_reader *r, const struct sluice_maps *m, int svc,
		     struct sluice_inflight *out);
/* The concurrency the controller limits: requests (http) or busy connections (tcp). */
int maps_reader_concurrency(struct maps_reader *r, const struct sluice_maps *m, int svc,
			    int protocol, struct sluice_inflight *out);
/* The 4 classes' histograms of slot svc, summed over CPUs (a lookup each). */
int maps_reader_hists(struct maps_reader *r, const struct sluice_maps *m, int svc,
		      struct sluice_hist *out);
/* Only the classes of bit mask (bit c = class c) into out[c]: a lookup each (all four: one
 * batch); out[c] of the others is left alone. */
int maps_reader_hist_classes(struct maps_reader *r, const struct sluice_maps *m, int svc,
			     unsigned mask, struct sluice_hist *out);
/* The same without a copy: at[c] points at class c's histogram for the classes of mask (NULL
 * for the others): at the reader's sums when read ahead (valid until the next read-ahead),
 * else at room[c], where it was looked up. */
int maps_reader_hist_at(struct maps_reader *r, const struct sluice_maps *m, int svc,
			unsigned mask, struct sluice_hist *room, const struct sluice_hist **at);
/* The read-ahead of the tick's histograms: ask for the classes of slot svc (bit c = class
 * c), then read every one asked for in a few batch lookups (class by class, runs of
 * consecutive slots of the class's map; a run reads through short gaps of slots nobody asked
 * for, cheaper than a syscall more).
 * maps_reader_hist_classes and maps_reader_hists then answer from what was read, with the
 * same sums as the lookups of one entry; a class not read ahead is looked up as before.
 * Call after maps_reader_read: BPF counts a sample after it put it in the histogram, so a
 * histogram read after the counts holds at least the samples they say. */
void maps_reader_want_hist(struct maps_reader *r, int svc, unsigned mask);
int maps_reader_prefetch_hists(struct maps_reader *r, const struct sluice_maps *m, int n_used);
/* Ask the CPU for what the reader holds of slot svc (a hint, before its service runs). */
void maps_reader_prefetch_slot(const struct maps_reader *r, int svc);
/* Slots not asked for that a run reads through rather than start another one. */
#ifndef MAPS_HIST_GAP
#define MAPS_HIST_GAP 3
#endif

/* Writes of many entries of one array map in one syscall (bpf_map_update_batch; entry by
 * entry where the kernel has none): put what the tick writes, flush once. who[k] is the
 * caller's tag of entry k, to learn which writes were not done. */
struct maps_batch {
	int fd;
	size_t vsize;
	int n, cap;
	int last_n;                  /* entries the last flush had */
	__u32 *keys;
	int *who;
	unsigned char *vals;
	long long syscalls;          /* update syscalls made (for the benchmark) */
};
int maps_batch_init(struct maps_batch *b, int fd, size_t vsize, int cap);
void maps_batch_free(struct maps_batch *b);
/* Room for entry key's value, tagged who; NULL when full (flush first). */
void *maps_batch_put(struct maps_batch *b, __u32 key, int who);
/* Write what was put; returns how many were written, the first ones in order: entries
 * [done, last_n) were not (their tags stay in who[] until the next put); the batch is empty
 * again. */
int maps_batch_flush(struct maps_batch *b);
void maps_close(struct sluice_maps *m);

/* Counters: summed over CPUs (a service's entry, or one class of it). */
int maps_read_svc_stats(const struct sluice_maps *m, int svc, struct sluice_svc_stats *out);
int maps_read_class_stats(const struct sluice_maps *m, int svc, int cls,
			  struct sluice_class_stats *out);
int maps_read_hist(const struct sluice_maps *m, int svc, int cls, struct sluice_hist *out);
/* Class cls's histogram map and the key of slot svc in it (layouts before 8: latency_hist at
 * svc * 4 + cls); -1 when not open. */
int maps_hist_fd(const struct sluice_maps *m, int svc, int cls, __u32 *key);
int maps_read_pkt_stats(const struct sluice_maps *m, struct sluice_pkt_stats *out);
/* The in-flight stripes of slots [first, first + n) (all CPUs, read into buf: n * ncpus
 * values) added to out[0..n), class by class and into the total; nothing before layout 6. */
int maps_add_stripes(const struct sluice_maps *m, __u32 first, __u32 n, void *buf, __u32 *keys,
		     struct sluice_inflight *out);
/* In-flight as admission sees it: BPF's count minus what the controller's GC released.
 * http: requests; tcp: open connections (for a connection cap). */
int maps_read_inflight(const struct sluice_maps *m, int svc, struct sluice_inflight *out);

/* Fold every CPU's unpublished in-flight change of every service slot into the data path's
 * in-flight estimate (sluice_publish_stripes; bpf/admit.h) and keep it on: what a CPU that
 * only gives back units leaves unpublished would otherwise keep the estimate above the true
 * count, and takes near their threshold read every CPU's count. sluiced runs it once a second;
 * the tick's in-kernel copy of many services' in-flight folds them as well. Returns the CPUs
 * the estimate counts, 0 when it is off, -1 when the program cannot run. */
int maps_fold_estimate(const struct sluice_maps *m);
/* tcp: connections with a turn open (the concurrency of a tcp service), net of the GC's. */
int maps_read_busy(const struct sluice_maps *m, int svc, struct sluice_inflight *out);
/* The concurrency the controller limits: requests (http) or busy connections (tcp). */
int maps_read_concurrency(const struct sluice_maps *m, int svc, int protocol,
			  struct sluice_inflight *out);

int maps_read_service(const struct sluice_maps *m, int svc, struct sluice_service *out);
/* The slot of the service running under `name` (its `services` entry has a port), its entry
 * in *sv; -1 when none does. */
int maps_find_service(const struct sluice_maps *m, const char *name, struct sluice_service *sv);
int maps_read_verdict(const struct sluice_maps *m, int svc, struct sluice_verdict *out);
int maps_write_verdict(const struct sluice_maps *m, int svc, const struct sluice_verdict *v);
int maps_read_globals(const struct sluice_maps *m, struct sluice_globals *out);
int maps_write_globals(const struct sluice_maps *m, const struct sluice_globals *g);

/* The controller's state entry and the operator's request entry of a service slot
 * (-ENOENT when the map is not pinned). */
int maps_read_ctl_slot(const struct sluice_maps *m, int svc, struct sluice_ctl_slot *out);
int maps_write_ctl_slot(const struct sluice_maps *m, int svc, const struct sluice_ctl_slot *v);
/* The open-connection cap of a slot (zeros when the pins predate it). */
int maps_read_conn_cap(const struct sluice_maps *m, int svc, struct sluice_conn_cap *out);
/* Priority marks of slot svc ignored for an untrusted source, summed over CPUs; -ENOENT when
 * the pins predate the count (layout < 7). */
int maps_read_untrusted(const struct sluice_maps *m, int svc, struct sluice_untrusted *out);
/* Set the cap's thresholds of a slot, keeping its refusal counts (in the kernel, by
 * conncap_prog; without it, by writing the entry back with the counts read, which loses the
 * refusals counted in between); an entry that holds these thresholds already is not written. */
int maps_write_conn_cap(const struct sluice_maps *m, int svc, const __u32 *threshold);
/* An http service's open connections per class (zeros and -ENOENT before layout 9). */
int maps_read_http_conns(const struct sluice_maps *m, int svc, struct sluice_inflight *out);
/* Set the http connection cap of a slot, per class (0 = none); -ENOENT before layout 9. */
/* The read gate's counts of every service slot (sluice_unread), out[n_slots], in one batch;
 * -ENOENT without the map (pins opened by sluicectl: the map is the loaded object's). */
int maps_read_unread_all(const struct sluice_maps *m, struct sluice_unread *out);
/* One slot's (zeros and -ENOENT without the map). */
int maps_read_unread(const struct sluice_maps *m, int svc, struct sluice_unread *out);
/* The read gate's refusals of a slot, every class. */
static inline unsigned long long unread_refusals(const struct sluice_unread *u)
{
	unsigned long long n = 0;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		n += u->refused[c];
	return n;
}
int maps_read_http_conn_cap(const struct sluice_maps *m, int svc, struct sluice_http_conn_cap *out);
int maps_write_http_conn_cap(const struct sluice_maps *m, int svc, const __u32 *cap);
int maps_read_ctl_request(const struct sluice_maps *m, int svc, struct sluice_ctl_request *out);
/* The slots in [first, first + n) whose request the controller has not acknowledged, found
 * in the kernel (the program sluice_pending_requests): a->found and a->slot filled; -errno
 * when the program is not there or cannot run (the caller reads the slots itself). */
int maps_pending_requests(const struct sluice_maps *m, __u32 first, __u32 n,
			  struct sluice_pending_requests *a);
int maps_write_ctl_request(const struct sluice_maps *m, int svc,
			   const struct sluice_ctl_request *v);

#endif
