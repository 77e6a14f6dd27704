// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice configuration: YAML file -> struct sluice_config, with every error collected.
 *
 * The file is loaded with libyaml's document API (every node carries its line) and walked
 * section by section. Nothing here keeps state between calls: the parse context lives on the
 * caller's stack. The walker only follows the schema, never the document's own shape, so
 * recursive aliases or deep nesting cannot make it loop or blow the stack.
 */
#include "common/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define CONFIG_MAX_BYTES (4u << 20)    /* a config larger than this is refused */

struct ctx {
	yaml_document_t *doc;
	struct config_errors *errs;
	int total;                        /* errors found, including those not stored */
	/* per service: where its name and port were written (duplicate checks) */
	int name_line[SLUICE_MAX_SERVICES];
	int port_line[SLUICE_MAX_SERVICES];
};

/* ------------------------------------------------------------------------------------------ */
/* errors */

__attribute__((format(printf, 3, 4)))
static void err(struct ctx *c, int line, const char *fmt, ...)
{
	struct config_errors *errs = c->errs;
	va_list ap;

	c->total++;
	if (errs->n >= SLUICE_MAX_ERRORS)
		return;
	errs->e[errs->n].line = line;
	va_start(ap, fmt);
	vsnprintf(errs->e[errs->n].msg, sizeof(errs->e[errs->n].msg), fmt, ap);
	va_end(ap);
	errs->n++;
}

static void errs_init(struct config_errors *errs, const char *name)
{
	memset(errs, 0, sizeof(*errs));
	snprintf(errs->file, sizeof(errs->file), "%s", name ? name : "<config>");
}

/* When more errors were found than fit, the last slot says so. */
static void errs_finish(struct ctx *c)
{
	struct config_errors *errs = c->errs;

	if (c->total > SLUICE_MAX_ERRORS) {
		struct config_error *last = &errs->e[SLUICE_MAX_ERRORS - 1];
		last->line = 0;
		snprintf(last->msg, sizeof(last->msg),
			 "too many errors: %d found, only the first %d shown",
			 c->total, SLUICE_MAX_ERRORS - 1);
	}
}

void sluice_config_print_errors(FILE *f, const struct config_errors *errs)
{
	for (int i = 0; i < errs->n && i < SLUICE_MAX_ERRORS; i++) {
		if (errs->e[i].line > 0)
			fprintf(f, "%s:%d: %s\n", errs->file, errs->e[i].line, errs->e[i].msg);
		else
			fprintf(f, "%s: %s\n", errs->file, errs->e[i].msg);
	}
}

/* ------------------------------------------------------------------------------------------ */
/* names */

const char *sluice_xdp_mode_name(int mode)
{
	switch (mode) {
	case XDP_MODE_AUTO: return "auto";
	case XDP_MODE_NATIVE: return "native";
	case XDP_MODE_GENERIC: return "generic";
	}
	return "?";
}

int sluice_config_service_index(const struct sluice_config *cfg, const char *name)
{
	for (int i = 0; i < cfg->n_services; i++)
		if (strcmp(cfg->services[i].name, name) == 0)
			return i;
	return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* defaults */

static const int default_ho_steps[] = { 10, 30, 60, 100 };
static const int default_ladder_steps[] = { 10, 30, 50, 80, 100 };
static const int default_headroom[SLUICE_NUM_CLASSES] = { 100, 90, 75, 50 };

void sluice_config_defaults(struct sluice_config *out)
{
	memset(out, 0, sizeof(*out));
	out->xdp_mode = XDP_MODE_AUTO;
	out->control_interval_ms = 100;
	out->heartbeat_timeout_ms = 1000;
	snprintf(out->metrics_address, sizeof(out->metrics_address), "127.0.0.1:9477");
	snprintf(out->state_dir, sizeof(out->state_dir), "/var/lib/sluice");
	snprintf(out->pin_dir, sizeof(out->pin_dir), "%s", SLUICE_PIN_DIR);
	out->flow_idle_timeout_s = 600;
	out->syn_timeout_s = 30;
	out->cascade.max_opens = 5;
	out->cascade.window_s = 10;
	out->cascade.suspend_s = 300;
	out->retry_storm.ratio = 0.2;
	out->retry_storm.windows = 3;
}

void sluice_service_defaults(struct service_conf *s)
{
	memset(s, 0, sizeof(*s));
	s->protocol = SLUICE_PROTO_TCP;
	s->reject = SLUICE_REJECT_RST;
	s->retry_after_s = 1;
	s->limit_min = 4;
	s->limit_max = 512;
	s->limit_fixed = 0;
	s->target_latency_ms = 0;
	s->aimd_window_ms = 1000;
	memcpy(s->headroom, default_headroom, sizeof(s->headroom));
	s->default_class = SLUICE_L2;
	s->breaker.min_calls = 20;
	s->breaker.error_rate = 0.5;
	s->breaker.slow_call_ms = 800;
	s->breaker.slow_call_rate = 0.6;
	s->breaker.open_s = 5;
	s->breaker.n_half_open_steps = (int)(sizeof(default_ho_steps) / sizeof(int));
	memcpy(s->breaker.half_open_steps, default_ho_steps, sizeof(default_ho_steps));
	s->breaker.step_s = 5;
	s->breaker.half_open_success = 0.9;
	s->breaker.window_s = 10;
	s->n_ladder_steps = (int)(sizeof(default_ladder_steps) / sizeof(int));
	memcpy(s->ladder_steps, default_ladder_steps, sizeof(default_ladder_steps));
	s->recovery_step_s = 5;
	sluice_service_ctl_defaults(s);
}

/* ------------------------------------------------------------------------------------------ */
/* node helpers */

static int line_of(const yaml_node_t *n)
{
	return n ? (int)n->start_mark.line + 1 : 0;
}

static const char *type_name(const yaml_node_t *n)
{
	if (!n)
		return "nothing";
	switch (n->type) {
	case YAML_SCALAR_NODE:
		if (n->data.scalar.length == 0 && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
			return "nothing";
		return "a scalar";
	case YAML_SEQUENCE_NODE: return "a list";
	case YAML_MAPPING_NODE: return "a mapping";
	default: return "nothing";
	}
}

static const char *sval(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

/* Scalar value shortened for messages. */
static const char *shown(const yaml_node_t *n, char *buf, size_t len)
{
	const char *v = sval(n);
	size_t l = strlen(v);

	if (l < len) {
		snprintf(buf, len, "%s", v);
	} else {
		snprintf(buf, len, "%.*s...", (int)(len - 4), v);
	}
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = '?';
	return buf;
}

/* " in service 'web'" etc.; empty at top level. */
typedef char where_t[128];

static void bad(struct ctx *c, const yaml_node_t *n, const char *key, const char *where,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void bad(struct ctx *c, const yaml_node_t *n, const char *key, const char *where,
		const char *fmt, ...)
{
	char reason[128], val[48];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (n && n->type == YAML_SCALAR_NODE)
		err(c, line_of(n), "bad %s '%s'%s: %s", key, shown(n, val, sizeof(val)), where, reason);
	else
		err(c, line_of(n), "bad %s%s: %s", key, where, reason);
}

static bool want_type(struct ctx *c, const yaml_node_t *n, yaml_node_type_t t, const char *key,
		      const char *where)
{
	const char *want = t == YAML_SCALAR_NODE ? "a scalar" :
			   t == YAML_SEQUENCE_NODE ? "a list" : "a mapping";
	if (n && n->type == t)
		return true;
	bad(c, n, key, where, "expected %s, got %s", want, type_name(n));
	return false;
}

/* A scalar with no NUL inside. */
static bool want_scalar(struct ctx *c, const yaml_node_t *n, const char *key, const char *where)
{
	if (!want_type(c, n, YAML_SCALAR_NODE, key, where))
		return false;
	if (strlen(sval(n)) != n->data.scalar.length) {
		err(c, line_of(n), "bad %s%s: contains a NUL character", key, where);
		return false;
	}
	return true;
}

static bool parse_long(const char *s, long long *out)
{
	const char *p = s;
	char *end;

	if (*p == '-' || *p == '+')
		p++;
	if (!isdigit((unsigned char)*p))
		return false;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno == 0 && *end == '\0';
}

static bool parse_double(const char *s, double *out)
{
	const char *p = s;
	char *end;

	if (*p == '-' || *p == '+')
		p++;
	if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
		return false;
	/* no hex floats, no inf/nan */
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		return false;
	errno = 0;
	*out = strtod(s, &end);
	return errno == 0 && *end == '\0' && isfinite(*out);
}

static bool get_int(struct ctx *c, const yaml_node_t *n, const char *key, const char *where,
		    long long min, long long max, int *out)
{
	long long v;

	if (!want_scalar(c, n, key, where))
		return false;
	if (!parse_long(sval(n), &v)) {
		bad(c, n, key, where, "must be an integer in %lld..%lld", min, max);
		return false;
	}
	if (v < min || v > max) {
		bad(c, n, key, where, "must be an integer in %lld..%lld", min, max);
		return false;
	}
	*out = (int)v;
	return true;
}

/* min_excl: the minimum itself is not allowed (e.g. durations must be > 0). */
static bool get_double(struct ctx *c, const yaml_node_t *n, const char *key, const char *where,
		       double min, bool min_excl, double max, double *out)
{
	double v;

	if (!want_scalar(c, n, key, where))
		return false;
	if (!parse_double(sval(n), &v)) {
		bad(c, n, key, where, "expected a number");
		return false;
	}
	if (v < min || (min_excl && v == min) || v > max) {
		bad(c, n, key, where, "must be %s %g and <= %g", min_excl ? ">" : ">=", min, max);
		return false;
	}
	*out = v;
	return true;
}

static bool get_rate(struct ctx *c, const yaml_node_t *n, const char *key, const char *where,
		     double *out)
{
	double v;

	if (!want_scalar(c, n, key, where))
		return false;
	if (!parse_double(sval(n), &v)) {
		bad(c, n, key, where, "expected a number in 0..1");
		return false;
	}
	if (v < 0 || v > 1) {
		bad(c, n, key, where, "rate must be in 0..1");
		return false;
	}
	*out = v;
	return true;
}

/* Copy a string of 1..size-1 bytes (0..size-1 when allow_empty). */
static bool get_string(struct ctx *c, const yaml_node_t *n, const char *key, const char *where,
		       char *out, size_t size, bool allow_empty)
{
	size_t l;

	if (!want_scalar(c, n, key, where))
		return false;
	l = n->data.scalar.length;
	if (l == 0 && !allow_empty) {
		bad(c, n, key, where, "must not be empty");
		return false;
	}
	if (l >= size) {
		bad(c, n, key, where, "too long (%zu bytes, at most %zu)", l, size - 1);
		return false;
	}
	memcpy(out, sval(n), l);
	out[l] = '\0';
	return true;
}

/* One of `names`, by index. */
static bool get_enum(struct ctx *c, const yaml_node_t *n, const char *key, const char *where,
		     const char *const *names, int count, int *out)
{
	char list[96] = "";

	if (!want_scalar(c, n, key, where))
		return false;
	for (int i = 0; i < count; i++) {
		if (strcmp(sval(n), names[i]) == 0) {
			*out = i;
			return true;
		}
	}
	for (int i = 0; i < count; i++) {
		size_t l = strlen(list);
		snprintf(list + l, sizeof(list) - l, "%s%s", i == 0 ? "" : i == count - 1 ? " or " : ", ",
			 names[i]);
	}
	bad(c, n, key, where, "expected %s", list);
	return false;
}

/* ------------------------------------------------------------------------------------------ */
/* mappings */

/* Edit distance, for "did you mean" hints (short keys only). */
static int edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int prev[40], cur[40];

	if (la >= 39 || lb >= 39)
		return 99;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) !=
						 tolower((unsigned char)b[j - 1]));
			int del = prev[j] + 1, ins = cur[j - 1] + 1;
			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
		memcpy(prev, cur, sizeof(int) * (lb + 1));
	}
	return prev[lb];
}

static void unknown_key(struct ctx *c, const yaml_node_t *k, const char *where,
			const char *const *known)
{
	char val[48], hint[64] = "";
	const char *best = NULL;
	int best_d = 3;

	for (int i = 0; known && known[i]; i++) {
		int d = edit_distance(sval(k), known[i]);
		if (d < best_d) {
			best_d = d;
			best = known[i];
		}
	}
	if (best)
		snprintf(hint, sizeof(hint), " (did you mean '%s'?)", best);
	err(c, line_of(k), "unknown key '%s'%s%s", shown(k, val, sizeof(val)),
	    where[0] ? where : " at top level", hint);
}

/* Iterate a mapping: calls fn(c, key, value, arg) for each pair whose key is a scalar and
 * not a repeat of an earlier key; reports the others. */
typedef void (*pair_fn)(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v,
			void *arg);

static void each_pair(struct ctx *c, yaml_node_t *map, const char *where, pair_fn fn, void *arg)
{
	yaml_node_pair_t *p, *q;

	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
		bool dup = false;

		if (!k || k->type != YAML_SCALAR_NODE) {
			err(c, line_of(k), "keys must be plain words%s, got %s", where, type_name(k));
			continue;
		}
		for (q = map->data.mapping.pairs.start; q < p; q++) {
			yaml_node_t *k2 = yaml_document_get_node(c->doc, q->key);
			if (k2 && k2->type == YAML_SCALAR_NODE && strcmp(sval(k2), sval(k)) == 0) {
				dup = true;
				break;
			}
		}
		if (dup) {
			char val[48];
			err(c, line_of(k), "duplicate key '%s'%s", shown(k, val, sizeof(val)), where);
			continue;
		}
		fn(c, sval(k), k, v, arg);
	}
}

static yaml_node_t *map_get(struct ctx *c, yaml_node_t *map, const char *key)
{
	yaml_node_pair_t *p;

	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
		if (k && k->type == YAML_SCALAR_NODE && strcmp(sval(k), key) == 0)
			return yaml_document_get_node(c->doc, p->value);
	}
	return NULL;
}

/* A list of percentages: each 1..100, strictly increasing, ending at 100. */
static void get_steps(struct ctx *c, yaml_node_t *n, const char *key, const char *where, int *arr,
		      int max, int *count)
{
	yaml_node_item_t *it;
	int vals[64], nv = 0, prev = 0;
	bool ok = true;

	if (!want_type(c, n, YAML_SEQUENCE_NODE, key, where))
		return;
	if (n->data.sequence.items.top == n->data.sequence.items.start) {
		bad(c, n, key, where, "must list at least one step");
		return;
	}
	if (n->data.sequence.items.top - n->data.sequence.items.start > max) {
		bad(c, n, key, where, "at most %d steps", max);
		return;
	}
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *s = yaml_document_get_node(c->doc, *it);
		int v;

		if (!get_int(c, s, key, where, 1, 100, &v)) {
			ok = false;
			continue;
		}
		if (nv > 0 && v <= prev) {
			bad(c, s, key, where, "steps must be strictly increasing (%d after %d)", v, prev);
			ok = false;
		}
		prev = v;
		vals[nv++] = v;
		if (it + 1 == n->data.sequence.items.top && v != 100) {
			bad(c, s, key, where, "the last step must be 100");
			ok = false;
		}
	}
	if (ok) {
		memcpy(arr, vals, sizeof(int) * (size_t)nv);
		*count = nv;
	}
}

/* ------------------------------------------------------------------------------------------ */
/* validators of strings */

static bool valid_ifname(const char *s)
{
	if (!*s || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (; *s; s++)
		if (*s == '/' || *s == ':' || isspace((unsigned char)*s) || (unsigned char)*s < 0x20)
			return false;
	return true;
}

static bool valid_service_name(const char *s)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.')
			return false;
	return true;
}

/* RFC 9110 token characters. */
static bool valid_header_name(const char *s)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("!#$%&'*+-.^_`|~", *s))
			return false;
	return true;
}

/* "HOST:PORT" or "[V6]:PORT"; HOST may be empty (all addresses). */
static const char *check_address(const char *s)
{
	const char *colon = strrchr(s, ':');
	long long port;

	if (!colon)
		return "expected HOST:PORT";
	if (s[0] == '[' && (colon == s || colon[-1] != ']'))
		return "expected [IPV6]:PORT";
	if (s[0] != '[' && memchr(s, ':', (size_t)(colon - s)))
		return "IPv6 addresses must be written [ADDR]:PORT";
	/* Port 0 takes any free port (tests; the chosen one is logged at start). */
	if (!parse_long(colon + 1, &port) || colon[1] == '+' || colon[1] == '-' || port < 0 ||
	    port > 65535)
		return "port must be an integer in 0..65535";
	return NULL;
}

/* "a.b.c.d/len" or "v6/len" (no /len: a host prefix). v4 is stored v4-mapped. */
static const char *parse_prefix(const char *s, struct class_rule *r)
{
	char buf[INET6_ADDRSTRLEN + 8];
	const char *slash = strchr(s, '/');
	size_t alen = slash ? (size_t)(slash - s) : strlen(s);
	uint8_t a[16] = { 0 };
	long long len;
	int maxlen;

	if (alen == 0 || alen >= INET6_ADDRSTRLEN)
		return "not an address";
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	if (inet_pton(AF_INET, buf, a + 12) == 1) {
		a[10] = a[11] = 0xff;
		r->is_v4 = 1;
		maxlen = 32;
	} else if (strchr(buf, ':') && inet_pton(AF_INET6, buf, a) == 1) {
		r->is_v4 = 0;
		maxlen = 128;
	} else {
		return "not an IPv4 or IPv6 address";
	}
	if (slash) {
		if (!parse_long(slash + 1, &len) || slash[1] == '+' || slash[1] == '-')
			return "prefix length is not a number";
		if (len < 0 || len > maxlen)
			return r->is_v4 ? "prefix length out of range 0..32" :
					  "prefix length out of range 0..128";
	} else {
		len = maxlen;
	}
	r->prefix_len = (int)len + (r->is_v4 ? 96 : 0);
	for (int bit = r->prefix_len; bit < 128; bit++) {
		if (a[bit / 8] & (0x80 >> (bit % 8)))
			return "host bits set beyond the prefix length";
	}
	memcpy(r->addr, a, 16);
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* sections */

struct simple_arg {
	const char *where;
	void *conf;
};

static const char *const cascade_keys[] = { "max_opens", "window_s", "suspend_s", NULL };

static void cascade_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct simple_arg *a = arg;
	struct cascade_conf *cc = a->conf;

	if (!strcmp(key, "max_opens"))
		get_int(c, v, key, a->where, 1, 100000, &cc->max_opens);
	else if (!strcmp(key, "window_s"))
		get_double(c, v, key, a->where, 0, true, 86400, &cc->window_s);
	else if (!strcmp(key, "suspend_s"))
		get_double(c, v, key, a->where, 0, false, 7 * 86400, &cc->suspend_s);
	else
		unknown_key(c, k, a->where, cascade_keys);
}

static const char *const retry_keys[] = { "ratio", "windows", NULL };

static void retry_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct simple_arg *a = arg;
	struct retry_storm_conf *rs = a->conf;

	if (!strcmp(key, "ratio"))
		get_rate(c, v, key, a->where, &rs->ratio);
	else if (!strcmp(key, "windows"))
		get_int(c, v, key, a->where, 1, 100000, &rs->windows);
	else
		unknown_key(c, k, a->where, retry_keys);
}

static const char *const breaker_keys[] = { "min_calls", "error_rate", "slow_call_ms",
	"slow_call_rate", "open_s", "half_open_steps", "step_s", "half_open_success", "window_s",
	NULL };

static void breaker_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct simple_arg *a = arg;
	struct breaker_conf *b = a->conf;

	if (!strcmp(key, "min_calls"))
		get_int(c, v, key, a->where, 1, 1000000, &b->min_calls);
	else if (!strcmp(key, "error_rate"))
		get_rate(c, v, key, a->where, &b->error_rate);
	else if (!strcmp(key, "slow_call_ms"))
		get_int(c, v, key, a->where, 1, 3600000, &b->slow_call_ms);
	else if (!strcmp(key, "slow_call_rate"))
		get_rate(c, v, key, a->where, &b->slow_call_rate);
	else if (!strcmp(key, "open_s"))
		get_double(c, v, key, a->where, 0, true, 86400, &b->open_s);
	else if (!strcmp(key, "half_open_steps"))
		get_steps(c, v, key, a->where, b->half_open_steps, SLUICE_MAX_HO_STEPS,
			  &b->n_half_open_steps);
	else if (!strcmp(key, "step_s"))
		get_double(c, v, key, a->where, 0, true, 86400, &b->step_s);
	else if (!strcmp(key, "half_open_success"))
		get_rate(c, v, key, a->where, &b->half_open_success);
	else if (!strcmp(key, "window_s"))
		get_double(c, v, key, a->where, 0, true, 86400, &b->window_s);
	else
		unknown_key(c, k, a->where, breaker_keys);
}

static const char *const client_limit_keys[] = { "max_in_flight", "rate", "burst", NULL };

static void client_limit_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v,
			      void *arg)
{
	struct simple_arg *a = arg;
	struct service_conf *s = a->conf;

	if (!strcmp(key, "max_in_flight"))
		get_int(c, v, key, a->where, 0, 1000000, &s->client_max_in_flight);
	else if (!strcmp(key, "rate"))
		get_int(c, v, key, a->where, 0, 1000000000, &s->client_rate);
	else if (!strcmp(key, "burst"))
		get_int(c, v, key, a->where, 0, 1000000, &s->client_burst);
	else
		unknown_key(c, k, a->where, client_limit_keys);
}

struct limit_arg {
	const char *where;
	struct service_conf *s;
	yaml_node_t *min, *max, *fixed;
};

static const char *const limit_keys[] = { "min", "max", "fixed", NULL };

static void limit_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct limit_arg *a = arg;

	if (!strcmp(key, "min")) {
		if (get_int(c, v, key, a->where, 1, 1000000, &a->s->limit_min))
			a->min = v;
	} else if (!strcmp(key, "max")) {
		if (get_int(c, v, key, a->where, 1, 1000000, &a->s->limit_max))
			a->max = v;
	} else if (!strcmp(key, "fixed")) {
		if (get_int(c, v, key, a->where, 1, 1000000, &a->s->limit_fixed))
			a->fixed = v;
	} else {
		unknown_key(c, k, a->where, limit_keys);
	}
}

static void parse_limit(struct ctx *c, yaml_node_t *n, const char *svc_where, struct service_conf *s)
{
	where_t sub;
	struct limit_arg a = { .where = sub, .s = s };

	snprintf(sub, sizeof(sub), " in limit of%s", svc_where + 3);
	if (!want_type(c, n, YAML_MAPPING_NODE, "limit", svc_where))
		return;
	if (n->data.mapping.pairs.top == n->data.mapping.pairs.start) {
		err(c, line_of(n), "bad limit%s: give { min, max } or { fixed }", svc_where);
		return;
	}
	each_pair(c, n, sub, limit_pair, &a);
	if (a.fixed && (a.min || a.max)) {
		err(c, line_of(a.fixed), "bad limit%s: 'fixed' cannot be combined with 'min'/'max'",
		    svc_where);
		return;
	}
	if (a.fixed) {
		s->limit_min = s->limit_max = s->limit_fixed;
		return;
	}
	if (!a.min && a.max && s->limit_max < s->limit_min)
		s->limit_min = s->limit_max;   /* only max given, below the default min */
	if (s->limit_min > s->limit_max) {
		yaml_node_t *at = a.min ? a.min : a.max;
		err(c, line_of(at), "bad limit%s: min %d is greater than max %d", svc_where,
		    s->limit_min, s->limit_max);
	}
}

static void headroom_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct simple_arg *a = arg;
	int *h = a->conf;
	int cls = sluice_class_from_name(key);
	char what[32];

	if (cls < 0) {
		char val[48];
		err(c, line_of(k), "unknown key '%s'%s: headroom keys are L0, L1, L2, L3",
		    shown(k, val, sizeof(val)), a->where);
		return;
	}
	snprintf(what, sizeof(what), "%s", sluice_class_name(cls));
	get_int(c, v, what, a->where, 0, 100, &h[cls]);
}

/* ---- classify rules ---- */

struct rule_arg {
	const char *where;                /* " in classify rule 2 of service 'web'" */
	struct class_rule *r;
	yaml_node_t *matcher[4];          /* source, dscp, header, path_prefix */
	yaml_node_t *class_node;
};

static const char *const rule_keys[] = { "source", "dscp", "header", "path_prefix", "class", NULL };

static void rule_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct rule_arg *a = arg;
	struct class_rule *r = a->r;

	if (!strcmp(key, "source")) {
		a->matcher[RULE_SOURCE] = v;
		if (want_scalar(c, v, key, a->where)) {
			const char *why = parse_prefix(sval(v), r);
			if (why)
				bad(c, v, "source prefix", a->where, "%s", why);
		}
	} else if (!strcmp(key, "dscp")) {
		a->matcher[RULE_DSCP] = v;
		get_int(c, v, key, a->where, 0, 63, &r->dscp);
	} else if (!strcmp(key, "header")) {
		a->matcher[RULE_HEADER] = v;
		if (get_string(c, v, "header name", a->where, r->header, sizeof(r->header), false) &&
		    !valid_header_name(r->header))
			bad(c, v, "header name", a->where, "not a valid HTTP header name");
	} else if (!strcmp(key, "path_prefix")) {
		a->matcher[RULE_PATH] = v;
		if (get_string(c, v, key, a->where, r->path, sizeof(r->path), false) &&
		    r->path[0] != '/')
			bad(c, v, key, a->where, "must start with '/'");
	} else if (!strcmp(key, "class")) {
		a->class_node = v;
	} else {
		unknown_key(c, k, a->where, rule_keys);
	}
}

static const char *const matcher_names[] = { "source", "dscp", "header", "path_prefix" };

/* The rule is kept even when it had errors: the config fails anyway. */
static void parse_rule(struct ctx *c, yaml_node_t *n, int idx, const char *svc_where,
		       struct class_rule *r)
{
	char label[96];
	where_t where;
	struct rule_arg a = { .where = where, .r = r };
	int found = 0, kind = -1;

	/* svc_where is " in service 'web'" */
	snprintf(label, sizeof(label), "classify rule %d of%s", idx + 1, svc_where + 3);
	snprintf(where, sizeof(where), " in %s", label);
	memset(r, 0, sizeof(*r));
	r->line = line_of(n);
	r->class = -1;
	if (!n || n->type != YAML_MAPPING_NODE) {
		err(c, r->line, "bad %s: expected a mapping, got %s", label, type_name(n));
		return;
	}
	each_pair(c, n, where, rule_pair, &a);
	for (int i = 0; i < 4; i++) {
		if (!a.matcher[i])
			continue;
		if (found++ == 0)
			kind = i;
		else
			err(c, line_of(a.matcher[i]),
			    "bad %s: more than one matcher ('%s' and '%s'); write one rule each",
			    label, matcher_names[kind], matcher_names[i]);
	}
	if (kind < 0) {
		err(c, r->line, "bad %s: needs one of source, dscp, header, path_prefix", label);
		return;
	}
	r->kind = (enum rule_kind)kind;
	if (!a.class_node) {
		err(c, r->line, "bad %s: missing 'class'", label);
		return;
	}
	if (!want_scalar(c, a.class_node, "class", where))
		return;
	if (strcmp(sval(a.class_node), "from-header") == 0) {
		if (r->kind != RULE_HEADER)
			bad(c, a.class_node, "class", where,
			    "from-header is only valid for header rules");
		else
			r->class = SLUICE_CLASS_FROM_HEADER;
	} else if (r->kind == RULE_HEADER) {
		bad(c, a.class_node, "class", where,
		    "header rules take class: from-header (the header's value L0..L3 picks the class)");
	} else if ((r->class = sluice_class_from_name(sval(a.class_node))) < 0) {
		bad(c, a.class_node, "class", where, "expected L0, L1, L2 or L3");
	}
}

static void parse_classify(struct ctx *c, yaml_node_t *n, const char *svc_where,
			   struct service_conf *s)
{
	yaml_node_item_t *it;
	int i = 0, n_path = 0, n_header = 0;

	if (!want_type(c, n, YAML_SEQUENCE_NODE, "classify", svc_where))
		return;
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++, i++) {
		yaml_node_t *rn = yaml_document_get_node(c->doc, *it);
		struct class_rule *r;

		if (s->n_rules >= SLUICE_MAX_RULES) {
			err(c, line_of(rn), "too many classify rules%s: at most %d", svc_where,
			    SLUICE_MAX_RULES);
			break;
		}
		r = &s->rules[s->n_rules++];
		parse_rule(c, rn, i, svc_where, r);
		if (r->kind == RULE_PATH && r->class >= 0 && ++n_path > SLUICE_MAX_PATH_RULES)
			err(c, r->line, "too many path_prefix rules%s: at most %d", svc_where,
			    SLUICE_MAX_PATH_RULES);
		if (r->kind == RULE_HEADER && r->class >= 0 && ++n_header > 1)
			err(c, r->line, "more than one header rule%s: only one is supported",
			    svc_where);
	}
}

/* ---- services ---- */

struct svc_arg {
	const char *where;
	int idx;
	struct service_conf *s;
	yaml_node_t *name, *port, *protocol, *reject;
};

static const char *const service_keys[] = { "name", "port", "protocol", "reject",
	"retry_after_s", "limit", "target_latency_ms", "aimd_window_ms", "headroom",
	"default_class", "classify", "breaker", "recovery_steps", "recovery_step_s",
	"headroom_mode", "client_limit", NULL };

static const char *const headroom_mode_names[] = { "adaptive", "fixed" };

static const char *const proto_names[] = { "tcp", "http" };   /* = enum sluice_protocol */
static const char *const reject_names[] = { "rst", "drop" };  /* = enum sluice_reject_mode */

static bool is_ctl_key(const char *key)
{
	for (int i = 0; sluice_service_ctl_keys[i]; i++)
		if (!strcmp(key, sluice_service_ctl_keys[i]))
			return true;
	return false;
}

static void service_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct svc_arg *a = arg;
	struct service_conf *s = a->s;
	where_t sub;

	if (!strcmp(key, "name")) {
		a->name = v;
		if (get_string(c, v, key, a->where, s->name, sizeof(s->name), false) &&
		    !valid_service_name(s->name))
			bad(c, v, key, a->where, "use letters, digits, '-', '_' and '.' only");
	} else if (!strcmp(key, "port")) {
		if (get_int(c, v, key, a->where, 1, 65535, &s->port))
			a->port = v;
	} else if (!strcmp(key, "protocol")) {
		a->protocol = v;
		get_enum(c, v, key, a->where, proto_names, 2, &s->protocol);
	} else if (!strcmp(key, "reject")) {
		a->reject = v;
		get_enum(c, v, key, a->where, reject_names, 2, &s->reject);
	} else if (!strcmp(key, "retry_after_s")) {
		get_int(c, v, key, a->where, 0, 255, &s->retry_after_s);
	} else if (!strcmp(key, "limit")) {
		parse_limit(c, v, a->where, s);
	} else if (!strcmp(key, "target_latency_ms")) {
		if (v && v->type == YAML_SCALAR_NODE && !strcmp(sval(v), "auto"))
			s->target_latency_ms = 0;
		else if (want_scalar(c, v, key, a->where)) {
			double t;
			if (!parse_double(sval(v), &t))
				bad(c, v, key, a->where, "expected 'auto' or a number of milliseconds");
			else if (t <= 0 || t > 3600000)
				bad(c, v, key, a->where, "must be > 0 and <= 3600000");
			else
				s->target_latency_ms = t;
		}
	} else if (!strcmp(key, "aimd_window_ms")) {
		get_int(c, v, key, a->where, 1, 3600000, &s->aimd_window_ms);
	} else if (!strcmp(key, "headroom")) {
		struct simple_arg ha;
		snprintf(sub, sizeof(sub), " in headroom of%s", a->where + 3);
		ha.where = sub;
		ha.conf = s->headroom;
		s->headroom_set = 1;          /* written percentages are caps in every mode */
		if (want_type(c, v, YAML_MAPPING_NODE, key, a->where))
			each_pair(c, v, sub, headroom_pair, &ha);
	} else if (!strcmp(key, "default_class")) {
		if (want_scalar(c, v, key, a->where)) {
			int cls = sluice_class_from_name(sval(v));
			if (cls < 0)
				bad(c, v, key, a->where, "expected L0, L1, L2 or L3");
			else
				s->default_class = cls;
		}
	} else if (!strcmp(key, "classify")) {
		parse_classify(c, v, a->where, s);
	} else if (!strcmp(key, "breaker")) {
		struct simple_arg ba;
		snprintf(sub, sizeof(sub), " in breaker of%s", a->where + 3);
		ba.where = sub;
		ba.conf = &s->breaker;
		if (want_type(c, v, YAML_MAPPING_NODE, key, a->where))
			each_pair(c, v, sub, breaker_pair, &ba);
	} else if (!strcmp(key, "recovery_steps")) {
		get_steps(c, v, key, a->where, s->ladder_steps, SLUICE_MAX_LADDER_STEPS,
			  &s->n_ladder_steps);
	} else if (!strcmp(key, "recovery_step_s")) {
		get_double(c, v, key, a->where, 0, true, 86400, &s->recovery_step_s);
	} else if (!strcmp(key, "headroom_mode")) {
		get_enum(c, v, key, a->where, headroom_mode_names, 2, &s->headroom_mode);
	} else if (!strcmp(key, "client_limit")) {
		struct simple_arg ca;
		snprintf(sub, sizeof(sub), " in client_limit of%s", a->where + 3);
		ca.where = sub;
		ca.conf = s;
		if (want_type(c, v, YAML_MAPPING_NODE, key, a->where))
			each_pair(c, v, sub, client_limit_pair, &ca);
	/* ---- controller keys: the parsing is common/config_ctl.c; this block only hands it the
	 * scalar (to be ported as is onto any YAML layer) ---- */
	} else if (is_ctl_key(key)) {
		char msg[160];
		if (want_scalar(c, v, key, a->where) &&
		    sluice_service_ctl_key(s, key, sval(v), msg, sizeof(msg)) < 0)
			bad(c, v, key, a->where, "%s", msg);
	/* ---- end of the controller keys ---- */
	} else {
		unknown_key(c, k, a->where, service_keys);
	}
}

static void parse_service(struct ctx *c, yaml_node_t *n, int idx, struct sluice_config *cfg)
{
	struct service_conf *s = &cfg->services[idx];
	where_t where;
	struct svc_arg a = { .where = where, .idx = idx, .s = s };
	yaml_node_t *name;

	sluice_service_defaults(s);
	s->line = line_of(n);
	c->name_line[idx] = c->port_line[idx] = 0;

	/* Name the service in messages before walking it, whatever the key order. */
	name = map_get(c, n, "name");
	if (name && name->type == YAML_SCALAR_NODE && name->data.scalar.length > 0 &&
	    name->data.scalar.length < SLUICE_NAME_LEN && valid_service_name(sval(name)))
		snprintf(where, sizeof(where), " in service '%s'", sval(name));
	else
		snprintf(where, sizeof(where), " in service #%d", idx + 1);

	if (!n || n->type != YAML_MAPPING_NODE) {
		err(c, s->line, "bad service #%d: expected a mapping, got %s", idx + 1, type_name(n));
		return;
	}
	each_pair(c, n, where, service_pair, &a);

	if (!a.name)
		err(c, s->line, "missing required key 'name'%s", where);
	if (!a.port && !map_get(c, n, "port"))
		err(c, s->line, "missing required key 'port'%s", where);
	if (a.name && s->name[0])
		c->name_line[idx] = line_of(a.name);
	if (a.port)
		c->port_line[idx] = line_of(a.port);

	/* http-only matchers */
	if (s->protocol != SLUICE_PROTO_HTTP) {
		for (int i = 0; i < s->n_rules; i++) {
			struct class_rule *r = &s->rules[i];
			if (r->kind == RULE_HEADER || r->kind == RULE_PATH)
				err(c, r->line, "bad classify rule %d of%s: %s rules need protocol: http",
				    i + 1, where + 3, r->kind == RULE_HEADER ? "header" : "path_prefix");
		}
	}

	/* duplicates against the services before this one */
	for (int j = 0; j < idx; j++) {
		struct service_conf *o = &cfg->services[j];
		if (c->name_line[idx] && c->name_line[j] && strcmp(o->name, s->name) == 0)
			err(c, c->name_line[idx], "duplicate service name '%s' (first at line %d)",
			    s->name, c->name_line[j]);
		if (c->port_line[idx] && c->port_line[j] && o->port == s->port)
			err(c, c->port_line[idx], "duplicate port %d%s (already used by service '%s' "
			    "at line %d)", s->port, where, o->name, c->port_line[j]);
	}
}

static void parse_services(struct ctx *c, yaml_node_t *n, struct sluice_config *cfg)
{
	yaml_node_item_t *it;
	int src_rules = 0;

	if (!want_type(c, n, YAML_SEQUENCE_NODE, "services", ""))
		return;
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *sn = yaml_document_get_node(c->doc, *it);
		if (cfg->n_services >= SLUICE_MAX_SERVICES) {
			err(c, line_of(sn), "too many services: at most %d", SLUICE_MAX_SERVICES);
			break;
		}
		parse_service(c, sn, cfg->n_services, cfg);
		cfg->n_services++;
	}
	for (int i = 0; i < cfg->n_services; i++)
		for (int j = 0; j < cfg->services[i].n_rules; j++)
			src_rules += cfg->services[i].rules[j].kind == RULE_SOURCE;
	if (src_rules > SLUICE_MAX_SRC_RULES)
		err(c, line_of(n), "too many source rules in all: %d, at most %d", src_rules,
		    SLUICE_MAX_SRC_RULES);
}

/* ---- top level ---- */

struct root_arg {
	struct sluice_config *cfg;
	yaml_node_t *interface, *services, *control, *heartbeat;
};

static const char *const root_keys[] = { "interface", "xdp_mode", "control_interval_ms",
	"heartbeat_timeout_ms", "metrics_address", "state_dir", "pin_dir", "switch_group",
	"flow_idle_timeout_s", "syn_timeout_s", "cascade", "retry_storm", "services", NULL };

static const char *const xdp_names[] = { "auto", "native", "generic" };

static void root_pair(struct ctx *c, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct root_arg *a = arg;
	struct sluice_config *cfg = a->cfg;

	if (!strcmp(key, "interface")) {
		a->interface = v;
		if (get_string(c, v, key, "", cfg->interface, sizeof(cfg->interface), false) &&
		    !valid_ifname(cfg->interface))
			bad(c, v, key, "", "not a valid interface name");
	} else if (!strcmp(key, "xdp_mode")) {
		get_enum(c, v, key, "", xdp_names, 3, &cfg->xdp_mode);
	} else if (!strcmp(key, "control_interval_ms")) {
		if (get_int(c, v, key, "", 1, 60000, &cfg->control_interval_ms))
			a->control = v;
	} else if (!strcmp(key, "heartbeat_timeout_ms")) {
		if (get_int(c, v, key, "", 1, 3600000, &cfg->heartbeat_timeout_ms))
			a->heartbeat = v;
	} else if (!strcmp(key, "metrics_address")) {
		if (get_string(c, v, key, "", cfg->metrics_address, sizeof(cfg->metrics_address),
			       false)) {
			const char *why = check_address(cfg->metrics_address);
			if (why)
				bad(c, v, key, "", "%s", why);
		}
	} else if (!strcmp(key, "state_dir")) {
		get_string(c, v, key, "", cfg->state_dir, sizeof(cfg->state_dir), false);
	} else if (!strcmp(key, "pin_dir")) {
		get_string(c, v, key, "", cfg->pin_dir, sizeof(cfg->pin_dir), false);
	} else if (!strcmp(key, "switch_group")) {
		get_string(c, v, key, "", cfg->switch_group, sizeof(cfg->switch_group), true);
	} else if (!strcmp(key, "flow_idle_timeout_s")) {
		get_int(c, v, key, "", 1, 7 * 86400, &cfg->flow_idle_timeout_s);
	} else if (!strcmp(key, "syn_timeout_s")) {
		get_int(c, v, key, "", 1, 86400, &cfg->syn_timeout_s);
	} else if (!strcmp(key, "cascade")) {
		struct simple_arg ca = { " in cascade", &cfg->cascade };
		if (want_type(c, v, YAML_MAPPING_NODE, key, ""))
			each_pair(c, v, ca.where, cascade_pair, &ca);
	} else if (!strcmp(key, "retry_storm")) {
		struct simple_arg ra = { " in retry_storm", &cfg->retry_storm };
		if (want_type(c, v, YAML_MAPPING_NODE, key, ""))
			each_pair(c, v, ra.where, retry_pair, &ra);
	} else if (!strcmp(key, "services")) {
		a->services = v;
		/* "services:" with nothing after it is reported below as "no services" */
		if (!(v && v->type == YAML_SCALAR_NODE && v->data.scalar.length == 0 &&
		      v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE))
			parse_services(c, v, cfg);
	} else {
		unknown_key(c, k, "", root_keys);
	}
}

static void parse_root(struct ctx *c, yaml_node_t *root, struct sluice_config *cfg)
{
	struct root_arg a = { .cfg = cfg };

	if (!root || (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0)) {
		err(c, 0, "no services (the file is empty)");
		return;
	}
	if (root->type != YAML_MAPPING_NODE) {
		err(c, line_of(root), "expected a mapping of settings at top level, got %s",
		    type_name(root));
		return;
	}
	each_pair(c, root, "", root_pair, &a);
	if (!a.interface)
		err(c, 0, "missing required key 'interface'");
	if (cfg->n_services == 0 && (!a.services || a.services->type == YAML_SEQUENCE_NODE ||
				     a.services->type == YAML_SCALAR_NODE))
		err(c, a.services ? line_of(a.services) : 0, "no services");
	if (cfg->heartbeat_timeout_ms <= cfg->control_interval_ms) {
		yaml_node_t *at = a.heartbeat ? a.heartbeat : a.control;
		err(c, line_of(at), "heartbeat_timeout_ms (%d) must be greater than "
		    "control_interval_ms (%d)", cfg->heartbeat_timeout_ms, cfg->control_interval_ms);
	}
}

/* ------------------------------------------------------------------------------------------ */
/* entry points */

int sluice_config_parse(const char *text, size_t len, const char *name,
			struct sluice_config *out, struct config_errors *errs)
{
	struct ctx *c;
	yaml_parser_t parser;
	yaml_document_t doc;
	int rc;

	errs_init(errs, name);
	sluice_config_defaults(out);
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(errs->e[0].msg, sizeof(errs->e[0].msg), "out of memory");
		errs->n = 1;
		return -1;
	}
	c->errs = errs;

	if (!yaml_parser_initialize(&parser)) {
		err(c, 0, "cannot initialize the YAML parser");
		free(c);
		return -1;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		int line = (int)parser.problem_mark.line + 1;
		if (parser.context)
			err(c, line, "YAML syntax error: %s (%s started at line %d)",
			    parser.problem ? parser.problem : "unknown problem", parser.context,
			    (int)parser.context_mark.line + 1);
		else
			err(c, line, "YAML syntax error: %s",
			    parser.problem ? parser.problem : "unknown problem");
	} else {
		yaml_document_t extra;

		c->doc = &doc;
		parse_root(c, yaml_document_get_root_node(&doc), out);
		c->doc = NULL;
		/* a second document ("---") is a mistake, not something to ignore */
		if (yaml_parser_load(&parser, &extra)) {
			yaml_node_t *r2 = yaml_document_get_root_node(&extra);
			if (r2)
				err(c, line_of(r2), "more than one YAML document in the file");
			yaml_document_delete(&extra);
		} else {
			err(c, (int)parser.problem_mark.line + 1, "YAML syntax error: %s",
			    parser.problem ? parser.problem : "unknown problem");
		}
		yaml_document_delete(&doc);
	}
	yaml_parser_delete(&parser);

	errs_finish(c);
	rc = errs->n ? -1 : 0;
	free(c);
	return rc;
}

int sluice_config_load(const char *path, struct sluice_config *out, struct config_errors *errs)
{
	FILE *f;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc;

	errs_init(errs, path);
	sluice_config_defaults(out);
	f = fopen(path, "r");
	if (!f) {
		errs->e[0].line = 0;
		snprintf(errs->e[0].msg, sizeof(errs->e[0].msg), "cannot open: %s", strerror(errno));
		errs->n = 1;
		return -1;
	}
	for (;;) {
		size_t got;
		if (len == cap) {
			char *nb;
			if (cap >= CONFIG_MAX_BYTES) {
				snprintf(errs->e[0].msg, sizeof(errs->e[0].msg),
					 "file too large (more than %u bytes)", CONFIG_MAX_BYTES);
				errs->n = 1;
				goto fail;
			}
			cap = cap ? cap * 2 : 8192;
			nb = realloc(buf, cap);
			if (!nb) {
				snprintf(errs->e[0].msg, sizeof(errs->e[0].msg), "out of memory");
				errs->n = 1;
				goto fail;
			}
			buf = nb;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0) {
			if (ferror(f)) {
				snprintf(errs->e[0].msg, sizeof(errs->e[0].msg), "cannot read: %s",
					 strerror(errno));
				errs->n = 1;
				goto fail;
			}
			break;
		}
	}
	fclose(f);
	rc = sluice_config_parse(buf ? buf : "", len, path, out, errs);
	free(buf);
	return rc;
fail:
	fclose(f);
	free(buf);
	return -1;
}
