// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The verbs of sluiced's operator socket. See opverbs.h; the commands in docs/OPERATIONS.md. */
#include "daemon/opverbs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/duration.h"
#include "common/jsonio.h"
#include "common/names.h"
#include "daemon/daemon.h"

static int add_target(struct ops_req *r, int svc, int cls)
{
	struct ops_target *t = realloc(r->c->targets, sizeof(*t) * (size_t)(r->c->n_targets + 1));

	if (!t)
		return -1;
	r->c->targets = t;
	t += r->c->n_targets++;
	*t = (struct ops_target){ .svc = svc, .cls = cls };
	if (svc >= 0 && svc < r->d->cfg.n_services)
		snprintf(t->service, sizeof(t->service), "%s", r->d->cfg.services[svc].name);
	return 0;
}

static int grow(struct ops_req *r)
{
	if (r->n_ch < r->cap && r->n_au < r->cap)
		return 0;
	r->cap = r->cap ? r->cap * 2 : 4;
	r->ch = realloc(r->ch, sizeof(*r->ch) * (size_t)r->cap);
	r->au = realloc(r->au, sizeof(*r->au) * (size_t)r->cap);
	return r->ch && r->au ? 0 : -1;
}

/* One event per switch change, as for an expiry: who, what, why. */
static void switch_event(struct ops_req *r, const char *command, const char *service, int cls,
			 const struct sw_switch *old, const struct sw_switch *new,
			 const char *reason)
{
	struct sluice_event_sink sink = daemon_sink(r->d, service);
	struct sluice_event ev;
	char why[SW_REASON_LEN + 128];

	snprintf(why, sizeof(why), "%s by %s: %s", command, r->user, reason ? reason : "");
	sluice_event_init(&ev, r->now_ns, SLUICE_EV_INFO, service, SLUICE_EVM_SWITCH,
			  old ? "set" : "normal", new ? "set" : "normal", why);
	ev.cls = cls;
	if (new)
		sluice_event_num(&ev, "shed_pct", new->shed_pct);
	sink.fn(sink.ctx, &ev);
}

/* Record one switch change: in memory now, for the file and the audit log by the writer. */
static int change(struct ops_req *r, const char *command, const char *service, int cls,
		  const struct sw_switch *old, const struct sw_switch *new, const char *reason)
{
	struct iow_change *c;

	if (grow(r))
		return -1;
	/* Callers check for room first (room_for); this is the last word, before anything is
	 * recorded: a switch the table cannot hold must not be audited as set. */
	if (new && sw_set_put(&r->d->sw.set, new, NULL) < 0) {
		snprintf(r->msg, sizeof(r->msg), "cannot hold the switch of %s %s (%d switches in "
			 "force, at most %d)", service, sw_class_str(cls), r->d->sw.set.n, SW_MAX);
		return -1;
	}
	c = &r->ch[r->n_ch++];
	memset(c, 0, sizeof(*c));
	snprintf(c->service, sizeof(c->service), "%s", service);
	c->cls = cls;
	c->present = new != NULL;
	if (new)
		c->sw = *new;
	audit_entry_make(&r->au[r->n_au++], r->now, r->peer.uid, r->user, command, service, cls,
			 old, new, reason);
	if (!new)
		sw_set_clear(&r->d->sw.set, service, cls, NULL);
	r->d->sw.generation++;
	switch_event(r, command, service, cls, old, new, reason);
	return add_target(r, sluice_config_service_index(&r->d->cfg, service), cls);
}

/* 0 when the switch table can take `adding` more switches, else -1 with the message. */
static int room_for(struct ops_req *r, int adding)
{
	if (r->d->sw.set.n + adding <= SW_MAX)
		return 0;
	snprintf(r->msg, sizeof(r->msg), "%d switches are in force and this adds %d: sluiced holds "
		 "at most %d (clear some first)", r->d->sw.set.n, adding, SW_MAX);
	return -1;
}

static int audit_only(struct ops_req *r, const char *command, const char *service,
		      const char *reason)
{
	if (grow(r))
		return -1;
	audit_entry_make(&r->au[r->n_au++], r->now, r->peer.uid, r->user, command, service, -1,
			 NULL, NULL, reason);
	return 0;
}

static int service_of(struct ops_req *r, const char *name)
{
	char list[1024] = "";
	int i = name ? sluice_config_service_index(&r->d->cfg, name) : -1;

	if (i >= 0)
		return i;
	/* as many names as the message holds (a config may have thousands) */
	for (int k = 0; k < r->d->cfg.n_services && strlen(list) + 1 < sizeof(list); k++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", k ? ", " : "",
			 r->d->cfg.services[k].name);
	snprintf(r->msg, sizeof(r->msg), "unknown service '%s': sluiced (config %s) runs %s",
		 name ? name : "", r->d->cfg_path, list[0] ? list : "no services");
	return -1;
}

static int class_of(struct ops_req *r, const char *name)
{
	int cls = sw_class_parse(name ? name : "");

	if (cls < 0)
		snprintf(r->msg, sizeof(r->msg), "class '%s': must be L0, L1, L2 or L3",
			 name ? name : "");
	return cls;
}

static const struct sw_switch *active(struct ops_req *r, const char *service, int cls)
{
	const struct sw_switch *w = sw_set_find(&r->d->sw.set, service, cls);

	return w && w->expires_at > r->now ? w : NULL;
}

static int do_switch_set(struct ops_req *r)
{
	const json_t *j = r->j;
	const char *owner = opp_str(j, "owner") ? opp_str(j, "owner") : r->user;
	const char *known;             /* the service, found in the running config */
	struct sw_switch sw, old;
	const struct sw_switch *o;
	char err[512];
	int i = service_of(r, opp_str(j, "service"));

	if (i < 0)
		return -1;
	known = r->d->cfg.services[i].name;
	if (sw_make(&sw, opp_str(j, "service"), opp_str(j, "class"), opp_str(j, "shed"),
		    opp_str(j, "reason"), opp_str(j, "ttl"), owner, r->now, &known, 1, err,
		    sizeof(err)) ||
	    sw_set_ledger(&sw, opp_str(j, "kind"), opp_str(j, "runbook"), err, sizeof(err))) {
		snprintf(r->msg, sizeof(r->msg), "%s", err);
		return -1;
	}
	o = sw_set_find(&r->d->sw.set, sw.service, sw.class);
	if (o)
		old = *o;
	else if (room_for(r, 1))
		return -1;
	snprintf(r->msg, sizeof(r->msg), "%s %s shed %d%% (%s)%s", sw.service,
		 sw_class_str(sw.class), sw.shed_pct, sw_kind_str(sw.kind),
		 o ? "; replaced the switch before it" : "");
	return change(r, "switch set", sw.service, sw.class, o ? &old : NULL, &sw, sw.reason);
}

static int do_switch_clear(struct ops_req *r)
{
	const char *service = opp_str(r->j, "service"), *reason = opp_str(r->j, "reason");
	int cls = class_of(r, opp_str(r->j, "class"));
	const struct sw_switch *o;
	struct sw_switch old;

	if (cls < 0)
		return -1;
	o = sw_set_find(&r->d->sw.set, service ? service : "", cls);
	if (!o) {
		snprintf(r->msg, sizeof(r->msg), "no switch for %s %s; nothing to clear",
			 service ? service : "", sw_class_str(cls));
		return 0;
	}
	old = *o;
	snprintf(r->msg, sizeof(r->msg), "%s %s back to normal (was shed %d%% by %s)",
		 old.service, sw_class_str(cls), old.shed_pct, old.owner);
	if (sluice_config_service_index(&r->d->cfg, old.service) < 0) {
		/* A service no longer configured: nothing in the maps to wait for. */
		if (grow(r))
			return -1;
		r->ch[r->n_ch++] = (struct iow_change){ .cls = cls };
		snprintf(r->ch[r->n_ch - 1].service, SLUICE_NAME_LEN, "%s", old.service);
		audit_entry_make(&r->au[r->n_au++], r->now, r->peer.uid, r->user, "switch clear",
				 old.service, cls, &old, NULL, reason ? reason : old.reason);
		sw_set_clear(&r->d->sw.set, old.service, cls, NULL);
		return 0;
	}
	return change(r, "switch clear", old.service, cls, &old, NULL,
		      reason ? reason : old.reason);
}

static int do_switch_renew(struct ops_req *r)
{
	const char *service = opp_str(r->j, "service");
	int cls = class_of(r, opp_str(r->j, "class"));
	int max = r->d->cfg.switch_max_renewals;
	const struct sw_switch *o;
	struct sw_switch sw, old;
	char err[512], left[24];

	if (cls < 0 || service_of(r, service) < 0)
		return -1;
	o = sw_set_find(&r->d->sw.set, service, cls);
	if (!o) {
		snprintf(r->msg, sizeof(r->msg), "no switch for %s %s to renew", service,
			 sw_class_str(cls));
		return -1;
	}
	old = sw = *o;
	if (sw_renew(&sw, opp_str(r->j, "ttl"), max, r->now, err, sizeof(err))) {
		snprintf(r->msg, sizeof(r->msg), "%s", err);
		return -1;
	}
	duration_format(sw.expires_at - r->now, left, sizeof(left));
	snprintf(r->msg, sizeof(r->msg), "%s %s shed %d%% renewed for %s (renewal %d of %d)",
		 service, sw_class_str(cls), sw.shed_pct, left, sw.renewals, max);
	return change(r, "switch renew", service, cls, &old, &sw,
		      opp_str(r->j, "reason") ? opp_str(r->j, "reason") : sw.reason);
}

/* The plan's switches come as the switch file's own format, so they are checked by the same
 * loader; sluiced refuses to loosen a stricter switch in force unless "force" is true. */
static int do_plan_apply(struct ops_req *r)
{
	static struct sw_set in;
	const json_t *arr = json_object_get(r->j, "switches");
	const char *level = opp_str(r->j, "level");
	json_t *file;
	char *text, err[1024], cmd[AUDIT_CMD_LEN], looser[1024] = "";
	size_t len;
	int force = json_is_true(json_object_get(r->j, "force")), rc;

	if (!level || !json_is_array(arr) || !json_array_size(arr)) {
		snprintf(r->msg, sizeof(r->msg), "plan apply: needs \"level\" and \"switches\"");
		return -1;
	}
	file = json_pack("{s:i,s:O}", "version", SW_FILE_VERSION, "switches", arr);
	rc = file ? jsonio_dump_text(file, 0, &text, &len) : -1;
	json_decref(file);
	if (rc) {
		snprintf(r->msg, sizeof(r->msg), "out of memory");
		return -1;
	}
	rc = sw_parse(text, len, "plan apply request", &in, err, sizeof(err));
	free(text);
	if (rc) {
		snprintf(r->msg, sizeof(r->msg), "%s", err);
		return -1;
	}
	/* The request's switches are new ones: they start now by sluiced's clock, with no
	 * renewals, and keep only the time to live the client asked for (at most the maximum).
	 * Taken as sent, a set_at in the future or a renewal count would let a switch live past
	 * what `switch set` ever gives. */
	for (int i = 0; i < in.n; i++) {
		uint64_t ttl = in.sw[i].expires_at - in.sw[i].set_at;   /* > 0: sw_parse checked */
		const char *why = sw_new_text_problem(in.sw[i].reason) ? "reason" :
				  sw_new_text_problem(in.sw[i].owner) ? "owner" :
				  sw_new_text_problem(in.sw[i].runbook) ? "runbook" : NULL;

		if (why) {
			snprintf(r->msg, sizeof(r->msg), "plan apply: %s %s: %s contains control "
				 "characters", in.sw[i].service, sw_class_str(in.sw[i].class), why);
			return -1;
		}

		if (ttl > SW_MAX_TTL_S) {
			snprintf(r->msg, sizeof(r->msg), "plan apply: %s %s lives %llu s, more than "
				 "the most a switch lives (%llu s)", in.sw[i].service,
				 sw_class_str(in.sw[i].class), (unsigned long long)ttl,
				 (unsigned long long)SW_MAX_TTL_S);
			return -1;
		}
		in.sw[i].set_at = r->now;
		in.sw[i].expires_at = r->now + ttl;
		in.sw[i].renewals = 0;
	}
	for (int i = 0; i < in.n; i++) {
		const struct sw_switch *o = active(r, in.sw[i].service, in.sw[i].class);

		if (service_of(r, in.sw[i].service) < 0)
			return -1;
		if (o && o->shed_pct > in.sw[i].shed_pct)
			snprintf(looser + strlen(looser), sizeof(looser) - strlen(looser),
				 "%s%s %s %d%% -> %d%% (by %s)", looser[0] ? ", " : "",
				 o->service, sw_class_str(o->class), o->shed_pct, in.sw[i].shed_pct,
				 o->owner);
	}
	if (looser[0] && !force) {
		snprintf(r->msg, sizeof(r->msg), "level %s would loosen stricter switches in "
			 "force: %s; nothing changed (--force to apply anyway)", level, looser);
		return -1;
	}
	/* Room for all of them, or none is set: a request half applied would answer "nothing
	 * changed" with some of its switches in force. */
	int adding = 0;
	for (int i = 0; i < in.n; i++)
		adding += !sw_set_find(&r->d->sw.set, in.sw[i].service, in.sw[i].class);
	if (room_for(r, adding))
		return -1;
	snprintf(cmd, sizeof(cmd), "plan apply %s", level);
	for (int i = 0; i < in.n; i++) {
		const struct sw_switch *o = sw_set_find(&r->d->sw.set, in.sw[i].service,
							in.sw[i].class);
		struct sw_switch old;

		if (o)
			old = *o;
		if (change(r, cmd, in.sw[i].service, in.sw[i].class, o ? &old : NULL, &in.sw[i],
			   in.sw[i].reason))
			return -1;
	}
	snprintf(r->msg, sizeof(r->msg), "level %s: %d switch%s in force%s%s", level, in.n,
		 in.n == 1 ? "" : "es", looser[0] ? "; loosened (forced): " : "", looser);
	return 0;
}

/* Clear what a plan set: the switches of its actions whose reason says a level of this plan
 * set them ("plan LEVEL: ..."); a switch set by hand on the same class stays. */
static int do_plan_revert(struct ops_req *r)
{
	const json_t *targets = json_object_get(r->j, "targets");
	const json_t *levels = json_object_get(r->j, "levels");
	const char *reason = opp_str(r->j, "reason");
	size_t i, k;
	const json_t *t;
	int n = 0, kept = 0;

	if (!json_is_array(targets) || !json_is_array(levels)) {
		snprintf(r->msg, sizeof(r->msg), "plan revert: needs \"targets\" and \"levels\"");
		return -1;
	}
	json_array_foreach(targets, i, t) {
		const char *svc = opp_str(t, "service");
		int cls = sw_class_parse(opp_str(t, "class") ? opp_str(t, "class") : "");
		const struct sw_switch *o = svc && cls >= 0 ? sw_set_find(&r->d->sw.set, svc, cls) : NULL;
		const json_t *l;
		int ours = 0;
		struct sw_switch old;

		if (!o)
			continue;
		json_array_foreach(levels, k, l) {
			char pre[64];
			snprintf(pre, sizeof(pre), "plan %s:", json_is_string(l) ? json_string_value(l) : "");
			ours |= !strncmp(o->reason, pre, strlen(pre));
		}
		if (!ours) {
			kept++;
			continue;
		}
		old = *o;
		if (change(r, "plan revert", old.service, cls, &old, NULL,
			   reason ? reason : old.reason))
			return -1;
		n++;
	}
	snprintf(r->msg, sizeof(r->msg), "%d switch%s of the plan cleared%s", n, n == 1 ? "" : "es",
		 kept ? "; switches on the same classes set by other means were kept" : "");
	return 0;
}

static int do_breaker_reset(struct ops_req *r)
{
	const char *reason = opp_str(r->j, "reason");
	int i = service_of(r, opp_str(r->j, "service"));
	struct sluice_event_sink sink;
	char why[256];

	if (i < 0)
		return -1;
	sink = daemon_sink(r->d, r->d->cfg.services[i].name);
	snprintf(why, sizeof(why), "operator reset by %s: %s", r->user, reason ? reason : "");
	snprintf(r->msg, sizeof(r->msg), "breaker of %s reset to closed (was %s)",
		 r->d->cfg.services[i].name, sluice_breaker_state_name(r->d->ctl[i].brk.state));
	sluice_breaker_reset(&r->d->ctl[i].brk, r->now_ns, why, &sink);
	sluice_brk_classes_clear(&r->d->ctl[i].brk_cls);   /* the window by class goes with it */
	r->d->books[i].quiet = 0;      /* the next tick runs its controller and writes the verdict */
	if (add_target(r, i, -1))
		return -1;
	return audit_only(r, "breaker reset", r->d->cfg.services[i].name, reason ? reason : "");
}

static int do_cascade_clear(struct ops_req *r)
{
	const char *reason = opp_str(r->j, "reason");
	struct sluice_event_sink sink = daemon_sink(r->d, "");
	char who[256];

	snprintf(who, sizeof(who), "%s (uid %u)%s%s", r->user, (unsigned)r->peer.uid,
		 reason ? ": " : "", reason ? reason : "");
	snprintf(r->msg, sizeof(r->msg), "cascade suppression %s",
		 r->d->cascade.suspended ? "lifted" : "was not active; nothing to lift");
	sluice_cascade_clear(&r->d->cascade, r->now_ns, who, &sink);
	r->c->check_cascade = 1;
	return audit_only(r, "cascade clear", "", reason ? reason : "");
}

static const struct {
	const char *op;
	ops_verb_fn fn;
} verbs[] = {
	{ "switch set", do_switch_set },     { "switch clear", do_switch_clear },
	{ "switch renew", do_switch_renew }, { "plan apply", do_plan_apply },
	{ "plan revert", do_plan_revert },   { "breaker reset", do_breaker_reset },
	{ "cascade clear", do_cascade_clear },
};


ops_verb_fn ops_verb(const char *op)
{
	for (size_t i = 0; op && i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (!strcmp(op, verbs[i].op))
			return verbs[i].fn;
	return NULL;
}
