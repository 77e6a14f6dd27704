/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The YAML document layer shared by the config, degradation plans and budget chains.
 *
 * A file is loaded whole with libyaml's document API (every node knows its line and column),
 * then walked by the caller along its own schema; the walker never follows the document's
 * shape, so recursive aliases or deep nesting cannot make it loop or blow the stack.
 *
 * Every problem goes into ONE error list (struct doc_errors) as file:line:column and a message;
 * the typed getters below word their messages one way everywhere:
 *     bad KEY 'VALUE' WHERE: what is wrong        e.g. bad port '99999' in service 'web': ...
 * where WHERE is "" at top level or " in service 'web'", " in level L1", ... chosen by the
 * caller. A getter returns true and stores the value, or reports and returns false. */
#ifndef SLUICE_YAMLDOC_H
#define SLUICE_YAMLDOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <yaml.h>

#define DOC_MAX_ERRORS 32
#define DOC_MAX_BYTES  (4u << 20)           /* a larger file is refused */
#define DOC_MAX_DEPTH  64                  /* lists and mappings in one another; no schema
					    * here goes deeper than about 20 (budget calls) */
#define DOC_MAX_ANCHORS 1024               /* &name in one file (aliases are not counted) */
#define DOC_MAX_DIRECTIVES 16              /* %YAML and %TAG lines */

/* ---- the error list ---- */

struct doc_error {
	int line;                        /* 1-based; 0 when not tied to a place */
	int column;                      /* 1-based; 0 when unknown */
	char msg[384];                   /* the longest config warning is ~300 bytes */
};

struct doc_errors {
	char file[256];
	struct doc_error e[DOC_MAX_ERRORS];
	int n;                           /* errors stored */
	int total;                       /* errors found; past DOC_MAX_ERRORS the last slot says so */
};

void doc_errors_init(struct doc_errors *errs, const char *file);
/* An error at node `at` (NULL: not tied to a place). */
void doc_err(struct doc_errors *errs, const yaml_node_t *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "file:line:column: msg" per error ("file: msg" when not tied to a place). */
/* Error i as one line, "FILE:LINE:COL: message" (the form compilers use), without newline. */
#define DOC_ERROR_LINE 1024
void doc_error_format(const struct doc_errors *errs, int i, char *buf, size_t n);
void doc_errors_print(FILE *f, const struct doc_errors *errs);

/* ---- documents ---- */

struct ydoc {
	yaml_document_t doc;
	struct doc_errors *errs;         /* where every getter reports */
	int loaded;
};

/* Parse text as one YAML document into d (errs is initialised by the caller). Returns 0 when
 * a document was loaded (walk it, then ydoc_free()), -1 on a syntax error, a nesting deeper
 * than DOC_MAX_DEPTH, more than DOC_MAX_ANCHORS anchors or DOC_MAX_DIRECTIVES directives
 * (reported). A second document in the text, and every YAML tag (no getter reads one), are
 * reported as errors but the first document is still returned. */
int ydoc_parse(struct ydoc *d, const char *text, size_t len, struct doc_errors *errs);
/* Read path (at most DOC_MAX_BYTES, to its end: pipes work too) into a malloc'd,
 * NUL-terminated buffer. 0, or -1 with the reason in errs. */
int ydoc_read_file(const char *path, char **text, size_t *len, struct doc_errors *errs);
/* A parser of one document's text into `out` (config, plan, budget chains). */
typedef int (*ydoc_text_parser)(const char *text, size_t len, const char *name, void *out,
				struct doc_errors *errs);
/* Start errs for `path`, read it (ydoc_read_file) and hand the text to parse. The parser's
 * result, or -1 when the file cannot be read (reason in errs). */
int ydoc_load_file(const char *path, ydoc_text_parser parse, void *out, struct doc_errors *errs);
void ydoc_free(struct ydoc *d);
/* The root node, NULL for an empty document (a file of comments only). */
yaml_node_t *ydoc_root(struct ydoc *d);

/* ---- nodes ---- */

int ynode_line(const yaml_node_t *n);
/* The scalar's text, NULL when n is not a scalar. */
const char *ynode_scalar(const yaml_node_t *n);
/* "key:" with nothing after it (a plain empty scalar). */
bool ynode_is_empty(const yaml_node_t *n);
/* Empty, null, Null, NULL or ~ (plain). */
bool ynode_is_null(const yaml_node_t *n);
/* Scalar n as messages show it: at most len - 1 bytes ("..." after a cut, made between two
 * UTF-8 characters), control characters and NUL as '?'. Returns buf. */
const char *ydoc_shown(const yaml_node_t *n, char *buf, size_t len);
/* "a scalar", "a list", "a mapping" or "nothing", for messages. */
const char *ynode_kind(const yaml_node_t *n);
/* Number of items of a list (0 for anything else) and item i. */
int yseq_len(const yaml_node_t *n);
yaml_node_t *yseq_at(struct ydoc *d, const yaml_node_t *n, int i);
/* Value of `key` in a mapping, NULL when absent or map is not a mapping. */
yaml_node_t *ymap_get(struct ydoc *d, const yaml_node_t *map, const char *key);

/* ---- mappings ---- */

/* Calls fn for each pair whose key is a scalar and not a repeat of an earlier key; reports
 * the others ("keys must be plain words", "duplicate key"). fn reports unknown keys itself,
 * with ydoc_unknown_key(). */
typedef void (*ymap_fn)(struct ydoc *d, const char *key, yaml_node_t *k, yaml_node_t *v,
			void *arg);
void ymap_each(struct ydoc *d, yaml_node_t *map, const char *where, ymap_fn fn, void *arg);
/* "unknown key 'K'WHERE" with a "did you mean" hint from known[] (NULL-terminated), or the
 * list of allowed keys when none is close and the list is short. */
void ydoc_unknown_key(struct ydoc *d, const yaml_node_t *k, const char *where,
		      const char *const *known);
/* Check a mapping whose keys are read with ymap_get(): map must be a mapping (else "bad WHAT:
 * expected a mapping"), every key in allowed[] (else "unknown key 'K' in WHAT"), none twice.
 * what NULL: the top level. Returns the number of errors reported. */
int ymap_check(struct ydoc *d, yaml_node_t *map, const char *what, const char *const *allowed);
/* The value of a required key, or NULL after "missing required key 'KEY'WHERE (hint)". */
yaml_node_t *ymap_need(struct ydoc *d, yaml_node_t *map, const char *key, const char *where,
		       const char *hint);

/* The value of a required key that must be a non-empty list, or NULL after reporting. */
yaml_node_t *ymap_need_list(struct ydoc *d, yaml_node_t *map, const char *key, const char *where);

/* ---- typed getters (see the message format above) ---- */

void ydoc_bad(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
	      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
bool yget_type(struct ydoc *d, const yaml_node_t *n, yaml_node_type_t t, const char *key,
	       const char *where);
/* A scalar with no NUL character inside. */
bool yget_scalar(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where);
bool yget_int(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
	      long long min, long long max, int *out);
/* A whole percentage 0..100. */
bool yget_percent(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
		  int *out);
/* A finite decimal number in [min, max] (min excluded when min_excl). */
bool yget_double(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
		 double min, bool min_excl, double max, double *out);
/* A duration in seconds: a number > 0 and <= max_s. */
bool yget_seconds(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
		  double max_s, double *out);
/* A rate in 0..1. */
bool yget_rate(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
	       double *out);
/* The same, above 0: for rates whose 0 the controller reads as "not written" (the default). */
bool yget_rate_pos(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
		   double *out);
/* A string of 1..size-1 bytes (0..size-1 when allow_empty). */
bool yget_string(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
		 char *out, size_t size, bool allow_empty);
/* One of names[0..count-1], stored as its index. */
bool yget_enum(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
	       const char *const *names, int count, int *out);
/* true or false (plain). */
bool yget_bool(struct ydoc *d, const yaml_node_t *n, const char *key, const char *where,
	       int *out);

/* Number syntax shared with callers that read numbers out of larger strings: optional sign,
 * decimal digits only (no hex, no inf/nan), the whole string. */
bool yparse_int(const char *s, long long *out);
bool yparse_double(const char *s, double *out);

#endif
