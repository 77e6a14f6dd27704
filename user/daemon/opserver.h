/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluiced's operator socket (ops/opproto.h): requests from sluicectl, answered once the
 * change is in the verdict map.
 *
 * A request is handled between ticks in the control loop's thread (it changes the same
 * state the tick reads, so nothing needs a lock): the caller's credentials are checked, the
 * change is made in memory, the file writer gets the job (daemon/iowriter.h), and the answer
 * waits for the next tick, which writes the verdicts. The answer then carries what the map
 * says (read back from it at that tick, or the one after: OPS_VERIFY_TICKS) and whether the
 * audit record is written; if the writer has not
 * finished within OPS_AUDIT_WAIT_MS the answer says the change is in force but not yet
 * recorded, and sluicectl exits 1. */
#ifndef SLUICE_OPSERVER_H
#define SLUICE_OPSERVER_H

#include <poll.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>
#include "sluice.h"

#define OPS_MAX_CONNS      16
#define OPS_REQ_WAIT_MS    2000    /* a connection that sends nothing is dropped */
#define OPS_AUDIT_WAIT_MS  1000
#define OPS_VERIFY_TICKS   2       /* the verdict map must show a change within this many ticks */

struct daemon;

struct ops_target {
	int svc;                   /* index into cfg.services when the request was handled ... */
	char service[SLUICE_NAME_LEN];  /* ... of this service: a reload before the tick that
	                                 * judges the maps may have moved it or removed it */
	int cls;                   /* -1: the breaker of the service */
};

struct ops_conn {
	int fd;
	int state;                 /* 0 free, 1 waiting for the request, 2 waiting for a tick */
	int may_change;            /* the caller was root or in switch_group when it connected */
	unsigned long long since_ns;
	unsigned long long applied_tick;
	uint64_t seq;              /* writer job to wait for (0: none) */
	int verified;              /* the map was judged (reply holds "applied", "maps") */
	json_t *reply;             /* the answer so far */
	int n_targets;
	struct ops_target *targets;
	int check_cascade;
};

struct opserver {
	int lfd;
	char path[512];
	dev_t dev;                 /* the socket file this server made: removed at exit only if */
	ino_t ino;                 /* it is still that one (a newer sluiced may own the path) */
	struct ops_conn c[OPS_MAX_CONNS];
	int accept_paused;         /* accept() failed for want of resources: until the next tick */
	int accept_warned;         /* ... and said so (once, until one is accepted again) */
};

/* Listen on path (an old socket file there is replaced), mode 0666: anyone may ask, the
 * credentials decide. A caller who may change nothing holds a slot only while no operator
 * needs it. 0, or -1 with err. */
int ops_listen(struct opserver *s, const char *path, char *err, size_t errlen);
void ops_close(struct opserver *s);
/* The fds to poll (listening socket and connections); returns how many were added. */
int ops_pollfds(struct opserver *s, struct pollfd *pfd, int max);
/* Accept and read what is ready; handle complete requests. */
void ops_handle(struct opserver *s, struct daemon *d, unsigned long long now_ns);
/* After a tick: answer the requests the tick has made visible; drop idle connections. */
void ops_after_tick(struct opserver *s, struct daemon *d, unsigned long long now_ns);

#endif
