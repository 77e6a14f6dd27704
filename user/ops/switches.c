// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: manual degradation switches. See switches.h. */
#define _GNU_SOURCE   /* renameat2 */
#include "common/errf.h"
#include "ops/switches.h"
#include "common/duration.h"

#include "common/names.h"
#include "common/jsonio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>


int sw_class_parse(const char *s)
{
	return sluice_class_from_name(s);
}

const char *sw_class_str(int cls)
{
	return cls >= 0 && cls < SLUICE_NUM_CLASSES ? sluice_class_name(cls) : "L?";
}

static int has_ctrl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* 1 when s is text the JSON of the socket, the switch file and the audit log can carry:
 * jansson's own UTF-8 check (no overlong forms, no surrogates, nothing past U+10FFFF). A
 * string it refuses would be a request or record built without that field. */
static int utf8_ok(const char *s)
{
	json_t *j = json_string(s);

	json_decref(j);
	return j != NULL;
}

const char *sw_text_problem(const char *s)
{
	if (has_ctrl(s))
		return "contains control characters";
	if (!utf8_ok(s))
		return "is not valid UTF-8";
	return NULL;
}

/* 1 when valid UTF-8 text s holds a C1 control (U+0080..U+009F: U+009B is a terminal's CSI,
 * as ESC [ is), a line or paragraph separator (U+2028, U+2029: a line break to a log viewer)
 * or a bidirectional embedding, override or isolate (U+202A..U+202E, U+2066..U+2069: they
 * reorder what a terminal shows of the rest of the line). Their lead bytes never occur
 * inside another character, so the bytes are matched as they are. */
static int has_display_control(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	for (; *p; p++) {
		if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			return 1;
		if (p[0] == 0xe2 && p[1] == 0x80 && p[2] >= 0xa8 && p[2] <= 0xae)
			return 1;
		if (p[0] == 0xe2 && p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9)
			return 1;
	}
	return 0;
}

const char *sw_new_text_problem(const char *s)
{
	const char *why = sw_text_problem(s);

	if (!why && has_display_control(s))
		why = "contains control characters";
	return why;
}

static int blank(const char *s)
{
	for (; *s; s++)
		if (*s != ' ' && *s != '\t')
			return 0;
	return 1;
}

static int check_service_name(const char *service, char *err, size_t errlen)
{
	if (!service || !*service)
		return errf(err, errlen, "service: must not be empty");
	if (strlen(service) >= SLUICE_NAME_LEN)
		return errf(err, errlen, "service \"%s\": longer than %d characters", service,
			    SLUICE_NAME_LEN - 1);
	if (has_ctrl(service) || strchr(service, ' ') || strchr(service, '/'))
		return errf(err, errlen, "service \"%s\": contains spaces, '/' or control characters",
			    service);
	return 0;
}

int sw_check_target(const char *service, const char *class_name,
		    const char *const *known, int n_known, int *cls, char *err, size_t errlen)
{
	int c;

	if (check_service_name(service, err, errlen))
		return -1;
	if (known && n_known >= 0) {
		int found = 0;
		size_t off;
		char list[512];

		for (int i = 0; i < n_known && !found; i++)
			found = known[i] && strcmp(known[i], service) == 0;
		if (!found) {
			list[0] = 0;
			off = 0;
			for (int i = 0; i < n_known && off < sizeof(list); i++) {
				int n = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
						 known[i] ? known[i] : "?");
				if (n < 0)
					break;
				off += (size_t)n;
			}
			return errf(err, errlen, "service \"%s\": unknown service (configured: %s)",
				    service, n_known ? list : "none");
		}
	}
	c = sw_class_parse(class_name);
	if (c < 0)
		return errf(err, errlen, "class \"%s\": unknown class (use L0, L1, L2 or L3)",
			    class_name ? class_name : "");
	if (cls)
		*cls = c;
	return 0;
}

static const char *const kind_names[] = { "ops", "release", "experiment" };

int sw_kind_parse(const char *s)
{
	for (int i = 0; s && i < 3; i++)
		if (!strcmp(s, kind_names[i]))
			return i;
	return -1;
}

const char *sw_kind_str(int kind)
{
	return kind >= 0 && kind < 3 ? kind_names[kind] : "?";
}

int sw_set_ledger(struct sw_switch *sw, const char *kind, const char *runbook, char *err,
		  size_t errlen)
{
	if (kind) {
		int k = sw_kind_parse(kind);
		if (k < 0)
			return errf(err, errlen, "--kind \"%s\": must be ops, release or experiment",
				    kind);
		sw->kind = k;
	}
	if (runbook) {
		if (strlen(runbook) >= SW_RUNBOOK_LEN)
			return errf(err, errlen, "--runbook: longer than %d bytes",
				    SW_RUNBOOK_LEN - 1);
		if (sw_new_text_problem(runbook))
			return errf(err, errlen, "--runbook: %s", sw_new_text_problem(runbook));
		snprintf(sw->runbook, sizeof(sw->runbook), "%s", runbook);
	}
	return 0;
}

int sw_renew(struct sw_switch *sw, const char *ttl, int max_renewals, uint64_t now, char *err,
	     size_t errlen)
{
	char derr[160], maxbuf[24];
	uint64_t ttl_s;

	if (!ttl || !*ttl)
		return errf(err, errlen, "--ttl: required (the new time left, e.g. 30m)");
	if (duration_parse(ttl, &ttl_s, derr, sizeof(derr)))
		return errf(err, errlen, "--ttl: %s", derr);
	if (ttl_s > SW_MAX_TTL_S)
		return errf(err, errlen, "--ttl \"%s\": longer than the maximum %s", ttl,
			    duration_format(SW_MAX_TTL_S, maxbuf, sizeof(maxbuf)));
	if (sw->expires_at <= now)
		return errf(err, errlen, "switch %s/%s has expired: set it anew with a reason",
			    sw->service, sw_class_str(sw->class));
	/* The wall clock stepped back (NTP) past the switch's own start: a new expiry of now +
	 * ttl would come before set_at, a switch the file and the table refuse. Say so here. */
	if (now + ttl_s <= sw->set_at) {
		char at[SLUICE_ISO_LEN];
		return errf(err, errlen, "switch %s/%s was set at %s, later than the clock reads "
			    "now plus --ttl (the wall clock was stepped back): set it anew with a "
			    "reason", sw->service, sw_class_str(sw->class),
			    time_format_iso(sw->set_at, at, sizeof(at)));
	}
	if (sw->renewals >= max_renewals)
		return errf(err, errlen, "switch %s/%s was renewed %d time%s already (limit %d): "
			    "set it anew with a fresh reason, or clear it", sw->service,
			    sw_class_str(sw->class), sw->renewals, sw->renewals == 1 ? "" : "s",
			    max_renewals);
	sw->expires_at = now + ttl_s;
	sw->renewals++;
	return 0;
}

int sw_validate(const struct sw_switch *sw, char *err, size_t errlen)
{
	if (check_service_name(sw->service, err, errlen))
		return -1;
	if (sw->class < 0 || sw->class >= SLUICE_NUM_CLASSES)
		return errf(err, errlen, "class: %d is not L0..L3", sw->class);
	if (sw->shed_pct < 0 || sw->shed_pct > 100)
		return errf(err, errlen, "shed_pct: %d is outside 0..100", sw->shed_pct);
	if (!sw->reason[0] || blank(sw->reason))
		return errf(err, errlen, "reason: must not be empty (say why, e.g. an incident id)");
	if (sw_text_problem(sw->reason))
		return errf(err, errlen, "reason: %s", sw_text_problem(sw->reason));
	if (!sw->owner[0] || blank(sw->owner))
		return errf(err, errlen, "owner: must not be empty");
	if (sw_text_problem(sw->owner))
		return errf(err, errlen, "owner: %s", sw_text_problem(sw->owner));
	if (sw->expires_at <= sw->set_at)
		return errf(err, errlen, "expires_at: must be later than set_at (ttl > 0)");
	if (sw->expires_at > SW_MAX_TIME)
		return errf(err, errlen, "expires_at: %llu is after the year 9999 (seconds since "
			    "the epoch, not milliseconds)", (unsigned long long)sw->expires_at);
	/* Each set or renewal gives at most SW_MAX_TTL_S from its own moment, which is before
	 * the expiry it extends: a switch never lives past set_at + (renewals + 1) x the
	 * maximum. A later expiry (a hand-edited file, a raw plan request) is a permanent
	 * switch, which the TTL rule exists to rule out. */
	if (sw->renewals >= 0 &&
	    sw->expires_at - sw->set_at > ((uint64_t)sw->renewals + 1) * SW_MAX_TTL_S)
		return errf(err, errlen, "expires_at: more than 30 days after set_at (%d "
			    "renewal%s): no switch lives longer", sw->renewals,
			    sw->renewals == 1 ? "" : "s");
	if (sw->kind < 0 || sw->kind > SW_KIND_EXPERIMENT)
		return errf(err, errlen, "kind: must be ops, release or experiment");
	if (sw_text_problem(sw->runbook))
		return errf(err, errlen, "runbook: %s", sw_text_problem(sw->runbook));
	if (sw->renewals < 0)
		return errf(err, errlen, "renewals: must not be negative");
	return 0;
}

int sw_make(struct sw_switch *out, const char *service, const char *class_name,
	    const char *shed, const char *reason, const char *ttl, const char *owner,
	    uint64_t now, const char *const *known, int n_known, char *err, size_t errlen)
{
	char derr[160], maxbuf[24];
	uint64_t ttl_s;
	long pct = 0;
	const char *p;
	int cls;

	memset(out, 0, sizeof(*out));
	if (sw_check_target(service, class_name, known, n_known, &cls, err, errlen))
		return -1;
	if (!shed || !*shed)
		return errf(err, errlen, "--shed: required (percent of the class to shed, 0..100)");
	for (p = shed; *p >= '0' && *p <= '9'; p++) {
		pct = pct * 10 + (*p - '0');
		if (pct > 1000)
			pct = 1001; /* saturate: reported as out of range below */
	}
	if (p == shed || (*p && !(*p == '%' && p[1] == 0)))
		return errf(err, errlen, "--shed \"%s\": not a whole percentage 0..100", shed);
	if (pct > 100)
		return errf(err, errlen, "--shed \"%s\": must be between 0 and 100", shed);
	if (!reason || !*reason || blank(reason))
		return errf(err, errlen, "--reason: required and must not be empty "
			    "(say why, e.g. an incident id)");
	if (strlen(reason) >= SW_REASON_LEN)
		return errf(err, errlen, "--reason: longer than %d bytes", SW_REASON_LEN - 1);
	if (sw_new_text_problem(reason))
		return errf(err, errlen, "--reason: %s", sw_new_text_problem(reason));
	if (!ttl || !*ttl)
		return errf(err, errlen, "--ttl: required (every switch expires; e.g. 30m, 2h)");
	if (duration_parse(ttl, &ttl_s, derr, sizeof(derr)))
		return errf(err, errlen, "--ttl: %s", derr);
	if (ttl_s > SW_MAX_TTL_S)
		return errf(err, errlen, "--ttl \"%s\": longer than the maximum %s; renew instead",
			    ttl, duration_format(SW_MAX_TTL_S, maxbuf, sizeof(maxbuf)));
	if (!owner || !*owner || blank(owner))
		return errf(err, errlen, "--owner: must not be empty");
	if (strlen(owner) >= SW_OWNER_LEN)
		return errf(err, errlen, "--owner: longer than %d bytes", SW_OWNER_LEN - 1);
	if (sw_new_text_problem(owner))
		return errf(err, errlen, "--owner: %s", sw_new_text_problem(owner));

	snprintf(out->service, sizeof(out->service), "%s", service);
	out->class = cls;
	out->shed_pct = (int)pct;
	snprintf(out->reason, sizeof(out->reason), "%s", reason);
	snprintf(out->owner, sizeof(out->owner), "%s", owner);
	out->set_at = now;
	out->expires_at = now + ttl_s;
	return sw_validate(out, err, errlen);
}

int sw_equal(const struct sw_switch *a, const struct sw_switch *b)
{
	if (!a || !b)
		return a == b;
	return !strcmp(a->service, b->service) && a->class == b->class &&
	       a->shed_pct == b->shed_pct && !strcmp(a->reason, b->reason) &&
	       !strcmp(a->owner, b->owner) && a->set_at == b->set_at &&
	       a->expires_at == b->expires_at && a->kind == b->kind &&
	       !strcmp(a->runbook, b->runbook) && a->renewals == b->renewals;
}

void sw_set_init(struct sw_set *s)
{
	s->n = 0;
}

static int cmp_key(const char *svc_a, int cls_a, const char *svc_b, int cls_b)
{
	int c = strcmp(svc_a, svc_b);
	return c ? c : (cls_a > cls_b) - (cls_a < cls_b);
}

/* Index of (service, cls) or, when absent, -(insertion point) - 1. */
static int find_idx(const struct sw_set *s, const char *service, int cls)
{
	int lo = 0, hi = s->n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		int c = cmp_key(s->sw[mid].service, s->sw[mid].class, service, cls);
		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -lo - 1;
}

const struct sw_switch *sw_set_find(const struct sw_set *s, const char *service, int cls)
{
	int i = find_idx(s, service, cls);
	return i >= 0 ? &s->sw[i] : NULL;
}

int sw_set_put(struct sw_set *s, const struct sw_switch *sw, struct sw_switch *old)
{
	int i;

	if (sw_validate(sw, NULL, 0))
		return -1;
	i = find_idx(s, sw->service, sw->class);
	if (i >= 0) {
		if (old)
			*old = s->sw[i];
		s->sw[i] = *sw;
		return 1;
	}
	if (s->n >= SW_MAX)
		return -1;
	i = -i - 1;
	memmove(&s->sw[i + 1], &s->sw[i], (size_t)(s->n - i) * sizeof(s->sw[0]));
	s->sw[i] = *sw;
	s->n++;
	return 0;
}

int sw_set_clear(struct sw_set *s, const char *service, int cls, struct sw_switch *old)
{
	int i = find_idx(s, service, cls);
	if (i < 0)
		return 0;
	if (old)
		*old = s->sw[i];
	memmove(&s->sw[i], &s->sw[i + 1], (size_t)(s->n - i - 1) * sizeof(s->sw[0]));
	s->n--;
	return 1;
}

int sw_set_expire(struct sw_set *s, uint64_t now, struct sw_switch *expired, int max)
{
	int w = 0, removed = 0;

	for (int r = 0; r < s->n; r++) {
		if (s->sw[r].expires_at <= now) {
			if (expired && removed < max)
				expired[removed] = s->sw[r];
			removed++;
			continue;
		}
		if (w != r)
			s->sw[w] = s->sw[r];
		w++;
	}
	s->n = w;
	return removed;
}

uint32_t sw_shed_ratio(const struct sw_set *s, const char *service, int cls, uint64_t now)
{
	const struct sw_switch *sw = sw_set_find(s, service, cls);
	if (!sw || sw->expires_at <= now || sw->shed_pct <= 0)
		return 0;
	if (sw->shed_pct >= 100)
		return SLUICE_PROB_ONE;
	return (uint32_t)(((uint64_t)sw->shed_pct * SLUICE_PROB_ONE + 50) / 100);
}

uint32_t sw_admit_ratio(const struct sw_set *s, const char *service, int cls, uint64_t now)
{
	return SLUICE_PROB_ONE - sw_shed_ratio(s, service, cls, now);
}

/* ---- persistence ---- */

#define LOUD_TAIL "; ignoring it: NO switches are in force, all traffic is treated normally"

static int get_str(const json_t *o, const char *k, char *dst, size_t dstlen,
		   int idx, char *err, size_t errlen)
{
	const json_t *v = json_object_get(o, k);
	if (!v)
		return errf(err, errlen, "switch #%d: missing \"%s\"", idx, k);
	if (!json_is_string(v))
		return errf(err, errlen, "switch #%d: \"%s\" must be a string, not %s",
			    idx, k, jsonio_type_name(v));
	if (json_string_length(v) >= dstlen)
		return errf(err, errlen, "switch #%d: \"%s\" is too long", idx, k);
	snprintf(dst, dstlen, "%s", json_string_value(v));
	return 0;
}

static int get_int(const json_t *o, const char *k, int64_t lo, int64_t hi, int64_t *out,
		   int idx, char *err, size_t errlen)
{
	const json_t *v = json_object_get(o, k);
	if (!v)
		return errf(err, errlen, "switch #%d: missing \"%s\"", idx, k);
	if (!json_is_integer(v))
		return errf(err, errlen, "switch #%d: \"%s\" must be an integer, not %s",
			    idx, k, jsonio_type_name(v));
	if (json_integer_value(v) < lo || json_integer_value(v) > hi)
		return errf(err, errlen, "switch #%d: \"%s\" = %lld is out of range",
			    idx, k, (long long)json_integer_value(v));
	*out = json_integer_value(v);
	return 0;
}

static int parse_switch(const json_t *o, int idx, struct sw_switch *sw, char *err, size_t errlen)
{
	static const char *const keys[] = { "service", "class", "shed_pct", "reason", "owner",
					    "set_at", "expires_at", "kind", "runbook", "renewals" };
	char cls[8], verr[160];
	const char *key;
	const json_t *m;
	int64_t v;

	if (!json_is_object(o))
		return errf(err, errlen, "switch #%d: must be an object, not %s", idx,
			    jsonio_type_name(o));
	json_object_foreach((json_t *)o, key, m) {
		int ok = 0;
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			ok |= strcmp(key, keys[k]) == 0;
		if (!ok)
			return errf(err, errlen, "switch #%d: unknown key \"%s\"", idx, key);
	}
	memset(sw, 0, sizeof(*sw));
	if (get_str(o, "service", sw->service, sizeof(sw->service), idx, err, errlen) ||
	    get_str(o, "class", cls, sizeof(cls), idx, err, errlen))
		return -1;
	sw->class = sw_class_parse(cls);
	if (sw->class < 0)
		return errf(err, errlen, "switch #%d: unknown class \"%s\" (L0..L3)", idx, cls);
	if (get_int(o, "shed_pct", 0, 100, &v, idx, err, errlen))
		return -1;
	sw->shed_pct = (int)v;
	if (get_str(o, "reason", sw->reason, sizeof(sw->reason), idx, err, errlen) ||
	    get_str(o, "owner", sw->owner, sizeof(sw->owner), idx, err, errlen))
		return -1;
	if (get_int(o, "set_at", 0, INT64_MAX, &v, idx, err, errlen))
		return -1;
	sw->set_at = (uint64_t)v;
	if (get_int(o, "expires_at", 0, INT64_MAX, &v, idx, err, errlen))
		return -1;
	sw->expires_at = (uint64_t)v;
	/* The ledger fields are optional: a file from before them, or written by hand. */
	if (json_object_get(o, "kind")) {
		char kind[16];
		if (get_str(o, "kind", kind, sizeof(kind), idx, err, errlen))
			return -1;
		if ((sw->kind = sw_kind_parse(kind)) < 0)
			return errf(err, errlen, "switch #%d: unknown kind \"%s\" (ops, release, "
				    "experiment)", idx, kind);
	}
	if (json_object_get(o, "runbook") &&
	    get_str(o, "runbook", sw->runbook, sizeof(sw->runbook), idx, err, errlen))
		return -1;
	if (json_object_get(o, "renewals")) {
		if (get_int(o, "renewals", 0, 1000000, &v, idx, err, errlen))
			return -1;
		sw->renewals = (int)v;
	}
	if (sw_validate(sw, verr, sizeof(verr)))
		return errf(err, errlen, "switch #%d (%s/%s): %s", idx, sw->service, cls, verr);
	return 0;
}

/* The top level: {"version": 1, "switches": [...]} and nothing else. */
static int check_top(const json_t *root, char *why, size_t whylen)
{
	const json_t *ver, *arr, *m;
	const char *key;

	if (!json_is_object(root))
		return errf(why, whylen, "top level must be an object");
	json_object_foreach((json_t *)root, key, m) {
		if (strcmp(key, "version") && strcmp(key, "switches"))
			return errf(why, whylen, "unknown key \"%s\" at top level", key);
	}
	ver = json_object_get(root, "version");
	if (!json_is_integer(ver) || json_integer_value(ver) != SW_FILE_VERSION)
		return errf(why, whylen, "\"version\" must be the integer %d", SW_FILE_VERSION);
	arr = json_object_get(root, "switches");
	if (!json_is_array(arr))
		return errf(why, whylen, "\"switches\" must be an array");
	return 0;
}

/* The file is there but its content could not be had (out of descriptors or memory, an I/O
 * error, no permission): nothing is known of it, so it is not damaged either. */
static int unreadable(const char *path, int e, char *err, size_t errlen)
{
	errf(err, errlen, "ERROR: switch file %s cannot be read (%s)" LOUD_TAIL, path,
	     strerror(e));
	return SW_LOAD_UNREADABLE;
}

int sw_parse(const char *text, size_t len, const char *name, struct sw_set *out,
	     char *err, size_t errlen)
{
	char why[256];
	json_t *root;
	const json_t *e;
	size_t i;

	sw_set_init(out);
	if (err && errlen)
		err[0] = 0;
	root = jsonio_parse(text, len, why, sizeof(why));
	if (!root && errno == ENOMEM)
		return unreadable(name, ENOMEM, err, errlen);
	if (!root) {
		int empty = 1;
		for (size_t k = 0; k < len && empty; k++)
			empty = text[k] == ' ' || text[k] == '\n' || text[k] == '\t' || text[k] == '\r';
		if (empty)
			return errf(err, errlen, "ERROR: switch file %s is empty" LOUD_TAIL, name);
		return errf(err, errlen, "ERROR: switch file %s is corrupt (%s)" LOUD_TAIL, name, why);
	}
	if (check_top(root, why, sizeof(why)))
		goto bad;
	json_array_foreach(json_object_get(root, "switches"), i, e) {
		struct sw_switch sw;
		int idx = (int)i + 1;

		if (parse_switch(e, idx, &sw, why, sizeof(why)))
			goto bad;
		if (sw_set_find(out, sw.service, sw.class)) {
			snprintf(why, sizeof(why), "switch #%d: second switch for %s/%s", idx,
				 sw.service, sw_class_str(sw.class));
			goto bad;
		}
		if (sw_set_put(out, &sw, NULL) < 0) {
			snprintf(why, sizeof(why), "more than %d switches", SW_MAX);
			goto bad;
		}
	}
	json_decref(root);
	return 0;
bad:
	json_decref(root);
	sw_set_init(out);
	return errf(err, errlen, "ERROR: switch file %s is corrupt (%s)" LOUD_TAIL, name, why);
}

#define SW_MAX_FILE (4u << 20)

void (*sw_after_read_hook)(const char *path);

int sw_load(const char *path, struct sw_set *out, char *err, size_t errlen)
{
	struct stat seen;

	return sw_load_seen(path, out, &seen, err, errlen);
}

int sw_load_seen(const char *path, struct sw_set *out, struct stat *seen, char *err,
		 size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	struct stat st;
	int fd, rc;

	memset(seen, 0, sizeof(*seen));
	sw_set_init(out);
	if (err && errlen)
		err[0] = 0;
	/* O_NONBLOCK: a FIFO at the path must reach the "not a regular file" check below, not
	 * wait in open() for a writer that never comes (it means nothing to a regular file). */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return unreadable(path, errno, err, errlen);
	}
	if (fstat(fd, &st)) {
		int e = errno;
		close(fd);
		return unreadable(path, e, err, errlen);
	}
	*seen = st;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > SW_MAX_FILE) {
		close(fd);
		return errf(err, errlen, "ERROR: switch file %s cannot be read (%s)" LOUD_TAIL, path,
			    !S_ISREG(st.st_mode) ? "not a regular file" : "larger than 4 MiB");
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return unreadable(path, ENOMEM, err, errlen);
	}
	while (len < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + len, (size_t)st.st_size - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return unreadable(path, e, err, errlen);
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (sw_after_read_hook)
		sw_after_read_hook(path);
	rc = sw_parse(buf, len, path, out, err, errlen);
	free(buf);
	return rc;
}

json_t *sw_switch_json(const struct sw_switch *sw)
{
	return json_pack("{s:s,s:s,s:i,s:s,s:s,s:I,s:I,s:s,s:s,s:i}", "service", sw->service,
			 "class", sw_class_str(sw->class), "shed_pct", sw->shed_pct,
			 "reason", sw->reason, "owner", sw->owner,
			 "set_at", (json_int_t)sw->set_at, "expires_at", (json_int_t)sw->expires_at,
			 "kind", sw_kind_str(sw->kind), "runbook", sw->runbook,
			 "renewals", sw->renewals);
}

int sw_serialize(const struct sw_set *s, char **out, size_t *outlen)
{
	json_t *arr = json_array(), *root;
	int rc;

	for (int i = 0; i < s->n; i++)
		json_array_append_new(arr, sw_switch_json(&s->sw[i]));
	root = json_pack("{s:i,s:o}", "version", SW_FILE_VERSION, "switches", arr);
	/* indented: operators read and diff this file */
	rc = root && json_array_size(arr) == (size_t)s->n ?
		jsonio_dump_text(root, JSON_INDENT(2), out, outlen) : -1;
	json_decref(root);
	return rc;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

void (*sw_after_save_hook)(const char *path);

int sw_save(const char *path, const struct sw_set *s, char *err, size_t errlen)
{
	struct stat written;

	return sw_save_seen(path, s, NULL, &written, err, errlen);
}

/* Whether PATH is still the file `read` describes (st_mode 0: still no file), unchanged. */
static int still_read_file(const char *path, const struct stat *read)
{
	struct stat now;

	if (stat(path, &now))
		return errno == ENOENT && !read->st_mode;
	return read->st_mode && now.st_dev == read->st_dev && now.st_ino == read->st_ino &&
	       now.st_size == read->st_size &&
	       now.st_mtim.tv_sec == read->st_mtim.tv_sec &&
	       now.st_mtim.tv_nsec == read->st_mtim.tv_nsec &&
	       now.st_ctim.tv_sec == read->st_ctim.tv_sec &&
	       now.st_ctim.tv_nsec == read->st_ctim.tv_nsec;
}

int sw_save_seen(const char *path, const struct sw_set *s, const struct stat *read,
		 struct stat *written, char *err, size_t errlen)
{
	char tmp[PATH_MAX], dir[PATH_MAX], *data, *slash;
	size_t len;
	int fd, dfd;

	memset(written, 0, sizeof(*written));
	for (int i = 0; i < s->n; i++) {
		char verr[160];
		if (sw_validate(&s->sw[i], verr, sizeof(verr)))
			return errf(err, errlen, "refusing to save switch %s/%s: %s",
				    s->sw[i].service, sw_class_str(s->sw[i].class), verr);
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
		return errf(err, errlen, "switch file path too long: %s", path);
	if (sw_serialize(s, &data, &len))
		return errf(err, errlen, "out of memory writing %s", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		free(data);
		return errf(err, errlen, "cannot create %s: %s", tmp, strerror(e));
	}
	/* 0644 whatever the umask (`switch ls` reads it), set on this file: once renamed, the
	 * name may already be another's */
	fchmod(fd, 0644);
	if (write_all(fd, data, len) || fsync(fd)) {
		int e = errno;
		free(data);
		close(fd);
		unlink(tmp);
		return errf(err, errlen, "cannot write %s: %s", tmp, strerror(e));
	}
	free(data);
	/* Looked at last, just before the rename: the write and fsync take the longest */
	if (read && !still_read_file(path, read)) {
		close(fd);
		unlink(tmp);
		errf(err, errlen, "%s was replaced or edited since it was read: not written over",
		     path);
		return SW_SAVE_REPLACED;
	}
	if (rename(tmp, path)) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return errf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(e));
	}
	/* What was written, as it is after the rename (which changes its ctime): what is at the
	 * path a moment later may be a file an operator renamed in. fsync() above already said
	 * whether the data reached the disk. */
	if (fstat(fd, written))
		memset(written, 0, sizeof(*written));
	close(fd);
	if (sw_after_save_hook)
		sw_after_save_hook(path);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = 0;
	else if (slash)
		*slash = 0;
	else
		snprintf(dir, sizeof(dir), ".");
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd); /* best effort: the rename is already visible */
		close(dfd);
	}
	return 0;
}

int sw_rename_noreplace(const char *from, const char *to)
{
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL)
		return -1;
	/* a file system without the flag: link() refuses a taken name just as atomically */
	if (link(from, to))
		return -1;
	unlink(from);
	return 0;
}

int sw_quarantine(const char *path, uint64_t now, char *saved_as, size_t saved_len,
		  char *err, size_t errlen)
{
	char dst[PATH_MAX];
	int n;

	/* A name not taken yet: rename() would replace the copy of an earlier damaged file
	 * moved aside in the same second, and with it that post-mortem. Asked of the rename
	 * itself, not of a stat before it: a stat that fails (out of memory, an I/O error)
	 * says nothing of whether the name is free. */
	for (int k = 0; k < 1000; k++) {
		n = k ? snprintf(dst, sizeof(dst), "%s.corrupt.%llu.%d", path,
				 (unsigned long long)now, k)
		      : snprintf(dst, sizeof(dst), "%s.corrupt.%llu", path, (unsigned long long)now);
		if (n < 0 || n >= (int)sizeof(dst))
			return errf(err, errlen, "switch file path too long: %s", path);
		if (sw_rename_noreplace(path, dst) == 0) {
			if (saved_as && saved_len)
				snprintf(saved_as, saved_len, "%s", dst);
			return 0;
		}
		if (errno != EEXIST)
			return errf(err, errlen, "cannot move %s to %s: %s", path, dst,
				    strerror(errno));
	}
	return errf(err, errlen, "cannot move %s aside: %s and 999 more names are taken", path,
		    dst);
}

int sw_lock(const char *path, char *err, size_t errlen)
{
	char lp[PATH_MAX];
	int fd;

	if (snprintf(lp, sizeof(lp), "%s.lock", path) >= (int)sizeof(lp))
		return errf(err, errlen, "switch file path too long: %s", path);
	fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return errf(err, errlen, "cannot open lock %s: %s", lp, strerror(errno));
	while (flock(fd, LOCK_EX)) {
		if (errno == EINTR)
			continue;
		errf(err, errlen, "cannot lock %s: %s", lp, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

void sw_unlock(int fd)
{
	if (fd >= 0) {
		flock(fd, LOCK_UN);
		close(fd);
	}
}
