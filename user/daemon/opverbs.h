/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The verbs of sluiced's operator socket (daemon/opserver.h): each one checks its arguments
 * against what sluiced runs, changes the switch set (or the breaker, the cascade) in memory,
 * and leaves in the request the writer's job (changes for the switch file, audit records) and
 * the classes the answer must find in the verdict map. */
#ifndef SLUICE_OPVERBS_H
#define SLUICE_OPVERBS_H

#include <stdint.h>
#include <jansson.h>
#include "daemon/iowriter.h"
#include "daemon/opserver.h"
#include "ops/opproto.h"

struct daemon;

/* One request being handled. */
struct ops_req {
	struct daemon *d;
	struct ops_conn *c;                 /* targets and check_cascade are set here */
	const json_t *j;                    /* the request as received */
	struct opp_peer peer;               /* the caller, from the kernel */
	char user[AUDIT_USER_LEN];          /* the caller's name, for the audit log */
	uint64_t now;                       /* wall seconds */
	unsigned long long now_ns;          /* the monotonic clock, for the controllers */
	struct iow_change *ch;              /* the writer's job being built (malloc()ed) */
	struct audit_entry *au;
	int n_ch, n_au, cap;
	char msg[2048];                     /* the answer's message, or why it was refused */
};

/* A verb: 0 when done (r->msg says what), -1 when refused (r->msg says why; nothing in memory
 * changed unless memory ran out mid-way). */
typedef int (*ops_verb_fn)(struct ops_req *r);

/* The verb for a request's "op", or NULL. */
ops_verb_fn ops_verb(const char *op);

#endif
