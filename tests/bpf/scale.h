/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Many services on the real programs: a generated config of n services (ports 10000 + i), the
 * BPF object loaded unpinned with its per-service maps sized as sluiced sizes them, and a
 * sluiced `struct daemon` on top (the real tick), plus traffic made with BPF_PROG_TEST_RUN:
 * a SYN and the client's RST to a service (one unit, counted, ended). Used by the scale test
 * and by the daemon benchmark. */
#ifndef SLUICE_TEST_SCALE_H
#define SLUICE_TEST_SCALE_H

#include <stdlib.h>
#include <unistd.h>
#include "harness.h"
#include "pktbuild.h"
#include "daemon/daemon.h"
#include "kernel/attach.h"

#define SCALE_PORT0 10000

struct scale {
	struct sluice_bpf *skel;
	struct daemon *d;
	int xdp, tci, tce;
	char state_dir[64];
};

/* Config text of n services; limit_fixed > 0 gives service n-1 that fixed limit. */
static inline char *scale_config(int n, int last_limit_fixed, const char *state_dir)
{
	size_t cap = 128 + (size_t)n * 80, len = 0;
	char *t = malloc(cap);

	if (!t)
		return NULL;
	len += (size_t)snprintf(t + len, cap - len, "interface: lo\nstate_dir: %s\nservices:\n",
				state_dir);
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(t + len, cap - len, "  - { name: s%d, port: %d%s }\n", i,
					SCALE_PORT0 + i,
					i == n - 1 && last_limit_fixed ? ", limit: { fixed: 1 }, default_class: L0" : "");
	return t;
}

static inline void scale_free(struct scale *s)
{
	char cmd[128];

	if (s->d) {
		daemon_fini(s->d, 1000);   /* the file writer, before its directory goes */
		daemon_free(s->d);
		sluice_config_free(&s->d->cfg);
		if (s->d->events)
			fclose(s->d->events);
		free(s->d);
	}
	if (s->skel)
		sluice_bpf__destroy(s->skel);
	if (s->state_dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->state_dir);
		if (system(cmd)) {}
	}
	free(s);
}

/* Load, program and init a daemon for n services, its maps sized for room_for services (a
 * reload may grow to them). NULL on failure (reason on stderr). */
static inline struct scale *scale_setup_room(int n, int last_limit_fixed, int room_for)
{
	struct scale *s = calloc(1, sizeof(*s));
	struct doc_errors errs;
	struct bpf_map *map;
	char err[256], *text;

	if (!s || !(s->d = calloc(1, sizeof(*s->d))))
		return NULL;
	snprintf(s->state_dir, sizeof(s->state_dir), "/tmp/sluice-scale.XXXXXX");
	if (!mkdtemp(s->state_dir)) {
		s->state_dir[0] = 0;
		goto fail;
	}
	text = scale_config(n, last_limit_fixed, s->state_dir);
	if (!text || sluice_config_parse(text, strlen(text), "scale", &s->d->cfg, &errs)) {
		doc_errors_print(stderr, &errs);
		free(text);
		goto fail;
	}
	free(text);
	libbpf_set_print(silent_print);
	if (!(s->skel = sluice_bpf__open()))
		goto fail;
	bpf_object__for_each_map(map, s->skel->obj)
		bpf_map__set_pin_path(map, NULL);
	attach_size_services(s->skel->obj, maps_service_slots(room_for));
	if (sluice_bpf__load(s->skel)) {
		fprintf(stderr, "cannot load the BPF object sized for %d services\n", room_for);
		goto fail;
	}
	if (harness_maps_of(s->skel->obj, &s->d->m) || maps_fold_estimate(&s->d->m) <= 0)
		goto fail;
	s->d->events = fopen("/dev/null", "w");
	if (daemon_init(s->d, monotonic_ns(), err, sizeof(err))) {
		fprintf(stderr, "daemon_init: %s\n", err);
		goto fail;
	}
	s->xdp = bpf_program__fd(s->skel->progs.sluice_xdp_ingress);
	s->tci = bpf_program__fd(s->skel->progs.sluice_tc_ingress);
	s->tce = bpf_program__fd(s->skel->progs.sluice_tc_egress);
	return s;
fail:
	scale_free(s);
	return NULL;
}

/* Load, program and init a daemon for n services. NULL on failure (reason on stderr). */
static inline struct scale *scale_setup(int n, int last_limit_fixed)
{
	return scale_setup_room(n, last_limit_fixed, n);
}

/* One frame through XDP; returns the XDP action, -1 on error. */
static inline int scale_xdp(const struct scale *s, const struct pkt_spec *p)
{
	uint8_t frame[256];
	size_t len = build_pkt(frame, p);
	struct run r = harness_run(s->xdp, frame, len, NULL);

	return r.err ? -1 : r.ret;
}

/* The client's RST on the unit from client port sport to service i, after it sent `sent`
 * bytes (the queries of scale_turn): the unit ends. */
static inline void scale_rst(const struct scale *s, int i, uint16_t sport, uint32_t sent)
{
	struct pkt_spec rst = { .src = "198.18.7.7", .dst = "198.18.0.1", .sport = sport,
				.dport = (uint16_t)(SCALE_PORT0 + i), .seq = 1001u + sport + sent,
				.ack = 1, .rst = 1 };

	scale_xdp(s, &rst);
}

/* A unit to service i from a client port: SYN; when it is admitted, the server's SYN-ACK
 * (TC egress) and the client's ACK complete the handshake, which is when the unit takes its
 * slot; with `end`, the client's RST then ends the flow. Returns the SYN's XDP action. */
static inline int scale_unit(const struct scale *s, int i, uint16_t sport, int end)
{
	struct pkt_spec first = { .src = "198.18.7.7", .dst = "198.18.0.1", .sport = sport,
				  .dport = (uint16_t)(SCALE_PORT0 + i), .seq = 1001u + sport,
				  .ack = 1, .ackf = 1 };
	struct pkt_spec syn, sa, ack;
	int act;

	handshake_of(&first, &syn, &sa, &ack);
	act = scale_xdp(s, &syn);
	if (act == XDP_PASS) {
		uint8_t frame[256];
		struct run r = harness_run(s->tce, frame, build_pkt(frame, &sa), NULL);

		if (r.err || scale_xdp(s, &ack) != XDP_PASS)
			return -1;
	}
	if (end)
		scale_rst(s, i, sport, 0);
	return act;
}

/* On the unit from client port sport to service i (scale_unit, not ended): the client's
 * first query (TC ingress), which opens a turn (the flow is busy), or with `reply`, the
 * server's answer to it (TC egress), which ends the turn. Returns the program's error. */
#define SCALE_QUERY "query"
static inline int scale_turn(const struct scale *s, int i, uint16_t sport, int reply)
{
	static const char q[] = SCALE_QUERY;
	struct pkt_spec seg = { .src = "198.18.7.7", .dst = "198.18.0.1", .sport = sport,
				.dport = (uint16_t)(SCALE_PORT0 + i), .seq = 1001u + sport,
				.ack = 1, .ackf = 1, .psh = 1, .payload = q,
				.payload_len = sizeof(q) - 1 };
	uint8_t frame[256];

	if (reply) {
		seg.src = "198.18.0.1", seg.dst = "198.18.7.7";
		seg.sport = (uint16_t)(SCALE_PORT0 + i), seg.dport = sport;
		seg.ack = 1001u + sport + (uint32_t)sizeof(q) - 1, seg.seq = 1;
	}
	return harness_run(reply ? s->tce : s->tci, frame, build_pkt(frame, &seg), NULL).err;
}

#endif
