/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: the switch set in force, and the writer protocol of the state directory (see
 * switches.h, audit.h and docs/OPERATIONS.md "Manual switches").
 *
 * sluiced is the one writer: its file writer thread (daemon/iowriter.h) follows the protocol
 * below for every change, expiry and audit record; the tick only reads struct switch_state.
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

#define SWST_ERR_LEN       512

struct switch_state {
	struct sw_set set;                 /* what is in force (may hold expired entries until the
	                                    * writer sweeps them: they shed nothing) */
	int corrupt;                       /* the file exists but was refused (set is empty) */
	uint64_t generation;               /* incremented whenever `set` changes */
};

void switch_state_init(struct switch_state *st);

/* Fixed-point admit ratio for sluice_verdict.switch_admit[cls]: SLUICE_PROB_ONE = no shed
 * (no switch, or an expired one), 0 = shed all. */
uint32_t switch_state_admit(const struct switch_state *st, const char *service, int cls,
			    uint64_t now);

/* ---- the state directory ---- */

/* STATE_DIR/NAME into buf; -1 when it does not fit. */
int state_path(char *buf, size_t len, const char *state_dir, const char *name);
/* Create the state directory (and missing parents) with mode 0755. 0, or -1 with err. */
int state_dir_ensure(const char *state_dir, char *err, size_t errlen);
/* Append to the audit log STATE_DIR/audit.log, creating it with mode 0640 (the log names
 * people and incidents; it is not world-readable). 0, or -1 with err. */
int state_audit_append(const char *state_dir, const struct audit_entry *e, char *err,
		       size_t errlen);

/* The calling user's name: $SUDO_USER when root via sudo, else getpwuid(getuid()), else "uidN". */
void switch_caller(char *name, size_t len);

/* Writer protocol of docs/OPERATIONS.md, first half: create STATE_DIR (0755), take sw_lock()
 * on STATE_DIR/switches.json (path returned in path), sw_load() it into set. A damaged file is
 * moved aside with sw_quarantine() and the set starts empty; note then holds the loud message
 * (caller prints it). Only the very file found damaged is moved: one renamed in after the read
 * (by hand, without the lock) is put back and read instead. A file that could not be read (SW_LOAD_UNREADABLE) is not damaged: it
 * is left alone and -1 returned, so nothing is built on a set that was never read. *seen: the
 * fstat() of the file read, st_mode 0 when none is at the path (see sw_load_seen). Returns
 * the lock fd (release with sw_unlock()), or -1 with err. */
int switch_writer_open(const char *state_dir, uint64_t now, struct sw_set *set,
		       struct stat *seen, char *path, size_t pathlen, char *note, size_t notelen,
		       char *err, size_t errlen);
/* sw_save_seen(): mode 0644 whatever the umask (readable by `switch ls`); *written is the
 * file saved. read: the *seen of switch_writer_open. An operator's `mv` takes no lock: a file
 * renamed in since the read is not written over (SW_SAVE_REPLACED: open and read again).
 * 0 / -1 / SW_SAVE_REPLACED with err. */
int switch_writer_save(const char *path, const struct sw_set *set, const struct stat *read,
		       struct stat *written, char *err, size_t errlen);

#endif
