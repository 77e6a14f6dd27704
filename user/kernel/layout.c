// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/layout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#define LAYOUT_MAP "sluice_layout"
#define LAYOUT_EXT_MAP "sluice_layout_ext"  /* the record's continuation (layout 7 on) */

/* The rehearsal build (make's layout drill) claims the next layout with today's structs and
 * migrates from today's by copying every map, so the end-to-end test drives the copy-and-swap
 * path on live traffic before a real layout change needs it. */
#ifdef SLUICE_LAYOUT_DRILL
#define THIS_LAYOUT (SLUICE_MAP_LAYOUT_VERSION + 1)
#else
#define THIS_LAYOUT SLUICE_MAP_LAYOUT_VERSION
#endif

/* ---- converters: a map whose values changed meaning keeps its key and value sizes, and each
 * value is rewritten from the old meaning into this build's on the way into the fresh map */

/* struct sluice_verdict as layouts 1 and 2 wrote it: admit fractions (SLUICE_PROB_ONE = admit
 * all), a class admitted while in-flight < its threshold (so 0 = no room), flags bit 0 only. */
struct verdict_v2 {
	__u32 limit;
	__u32 class_threshold[SLUICE_NUM_CLASSES];
	__u32 admit_prob[SLUICE_NUM_CLASSES];
	__u32 switch_admit[SLUICE_NUM_CLASSES];
	__u32 breaker_state;
	__u32 breaker_admit;
	__u32 retry_after_s;
	__u32 flags;
};
_Static_assert(sizeof(struct verdict_v2) == sizeof(struct sluice_verdict),
	       "a verdict converted in place keeps its size");

void layout_verdict_from_v2(void *value)
{
	static const struct verdict_v2 never_written;
	struct verdict_v2 o;
	struct sluice_verdict *v = value;

	memcpy(&o, value, sizeof(o));
	memset(v, 0, sizeof(*v));
	/* All zero: a slot no controller ever wrote (a written verdict has a limit of at least
	 * 1). Layout 2 enforced it as "refuse everything" only while a heartbeat made the slot
	 * count; this layout's never-written verdict is the all-zero one, which admits. */
	if (!memcmp(&o, &never_written, sizeof(o)))
		return;
	v->limit = o.limit;
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		v->class_threshold[c] = o.class_threshold[c];
		v->shed_prob[c] = sluice_prob_complement(o.admit_prob[c]);
		v->switch_shed[c] = sluice_prob_complement(o.switch_admit[c]);
	}
	v->breaker_state = o.breaker_state;
	v->breaker_shed = sluice_prob_complement(o.breaker_admit);
	v->retry_after_s = o.retry_after_s;
	/* The only flag layout 2 knew; a threshold of 0 (no room) becomes a shut class. */
	v->flags = o.flags & SLUICE_VERDICT_PRIORITY_COUNT;
	sluice_verdict_mark_shut(v);
}

/* Layout 2's flows had padding where client_next and flags are; 0 in client_next tells the
 * data path that where the client is is not known yet (its FIN/RST is taken, the server's
 * next ack sets it), 0 in flags that the server's next sequence is not known either (its next
 * data sets it). */
void layout_flow_from_v2(void *value)
{
	((struct sluice_flow *)value)->client_next = 0;
	((struct sluice_flow *)value)->flags = 0;
}

struct layout_convert {
	const char *map;
	void (*fn)(void *value);
};

static const struct layout_convert from_v2[] = {
	{ "verdicts", layout_verdict_from_v2 },
	{ "flows", layout_flow_from_v2 },
	{ NULL, NULL },
};

/* The versions this build can carry over, and how. A map listed in `copy` (or every map with
 * copy_all), or in `convert`, is created fresh and filled from its pin (through its converter
 * when it has one): its key and value sizes must be unchanged (a map whose values changed
 * size needs a converter that can change sizes first; a map whose key grew is rekeyed,
 * layout_rekeyer), its max_entries may differ. Maps new
 * in this layout are created empty by loading. Every other map must match this build exactly
 * and is adopted. The converters produce layout 3 values, which are layout 5's as well (a
 * layout 3 flow is a layout 5 flow with no turn open): a later layout that changes a value
 * runs its own converter after them, or refuses. */
struct layout_migration {
	__u32 from;
	int copy_all;
	const char *const *copy;
	const struct layout_convert *convert;
	const char *const *fresh;   /* maps that layout never had: created empty, never pinned */
	const char *what;
};

/* Maps layouts 1 and 2 never had (3 added the first two, 4 the controller's two, 5 the tcp
 * turns' two), and those 3 and 4 never had; the maps new in layout 6 and later are in
 * added_in below. */
static const char *const new_since_v2[] = { "handshakes", "halfopen", "ctl_state",
					     "ctl_requests", "busy", "busy_released", NULL };
static const char *const new_since_v3[] = { "ctl_state", "ctl_requests", "busy",
					     "busy_released", NULL };
static const char *const new_since_v4[] = { "busy", "busy_released", NULL };

/* The maps new in layout 6, created empty by a migration from any older layout (one line
 * each; the note of a migration names them):
 *  - conn_cap: no cap and no refusals; sluiced writes the thresholds when it programs the
 *    services;
 *  - addr_services: filled when sluiced programs the services; layout 5 never set
 *    SLUICE_PORT_BY_ADDR, so its port_to_service values mean the same and are adopted;
 *  - inflight_pcpu: in-flight striped per CPU, empty: the shared `inflight` keeps what older
 *    layouts counted, and the data path reads the sum of both.
 * A flow's req_active is its ownership word in layout 6, whose older values (0 idle, 1 open,
 * 2 deciding) it reads as they are: flows are adopted. */
static const char *const new_in_v6[] = {
	"conn_cap",
	"addr_services",
	"inflight_pcpu",
	NULL
};

/* The maps new in layout 7, created empty by a migration from any older layout:
 *  - sluice_layout_ext: the layout record's continuation (the record of an older layout
 *    lists all its maps in `sluice_layout`);
 *  - untrusted_marks: no priority mark ignored yet (older layouts did not count them). */
static const char *const new_in_v7[] = {
	LAYOUT_EXT_MAP,
	"untrusted_marks",
	NULL
};

/* The maps new in layout 8, created empty by a migration from any older layout: the
 * latency histograms of L1, L2 and L3 (latency_hist keeps L0's, renewed_in_v8). */
static const char *const new_in_v8[] = {
	"latency_hist1",
	"latency_hist2",
	"latency_hist3",
	NULL
};

/* The maps new in layout 9, created empty by a migration from any older layout:
 *  - http_conns: an http service's open connections per class. Older flows never counted
 *    themselves in it (no SLUICE_FLOW_CONN_COUNTED), so they never give a count back: zero is
 *    exact;
 *  - http_conn_cap: no cap; sluiced sets it where a class's requests are refused. */
static const char *const new_in_v9[] = {
	"http_conns",
	"http_conn_cap",
	NULL
};

/* The maps new in layout 10, created empty by a migration from any older layout: the pending
 * handshakes' slots, and the secret their 4-tuples' hash is keyed with (drawn by sluiced
 * before the programs attach). What an older layout's programs left in `handshakes` is moved
 * into the slots once the new programs are attached (hs_move_records, at every start). */
static const char *const new_in_v10[] = {
	"handshake_slots",
	"flow_hash_key",
	NULL
};

/* The maps each layout from 6 on added, oldest first: a migration from an older layout
 * creates them empty, and refuses pins that hold one of them already. */
static const struct {
	__u32 version;
	const char *const *maps;
} added_in[] = {
	{ 6, new_in_v6 },
	{ 7, new_in_v7 },
	{ 8, new_in_v8 },
	{ 9, new_in_v9 },
	{ 10, new_in_v10 },
	{ 0, NULL },
};
/* Layout 7: maps whose entries changed shape, so no value can be carried key for key. A
 * migration from any older layout creates them fresh (empty) and pins them over the old
 * pins, which are not read:
 *  - class_stats: one per-CPU entry per service (the four classes' counters and their
 *    latency sample counts) instead of one per service and class. The counters are
 *    statistics: they start from zero, which the controller takes as a reset (as after an
 *    attach), and in-flight, flows and the controller's learned state are carried as
 *    before. */
#define LAYOUT_V7 7
static const char *const renewed_in_v7[] = { "class_stats", NULL };
/* Layout 8: latency_hist holds L0's histograms only, one entry per service, where it held
 * every class's at service x 4 + class. Renewed like class_stats in 7: the histograms are
 * statistics and start from zero, which the controller takes as a reset (a restarted
 * sluiced's first tick takes a snapshot anyway); the other classes' maps are new
 * (new_in_v8). */
#define LAYOUT_V8 8
static const char *const renewed_in_v8[] = { "latency_hist", NULL };
/* Layout 11: flow_hash_key holds the hash's ten key words (it held one 64-bit secret), and the
 * handshake slots' records sit where layout 10's hash put them, where this layout's hash does
 * not look: both replaced unread by empty ones (new keys drawn at attach). refused_syns, also
 * addressed by the hash, is adopted: its marks under the old hash match no SYN any more, so a
 * late copy of a SYN refused before the upgrade is decided anew. Only layout 10 had
 * them; from an older layout they are new maps (new_in_v10). A handshake pending across the
 * upgrade is taken on at its first data like one whose SYN went unrecorded, and its
 * half-open count lapses with its window (a second at most). */
#define LAYOUT_V10 10
static const char *const renewed_in_v11[] = { "flow_hash_key", "handshake_slots", NULL };

/* Layout 5 (tcp turns): a flow keeps its size; the fields tcp did not use (the request's
 * sequence, a padding byte) now hold the server's next sequence and whether it is known, both
 * zero in a layout 3 or 4 flow: no turn open, the server's sequence learned from its next
 * data. So flows are copied byte for byte from 3 and 4. `busy` and `busy_released` start at
 * zero, which is exact: no older flow has a turn open. */
static const char *const copy_flows[] = { "flows", NULL };

/* Layouts 4 to 8 changed no value of layout 3's maps but the flows (and a layout 2 flow
 * converted to layout 3 is a layout 5 flow with no turn open) and the statistics that 7 and 8
 * renew, so layouts 1 and 2 migrate in one step through their converters. */
static const struct layout_migration migrations[] = {
	/* 1 is 2 without the record. */
	{ .from = 1, .convert = from_v2, .fresh = new_since_v2,
	  .what = "verdicts converted to shed fractions, flows copied with client_next unknown, "
		  "handshakes, halfopen, ctl_state, ctl_requests, busy and busy_released created "
		  "empty, the layout record is new" },
	{ .from = 2, .convert = from_v2, .fresh = new_since_v2,
	  .what = "verdicts converted to shed fractions, flows copied with client_next unknown, "
		  "handshakes, halfopen, ctl_state, ctl_requests, busy and busy_released created "
		  "empty" },
#ifdef SLUICE_LAYOUT_DRILL
	{ .from = SLUICE_MAP_LAYOUT_VERSION, .copy_all = 1,
	  .what = "rehearsal: every map copied into a fresh one" },
#endif
	/* 3 -> this layout: flows copied; the controller's state and request maps and the busy
	 * maps are new (created empty by the load, as those of layouts 6 to 8 are); every other
	 * map is adopted as it is */
	{ .from = 3, .copy = copy_flows, .fresh = new_since_v3,
	  .what = "flows copied; new maps ctl_state, ctl_requests, busy and busy_released, the "
		  "others adopted" },
	/* 4 -> this layout: flows copied, the busy maps new, every other map adopted */
	{ .from = 4, .copy = copy_flows, .fresh = new_since_v4,
	  .what = "flows copied; new maps busy and busy_released, the others adopted" },
	/* 5 -> 6: every map adopted (only layout 6's maps are new) */
	{ .from = 5, .what = "every other map adopted" },
	/* 6 -> 7: the maps keyed by flow key get the local address in their keys (as from every
	 * older layout: layout_rekeyer); class_stats renewed (renewed_in_v7, as from every older
	 * layout); every other map adopted */
	{ .from = 6, .what = "flow keys given their local address, every other map adopted" },
	/* 7 -> 8: latency_hist renewed (renewed_in_v8, as from every older layout), the other
	 * classes' histogram maps new; every other map adopted */
	{ .from = 7, .what = "every other map adopted" },
	/* 8 -> 9: http_conns and http_conn_cap new (empty: no older flow is counted in it),
	 * every other map adopted */
	{ .from = 8, .what = "every other map adopted" },
	/* 9 -> 10: handshake_slots new (its records moved in from handshakes at attach), every
	 * other map adopted */
	{ .from = 9, .what = "every other map adopted" },
	/* 10 -> 11: flow_hash_key and handshake_slots renewed (renewed_in_v11), every other map
	 * adopted */
	{ .from = 10, .what = "every other map adopted" },
	{ .from = 0 },  /* end of the list (version 0 never existed) */
};

layout_convert_fn layout_converter(__u32 from, const char *map)
{
	for (size_t i = 0; migrations[i].from; i++) {
		const struct layout_convert *c = migrations[i].convert;

		for (; migrations[i].from == from && c && c->map; c++)
			if (strcmp(c->map, map) == 0)
				return c->fn;
	}
	return NULL;
}

__u32 layout_version(void)
{
	return THIS_LAYOUT;
}

/* ---- BTF hash: names, offsets, sizes and kinds of a type, typedefs and qualifiers skipped */

static __u64 fnv(__u64 h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++) {
		h ^= c[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static __u64 hash_type(const struct btf *btf, __u32 id, __u64 h, int depth)
{
	const struct btf_type *t = btf__type_by_id(btf, id);
	__u32 kind;

	while (t && (btf_is_typedef(t) || btf_is_mod(t))) {
		id = t->type;
		t = btf__type_by_id(btf, id);
	}
	if (!t || depth > 16)
		return fnv(h, "?", 1);
	kind = btf_kind(t);
	h = fnv(h, &kind, sizeof(kind));
	if (btf_is_int(t)) {
		__u32 enc = btf_int_encoding(t), bits = btf_int_bits(t);

		h = fnv(h, &enc, sizeof(enc));
		return fnv(h, &bits, sizeof(bits));
	}
	if (btf_is_array(t)) {
		const struct btf_array *a = btf_array(t);

		h = fnv(h, &a->nelems, sizeof(a->nelems));
		return hash_type(btf, a->type, h, depth + 1);
	}
	if (btf_is_composite(t)) {
		const struct btf_member *m = btf_members(t);

		h = fnv(h, &t->size, sizeof(t->size));
		for (__u16 i = 0; i < btf_vlen(t); i++, m++) {
			const char *name = btf__name_by_offset(btf, m->name_off);
			__u32 off = btf_member_bit_offset(t, i);

			h = fnv(h, name ? name : "", name ? strlen(name) + 1 : 1);
			h = fnv(h, &off, sizeof(off));
			h = hash_type(btf, m->type, h, depth + 1);
		}
		return h;
	}
	return fnv(h, &t->size, sizeof(t->size)); /* enums and the rest: their size */
}

__u64 layout_btf_type_hash(const struct btf *btf, __u32 type_id)
{
	return hash_type(btf, type_id, 0xcbf29ce484222325ull, 0);
}

__u64 layout_btf_hash(const struct bpf_object *obj, const struct bpf_map *map)
{
	const struct btf *btf = bpf_object__btf(obj);
	__u32 k = bpf_map__btf_key_type_id(map), v = bpf_map__btf_value_type_id(map);
	__u64 h = 0xcbf29ce484222325ull;

	if (!btf || !k || !v)
		return 0;
	h = hash_type(btf, k, h, 0);
	return hash_type(btf, v, h, 0);
}

/* ---- what is pinned */

static const char *pin_flag(const char *pin_dir, char *buf, size_t len)
{
	if (strcmp(pin_dir, SLUICE_PIN_DIR) == 0)
		return "";
	snprintf(buf, len, " --pin-dir %s", pin_dir);
	return buf;
}

/* The advice every refusal ends with. */
static void refuse(char *err, size_t errlen, const char *pin_dir, const char *why)
{
	char flag[300];

	snprintf(err, errlen, "%s: run `sluicectl%s detach` (drops in-flight state; traffic is "
		 "admitted while detached) or start the matching sluiced version", why,
		 pin_flag(pin_dir, flag, sizeof(flag)));
}

/* The record as read: `sluice_layout`, and its continuation when it is there and current. */
struct layout_rec {
	struct sluice_layout main;
	struct sluice_layout_ext ext;   /* n_maps 0 when there is none */
};

/* Entry 0 of the pinned map name into value (size bytes). The record of another layout may be
 * of another size: it is read whole into a buffer of its own size and cut or zero-filled to
 * size, never copied past value's end. */
static int read_map0(const char *pin_dir, const char *name, void *value, size_t size)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info), k = 0;
	char path[512], *buf = NULL;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		rc = -errno;
	else if (!(buf = calloc(1, info.value_size > size ? info.value_size : size)))
		rc = -ENOMEM;
	else if (bpf_map_lookup_elem(fd, &k, buf))
		rc = -errno;
	else {
		memcpy(value, buf, size);
		rc = 0;
	}
	free(buf);
	close(fd);
	return rc;
}

static int read_record(const char *pin_dir, struct layout_rec *rec)
{
	int rc = read_map0(pin_dir, LAYOUT_MAP, &rec->main, sizeof(rec->main));

	memset(&rec->ext, 0, sizeof(rec->ext));
	if (rc)
		return rc;
	/* A continuation of another version is left over (an interrupted write): its entries
	 * are not known, which only skips their type hash check. */
	if (read_map0(pin_dir, LAYOUT_EXT_MAP, &rec->ext, sizeof(rec->ext)) || rec->ext.version != rec->main.version)
		memset(&rec->ext, 0, sizeof(rec->ext));
	return 0;
}

int layout_pinned_version(const char *pin_dir, __u32 *version)
{
	struct sluice_layout rec;
	int rc = read_map0(pin_dir, LAYOUT_MAP, &rec, sizeof(rec));

	if (!rc)
		*version = rec.version;
	return rc;
}

static int open_pin(const char *pin_dir, const struct bpf_map *map)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", pin_dir, bpf_map__name(map));
	return bpf_obj_get(path);
}

static const struct sluice_layout_map *record_entry(const struct layout_rec *rec,
						    const char *name)
{
	for (__u32 i = 0; rec && i < rec->main.n_maps && i < SLUICE_LAYOUT_MAX_MAPS; i++)
		if (strncmp(rec->main.map[i].name, name, SLUICE_LAYOUT_NAME_LEN) == 0)
			return &rec->main.map[i];
	for (__u32 i = 0; rec && i < rec->ext.n_maps && i < SLUICE_LAYOUT_EXT_MAPS; i++)
		if (strncmp(rec->ext.map[i].name, name, SLUICE_LAYOUT_NAME_LEN) == 0)
			return &rec->ext.map[i];
	return NULL;
}

/* Does the pinned map behind fd match this build's definition? Names the difference in why. */
static int pin_matches(int fd, const struct bpf_object *obj, const struct bpf_map *map,
		       const struct layout_rec *rec, int sizes_only, __u32 key_size, char *why,
		       size_t len)
{
	struct bpf_map_info info;
	__u32 ilen = sizeof(info);
	const struct sluice_layout_map *r = record_entry(rec, bpf_map__name(map));
	__u64 h = layout_btf_hash(obj, map);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &ilen)) {
		snprintf(why, len, "cannot read it: %s", strerror(errno));
		return 0;
	}
#define DIFF(what, pinned, want)                                                          \
	if ((pinned) != (want)) {                                                         \
		snprintf(why, len, what " %u, this sluiced expects %u", (unsigned)(pinned), \
			 (unsigned)(want));                                               \
		return 0;                                                                 \
	}
	DIFF("type", info.type, bpf_map__type(map));
	DIFF("key size", info.key_size, key_size);
	DIFF("value size", info.value_size, bpf_map__value_size(map));
	if (sizes_only)
		return 1;
	DIFF("max_entries", info.max_entries, bpf_map__max_entries(map));
	DIFF("flags", info.map_flags, bpf_map__map_flags(map));
#undef DIFF
	if (r && r->btf_hash && h && r->btf_hash != h) {
		snprintf(why, len, "key/value types differ (BTF hash %016llx, this sluiced "
			 "expects %016llx)", (unsigned long long)r->btf_hash,
			 (unsigned long long)h);
		return 0;
	}
	return 1;
}

static int in_list(const char *const *list, const char *name)
{
	for (; list && *list; list++)
		if (strcmp(*list, name) == 0)
			return 1;
	return 0;
}

/* The first map the layout a migration starts from never had that is pinned all the same, or
 * NULL: its own list first (the oldest maps first), then the maps new in each later layout. */
static const char *pinned_fresh(const struct layout_plan *p, const struct layout_migration *mig)
{
	for (int l = -1; l < 0 || added_in[l].version; l++) {
		const char *const *list = l < 0 ? mig->fresh : added_in[l].maps;

		if (l >= 0 && added_in[l].version <= mig->from)
			continue;
		for (const char *const *n = list; n && *n; n++)
			for (int i = 0; i < p->n; i++)
				if (!strcmp(bpf_map__name(p->slot[i].map), *n) &&
				    access(bpf_map__pin_path(p->slot[i].map), F_OK) == 0)
					return *n;
	}
	return NULL;
}

/* "; new in layout 6, created empty: conn_cap, addr_services, ...; new in layout 7, ..." for
 * each layout from 6 on that is newer than the one a migration starts from ("" for none). */
static void added_note(const struct layout_migration *mig, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (int l = 0; added_in[l].version && used < len; l++) {
		if (added_in[l].version <= mig->from)
			continue;
		used += (size_t)snprintf(buf + used, len - used, "; new in layout %u, created empty:",
					 added_in[l].version);
		for (int i = 0; added_in[l].maps[i] && used < len; i++)
			used += (size_t)snprintf(buf + used, len - used, "%s %s", i ? "," : "",
						 added_in[l].maps[i]);
	}
}

/* Check every pinned map this plan adopts (or copies) against this build. */
static int check_pins(struct layout_plan *p, const struct bpf_object *obj, const char *pin_dir,
		      const struct layout_rec *rec, char *err, size_t errlen)
{
	for (int i = 0; i < p->n; i++) {
		struct layout_slot *s = &p->slot[i];
		const char *name = bpf_map__name(s->map);
		char why[200], msg[600];
		int fd = s->renew ? -1 : open_pin(pin_dir, s->map), ok;

		if (fd < 0)
			continue; /* not pinned yet, or replaced unread: loading creates it */
		ok = pin_matches(fd, obj, s->map, rec, s->copy,
				 s->rekey ? layout_rekey_old_size() : bpf_map__key_size(s->map), why,
				 sizeof(why));
		if (s->copy && ok)
			s->old_fd = fd;
		else
			close(fd);
		if (!ok) {
			snprintf(msg, sizeof(msg), "pinned maps under %s have layout %u, but map %s "
				 "does not match %s (%s); this sluiced understands layout %u",
				 pin_dir, p->pinned, name,
				 p->pinned == p->version ? "it" : "what the migration expects",
				 why, p->version);
			refuse(err, errlen, pin_dir, msg);
			return -EPROTO;
		}
	}
	return 0;
}

/* Mark for copying the maps of `grow` whose pins are smaller than this object's. */
static int mark_grown(struct layout_plan *p, const char *pin_dir, const char *const *grow)
{
	int n = 0;

	for (int i = 0; i < p->n; i++) {
		struct layout_slot *s = &p->slot[i];
		struct bpf_map_info info;
		__u32 len = sizeof(info);
		int fd;

		if (!in_list(grow, bpf_map__name(s->map)) || (fd = open_pin(pin_dir, s->map)) < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		    info.max_entries < bpf_map__max_entries(s->map)) {
			s->copy = 1;
			n++;
		}
		close(fd);
	}
	return n;
}

int layout_plan(struct layout_plan *p, struct bpf_object *obj, const char *pin_dir,
		const char *const *grow, char *err, size_t errlen)
{
	const struct layout_migration *mig = NULL;
	struct layout_rec rec;
	struct bpf_map *map;
	int have_rec, any_pin = 0;
	const char *name;
	char msg[600], added[256];

	memset(p, 0, sizeof(*p));
	p->version = THIS_LAYOUT;
	bpf_object__for_each_map(map, obj) {
		if (!bpf_map__pin_path(map))
			continue; /* per-packet scratch, never pinned */
		if (p->n == SLUICE_LAYOUT_ALL_MAPS) {
			snprintf(err, errlen, "more pinned maps than the layout record holds (%d)",
				 SLUICE_LAYOUT_ALL_MAPS);
			return -E2BIG;
		}
		p->slot[p->n++] = (struct layout_slot){ .map = map, .old_fd = -1 };
		if (access(bpf_map__pin_path(map), F_OK) == 0)
			any_pin = 1;
	}
	have_rec = read_record(pin_dir, &rec) == 0;
	if (!have_rec && !any_pin) {
		p->action = LAYOUT_FRESH;
		snprintf(p->note, sizeof(p->note), "created the maps under %s, layout %u", pin_dir,
			 p->version);
		return 0;
	}
	p->pinned = have_rec ? rec.main.version : 1; /* pins from before the record existed */
	if (have_rec && rec.main.migrating_from) {
		snprintf(msg, sizeof(msg), "pinned maps under %s are half-way through a migration "
			 "from layout %u to %u that was interrupted", pin_dir, rec.main.migrating_from,
			 rec.main.version);
		refuse(err, errlen, pin_dir, msg);
		return -EPROTO;
	}
	if (p->pinned == p->version && mark_grown(p, pin_dir, grow)) {
		/* Same layout, more room: the smaller maps are carried into bigger fresh ones,
		 * exactly as a migration carries them. */
		p->action = LAYOUT_MIGRATE;
		if (check_pins(p, obj, pin_dir, have_rec ? &rec : NULL, err, errlen))
			return -EPROTO;
		for (int i = 0; i < p->n; i++)
			if (p->slot[i].copy)
				bpf_map__set_pin_path(p->slot[i].map, NULL);
		snprintf(p->note, sizeof(p->note), "grew the maps under %s to %u service slots, "
			 "layout %u", pin_dir,
			 bpf_map__max_entries(bpf_object__find_map_by_name(obj, "services")),
			 p->version);
		return 0;
	}
	if (p->pinned == p->version) {
		p->action = LAYOUT_ADOPT;
		snprintf(p->note, sizeof(p->note), "adopted the maps under %s, layout %u", pin_dir,
			 p->version);
		return check_pins(p, obj, pin_dir, have_rec ? &rec : NULL, err, errlen);
	}
	for (size_t i = 0; p->pinned < p->version && migrations[i].from; i++)
		if (migrations[i].from == p->pinned)
			mig = &migrations[i];
	if (!mig) {
		snprintf(msg, sizeof(msg), "pinned maps under %s have layout %u, this sluiced "
			 "understands %u and cannot migrate %u", pin_dir, p->pinned, p->version,
			 p->pinned);
		refuse(err, errlen, pin_dir, msg);
		return -EPROTO;
	}
	/* A map the found layout never had is already pinned: the pins are not what the record
	 * (or its absence) says, and converting them would misread every value. */
	if ((name = pinned_fresh(p, mig))) {
		snprintf(msg, sizeof(msg), "pinned maps under %s say layout %u, but map %s, which "
			 "layout %u never had, is pinned: cannot tell which layout the pins are",
			 pin_dir, p->pinned, name, p->pinned);
		refuse(err, errlen, pin_dir, msg);
		return -EPROTO;
	}
	p->action = LAYOUT_MIGRATE;
	for (int i = 0; i < p->n; i++) {
		const char *name = bpf_map__name(p->slot[i].map);

		p->slot[i].convert = layout_converter(p->pinned, name);
		p->slot[i].rekey = layout_rekeyer(p->pinned, name);
		if (access(bpf_map__pin_path(p->slot[i].map), F_OK) != 0)
			p->slot[i].rekey = NULL; /* not pinned: created empty */
		p->slot[i].copy = strcmp(name, LAYOUT_MAP) != 0 &&
				  (mig->copy_all || in_list(mig->copy, name) || p->slot[i].convert ||
				   p->slot[i].rekey);
		p->slot[i].renew = (mig->from < LAYOUT_V7 && in_list(renewed_in_v7, name)) ||
				   (mig->from < LAYOUT_V8 && in_list(renewed_in_v8, name)) ||
				   (mig->from == LAYOUT_V10 && in_list(renewed_in_v11, name));
		p->slot[i].copy |= p->slot[i].renew;
	}
	if (check_pins(p, obj, pin_dir, have_rec ? &rec : NULL, err, errlen))
		return -EPROTO;
	for (int i = 0; i < p->n; i++)
		if (p->slot[i].copy)
			bpf_map__set_pin_path(p->slot[i].map, NULL); /* load creates it fresh */
	added_note(mig, added, sizeof(added));
	snprintf(p->note, sizeof(p->note), "migrated the maps under %s from layout %u to %u "
		 "(%s%s%s%s%s)", pin_dir, p->pinned, p->version, mig->what, added,
		 mig->from < LAYOUT_V7 ? "; class_stats regrouped by service, its counters start "
		 "from zero" : "",
		 mig->from < LAYOUT_V8 ? "; latency_hist split by class, the histograms start "
		 "from zero" : "",
		 mig->from == LAYOUT_V10 ? "; flow_hash_key and handshake_slots replaced by empty "
		 "ones (a new hash: handshakes pending now are taken on at their first data)" : "");
	return 0;
}

/* ---- carrying a map over: a snapshot of the old map, copied into the fresh one before the
 * programs are swapped, then a three-way merge of what the old programs changed meanwhile */

struct snapshot {
	__u32 type, ksz, vsz;       /* vsz: the whole per-CPU value for per-CPU maps */
	size_t n, cap;
	char *keys, *vals;
};

static int is_array(__u32 type)
{
	return type == BPF_MAP_TYPE_ARRAY || type == BPF_MAP_TYPE_PERCPU_ARRAY;
}

static int is_percpu(__u32 type)
{
	return type == BPF_MAP_TYPE_PERCPU_ARRAY || type == BPF_MAP_TYPE_PERCPU_HASH ||
	       type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

static void snap_free(struct snapshot *s)
{
	if (s) {
		free(s->keys);
		free(s->vals);
		free(s);
	}
}

static int snap_push(struct snapshot *s, const void *k, const void *v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		char *nk = realloc(s->keys, cap * s->ksz), *nv;

		if (!nk)
			return -ENOMEM;
		s->keys = nk;
		nv = realloc(s->vals, cap * s->vsz);
		if (!nv)
			return -ENOMEM;
		s->vals = nv;
		s->cap = cap;
	}
	memcpy(s->keys + s->n * s->ksz, k, s->ksz);
	memcpy(s->vals + s->n * s->vsz, v, s->vsz);
	s->n++;
	return 0;
}

static __u32 sort_ksz;
static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sort_ksz);
}

/* Every entry of the map behind fd; hash-type keys sorted (with their values) for lookup. */
static struct snapshot *snap_read(int fd)
{
	struct bpf_map_info info;
	__u32 ilen = sizeof(info);
	struct snapshot *s = calloc(1, sizeof(*s));
	char *k = NULL, *next = NULL, *v = NULL;
	int rc = 0;

	memset(&info, 0, sizeof(info));
	if (!s || bpf_obj_get_info_by_fd(fd, &info, &ilen))
		goto fail;
	s->type = info.type;
	s->ksz = info.key_size;
	s->vsz = is_percpu(info.type) ? ((info.value_size + 7) & ~7u) * libbpf_num_possible_cpus()
				      : info.value_size;
	k = calloc(1, s->ksz);
	next = calloc(1, s->ksz);
	v = calloc(1, s->vsz);
	if (!k || !next || !v)
		goto fail;
	if (is_array(info.type)) {
		for (__u32 i = 0; i < info.max_entries && !rc; i++)
			if (bpf_map_lookup_elem(fd, &i, v) == 0)
				rc = snap_push(s, &i, v);
	} else {
		void *prev = NULL;

		while (!rc && bpf_map_get_next_key(fd, prev, next) == 0) {
			memcpy(k, next, s->ksz);
			prev = k;
			if (bpf_map_lookup_elem(fd, k, v) == 0)
				rc = snap_push(s, k, v);
		}
		/* Sort an index, then the entries by it. */
		if (!rc && s->n > 1) {
			size_t rec = s->ksz + s->vsz;
			char *tmp = malloc(s->n * rec);

			if (!tmp)
				goto fail;
			for (size_t i = 0; i < s->n; i++) {
				memcpy(tmp + i * rec, s->keys + i * s->ksz, s->ksz);
				memcpy(tmp + i * rec + s->ksz, s->vals + i * s->vsz, s->vsz);
			}
			sort_ksz = s->ksz;
			qsort(tmp, s->n, rec, key_cmp);
			for (size_t i = 0; i < s->n; i++) {
				memcpy(s->keys + i * s->ksz, tmp + i * rec, s->ksz);
				memcpy(s->vals + i * s->vsz, tmp + i * rec + s->ksz, s->vsz);
			}
			free(tmp);
		}
	}
	free(k);
	free(next);
	free(v);
	if (rc)
		goto fail_s;
	return s;
fail:
	free(k);
	free(next);
	free(v);
fail_s:
	snap_free(s);
	return NULL;
}

/* Every value of the snapshot rewritten by the slot's converter (each CPU's copy of a per-CPU
 * value): the merge below then compares and writes values of this build's meaning only. */
static void snap_convert(struct snapshot *s, const struct layout_slot *slot)
{
	size_t one = is_percpu(s->type) ? (bpf_map__value_size(slot->map) + 7) & ~7u : s->vsz;

	for (size_t j = 0; slot->convert && j < s->n; j++)
		for (size_t o = 0; o + one <= s->vsz; o += one)
			slot->convert(s->vals + j * s->vsz + o);
}

/* The value stored under key in the snapshot, or NULL. */
static const char *snap_find(const struct snapshot *s, const void *key)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = memcmp(s->keys + mid * s->ksz, key, s->ksz);

		if (c == 0)
			return s->vals + mid * s->vsz;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static struct layout_slot *slot_named(struct layout_plan *p, const char *name)
{
	for (int i = 0; i < p->n; i++)
		if (strcmp(bpf_map__name(p->slot[i].map), name) == 0)
			return &p->slot[i];
	return NULL;
}

/* A map whose key grew: the base's entries under this build's keys, once (the late merge
 * finds each under the same key again). */
static int rekey_base(struct layout_plan *p, struct layout_slot *s)
{
	const struct snapshot *b = s->base;
	size_t nksz = bpf_map__key_size(s->map);

	s->rekeyed = calloc(b->n ? b->n : 1, nksz);
	s->kept = calloc(b->n ? b->n : 1, 1);
	if (!s->rekeyed || !s->kept)
		return -ENOMEM;
	for (size_t j = 0; j < b->n; j++)
		s->kept[j] = (unsigned char)s->rekey(p, b->keys + j * b->ksz, b->vals + j * b->vsz,
						      s->rekeyed + j * nksz);
	return 0;
}

/* The key of the base's entry j in the fresh map. */
static const void *fresh_key(const struct layout_slot *s, const struct snapshot *b, size_t j)
{
	return s->rekey ? s->rekeyed + j * bpf_map__key_size(s->map) : b->keys + j * b->ksz;
}

/* The key in the fresh map of an entry of the old one (k, value v; found in the base at bv,
 * or new since): NULL when it is left behind. buf holds a key made now. */
static const void *late_key(struct layout_plan *p, const struct layout_slot *s,
			    const struct snapshot *b, const char *k, const char *v, const char *bv,
			    void *buf)
{
	size_t j = bv ? (size_t)(bv - b->vals) / b->vsz : 0;

	if (!s->rekey)
		return k;
	if (bv)
		return s->kept[j] ? fresh_key(s, b, j) : NULL;
	return s->rekey(p, k, v, buf) ? buf : NULL;
}

int layout_copy(struct layout_plan *p, char *err, size_t errlen)
{
	for (int i = 0; p->action == LAYOUT_MIGRATE && i < p->n; i++) {
		struct layout_slot *s = &p->slot[i];
		struct snapshot *b;
		int fd = bpf_map__fd(s->map);

		if (s->old_fd < 0)
			continue;
		b = snap_read(s->old_fd);
		if (!b) {
			snprintf(err, errlen, "cannot read the pinned map %s to migrate it",
				 bpf_map__name(s->map));
			return -EIO;
		}
		snap_convert(b, s);
		s->base = b;
		if (s->rekey && rekey_base(p, s)) {
			snprintf(err, errlen, "out of memory migrating map %s", bpf_map__name(s->map));
			return -ENOMEM;
		}
		for (size_t j = 0; j < b->n; j++)
			if ((!s->rekey || s->kept[j]) &&
			    bpf_map_update_elem(fd, fresh_key(s, b, j), b->vals + j * b->vsz,
						BPF_ANY) == 0)
				s->carried++;
	}
	return 0;
}

/* Counters (per-CPU arrays): the new map counts from the swap on, so add what the old
 * programs counted since the first copy. In-flight (`inflight`) and busy (`busy`) are shared
 * with the running programs' atomics, so their late changes are booked in `inflight_released`
 * and `busy_released`, which only the controller writes: effective in-flight = inflight -
 * released (and busy alike) stays exact. Everything else:
 * a change the old programs made after the first copy is carried over unless the new programs
 * changed the entry too (they saw the later packet). */
static int merge_late_changes(struct layout_plan *p, struct layout_slot *s)
{
	const struct snapshot *b = s->base;
	struct snapshot *f = snap_read(s->old_fd);
	const char *name = bpf_map__name(s->map);
	struct layout_slot *rel = !strcmp(name, "inflight") ? slot_named(p, "inflight_released")
				  : !strcmp(name, "busy") ? slot_named(p, "busy_released") : NULL;
	int fd = bpf_map__fd(s->map), rc = 0;
	char *cur = f ? malloc(f->vsz) : NULL, *nbuf = malloc(bpf_map__key_size(s->map));
	const void *nk;

	if (!f || !cur || !nbuf) {
		rc = -ENOMEM;
		goto out;
	}
	snap_convert(f, s);
	for (size_t j = 0; j < f->n; j++) {
		const char *k = f->keys + j * f->ksz, *fv = f->vals + j * f->vsz;
		const char *bv = is_array(f->type) ? (j < b->n ? b->vals + j * b->vsz : NULL)
						   : snap_find(b, k);

		if (bv && memcmp(bv, fv, f->vsz) == 0)
			continue;
		nk = late_key(p, s, b, k, fv, bv, nbuf);
		if (!nk)
			continue; /* left behind (a map whose key grew) */
		if (bv && f->type == BPF_MAP_TYPE_PERCPU_ARRAY) {
			__u64 *c = (__u64 *)cur;
			const __u64 *o = (const __u64 *)fv, *ob = (const __u64 *)bv;

			if (bpf_map_lookup_elem(fd, k, cur) == 0) {
				for (size_t w = 0; w < f->vsz / 8; w++)
					c[w] += o[w] - ob[w];
				bpf_map_update_elem(fd, k, cur, BPF_ANY);
			}
		} else if (bv && rel) {
			struct sluice_inflight r;
			const struct sluice_inflight *o = (const void *)fv, *ob = (const void *)bv;

			if (bpf_map_lookup_elem(bpf_map__fd(rel->map), k, &r) == 0) {
				r.total -= o->total - ob->total;
				for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
					r.cls[c] -= o->cls[c] - ob->cls[c];
				bpf_map_update_elem(bpf_map__fd(rel->map), k, &r, BPF_ANY);
			}
		} else if (!bv) {
			if (bpf_map_update_elem(fd, nk, fv, BPF_NOEXIST) == 0)
				s->carried++;
		} else if (bpf_map_lookup_elem(fd, nk, cur) == 0 && memcmp(cur, bv, f->vsz) == 0) {
			bpf_map_update_elem(fd, nk, fv, BPF_EXIST);
		}
	}
	/* Entries the old programs deleted after the first copy (a unit ended): delete them
	 * here too, unless the new programs have changed them since. */
	for (size_t j = 0; !is_array(f->type) && j < b->n; j++) {
		const char *k = b->keys + j * b->ksz, *bv = b->vals + j * b->vsz;

		if (snap_find(f, k) || (s->rekey && !s->kept[j]))
			continue;
		nk = fresh_key(s, b, j);
		if (bpf_map_lookup_elem(fd, nk, cur) == 0 && memcmp(cur, bv, b->vsz) == 0 &&
		    bpf_map_delete_elem(fd, nk) == 0)
			s->carried--;
	}
out:
	free(nbuf);
	free(cur);
	snap_free(f);
	return rc;
}

/* The first SLUICE_LAYOUT_MAX_MAPS maps go into `sluice_layout`, the rest into its
 * continuation, which is written first: `sluice_layout`'s version is what a reader goes by. */
static int write_record(struct layout_plan *p, const struct bpf_object *obj, __u32 migrating_from)
{
	static struct sluice_layout rec;
	static struct sluice_layout_ext ext;
	struct layout_slot *self = slot_named(p, LAYOUT_MAP), *more = slot_named(p, LAYOUT_EXT_MAP);
	__u32 k = 0;

	if (!self || (p->n > SLUICE_LAYOUT_MAX_MAPS && !more))
		return -ENOENT;
	memset(&rec, 0, sizeof(rec));
	memset(&ext, 0, sizeof(ext));
	rec.version = ext.version = p->version;
	rec.migrating_from = migrating_from;
	for (int i = 0; i < p->n; i++) {
		const struct bpf_map *m = p->slot[i].map;
		struct sluice_layout_map *e = i < SLUICE_LAYOUT_MAX_MAPS ? &rec.map[rec.n_maps++]
									: &ext.map[ext.n_maps++];

		snprintf(e->name, sizeof(e->name), "%s", bpf_map__name(m));
		e->type = bpf_map__type(m);
		e->key_size = bpf_map__key_size(m);
		e->value_size = bpf_map__value_size(m);
		e->max_entries = bpf_map__max_entries(m);
		e->btf_hash = layout_btf_hash(obj, m);
	}
	if (more && bpf_map_update_elem(bpf_map__fd(more->map), &k, &ext, BPF_ANY))
		return -errno;
	return bpf_map_update_elem(bpf_map__fd(self->map), &k, &rec, BPF_ANY) ? -errno : 0;
}

/* The fresh map takes over the pin name: pinned beside it, then renamed over it. */
static int repin(const struct layout_slot *s, const char *pin_dir)
{
	char path[512], tmp[540];

	snprintf(path, sizeof(path), "%s/%s", pin_dir, bpf_map__name(s->map));
	snprintf(tmp, sizeof(tmp), "%s__migrating", path); /* bpffs names take no dot */
	unlink(tmp);
	if (bpf_obj_pin(bpf_map__fd(s->map), tmp) || rename(tmp, path)) {
		int e = errno;

		unlink(tmp);
		return -e;
	}
	return 0;
}

int layout_commit(struct layout_plan *p, struct bpf_object *obj, const char *pin_dir,
		  char *err, size_t errlen)
{
	size_t used = strlen(p->note);
	int rc, n_copied = 0;

	if (p->action != LAYOUT_MIGRATE)
		goto record;
	/* Let program runs that started before the swap finish on the old maps. */
	usleep(50 * 1000);
	layout_rekey_again(p); /* connections made since the copy */
	for (int i = 0; i < p->n; i++) {
		struct layout_slot *s = &p->slot[i];

		if (s->old_fd < 0 || !s->base)
			continue;
		if (merge_late_changes(p, s)) {
			snprintf(err, errlen, "migrating map %s failed; the new programs run on "
				 "unpinned maps: run `sluicectl detach`", bpf_map__name(s->map));
			return -EIO;
		}
	}
	rc = write_record(p, obj, p->pinned);
	for (int i = 0; !rc && i < p->n; i++) {
		struct layout_slot *s = &p->slot[i];

		if (!s->copy)
			continue;
		rc = repin(s, pin_dir);
		if (rc) {
			snprintf(err, errlen, "cannot pin the migrated map %s under %s: %s; run "
				 "`sluicectl detach`", bpf_map__name(s->map), pin_dir, strerror(-rc));
			return rc;
		}
		n_copied++;
		if (!is_array(bpf_map__type(s->map)) && used < sizeof(p->note))
			used += snprintf(p->note + used, sizeof(p->note) - used, "; %s: %ld entries",
					 bpf_map__name(s->map), s->carried);
	}
	if (!rc && used < sizeof(p->note))
		used += snprintf(p->note + used, sizeof(p->note) - used, "; %d maps copied, %d adopted",
				 n_copied, p->n - n_copied);
	if (!rc && used < sizeof(p->note))
		layout_rekey_note(p, p->note + used, sizeof(p->note) - used);
record:
	rc = write_record(p, obj, 0);
	if (rc)
		snprintf(err, errlen, "cannot write the layout record under %s: %s", pin_dir,
			 strerror(-rc));
	return rc;
}

void layout_plan_release(struct layout_plan *p)
{
	for (int i = 0; i < p->n; i++) {
		if (p->slot[i].old_fd >= 0)
			close(p->slot[i].old_fd);
		p->slot[i].old_fd = -1;
		snap_free(p->slot[i].base);
		p->slot[i].base = NULL;
		free(p->slot[i].rekeyed);
		free(p->slot[i].kept);
		p->slot[i].rekeyed = NULL;
		p->slot[i].kept = NULL;
	}
	layout_rekey_release(p);
}
