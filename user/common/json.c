// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: minimal strict JSON reader/writer. See json.h for what is (not) accepted. */
#include "common/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jp {
	const char *p, *end, *line_start;
	int line;
	char *err;
	size_t errlen;
	int failed;
};

static void jp_fail(struct jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jp_fail(struct jp *j, const char *fmt, ...)
{
	char msg[160];
	va_list ap;

	if (j->failed)
		return;
	j->failed = 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (j->err && j->errlen)
		snprintf(j->err, j->errlen, "line %d col %d: %s", j->line,
			 (int)(j->p - j->line_start) + 1, msg);
}

static void skip_ws(struct jp *j)
{
	while (j->p < j->end) {
		char c = *j->p;
		if (c == '\n') {
			j->line++;
			j->p++;
			j->line_start = j->p;
		} else if (c == ' ' || c == '\t' || c == '\r') {
			j->p++;
		} else {
			break;
		}
	}
}

static struct sjson *new_node(struct jp *j, enum sjson_type t)
{
	struct sjson *v = calloc(1, sizeof(*v));
	if (!v) {
		jp_fail(j, "out of memory");
		return NULL;
	}
	v->type = t;
	v->line = j->line;
	return v;
}

void sjson_free(struct sjson *v)
{
	while (v) {
		struct sjson *next = v->next;
		sjson_free(v->child);
		free(v->key);
		free(v->s);
		free(v);
		v = next;
	}
}

static int hex4(struct jp *j, unsigned *out)
{
	unsigned v = 0;
	for (int k = 0; k < 4; k++) {
		char c;
		if (j->p >= j->end) {
			jp_fail(j, "truncated \\u escape");
			return -1;
		}
		c = *j->p++;
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else {
			jp_fail(j, "bad hex digit in \\u escape");
			return -1;
		}
	}
	*out = v;
	return 0;
}

static void put_utf8(char *o, size_t *n, unsigned cp)
{
	if (cp < 0x80) {
		o[(*n)++] = (char)cp;
	} else if (cp < 0x800) {
		o[(*n)++] = (char)(0xc0 | (cp >> 6));
		o[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		o[(*n)++] = (char)(0xe0 | (cp >> 12));
		o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		o[(*n)++] = (char)(0xf0 | (cp >> 18));
		o[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
		o[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[(*n)++] = (char)(0x80 | (cp & 0x3f));
	}
}

/* At the opening quote. Returns a malloc'ed decoded string. Decoded length <= raw length. */
static char *parse_string(struct jp *j)
{
	const char *start;
	char *out;
	size_t n = 0;

	j->p++; /* opening quote */
	start = j->p;
	while (j->p < j->end && *j->p != '"') {
		if (*j->p == '\\')
			j->p++;
		j->p++;
	}
	if (j->p >= j->end) {
		j->p = start;
		jp_fail(j, "unterminated string");
		return NULL;
	}
	out = malloc((size_t)(j->p - start) + 1);
	if (!out) {
		jp_fail(j, "out of memory");
		return NULL;
	}
	j->p = start;
	while (*j->p != '"') {
		unsigned char c = (unsigned char)*j->p;
		if (c < 0x20) {
			jp_fail(j, "raw control character in string");
			goto bad;
		}
		if (c != '\\') {
			out[n++] = (char)c;
			j->p++;
			continue;
		}
		j->p++;
		c = (unsigned char)*j->p++;
		switch (c) {
		case '"': out[n++] = '"'; break;
		case '\\': out[n++] = '\\'; break;
		case '/': out[n++] = '/'; break;
		case 'b': out[n++] = '\b'; break;
		case 'f': out[n++] = '\f'; break;
		case 'n': out[n++] = '\n'; break;
		case 'r': out[n++] = '\r'; break;
		case 't': out[n++] = '\t'; break;
		case 'u': {
			unsigned cp, lo;
			if (hex4(j, &cp))
				goto bad;
			if (cp >= 0xdc00 && cp <= 0xdfff) {
				jp_fail(j, "unpaired low surrogate");
				goto bad;
			}
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') {
					jp_fail(j, "unpaired high surrogate");
					goto bad;
				}
				j->p += 2;
				if (hex4(j, &lo))
					goto bad;
				if (lo < 0xdc00 || lo > 0xdfff) {
					jp_fail(j, "bad low surrogate");
					goto bad;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			if (cp == 0) {
				jp_fail(j, "\\u0000 is not allowed");
				goto bad;
			}
			put_utf8(out, &n, cp);
			break;
		}
		default:
			j->p--;
			jp_fail(j, "bad escape '\\%c'", c >= 0x20 && c < 0x7f ? c : '?');
			goto bad;
		}
	}
	j->p++; /* closing quote */
	out[n] = 0;
	return out;
bad:
	free(out);
	return NULL;
}

static struct sjson *parse_value(struct jp *j, int depth);

static int lit(struct jp *j, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(j->end - j->p) >= n && memcmp(j->p, word, n) == 0) {
		const char *after = j->p + n;
		if (after < j->end && ((*after >= 'a' && *after <= 'z') || (*after >= '0' && *after <= '9')))
			return 0;
		j->p += n;
		return 1;
	}
	return 0;
}

static struct sjson *parse_number(struct jp *j)
{
	const char *s = j->p;
	int neg = 0;
	uint64_t v = 0, lim;
	struct sjson *node;

	if (*j->p == '-') {
		neg = 1;
		j->p++;
	}
	if (j->p >= j->end || *j->p < '0' || *j->p > '9') {
		jp_fail(j, "bad number");
		return NULL;
	}
	if (*j->p == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9') {
		jp_fail(j, "leading zero in number");
		return NULL;
	}
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
		unsigned d = (unsigned)(*j->p - '0');
		if (v > (lim - d) / 10) {
			j->p = s;
			jp_fail(j, "number out of range");
			return NULL;
		}
		v = v * 10 + d;
		j->p++;
	}
	if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E')) {
		jp_fail(j, "only integers are accepted");
		return NULL;
	}
	node = new_node(j, SJSON_INT);
	if (node)
		node->i = neg ? (int64_t)(0 - v) : (int64_t)v;
	return node;
}

static struct sjson *parse_container(struct jp *j, int depth, int is_obj)
{
	struct sjson *node = new_node(j, is_obj ? SJSON_OBJ : SJSON_ARR), **tail;
	char close = is_obj ? '}' : ']';

	if (!node)
		return NULL;
	if (depth >= SJSON_MAX_DEPTH) {
		jp_fail(j, "nesting deeper than %d", SJSON_MAX_DEPTH);
		goto bad;
	}
	tail = &node->child;
	j->p++;
	skip_ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return node;
	}
	for (;;) {
		char *key = NULL;
		struct sjson *v;

		skip_ws(j);
		if (is_obj) {
			if (j->p >= j->end || *j->p != '"') {
				jp_fail(j, "expected a \"key\"");
				goto bad;
			}
			key = parse_string(j);
			if (!key)
				goto bad;
			for (struct sjson *c = node->child; c; c = c->next) {
				if (strcmp(c->key, key) == 0) {
					jp_fail(j, "duplicate key \"%s\"", key);
					free(key);
					goto bad;
				}
			}
			skip_ws(j);
			if (j->p >= j->end || *j->p != ':') {
				jp_fail(j, "expected ':' after key \"%s\"", key);
				free(key);
				goto bad;
			}
			j->p++;
			skip_ws(j);
		}
		v = parse_value(j, depth + 1);
		if (!v) {
			free(key);
			goto bad;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		node->n++;
		skip_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == close) {
			j->p++;
			return node;
		}
		jp_fail(j, "expected ',' or '%c'", close);
		goto bad;
	}
bad:
	sjson_free(node);
	return NULL;
}

static struct sjson *parse_value(struct jp *j, int depth)
{
	struct sjson *v;

	skip_ws(j);
	if (j->p >= j->end) {
		jp_fail(j, "unexpected end of input");
		return NULL;
	}
	switch (*j->p) {
	case '{':
		return parse_container(j, depth, 1);
	case '[':
		return parse_container(j, depth, 0);
	case '"': {
		int line = j->line;
		char *s = parse_string(j);
		if (!s)
			return NULL;
		v = new_node(j, SJSON_STR);
		if (!v) {
			free(s);
			return NULL;
		}
		v->line = line;
		v->s = s;
		return v;
	}
	case 't':
	case 'f':
		if (lit(j, "true") || lit(j, "false")) {
			v = new_node(j, SJSON_BOOL);
			if (v)
				v->i = j->p[-1] == 'e' && j->p[-2] == 'u';
			return v;
		}
		break;
	case 'n':
		if (lit(j, "null"))
			return new_node(j, SJSON_NULL);
		break;
	default:
		if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
			return parse_number(j);
		break;
	}
	jp_fail(j, "unexpected character '%c'",
		(unsigned char)*j->p >= 0x20 && (unsigned char)*j->p < 0x7f ? *j->p : '?');
	return NULL;
}

struct sjson *sjson_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct jp j = { .p = text, .end = text + len, .line_start = text, .line = 1,
			.err = err, .errlen = errlen };
	struct sjson *v;

	if (err && errlen)
		err[0] = 0;
	if (memchr(text, 0, len)) {
		const char *z = memchr(text, 0, len);
		for (const char *q = text; q < z; q++)
			if (*q == '\n') {
				j.line++;
				j.line_start = q + 1;
			}
		j.p = z;
		jp_fail(&j, "NUL byte in input");
		return NULL;
	}
	skip_ws(&j);
	if (j.p >= j.end) {
		jp_fail(&j, "empty input");
		return NULL;
	}
	v = parse_value(&j, 0);
	if (!v)
		return NULL;
	skip_ws(&j);
	if (j.p < j.end) {
		jp_fail(&j, "trailing data after the JSON value");
		sjson_free(v);
		return NULL;
	}
	return v;
}

const struct sjson *sjson_get(const struct sjson *obj, const char *key)
{
	if (!obj || obj->type != SJSON_OBJ)
		return NULL;
	for (const struct sjson *c = obj->child; c; c = c->next)
		if (strcmp(c->key, key) == 0)
			return c;
	return NULL;
}

const char *sjson_type_name(enum sjson_type t)
{
	switch (t) {
	case SJSON_NULL: return "null";
	case SJSON_BOOL: return "boolean";
	case SJSON_INT: return "integer";
	case SJSON_STR: return "string";
	case SJSON_ARR: return "array";
	case SJSON_OBJ: return "object";
	}
	return "?";
}

/* ---- writer ---- */

void sjbuf_init(struct sjbuf *b)
{
	memset(b, 0, sizeof(*b));
}

void sjbuf_free(struct sjbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static int sjbuf_reserve(struct sjbuf *b, size_t extra)
{
	size_t need, cap;
	char *p;

	if (b->oom)
		return -1;
	need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

static void sjbuf_putn(struct sjbuf *b, const char *s, size_t n)
{
	if (sjbuf_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

void sjbuf_puts(struct sjbuf *b, const char *s)
{
	sjbuf_putn(b, s, strlen(s));
}

void sjbuf_printf(struct sjbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || sjbuf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sjbuf_str(struct sjbuf *b, const char *s)
{
	sjbuf_putn(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		switch (c) {
		case '"': sjbuf_putn(b, "\\\"", 2); break;
		case '\\': sjbuf_putn(b, "\\\\", 2); break;
		case '\n': sjbuf_putn(b, "\\n", 2); break;
		case '\r': sjbuf_putn(b, "\\r", 2); break;
		case '\t': sjbuf_putn(b, "\\t", 2); break;
		default:
			if (c < 0x20 || c == 0x7f) {
				snprintf(esc, sizeof(esc), "\\u%04x", c);
				sjbuf_putn(b, esc, 6);
			} else {
				sjbuf_putn(b, (const char *)s, 1);
			}
		}
	}
	sjbuf_putn(b, "\"", 1);
}
