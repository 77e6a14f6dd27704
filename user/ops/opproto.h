/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluice: how sluicectl reaches the running sluiced, and who may change what.
 *
 * sluiced is the one writer of the switch file and the audit log. It publishes where it lives
 * in RUN_DIR/sluiced.json (RUN_DIR: --run-dir, $SLUICE_RUN_DIR, default /run/sluice; the pin
 * dir is a BPF file system, which holds no regular files):
 *   {"pid": 4242, "config": "/etc/sluice/sluice.yaml", "state_dir": "/var/lib/sluice",
 *    "pin_dir": "/sys/fs/bpf/sluice", "socket": "/run/sluice/sluiced.sock",
 *    "switch_group": "sre"}
 * and listens on RUN_DIR/sluiced.sock, a unix SOCK_SEQPACKET socket: one JSON object per
 * message each way. A request is {"op": "switch set", ...the command's arguments as strings};
 * the answer is {"ok": true, "message": TEXT, ...} once the change is in the verdict map, or
 * {"ok": false, "error": TEXT}. The caller's identity is the kernel's (SO_PEERCRED: uid, gid;
 * SO_PEERGROUPS: the supplementary groups, all as of the connect), never what the request says.
 *
 * No global state. */
#ifndef SLUICE_OPPROTO_H
#define SLUICE_OPPROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

#define OPP_DEFAULT_RUN_DIR "/run/sluice"
#define OPP_RECORD_NAME     "sluiced.json"
#define OPP_SOCKET_NAME     "sluiced.sock"
#define OPP_MAX_MSG         (256 * 1024)   /* a plan apply of every switch fits */
#define OPP_MAX_GROUPS      256

struct opp_record {
	long pid;
	char config[512];
	char state_dir[256];
	char pin_dir[256];
	char socket[512];
	char switch_group[32];
};

/* The record as JSON text / from JSON text. 0, or -1 with err. */
int opp_record_format(const struct opp_record *r, char **out, size_t *len);
int opp_record_parse(const char *text, size_t len, struct opp_record *r, char *err,
		     size_t errlen);
/* Write RUN_DIR/sluiced.json atomically (temp file + rename, mode 0644; RUN_DIR created 0755).
 * 0, or -1 with err. */
int opp_record_write(const char *run_dir, const struct opp_record *r, char *err, size_t errlen);
/* Read it. 0; -1 with err when missing or unreadable; -2 when its pid no longer runs (a
 * record left by a daemon that died: err says so, *r is filled). */
int opp_record_read(const char *run_dir, struct opp_record *r, char *err, size_t errlen);
/* Remove the record if it is still this pid's (a newer daemon may have replaced it). */
void opp_record_remove(const char *run_dir, long pid);

/* ---- who may change ---- */

struct opp_peer {
	uint32_t uid, gid;
	long pid;
	int n_groups;
	uint32_t groups[OPP_MAX_GROUPS];   /* supplementary groups of the calling process */
};

/* The "Groups:" line of /proc/PID/status text into p->groups. 0, or -1 when there is none. */
int opp_parse_status_groups(const char *status, struct opp_peer *p);
/* SO_PEERCRED of a connected unix socket, plus the groups (SO_PEERGROUPS; from /proc on
 * kernels without it). 0 / -1 with err. */
int opp_peer_of(int fd, struct opp_peer *p, char *err, size_t errlen);
/* Root, or a member of the switch group (its gid; group_gid < 0: the group is not configured
 * or does not exist, then only root): primary gid or a supplementary group. 0 when allowed;
 * -1 with "permission denied: ..." in why. */
int opp_peer_allowed(const struct opp_peer *p, const char *group_name, long group_gid,
		     char *why, size_t len);

/* ---- messages ---- */

/* One JSON object as one datagram. 0 / -1 with err. */
int opp_send(int fd, const json_t *msg, char *err, size_t errlen);
/* Wait up to timeout_ms for one datagram holding a JSON object. 0 and *out; -1 with err
 * (timeout, peer gone, not JSON). */
int opp_recv(int fd, int timeout_ms, json_t **out, char *err, size_t errlen);
/* Connect to the socket at path. The fd, or -1 with err. A sluiced that accepts nothing
 * (stopped, hung) with its queue of connections full is given OPP_CONNECT_WAIT_MS, not
 * forever: the connect, and every send on the fd, waits at most that long. */
#define OPP_CONNECT_WAIT_MS 5000
int opp_connect(const char *path, char *err, size_t errlen);
/* The same with the wait given (wait_ms > 0). */
int opp_connect_within(const char *path, int wait_ms, char *err, size_t errlen);
/* A string member of a request, or NULL when absent or not a string. */
const char *opp_str(const json_t *o, const char *key);

#endif
