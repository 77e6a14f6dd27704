/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: the daemon's side of the manual switches (see switches.h, audit.h and
 * docs/OPERATIONS.md "Manual switches"), plus small helpers shared with sluicectl.
 *
 * sluiced keeps one struct switch_state and calls switch_state_poll() every tick (it is cheap:
 * one stat() when nothing changed). The poll
 *   - reloads STATE_DIR/switches.json when its identity changed (inode, size, mtime, ctime);
 *     a missing file is the empty set; an empty/unreadable/corrupt file is ALSO the empty set
 *     ("normal": a bad read never degrades) and the poll that noticed it returns -1 with the loud message
 *     from sw_load() in err: the caller logs it (once per change of the file);
 *   - sweeps expired switches: under sw_lock() it re-reads the file (another writer may have
 *     changed it), removes every switch with expires_at <= now, saves the file once and appends
 *     one audit record per removed switch (command "expire", user "sluiced"). The removed
 *     switches are reported in st->expired[0..n_expired-1] for that poll only, so the daemon can
 *     emit a switch event for each. A switch past its expiry never sheds, even when the sweep
 *     could not write the file (sw_admit_ratio() looks at expires_at).
 *
 * Time: wall-clock seconds since the epoch, passed in (see duration.h). No global state. */
#ifndef SLUICE_SWITCHSTATE_H
#define SLUICE_SWITCHSTATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include "ops/switches.h"
#include "ops/audit.h"

#define SWST_MAX_EXPIRED   SW_MAX
#define CASCADE_CLEAR_FILE "cascade-clear"
#define SWST_ERR_LEN       512

struct switch_state {
	struct sw_set set;                 /* what is in force (may hold expired entries until swept) */
	int have_file;                     /* the file existed at the last poll */
	int corrupt;                       /* the file exists but was refused (set is empty) */
	int polled;                        /* at least one poll happened */
	dev_t dev;                         /* identity of the file last loaded */
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	uint64_t generation;               /* incremented whenever `set` changes */
	int n_expired;                     /* switches swept by the LAST poll */
	struct sw_switch expired[SWST_MAX_EXPIRED];
	char last_err[SWST_ERR_LEN];       /* message of the last failed load ("" when fine) */
};

void switch_state_init(struct switch_state *st);

/* Reload when the file changed, then sweep expired switches (see above).
 * Returns 1 when the set in force changed during this poll (reload or expiry), 0 when nothing
 * changed, -1 when the file was found damaged on this poll (err: loud message; the set is
 * empty) or when writing the expiry (file or audit log) failed (err says what; the expired
 * switches are dropped from memory anyway and still reported in expired[]). */
int switch_state_poll(struct switch_state *st, const char *state_dir, uint64_t now_wall_s,
		      char *err, size_t errlen);

/* Fixed-point admit ratio for sluice_verdict.switch_admit[cls]: SLUICE_PROB_ONE = no shed
 * (no switch, or an expired one), 0 = shed all. */
uint32_t switch_state_admit(const struct switch_state *st, const char *service, int cls,
			    uint64_t now);

/* ---- sluicectl -> sluiced: "lift the cascade suppression" ----
 * `sluicectl cascade clear` writes STATE_DIR/cascade-clear (one line: "user NAME uid N time
 * ISO8601"). The daemon calls cascade_clear_requested() each tick: when the file is present it
 * copies its first line into who (may be NULL), deletes the file and returns 1; 0 when there is
 * no request; -1 when the file exists but cannot be read or removed (who holds the reason),
 * in which case the daemon should log it and NOT act (it would act again every tick). */
int cascade_clear_requested(const char *state_dir, char *who, size_t len);
/* Write the request (atomically: temp file + rename). 0, or -1 with err. */
int cascade_clear_request(const char *state_dir, const char *user, uint32_t uid, uint64_t now,
			  char *err, size_t errlen);

/* ---- helpers shared by sluicectl and sluiced ---- */

/* STATE_DIR/NAME into buf; -1 when it does not fit. */
int state_path(char *buf, size_t len, const char *state_dir, const char *name);
/* Create the state directory (and missing parents) with mode 0755. 0, or -1 with err. */
int state_dir_ensure(const char *state_dir, char *err, size_t errlen);
/* Append to the audit log STATE_DIR/audit.log, creating it with mode 0640 (the log names
 * people and incidents; it is not world-readable). 0, or -1 with err. */
int state_audit_append(const char *state_dir, const struct audit_entry *e, char *err,
		       size_t errlen);

/* Who may change switches: root (uid 0), or a member of `group` (the config's switch_group;
 * NULL or "" = nobody but root), judged from the real/effective gid and getgroups().
 * 0 when allowed; -1 with "permission denied: ..." in why. Policy only: the file system must
 * still let the caller write STATE_DIR. */
int switch_may_change(const char *group, char *why, size_t len);
/* The calling user's name: $SUDO_USER when root via sudo, else getpwuid(getuid()), else "uidN". */
void switch_caller(char *name, size_t len);

/* Writer protocol of docs/OPERATIONS.md, first half: create STATE_DIR (0755), take sw_lock()
 * on STATE_DIR/switches.json (path returned in path), sw_load() it into set. A damaged file is
 * moved aside with sw_quarantine() and the set starts empty; note then holds the loud message
 * (caller prints it). Returns the lock fd (release with sw_unlock()), or -1 with err. */
int switch_writer_open(const char *state_dir, uint64_t now, struct sw_set *set,
		       char *path, size_t pathlen, char *note, size_t notelen,
		       char *err, size_t errlen);
/* sw_save() then chmod 0644 (readable by `switch ls` whatever the umask). 0 / -1 with err. */
int switch_writer_save(const char *path, const struct sw_set *set, char *err, size_t errlen);

#endif
