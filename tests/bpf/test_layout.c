// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Carrying maps over to a new layout (user/kernel/layout.c) with the real programs: an "old"
 * data path admits and ends connections, its maps are copied into a second, fresh set, both
 * keep running as they would around the program swap, and the late changes are merged. Every
 * unit must come out counted exactly once: none lost, none twice. Flow keys of a layout
 * before 7 (no local address) get theirs on the way (user/kernel/layout_v7.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>
#include <sched.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "harness.h"
#include "pktbuild.h"
#include <bpf/btf.h>
#include "kernel/layout.h"
#include "kernel/hsmove.h"

#define SERVER4 "198.18.0.1"

static const char *CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - name: db\n"
	"    port: 5432\n"
	"    protocol: tcp\n"
	"    limit: { fixed: 100 }\n"
	"    default_class: L2\n"
	"  - { name: db7, port: \"198.18.0.7:5432\", protocol: tcp, limit: { fixed: 100 } }\n";

/* The maps this build pins (the record map among them), as the object declares them: opened,
 * never loaded, so that libbpf fills in the pin paths of LIBBPF_PIN_BY_NAME maps. */
static int pinned_map_names(const char *names[], int max)
{
	struct sluice_bpf *skel = sluice_bpf__open();
	struct bpf_map *m;
	int n = 0;

	assert_non_null(skel);
	bpf_object__for_each_map(m, skel->obj)
		if (bpf_map__pin_path(m) && n < max)
			names[n++] = strdup(bpf_map__name(m));
	sluice_bpf__destroy(skel);
	return n;
}

struct pair {
	struct fixture *old;
	struct sluice_bpf *new_skel;
	struct sluice_maps nm;
	char pin_dir[128];
};

/* Objects of their own (harness_fixture, not a shared one): the tests pin maps under pin_dir and
 * copy one object's maps into the other's, as an upgrade does. */
static int setup(void **state)
{
	struct pair *p = calloc(1, sizeof(*p));

	if (!p || !(p->old = harness_fixture(CONFIG, 0, 60ull * 1000000000ull)) ||
	    !(p->new_skel = harness_load(0, &p->nm)))
		return -1;
	snprintf(p->pin_dir, sizeof(p->pin_dir), "/sys/fs/bpf/sluice-layout-test-%d", getpid());
	if (mkdir(p->pin_dir, 0700))
		return -1;
	*state = p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;
	DIR *d = opendir(p->pin_dir);
	struct dirent *de;
	char path[512];

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", p->pin_dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(p->pin_dir);
	sluice_bpf__destroy(p->new_skel);
	harness_teardown((void **)&p->old);
	free(p);
	return 0;
}

static struct pkt_spec syn4(uint16_t sport)
{
	struct pkt_spec s = { .src = "198.18.1.2", .dst = SERVER4, .sport = sport, .dport = 5432,
			      .seq = 1000u + sport, .syn = 1 };
	return s;
}

static int xdp_spec(struct sluice_bpf *skel, const struct pkt_spec *s)
{
	uint8_t buf[256];
	size_t len = build_pkt(buf, s);

	return harness_run(bpf_program__fd(skel->progs.sluice_xdp_ingress), buf, len, NULL).ret;
}

/* The server's ISN in the SYN-ACKs of these tests. */
#define SERVER_ISN(port) (0x7a000000u + (port) * 7919u)

/* A connection as a real client makes it: SYN, the server's SYN-ACK (TC egress), the client's
 * ACK; the unit holds a slot from the ACK on. Returns the SYN's verdict. */
static int open_conn(struct sluice_bpf *skel, uint16_t sport)
{
	struct pkt_spec s = syn4(sport), sa = s, ack = s;
	uint8_t buf[256];
	int rv = xdp_spec(skel, &s);

	if (rv != XDP_PASS)
		return rv;
	sa.src = s.dst, sa.dst = s.src, sa.sport = s.dport, sa.dport = s.sport;
	sa.seq = SERVER_ISN(sport), sa.ack = s.seq + 1, sa.ackf = 1;
	harness_run(bpf_program__fd(skel->progs.sluice_tc_egress), buf, build_pkt(buf, &sa), NULL);
	ack.syn = 0, ack.ackf = 1, ack.seq = s.seq + 1, ack.ack = SERVER_ISN(sport) + 1;
	xdp_spec(skel, &ack);
	return rv;
}

static void fin(struct sluice_bpf *skel, uint16_t sport, uint32_t seq_offset)
{
	struct pkt_spec f = syn4(sport);

	f.syn = 0, f.fin = 1, f.ackf = 1, f.seq += 1 + seq_offset;
	f.ack = SERVER_ISN(sport) + 1;
	xdp_spec(skel, &f);
}

/* A query on the connection from sport (TC ingress: opens a turn, the flow is busy), or with
 * `reply` the server's answer (TC egress: ends it). */
static void turn(struct sluice_bpf *skel, uint16_t sport, int reply)
{
	static const char q[] = "query";
	struct pkt_spec s = syn4(sport);
	uint8_t buf[256];

	s.syn = 0, s.ackf = 1, s.psh = 1, s.payload = q, s.payload_len = sizeof(q) - 1;
	s.seq += 1, s.ack = SERVER_ISN(sport) + 1;
	if (reply) {
		s.src = SERVER4, s.dst = "198.18.1.2", s.sport = 5432, s.dport = sport;
		s.ack = s.seq + (uint32_t)sizeof(q) - 1, s.seq = SERVER_ISN(sport) + 1;
	}
	harness_run(bpf_program__fd(reply ? skel->progs.sluice_tc_egress
					  : skel->progs.sluice_tc_ingress), buf, build_pkt(buf, &s), NULL);
}

static long count_flows(int fd)
{
	struct sluice_flow_key k, next;
	long n = 0;

	for (void *prev = NULL; bpf_map_get_next_key(fd, prev, &next) == 0; prev = &k, n++)
		k = next;
	return n;
}

/* A plan that carries every pinned map of the old fixture over into the new skeleton, as a
 * migration from layout `from` would: copied (through the map's converter, if that migration
 * has one), the record map adopted. Returns the number of maps in the plan. */
static int plan_migration(struct pair *p, struct layout_plan *lp, __u32 from)
{
	const char *names[SLUICE_LAYOUT_ALL_MAPS];
	int n = pinned_map_names(names, SLUICE_LAYOUT_ALL_MAPS);

	memset(lp, 0, sizeof(*lp));
	lp->action = LAYOUT_MIGRATE;
	lp->version = layout_version();
	lp->pinned = from;
	for (int i = 0; i < n; i++) {
		struct bpf_map *nm = bpf_object__find_map_by_name(p->new_skel->obj, names[i]);
		struct bpf_map *om = bpf_object__find_map_by_name(p->old->skel->obj, names[i]);
		int record = strcmp(names[i], "sluice_layout") == 0;

		lp->slot[lp->n++] = (struct layout_slot){
			.map = nm, .copy = !record, .convert = layout_converter(from, names[i]),
			.old_fd = record ? -1 : dup(bpf_map__fd(om)) };
		free((void *)names[i]);
	}
	return n;
}

/* The copy, then what attach_load does after it before any program of the new set runs: the
 * new set's bitmap of the service ports derived from the port map it was given. */
static int copy_as_attach_does(struct pair *p, struct layout_plan *lp, char *err, size_t errlen)
{
	int rc = layout_copy(lp, err, errlen);

	return rc ? rc : maps_derive_port_bits(p->nm.port_to_service, p->nm.service_ports);
}

static void test_late_changes_counted_exactly_once(void **state)
{
	struct pair *p = *state;
	struct sluice_class_stats st;
	struct sluice_inflight inf;
	struct layout_plan lp;
	char err[256];
	int n_maps;

	/* Before the first copy: A(1), B(2), C(3) admitted by the old programs. */
	for (uint16_t s = 1; s <= 3; s++)
		assert_int_equal(open_conn(p->old->skel, s), XDP_PASS);
	n_maps = plan_migration(p, &lp, layout_version()); /* a copy with no converter */
	assert_int_equal(copy_as_attach_does(p, &lp, err, sizeof(err)), 0);
	assert_int_equal(count_flows(p->nm.flows), 3);

	/* Between the copy and the swap the old programs still run: B ends, D(4), F(6) arrive.
	 * The new programs already run too: E(5) arrives there. */
	fin(p->old->skel, 2, 0);
	assert_int_equal(open_conn(p->old->skel, 4), XDP_PASS);
	assert_int_equal(open_conn(p->old->skel, 6), XDP_PASS);
	assert_int_equal(open_conn(p->new_skel, 5), XDP_PASS);

	assert_int_equal(layout_commit(&lp, p->new_skel->obj, p->pin_dir, err, sizeof(err)), 0);
	layout_plan_release(&lp);

	/* A, C, D, E, F: five live units, each once; six admissions, one completion. */
	assert_int_equal(count_flows(p->nm.flows), 5);
	assert_int_equal(maps_read_inflight(&p->nm, p->old->idx[0], &inf), 0);
	assert_int_equal(inf.total, 5);
	assert_int_equal(maps_read_class_stats(&p->nm, p->old->idx[0], SLUICE_L2, &st), 0);
	assert_int_equal(st.admitted, 6);
	assert_int_equal(st.completed, 1);

	/* They all end through the new programs: back to exactly zero. */
	for (uint16_t s = 1; s <= 6; s++)
		if (s != 2)
			fin(p->new_skel, s, 0);
	assert_int_equal(count_flows(p->nm.flows), 0);
	assert_int_equal(maps_read_inflight(&p->nm, p->old->idx[0], &inf), 0);
	assert_int_equal(inf.total, 0);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		assert_int_equal(inf.cls[c], 0);

	/* The fresh maps took over the pin names; the record says the new layout. */
	struct sluice_maps pinned;
	struct sluice_layout rec;
	static struct sluice_layout_ext ext;
	__u32 k = 0;

	assert_int_equal(maps_open_pinned(p->pin_dir, &pinned), 0);
	assert_int_equal(count_flows(pinned.flows), 0);
	maps_close(&pinned);
	/* The record map is adopted, never moved (here: the skeleton's own). */
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(p->new_skel->maps.sluice_layout), &k,
					     &rec), 0);
	assert_int_equal(rec.version, layout_version());
	assert_int_equal(rec.migrating_from, 0);
	/* The first record holds what it has room for, its continuation the rest. */
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(p->new_skel->maps.sluice_layout_ext), &k,
					     &ext), 0);
	assert_int_equal(ext.version, layout_version());
	assert_int_equal(rec.n_maps + ext.n_maps, n_maps);
	assert_int_equal(rec.n_maps, n_maps < SLUICE_LAYOUT_MAX_MAPS ? n_maps
								      : SLUICE_LAYOUT_MAX_MAPS);
}

/* Busy (tcp turns) is shared with the running programs' atomics like in-flight: a turn the old
 * programs open between the copy and the swap is booked in busy_released even when the new
 * programs opened one meanwhile, so both count once and both end back at exactly 0. */
static void test_late_turns_counted_exactly_once(void **state)
{
	struct pair *p = *state;
	struct sluice_inflight b;
	struct layout_plan lp;
	char err[256];

	assert_int_equal(open_conn(p->old->skel, 1), XDP_PASS);
	assert_int_equal(open_conn(p->old->skel, 2), XDP_PASS);
	plan_migration(p, &lp, layout_version());
	assert_int_equal(copy_as_attach_does(p, &lp, err, sizeof(err)), 0);
	turn(p->old->skel, 1, 0);                 /* the old programs: a turn on A */
	turn(p->new_skel, 2, 0);                  /* the new ones: a turn on B (copied flow) */
	assert_int_equal(layout_commit(&lp, p->new_skel->obj, p->pin_dir, err, sizeof(err)), 0);
	layout_plan_release(&lp);

	assert_int_equal(maps_read_busy(&p->nm, p->old->idx[0], &b), 0);
	assert_int_equal(b.total, 2);
	turn(p->new_skel, 1, 1);
	turn(p->new_skel, 2, 1);
	assert_int_equal(maps_read_busy(&p->nm, p->old->idx[0], &b), 0);
	assert_int_equal(b.total, 0);
	assert_int_equal(b.cls[2], 0);
}

/* struct sluice_verdict as layouts 1 and 2 wrote it (admit fractions; a class admitted while
 * in-flight < its threshold, so 0 = no room): what a layout 2 controller left in the map. */
struct old_verdict {
	__u32 limit, class_threshold[SLUICE_NUM_CLASSES], admit_prob[SLUICE_NUM_CLASSES];
	__u32 switch_admit[SLUICE_NUM_CLASSES], breaker_state, breaker_admit, retry_after_s, flags;
};

/* Layout 2 -> this layout, before the controller's first tick: every verdict field converted
 * to its shed meaning exactly, the swapped-in programs admit what the old ones admitted and
 * refuse what they refused, a slot never written admits, and the flows carried over (with
 * client_next unknown) end on their FIN wherever the client's sequence is. */
static void test_migration_from_layout_2_converts_verdicts_and_flows(void **state)
{
	struct pair *p = *state;
	const __u32 ONE = SLUICE_PROB_ONE;
	struct old_verdict ov = {
		.limit = 100, .class_threshold = { 100, 90, 75, 0 },
		.admit_prob = { ONE, ONE / 4, ONE, ONE }, .switch_admit = { ONE, ONE / 2, ONE, 0 },
		.breaker_state = SLUICE_BREAKER_CLOSED, .breaker_admit = ONE, .retry_after_s = 7,
		.flags = SLUICE_VERDICT_PRIORITY_COUNT,
	}, zero = { 0 };
	struct sluice_verdict v, nothing = { 0 };
	struct sluice_inflight inf;
	struct layout_plan lp;
	char err[256];
	__u32 svc = (__u32)p->old->idx[0], unused = svc + 1;

	assert_int_equal(layout_converter(2, "verdicts"), layout_verdict_from_v2);
	assert_int_equal(layout_converter(1, "flows"), layout_flow_from_v2);
	assert_null(layout_converter(2, "inflight"));
	/* Three units admitted and established by the old programs (L2, the default class). */
	for (uint16_t s = 1; s <= 3; s++)
		assert_int_equal(open_conn(p->old->skel, s), XDP_PASS);
	/* What a layout 2 controller left: admit fractions; another slot never written. */
	assert_int_equal(bpf_map_update_elem(p->old->m.verdicts, &svc, &ov, BPF_ANY), 0);
	assert_int_equal(bpf_map_update_elem(p->old->m.verdicts, &unused, &zero, BPF_ANY), 0);

	plan_migration(p, &lp, 2);
	assert_int_equal(copy_as_attach_does(p, &lp, err, sizeof(err)), 0);
	assert_int_equal(layout_commit(&lp, p->new_skel->obj, p->pin_dir, err, sizeof(err)), 0);
	layout_plan_release(&lp);

	assert_int_equal(maps_read_verdict(&p->nm, (int)svc, &v), 0);
	assert_int_equal(v.limit, 100);
	assert_int_equal(v.class_threshold[0], 100);
	assert_int_equal(v.class_threshold[2], 75);
	assert_int_equal(v.class_threshold[3], 0);
	assert_int_equal(v.flags, SLUICE_VERDICT_PRIORITY_COUNT | SLUICE_VERDICT_SHUT(3));
	assert_int_equal(v.shed_prob[0], 0);
	assert_int_equal(v.shed_prob[1], ONE - ONE / 4);
	assert_int_equal(v.shed_prob[2], 0);
	assert_int_equal(v.switch_shed[1], ONE / 2);
	assert_int_equal(v.switch_shed[3], ONE);
	assert_int_equal(v.switch_shed[2], 0);
	assert_int_equal(v.breaker_state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(v.breaker_shed, 0);
	assert_int_equal(v.retry_after_s, 7);
	assert_int_equal(maps_read_verdict(&p->nm, (int)unused, &v), 0);
	assert_memory_equal(&v, &nothing, sizeof(v));

	/* The three units are there, each counted once; their FINs end them wherever the
	 * client's sequence is (1 MiB and 3 GB past the handshake). */
	assert_int_equal(count_flows(p->nm.flows), 3);
	assert_int_equal(maps_read_inflight(&p->nm, (int)svc, &inf), 0);
	assert_int_equal(inf.total, 3);
	fin(p->new_skel, 1, 0);
	fin(p->new_skel, 2, SLUICE_SEQ_WINDOW);
	fin(p->new_skel, 3, 0xc0000000u);
	assert_int_equal(count_flows(p->nm.flows), 0);
	assert_int_equal(maps_read_inflight(&p->nm, (int)svc, &inf), 0);
	assert_int_equal(inf.total, 0);

	/* Before any tick: connections of L2 (threshold 75, nothing shed) are admitted by the
	 * new programs, every one of them, and complete. */
	for (uint16_t s = 40; s < 60; s++)
		assert_int_equal(open_conn(p->new_skel, s), XDP_PASS);
	assert_int_equal(maps_read_inflight(&p->nm, (int)svc, &inf), 0);
	assert_int_equal(inf.total, 20);
}

static void test_btf_hash_tells_layouts_apart(void **state)
{
	struct pair *p = *state;
	const struct bpf_object *o = p->old->skel->obj, *n = p->new_skel->obj;
	__u64 flows = layout_btf_hash(o, p->old->skel->maps.flows);
	__u64 rej = layout_btf_hash(o, p->old->skel->maps.rejected_syns);

	/* Same key type, different values: different hashes; the same map in two loads: equal. */
	assert_true(flows != 0 && rej != 0);
	assert_true(flows != rej);
	assert_true(layout_btf_hash(o, p->old->skel->maps.inflight) !=
		    layout_btf_hash(o, p->old->skel->maps.class_stats));
	assert_true(flows == layout_btf_hash(n, p->new_skel->maps.flows));
	const char *names[SLUICE_LAYOUT_ALL_MAPS];
	int n_maps = pinned_map_names(names, SLUICE_LAYOUT_ALL_MAPS);

	for (int i = 0; i < n_maps; i++) {
		assert_true(layout_btf_hash(o, bpf_object__find_map_by_name(o, names[i])) != 0);
		free((void *)names[i]);
	}
}

/* Same-size layouts that differ only in names, order, widths or array lengths hash apart; a
 * typedef is looked through; the same struct built twice hashes the same. */
static __u32 add_pair(struct btf *b, const char *name, const char *f1, __u32 t1,
		      const char *f2, __u32 t2, __u32 size, __u32 off2)
{
	__u32 id = btf__add_struct(b, name, size);

	btf__add_field(b, f1, t1, 0, 0);
	btf__add_field(b, f2, t2, off2 * 8, 0);
	return id;
}

static void test_btf_hash_sees_same_size_changes(void **state)
{
	struct btf *b = btf__new_empty(), *b2 = btf__new_empty();
	__u32 u32 = btf__add_int(b, "unsigned int", 4, 0);
	__u32 u16 = btf__add_int(b, "short unsigned int", 2, 0);
	__u32 u64 = btf__add_int(b, "long long unsigned int", 8, 0);
	__u32 s32 = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	__u32 td = btf__add_typedef(b, "__u32", u32);
	__u32 xy = add_pair(b, "a", "x", u32, "y", u32, 8, 4);
	__u32 yx = add_pair(b, "b", "y", u32, "x", u32, 8, 4);
	__u32 xs = add_pair(b, "c", "x", u32, "y", s32, 8, 4);
	__u32 xy_td = add_pair(b, "d", "x", td, "y", u32, 8, 4);
	__u32 wide = btf__add_struct(b, "e", 8);
	int wide_field = btf__add_field(b, "xy", u64, 0, 0);
	__u32 y_at4 = add_pair(b, "f", "x", u32, "y", u32, 12, 4);
	__u32 y_at8 = add_pair(b, "g", "x", u32, "y", u32, 12, 8);
	__u32 arr2 = btf__add_array(b, u32, u32, 2), arr3 = btf__add_array(b, u32, u32, 3);
	__u32 arr4 = btf__add_array(b, u32, u16, 4);
	__u32 other_u32 = btf__add_int(b2, "unsigned int", 4, 0);
	__u32 xy2 = add_pair(b2, "a", "x", other_u32, "y", other_u32, 8, 4);

	assert_int_equal(wide_field, 0);
	__u64 h_xy = layout_btf_type_hash(b, xy);
	assert_true(h_xy != layout_btf_type_hash(b, yx));      /* fields swapped */
	assert_true(h_xy != layout_btf_type_hash(b, xs));      /* one field signed */
	assert_true(h_xy != layout_btf_type_hash(b, wide));    /* one u64 instead of two u32 */
	assert_true(layout_btf_type_hash(b, y_at4) != layout_btf_type_hash(b, y_at8)); /* offset */
	assert_true(layout_btf_type_hash(b, arr2) != layout_btf_type_hash(b, arr3)); /* length */
	assert_true(layout_btf_type_hash(b, arr2) != layout_btf_type_hash(b, arr4)); /* element */
	assert_true(h_xy == layout_btf_type_hash(b, xy_td));   /* a typedef changes nothing */
	assert_true(h_xy == layout_btf_type_hash(b2, xy2));    /* another BTF, same struct */
	btf__free(b);
	btf__free(b2);
}

/* A connection from src:sport to dst:5432 through skel's programs: SYN, SYN-ACK and (with
 * complete) the client's ACK. */
static struct sluice_flow_key key_of(const char *src, const char *dst, uint16_t sport);

/* Where an older layout's programs kept a pending handshake: its record moved from the slot
 * these programs wrote into `handshakes`, under the key without the local address (dst NULL)
 * or with it. */
static void as_old_pending(struct sluice_bpf *skel, const char *src, const char *dst,
			   uint16_t sport)
{
	struct sluice_flow_key k = key_of(src, dst, sport);
	struct sluice_hash_keys keys;
	__u32 zero = 0;

	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(skel->maps.flow_hash_key), &zero,
					     &keys), 0);
	__u32 i = sluice_slot_index(sluice_flow_key_hash(&k, &keys));
	int sfd = bpf_map__fd(skel->maps.handshake_slots);
	struct sluice_handshake_slot sl, none = { 0 };
	struct sluice_handshake r = { 0 };

	assert_int_equal(bpf_map_lookup_elem(sfd, &i, &sl), 0);
	assert_true(sl.word & SLUICE_SLOT_HELD);
	assert_memory_equal(&sl.key, &k, sizeof(k));
	sluice_slot_record(&sl, &r);
	r.flags &= ~SLUICE_HS_COUNTED; /* an older layout had no such flag */
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(skel->maps.handshakes), &k, &r,
					     BPF_NOEXIST), 0);
	assert_int_equal(bpf_map_update_elem(sfd, &i, &none, BPF_EXIST), 0);
}

static void conn_at(struct sluice_bpf *skel, const char *src, const char *dst, uint16_t sport,
		    int complete)
{
	struct pkt_spec s = { .src = src, .dst = dst, .sport = sport, .dport = 5432,
			      .seq = 1000u + sport, .syn = 1 }, sa = s, ack = s;
	uint8_t buf[256];

	assert_int_equal(xdp_spec(skel, &s), XDP_PASS);
	sa.src = dst, sa.dst = src, sa.sport = 5432, sa.dport = sport;
	sa.seq = SERVER_ISN(sport), sa.ack = s.seq + 1, sa.ackf = 1;
	harness_run(bpf_program__fd(skel->progs.sluice_tc_egress), buf, build_pkt(buf, &sa), NULL);
	ack.syn = 0, ack.ackf = 1, ack.seq = s.seq + 1, ack.ack = SERVER_ISN(sport) + 1;
	if (complete)
		assert_int_equal(xdp_spec(skel, &ack), XDP_PASS);
	else
		as_old_pending(skel, src, dst, sport);
}

/* The ACK that completes conn_at's handshake. */
static void ack_at(struct sluice_bpf *skel, const char *src, const char *dst, uint16_t sport)
{
	struct pkt_spec ack = { .src = src, .dst = dst, .sport = sport, .dport = 5432,
				.seq = 1001u + sport, .ack = SERVER_ISN(sport) + 1, .ackf = 1 };

	assert_int_equal(xdp_spec(skel, &ack), XDP_PASS);
}

static void fin_at(struct sluice_bpf *skel, const char *src, const char *dst, uint16_t sport)
{
	struct pkt_spec f = { .src = src, .dst = dst, .sport = sport, .dport = 5432,
			      .seq = 1001u + sport, .ack = SERVER_ISN(sport) + 1, .fin = 1, .ackf = 1 };

	xdp_spec(skel, &f);
}

/* The map behind old_fd as a layout before 7 keyed it: a map of the short key with the same
 * entries (the local address cut off). */
static int short_keyed(int old_fd, const struct bpf_map *like)
{
	int fd = bpf_map_create(bpf_map__type(like), bpf_map__name(like), layout_rekey_old_size(),
				bpf_map__value_size(like), bpf_map__max_entries(like), NULL);
	struct sluice_flow_key k, next;
	char v[256];

	assert_true(fd >= 0);
	assert_true(bpf_map__value_size(like) <= sizeof(v));
	for (void *prev = NULL; bpf_map_get_next_key(old_fd, prev, &next) == 0; prev = &k) {
		k = next;
		if (bpf_map_lookup_elem(old_fd, &k, v) == 0)
			assert_int_equal(bpf_map_update_elem(fd, &k, v, BPF_ANY), 0);
	}
	return fd;
}

/* The key the data path makes for client src:sport at local address dst, port 5432. */
static struct sluice_flow_key key_of(const char *src, const char *dst, uint16_t sport)
{
	struct sluice_flow_key k = { .client_port = htons(sport), .service_port = htons(5432) };

	k.client_addr[10] = k.client_addr[11] = 0xff;
	assert_int_equal(inet_pton(AF_INET, src, k.client_addr + 12), 1);
	if (dst) {
		k.local_addr[10] = k.local_addr[11] = 0xff;
		assert_int_equal(inet_pton(AF_INET, dst, k.local_addr + 12), 1);
	}
	return k;
}

static int has_key(int fd, const struct sluice_flow_key *k)
{
	char v[256];

	return bpf_map_lookup_elem(fd, k, v) == 0;
}

static long long conns_of(struct sluice_maps *m, int svc)
{
	struct sluice_inflight in;

	assert_int_equal(maps_read_inflight(m, svc, &in), 0);
	return in.total;
}

/* Layout 6 -> 7: a layout 6 data path's flows and handshakes (keys without the local address)
 * carried over under keys with it: from the flow's service when that is at an address (db7
 * at 198.18.0.7), else from the kernel's socket table (a real connection to 127.0.0.9:5432
 * in this test's network namespace), else unknown (all zero: the GC ends it and gives back
 * its slot); a handshake without one is left behind; a flow the layout 6 programs add
 * between the copy and the swap gets its own in the late merge. Every carried flow ends
 * exactly. */
static void test_migration_gives_flow_keys_their_local_address(void **state)
{
	struct pair *p = *state;
	int svc = p->old->idx[0], svc7 = p->old->idx[1], ls, cs, as;
	struct sockaddr_in la = { .sin_family = AF_INET, .sin_port = htons(5432) }, me;
	socklen_t len = sizeof(me);
	struct layout_plan lp;
	uint16_t cport;
	char err[256];

	/* the real connection: 127.0.0.1:cport to 127.0.0.9:5432 */
	ls = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&la, sizeof(la)), 0);
	assert_int_equal(listen(ls, 4), 0);
	cs = socket(AF_INET, SOCK_STREAM, 0);
	la.sin_addr.s_addr = htonl(0x7f000009);
	assert_int_equal(connect(cs, (struct sockaddr *)&la, sizeof(la)), 0);
	as = accept(ls, NULL, NULL);
	assert_true(as >= 0);
	getsockname(cs, (struct sockaddr *)&me, &len);
	cport = ntohs(me.sin_port);

	/* what the layout 6 data path holds: flows A (db7), B (db, the real connection),
	 * C (db, no connection in the socket table); pending handshakes D (db) and E (db7) */
	conn_at(p->old->skel, "198.18.1.2", "198.18.0.7", 1, 1);
	conn_at(p->old->skel, "127.0.0.1", "127.0.0.9", cport, 1);
	conn_at(p->old->skel, "198.18.1.2", "198.18.0.1", 3, 1);
	conn_at(p->old->skel, "198.18.1.2", "198.18.0.1", 4, 0);
	conn_at(p->old->skel, "198.18.1.2", "198.18.0.7", 5, 0);
	assert_int_equal(conns_of(&p->old->m, svc), 2);
	assert_int_equal(conns_of(&p->old->m, svc7), 1);

	plan_migration(p, &lp, 6);
	for (int i = 0; i < lp.n; i++) {
		struct layout_slot *s = &lp.slot[i];
		const char *name = bpf_map__name(s->map);

		if (!(s->rekey = layout_rekeyer(6, name)))
			continue;
		int fd = short_keyed(s->old_fd, s->map);

		close(s->old_fd);
		s->old_fd = fd;
	}
	assert_int_equal(copy_as_attach_does(p, &lp, err, sizeof(err)), 0);
	/* between the copy and the swap the layout 6 programs admit G (db7): a late entry */
	conn_at(p->old->skel, "198.18.1.2", "198.18.0.7", 6, 1);
	for (int i = 0; i < lp.n; i++)
		if (!strcmp(bpf_map__name(lp.slot[i].map), "flows")) {
			struct sluice_flow_key g = key_of("198.18.1.2", "198.18.0.7", 6);
			struct sluice_flow gv;

			assert_int_equal(bpf_map_lookup_elem(p->old->m.flows, &g, &gv), 0);
			assert_int_equal(bpf_map_update_elem(lp.slot[i].old_fd, &g, &gv, BPF_NOEXIST), 0);
		}
	assert_int_equal(layout_commit(&lp, p->new_skel->obj, p->pin_dir, err, sizeof(err)), 0);
	assert_non_null(strstr(lp.note, "3 from their service, 1 from the socket table, 1 unknown "
				       "(left to the GC), 1 handshakes left behind"));
	layout_plan_release(&lp);

	struct sluice_flow_key a = key_of("198.18.1.2", "198.18.0.7", 1),
			       b = key_of("127.0.0.1", "127.0.0.9", cport),
			       c = key_of("198.18.1.2", NULL, 3),
			       d = key_of("198.18.1.2", "198.18.0.1", 4),
			       e = key_of("198.18.1.2", "198.18.0.7", 5);
	int hs = bpf_map__fd(p->new_skel->maps.handshakes);

	struct sluice_flow_key g = key_of("198.18.1.2", "198.18.0.7", 6);

	assert_int_equal(count_flows(p->nm.flows), 4);
	assert_true(has_key(p->nm.flows, &g));
	assert_true(has_key(p->nm.flows, &a));
	assert_true(has_key(p->nm.flows, &b));
	assert_true(has_key(p->nm.flows, &c));
	assert_true(has_key(hs, &e));
	assert_false(has_key(hs, &d));
	/* what sluiced does once the new programs run: E's record goes into its slot (D's
	 * was left behind), where the new programs find it: E's ACK completes its handshake */
	struct sluice_hash_keys keys, again, none = { { 0 } };

	assert_int_equal(hs_hash_keys(bpf_map__fd(p->new_skel->maps.flow_hash_key), &keys), 0);
	assert_memory_not_equal(&keys, &none, sizeof(keys)); /* drawn: the map was new */
	assert_int_equal(hs_hash_keys(bpf_map__fd(p->new_skel->maps.flow_hash_key), &again), 0);
	/* kept: a restart's sluiced finds the slots where they are */
	assert_memory_equal(&again, &keys, sizeof(keys));
	assert_int_equal(hs_move_records(hs, bpf_map__fd(p->new_skel->maps.handshake_slots),
					 &keys), 1);
	assert_false(has_key(hs, &e));
	assert_false(has_key(p->nm.flows, &e));
	ack_at(p->new_skel, "198.18.1.2", "198.18.0.7", 5);
	assert_true(has_key(p->nm.flows, &e));
	assert_int_equal(conns_of(&p->nm, svc7), 3);
	fin_at(p->new_skel, "198.18.1.2", "198.18.0.7", 5);
	assert_false(has_key(p->nm.flows, &e));
	assert_int_equal(conns_of(&p->nm, svc), 2);
	assert_int_equal(conns_of(&p->nm, svc7), 2);

	/* A, B and G end with their FINs through the new programs, C through the GC */
	fin_at(p->new_skel, "198.18.1.2", "198.18.0.7", 1);
	fin_at(p->new_skel, "198.18.1.2", "198.18.0.7", 6);
	fin_at(p->new_skel, "127.0.0.1", "127.0.0.9", cport);
	assert_int_equal(count_flows(p->nm.flows), 1);
	assert_int_equal(maps_gc_flows(&p->nm, monotonic_ns() + 7200ull * 1000000000ull,
				       1000000000ull, 1000000000ull, NULL, NULL), 1);
	assert_int_equal(count_flows(p->nm.flows), 0);
	assert_int_equal(conns_of(&p->nm, svc), 0);
	assert_int_equal(conns_of(&p->nm, svc7), 0);
	close(as);
	close(cs);
	close(ls);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_late_changes_counted_exactly_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_late_turns_counted_exactly_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migration_from_layout_2_converts_verdicts_and_flows,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_btf_hash_tells_layouts_apart, setup, teardown),
		cmocka_unit_test(test_btf_hash_sees_same_size_changes),
		cmocka_unit_test_setup_teardown(test_migration_gives_flow_keys_their_local_address,
						setup, teardown),
	};
	struct ifreq ifr = { .ifr_flags = IFF_UP };
	int d;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (BPF)\n");
		return 0;
	}
	/* A network namespace of its own (the pins stay in the host's bpffs): the socket table
	 * the migration reads holds this test's connection only. */
	strcpy(ifr.ifr_name, "lo");
	if (unshare(CLONE_NEWNET) != 0 || (d = socket(AF_INET, SOCK_DGRAM, 0)) < 0 ||
	    ioctl(d, SIOCSIFFLAGS, &ifr) != 0)
		return 1;
	close(d);
	return cmocka_run_group_tests_name("layout", tests, NULL, NULL);
}
