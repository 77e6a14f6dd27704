// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: degradation plans and the YAML helpers shared with budget.c. See plan.h. */
#include "common/errf.h"
#include "ops/plan.h"
#include "common/duration.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- error lists ---- */

void doc_errors_init(struct doc_errors *errs, const char *file)
{
	memset(errs, 0, sizeof(*errs));
	snprintf(errs->file, sizeof(errs->file), "%s", file ? file : "<input>");
}

void doc_err(struct doc_errors *errs, int line, const char *fmt, ...)
{
	va_list ap;

	if (errs->n >= DOC_MAX_ERRORS) {
		errs->dropped++;
		return;
	}
	errs->e[errs->n].line = line;
	va_start(ap, fmt);
	vsnprintf(errs->e[errs->n].msg, sizeof(errs->e[0].msg), fmt, ap);
	va_end(ap);
	errs->n++;
}

void doc_errors_print(FILE *f, const struct doc_errors *errs)
{
	for (int i = 0; i < errs->n; i++) {
		if (errs->e[i].line > 0)
			fprintf(f, "%s:%d: %s\n", errs->file, errs->e[i].line, errs->e[i].msg);
		else
			fprintf(f, "%s: %s\n", errs->file, errs->e[i].msg);
	}
	if (errs->dropped)
		fprintf(f, "%s: %d more errors\n", errs->file, errs->dropped);
}

/* ---- YAML helpers ---- */

int ydoc_load_str(const char *text, size_t len, yaml_document_t *doc, struct doc_errors *errs)
{
	yaml_parser_t parser;

	if (!yaml_parser_initialize(&parser)) {
		doc_err(errs, 0, "cannot initialise the YAML parser");
		return -1;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, doc)) {
		doc_err(errs, (int)parser.problem_mark.line + 1, "YAML syntax error: %s%s%s",
			parser.problem ? parser.problem : "unknown",
			parser.context ? " " : "", parser.context ? parser.context : "");
		yaml_parser_delete(&parser);
		return -1;
	}
	yaml_parser_delete(&parser);
	if (!yaml_document_get_root_node(doc)) {
		doc_err(errs, 0, "empty file");
		yaml_document_delete(doc);
		return -1;
	}
	return 0;
}

int ydoc_read_file(const char *path, char **text, size_t *len, struct doc_errors *errs)
{
	struct stat st;
	size_t off = 0;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		doc_err(errs, 0, "cannot open: %s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > (4 << 20)) {
		doc_err(errs, 0, "not a regular file of at most 4 MiB");
		close(fd);
		return -1;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		doc_err(errs, 0, "out of memory");
		close(fd);
		return -1;
	}
	while (off < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + off, (size_t)st.st_size - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			doc_err(errs, 0, "cannot read: %s", strerror(errno));
			free(buf);
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		off += (size_t)r;
	}
	close(fd);
	buf[off] = 0;
	*text = buf;
	*len = off;
	return 0;
}

int ynode_line(const yaml_node_t *n)
{
	return n ? (int)n->start_mark.line + 1 : 0;
}

static const char *ynode_scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int ynode_is_null(const yaml_node_t *n)
{
	const char *s = ynode_scalar(n);
	if (!s || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	return !*s || !strcmp(s, "null") || !strcmp(s, "~") || !strcmp(s, "Null") ||
	       !strcmp(s, "NULL");
}

int ymap_check(yaml_document_t *doc, yaml_node_t *map, const char *what,
	       const char *const *allowed, struct doc_errors *errs)
{
	int bad = 0;

	if (!map || map->type != YAML_MAPPING_NODE) {
		doc_err(errs, ynode_line(map), "%s: must be a mapping of key: value", what);
		return 1;
	}
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(doc, p->key);
		const char *ks = ynode_scalar(k);
		int ok = 0;

		if (!ks) {
			doc_err(errs, ynode_line(k), "%s: keys must be plain strings", what);
			bad++;
			continue;
		}
		for (const char *const *a = allowed; *a && !ok; a++)
			ok = strcmp(*a, ks) == 0;
		if (!ok) {
			char list[160];
			size_t off = 0;
			list[0] = 0;
			for (const char *const *a = allowed; *a && off < sizeof(list); a++) {
				int n = snprintf(list + off, sizeof(list) - off, "%s%s",
						 a == allowed ? "" : ", ", *a);
				if (n < 0)
					break;
				off += (size_t)n;
			}
			doc_err(errs, ynode_line(k), "%s: unknown key \"%s\" (allowed: %s)", what, ks, list);
			bad++;
			continue;
		}
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			const char *qs = ynode_scalar(yaml_document_get_node(doc, q->key));
			if (qs && !strcmp(qs, ks)) {
				doc_err(errs, ynode_line(k), "%s: duplicate key \"%s\"", what, ks);
				bad++;
				break;
			}
		}
	}
	return bad;
}

yaml_node_t *ymap_get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		const char *ks = ynode_scalar(yaml_document_get_node(doc, p->key));
		if (ks && !strcmp(ks, key))
			return yaml_document_get_node(doc, p->value);
	}
	return NULL;
}

int ynode_str(yaml_node_t *n, const char *what, char *dst, size_t len, struct doc_errors *errs)
{
	const char *s = ynode_scalar(n);
	if (!s) {
		doc_err(errs, ynode_line(n), "%s: must be a string", what);
		return -1;
	}
	if (strlen(s) >= len) {
		doc_err(errs, ynode_line(n), "%s: longer than %zu characters", what, len - 1);
		return -1;
	}
	snprintf(dst, len, "%s", s);
	return 0;
}

int ynode_int(yaml_node_t *n, const char *what, long long lo, long long hi, long long *out,
	      struct doc_errors *errs)
{
	const char *s = ynode_scalar(n), *p;
	long long v = 0;
	int neg = 0;

	if (!s || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || !*s) {
		doc_err(errs, ynode_line(n), "%s: must be an integer", what);
		return -1;
	}
	p = s;
	if (*p == '-') {
		neg = 1;
		p++;
	}
	if (!*p) {
		doc_err(errs, ynode_line(n), "%s: \"%s\" is not an integer", what, s);
		return -1;
	}
	for (; *p; p++) {
		if (*p < '0' || *p > '9') {
			doc_err(errs, ynode_line(n), "%s: \"%s\" is not an integer", what, s);
			return -1;
		}
		if (v > (1LL << 53)) {
			doc_err(errs, ynode_line(n), "%s: %s is out of range %lld..%lld", what, s, lo, hi);
			return -1;
		}
		v = v * 10 + (*p - '0');
	}
	if (neg)
		v = -v;
	if (v < lo || v > hi) {
		doc_err(errs, ynode_line(n), "%s: %s is out of range %lld..%lld", what, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int ynode_bool(yaml_node_t *n, const char *what, int *out, struct doc_errors *errs)
{
	const char *s = ynode_scalar(n);
	if (s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		if (!strcmp(s, "true")) {
			*out = 1;
			return 0;
		}
		if (!strcmp(s, "false")) {
			*out = 0;
			return 0;
		}
	}
	doc_err(errs, ynode_line(n), "%s: must be true or false", what);
	return -1;
}

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

static void parse_action(yaml_document_t *doc, yaml_node_t *a, const char *lname,
			 struct plan_level *lv, struct doc_errors *errs)
{
	static const char *const keys[] = { "service", "class", "shed", NULL };
	struct plan_action act;
	char what[96], cls[16];
	yaml_node_t *v;
	long long pct;
	int before = errs->n + errs->dropped;

	snprintf(what, sizeof(what), "level %s action", lname);
	if (ymap_check(doc, a, what, keys, errs))
		return;
	memset(&act, 0, sizeof(act));
	act.line = ynode_line(a);
	act.class = -1;
	if (!(v = ymap_get(doc, a, "service")))
		doc_err(errs, act.line, "%s: missing \"service\"", what);
	else if (!ynode_str(v, "service", act.service, sizeof(act.service), errs) && !act.service[0])
		doc_err(errs, ynode_line(v), "%s: service must not be empty", what);
	if (!(v = ymap_get(doc, a, "class")))
		doc_err(errs, act.line, "%s: missing \"class\"", what);
	else if (!ynode_str(v, "class", cls, sizeof(cls), errs) && (act.class = sw_class_parse(cls)) < 0)
		doc_err(errs, ynode_line(v), "%s: unknown class \"%s\" (use L0, L1, L2 or L3)", what, cls);
	if (!(v = ymap_get(doc, a, "shed")))
		doc_err(errs, act.line, "%s: missing \"shed\" (percent 0..100)", what);
	else if (!ynode_int(v, "shed (percent)", 0, 100, &pct, errs))
		act.shed_pct = (int)pct;
	if (errs->n + errs->dropped != before)
		return;
	for (int i = 0; i < lv->n_actions; i++) {
		if (!strcmp(lv->actions[i].service, act.service) && lv->actions[i].class == act.class) {
			doc_err(errs, act.line, "%s: %s/%s already has an action in this level (line %d)",
				what, act.service, sw_class_str(act.class), lv->actions[i].line);
			return;
		}
	}
	if (lv->n_actions >= PLAN_MAX_ACTIONS) {
		doc_err(errs, act.line, "%s: more than %d actions", what, PLAN_MAX_ACTIONS);
		return;
	}
	lv->actions[lv->n_actions++] = act;
}

static void parse_approver(yaml_document_t *doc, yaml_node_t *v, struct plan_level *lv,
			   struct doc_errors *errs)
{
	size_t off = 0;

	lv->approver[0] = 0;
	if (ynode_is_null(v))
		return;
	if (v->type == YAML_SCALAR_NODE) {
		ynode_str(v, "approver", lv->approver, sizeof(lv->approver), errs);
		return;
	}
	if (v->type != YAML_SEQUENCE_NODE) {
		doc_err(errs, ynode_line(v), "approver: must be a name or a list of names");
		return;
	}
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
		yaml_node_t *n = yaml_document_get_node(doc, *it);
		char name[PLAN_TEXT_LEN];
		int w;

		if (ynode_str(n, "approver", name, sizeof(name), errs))
			return;
		if (!name[0])
			continue;
		w = snprintf(lv->approver + off, sizeof(lv->approver) - off, "%s%s", off ? ", " : "", name);
		if (w < 0 || (size_t)w >= sizeof(lv->approver) - off) {
			doc_err(errs, ynode_line(n), "approver: list too long");
			return;
		}
		off += (size_t)w;
	}
}

static void parse_level(yaml_document_t *doc, yaml_node_t *ln, struct sluice_plan *p,
			struct doc_errors *errs)
{
	static const char *const keys[] = { "name", "description", "actions", "expected_saving",
					    "reversible", "approver", "verified_at", NULL };
	struct plan_level *lv;
	yaml_node_t *v;
	char what[64], date[32];
	int line = ynode_line(ln);

	if (p->n_levels >= PLAN_MAX_LEVELS) {
		doc_err(errs, line, "more than %d levels", PLAN_MAX_LEVELS);
		return;
	}
	lv = &p->levels[p->n_levels];
	memset(lv, 0, sizeof(*lv));
	lv->line = line;
	snprintf(what, sizeof(what), "level #%d", p->n_levels + 1);
	v = ymap_get(doc, ln, "name");
	if (v && v->type == YAML_SCALAR_NODE && valid_level_name((const char *)v->data.scalar.value) &&
	    strlen((const char *)v->data.scalar.value) < PLAN_NAME_LEN)
		snprintf(what, sizeof(what), "level %s", (const char *)v->data.scalar.value);
	if (ymap_check(doc, ln, what, keys, errs) && (!ln || ln->type != YAML_MAPPING_NODE))
		return;

	if (!(v = ymap_get(doc, ln, "name"))) {
		doc_err(errs, line, "%s: missing \"name\"", what);
	} else if (!ynode_str(v, "name", lv->name, sizeof(lv->name), errs)) {
		if (!valid_level_name(lv->name))
			doc_err(errs, ynode_line(v), "level name \"%s\": use letters, digits, '-', '_', '.'",
				lv->name);
		for (int i = 0; i < p->n_levels; i++)
			if (!strcmp(p->levels[i].name, lv->name))
				doc_err(errs, ynode_line(v), "level \"%s\" defined twice (first at line %d)",
					lv->name, p->levels[i].line);
	}
	if ((v = ymap_get(doc, ln, "description")) && !ynode_is_null(v))
		ynode_str(v, "description", lv->description, sizeof(lv->description), errs);
	if ((v = ymap_get(doc, ln, "expected_saving")) && !ynode_is_null(v))
		ynode_str(v, "expected_saving", lv->expected_saving, sizeof(lv->expected_saving), errs);
	if (!(v = ymap_get(doc, ln, "reversible")))
		doc_err(errs, line, "%s: missing \"reversible\" (true or false)", what);
	else
		ynode_bool(v, "reversible", &lv->reversible, errs);
	if ((v = ymap_get(doc, ln, "approver")))
		parse_approver(doc, v, lv, errs);
	if (!(v = ymap_get(doc, ln, "verified_at"))) {
		doc_err(errs, line, "%s: missing \"verified_at\" (drill date YYYY-MM-DD, or null if "
			"never drilled)", what);
	} else if (!ynode_is_null(v)) {
		if (!ynode_str(v, "verified_at", date, sizeof(date), errs)) {
			if (date_parse_ymd(date, &lv->verified_at))
				doc_err(errs, ynode_line(v), "verified_at: \"%s\" is not a date YYYY-MM-DD",
					date);
			else
				lv->verified = 1;
		}
	}
	if (!(v = ymap_get(doc, ln, "actions"))) {
		doc_err(errs, line, "%s: missing \"actions\"", what);
	} else if (v->type != YAML_SEQUENCE_NODE) {
		doc_err(errs, ynode_line(v), "%s: actions must be a list", what);
	} else {
		for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++)
			parse_action(doc, yaml_document_get_node(doc, *it), lv->name[0] ? lv->name : what + 6,
				     lv, errs);
		if (v->data.sequence.items.start == v->data.sequence.items.top)
			doc_err(errs, ynode_line(v), "%s: actions must not be empty", what);
	}
	p->n_levels++;
}

int plan_parse(const char *text, size_t len, const char *name, struct sluice_plan *out,
	       struct doc_errors *errs)
{
	static const char *const keys[] = { "service", "owner", "last_reviewed", "levels", NULL };
	yaml_document_t doc;
	yaml_node_t *root, *v;
	char date[32];

	memset(out, 0, sizeof(*out));
	doc_errors_init(errs, name);
	snprintf(out->file, sizeof(out->file), "%s", name ? name : "<input>");
	if (ydoc_load_str(text, len, &doc, errs))
		return -1;
	root = yaml_document_get_root_node(&doc);
	if (ymap_check(&doc, root, "plan", keys, errs) && root->type != YAML_MAPPING_NODE)
		goto done;
	if ((v = ymap_get(&doc, root, "service")) && !ynode_is_null(v))
		ynode_str(v, "service", out->service, sizeof(out->service), errs);
	if ((v = ymap_get(&doc, root, "owner")) && !ynode_is_null(v))
		ynode_str(v, "owner", out->owner, sizeof(out->owner), errs);
	if ((v = ymap_get(&doc, root, "last_reviewed")) && !ynode_is_null(v)) {
		if (!ynode_str(v, "last_reviewed", date, sizeof(date), errs)) {
			if (date_parse_ymd(date, &out->last_reviewed))
				doc_err(errs, ynode_line(v), "last_reviewed: \"%s\" is not a date YYYY-MM-DD",
					date);
			else
				out->has_last_reviewed = 1;
		}
	}
	v = ymap_get(&doc, root, "levels");
	if (!v) {
		doc_err(errs, ynode_line(root), "plan: missing \"levels\"");
	} else if (v->type != YAML_SEQUENCE_NODE || v->data.sequence.items.start == v->data.sequence.items.top) {
		doc_err(errs, ynode_line(v), "levels: must be a non-empty list");
	} else {
		for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++)
			parse_level(&doc, yaml_document_get_node(&doc, *it), out, errs);
	}
done:
	yaml_document_delete(&doc);
	return errs->n || errs->dropped ? -1 : 0;
}

int plan_load(const char *path, struct sluice_plan *out, struct doc_errors *errs)
{
	char *text;
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	doc_errors_init(errs, path);
	if (ydoc_read_file(path, &text, &len, errs))
		return -1;
	rc = plan_parse(text, len, path, out, errs);
	free(text);
	return rc;
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
		} else if (now - lv->verified_at > (uint64_t)PLAN_STALE_DAYS * 86400) {
			time_format_iso(lv->verified_at, d, sizeof(d));
			d[10] = 0;
			add_finding(p, out, max, &n, PLAN_VERIFY_STALE, i, lv->line,
				    "last verified %s, %llu days ago (more than %d): drill it again",
				    d, (unsigned long long)((now - lv->verified_at) / 86400),
				    PLAN_STALE_DAYS);
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
	if (!reason || !*reason)
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
