/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The layout version of the pinned maps: what a starting sluiced does with pins it finds.
 *   none                 create the maps, record this layout
 *   same version         adopt them (after checking each pinned map against this build)
 *   older, migratable    carry them over: maps whose layout is unchanged are adopted in place,
 *                        the others are created fresh, filled from the pinned ones (each
 *                        value through a converter where its meaning changed), and take
 *                        over the pin names once the programs are swapped; maps new in
 *                        this layout are created empty
 *   anything else        refuse, change nothing, and say what to do
 * Order of calls (attach.c): layout_plan after opening the object, layout_copy after loading
 * it, layout_commit after the programs are swapped in. */
#ifndef SLUICE_LAYOUT_H
#define SLUICE_LAYOUT_H

#include <stddef.h>
#include "sluice.h"

struct bpf_object;
struct bpf_map;

enum layout_action { LAYOUT_FRESH, LAYOUT_ADOPT, LAYOUT_MIGRATE };

/* Rewrites one value of a map from an older layout's meaning into this build's, in place. */
typedef void (*layout_convert_fn)(void *value);

/* A map whose key grew (layout 7: flow keys carry the local address, layout_v7.c): writes
 * this build's key of an older entry (old_key, value) to new_key; 0 leaves the entry behind. */
struct layout_plan;
typedef int (*layout_rekey_fn)(struct layout_plan *p, const void *old_key, const void *value,
			       void *new_key);

struct layout_slot {
	struct bpf_map *map;
	int copy;                   /* migrated: created fresh and filled from the pin */
	int renew;                  /* migrated: created fresh, the pin replaced unread */
	layout_convert_fn convert;  /* for a copied map whose values changed meaning, else NULL */
	int old_fd;                 /* the pinned map being carried over, -1 otherwise */
	void *base;                 /* what the first copy carried over (a snapshot) */
	long carried;               /* entries carried over */
	layout_rekey_fn rekey;      /* for a copied map whose key grew, else NULL */
	char *rekeyed;              /* the base's entries under their new keys */
	unsigned char *kept;        /* ... and whether each was carried */
};

struct layout_plan {
	enum layout_action action;
	__u32 version;              /* the layout this build writes */
	__u32 pinned;               /* the layout found: 0 none, 1 pins without a record */
	int n;
	struct layout_slot slot[SLUICE_LAYOUT_ALL_MAPS];
	char note[1024];            /* what was done, one line for the log */
	struct layout_rekey_state *rekey_state;   /* layout_v7.c */
};

/* The layout this build writes. */
__u32 layout_version(void);

/* The layout the pins under pin_dir record (*version), for readers that only look at the maps
 * (sluicectl): 0 when read, -ENOENT when there is no record (pins of layout 1, or none). */
int layout_pinned_version(const char *pin_dir, __u32 *version);

/* Read the pins under pin_dir and decide; obj is opened, not loaded. For a migration, the maps
 * to carry over are unpinned in obj so that loading creates them fresh. `grow` (NULL-ended
 * names, or NULL) lists the maps whose pins may be smaller than the object's max_entries:
 * pins of this layout that are smaller are carried into bigger maps the same way. Returns 0,
 * or -EPROTO with the reason and what to do in err (nothing has been changed). */
int layout_plan(struct layout_plan *p, struct bpf_object *obj, const char *pin_dir,
		const char *const *grow, char *err, size_t errlen);

/* After loading: fill the fresh maps from the pinned ones (the old programs still run). */
int layout_copy(struct layout_plan *p, char *err, size_t errlen);

/* After the new programs are attached: carry over what the old programs changed meanwhile,
 * move the pin names to the fresh maps, and write the layout record. */
int layout_commit(struct layout_plan *p, struct bpf_object *obj, const char *pin_dir,
		  char *err, size_t errlen);

void layout_plan_release(struct layout_plan *p);

/* The converter of map `map` when migrating from layout `from`, or NULL (copied as is or
 * adopted). The two converters from layouts 1 and 2: */
layout_convert_fn layout_converter(__u32 from, const char *map);
void layout_verdict_from_v2(void *value);   /* admit fractions -> shed fractions, shut flags */
void layout_flow_from_v2(void *value);      /* client_next, flags 0: not known */

/* Layout 7 (layout_v7.c): the rekeying of map `map` when migrating from layout `from`, or
 * NULL; the older layouts' flow key size; the socket table read again (for the late changes);
 * what was done, for the note; the state freed. */
layout_rekey_fn layout_rekeyer(__u32 from, const char *map);
__u32 layout_rekey_old_size(void);
void layout_rekey_again(struct layout_plan *p);
void layout_rekey_note(const struct layout_plan *p, char *buf, size_t len);
void layout_rekey_release(struct layout_plan *p);

/* Hash of a map's key and value types in the object's BTF (0 when it has none): member names,
 * offsets, sizes, array lengths and integer encodings; typedefs and qualifiers are looked
 * through. layout_btf_type_hash is the same for one type of any BTF. */
struct btf;
__u64 layout_btf_hash(const struct bpf_object *obj, const struct bpf_map *map);
__u64 layout_btf_type_hash(const struct btf *btf, __u32 type_id);

#endif
