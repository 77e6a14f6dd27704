// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluiced's operator socket. See opserver.h; the verbs are in docs/OPERATIONS.md. */
#define _GNU_SOURCE   /* accept4 */
#include "daemon/opserver.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/jsonio.h"
#include "common/names.h"
#include "common/log.h"
#include "daemon/daemon.h"
#include "daemon/opverbs.h"
#include "ops/opproto.h"

#define MS 1000000ull

int ops_listen(struct opserver *s, const char *path, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;

	memset(s, 0, sizeof(*s));
	s->lfd = -1;
	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -1;
	}
	snprintf(s->path, sizeof(s->path), "%s", path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->lfd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	unlink(path);
	if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) || chmod(path, 0666) ||
	    listen(s->lfd, OPS_MAX_CONNS)) {
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
		close(s->lfd);
		s->lfd = -1;
		return -1;
	}
	if (stat(path, &st) == 0) {
		s->dev = st.st_dev;
		s->ino = st.st_ino;
	}
	return 0;
}

/* The state of the switch group's gid as the lookup thread has it (uidnames.h), never a
 * lookup here: the group database may be a directory that takes seconds, and any local user's
 * connect would hold up the ticks. An answer that locks the members out is logged once. */
static int switch_gid(struct daemon *d, const char *group, uint32_t *gid, char *why, size_t len)
{
	int say, state = uidn_group(&d->names, group, gid, why, len, &say);

	if (say)
		log_warn("switch_group '%s': %s: only root may change switches (a SIGHUP looks "
			 "again)", group, why);
	return state;
}

/* Whether the caller p may change anything: 0, or -1 with why. Root always; anyone else by
 * the gid of the switch group as it was last resolved, and only under that name: a name
 * not resolved yet, or whose lookup failed, lets nobody but root in. */
static int caller_refused(struct daemon *d, const struct opp_peer *p, char *why, size_t len)
{
	const char *group = d->cfg.switch_group;
	char fail[128];
	uint32_t gid = 0;
	int state;

	if (p->uid == 0 || !group[0])
		return opp_peer_allowed(p, group, -1, why, len);
	state = switch_gid(d, group, &gid, fail, sizeof(fail));
	if (state == UIDN_GROUP_PENDING) {
		snprintf(why, len, "permission denied: switch_group '%s' is being resolved (looked "
			 "up in the group database); until it is only root may change switches: try "
			 "again in a moment", group);
		return -1;
	}
	if (state == UIDN_GROUP_FAILED) {
		snprintf(why, len, "permission denied: switch_group '%s' could not be looked up "
			 "(%s); only root may change switches until a SIGHUP looks it up again",
			 group, fail);
		return -1;
	}
	return opp_peer_allowed(p, group, state == UIDN_GROUP_FOUND ? (long)gid : -1, why, len);
}

static void conn_free(struct ops_conn *c)
{
	if (c->fd >= 0 && c->state)
		close(c->fd);
	json_decref(c->reply);
	free(c->targets);
	memset(c, 0, sizeof(*c));
}

void ops_close(struct opserver *s)
{
	for (int i = 0; i < OPS_MAX_CONNS; i++)
		if (s->c[i].state)
			conn_free(&s->c[i]);
	if (s->lfd >= 0) {
		struct stat st;

		close(s->lfd);
		if (stat(s->path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino)
			unlink(s->path);
	}
	s->lfd = -1;
}

int ops_pollfds(struct opserver *s, struct pollfd *pfd, int max)
{
	int n = 0;

	if (s->lfd < 0)
		return 0;
	if (!s->accept_paused)
		pfd[n++] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
	for (int i = 0; i < OPS_MAX_CONNS && n < max; i++)
		if (s->c[i].state == 1)
			pfd[n++] = (struct pollfd){ .fd = s->c[i].fd, .events = POLLIN };
	return n;
}

static void answer(struct ops_conn *c, json_t *msg)
{
	char err[256];

	if (opp_send(c->fd, msg, err, sizeof(err)))
		log_debug("operator socket: %s", err);
	json_decref(msg);
	conn_free(c);
}

static void refuse(struct ops_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(struct ops_conn *c, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* msg may quote the request and be cut inside a character: still an answer (json_pack
	 * refuses text that is not UTF-8, and the caller would hear nothing at all) */
	answer(c, json_pack("{s:b,s:o}", "ok", 0, "error", jsonio_text(msg)));
}

static void caller_name(struct ops_req *r)
{
	const char *claimed = opp_str(r->j, "user");

	/* Root may name the person behind sudo; anyone else is who the kernel says, named as
	 * the daemon's own table has the uid (never what the caller claims, never a lookup in
	 * the password database here: that may take seconds, and the ticks would wait). */
	if (r->peer.uid == 0 && claimed && claimed[0]) {
		snprintf(r->user, sizeof(r->user), "%s", claimed);
		return;
	}
	uidn_name(&r->d->names, r->peer.uid, r->user, sizeof(r->user));
}

/* The request's own "reason" goes into the audit record (switch clear and renew, plan revert,
 * breaker reset, cascade clear): it is held to the rules of a switch's reason here, since any
 * client may write to the socket, not only sluicectl, which checks them too. A line feed in it
 * would print as a forged record in `switch log`; one longer than the record holds would be
 * cut, maybe inside a UTF-8 sequence, and the record refused as JSON: the change in force, not
 * audited. 0 when the reason is fine or absent, else -1 with what is wrong in why. */
static int reason_refused(const json_t *j, char *why, size_t len)
{
	const char *reason = opp_str(j, "reason");

	if (!reason)
		return 0;
	if (strlen(reason) >= SW_REASON_LEN) {
		snprintf(why, len, "reason: longer than %d bytes", SW_REASON_LEN - 1);
		return -1;
	}
	if (sw_new_text_problem(reason)) {
		snprintf(why, len, "reason: %s", sw_new_text_problem(reason));
		return -1;
	}
	return 0;
}

static void handle_request(struct opserver *s, struct daemon *d, struct ops_conn *c,
			   const json_t *j, unsigned long long now_ns)
{
	static struct ops_req r;
	const char *op = opp_str(j, "op"), *sd = opp_str(j, "state_dir");
	ops_verb_fn fn = ops_verb(op);
	char why[512];
	int rc;

	memset(&r, 0, sizeof(r));
	r.d = d;
	r.c = c;
	r.j = j;
	r.now = (uint64_t)time(NULL);
	r.now_ns = now_ns;
	if (opp_peer_of(c->fd, &r.peer, why, sizeof(why)))
		return refuse(c, "%s", why);
	if (caller_refused(d, &r.peer, why, sizeof(why))) {
		log_warn("operator socket: refused uid %u: %s", (unsigned)r.peer.uid, why);
		return refuse(c, "%s; nothing changed", why);
	}
	if (!fn)
		return refuse(c, "unknown request '%s'", op ? op : "(none)");
	if (reason_refused(j, why, sizeof(why)))
		return refuse(c, "%s; nothing changed", why);
	if (sd && strcmp(sd, d->cfg.state_dir))
		return refuse(c, "sluiced keeps its switches in %s, not %s; nothing changed",
			      d->cfg.state_dir, sd);
	/* The writer's place is taken before the verb changes anything: a change in memory with
	 * no job would be undone by the writer's next news, which does not count it. */
	if (iow_reserve(&d->iow, why, sizeof(why)))
		return refuse(c, "%s: nothing changed", why);
	caller_name(&r);
	rc = fn(&r);
	if (rc == 0 && (r.n_ch || r.n_au)) {
		c->seq = iow_enqueue(&d->iow, r.ch, r.n_ch, r.au, r.n_au);   /* > 0: reserved */
		r.ch = NULL;
		r.au = NULL;
	}
	free(r.ch);
	free(r.au);
	if (rc)
		return refuse(c, "%s; nothing changed", r.msg);
	d->sw_sent = c->seq ? c->seq : d->sw_sent;
	c->reply = json_pack("{s:b,s:o,s:o,s:i}", "ok", 1, "message", jsonio_text(r.msg),
			     "user", jsonio_text(r.user), "uid", (int)r.peer.uid);
	c->state = 2;
	c->applied_tick = d->ticks;
	c->since_ns = now_ns;
	if (!c->seq && !c->n_targets && !c->check_cascade) {
		json_t *reply = c->reply;

		c->reply = NULL;
		json_object_set_new(reply, "applied", json_true());
		json_object_set_new(reply, "audited", json_true());
		answer(c, reply);
	}
}

/* Whether the caller on fd may change anything, as its request will be judged. */
static int peer_may_change(struct daemon *d, int fd)
{
	struct opp_peer p;
	char why[512];

	return !opp_peer_of(fd, &p, why, sizeof(why)) && !caller_refused(d, &p, why, sizeof(why));
}

/* A slot for a new connection, or -1. The socket is open to every local user: when the slots
 * are full, an operator's connection takes the slot of a caller still waiting to send who may
 * change nothing (its request could only be refused); otherwise a user with no rights could
 * hold every slot with connections that send nothing, reconnecting as each is dropped, and
 * lock the operators out. */
static int free_slot(struct opserver *s, int may_change)
{
	int stranger = -1;

	for (int i = 0; i < OPS_MAX_CONNS; i++) {
		if (!s->c[i].state)
			return i;
		if (s->c[i].state == 1 && !s->c[i].may_change)
			stranger = i;
	}
	if (!may_change || stranger < 0)
		return -1;
	conn_free(&s->c[stranger]);   /* the stranger sees the connection closed */
	return stranger;
}

/* Out of descriptors or memory the caller stays in the listen queue and the socket stays
 * readable: polled again at once, the control loop would spin on accept() until the tick.
 * It is left alone until the next tick, which tries again; said once, not at every tick. */
static void accept_failed(struct opserver *s)
{
	int e = errno;

	if (e != EMFILE && e != ENFILE && e != ENOBUFS && e != ENOMEM)
		return;
	s->accept_paused = 1;
	if (!s->accept_warned)
		log_warn("operator socket: cannot accept a connection (%s): callers wait until "
			 "it can", strerror(e));
	s->accept_warned = 1;
}

void ops_handle(struct opserver *s, struct daemon *d, unsigned long long now_ns)
{
	if (s->lfd < 0)
		return;
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), i, may;

		if (fd < 0) {
			accept_failed(s);
			break;
		}
		s->accept_warned = 0;
		may = peer_may_change(d, fd);
		i = free_slot(s, may);
		if (i < 0) {
			close(fd);   /* busy: the client sees the connection closed */
			continue;
		}
		s->c[i] = (struct ops_conn){ .fd = fd, .state = 1, .since_ns = now_ns,
					     .may_change = may };
	}
	for (int i = 0; i < OPS_MAX_CONNS; i++) {
		struct ops_conn *c = &s->c[i];
		json_t *j;
		char err[256];

		if (c->state != 1)
			continue;
		if (opp_recv(c->fd, 0, &j, err, sizeof(err))) {
			if (strstr(err, "no answer"))
				continue;   /* nothing yet */
			conn_free(c);
			continue;
		}
		handle_request(s, d, c, j, now_ns);
		json_decref(j);
	}
}

/* The target's service in the running config, or -1. A reload between the request and the
 * tick that judges it may have moved the service (one removed above it) or removed it: the
 * index it had then would judge another service's verdict. */
static int target_service(const struct daemon *d, const struct ops_target *t)
{
	if (!t->service[0])
		return -1;
	if (t->svc >= 0 && t->svc < d->cfg.n_services &&
	    !strcmp(d->cfg.services[t->svc].name, t->service))
		return t->svc;
	return sluice_config_service_index(&d->cfg, t->service);
}

/* What the maps say now for each target: the switch shed per class, the breaker state. */
static int verify(struct daemon *d, struct ops_conn *c, json_t *seen)
{
	uint64_t now = (uint64_t)time(NULL);
	int all = 1;

	for (int k = 0; k < c->n_targets; k++) {
		const struct ops_target *t = &c->targets[k];
		int i = target_service(d, t);
		struct sluice_verdict v;
		const char *name;

		if (i < 0)
			continue;   /* no longer configured: nothing in the maps to judge */
		name = d->cfg.services[i].name;
		if (maps_read_verdict(&d->m, d->idx[i], &v)) {
			all = 0;
			continue;
		}
		if (t->cls < 0) {
			int closed = v.breaker_state == SLUICE_BREAKER_CLOSED;
			json_array_append_new(seen, json_pack("{s:s,s:s}", "service", name, "breaker",
							      sluice_breaker_state_name((int)v.breaker_state)));
			all &= closed;
		} else {
			uint32_t want = sluice_prob_complement(switch_state_admit(&d->sw, name,
										  t->cls, now));
			json_array_append_new(seen, json_pack("{s:s,s:s,s:f}", "service", name,
							      "class", sw_class_str(t->cls),
							      "switch_shed", (double)v.switch_shed[t->cls] / SLUICE_PROB_ONE));
			all &= v.switch_shed[t->cls] == want;
		}
	}
	if (c->check_cascade)
		all &= !d->cascade.suspended;
	return all;
}

void ops_after_tick(struct opserver *s, struct daemon *d, unsigned long long now_ns)
{
	uint64_t done;
	unsigned long long busy;
	int queued;

	s->accept_paused = 0;   /* the tick's look at the listen queue (accept_failed) */
	if (d->cfg.switch_group[0]) {
		/* a lookup that locks the members out is said when it comes, not at a connect */
		uint32_t gid;
		char why[128];

		switch_gid(d, d->cfg.switch_group, &gid, why, sizeof(why));
	}
	iow_progress(&d->iow, &done, &busy, &queued);
	for (int i = 0; i < OPS_MAX_CONNS; i++) {
		struct ops_conn *c = &s->c[i];
		int audited, waited_ms;
		json_t *seen, *reply;

		if (c->state == 1 && now_ns - c->since_ns > OPS_REQ_WAIT_MS * MS)
			conn_free(c);
		if (c->state != 2 || d->ticks <= c->applied_tick)
			continue;
		/* The map is judged at the first tick after the change, and at the second if the
		 * first did not show it (a service whose inputs could not be read keeps its last
		 * verdict for a tick); the audit record may take longer. */
		if (!c->verified) {
			int ok, n = (int)(d->ticks - c->applied_tick);

			seen = json_array();
			ok = verify(d, c, seen);
			if (!ok && n < OPS_VERIFY_TICKS) {
				json_decref(seen);
				continue;
			}
			c->verified = 1;
			json_object_set_new(c->reply, "applied", json_boolean(ok));
			json_object_set_new(c->reply, "maps", seen);
			json_object_set_new(c->reply, "ticks", json_integer(n));
		}
		audited = !c->seq || done >= c->seq;
		waited_ms = (int)((now_ns - c->since_ns) / MS);
		if (!audited && waited_ms < OPS_AUDIT_WAIT_MS)
			continue;
		if (audited && c->seq) {
			char why[IOW_MSG_LEN];
			if (iow_job_failed(&d->iow, c->seq, why, sizeof(why))) {
				json_object_set_new(c->reply, "audit_error", json_string(why));
				audited = 0;
			}
		}
		json_object_set_new(c->reply, "audited", json_boolean(audited));
		if (!audited && !json_object_get(c->reply, "audit_error")) {
			char w[640];
			snprintf(w, sizeof(w), "the state directory %s has not been written for %llu ms "
				 "(%d job%s queued): the change is in force but its audit record is not "
				 "written yet", d->cfg.state_dir, busy / MS, queued, queued == 1 ? "" : "s");
			json_object_set_new(c->reply, "audit_error", json_string(w));
		}
		reply = c->reply;
		c->reply = NULL;
		answer(c, reply);
	}
}
