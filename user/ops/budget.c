// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: timeout budget check. See budget.h for the definitions. */
#include "ops/budget.h"

#include <stdlib.h>
#include <string.h>

static void parse_hop(struct ydoc *d, yaml_node_t *hn, int idx, struct budget_chain *c)
{
	static const char *const keys[] = { "name", "timeout_ms", "retries", "backoff_ms", NULL };
	struct budget_hop h;
	char what[2 * BUDGET_NAME_LEN + 32], where[2 * BUDGET_NAME_LEN + 40];
	const char *name = ynode_scalar(ymap_get(d, hn, "name"));
	yaml_node_t *v;
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
	if ((v = ymap_need(d, hn, "name", where, NULL)))
		yget_string(d, v, "name", where, h.name, sizeof(h.name), false);
	if ((v = ymap_need(d, hn, "timeout_ms", where, NULL)) &&
	    yget_int(d, v, "timeout_ms", where, 1, BUDGET_MAX_MS, &x))
		h.timeout_ms = (uint64_t)x;
	if ((v = ymap_need(d, hn, "retries", where, "0 if the hop never retries")) &&
	    yget_int(d, v, "retries", where, 0, BUDGET_MAX_RETRIES, &x))
		h.retries = x;
	if ((v = ymap_get(d, hn, "backoff_ms")) && yget_int(d, v, "backoff_ms", where, 0, BUDGET_MAX_MS, &x))
		h.backoff_ms = (uint64_t)x;
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
	c->hops[c->n_hops++] = h;
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
	v = ymap_need_list(d, cn, "hops", where);
	for (int i = 0; i < yseq_len(v); i++)
		parse_hop(d, yseq_at(d, v, i), i, c);
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

int budget_load(const char *path, struct budget_file *out, struct doc_errors *errs)
{
	char *text;
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	doc_errors_init(errs, path);
	if (ydoc_read_file(path, &text, &len, errs))
		return -1;
	rc = budget_parse(text, len, path, out, errs);
	free(text);
	return rc;
}

int budget_compute(struct budget_file *bf)
{
	int over = 0;

	for (int i = 0; i < bf->n_chains; i++) {
		struct budget_chain *c = &bf->chains[i];

		c->worst_ms = c->self_ms;
		c->amplification = 1;
		c->amp_saturated = 0;
		c->retrying_hops = 0;
		for (int k = 0; k < c->n_hops; k++) {
			struct budget_hop *h = &c->hops[k];
			uint64_t f = (uint64_t)h->retries + 1;

			/* inputs are bounded (1 h, 10 retries, 32 hops): no overflow */
			h->worst_ms = h->timeout_ms * f + h->backoff_ms;
			c->worst_ms += h->worst_ms;
			if (h->retries > 0)
				c->retrying_hops++;
			if (c->amplification > UINT64_MAX / f) {
				c->amplification = UINT64_MAX;
				c->amp_saturated = 1;
			} else if (!c->amp_saturated) {
				c->amplification *= f;
			}
		}
		c->over = c->worst_ms > c->budget_ms;
		over += c->over;
	}
	return over;
}

int budget_report(FILE *out, const struct budget_file *bf)
{
	int over = 0;

	for (int i = 0; i < bf->n_chains; i++) {
		const struct budget_chain *c = &bf->chains[i];
		char amp[32];

		if (c->amp_saturated)
			snprintf(amp, sizeof(amp), "x>%llu", (unsigned long long)UINT64_MAX);
		else
			snprintf(amp, sizeof(amp), "x%llu", (unsigned long long)c->amplification);
		over += c->over;
		if (c->over)
			fprintf(out, "FAIL %s: worst path %llu ms > entry budget %llu ms (%.1fx); "
				"retry amplification %s\n", c->name, (unsigned long long)c->worst_ms,
				(unsigned long long)c->budget_ms, (double)c->worst_ms / (double)c->budget_ms,
				amp);
		else
			fprintf(out, "OK   %s: worst path %llu ms <= entry budget %llu ms; "
				"retry amplification %s\n", c->name, (unsigned long long)c->worst_ms,
				(unsigned long long)c->budget_ms, amp);
		fprintf(out, "     %-24s %10s %8s %10s %10s\n", "hop", "timeout", "attempts", "backoff",
			"worst");
		for (int k = 0; k < c->n_hops; k++) {
			const struct budget_hop *h = &c->hops[k];
			fprintf(out, "     %-24s %7llu ms %8d %7llu ms %7llu ms\n", h->name,
				(unsigned long long)h->timeout_ms, h->retries + 1,
				(unsigned long long)h->backoff_ms, (unsigned long long)h->worst_ms);
		}
		if (c->self_ms)
			fprintf(out, "     %-24s %10s %8s %10s %7llu ms\n", "(own processing)", "", "", "",
				(unsigned long long)c->self_ms);
		for (int k = 0; k < c->n_hops; k++) {
			const struct budget_hop *h = &c->hops[k];
			if (h->timeout_ms * 100 > c->budget_ms * BUDGET_WARN_PCT)
				fprintf(out, "     warning: %s: one attempt (%llu ms) is %llu%% of the entry "
					"budget (more than %d%%)\n", h->name,
					(unsigned long long)h->timeout_ms,
					(unsigned long long)(h->timeout_ms * 100 / c->budget_ms), BUDGET_WARN_PCT);
		}
		if (c->retrying_hops > 1)
			fprintf(out, "     warning: %d hops retry; keep retries in one layer and set the "
				"others to 0\n", c->retrying_hops);
	}
	fprintf(out, "%d of %d chains over budget\n", over, bf->n_chains);
	return over;
}
