/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: the switch audit log: who, when, why, old -> new, for the incident review.
 *
 * One JSON object per line in STATE_DIR/audit.log, appended with O_APPEND in a single write()
 * and fsync()ed. Lines are never rewritten. Example (one line in the file):
 *   {"time":"2024-05-01T12:00:00Z","uid":1000,"user":"alice","command":"switch set",
 *    "service":"web","class":"L3",
 *    "old":null,
 *    "new":{"shed_pct":100,"reason":"INC-42","owner":"alice","expires_at":"2024-05-01T13:00:00Z"},
 *    "reason":"INC-42"}
 * "old"/"new" are null when there was no switch before / after the change (set of a new switch,
 * clear, expiry). "command" is free text chosen by the writer; sluice uses "switch set",
 * "switch clear", "switch renew", "plan apply LEVEL", "plan revert", "breaker reset",
 * "cascade clear", "baseline reset" (the uid of the sluicectl that asked, through the
 * pinned request), "expire" (user "sluiced") and "file edit" (user "file": the switch file was
 * changed outside sluiced; one record per switch that differs). Since sluiced is the one
 * writer, it writes every record; the "uid" is the caller's, from its socket credentials,
 * and "user" sluiced's own name for that uid ("uidN" until it has one; root's
 * sluicectl may name the person behind sudo).
 * Each side also carries the ledger fields "kind", "runbook" and "renewals" (optional when
 * read: older records lack them).
 * Time is seconds since the epoch (UTC) passed in by the caller (see duration.h).
 *
 * Recommended order for writers: take sw_lock(), load, change, sw_save(), then audit_append();
 * if the append fails the change is in force but unrecorded: report that loudly (exit 1). */
#ifndef SLUICE_AUDIT_H
#define SLUICE_AUDIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "ops/switches.h"

#define AUDIT_FILE_NAME   "audit.log"
#define AUDIT_USER_LEN    64
#define AUDIT_CMD_LEN     64

struct audit_side {
	int present;                     /* 0: null (no switch / normal) */
	int shed_pct;
	char reason[SW_REASON_LEN];
	char owner[SW_OWNER_LEN];
	uint64_t expires_at;
	int kind;                        /* the ledger fields (switches.h) */
	char runbook[SW_RUNBOOK_LEN];
	int renewals;
};

struct audit_entry {
	uint64_t time;                   /* seconds since epoch, written as ISO 8601 UTC */
	uint32_t uid;
	char user[AUDIT_USER_LEN];
	char command[AUDIT_CMD_LEN];
	char service[SLUICE_NAME_LEN];
	int class;                       /* 0..3; -1 for a command about a whole service or the
	                                  * node (breaker reset, cascade clear): "class": null */
	struct audit_side old, new;
	char reason[SW_REASON_LEN];      /* why this change was made */
};

/* Fill an entry for a change of (service, cls) from `old` to `new` (either may be NULL = no
 * switch). `reason` NULL: new's reason, else old's, else "". */
void audit_entry_make(struct audit_entry *e, uint64_t now, uint32_t uid, const char *user,
		      const char *command, const char *service, int cls,
		      const struct sw_switch *old, const struct sw_switch *new, const char *reason);

/* The JSON line for e, with a trailing '\n'. Caller frees *out. 0 / -1 (out of memory). */
int audit_format_json(const struct audit_entry *e, char **out, size_t *outlen);
/* Parse one line (trailing newline allowed). 0, or -1 with a reason in err. */
int audit_parse_line(const char *line, struct audit_entry *e, char *err, size_t errlen);
/* Human form for `sluicectl switch log`, e.g.
 *   2024-05-01T12:00:00Z alice(1000) switch set web/L3: normal -> shed 100% until
 *   2024-05-01T13:00:00Z (owner alice) -- reason: INC-42
 * Returns buf. */
char *audit_format_human(const struct audit_entry *e, char *buf, size_t len);

/* Append e to `path` (created 0644): O_APPEND, one write(), fsync(). 0, or -1 with err. */
int audit_append(const char *path, const struct audit_entry *e, char *err, size_t errlen);

/* Print the log in human form to `out`, oldest first; last > 0: only the last `last` entries.
 * Missing file: prints "no switch changes recorded (PATH does not exist)" and returns 0.
 * Unreadable lines are printed as "line N: unreadable audit record: WHY" and counted.
 * Returns the number of unreadable lines (0 = all good), or -1 with err if the file cannot
 * be opened/read. */
int audit_print(FILE *out, const char *path, int last, char *err, size_t errlen);
/* The same records as one JSON array on one line of `out` (each as its line in the log,
 * `[]` for a missing or empty log); unreadable lines are said on `errs` and counted, the
 * readable ones still printed. Returns the number of unreadable lines, or -1 with err (then
 * nothing was printed on out). */
int audit_print_json(FILE *out, FILE *errs, const char *path, int last, char *err,
		     size_t errlen);

#endif
