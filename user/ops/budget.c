// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: timeout budget check. See budget.h for the definitions. */
#include "ops/budget.h"

#include <stdlib.h>
#include <string.h>

static void parse_hop(yaml_document_t *doc, yaml_node_t *hn, struct budget_chain *c,
		      struct doc_errors *errs)
{
	static const char *const keys[] = { "name", "timeout_ms", "retries", "backoff_ms", NULL };
	struct budget_hop h;
	char what[BUDGET_NAME_LEN + 32];
	yaml_node_t *v;
	long long x;
	int before = errs->n + errs->dropped;

	snprintf(what, sizeof(what), "chain %s: hop #%d", c->name, c->n_hops + 1);
	if (ymap_check(doc, hn, what, keys, errs) && (!hn || hn->type != YAML_MAPPING_NODE))
		return;
	memset(&h, 0, sizeof(h));
	h.line = ynode_line(hn);
	if (!(v = ymap_get(doc, hn, "name")))
		doc_err(errs, h.line, "%s: missing \"name\"", what);
	else if (!ynode_str(v, "name", h.name, sizeof(h.name), errs) && !h.name[0])
		doc_err(errs, ynode_line(v), "%s: name must not be empty", what);
	if (h.name[0])
		snprintf(what, sizeof(what), "chain %s: hop %s", c->name, h.name);
	if (!(v = ymap_get(doc, hn, "timeout_ms")))
		doc_err(errs, h.line, "%s: missing \"timeout_ms\"", what);
	else if (!ynode_int(v, "timeout_ms", 1, BUDGET_MAX_MS, &x, errs))
		h.timeout_ms = (uint64_t)x;
	if (!(v = ymap_get(doc, hn, "retries")))
		doc_err(errs, h.line, "%s: missing \"retries\" (0 if the hop never retries)", what);
	else if (!ynode_int(v, "retries", 0, BUDGET_MAX_RETRIES, &x, errs))
		h.retries = (int)x;
	if ((v = ymap_get(doc, hn, "backoff_ms")) && !ynode_int(v, "backoff_ms", 0, BUDGET_MAX_MS, &x, errs))
		h.backoff_ms = (uint64_t)x;
	if (errs->n + errs->dropped != before)
		return;
	if (h.retries == 0 && h.backoff_ms > 0) {
		doc_err(errs, h.line, "%s: backoff_ms %llu with retries 0 (backoff is the total wait "
			"between retries)", what, (unsigned long long)h.backoff_ms);
		return;
	}
	if (c->n_hops >= BUDGET_MAX_HOPS) {
		doc_err(errs, h.line, "chain %s: more than %d hops", c->name, BUDGET_MAX_HOPS);
		return;
	}
	c->hops[c->n_hops++] = h;
}

static void parse_chain(yaml_document_t *doc, yaml_node_t *cn, struct budget_file *bf,
			struct doc_errors *errs)
{
	static const char *const keys[] = { "name", "budget_ms", "self_ms", "hops", NULL };
	struct budget_chain *c;
	char what[BUDGET_NAME_LEN + 16];
	yaml_node_t *v;
	long long x;
	int line = ynode_line(cn);

	if (bf->n_chains >= BUDGET_MAX_CHAINS) {
		doc_err(errs, line, "more than %d chains", BUDGET_MAX_CHAINS);
		return;
	}
	c = &bf->chains[bf->n_chains];
	memset(c, 0, sizeof(*c));
	c->line = line;
	snprintf(what, sizeof(what), "chain #%d", bf->n_chains + 1);
	v = ymap_get(doc, cn, "name");
	if (v && v->type == YAML_SCALAR_NODE && v->data.scalar.value[0] &&
	    strlen((const char *)v->data.scalar.value) < BUDGET_NAME_LEN)
		snprintf(what, sizeof(what), "chain %s", (const char *)v->data.scalar.value);
	if (ymap_check(doc, cn, what, keys, errs) && (!cn || cn->type != YAML_MAPPING_NODE))
		return;
	if (!(v = ymap_get(doc, cn, "name"))) {
		doc_err(errs, line, "%s: missing \"name\"", what);
	} else if (!ynode_str(v, "name", c->name, sizeof(c->name), errs)) {
		if (!c->name[0])
			doc_err(errs, ynode_line(v), "%s: name must not be empty", what);
		for (int i = 0; i < bf->n_chains; i++)
			if (!strcmp(bf->chains[i].name, c->name))
				doc_err(errs, ynode_line(v), "chain \"%s\" defined twice (first at line %d)",
					c->name, bf->chains[i].line);
	}
	if (c->name[0])
		snprintf(what, sizeof(what), "chain %s", c->name);
	else
		snprintf(c->name, sizeof(c->name), "#%d", bf->n_chains + 1);
	if (!(v = ymap_get(doc, cn, "budget_ms")))
		doc_err(errs, line, "%s: missing \"budget_ms\" (the entry timeout)", what);
	else if (!ynode_int(v, "budget_ms", 1, BUDGET_MAX_MS, &x, errs))
		c->budget_ms = (uint64_t)x;
	if ((v = ymap_get(doc, cn, "self_ms")) && !ynode_int(v, "self_ms", 0, BUDGET_MAX_MS, &x, errs))
		c->self_ms = (uint64_t)x;
	if (!(v = ymap_get(doc, cn, "hops"))) {
		doc_err(errs, line, "%s: missing \"hops\"", what);
	} else if (v->type != YAML_SEQUENCE_NODE || v->data.sequence.items.start == v->data.sequence.items.top) {
		doc_err(errs, ynode_line(v), "%s: hops must be a non-empty list", what);
	} else {
		for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++)
			parse_hop(doc, yaml_document_get_node(doc, *it), c, errs);
	}
	bf->n_chains++;
}

int budget_parse(const char *text, size_t len, const char *name, struct budget_file *out,
		 struct doc_errors *errs)
{
	static const char *const keys[] = { "chains", NULL };
	yaml_document_t doc;
	yaml_node_t *root, *v;

	memset(out, 0, sizeof(*out));
	doc_errors_init(errs, name);
	if (ydoc_load_str(text, len, &doc, errs))
		return -1;
	root = yaml_document_get_root_node(&doc);
	if (ymap_check(&doc, root, "budget file", keys, errs) && root->type != YAML_MAPPING_NODE)
		goto done;
	v = ymap_get(&doc, root, "chains");
	if (!v) {
		doc_err(errs, ynode_line(root), "missing \"chains\"");
	} else if (v->type != YAML_SEQUENCE_NODE || v->data.sequence.items.start == v->data.sequence.items.top) {
		doc_err(errs, ynode_line(v), "chains: must be a non-empty list");
	} else {
		for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++)
			parse_chain(&doc, yaml_document_get_node(&doc, *it), out, errs);
	}
done:
	yaml_document_delete(&doc);
	if (errs->n || errs->dropped)
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
