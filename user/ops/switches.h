/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: manual degradation switches.
 *
 * A switch sheds a percentage of one class of one service. Every switch has a reason, an owner
 * and an expiry; there are no permanent switches. The set lives in a JSON state file
 * (default STATE_DIR/switches.json), rewritten atomically (temp file + fsync + rename + fsync of
 * the directory). The default is ALWAYS "normal": a missing file is an empty set, and an empty,
 * unreadable or corrupt file is ALSO an empty set, reported with a loud error (a bad read, such
 * as an empty config pushed by mistake, must never land in a degraded state).
 *
 * Time: uint64_t seconds since the Unix epoch (UTC), passed in as `now` (see duration.h).
 * No global state; every function works on the caller's struct sw_set.
 *
 * File format (version 1; every field required, no other keys accepted):
 *   {
 *     "version": 1,
 *     "switches": [
 *       {"service": "web", "class": "L3", "shed_pct": 100, "reason": "INC-42 payment slow",
 *        "owner": "alice", "set_at": 1714564800, "expires_at": 1714568400,
 *        "kind": "ops", "runbook": "https://wiki/rb/web-shed", "renewals": 0}
 *     ]
 *   }
 * The last three are the ledger fields of a flag register: what kind of switch it is (ops: an
 * incident lever; release: guards a rollout; experiment: a trial), where its runbook is, and
 * how often its expiry was pushed back. They are optional when read (a file written before
 * they existed, or edited by hand, means kind "ops", no runbook, 0 renewals) and always
 * written.
 * Loading refuses the WHOLE file (-> empty set + error) on: bad JSON, wrong version, unknown or
 * missing keys, class not L0..L3, shed_pct outside 0..100, empty reason, empty service,
 * expires_at <= set_at, expires_at after SW_MAX_TIME, two switches for the same service/class,
 * more than SW_MAX switches.
 * Loading does not drop expired switches: call sw_set_expire(now) for that. */
#ifndef SLUICE_SWITCHES_H
#define SLUICE_SWITCHES_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "sluice.h"

#define SW_MAX          256   /* switches in force at once (not tied to the service count) */
#define SW_REASON_LEN   256
#define SW_OWNER_LEN    64
#define SW_MAX_TTL_S    (30ull * 86400ull)   /* a switch lives at most 30 days; renew to extend */
#define SW_FILE_NAME    "switches.json"
#define SW_FILE_VERSION 1
#define SW_RUNBOOK_LEN  256
#define SW_DEFAULT_MAX_RENEWALS 3    /* `switch renew` beyond this is refused: set it anew */
/* The latest set_at / expires_at a switch may have: 9999-12-31T23:59:59Z, the last second the
 * ISO 8601 times of the audit log can write (a later one makes records `switch log` cannot
 * read). It also catches a time written in milliseconds by hand. */
#define SW_MAX_TIME             253402300799ull

/* The kind of a switch (ledger field). */
enum sw_kind { SW_KIND_OPS = 0, SW_KIND_RELEASE, SW_KIND_EXPERIMENT };

struct sw_switch {
	char service[SLUICE_NAME_LEN];
	int class;                       /* 0..3 (SLUICE_L0..SLUICE_L3) */
	int shed_pct;                    /* 0..100: share of the class's new units rejected */
	char reason[SW_REASON_LEN];      /* required, non-empty */
	char owner[SW_OWNER_LEN];        /* who set it (defaults to the calling user in the CLI) */
	uint64_t set_at;                 /* seconds since epoch */
	uint64_t expires_at;             /* seconds since epoch; > set_at */
	int kind;                        /* enum sw_kind */
	char runbook[SW_RUNBOOK_LEN];    /* link or path; "" = none */
	int renewals;                    /* how often `switch renew` pushed the expiry back */
};

struct sw_set {
	int n;
	struct sw_switch sw[SW_MAX];     /* kept sorted by (service, class) */
};

/* "L0".."L3" -> 0..3; anything else (incl. lower case) -> -1. */
int sw_class_parse(const char *s);
/* 0..3 -> "L0".."L3", else "L?". */
const char *sw_class_str(int cls);

/* "ops" / "release" / "experiment" <-> enum sw_kind; parse: -1 for anything else. */
int sw_kind_parse(const char *s);
const char *sw_kind_str(int kind);
/* Set the ledger fields from CLI strings (NULL: keep the default "ops" / no runbook).
 * 0, or -1 with a message naming "--kind" or "--runbook". */
int sw_set_ledger(struct sw_switch *sw, const char *kind, const char *runbook, char *err,
		  size_t errlen);
/* Push the expiry of an active switch back: expires_at = now + ttl (duration_parse() syntax,
 * at most SW_MAX_TTL_S), renewals + 1. Refused (-1 with err) when the switch has expired, or
 * was renewed max_renewals times already. */
int sw_renew(struct sw_switch *sw, const char *ttl, int max_renewals, uint64_t now, char *err,
	     size_t errlen);

/* NULL when s may be a reason, owner or runbook (no control characters, valid UTF-8), else
 * what is wrong with it ("is not valid UTF-8"). */
const char *sw_text_problem(const char *s);
/* The same for text a new change brings (a request, a command line): also no C1 control, no
 * line or paragraph separator and no bidirectional override or isolate. A switch file keeps
 * being read by sw_text_problem's rules, so one that held such text still loads. */
const char *sw_new_text_problem(const char *s);

/* Validate a service name against the configured ones (known == NULL or n_known < 0: any
 * non-empty name up to SLUICE_NAME_LEN-1 characters) and a class name. Returns 0 and *cls, or
 * -1 with a message naming the bad field and, for services, listing the known ones. */
int sw_check_target(const char *service, const char *class_name,
		    const char *const *known, int n_known, int *cls, char *err, size_t errlen);

/* Build and validate a switch from CLI strings (`switch set SERVICE CLASS --shed PCT --reason
 * TEXT --ttl DUR [--owner NAME]`). shed: integer 0..100, an optional trailing '%' allowed.
 * ttl: duration_parse() syntax, at most SW_MAX_TTL_S. reason: non-empty, not only blanks, no
 * control characters, < SW_REASON_LEN bytes. owner: non-empty, < SW_OWNER_LEN bytes.
 * set_at = now, expires_at = now + ttl. Returns 0, or -1 with a message naming the field
 * ("--shed", "--ttl", "--reason", "--owner", "service", "class") in err. */
int sw_make(struct sw_switch *out, const char *service, const char *class_name,
	    const char *shed, const char *reason, const char *ttl, const char *owner,
	    uint64_t now, const char *const *known, int n_known, char *err, size_t errlen);

/* Field-level validation of an already built switch (used by sw_make and by the loader). */
int sw_validate(const struct sw_switch *sw, char *err, size_t errlen);

void sw_set_init(struct sw_set *s);
/* 1 when every field of a and b is the same (either NULL: only when both are). */
int sw_equal(const struct sw_switch *a, const struct sw_switch *b);
/* The switch for (service, class), or NULL. Does not look at expiry. */
const struct sw_switch *sw_set_find(const struct sw_set *s, const char *service, int cls);
/* Insert, or replace the switch with the same service/class. If one was replaced and old is
 * non-NULL, *old receives it and 1 is returned; 0 when it was new; -1 when the set is full or
 * sw is invalid. */
int sw_set_put(struct sw_set *s, const struct sw_switch *sw, struct sw_switch *old);
/* Remove the switch for (service, class). 1 and *old (if non-NULL) when removed, 0 if none. */
int sw_set_clear(struct sw_set *s, const char *service, int cls, struct sw_switch *old);
/* Remove every switch with expires_at <= now. Up to max of them are copied to expired[] (in set
 * order) so the caller can emit an event / audit record for each. Returns how many were removed
 * (may exceed max; expired may be NULL with max 0). */
int sw_set_expire(struct sw_set *s, uint64_t now, struct sw_switch *expired, int max);

/* Shed ratio for (service, class) in fixed point: 0 = shed nothing, SLUICE_PROB_ONE = shed all.
 * No switch or an expired one (expires_at <= now) -> 0. Rounded to nearest:
 * shed_pct * SLUICE_PROB_ONE / 100. */
uint32_t sw_shed_ratio(const struct sw_set *s, const char *service, int cls, uint64_t now);
/* SLUICE_PROB_ONE - sw_shed_ratio(): the value for sluice_verdict.switch_admit[cls]. */
uint32_t sw_admit_ratio(const struct sw_set *s, const char *service, int cls, uint64_t now);

/* Load the state file. Missing file: empty set, returns 0, err = "". Empty or corrupt file
 * (or not a regular file, or too large): empty set ("normal"), returns -1. A file that could
 * not be read (open, stat or read failed, or memory ran out: often for the moment only):
 * empty set, returns SW_LOAD_UNREADABLE; it is NOT damaged, and must not be moved aside or
 * written over from what this load left. In both cases err holds a loud one-line message
 * starting with "ERROR: switch file PATH ..." and ending with "... NO switches are in force". */
#define SW_LOAD_UNREADABLE (-2)
int sw_load(const char *path, struct sw_set *out, char *err, size_t errlen);
/* sw_load(), and into *seen the fstat() of the very file it read: what is at PATH a moment
 * later may be another one, renamed in by an operator meanwhile. seen->st_mode is 0 when no
 * file was opened (missing, or open() failed). */
struct stat;
int sw_load_seen(const char *path, struct sw_set *out, struct stat *seen, char *err,
		 size_t errlen);
/* Tests only (NULL in the programs): called by sw_load() once the file is read, before it is
 * parsed, so a test can rename another file in at that moment as an operator's `mv` could. */
extern void (*sw_after_read_hook)(const char *path);
/* Parse file contents (used by sw_load; `name` appears in messages). Same contract (memory
 * running out while parsing is SW_LOAD_UNREADABLE, not damage). */
int sw_parse(const char *text, size_t len, const char *name, struct sw_set *out,
	     char *err, size_t errlen);
/* One switch as the JSON object of the file format above (json_decref() it; NULL: out of
 * memory). `switch ls --json` adds its own keys to it. */
json_t *sw_switch_json(const struct sw_switch *sw);
/* Serialise to JSON (the file format above, indented by two spaces). Caller frees *out.
 * 0 / -1. */
int sw_serialize(const struct sw_set *s, char **out, size_t *outlen);
/* Write atomically: PATH.tmp.PID, fsync, rename over PATH, fsync the directory. Mode 0644.
 * 0, or -1 with err (the old file is untouched on failure). */
int sw_save(const char *path, const struct sw_set *s, char *err, size_t errlen);
/* sw_save(), and into *written the fstat() of the file it renamed to PATH (st_mode 0 when
 * none was, or fstat() failed). read (NULL: not looked at): what the caller read at PATH (see
 * sw_load_seen); when PATH is no longer that file, unchanged, just before the rename (an
 * operator renamed or wrote another in), nothing is written and SW_SAVE_REPLACED returned
 * with err: read it again and build on that. */
#define SW_SAVE_REPLACED (-2)
int sw_save_seen(const char *path, const struct sw_set *s, const struct stat *read,
		 struct stat *written, char *err, size_t errlen);
/* Tests only (NULL in the programs): called by sw_save() once the file is renamed to PATH. */
extern void (*sw_after_save_hook)(const char *path);

/* Keep a damaged switch file for the post-mortem before a writer overwrites it: rename PATH to
 * PATH.corrupt.<now> (seconds; PATH.corrupt.<now>.N when that name is taken, so an earlier copy is
 * never replaced). Call it when sw_load() returned -1 and the file exists, before
 * sw_save(). Writes the new name into saved_as (may be NULL). 0, or -1 with err. */
int sw_quarantine(const char *path, uint64_t now, char *saved_as, size_t saved_len,
		  char *err, size_t errlen);
/* rename(from, to), but never over a file at `to`: -1 with errno EEXIST then. */
int sw_rename_noreplace(const char *from, const char *to);

/* Serialise concurrent writers (CLI vs daemon expiring): exclusive flock on PATH.lock (created
 * 0644). Returns the fd to pass to sw_unlock(), or -1 with err. Readers need no lock. */
int sw_lock(const char *path, char *err, size_t errlen);
void sw_unlock(int fd);

#endif
