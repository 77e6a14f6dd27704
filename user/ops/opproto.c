// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: the record sluiced publishes, peer credentials, and one-datagram JSON messages.
 * See opproto.h. */
#define _GNU_SOURCE   /* struct ucred */
#include "ops/opproto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/errf.h"
#include "common/jsonio.h"

int opp_record_format(const struct opp_record *r, char **out, size_t *len)
{
	json_t *o = json_pack("{s:I,s:s,s:s,s:s,s:s,s:s}", "pid", (json_int_t)r->pid,
			      "config", r->config, "state_dir", r->state_dir, "pin_dir", r->pin_dir,
			      "socket", r->socket, "switch_group", r->switch_group);
	int rc = o ? jsonio_dump_text(o, JSON_INDENT(2), out, len) : -1;

	json_decref(o);
	return rc;
}

static int copy_member(const json_t *o, const char *k, char *dst, size_t n, char *err,
		       size_t errlen)
{
	const json_t *v = json_object_get(o, k);

	if (!json_is_string(v) || json_string_length(v) >= n)
		return errf(err, errlen, "\"%s\" missing, not a string or too long", k);
	snprintf(dst, n, "%s", json_string_value(v));
	return 0;
}

int opp_record_parse(const char *text, size_t len, struct opp_record *r, char *err,
		     size_t errlen)
{
	char why[200];
	json_t *o = jsonio_parse(text, len, why, sizeof(why));
	const json_t *pid;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (!o)
		return errf(err, errlen, "bad JSON: %s", why);
	pid = json_object_get(o, "pid");
	if (!json_is_integer(pid) || json_integer_value(pid) <= 0)
		errf(err, errlen, "\"pid\" missing or not a process id");
	else if (!copy_member(o, "config", r->config, sizeof(r->config), err, errlen) &&
		 !copy_member(o, "state_dir", r->state_dir, sizeof(r->state_dir), err, errlen) &&
		 !copy_member(o, "pin_dir", r->pin_dir, sizeof(r->pin_dir), err, errlen) &&
		 !copy_member(o, "socket", r->socket, sizeof(r->socket), err, errlen) &&
		 !copy_member(o, "switch_group", r->switch_group, sizeof(r->switch_group), err,
			      errlen)) {
		r->pid = (long)json_integer_value(pid);
		rc = 0;
	}
	json_decref(o);
	return rc;
}

int opp_record_write(const char *run_dir, const struct opp_record *r, char *err, size_t errlen)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32], *text;
	size_t len;
	int fd, ok;

	if (mkdir(run_dir, 0755) && errno != EEXIST)
		return errf(err, errlen, "cannot create %s: %s", run_dir, strerror(errno));
	if (snprintf(path, sizeof(path), "%s/%s", run_dir, OPP_RECORD_NAME) >= (int)sizeof(path))
		return errf(err, errlen, "run directory path too long: %s", run_dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	if (opp_record_format(r, &text, &len))
		return errf(err, errlen, "out of memory");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		free(text);
		return errf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
	}
	ok = write(fd, text, len) == (ssize_t)len && write(fd, "\n", 1) == 1;
	free(text);
	fchmod(fd, 0644);
	close(fd);
	if (!ok || rename(tmp, path)) {
		int e = errno;
		unlink(tmp);
		return errf(err, errlen, "cannot write %s: %s", path, strerror(e));
	}
	return 0;
}

int opp_record_read(const char *run_dir, struct opp_record *r, char *err, size_t errlen)
{
	char path[PATH_MAX], buf[4096], why[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", run_dir, OPP_RECORD_NAME);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errf(err, errlen, "no sluiced publishes itself in %s (%s: %s)", run_dir,
			    path, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return errf(err, errlen, "cannot read %s: %s", path, strerror(errno));
	buf[n] = 0;
	if (opp_record_parse(buf, (size_t)n, r, why, sizeof(why)))
		return errf(err, errlen, "%s: %s", path, why);
	if (kill((pid_t)r->pid, 0) && errno == ESRCH) {
		errf(err, errlen, "%s names sluiced pid %ld, which no longer runs", path, r->pid);
		return -2;
	}
	return 0;
}

void opp_record_remove(const char *run_dir, long pid)
{
	struct opp_record r;
	char err[256], path[PATH_MAX];

	if (opp_record_read(run_dir, &r, err, sizeof(err)) != -1 && r.pid == pid) {
		snprintf(path, sizeof(path), "%s/%s", run_dir, OPP_RECORD_NAME);
		unlink(path);
	}
}

int opp_parse_status_groups(const char *status, struct opp_peer *p)
{
	const char *s = strstr(status, "\nGroups:");

	if (!s && !strncmp(status, "Groups:", 7))
		s = status - 1;
	if (!s)
		return -1;
	s += 8;
	p->n_groups = 0;
	while (*s && *s != '\n' && p->n_groups < OPP_MAX_GROUPS) {
		char *end;
		unsigned long g;

		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '\n')
			break;
		g = strtoul(s, &end, 10);
		if (end == s)
			return -1;
		p->groups[p->n_groups++] = (uint32_t)g;
		s = end;
	}
	return 0;
}

/* The supplementary groups the peer had when it connected (SO_PEERGROUPS, Linux 4.13), the
 * first OPP_MAX_GROUPS of them. 0, or -1 when the kernel has no such option. */
static int peer_groups(int fd, struct opp_peer *p)
{
	gid_t g[OPP_MAX_GROUPS], *all = g;
	socklen_t len = sizeof(g);
	int rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len);

	if (rc && errno == ERANGE && (all = malloc(len)))   /* len: the size they need */
		rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, all, &len);
	if (rc == 0) {
		p->n_groups = 0;
		for (size_t i = 0; i < len / sizeof(gid_t) && p->n_groups < OPP_MAX_GROUPS; i++)
			p->groups[p->n_groups++] = (uint32_t)all[i];
	}
	if (all && all != g)
		free(all);
	return rc ? -1 : 0;
}

int opp_peer_of(int fd, struct opp_peer *p, char *err, size_t errlen)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	char path[64], buf[4096];
	ssize_t n;
	int sfd;

	memset(p, 0, sizeof(*p));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len))
		return errf(err, errlen, "SO_PEERCRED: %s", strerror(errno));
	p->uid = uc.uid;
	p->gid = uc.gid;
	p->pid = uc.pid;
	/* The supplementary groups are not part of SO_PEERCRED. The socket has them as of the
	 * connect, as it has the uid; the caller's /proc entry (procfs never stalls) is only for
	 * kernels without SO_PEERGROUPS, since it says what the pid holds now: a caller could
	 * join a group after connecting, or exit and leave its pid to a member's process.
	 * Without either only the primary group counts. */
	if (peer_groups(fd, p) == 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/status", (long)uc.pid);
	sfd = open(path, O_RDONLY | O_CLOEXEC);
	if (sfd >= 0) {
		n = read(sfd, buf, sizeof(buf) - 1);
		close(sfd);
		if (n > 0) {
			buf[n] = 0;
			opp_parse_status_groups(buf, p);
		}
	}
	return 0;
}

int opp_peer_allowed(const struct opp_peer *p, const char *group_name, long group_gid,
		     char *why, size_t len)
{
	if (p->uid == 0)
		return 0;
	if (!group_name || !group_name[0])
		return errf(why, len, "permission denied: only root may change switches "
			    "(no switch_group is configured); uid %u", (unsigned)p->uid);
	if (group_gid < 0)
		return errf(why, len, "permission denied: only root or members of switch_group "
			    "'%s' may change switches, and that group does not exist", group_name);
	if (p->gid == (uint32_t)group_gid)
		return 0;
	for (int i = 0; i < p->n_groups; i++)
		if (p->groups[i] == (uint32_t)group_gid)
			return 0;
	return errf(why, len, "permission denied: only root or members of group '%s' may change "
		    "switches (uid %u is neither)", group_name, (unsigned)p->uid);
}

int opp_send(int fd, const json_t *msg, char *err, size_t errlen)
{
	char *text;
	size_t len;
	ssize_t w;

	if (jsonio_dump_text(msg, 0, &text, &len))
		return errf(err, errlen, "out of memory");
	if (len > OPP_MAX_MSG) {
		free(text);
		return errf(err, errlen, "message of %zu bytes is over the limit %d", len,
			    OPP_MAX_MSG);
	}
	do
		w = send(fd, text, len, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	free(text);
	if (w != (ssize_t)len)
		return errf(err, errlen, "send: %s", w < 0 ? strerror(errno) : "short write");
	return 0;
}

int opp_recv(int fd, int timeout_ms, json_t **out, char *err, size_t errlen)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char *buf, why[200];
	ssize_t n;
	int r;

	*out = NULL;
	do
		r = poll(&pfd, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return errf(err, errlen, "no answer within %d ms", timeout_ms);
	if (r < 0)
		return errf(err, errlen, "poll: %s", strerror(errno));
	buf = malloc(OPP_MAX_MSG + 1);
	if (!buf)
		return errf(err, errlen, "out of memory");
	n = recv(fd, buf, OPP_MAX_MSG, MSG_DONTWAIT);
	if (n <= 0) {
		free(buf);
		return errf(err, errlen, "%s", n == 0 ? "the peer closed the connection"
			    : strerror(errno));
	}
	*out = jsonio_parse(buf, (size_t)n, why, sizeof(why));
	free(buf);
	if (!*out)
		return errf(err, errlen, "not a JSON object: %s", why);
	if (!json_is_object(*out)) {
		/* it parsed, so the parser left no reason in why: name what came instead */
		errf(err, errlen, "not a JSON object: got %s", jsonio_type_name(*out));
		json_decref(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

int opp_connect(const char *path, char *err, size_t errlen)
{
	return opp_connect_within(path, OPP_CONNECT_WAIT_MS, err, errlen);
}

int opp_connect_within(const char *path, int wait_ms, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval wait = { wait_ms / 1000, (wait_ms % 1000) * 1000 };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return errf(err, errlen, "socket path too long: %s", path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errf(err, errlen, "socket: %s", strerror(errno));
	/* A unix connect waits for room in the listener's queue as long as a send may block:
	 * without a limit, a sluiced that stopped accepting kept the caller forever. */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait))) {
		int e = errno;
		close(fd);
		return errf(err, errlen, "SO_SNDTIMEO: %s", strerror(e));
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		int e = errno;
		close(fd);
		if (e == EAGAIN)
			return errf(err, errlen, "%s takes no connection within %d ms (sluiced "
				    "busy or hung, its queue full)", path, wait_ms);
		return errf(err, errlen, "cannot connect to %s: %s", path, strerror(e));
	}
	return fd;
}

const char *opp_str(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}
