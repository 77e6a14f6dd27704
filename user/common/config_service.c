// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The services list of the config: each service's keys, limit, headroom, breaker, client
 * limit and classify rules, then the checks across services. See config_parse.h. */
#include "common/config_parse.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

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

/* "a.b.c.d/len" or "v6/len" (no /len: a host prefix). v4 is stored v4-mapped. */
/* "ADDR:PORT" or "[V6]:PORT": a service at one local address. */
static const char *parse_addr_port(const char *s, struct service_conf *sc)
{
	static const uint8_t any6[16] = { 0 }, any4[16] = { [10] = 0xff, [11] = 0xff };
	const char *colon = strrchr(s, ':');
	char buf[64];
	size_t len = (size_t)(colon - s);
	int bracket = s[0] == '[';
	long long port;

	if (bracket) {
		if (len < 2 || colon[-1] != ']')
			return "expected ADDR:PORT or [IPV6]:PORT";
		s++;
		len -= 2;
	}
	if (len == 0 || len >= sizeof(buf))
		return "expected ADDR:PORT or [IPV6]:PORT";
	memcpy(buf, s, len);
	buf[len] = 0;
	memset(sc->addr, 0, sizeof(sc->addr));
	if (inet_pton(AF_INET, buf, sc->addr + 12) == 1) {
		sc->addr[10] = sc->addr[11] = 0xff;
	} else if (!bracket || inet_pton(AF_INET6, buf, sc->addr) != 1) {
		return strchr(buf, ':') && !bracket ? "IPv6 addresses must be written [ADDR]:PORT"
						    : "not an IPv4 or IPv6 address";
	}
	/* The data path matches the packet's local address exactly, and no packet is sent to
	 * 0.0.0.0 or [::]: a service there (as a listener's wildcard is written) would never
	 * take a packet. */
	if (!memcmp(sc->addr, any6, sizeof(any6)) || !memcmp(sc->addr, any4, sizeof(any4)))
		return "0.0.0.0 and [::] are no local address (for every address, write the port "
		       "alone)";
	if (!yparse_int(colon + 1, &port) || colon[1] == '+' || colon[1] == '-' || port < 1 ||
	    port > 65535)
		return "port must be an integer in 1..65535";
	sc->port = (int)port;
	sc->has_addr = 1;
	return NULL;
}

/* The first 12 bytes of an IPv4 address as source_rules stores it (::ffff:a.b.c.d). */
static const uint8_t v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

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
		if (!yparse_int(slash + 1, &len) || slash[1] == '+' || slash[1] == '-')
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
	/* ::ffff:a.b.c.d/LEN (LEN >= 96) is the way a dual-stack socket spells an IPv4 client:
	 * it is taken for the IPv4 prefix it names, the only clients it can match. */
	if (!r->is_v4 && r->prefix_len >= 96 && !memcmp(a, v4_mapped_prefix, 12))
		r->is_v4 = 1;
	return NULL;
}

int prefix_spans_v4(const struct class_rule *r)
{
	int bits = r->prefix_len;

	if (r->is_v4 || bits > 96)
		return 0;
	for (int i = 0; i < 12 && bits > 0; i++, bits -= 8) {
		uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));

		if ((r->addr[i] & mask) != (v4_mapped_prefix[i] & mask))
			return 0;
	}
	return 1;
}

/* A list of percentages: each 1..100, strictly increasing, ending at 100. */
static void get_steps(struct ydoc *d, yaml_node_t *n, const char *key, const char *where, int *arr,
		      int max, int *count)
{
	yaml_node_item_t *it;
	int vals[64], nv = 0, prev = 0;
	bool ok = true;

	if (!yget_type(d, n, YAML_SEQUENCE_NODE, key, where))
		return;
	if (n->data.sequence.items.top == n->data.sequence.items.start) {
		ydoc_bad(d, n, key, where, "must list at least one step");
		return;
	}
	if (n->data.sequence.items.top - n->data.sequence.items.start > max) {
		ydoc_bad(d, n, key, where, "at most %d steps", max);
		return;
	}
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *s = yaml_document_get_node(&d->doc, *it);
		int v;

		if (!yget_int(d, s, key, where, 1, 100, &v)) {
			ok = false;
			continue;
		}
		if (nv > 0 && v <= prev) {
			ydoc_bad(d, s, key, where, "steps must be strictly increasing (%d after %d)", v, prev);
			ok = false;
		}
		prev = v;
		vals[nv++] = v;
		if (it + 1 == n->data.sequence.items.top && v != 100) {
			ydoc_bad(d, s, key, where, "the last step must be 100");
			ok = false;
		}
	}
	if (ok) {
		memcpy(arr, vals, sizeof(int) * (size_t)nv);
		*count = nv;
	}
}

static const char *const breaker_keys[] = { "min_calls", "error_rate", "slow_call_ms",
	"slow_call_rate", "open_s", "half_open_steps", "step_s", "half_open_success", "window_s",
	NULL };

static void breaker_pair(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct simple_arg *a = arg;
	struct breaker_conf *b = a->conf;

	if (!strcmp(key, "min_calls"))
		yget_int(d, v, key, a->where, 1, 1000000, &b->min_calls);
	else if (!strcmp(key, "error_rate"))
		yget_rate_pos(d, v, key, a->where, &b->error_rate);
	else if (!strcmp(key, "slow_call_ms"))
		yget_int(d, v, key, a->where, 1, 3600000, &b->slow_call_ms);
	else if (!strcmp(key, "slow_call_rate"))
		yget_rate_pos(d, v, key, a->where, &b->slow_call_rate);
	else if (!strcmp(key, "open_s"))
		yget_seconds(d, v, key, a->where, 86400, &b->open_s);
	else if (!strcmp(key, "half_open_steps"))
		get_steps(d, v, key, a->where, b->half_open_steps, SLUICE_MAX_HO_STEPS,
			  &b->n_half_open_steps);
	else if (!strcmp(key, "step_s"))
		yget_seconds(d, v, key, a->where, 86400, &b->step_s);
	else if (!strcmp(key, "half_open_success"))
		yget_rate_pos(d, v, key, a->where, &b->half_open_success);
	else if (!strcmp(key, "window_s"))
		yget_seconds(d, v, key, a->where, SLUICE_MAX_BREAKER_WINDOW_S, &b->window_s);
	else
		ydoc_unknown_key(d, k, a->where, breaker_keys);
}

static const char *const client_limit_keys[] = { "max_in_flight", "rate", "burst", NULL };

static void client_limit_pair(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v,
			      void *arg)
{
	struct simple_arg *a = arg;
	struct service_conf *s = a->conf;

	if (!strcmp(key, "max_in_flight"))
		yget_int(d, v, key, a->where, 0, 1000000, &s->client_max_in_flight);
	else if (!strcmp(key, "rate"))
		yget_int(d, v, key, a->where, 0, 1000000000, &s->client_rate);
	else if (!strcmp(key, "burst"))
		yget_int(d, v, key, a->where, 0, 1000000, &s->client_burst);
	else
		ydoc_unknown_key(d, k, a->where, client_limit_keys);
}

struct limit_arg {
	const char *where;
	struct service_conf *s;
	yaml_node_t *min, *max, *fixed;
};

static const char *const limit_keys[] = { "min", "max", "fixed", NULL };

static void limit_pair(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct limit_arg *a = arg;

	if (!strcmp(key, "min")) {
		if (yget_int(d, v, key, a->where, 1, 1000000, &a->s->limit_min))
			a->min = v;
	} else if (!strcmp(key, "max")) {
		if (yget_int(d, v, key, a->where, 1, 1000000, &a->s->limit_max))
			a->max = v;
	} else if (!strcmp(key, "fixed")) {
		if (yget_int(d, v, key, a->where, 1, 1000000, &a->s->limit_fixed))
			a->fixed = v;
	} else {
		ydoc_unknown_key(d, k, a->where, limit_keys);
	}
}

static void parse_limit(struct ydoc *d, yaml_node_t *n, const char *svc_where, struct service_conf *s)
{
	where_t sub;
	struct limit_arg a = { .where = sub, .s = s };

	snprintf(sub, sizeof(sub), " in limit of%s", svc_where + 3);
	if (!yget_type(d, n, YAML_MAPPING_NODE, "limit", svc_where))
		return;
	if (n->data.mapping.pairs.top == n->data.mapping.pairs.start) {
		doc_err(d->errs, n, "bad limit%s: give { min, max } or { fixed }", svc_where);
		return;
	}
	ymap_each(d, n, sub, limit_pair, &a);
	if (a.fixed && (a.min || a.max)) {
		doc_err(d->errs, a.fixed, "bad limit%s: 'fixed' cannot be combined with 'min'/'max'",
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
		doc_err(d->errs, at, "bad limit%s: min %d is greater than max %d", svc_where,
		    s->limit_min, s->limit_max);
	}
}

static void headroom_pair(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct simple_arg *a = arg;
	struct service_conf *s = a->conf;
	int cls = sluice_class_from_name(key);
	char what[32];

	if (cls < 0) {
		char val[48];

		doc_err(d->errs, k, "unknown key '%s'%s: headroom keys are L0, L1, L2, L3",
			ydoc_shown(k, val, sizeof(val)), a->where);
		return;
	}
	snprintf(what, sizeof(what), "%s", sluice_class_name(cls));
	yget_int(d, v, what, a->where, 0, 100, &s->headroom[cls]);
	s->headroom_written |= 1u << cls;
}

void service_conn_cap(const struct service_conf *s, unsigned threshold[SLUICE_NUM_CLASSES])
{
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++) {
		long long t = (long long)s->max_connections * (k ? s->headroom[k] : 100) / 100;

		threshold[k] = !s->max_connections || s->protocol == SLUICE_PROTO_HTTP ? 0 :
			       t < 1 ? 1 : (unsigned)t;
	}
}

/* ---- classify rules ---- */

struct rule_arg {
	const char *where;                /* " in classify rule 2 of service 'web'" */
	struct class_rule *r;
	yaml_node_t *matcher[4];          /* source, dscp, header, path_prefix */
	yaml_node_t *class_node;
};

static const char *const rule_keys[] = { "source", "dscp", "header", "path_prefix", "class", NULL };

static void rule_pair(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct rule_arg *a = arg;
	struct class_rule *r = a->r;

	if (!strcmp(key, "source")) {
		a->matcher[RULE_SOURCE] = v;
		if (yget_scalar(d, v, key, a->where)) {
			const char *why = parse_prefix(ynode_scalar(v), r);
			if (why)
				ydoc_bad(d, v, "source prefix", a->where, "%s", why);
		}
	} else if (!strcmp(key, "dscp")) {
		a->matcher[RULE_DSCP] = v;
		yget_int(d, v, key, a->where, 0, 63, &r->dscp);
	} else if (!strcmp(key, "header")) {
		a->matcher[RULE_HEADER] = v;
		if (yget_string(d, v, "header name", a->where, r->header, sizeof(r->header), false) &&
		    !valid_header_name(r->header))
			ydoc_bad(d, v, "header name", a->where, "not a valid HTTP header name");
	} else if (!strcmp(key, "path_prefix")) {
		a->matcher[RULE_PATH] = v;
		if (yget_string(d, v, key, a->where, r->path, sizeof(r->path), false) &&
		    r->path[0] != '/')
			ydoc_bad(d, v, key, a->where, "must start with '/'");
	} else if (!strcmp(key, "class")) {
		a->class_node = v;
	} else {
		ydoc_unknown_key(d, k, a->where, rule_keys);
	}
}

static const char *const matcher_names[] = { "source", "dscp", "header", "path_prefix" };

/* The rule is kept even when it had errors: the config fails anyway. */
static void parse_rule(struct ydoc *d, yaml_node_t *n, int idx, const char *svc_where,
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
	r->line = ynode_line(n);
	r->class = -1;
	if (!n || n->type != YAML_MAPPING_NODE) {
		doc_err(d->errs, n, "bad %s: expected a mapping, got %s", label, ynode_kind(n));
		return;
	}
	ymap_each(d, n, where, rule_pair, &a);
	for (int i = 0; i < 4; i++) {
		if (!a.matcher[i])
			continue;
		if (found++ == 0)
			kind = i;
		else
			doc_err(d->errs, a.matcher[i],
			    "bad %s: more than one matcher ('%s' and '%s'); write one rule each",
			    label, matcher_names[kind], matcher_names[i]);
	}
	if (kind < 0) {
		doc_err(d->errs, n, "bad %s: needs one of source, dscp, header, path_prefix", label);
		return;
	}
	r->kind = (enum rule_kind)kind;
	if (!a.class_node) {
		doc_err(d->errs, n, "bad %s: missing 'class'", label);
		return;
	}
	if (!yget_scalar(d, a.class_node, "class", where))
		return;
	if (strcmp(ynode_scalar(a.class_node), "from-header") == 0) {
		if (r->kind != RULE_HEADER)
			ydoc_bad(d, a.class_node, "class", where,
			    "from-header is only valid for header rules");
		else
			r->class = SLUICE_CLASS_FROM_HEADER;
	} else if (r->kind == RULE_HEADER) {
		ydoc_bad(d, a.class_node, "class", where,
		    "header rules take class: from-header (the header's value L0..L3 picks the class)");
	} else if ((r->class = sluice_class_from_name(ynode_scalar(a.class_node))) < 0) {
		ydoc_bad(d, a.class_node, "class", where, "expected L0, L1, L2 or L3");
	}
}

static void parse_classify(struct ydoc *d, yaml_node_t *n, const char *svc_where,
			   struct service_conf *s)
{
	yaml_node_item_t *it;
	int i = 0, n_path = 0, n_header = 0;

	if (!yget_type(d, n, YAML_SEQUENCE_NODE, "classify", svc_where))
		return;
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++, i++) {
		yaml_node_t *rn = yaml_document_get_node(&d->doc, *it);
		struct class_rule *r;

		if (s->n_rules >= SLUICE_MAX_RULES) {
			doc_err(d->errs, rn, "too many classify rules%s: at most %d", svc_where,
			    SLUICE_MAX_RULES);
			break;
		}
		r = &s->rules[s->n_rules++];
		parse_rule(d, rn, i, svc_where, r);
		if (r->kind == RULE_PATH && r->class >= 0 && ++n_path > SLUICE_MAX_PATH_RULES)
			doc_err(d->errs, rn, "too many path_prefix rules%s: at most %d", svc_where,
			    SLUICE_MAX_PATH_RULES);
		if (r->kind == RULE_HEADER && r->class >= 0 && ++n_header > 1)
			doc_err(d->errs, rn, "more than one header rule%s: only one is supported",
			    svc_where);
	}
}

/* trust_from: a list of IPv4 / IPv6 prefixes. */
static void parse_trust(struct ydoc *d, yaml_node_t *n, const char *svc_where,
			struct service_conf *s)
{
	yaml_node_item_t *it;

	if (!yget_type(d, n, YAML_SEQUENCE_NODE, "trust_from", svc_where))
		return;
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *pn = yaml_document_get_node(&d->doc, *it);
		struct class_rule *r;
		const char *why;

		if (s->n_trust >= SLUICE_MAX_TRUST) {
			doc_err(d->errs, pn, "too many trust_from prefixes%s: at most %d", svc_where,
			    SLUICE_MAX_TRUST);
			break;
		}
		if (!yget_scalar(d, pn, "trust_from", svc_where))
			continue;
		r = &s->trust[s->n_trust];
		memset(r, 0, sizeof(*r));
		r->kind = RULE_SOURCE;
		r->line = (int)pn->start_mark.line + 1;
		why = parse_prefix(ynode_scalar(pn), r);
		if (why)
			ydoc_bad(d, pn, "trust_from prefix", svc_where, "%s", why);
		else
			s->n_trust++;
	}
}

/* ---- services ---- */

struct svc_arg {
	const char *where;
	int idx;
	struct service_conf *s;
	yaml_node_t *name, *port, *protocol, *reject, *max_conn, *conn_cap, *read_gate;
};

static const char *const service_keys[] = { "name", "port", "protocol", "reject",
	"retry_after_s", "limit", "target_latency_ms", "aimd_window_ms", "headroom",
	"default_class", "classify", "breaker", "recovery_steps", "recovery_step_s",
	"headroom_mode", "client_limit", "limit_algorithm", "latency_slo", "min_samples",
	"max_connections", "trust_from", "connection_cap", "read_gate", NULL };

static const char *const headroom_mode_names[] = { "adaptive", "fixed" };

static const char *const proto_names[] = { "tcp", "http" };   /* = enum sluice_protocol */
static const char *const reject_names[] = { "rst", "drop" };  /* = enum sluice_reject_mode */
/* = service_conf.connection_cap (CONN_CAP_*) */
static const char *const conn_cap_names[] = { "off", "auto", "churn" };
/* = service_conf.read_gate (READ_GATE_*) */
static const char *const read_gate_names[] = { "off", "auto" };

static bool is_ctl_key(const char *key)
{
	for (int i = 0; sluice_service_ctl_keys[i]; i++)
		if (!strcmp(key, sluice_service_ctl_keys[i]))
			return true;
	return false;
}

static void service_pair(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct svc_arg *a = arg;
	struct service_conf *s = a->s;
	where_t sub;

	if (!strcmp(key, "name")) {
		a->name = v;
		if (yget_string(d, v, key, a->where, s->name, sizeof(s->name), false) &&
		    !valid_service_name(s->name))
			ydoc_bad(d, v, key, a->where, "use letters, digits, '-', '_' and '.' only");
	} else if (!strcmp(key, "port")) {
		const char *t = v && v->type == YAML_SCALAR_NODE ? ynode_scalar(v) : NULL;

		if (t && strchr(t, ':')) {
			const char *why = parse_addr_port(t, s);

			if (why)
				ydoc_bad(d, v, key, a->where, "%s", why);
			else
				a->port = v;
		} else if (yget_int(d, v, key, a->where, 1, 65535, &s->port)) {
			a->port = v;
		}
	} else if (!strcmp(key, "protocol")) {
		a->protocol = v;
		yget_enum(d, v, key, a->where, proto_names, 2, &s->protocol);
	} else if (!strcmp(key, "reject")) {
		a->reject = v;
		yget_enum(d, v, key, a->where, reject_names, 2, &s->reject);
	} else if (!strcmp(key, "retry_after_s")) {
		yget_int(d, v, key, a->where, 0, 255, &s->retry_after_s);
	} else if (!strcmp(key, "limit")) {
		parse_limit(d, v, a->where, s);
	} else if (!strcmp(key, "target_latency_ms")) {
		if (v && v->type == YAML_SCALAR_NODE && !strcmp(ynode_scalar(v), "auto"))
			s->target_latency_ms = 0;
		else if (yget_scalar(d, v, key, a->where)) {
			double t;
			if (!yparse_double(ynode_scalar(v), &t))
				ydoc_bad(d, v, key, a->where, "expected 'auto' or a number of milliseconds");
			else if (t <= 0 || t > 3600000)
				ydoc_bad(d, v, key, a->where, "must be > 0 and <= 3600000");
			else
				s->target_latency_ms = t;
		}
	} else if (!strcmp(key, "aimd_window_ms")) {
		yget_int(d, v, key, a->where, 1, 3600000, &s->aimd_window_ms);
	} else if (!strcmp(key, "headroom")) {
		struct simple_arg ha;
		snprintf(sub, sizeof(sub), " in headroom of%s", a->where + 3);
		ha.where = sub;
		ha.conf = s;
		s->headroom_set = 1;          /* written percentages are caps in every mode */
		/* An empty mapping writes no class, yet a written headroom with no class named
		 * is taken as every percentage written: each class capped, the opposite of
		 * leaving the key out. */
		if (yget_type(d, v, YAML_MAPPING_NODE, key, a->where) &&
		    v->data.mapping.pairs.top == v->data.mapping.pairs.start)
			ydoc_bad(d, v, key, a->where, "give at least one of L0, L1, L2, L3 (without "
				 "the key no class is capped)");
		else if (v && v->type == YAML_MAPPING_NODE)
			ymap_each(d, v, sub, headroom_pair, &ha);
	} else if (!strcmp(key, "default_class")) {
		if (yget_scalar(d, v, key, a->where)) {
			int cls = sluice_class_from_name(ynode_scalar(v));
			if (cls < 0)
				ydoc_bad(d, v, key, a->where, "expected L0, L1, L2 or L3");
			else
				s->default_class = cls;
		}
	} else if (!strcmp(key, "classify")) {
		parse_classify(d, v, a->where, s);
	} else if (!strcmp(key, "trust_from")) {
		parse_trust(d, v, a->where, s);
	} else if (!strcmp(key, "breaker")) {
		struct simple_arg ba;
		snprintf(sub, sizeof(sub), " in breaker of%s", a->where + 3);
		ba.where = sub;
		ba.conf = &s->breaker;
		if (yget_type(d, v, YAML_MAPPING_NODE, key, a->where))
			ymap_each(d, v, sub, breaker_pair, &ba);
	} else if (!strcmp(key, "recovery_steps")) {
		get_steps(d, v, key, a->where, s->ladder_steps, SLUICE_MAX_LADDER_STEPS,
			  &s->n_ladder_steps);
	} else if (!strcmp(key, "recovery_step_s")) {
		yget_seconds(d, v, key, a->where, 86400, &s->recovery_step_s);
	} else if (!strcmp(key, "headroom_mode")) {
		yget_enum(d, v, key, a->where, headroom_mode_names, 2, &s->headroom_mode);
	} else if (!strcmp(key, "client_limit")) {
		struct simple_arg ca;
		snprintf(sub, sizeof(sub), " in client_limit of%s", a->where + 3);
		ca.where = sub;
		ca.conf = s;
		if (yget_type(d, v, YAML_MAPPING_NODE, key, a->where))
			ymap_each(d, v, sub, client_limit_pair, &ca);
	} else if (!strcmp(key, "connection_cap")) {
		if (yget_enum(d, v, key, a->where, conn_cap_names, 3, &s->connection_cap))
			a->conn_cap = v;
	} else if (!strcmp(key, "read_gate")) {
		if (yget_enum(d, v, key, a->where, read_gate_names, 2, &s->read_gate))
			a->read_gate = v;
	} else if (!strcmp(key, "max_connections")) {
		if (yget_int(d, v, key, a->where, 0, 1000000, &s->max_connections))
			a->max_conn = v;
	} else if (is_ctl_key(key)) {
		/* the controller's keys: common/config_ctl.c parses their scalar text */
		char msg[160];
		if (yget_scalar(d, v, key, a->where) &&
		    sluice_service_ctl_key(s, key, ynode_scalar(v), msg, sizeof(msg)) < 0)
			ydoc_bad(d, v, key, a->where, "%s", msg);
	} else {
		ydoc_unknown_key(d, k, a->where, service_keys);
	}
}

/* Where each service's name and port were written, and which service first took each name
 * and port, for the duplicate checks: one lookup per service, so a list of thousands of
 * services costs no more than the parse itself. */
struct svc_marks {
	yaml_node_t **name, **port;      /* per service */
	int *port_first;                 /* port -> index + 1 of the last service on it */
	int *port_next;                  /* per service: index + 1 of the one before it on its
	                                  * port (services on one port differ by address) */
	int *name_slot;                  /* open addressing: index + 1 of a service, 0 = empty */
	unsigned name_mask;
};

/* The service that first took this name, or -1 (then idx takes it). */
static int name_first(struct svc_marks *m, const struct sluice_config *cfg, int idx)
{
	const char *name = cfg->services[idx].name;

	for (unsigned h = sluice_service_name_hash(name) & m->name_mask;; h = (h + 1) & m->name_mask) {
		int j = m->name_slot[h] - 1;

		if (j < 0) {
			m->name_slot[h] = idx + 1;
			return -1;
		}
		if (strcmp(cfg->services[j].name, name) == 0)
			return j;
	}
}

/* header and path_prefix rules match on HTTP requests only */
static void check_http_rules(struct ydoc *d, yaml_node_t *n, const char *where,
			     const struct service_conf *s)
{
	yaml_node_t *rules = ymap_get(d, n, "classify");

	if (s->protocol == SLUICE_PROTO_HTTP)
		return;
	for (int i = 0; i < s->n_rules; i++) {
		const struct class_rule *r = &s->rules[i];
		if (r->kind == RULE_HEADER || r->kind == RULE_PATH)
			doc_err(d->errs, yseq_at(d, rules, i),
				"bad classify rule %d of%s: %s rules need protocol: http",
				i + 1, where + 3, r->kind == RULE_HEADER ? "header" : "path_prefix");
	}
}

static void parse_service(struct ydoc *d, yaml_node_t *n, int idx, struct sluice_config *cfg,
			  struct svc_marks *m)
{
	struct service_conf *s = &cfg->services[idx];
	where_t where;
	struct svc_arg a = { .where = where, .idx = idx, .s = s };
	yaml_node_t *name;

	sluice_service_defaults(s);
	s->line = ynode_line(n);
	m->name[idx] = m->port[idx] = NULL;

	/* Name the service in messages before walking it, whatever the key order. */
	name = ymap_get(d, n, "name");
	if (name && name->type == YAML_SCALAR_NODE && name->data.scalar.length > 0 &&
	    name->data.scalar.length < SLUICE_NAME_LEN && valid_service_name(ynode_scalar(name)))
		snprintf(where, sizeof(where), " in service '%s'", ynode_scalar(name));
	else
		snprintf(where, sizeof(where), " in service #%d", idx + 1);

	if (!n || n->type != YAML_MAPPING_NODE) {
		doc_err(d->errs, n, "bad service #%d: expected a mapping, got %s", idx + 1,
			ynode_kind(n));
		return;
	}
	ymap_each(d, n, where, service_pair, &a);

	if (!a.name)
		doc_err(d->errs, n, "missing required key 'name'%s", where);
	if (!a.port && !ymap_get(d, n, "port"))
		doc_err(d->errs, n, "missing required key 'port'%s", where);
	if (a.name && s->name[0])
		m->name[idx] = a.name;
	m->port[idx] = a.port;
	check_http_rules(d, n, where, s);
	if (a.conn_cap && s->protocol != SLUICE_PROTO_HTTP)
		ydoc_bad(d, a.conn_cap, "connection_cap", where,
			 "needs protocol: http (a tcp service caps its connections with "
			 "max_connections)");
	if (a.read_gate && s->protocol != SLUICE_PROTO_HTTP)
		ydoc_bad(d, a.read_gate, "read_gate", where,
			 "needs protocol: http (the gate holds back http requests the server has "
			 "not read)");
	if (a.max_conn && s->max_connections && s->protocol == SLUICE_PROTO_HTTP)
		ydoc_bad(d, a.max_conn, "max_connections", where,
			 "needs protocol: tcp (an http service is admitted per request; its "
			 "connections are not admitted one by one)");

	/* duplicates against the services before this one */
	if (m->name[idx]) {
		int j = name_first(m, cfg, idx);
		if (j >= 0)
			doc_err(d->errs, m->name[idx], "duplicate service name '%s' (first at line %d)",
				s->name, ynode_line(m->name[j]));
	}
	if (m->port[idx] && s->port > 0 && s->port <= 65535) {
		int j;

		/* One service per (address, port), and one port-only service per port. */
		for (j = m->port_first[s->port] - 1; j >= 0; j = m->port_next[j] - 1) {
			const struct service_conf *o = &cfg->services[j];

			if (o->has_addr == s->has_addr &&
			    (!s->has_addr || !memcmp(o->addr, s->addr, sizeof(s->addr))))
				break;
		}
		if (j < 0) {
			m->port_next[idx] = m->port_first[s->port];
			m->port_first[s->port] = idx + 1;
		} else {
			doc_err(d->errs, m->port[idx], "duplicate port %d%s (already used by service "
				"'%s' at line %d)", s->port, where, cfg->services[j].name,
				ynode_line(m->port[j]));
		}
	}
}
/* Entries the v4-mapped range takes of its own in source_rules for service s: one beside its
 * source rules and one beside its trust_from when an IPv6 prefix there spans the range (see
 * prefix_spans_v4). */
static int v4_range_entries(const struct service_conf *s)
{
	int rules = 0, trust = 0;

	for (int j = 0; j < s->n_rules; j++)
		rules |= s->rules[j].kind == RULE_SOURCE && prefix_spans_v4(&s->rules[j]);
	for (int j = 0; j < s->n_trust; j++)
		trust |= prefix_spans_v4(&s->trust[j]);
	return rules + trust;
}


void config_parse_services(struct ydoc *d, yaml_node_t *n, struct sluice_config *cfg)
{
	struct svc_marks m = { 0 };
	yaml_node_item_t *it;
	long count = n && n->type == YAML_SEQUENCE_NODE ?
		     n->data.sequence.items.top - n->data.sequence.items.start : 0;
	unsigned slots = 16;
	int src_rules = 0, by_addr = 0;

	if (!yget_type(d, n, YAML_SEQUENCE_NODE, "services", ""))
		return;
	if (count > SLUICE_MAX_SERVICES) {
		/* The data path keeps a service's index in 16 bits (struct sluice_flow.svc). */
		doc_err(d->errs, yaml_document_get_node(&d->doc,
							n->data.sequence.items.start[SLUICE_MAX_SERVICES]),
			"too many services: %ld, at most %d (sluice's built-in limit)", count,
			SLUICE_MAX_SERVICES);
		return;
	}
	while (slots < 2 * (unsigned)count)
		slots *= 2;
	free(cfg->services);
	cfg->services = calloc((size_t)count + 1, sizeof(*cfg->services));
	m.name = calloc((size_t)count + 1, sizeof(*m.name));
	m.port = calloc((size_t)count + 1, sizeof(*m.port));
	m.port_first = calloc(65536, sizeof(*m.port_first));
	m.port_next = calloc((size_t)count + 1, sizeof(*m.port_next));
	m.name_slot = calloc(slots, sizeof(*m.name_slot));
	m.name_mask = slots - 1;
	if (!cfg->services || !m.name || !m.port || !m.port_first || !m.port_next || !m.name_slot) {
		doc_err(d->errs, n, "out of memory for %ld services", count);
		count = 0;
	}
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top &&
						  cfg->n_services < count; it++) {
		yaml_node_t *sn = yaml_document_get_node(&d->doc, *it);

		parse_service(d, sn, cfg->n_services, cfg, &m);
		cfg->n_services++;
	}
	free(m.name);
	free(m.port);
	free(m.port_first);
	free(m.port_next);
	free(m.name_slot);
	for (int i = 0; i < cfg->n_services; i++) {
		by_addr += cfg->services[i].has_addr;
		for (int j = 0; j < cfg->services[i].n_rules; j++)
			src_rules += cfg->services[i].rules[j].kind == RULE_SOURCE;
	}
	if (by_addr > SLUICE_MAX_ADDR_SERVICES)
		doc_err(d->errs, n, "too many services at an address (ADDR:PORT): %d, at most %d",
			by_addr, SLUICE_MAX_ADDR_SERVICES);
	for (int i = 0; i < cfg->n_services; i++)
		src_rules += cfg->services[i].n_trust + /* the same map holds them */
			     v4_range_entries(&cfg->services[i]);
	if (src_rules > SLUICE_MAX_SRC_RULES)
		doc_err(d->errs, n,
			"too many source rules and trust_from prefixes in all: %d, at most %d",
			src_rules, SLUICE_MAX_SRC_RULES);
}

