// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: degradation plans. See plan.h. */
#include "common/errf.h"
#include "ops/plan.h"
#include "common/duration.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- plan loading ---- */

static int valid_level_name(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_' || *s == '.'))
			return 0;
	return 1;
}

/* A date YYYY-MM-DD as midnight UTC. */
static bool get_date(struct ydoc *d, const yaml_node_t *v, const char *key, const char *where,
		     uint64_t *out)
{
	char date[32];

	if (!yget_string(d, v, key, where, date, sizeof(date), false))
		return false;
	if (date_parse_ymd(date, out)) {
		ydoc_bad(d, v, key, where, "not a date YYYY-MM-DD");
		return false;
	}
	return true;
}

static void parse_action(struct ydoc *d, yaml_node_t *a, int idx, const char *level,
			 struct plan_level *lv)
{
	static const char *const keys[] = { "service", "class", "shed", NULL };
	struct plan_action act;
	char what[96], where[100], cls[16];
	yaml_node_t *v;
	int before = d->errs->total;

	snprintf(what, sizeof(what), "action %d of %s", idx + 1, level);
	snprintf(where, sizeof(where), " in %s", what);
	if (ymap_check(d, a, what, keys))
		return;
	memset(&act, 0, sizeof(act));
	act.line = ynode_line(a);
	act.class = -1;
	if ((v = ymap_need(d, a, "service", where, NULL)))
		yget_string(d, v, "service", where, act.service, sizeof(act.service), false);
	if ((v = ymap_need(d, a, "class", where, NULL)) &&
	    yget_string(d, v, "class", where, cls, sizeof(cls), false) &&
	    (act.class = sw_class_parse(cls)) < 0)
		ydoc_bad(d, v, "class", where, "expected L0, L1, L2 or L3");
	if ((v = ymap_need(d, a, "shed", where, "percent 0..100")))
		yget_percent(d, v, "shed", where, &act.shed_pct);
	if (d->errs->total != before)
		return;
	for (int i = 0; i < lv->n_actions; i++) {
		if (!strcmp(lv->actions[i].service, act.service) && lv->actions[i].class == act.class) {
			doc_err(d->errs, a, "%s/%s already has an action in %s (line %d)", act.service,
				sw_class_str(act.class), level, lv->actions[i].line);
			return;
		}
	}
	if (lv->n_actions >= PLAN_MAX_ACTIONS) {
		doc_err(d->errs, a, "more than %d actions in %s", PLAN_MAX_ACTIONS, level);
		return;
	}
	lv->actions[lv->n_actions++] = act;
}

static void parse_approver(struct ydoc *d, yaml_node_t *v, const char *where,
			   struct plan_level *lv)
{
	size_t off = 0;

	lv->approver[0] = 0;
	if (ynode_is_null(v))
		return;
	if (v->type == YAML_SCALAR_NODE) {
		yget_string(d, v, "approver", where, lv->approver, sizeof(lv->approver), true);
		return;
	}
	if (v->type != YAML_SEQUENCE_NODE) {
		ydoc_bad(d, v, "approver", where, "expected a name or a list of names, got %s",
			 ynode_kind(v));
		return;
	}
	for (int i = 0; i < yseq_len(v); i++) {
		yaml_node_t *n = yseq_at(d, v, i);
		char name[PLAN_TEXT_LEN];
		int w;

		if (!yget_string(d, n, "approver", where, name, sizeof(name), true))
			return;
		if (!name[0])
			continue;
		w = snprintf(lv->approver + off, sizeof(lv->approver) - off, "%s%s", off ? ", " : "", name);
		if (w < 0 || (size_t)w >= sizeof(lv->approver) - off) {
			ydoc_bad(d, n, "approver", where, "list too long (at most %zu bytes joined)",
				 sizeof(lv->approver) - 1);
			return;
		}
		off += (size_t)w;
	}
}

/* The level's name, description, saving, reversible, approver and verified_at keys. */
static void parse_level_keys(struct ydoc *d, yaml_node_t *ln, const char *where,
			     struct sluice_plan *p, struct plan_level *lv)
{
	yaml_node_t *v;

	if ((v = ymap_need(d, ln, "name", where, NULL)) &&
	    yget_string(d, v, "name", where, lv->name, sizeof(lv->name), false)) {
		if (!valid_level_name(lv->name))
			ydoc_bad(d, v, "name", where, "use letters, digits, '-', '_' and '.' only");
		for (int i = 0; i < p->n_levels; i++)
			if (!strcmp(p->levels[i].name, lv->name))
				doc_err(d->errs, v, "level \"%s\" defined twice (first at line %d)",
					lv->name, p->levels[i].line);
	}
	if ((v = ymap_get(d, ln, "description")) && !ynode_is_null(v))
		yget_string(d, v, "description", where, lv->description, sizeof(lv->description),
			    true);
	if ((v = ymap_get(d, ln, "expected_saving")) && !ynode_is_null(v))
		yget_string(d, v, "expected_saving", where, lv->expected_saving,
			    sizeof(lv->expected_saving), true);
	if ((v = ymap_need(d, ln, "reversible", where, "true or false")))
		yget_bool(d, v, "reversible", where, &lv->reversible);
	if ((v = ymap_get(d, ln, "approver")))
		parse_approver(d, v, where, lv);
	v = ymap_need(d, ln, "verified_at", where, "drill date YYYY-MM-DD, or null if never drilled");
	if (v && !ynode_is_null(v))
		lv->verified = get_date(d, v, "verified_at", where, &lv->verified_at);
}

static void parse_level(struct ydoc *d, yaml_node_t *ln, struct sluice_plan *p)
{
	static const char *const keys[] = { "name", "description", "actions", "expected_saving",
					    "reversible", "approver", "verified_at", NULL };
	struct plan_level *lv;
	yaml_node_t *v;
	char what[64], where[72];
	const char *name = ynode_scalar(ymap_get(d, ln, "name"));

	if (p->n_levels >= PLAN_MAX_LEVELS) {
		doc_err(d->errs, ln, "more than %d levels", PLAN_MAX_LEVELS);
		return;
	}
	lv = &p->levels[p->n_levels];
	memset(lv, 0, sizeof(*lv));
	lv->line = ynode_line(ln);
	if (name && valid_level_name(name) && strlen(name) < PLAN_NAME_LEN)
		snprintf(what, sizeof(what), "level %s", name);
	else
		snprintf(what, sizeof(what), "level #%d", p->n_levels + 1);
	snprintf(where, sizeof(where), " in %s", what);
	if (ymap_check(d, ln, what, keys) && (!ln || ln->type != YAML_MAPPING_NODE))
		return;
	parse_level_keys(d, ln, where, p, lv);
	v = ymap_need_list(d, ln, "actions", where);
	for (int i = 0; i < yseq_len(v); i++)
		parse_action(d, yseq_at(d, v, i), i, what, lv);
	p->n_levels++;
}

static int drill_days(const struct sluice_plan *p)
{
	return p->max_drill_age_days > 0 ? p->max_drill_age_days : PLAN_STALE_DAYS;
}

int plan_parse(const char *text, size_t len, const char *name, struct sluice_plan *out,
	       struct doc_errors *errs)
{
	static const char *const keys[] = { "service", "owner", "last_reviewed",
					    "max_drill_age_days", "levels", NULL };
	struct ydoc d;
	yaml_node_t *root, *v;

	memset(out, 0, sizeof(*out));
	doc_errors_init(errs, name);
	snprintf(out->file, sizeof(out->file), "%s", name ? name : "<input>");
	out->max_drill_age_days = PLAN_STALE_DAYS;
	if (ydoc_parse(&d, text, len, errs))
		return -1;
	root = ydoc_root(&d);
	if (!root) {
		doc_err(errs, NULL, "empty file: a plan needs at least its levels");
	} else if (!ymap_check(&d, root, NULL, keys) || root->type == YAML_MAPPING_NODE) {
		if ((v = ymap_get(&d, root, "service")) && !ynode_is_null(v))
			yget_string(&d, v, "service", "", out->service, sizeof(out->service), true);
		if ((v = ymap_get(&d, root, "owner")) && !ynode_is_null(v))
			yget_string(&d, v, "owner", "", out->owner, sizeof(out->owner), true);
		if ((v = ymap_get(&d, root, "last_reviewed")) && !ynode_is_null(v))
			out->has_last_reviewed = get_date(&d, v, "last_reviewed", "",
							  &out->last_reviewed);
		if ((v = ymap_get(&d, root, "max_drill_age_days")) && !ynode_is_null(v))
			yget_int(&d, v, "max_drill_age_days", "", 1, 3650, &out->max_drill_age_days);
		v = ymap_need_list(&d, root, "levels", "");
		for (int i = 0; i < yseq_len(v); i++)
			parse_level(&d, yseq_at(&d, v, i), out);
	}
	ydoc_free(&d);
	return errs->n ? -1 : 0;
}

static int plan_parse_text(const char *text, size_t len, const char *name, void *out,
			struct doc_errors *errs)
{
	return plan_parse(text, len, name, out, errs);
}

int plan_load(const char *path, struct sluice_plan *out, struct doc_errors *errs)
{
	memset(out, 0, sizeof(*out));
	return ydoc_load_file(path, plan_parse_text, out, errs);
}

/* ---- review ---- */

const char *plan_finding_name(enum plan_finding_kind k)
{
	switch (k) {
	case PLAN_NEVER_VERIFIED: return "never-verified";
	case PLAN_VERIFY_STALE: return "verification-stale";
	case PLAN_VERIFY_FUTURE: return "verification-in-future";
	case PLAN_IRREVERSIBLE_NO_APPROVER: return "irreversible-without-approver";
	case PLAN_NO_SAVING: return "no-expected-saving";
	case PLAN_UNKNOWN_SERVICE: return "unknown-service";
	case PLAN_SHEDS_ALL_L0: return "sheds-all-L0";
	}
	return "?";
}

static void add_finding(const struct sluice_plan *p, struct plan_finding *out, int max, int *n,
			enum plan_finding_kind k, int level, int line, const char *fmt, ...)
	__attribute__((format(printf, 8, 9)));
static void add_finding(const struct sluice_plan *p, struct plan_finding *out, int max, int *n,
			enum plan_finding_kind k, int level, int line, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	if (out && *n < max) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		out[*n].kind = k;
		out[*n].level = level;
		out[*n].line = line;
		if (snprintf(out[*n].msg, sizeof(out[*n].msg), "%s:%d: level %s: %s [%s]", p->file,
			     line, p->levels[level].name, msg, plan_finding_name(k)) < 0)
			out[*n].msg[0] = 0;
	}
	(*n)++;
}

int plan_check(const struct sluice_plan *p, uint64_t now, const char *const *known, int n_known,
	       struct plan_finding *out, int max)
{
	int n = 0;

	for (int i = 0; i < p->n_levels; i++) {
		const struct plan_level *lv = &p->levels[i];
		char d[SLUICE_ISO_LEN];

		if (!lv->verified) {
			add_finding(p, out, max, &n, PLAN_NEVER_VERIFIED, i, lv->line,
				    "never verified in a drill (verified_at: null); an undrilled "
				    "degradation does not count");
		} else if (lv->verified_at > now) {
			add_finding(p, out, max, &n, PLAN_VERIFY_FUTURE, i, lv->line,
				    "verified_at is in the future");
		} else if (now - lv->verified_at > (uint64_t)drill_days(p) * 86400) {
			time_format_iso(lv->verified_at, d, sizeof(d));
			d[10] = 0;
			add_finding(p, out, max, &n, PLAN_VERIFY_STALE, i, lv->line,
				    "last verified %s, %llu days ago (more than %d): drill it again",
				    d, (unsigned long long)((now - lv->verified_at) / 86400),
				    drill_days(p));
		}
		if (!lv->reversible && !lv->approver[0])
			add_finding(p, out, max, &n, PLAN_IRREVERSIBLE_NO_APPROVER, i, lv->line,
				    "irreversible (reversible: false) but no approver signed it");
		if (!lv->expected_saving[0])
			add_finding(p, out, max, &n, PLAN_NO_SAVING, i, lv->line,
				    "no expected_saving: nobody knows whether it is worth it");
		for (int a = 0; a < lv->n_actions; a++) {
			const struct plan_action *act = &lv->actions[a];
			if (known && n_known >= 0) {
				int found = 0;
				for (int k = 0; k < n_known && !found; k++)
					found = known[k] && !strcmp(known[k], act->service);
				if (!found)
					add_finding(p, out, max, &n, PLAN_UNKNOWN_SERVICE, i, act->line,
						    "service \"%s\" is not configured", act->service);
			}
			if (act->class == SLUICE_L0 && act->shed_pct == 100)
				add_finding(p, out, max, &n, PLAN_SHEDS_ALL_L0, i, act->line,
					    "sheds 100%% of %s/L0: can users still complete the core "
					    "transaction?", act->service);
		}
	}
	return n;
}

int plan_find_level(const struct sluice_plan *p, const char *name)
{
	for (int i = 0; i < p->n_levels; i++)
		if (name && !strcmp(p->levels[i].name, name))
			return i;
	return -1;
}


int plan_level_switches(const struct sluice_plan *p, const char *level, const char *reason,
			const char *ttl, const char *owner, uint64_t now,
			const char *const *known, int n_known,
			struct sw_switch *out, int max, char *err, size_t errlen)
{
	int li = plan_find_level(p, level), n = 0;
	char full_reason[SW_REASON_LEN], why[320], pct[8];

	if (li < 0) {
		char list[256];
		size_t off = 0;
		list[0] = 0;
		for (int i = 0; i < p->n_levels && off < sizeof(list); i++) {
			int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
					 p->levels[i].name);
			if (w < 0)
				break;
			off += (size_t)w;
		}
		return errf(err, errlen, "level \"%s\": no such level in %s (levels: %s)",
			    level ? level : "", p->file, list);
	}
	/* blank counts as empty: "plan L2:   " would pass the switch's own check */
	if (!reason || !reason[strspn(reason, " \t")])
		return errf(err, errlen, "--reason: required and must not be empty "
			    "(say why, e.g. an incident id)");
	if (snprintf(full_reason, sizeof(full_reason), "plan %s: %s", level, reason) >=
	    (int)sizeof(full_reason))
		return errf(err, errlen, "--reason: too long");
	for (int i = 0; i <= li; i++) {
		if (!p->levels[i].reversible && !p->levels[i].approver[0])
			return errf(err, errlen, "level \"%s\"%s is irreversible and has no approver in "
				    "%s: refusing to apply it (fix the plan, or set switches by hand)",
				    p->levels[i].name, i == li ? "" : " (included by this level)", p->file);
	}
	for (int i = 0; i <= li; i++) {
		const struct plan_level *lv = &p->levels[i];
		for (int a = 0; a < lv->n_actions; a++) {
			const struct plan_action *act = &lv->actions[a];
			struct sw_switch sw;
			int j;

			snprintf(pct, sizeof(pct), "%d", act->shed_pct);
			if (sw_make(&sw, act->service, sw_class_str(act->class), pct, full_reason, ttl,
				    owner, now, known, n_known, why, sizeof(why)))
				return errf(err, errlen, "%s:%d: level %s: %s", p->file, act->line,
					    lv->name, why);
			for (j = 0; j < n; j++)
				if (!strcmp(out[j].service, sw.service) && out[j].class == sw.class)
					break;
			if (j == n) {
				if (n >= max)
					return errf(err, errlen, "level %s: more than %d switches", level, max);
				n++;
			}
			out[j] = sw; /* a later level overrides an earlier one */
		}
	}
	return n;
}

int plan_apply_to_set(struct sw_set *set, const struct sw_switch *sw, int n,
		      struct sw_switch *old, int *had_old, char *err, size_t errlen)
{
	int new_keys = 0;
	char why[200];

	for (int i = 0; i < n; i++) {
		if (sw_validate(&sw[i], why, sizeof(why)))
			return errf(err, errlen, "%s/%s: %s", sw[i].service, sw_class_str(sw[i].class), why);
		for (int j = 0; j < i; j++)
			if (!strcmp(sw[j].service, sw[i].service) && sw[j].class == sw[i].class)
				return errf(err, errlen, "%s/%s: listed twice", sw[i].service,
					    sw_class_str(sw[i].class));
		if (!sw_set_find(set, sw[i].service, sw[i].class))
			new_keys++;
	}
	if (set->n + new_keys > SW_MAX)
		return errf(err, errlen, "too many switches: %d in force + %d new > %d", set->n,
			    new_keys, SW_MAX);
	for (int i = 0; i < n; i++) {
		struct sw_switch o;
		int r = sw_set_put(set, &sw[i], &o);
		if (had_old)
			had_old[i] = r == 1;
		if (old) {
			if (r == 1)
				old[i] = o;
			else
				memset(&old[i], 0, sizeof(old[i]));
		}
	}
	return 0;
}

int plan_drill_too_old(const struct sluice_plan *p, int level, uint64_t now, char *why,
		       size_t len)
{
	uint64_t limit = (uint64_t)drill_days(p) * 86400;
	int bad = 0;

	if (why && len)
		why[0] = 0;
	for (int i = 0; i <= level && i < p->n_levels; i++) {
		const struct plan_level *lv = &p->levels[i];
		size_t u = why ? strlen(why) : 0;

		if (lv->verified && lv->verified_at <= now && now - lv->verified_at <= limit)
			continue;
		bad = 1;
		if (!why || u >= len)
			continue;
		if (!lv->verified)
			snprintf(why + u, len - u, "%slevel %s was never drilled", u ? "; " : "",
				 lv->name);
		else
			snprintf(why + u, len - u, "%slevel %s was drilled %llu days ago", u ? "; " : "",
				 lv->name, lv->verified_at > now ? 0ull
				 : (unsigned long long)((now - lv->verified_at) / 86400));
	}
	if (bad && why && strlen(why) < len)
		snprintf(why + strlen(why), len - strlen(why), " (the plan allows %d days)",
			 drill_days(p));
	return bad;
}
