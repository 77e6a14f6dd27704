// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: timeout budget check. See budget.h for the definitions. */
#include "ops/budget.h"

#include <stdlib.h>
#include <string.h>

static void parse_hops(struct ydoc *d, yaml_node_t *list, struct budget_chain *c, int parent,
		       int depth);

static void parse_hop(struct ydoc *d, yaml_node_t *hn, int idx, struct budget_chain *c, int parent,
		      int depth)
{
	static const char *const keys[] = { "name", "timeout_ms", "retries", "backoff_ms", "self_ms",
					    "calls", NULL };
	struct budget_hop h;
	char what[2 * BUDGET_NAME_LEN + 32], where[2 * BUDGET_NAME_LEN + 40];
	const char *name = ynode_scalar(ymap_get(d, hn, "name"));
	yaml_node_t *v, *calls;
	int x, before = d->errs->total;

	if (name && *name && strlen(name) < BUDGET_NAME_LEN)
		snprintf(what, sizeof(what), "hop %s of chain %s", name, c->name);
	else
		snprintf(what, sizeof(what), "hop #%d of chain %s", idx + 1, c->name);
	snprintf(where, sizeof(where), " in %s", what);
	if (ymap_check(d, hn, what, keys) && (!hn || hn->type != YAML_MAPPING_NODE))
		return;
	memset(&h, 0, sizeof(h));
	h.line = ynode_line(hn);
	h.parent = parent;
	h.depth = depth;
	if ((v = ymap_need(d, hn, "name", where, NULL)))
		yget_string(d, v, "name", where, h.name, sizeof(h.name), false);
	if ((v = ymap_need(d, hn, "timeout_ms", where, NULL)) &&
	    yget_int(d, v, "timeout_ms", where, 1, BUDGET_MAX_MS, &x))
		h.timeout_ms = (uint64_t)x;
	if ((v = ymap_get(d, hn, "self_ms")) && yget_int(d, v, "self_ms", where, 0, BUDGET_MAX_MS, &x))
		h.self_ms = (uint64_t)x;
	if ((v = ymap_need(d, hn, "retries", where, "0 if the hop never retries")) &&
	    yget_int(d, v, "retries", where, 0, BUDGET_MAX_RETRIES, &x))
		h.retries = x;
	if ((v = ymap_get(d, hn, "backoff_ms")) && yget_int(d, v, "backoff_ms", where, 0, BUDGET_MAX_MS, &x))
		h.backoff_ms = (uint64_t)x;
	calls = ymap_get(d, hn, "calls");
	if (calls && (calls->type != YAML_SEQUENCE_NODE || yseq_len(calls) == 0))
		ydoc_bad(d, calls, "calls", where, "must be a non-empty list of hops (leave it out "
			 "when the hop calls nothing)");
	if (d->errs->total != before)
		return;
	if (h.retries == 0 && h.backoff_ms > 0) {
		ydoc_bad(d, v, "backoff_ms", where, "must be 0 when retries is 0 (backoff is the "
			 "total wait between retries)");
		return;
	}
	if (c->n_hops >= BUDGET_MAX_HOPS) {
		doc_err(d->errs, hn, "more than %d hops in chain %s", BUDGET_MAX_HOPS, c->name);
		return;
	}
	if (calls && depth + 1 >= BUDGET_MAX_DEPTH) {
		doc_err(d->errs, calls, "calls nested more than %d levels deep in chain %s",
			BUDGET_MAX_DEPTH, c->name);
		return;
	}
	c->hops[c->n_hops++] = h;
	if (calls)
		parse_hops(d, calls, c, c->n_hops - 1, depth + 1);
}

static void parse_hops(struct ydoc *d, yaml_node_t *list, struct budget_chain *c, int parent,
		       int depth)
{
	for (int i = 0; i < yseq_len(list); i++)
		parse_hop(d, yseq_at(d, list, i), i, c, parent, depth);
}

static void parse_chain(struct ydoc *d, yaml_node_t *cn, struct budget_file *bf)
{
	static const char *const keys[] = { "name", "budget_ms", "self_ms", "hops", NULL };
	struct budget_chain *c;
	char what[BUDGET_NAME_LEN + 16], where[BUDGET_NAME_LEN + 24];
	const char *name = ynode_scalar(ymap_get(d, cn, "name"));
	yaml_node_t *v;
	int x;

	if (bf->n_chains >= BUDGET_MAX_CHAINS) {
		doc_err(d->errs, cn, "more than %d chains", BUDGET_MAX_CHAINS);
		return;
	}
	c = &bf->chains[bf->n_chains];
	memset(c, 0, sizeof(*c));
	c->line = ynode_line(cn);
	if (name && *name && strlen(name) < BUDGET_NAME_LEN)
		snprintf(what, sizeof(what), "chain %s", name);
	else
		snprintf(what, sizeof(what), "chain #%d", bf->n_chains + 1);
	snprintf(where, sizeof(where), " in %s", what);
	if (ymap_check(d, cn, what, keys) && (!cn || cn->type != YAML_MAPPING_NODE))
		return;
	if ((v = ymap_need(d, cn, "name", where, NULL)) &&
	    yget_string(d, v, "name", where, c->name, sizeof(c->name), false)) {
		for (int i = 0; i < bf->n_chains; i++)
			if (!strcmp(bf->chains[i].name, c->name))
				doc_err(d->errs, v, "chain \"%s\" defined twice (first at line %d)",
					c->name, bf->chains[i].line);
	}
	if (!c->name[0])
		snprintf(c->name, sizeof(c->name), "#%d", bf->n_chains + 1);
	if ((v = ymap_need(d, cn, "budget_ms", where, "the entry timeout")) &&
	    yget_int(d, v, "budget_ms", where, 1, BUDGET_MAX_MS, &x))
		c->budget_ms = (uint64_t)x;
	if ((v = ymap_get(d, cn, "self_ms")) && yget_int(d, v, "self_ms", where, 0, BUDGET_MAX_MS, &x))
		c->self_ms = (uint64_t)x;
	parse_hops(d, ymap_need_list(d, cn, "hops", where), c, -1, 0);
	bf->n_chains++;
}

int budget_parse(const char *text, size_t len, const char *name, struct budget_file *out,
		 struct doc_errors *errs)
{
	static const char *const keys[] = { "chains", NULL };
	struct ydoc d;
	yaml_node_t *root, *v;

	memset(out, 0, sizeof(*out));
	doc_errors_init(errs, name);
	if (ydoc_parse(&d, text, len, errs))
		return -1;
	root = ydoc_root(&d);
	if (!root) {
		doc_err(errs, NULL, "empty file: a budget file needs its chains");
	} else if (!ymap_check(&d, root, NULL, keys) || root->type == YAML_MAPPING_NODE) {
		v = ymap_need_list(&d, root, "chains", "");
		for (int i = 0; i < yseq_len(v); i++)
			parse_chain(&d, yseq_at(&d, v, i), out);
	}
	ydoc_free(&d);
	if (errs->n)
		return -1;
	budget_compute(out);
	return 0;
}

static int budget_parse_text(const char *text, size_t len, const char *name, void *out,
			struct doc_errors *errs)
{
	return budget_parse(text, len, name, out, errs);
}

int budget_load(const char *path, struct budget_file *out, struct doc_errors *errs)
{
	memset(out, 0, sizeof(*out));
	return ydoc_load_file(path, budget_parse_text, out, errs);
}

static void add_service(struct budget_chain *c, const struct budget_hop *h)
{
	int i;

	for (i = 0; i < c->n_services; i++)
		if (!strcmp(c->services[i].name, h->name))
			break;
	if (i == c->n_services) {
		memcpy(c->services[i].name, h->name, sizeof(h->name));
		c->services[i].attempts = 0;
		c->n_services++;
	}
	c->services[i].attempts += h->attempts;
	if (c->services[i].attempts > c->amplification)
		c->amplification = c->services[i].attempts;
}

int budget_compute(struct budget_file *bf)
{
	int over = 0;

	for (int i = 0; i < bf->n_chains; i++) {
		struct budget_chain *c = &bf->chains[i];

		c->worst_ms = c->self_ms;
		c->amplification = 1;
		c->n_services = 0;
		c->retrying_hops = 0;
		c->layered_retries = 0;
		c->over_hops = 0;
		/* Parents come before their callees (pre-order): one pass down for what depends on
		 * the path from the entry. Inputs are bounded (1 h, 10 retries, 32 hops, 8 levels):
		 * no sum or product here can overflow. */
		for (int k = 0; k < c->n_hops; k++) {
			struct budget_hop *h = &c->hops[k];
			uint64_t f = (uint64_t)h->retries + 1;

			h->worst_ms = h->timeout_ms * f + h->backoff_ms;
			h->calls_ms = h->self_ms;
			h->attempts = f * (h->parent >= 0 ? c->hops[h->parent].attempts : 1);
			if (h->parent < 0)
				c->worst_ms += h->worst_ms;
			if (h->retries > 0) {
				c->retrying_hops++;
				for (int p = h->parent; p >= 0; p = c->hops[p].parent)
					if (c->hops[p].retries > 0) {
						c->layered_retries++;
						break;
					}
			}
			add_service(c, h);
		}
		/* and one pass up (callees after their parent) for what one attempt of a hop takes */
		for (int k = c->n_hops - 1; k >= 0; k--) {
			struct budget_hop *h = &c->hops[k];

			if (h->parent >= 0)
				c->hops[h->parent].calls_ms += h->worst_ms;
		}
		for (int k = 0; k < c->n_hops; k++) {
			struct budget_hop *h = &c->hops[k];

			h->over = h->calls_ms > h->timeout_ms;
			c->over_hops += h->over;
		}
		c->over = c->worst_ms > c->budget_ms || c->over_hops > 0;
		over += c->over;
	}
	return over;
}

static void report_chain(FILE *out, const struct budget_chain *c)
{
	const char *most = NULL;       /* the first service with the largest figure */

	for (int i = 0; i < c->n_services && !most; i++)
		if (c->services[i].attempts == c->amplification)
			most = c->services[i].name;
	if (c->worst_ms > c->budget_ms)
		fprintf(out, "FAIL %s: worst path %llu ms > entry budget %llu ms (%.1fx)", c->name,
			(unsigned long long)c->worst_ms, (unsigned long long)c->budget_ms,
			(double)c->worst_ms / (double)c->budget_ms);
	else
		fprintf(out, "%s %s: worst path %llu ms <= entry budget %llu ms", c->over ? "FAIL" : "OK  ",
			c->name, (unsigned long long)c->worst_ms, (unsigned long long)c->budget_ms);
	if (c->over_hops)
		fprintf(out, "; %d hop%s calls outlast %s timeout", c->over_hops,
			c->over_hops == 1 ? "'s" : "s'", c->over_hops == 1 ? "its" : "their");
	fprintf(out, "; retry amplification x%llu", (unsigned long long)c->amplification);
	if (most && c->amplification > 1)
		fprintf(out, " (%s)", most);
	fputc('\n', out);

	fprintf(out, "     %-24s %10s %8s %10s %10s %9s\n", "hop", "timeout", "attempts", "backoff",
		"worst", "per-entry");
	for (int k = 0; k < c->n_hops; k++) {
		const struct budget_hop *h = &c->hops[k];
		char name[BUDGET_NAME_LEN + 2 * BUDGET_MAX_DEPTH];

		/* callees indented under their caller, two spaces a level */
		snprintf(name, sizeof(name), "%*s%s", 2 * h->depth, "", h->name);
		fprintf(out, "     %-24s %7llu ms %8d %7llu ms %7llu ms %8llux\n", name,
			(unsigned long long)h->timeout_ms, h->retries + 1,
			(unsigned long long)h->backoff_ms, (unsigned long long)h->worst_ms,
			(unsigned long long)h->attempts);
	}
	if (c->self_ms)
		fprintf(out, "     %-24s %10s %8s %10s %7llu ms\n", "(own processing)", "", "", "",
			(unsigned long long)c->self_ms);
	fprintf(out, "     attempts per entry request:");
	for (int i = 0; i < c->n_services; i++)
		fprintf(out, "%s %s %llux", i ? "," : "", c->services[i].name,
			(unsigned long long)c->services[i].attempts);
	fputc('\n', out);
	for (int k = 0; k < c->n_hops; k++) {
		const struct budget_hop *h = &c->hops[k];
		uint64_t wait = h->parent >= 0 ? c->hops[h->parent].timeout_ms : c->budget_ms;
		char waits[BUDGET_NAME_LEN + 16];

		if (h->parent >= 0)
			snprintf(waits, sizeof(waits), "the timeout of %s", c->hops[h->parent].name);
		else
			snprintf(waits, sizeof(waits), "the entry budget");

		if (h->over)
			fprintf(out, "     over: %s: one attempt may take %llu ms (own %llu ms + calls) "
				"but its caller waits %llu ms\n", h->name, (unsigned long long)h->calls_ms,
				(unsigned long long)h->self_ms, (unsigned long long)h->timeout_ms);
		if (h->timeout_ms * 100 > wait * BUDGET_WARN_PCT)
			fprintf(out, "     warning: %s: one attempt (%llu ms) is %llu%% of %s "
				"(more than %d%%)\n", h->name, (unsigned long long)h->timeout_ms,
				(unsigned long long)(h->timeout_ms * 100 / wait), waits, BUDGET_WARN_PCT);
		if (h->retries > 0)
			for (int p = h->parent; p >= 0; p = c->hops[p].parent)
				if (c->hops[p].retries > 0) {
					fprintf(out, "     warning: %s retries below %s, which retries too: "
						"layers multiply (x%llu at %s); keep retries in one layer\n",
						h->name, c->hops[p].name, (unsigned long long)h->attempts,
						h->name);
					break;
				}
	}
}

int budget_report(FILE *out, const struct budget_file *bf)
{
	int over = 0;

	for (int i = 0; i < bf->n_chains; i++) {
		over += bf->chains[i].over;
		report_chain(out, &bf->chains[i]);
	}
	fprintf(out, "%d of %d chains over budget\n", over, bf->n_chains);
	return over;
}
