// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The YAML document layer; see yamldoc.h. */
#include "common/yamldoc.h"
#include "common/utf8.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the error list */

void doc_errors_init(struct doc_errors *errs, const char *file)
{
	memset(errs, 0, sizeof(*errs));
	snprintf(errs->file, sizeof(errs->file), "%s", file ? file : "<input>");
}

static void add_error(struct doc_errors *errs, int line, int column, const char *fmt, va_list ap)
{
	struct doc_error *e;

	errs->total++;
	if (errs->n < DOC_MAX_ERRORS) {
		e = &errs->e[errs->n++];
		e->line = line;
		e->column = column;
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		return;
	}
	/* When more errors were found than fit, the last slot says so. */
	e = &errs->e[DOC_MAX_ERRORS - 1];
	e->line = e->column = 0;
	snprintf(e->msg, sizeof(e->msg), "too many errors: %d found, only the first %d shown",
		 errs->total, DOC_MAX_ERRORS - 1);
}

static void err_at(struct doc_errors *errs, int line, int column, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void err_at(struct doc_errors *errs, int line, int column, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_error(errs, line, column, fmt, ap);
	va_end(ap);
}

void doc_err(struct doc_errors *errs, const yaml_node_t *at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_error(errs, ynode_line(at), at ? (int)at->start_mark.column + 1 : 0, fmt, ap);
	va_end(ap);
}

void doc_error_format(const struct doc_errors *errs, int i, char *buf, size_t n)
{
	const struct doc_error *e = &errs->e[i];

	if (e->line > 0 && e->column > 0)
		snprintf(buf, n, "%s:%d:%d: %s", errs->file, e->line, e->column, e->msg);
	else if (e->line > 0)
		snprintf(buf, n, "%s:%d: %s", errs->file, e->line, e->msg);
	else
		snprintf(buf, n, "%s: %s", errs->file, e->msg);
}

void doc_errors_print(FILE *f, const struct doc_errors *errs)
{
	char line[DOC_ERROR_LINE];

	for (int i = 0; i < errs->n && i < DOC_MAX_ERRORS; i++) {
		doc_error_format(errs, i, line, sizeof(line));
		fprintf(f, "%s\n", line);
	}
}

/* ------------------------------------------------------------------ documents */

static void syntax_error(struct doc_errors *errs, const yaml_parser_t *p)
{
	int line = (int)p->problem_mark.line + 1, column = (int)p->problem_mark.column + 1;
	const char *what = p->problem ? p->problem : "unknown problem";

	if (p->context)
		err_at(errs, line, column, "YAML syntax error: %s (%s started at line %d)", what,
		       p->context, (int)p->context_mark.line + 1);
	else
		err_at(errs, line, column, "YAML syntax error: %s", what);
}

/* The anchor an event defines ("&a"), or NULL. */
static const yaml_char_t *event_anchor(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_SCALAR_EVENT: return ev->data.scalar.anchor;
	case YAML_SEQUENCE_START_EVENT: return ev->data.sequence_start.anchor;
	case YAML_MAPPING_START_EVENT: return ev->data.mapping_start.anchor;
	default: return NULL;
	}
}

/* The tag an event carries as written ("!!int 80", "!foo {}"), or NULL for none. */
static const yaml_char_t *event_tag(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_SCALAR_EVENT: return ev->data.scalar.tag;
	case YAML_SEQUENCE_START_EVENT: return ev->data.sequence_start.tag;
	case YAML_MAPPING_START_EVENT: return ev->data.mapping_start.tag;
	default: return NULL;
	}
}

/* A tag is refused wherever it stands: every key reads its value by its own type, so a tag
 * could only be ignored -- "port: !!str 80" taken for the number, "!!binary" for its
 * base64 text -- and a file would not mean what it says. The tag is shown in its short
 * form (!!int, not tag:yaml.org,2002:int), bytes outside printable ASCII as '?' (%-escapes
 * in a tag may give any byte, and messages go into JSON events). */
static void refuse_tag(struct doc_errors *errs, int line, int column, const yaml_char_t *tag)
{
	static const char core[] = "tag:yaml.org,2002:";
	const char *t = (const char *)tag, *pre = "";
	char shown[40];
	size_t n = 0;

	if (!strncmp(t, core, sizeof(core) - 1)) {
		pre = "!!";
		t += sizeof(core) - 1;
	}
	for (; t[n] && n < sizeof(shown) - 4; n++)
		shown[n] = t[n] > 0x20 && t[n] < 0x7f ? t[n] : '?';
	snprintf(shown + n, sizeof(shown) - n, "%s", t[n] ? "..." : "");
	err_at(errs, line, column, "YAML tag '%s%s' is not supported: remove it (each key reads "
	       "its value as its own type: a number, a word, a list...)", pre, shown);
}

/* Refuse more than DOC_MAX_DIRECTIVES lines that start with '%' (libyaml reads every such
 * line as a directive, %YAML or %TAG), counted in the text itself: the parser compares each
 * %TAG with all before it, and does so before it gives the document's first event, where the
 * event pass could stop it (20000 take 2 s of CPU, 60000 15 s, the 140000 of a full file
 * would take minutes). 0, or -1 after reporting. */
static int check_directives(const char *text, size_t len, struct doc_errors *errs)
{
	int line = 1, n = 0;

	for (size_t i = 0; i < len; i++) {
		if (text[i] == '%' && (i == 0 || text[i - 1] == '\n') && ++n > DOC_MAX_DIRECTIVES) {
			err_at(errs, line, 1, "more than %d directives (lines that start with '%%')",
			       DOC_MAX_DIRECTIVES);
			return -1;
		}
		line += text[i] == '\n';
	}
	return 0;
}

/* Refuse text that libyaml's load would take the square of its size over, before it is
 * loaded, as --check and sluiced's reload (between two ticks) would hang that long:
 *  - lists and mappings nested deeper than DOC_MAX_DEPTH: the scanner costs the square of
 *    the depth ("x: [[[[...": 50000 levels take 6 s of CPU, 200000 more than two minutes,
 *    and the two million a file of DOC_MAX_BYTES holds would take hours);
 *  - more than DOC_MAX_ANCHORS anchors: the loader compares each new anchor with all before
 *    it (60000 take 5 s of CPU, the 380000 of a full file some three minutes).
 * The parser's events come as they are scanned and know nothing of anchors, so this pass
 * stops at the first offence, before either cost. 0, or -1 after reporting. A syntax error
 * ends the pass quietly: the load that follows reports it. The same pass reports every tag
 * (refuse_tag), the one place a tag written is told from none: the loaded document gives an
 * untagged scalar the tag !!str. Those errors leave the load to go on (its caller refuses
 * the file for them), so that the walk reports the file's other errors with them. */
static int check_costly_shapes(const char *text, size_t len, struct doc_errors *errs)
{
	yaml_parser_t p;
	yaml_event_t ev;
	int depth = 0, anchors = 0, rc = 0, done = 0;

	if (check_directives(text, len, errs))
		return -1;
	if (!yaml_parser_initialize(&p)) {
		err_at(errs, 0, 0, "cannot initialise the YAML parser");
		return -1;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	while (!done && yaml_parser_parse(&p, &ev)) {
		int line = (int)ev.start_mark.line + 1, column = (int)ev.start_mark.column + 1;

		if (event_tag(&ev))
			refuse_tag(errs, line, column, event_tag(&ev));
		if (event_anchor(&ev) && ++anchors > DOC_MAX_ANCHORS) {
			err_at(errs, line, column, "more than %d anchors (&name)", DOC_MAX_ANCHORS);
			rc = -1;
		}
		switch (ev.type) {
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			if (!rc && ++depth > DOC_MAX_DEPTH) {
				err_at(errs, line, column, "lists and mappings nested more than %d deep",
				       DOC_MAX_DEPTH);
				rc = -1;
			}
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		default:
			break;
		}
		done = rc || ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	return rc;
}

int ydoc_parse(struct ydoc *d, const char *text, size_t len, struct doc_errors *errs)
{
	yaml_parser_t parser;
	yaml_document_t extra;

	memset(d, 0, sizeof(*d));
	d->errs = errs;
	if (check_costly_shapes(text, len, errs))
		return -1;
	if (!yaml_parser_initialize(&parser)) {
		err_at(errs, 0, 0, "cannot initialise the YAML parser");
		return -1;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &d->doc)) {
		syntax_error(errs, &parser);
		yaml_parser_delete(&parser);
		return -1;
	}
	d->loaded = 1;
	/* a second document ("---") is a mistake, not something to ignore */
	if (yaml_parser_load(&parser, &extra)) {
		yaml_node_t *r2 = yaml_document_get_root_node(&extra);
		if (r2)
			doc_err(errs, r2, "more than one YAML document in the file");
		yaml_document_delete(&extra);
	} else {
		syntax_error(errs, &parser);
	}
	yaml_parser_delete(&parser);
	return 0;
}

int ydoc_load_file(const char *path, ydoc_text_parser parse, void *out, struct doc_errors *errs)
{
	char *text;
	size_t len;
	int rc;

	doc_errors_init(errs, path);
	if (ydoc_read_file(path, &text, &len, errs))
		return -1;
	rc = parse(text, len, path, out, errs);
	free(text);
	return rc;
}

int ydoc_read_file(const char *path, char **text, size_t *len, struct doc_errors *errs)
{
	FILE *f = fopen(path, "re");
	size_t n = 0, cap = 0, got;
	char *buf = NULL, *nb;

	if (!f) {
		err_at(errs, 0, 0, "cannot open: %s", strerror(errno));
		return -1;
	}
	/* read to the end rather than trust the size: a pipe (--check /dev/stdin) has none. The
	 * buffer grows to DOC_MAX_BYTES, one byte to tell a larger file, and the NUL. */
	do {
		if (cap - n < 2) {
			if (cap >= DOC_MAX_BYTES + 2) {
				err_at(errs, 0, 0, "file too large (more than %u bytes)", DOC_MAX_BYTES);
				goto fail;
			}
			cap = cap ? cap * 2 : 8192;
			if (cap > DOC_MAX_BYTES + 2)
				cap = DOC_MAX_BYTES + 2;
			nb = realloc(buf, cap);
			if (!nb) {
				err_at(errs, 0, 0, "out of memory");
				goto fail;
			}
			buf = nb;
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
	} while (got > 0);
	if (ferror(f)) {
		err_at(errs, 0, 0, "cannot read: %s", strerror(errno));
		goto fail;
	}
	fclose(f);
	buf[n] = 0;
	*text = buf;
	*len = n;
	return 0;
fail:
	fclose(f);
	free(buf);
	return -1;
}

void ydoc_free(struct ydoc *d)
{
	if (d->loaded)
		yaml_document_delete(&d->doc);
	d->loaded = 0;
}

yaml_node_t *ydoc_root(struct ydoc *d)
{
	return d->loaded ? yaml_document_get_root_node(&d->doc) : NULL;
}

/* ------------------------------------------------------------------ nodes */

int ynode_line(const yaml_node_t *n)
{
	return n ? (int)n->start_mark.line + 1 : 0;
}

const char *ynode_scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

bool ynode_is_empty(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == 0 &&
	       n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

bool ynode_is_null(const yaml_node_t *n)
{
	const char *s = ynode_scalar(n);

	if (!s || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return !*s || !strcmp(s, "null") || !strcmp(s, "~") || !strcmp(s, "Null") ||
	       !strcmp(s, "NULL");
}

const char *ynode_kind(const yaml_node_t *n)
{
	if (!n || ynode_is_empty(n))
		return "nothing";
	switch (n->type) {
	case YAML_SCALAR_NODE: return "a scalar";
	case YAML_SEQUENCE_NODE: return "a list";
	case YAML_MAPPING_NODE: return "a mapping";
	default: return "nothing";
	}
}

int yseq_len(const yaml_node_t *n)
{
	if (!n || n->type != YAML_SEQUENCE_NODE)
		return 0;
	return (int)(n->data.sequence.items.top - n->data.sequence.items.start);
}

yaml_node_t *yseq_at(struct ydoc *d, const yaml_node_t *n, int i)
{
	if (i < 0 || i >= yseq_len(n))
		return NULL;
	return yaml_document_get_node(&d->doc, n->data.sequence.items.start[i]);
}

yaml_node_t *ymap_get(struct ydoc *d, const yaml_node_t *map, const char *key)
{
	yaml_node_pair_t *p;

	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(&d->doc, p->key);
		const char *ks = ynode_scalar(k);

		/* the whole key: one with a NUL inside is no key of any schema */
		if (ks && strcmp(ks, key) == 0 && k->data.scalar.length == strlen(key))
			return yaml_document_get_node(&d->doc, p->value);
	}
	return NULL;
}

/* Scalar value shortened for messages, control characters (NUL included: the whole scalar
 * is shown) as '?'. A value is cut between two characters, never inside one: the messages go
 * into sluiced's JSON events, and a string that is not UTF-8 is no JSON string (the event
 * would go out without its reason). */
const char *ydoc_shown(const yaml_node_t *n, char *buf, size_t len)
{
	const char *v = ynode_scalar(n);
	size_t l = n->data.scalar.length, cut = l < len ? l : len - 4;

	while (cut < l && cut > 0 && ((unsigned char)v[cut] & 0xc0) == 0x80)
		cut--;                       /* v[cut] continues a character */
	for (size_t i = 0; i < cut; i++)
		buf[i] = (unsigned char)v[i] < 0x20 ? '?' : v[i];
	snprintf(buf + cut, len - cut, "%s", cut < l ? "..." : "");
	return buf;
}

/* ------------------------------------------------------------------ mappings */

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

void ydoc_unknown_key(struct ydoc *d, const yaml_node_t *k, const char *where,
		      const char *const *known)
{
	char val[48], hint[96] = "";
	const char *best = NULL;
	int best_d = 3;
	size_t off;

	for (int i = 0; known && known[i]; i++) {
		int dist = edit_distance(ynode_scalar(k), known[i]);
		if (dist < best_d) {
			best_d = dist;
			best = known[i];
		}
	}
	if (best) {
		snprintf(hint, sizeof(hint), " (did you mean '%s'?)", best);
	} else if (known && known[0]) {
		off = (size_t)snprintf(hint, sizeof(hint), " (allowed:");
		for (int i = 0; known[i] && off < sizeof(hint); i++)
			off += (size_t)snprintf(hint + off, sizeof(hint) - off, "%s %s",
						i ? "," : "", known[i]);
		if (off < sizeof(hint) - 1)
			snprintf(hint + off, sizeof(hint) - off, ")");
		else
			hint[0] = '\0';          /* too many to list */
	}
	doc_err(d->errs, k, "unknown key '%s'%s%s", ydoc_shown(k, val, sizeof(val)),
		where[0] ? where : " at top level", hint);
}

/* A mapping's scalar key and its pair's place, for finding repeated keys. */
struct key_ref {
	const char *key;
	size_t i;
};

static int key_ref_cmp(const void *a, const void *b)
{
	const struct key_ref *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* A flag per pair of map, set when its key repeats an earlier pair's (malloc'd), or NULL after
 * reporting when out of memory. The keys are sorted rather than each compared with those
 * before it: a file of DOC_MAX_BYTES holds a mapping of some 500000 keys, whose n^2 compares
 * would hold --check, or sluiced's reload and with it the ticks, for minutes. */
static bool *repeated_keys(struct ydoc *d, const yaml_node_t *map)
{
	const yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
	size_t n = (size_t)(map->data.mapping.pairs.top - pairs), m = 0;
	struct key_ref *refs = malloc((n ? n : 1) * sizeof(*refs));
	bool *repeat = calloc(n ? n : 1, sizeof(*repeat));

	if (!refs || !repeat) {
		free(refs);
		free(repeat);
		doc_err(d->errs, map, "out of memory for a mapping of %zu keys", n);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *k = yaml_document_get_node(&d->doc, pairs[i].key);
		const char *ks = ynode_scalar(k);

		if (ks && strlen(ks) == k->data.scalar.length)   /* the others are refused anyway */
			refs[m++] = (struct key_ref){ .key = ks, .i = i };
	}
	qsort(refs, m, sizeof(*refs), key_ref_cmp);
	for (size_t j = 1; j < m; j++)
		if (!strcmp(refs[j].key, refs[j - 1].key))
			repeat[refs[j].i] = true;
	free(refs);
	return repeat;
}

/* The key node of pair p, or NULL after reporting a non-scalar or repeated key (repeated:
 * from repeated_keys()). */
static yaml_node_t *pair_key(struct ydoc *d, const yaml_node_pair_t *p, bool repeated,
			     const char *where)
{
	yaml_node_t *k = yaml_document_get_node(&d->doc, p->key);
	char val[48];

	if (!ynode_scalar(k)) {
		doc_err(d->errs, k, "keys must be plain words%s, got %s", where, ynode_kind(k));
		return NULL;
	}
	/* "name\0x" would be read as the key before its NUL, everywhere keys are compared */
	if (strlen(ynode_scalar(k)) != k->data.scalar.length) {
		doc_err(d->errs, k, "keys must be plain words%s: '%s' contains a NUL character",
			where, ydoc_shown(k, val, sizeof(val)));
		return NULL;
	}
	if (repeated) {
		doc_err(d->errs, k, "duplicate key '%s'%s", ydoc_shown(k, val, sizeof(val)), where);
		return NULL;
	}
	return k;
}

void ymap_each(struct ydoc *d, yaml_node_t *map, const char *where, ymap_fn fn, void *arg)
{
	yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
	size_t n = (size_t)(map->data.mapping.pairs.top - pairs);
	bool *repeat = repeated_keys(d, map);

	for (size_t i = 0; repeat && i < n; i++) {
		yaml_node_t *k = pair_key(d, &pairs[i], repeat[i], where);

		if (k)
			fn(d, ynode_scalar(k), k, yaml_document_get_node(&d->doc, pairs[i].value), arg);
	}
	free(repeat);
}

int ymap_check(struct ydoc *d, yaml_node_t *map, const char *what, const char *const *allowed)
{
	int before = d->errs->total;
	char where[160] = "";
	yaml_node_pair_t *pairs;
	bool *repeat;
	size_t n;

	if (what)
		snprintf(where, sizeof(where), " in %s", what);
	if (!map || map->type != YAML_MAPPING_NODE) {
		if (what)
			doc_err(d->errs, map, "bad %s: expected a mapping, got %s", what, ynode_kind(map));
		else
			doc_err(d->errs, map, "expected a mapping at top level, got %s", ynode_kind(map));
		return 1;
	}
	pairs = map->data.mapping.pairs.start;
	n = (size_t)(map->data.mapping.pairs.top - pairs);
	repeat = repeated_keys(d, map);
	for (size_t i = 0; repeat && i < n; i++) {
		yaml_node_t *k = pair_key(d, &pairs[i], repeat[i], where);
		int ok = 0;

		for (const char *const *a = allowed; k && *a && !ok; a++)
			ok = strcmp(*a, ynode_scalar(k)) == 0;
		if (k && !ok)
			ydoc_unknown_key(d, k, where, allowed);
	}
	free(repeat);
	return d->errs->total - before;
}

yaml_node_t *ymap_need(struct ydoc *d, yaml_node_t *map, const char *key, const char *where,
		       const char *hint)
{
	yaml_node_t *v = ymap_get(d, map, key);

	if (!v)
		doc_err(d->errs, map, "missing required key '%s'%s%s%s%s", key, where,
			hint ? " (" : "", hint ? hint : "", hint ? ")" : "");
	return v;
}

yaml_node_t *ymap_need_list(struct ydoc *d, yaml_node_t *map, const char *key, const char *where)
{
	yaml_node_t *v = ymap_need(d, map, key, where, NULL);

	if (!v || !yget_type(d, v, YAML_SEQUENCE_NODE, key, where))
		return NULL;
	if (!yseq_len(v)) {
		ydoc_bad(d, v, key, where, "must not be empty");
		return NULL;
	}
	return v;
}

/* ------------------------------------------------------------------ typed getters */

void ydoc_bad(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
	      const char *fmt, ...)
{
	char reason[128], val[48];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (ynode_scalar(n))
		doc_err(d->errs, n, "bad %s '%s'%s: %s", key, ydoc_shown(n, val, sizeof(val)), where,
			reason);
	else
		doc_err(d->errs, n, "bad %s%s: %s", key, where, reason);
}

bool yget_type(struct ydoc *d, const yaml_node_t *n, yaml_node_type_t t, const char *key,
	       const char *where)
{
	const char *want = t == YAML_SCALAR_NODE ? "a scalar" :
			   t == YAML_SEQUENCE_NODE ? "a list" : "a mapping";

	if (n && n->type == t)
		return true;
	ydoc_bad(d, n, key, where, "expected %s, got %s", want, ynode_kind(n));
	return false;
}

bool yget_scalar(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where)
{
	if (!yget_type(d, n, YAML_SCALAR_NODE, key, where))
		return false;
	if (strlen(ynode_scalar(n)) != n->data.scalar.length) {
		doc_err(d->errs, n, "bad %s%s: contains a NUL character", key, where);
		return false;
	}
	return true;
}

bool yparse_int(const char *s, long long *out)
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

bool yparse_double(const char *s, double *out)
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

bool yget_int(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
	      long long min, long long max, int *out)
{
	long long v;

	if (!yget_scalar(d, n, key, where))
		return false;
	if (!yparse_int(ynode_scalar(n), &v) || v < min || v > max) {
		ydoc_bad(d, n, key, where, "must be an integer in %lld..%lld", min, max);
		return false;
	}
	*out = (int)v;
	return true;
}

bool yget_percent(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
		  int *out)
{
	return yget_int(d, n, key, where, 0, 100, out);
}

bool yget_double(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
		 double min, bool min_excl, double max, double *out)
{
	double v;

	if (!yget_scalar(d, n, key, where))
		return false;
	if (!yparse_double(ynode_scalar(n), &v)) {
		ydoc_bad(d, n, key, where, "expected a number");
		return false;
	}
	if (v < min || (min_excl && v == min) || v > max) {
		ydoc_bad(d, n, key, where, "must be %s %g and <= %g", min_excl ? ">" : ">=", min, max);
		return false;
	}
	*out = v;
	return true;
}

bool yget_seconds(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
		  double max_s, double *out)
{
	return yget_double(d, n, key, where, 0, true, max_s, out);
}

bool yget_rate(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
	       double *out)
{
	double v;

	if (!yget_scalar(d, n, key, where))
		return false;
	if (!yparse_double(ynode_scalar(n), &v)) {
		ydoc_bad(d, n, key, where, "expected a number in 0..1");
		return false;
	}
	if (v < 0 || v > 1) {
		ydoc_bad(d, n, key, where, "rate must be in 0..1");
		return false;
	}
	*out = v;
	return true;
}

bool yget_rate_pos(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
		   double *out)
{
	double v;

	if (!yget_rate(d, n, key, where, &v))
		return false;
	if (v == 0) {
		ydoc_bad(d, n, key, where, "rate must be in 0..1 and above 0");
		return false;
	}
	*out = v;
	return true;
}

bool yget_string(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
		 char *out, size_t size, bool allow_empty)
{
	size_t l;

	if (!yget_scalar(d, n, key, where))
		return false;
	l = n->data.scalar.length;
	if (l == 0 && !allow_empty) {
		ydoc_bad(d, n, key, where, "must not be empty");
		return false;
	}
	if (l >= size) {
		ydoc_bad(d, n, key, where, "too long (%zu bytes, at most %zu)", l, size - 1);
		return false;
	}
	memcpy(out, ynode_scalar(n), l);
	out[l] = '\0';
	return true;
}

bool yget_enum(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
	       const char *const *names, int count, int *out)
{
	char list[96] = "";

	if (!yget_scalar(d, n, key, where))
		return false;
	for (int i = 0; i < count; i++) {
		if (strcmp(ynode_scalar(n), names[i]) == 0) {
			*out = i;
			return true;
		}
	}
	for (int i = 0; i < count; i++) {
		size_t l = strlen(list);
		snprintf(list + l, sizeof(list) - l, "%s%s", i == 0 ? "" : i == count - 1 ? " or " : ", ",
			 names[i]);
	}
	ydoc_bad(d, n, key, where, "expected %s", list);
	return false;
}

bool yget_bool(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
	       int *out)
{
	const char *s = ynode_scalar(n);

	if (s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	    (!strcmp(s, "true") || !strcmp(s, "false"))) {
		*out = s[0] == 't';
		return true;
	}
	ydoc_bad(d, n, key, where, "expected true or false");
	return false;
}
