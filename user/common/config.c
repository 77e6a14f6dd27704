// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice configuration: YAML file -> struct sluice_config, with every error collected.
 *
 * The file is loaded as one document by the YAML layer (common/yamldoc.h) and walked section
 * by section along the schema; the services list is in config_service.c. Nothing here keeps
 * state between calls.
 */
#include "common/config_parse.h"

#include <arpa/inet.h>

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

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

unsigned sluice_service_name_hash(const char *name)
{
	unsigned h = 2166136261u;   /* FNV-1a */

	for (int i = 0; i < SLUICE_NAME_LEN && name[i]; i++)
		h = (h ^ (unsigned char)name[i]) * 16777619u;
	return h;
}

int sluice_config_service_index(const struct sluice_config *cfg, const char *name)
{
	for (int i = 0; i < cfg->n_services; i++)
		if (strcmp(cfg->services[i].name, name) == 0)
			return i;
	return -1;
}

int sluice_config_match_services(const struct sluice_config *from, const struct sluice_config *to,
				 int *from_index)
{
	unsigned mask = 15;
	int *at;                  /* name -> index in from + 1, open addressing */

	while (mask + 1 < 2u * (unsigned)from->n_services)
		mask = mask * 2 + 1;
	if (!(at = calloc(mask + 1, sizeof(*at))))
		return -1;
	for (int j = 0; j < from->n_services; j++) {
		unsigned h = sluice_service_name_hash(from->services[j].name) & mask;

		while (at[h])
			h = (h + 1) & mask;
		at[h] = j + 1;
	}
	for (int i = 0; i < to->n_services; i++) {
		const char *name = to->services[i].name;

		from_index[i] = -1;
		for (unsigned h = sluice_service_name_hash(name) & mask; at[h]; h = (h + 1) & mask)
			if (!strcmp(from->services[at[h] - 1].name, name)) {
				from_index[i] = at[h] - 1;
				break;
			}
	}
	free(at);
	return 0;
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
	out->switch_max_renewals = 3;
	out->flow_idle_timeout_s = 600;
	out->syn_timeout_s = 30;
	out->cascade.max_opens = 5;
	out->cascade.window_s = 10;
	out->cascade.suspend_s = 0;   /* operators decide when breakers may open again */
	out->retry_storm.ratio = 0.2;
	out->retry_storm.windows = 3;
	out->node.cpu_pressure_pct = 40;
	out->node.step_s = 2;
	out->node.recover_s = 3;
	snprintf(out->node.pressure_file, sizeof(out->node.pressure_file), "/proc/pressure/cpu");
}

void sluice_config_free(struct sluice_config *c)
{
	free(c->services);
	c->services = NULL;
	c->n_services = 0;
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

/* "HOST:PORT" or "[V6]:PORT"; HOST may be empty (all addresses). */
/* The syntax sluiced's listener takes (metrics_http.c, split_addr), so that an address
 * --check passes does not fail at start: "[ADDR]:PORT" with the first ']' right before the
 * port's ':' (ADDR an IPv6 or IPv4 literal, an IPv6 one with its %zone, or empty: every
 * address), "HOST:PORT" with no ':' or bracket in HOST; PORT one to five digits. */
static const char *check_address(const char *s)
{
	const char *colon = strrchr(s, ':');
	long long port;

	if (!colon)
		return "expected HOST:PORT";
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		char host[64];
		size_t n = end ? (size_t)(end - s - 1) : 0;
		char *zone;
		unsigned char a[16];

		if (!end || end + 1 != colon || n >= sizeof(host))
			return "expected [IPV6]:PORT";
		memcpy(host, s + 1, n);
		host[n] = '\0';
		zone = strchr(host, '%');
		if (zone && zone[1] && strchr(host, ':'))
			*zone = '\0';
		if (n && inet_pton(AF_INET6, host, a) != 1 && (zone || inet_pton(AF_INET, host, a) != 1))
			return "not an IPv6 address in [ADDR]:PORT";
	} else if (memchr(s, ':', (size_t)(colon - s))) {
		return "IPv6 addresses must be written [ADDR]:PORT";
	} else if (strpbrk(s, "[]")) {
		return "expected HOST:PORT";
	}
	/* Port 0 takes any free port (tests; the chosen one is logged at start). */
	if (!yparse_int(colon + 1, &port) || colon[1] == '+' || colon[1] == '-' ||
	    strlen(colon + 1) > 5 || port < 0 || port > 65535)
		return "port must be an integer in 0..65535";
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* process-wide sections */

static const char *const cascade_keys[] = { "max_opens", "window_s", "suspend_s", NULL };

static void cascade_pair(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct simple_arg *a = arg;
	struct cascade_conf *cc = a->conf;

	if (!strcmp(key, "max_opens"))
		yget_int(d, v, key, a->where, 1, SLUICE_MAX_CASCADE_OPENS, &cc->max_opens);
	else if (!strcmp(key, "window_s"))
		yget_seconds(d, v, key, a->where, 86400, &cc->window_s);
	else if (!strcmp(key, "suspend_s"))
		yget_double(d, v, key, a->where, 0, false, 7 * 86400, &cc->suspend_s);
	else
		ydoc_unknown_key(d, k, a->where, cascade_keys);
}

static const char *const retry_keys[] = { "ratio", "windows", NULL };

static void retry_pair(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct simple_arg *a = arg;
	struct retry_storm_conf *rs = a->conf;

	if (!strcmp(key, "ratio"))
		yget_rate_pos(d, v, key, a->where, &rs->ratio);
	else if (!strcmp(key, "windows"))
		yget_int(d, v, key, a->where, 1, 100000, &rs->windows);
	else
		ydoc_unknown_key(d, k, a->where, retry_keys);
}

/* ---- interfaces ---- */

static void add_ifspec(struct ydoc *d, const yaml_node_t *v, const char *key,
		       struct sluice_config *cfg)
{
	char name[IF_NAMESIZE];

	if (!yget_string(d, v, key, "", name, sizeof(name), false))
		return;
	if (!valid_ifname(name)) {
		ydoc_bad(d, v, key, "", "not a valid interface name or pattern");
		return;
	}
	for (int i = 0; i < cfg->n_ifspecs; i++)
		if (!strcmp(cfg->ifspecs[i], name)) {
			ydoc_bad(d, v, key, "", "'%s' is listed twice", name);
			return;
		}
	if (cfg->n_ifspecs >= SLUICE_MAX_IFSPECS) {
		ydoc_bad(d, v, key, "", "at most %d entries", SLUICE_MAX_IFSPECS);
		return;
	}
	snprintf(cfg->ifspecs[cfg->n_ifspecs++], IF_NAMESIZE, "%s", name);
}

/* `interface: eth0` is a list of one; `interfaces: [eth0, "ens*", auto]` any number. */
static void parse_interfaces(struct ydoc *d, yaml_node_t *v, const char *key,
			     struct sluice_config *cfg)
{
	if (v && v->type == YAML_SEQUENCE_NODE) {
		int n = yseq_len(v);

		if (n == 0)
			ydoc_bad(d, v, key, "", "an empty list attaches nowhere");
		for (int i = 0; i < n; i++)
			add_ifspec(d, yseq_at(d, v, i), key, cfg);
	} else {
		add_ifspec(d, v, key, cfg);
	}
	if (cfg->n_ifspecs)
		snprintf(cfg->interface, sizeof(cfg->interface), "%s", cfg->ifspecs[0]);
}

const char *sluice_config_ifaces(const struct sluice_config *c, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (int i = 0; i < c->n_ifspecs && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
					 c->ifspecs[i]);
	return buf;
}

static const char *const node_keys[] = { "arbitration", "cpu_pressure_pct", "step_s",
					  "recover_s", "pressure_file", NULL };
static const char *const node_arb_names[] = { "off", "psi" };

static void node_pair(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct simple_arg *a = arg;
	struct node_conf *nc = a->conf;

	if (!strcmp(key, "arbitration"))
		yget_enum(d, v, key, a->where, node_arb_names, 2, &nc->arbitration);
	else if (!strcmp(key, "cpu_pressure_pct"))
		yget_double(d, v, key, a->where, 0, true, 99, &nc->cpu_pressure_pct);
	else if (!strcmp(key, "step_s"))
		yget_seconds(d, v, key, a->where, 3600, &nc->step_s);
	else if (!strcmp(key, "recover_s"))
		yget_seconds(d, v, key, a->where, 3600, &nc->recover_s);
	else if (!strcmp(key, "pressure_file"))
		yget_string(d, v, key, a->where, nc->pressure_file, sizeof(nc->pressure_file), false);
	else
		ydoc_unknown_key(d, k, a->where, node_keys);
}

/* ---- top level ---- */

/* A directory sluicectl finds through sluiced's record or the config: read from another
 * working directory, a relative path would name another place. */
static void get_absolute_path(struct ydoc *d, yaml_node_t *v, const char *key, char *out,
			      size_t size)
{
	if (yget_string(d, v, key, "", out, size, false) && out[0] != '/')
		ydoc_bad(d, v, key, "", "must be an absolute path (sluicectl, run from another "
			 "directory, would look elsewhere)");
}

struct root_arg {
	struct sluice_config *cfg;
	yaml_node_t *interface, *services, *control, *heartbeat;
};

static const char *const root_keys[] = { "interface", "interfaces", "xdp_mode", "control_interval_ms",
	"heartbeat_timeout_ms", "metrics_address", "state_dir", "pin_dir", "switch_group",
	"switch_max_renewals", "flow_idle_timeout_s", "syn_timeout_s", "cascade", "retry_storm", "node", "services", NULL };

static const char *const xdp_names[] = { "auto", "native", "generic" };

static void root_pair(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	struct root_arg *a = arg;
	struct sluice_config *cfg = a->cfg;

	if (!strcmp(key, "interface") || !strcmp(key, "interfaces")) {
		if (a->interface)
			ydoc_bad(d, v, key, "", "give either 'interface' or 'interfaces', not both");
		else
			parse_interfaces(d, v, key, cfg);
		a->interface = v;
	} else if (!strcmp(key, "xdp_mode")) {
		yget_enum(d, v, key, "", xdp_names, 3, &cfg->xdp_mode);
	} else if (!strcmp(key, "control_interval_ms")) {
		if (yget_int(d, v, key, "", 1, 60000, &cfg->control_interval_ms))
			a->control = v;
	} else if (!strcmp(key, "heartbeat_timeout_ms")) {
		if (yget_int(d, v, key, "", 1, 3600000, &cfg->heartbeat_timeout_ms))
			a->heartbeat = v;
	} else if (!strcmp(key, "metrics_address")) {
		if (yget_string(d, v, key, "", cfg->metrics_address, sizeof(cfg->metrics_address),
			       false)) {
			const char *why = check_address(cfg->metrics_address);
			if (why)
				ydoc_bad(d, v, key, "", "%s", why);
		}
	} else if (!strcmp(key, "state_dir")) {
		get_absolute_path(d, v, key, cfg->state_dir, sizeof(cfg->state_dir));
	} else if (!strcmp(key, "pin_dir")) {
		size_t n;

		get_absolute_path(d, v, key, cfg->pin_dir, sizeof(cfg->pin_dir));
		n = strlen(cfg->pin_dir);
		while (n > 1 && cfg->pin_dir[n - 1] == '/')
			n--;
		/* sluiced refuses it at start too (any file system's root): said here already,
		 * for the usual place, so a --check before a rollout catches it */
		if (n == strlen("/sys/fs/bpf") && !strncmp(cfg->pin_dir, "/sys/fs/bpf", n))
			ydoc_bad(d, v, key, "", "is the BPF file system's root, where other tools pin "
				 "too: use a directory of sluice's own below it (the default is "
				 SLUICE_PIN_DIR ")");
	} else if (!strcmp(key, "switch_group")) {
		yget_string(d, v, key, "", cfg->switch_group, sizeof(cfg->switch_group), true);
	} else if (!strcmp(key, "switch_max_renewals")) {
		yget_int(d, v, key, "", 0, 1000, &cfg->switch_max_renewals);
	} else if (!strcmp(key, "flow_idle_timeout_s")) {
		yget_int(d, v, key, "", 1, 7 * 86400, &cfg->flow_idle_timeout_s);
	} else if (!strcmp(key, "syn_timeout_s")) {
		yget_int(d, v, key, "", 1, 86400, &cfg->syn_timeout_s);
	} else if (!strcmp(key, "cascade")) {
		struct simple_arg ca = { " in cascade", &cfg->cascade };
		if (yget_type(d, v, YAML_MAPPING_NODE, key, ""))
			ymap_each(d, v, ca.where, cascade_pair, &ca);
	} else if (!strcmp(key, "retry_storm")) {
		struct simple_arg ra = { " in retry_storm", &cfg->retry_storm };
		if (yget_type(d, v, YAML_MAPPING_NODE, key, ""))
			ymap_each(d, v, ra.where, retry_pair, &ra);
	} else if (!strcmp(key, "node")) {
		struct simple_arg na = { " in node", &cfg->node };
		if (yget_type(d, v, YAML_MAPPING_NODE, key, ""))
			ymap_each(d, v, na.where, node_pair, &na);
	} else if (!strcmp(key, "services")) {
		a->services = v;
		/* "services:" with nothing after it is reported below as "no services" */
		if (!(v && v->type == YAML_SCALAR_NODE && v->data.scalar.length == 0 &&
		      v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE))
			config_parse_services(d, v, cfg);
	} else {
		ydoc_unknown_key(d, k, "", root_keys);
	}
}

static void parse_root(struct ydoc *d, yaml_node_t *root, struct sluice_config *cfg)
{
	struct root_arg a = { .cfg = cfg };

	if (!root || (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0)) {
		doc_err(d->errs, NULL, "no services (the file is empty)");
		return;
	}
	if (root->type != YAML_MAPPING_NODE) {
		doc_err(d->errs, root, "expected a mapping of settings at top level, got %s",
		    ynode_kind(root));
		return;
	}
	ymap_each(d, root, "", root_pair, &a);
	if (!a.interface)
		doc_err(d->errs, NULL, "missing required key 'interface' (or 'interfaces')");
	if (cfg->n_services == 0 && (!a.services || a.services->type == YAML_SCALAR_NODE ||
				     (a.services->type == YAML_SEQUENCE_NODE &&
				      a.services->data.sequence.items.top ==
				      a.services->data.sequence.items.start)))
		doc_err(d->errs, a.services, "no services");
	if (cfg->heartbeat_timeout_ms <= cfg->control_interval_ms) {
		yaml_node_t *at = a.heartbeat ? a.heartbeat : a.control;
		doc_err(d->errs, at, "heartbeat_timeout_ms (%d) must be greater than "
		    "control_interval_ms (%d)", cfg->heartbeat_timeout_ms, cfg->control_interval_ms);
	}
}

/* ------------------------------------------------------------------------------------------ */
/* entry points */

int sluice_config_parse(const char *text, size_t len, const char *name,
			struct sluice_config *out, struct doc_errors *errs)
{
	struct ydoc d;

	doc_errors_init(errs, name ? name : "<config>");
	sluice_config_defaults(out);
	if (ydoc_parse(&d, text, len, errs) == 0) {
		parse_root(&d, ydoc_root(&d), out);
		ydoc_free(&d);
	}
	return errs->n ? -1 : 0;
}

static int sluice_config_parse_text(const char *text, size_t len, const char *name, void *out,
			struct doc_errors *errs)
{
	return sluice_config_parse(text, len, name, out, errs);
}

int sluice_config_load(const char *path, struct sluice_config *out, struct doc_errors *errs)
{
	sluice_config_defaults(out);
	return ydoc_load_file(path, sluice_config_parse_text, out, errs);
}
