/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The user names sluiced writes next to an operator's uid (audit records, events, a switch's
 * default owner), looked up by a thread of their own.
 *
 * The password database may be a directory service (LDAP, sssd through NSS) that takes
 * seconds to answer. Asked from the control loop at each request, it would hold up the ticks
 * and the heartbeat, and the data path fails open when the heartbeat goes stale. So the loop
 * only reads a table: a uid not in it yet is written as "uidN" (the uid, the truth, is in every
 * record anyway) and handed to the thread, which looks it up for the next request. The thread
 * fills the table at start with root and the members of switch_group (the callers who may
 * change anything) and looks every name up again at a SIGHUP.
 *
 * The thread also looks up switch_group's gid, which the operator socket judges callers by,
 * for the same reason: at start, at a SIGHUP, and when the socket asks for a name other than
 * the one last looked up. Until the answer for a new name comes, that name has none. */
#ifndef SLUICE_UIDNAMES_H
#define SLUICE_UIDNAMES_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define UIDN_MAX       256
#define UIDN_NAME_LEN  64

struct uidn_entry {
	uint32_t uid;
	int named;                     /* 1: name holds the database's answer; 0: asked, or not
	                                * found (looked up again at the next request) */
	char name[UIDN_NAME_LEN];
};

/* What the group database said of switch_group when last asked. */
enum uidn_group_state {
	UIDN_GROUP_PENDING,            /* not asked yet, or the answer is for another name */
	UIDN_GROUP_FOUND,              /* gid is the answer */
	UIDN_GROUP_MISSING,            /* no such group */
	UIDN_GROUP_FAILED,             /* the database did not answer (why) */
};

struct uidn_group {
	char name[32];                 /* the group this is the answer for ("" none yet) */
	int state;                     /* enum uidn_group_state */
	uint32_t gid;
	char why[128];
	int said;                      /* a MISSING or FAILED answer was handed out to be logged */
};

struct uid_names {
	pthread_mutex_t mu;            /* held to read or change the table, never over a lookup */
	pthread_cond_t cv;
	pthread_t thread;
	int started, stop, exited;
	int wanted;                    /* a uid waits to be looked up */
	int refresh;                   /* look every name up again (start, SIGHUP) */
	char group[32];                /* switch_group: its gid and members are looked up at a
	                                * refresh */
	int group_wanted;              /* group's gid waits to be looked up */
	struct uidn_group g;           /* the last answer for the gid */
	int n, next_evict;
	struct uidn_entry e[UIDN_MAX];
};

/* The lookup of one uid's name: 0 and the name, or -1 (no such user, or the database did not
 * answer). getpwuid_r() in the programs; a test may put its own here before uidn_start(). */
extern int (*uidn_lookup)(uint32_t uid, char *name, size_t len);

/* The lookup of a group's gid: 0 and the gid, ENOENT when there is no such group, or another
 * errno value when the database did not answer. getgrnam_r() in the programs; a test may put
 * its own here before uidn_start(). */
extern int (*uidn_group_lookup)(const char *group, uint32_t *gid);

/* Start the thread; it fills the table (root, the members of group) at once. 0, or -1 with
 * err (then names stay "uidN", except root's claim). */
int uidn_start(struct uid_names *t, const char *group, char *err, size_t errlen);
/* Stop the thread (one stuck in a lookup is left behind, detached, after wait_ms). */
void uidn_stop(struct uid_names *t, int wait_ms);
/* The name of uid as the table has it, else "uidN" and the uid goes to the thread. Never
 * waits for the database: safe in the control loop. */
void uidn_name(struct uid_names *t, uint32_t uid, char *name, size_t len);
/* At a SIGHUP: look every name in the table up again, and group's gid and members. Until the
 * thread has the new answer, uidn_group() gives the last one for the same name. */
void uidn_refresh(struct uid_names *t, const char *group);
/* group's gid as the thread last looked it up, never waiting for the database: safe in the
 * control loop. UIDN_GROUP_PENDING when the last answer is for another name (then group goes
 * to the thread), else that answer: the gid, or why the database did not answer. *say is set
 * once per answer that is not FOUND, for the caller to log it. Without the thread: FAILED. */
int uidn_group(struct uid_names *t, const char *group, uint32_t *gid, char *why, size_t len,
	       int *say);

#endif
