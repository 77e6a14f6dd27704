// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The table-driven command-line parser and the help it generates (see cliopt.h). */
#include "common/cliopt.h"

#include <stdarg.h>
#include <string.h>

#include "common/log.h"

#define HELP_COL 22   /* where the help text of an option starts */
#define LIST_COL 29   /* where a command's summary starts in the list of commands */

/* A table and the struct it writes into: [0] the command's own, [1] the shared options. */
struct table {
	const struct cliopt *opts;
	void *dst;
};

struct parser {
	const char *prog;
	const struct clicmd *cmd;   /* for the error's prefix and usage line; NULL at the head */
	struct table t[2];
	int n_pos;                  /* positional arguments stored so far */
};

static int is_help(const char *a)
{
	return !strcmp(a, "-h") || !strcmp(a, "--help");
}

/* A word that is an argument, not an option: "-", "-5", anything without a leading '-'. */
static int is_positional(const char *a)
{
	return a[0] != '-' || !a[1] || (a[1] >= '0' && a[1] <= '9');
}

static int bad(const struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(const struct parser *p, const char *fmt, ...)
{
	const char *name = p->cmd && p->cmd->name[0] ? p->cmd->name : NULL;
	char msg[512];
	va_list ap;
	FILE *f = log_stream();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s%s%s", name ? name : "", name ? ": " : "", msg);
	if (p->cmd)
		cliopt_usage(f, p->prog, p->cmd);
	fprintf(f, "(%s%s%s --help for more)\n", p->prog, name ? " " : "", name ? name : "");
	return CLIOPT_BAD;
}

static void store(const struct cliopt *o, void *dst, const char *val)
{
	char *field = (char *)dst + o->offset;

	if (o->kind == CLIOPT_STRING || o->kind == CLIOPT_ARG)
		*(const char **)(void *)field = val;
	else if (o->kind == CLIOPT_FLAG)
		*(int *)(void *)field = 1;
	else if (o->kind == CLIOPT_COUNT)
		(*(int *)(void *)field)++;
}

/* The option named by "--name" or "--name=..." (len = length of name), or by its letter. */
static const struct cliopt *lookup(const struct parser *p, const char *name, size_t len,
				   char letter, int *which)
{
	for (int k = 0; k < 2; k++)
		for (const struct cliopt *o = p->t[k].opts; o && o->kind; o++) {
			if (o->kind == CLIOPT_ARG)
				continue;
			if (letter ? o->short_name == letter
				   : strlen(o->name) == len && !strncmp(o->name, name, len)) {
				*which = k;
				return o;
			}
		}
	return NULL;
}

/* "--name", "--name=V" or "--name V" at argv[*i]; advances *i past a separate value. */
static int long_option(struct parser *p, int argc, char **argv, int *i)
{
	const char *a = argv[*i] + 2, *eq = strchr(a, '=');
	size_t len = eq ? (size_t)(eq - a) : strlen(a);
	int k;
	const struct cliopt *o = lookup(p, a, len, 0, &k);

	if (!o)
		return bad(p, "unknown option '--%.*s'", (int)len, a);
	if (o->kind != CLIOPT_STRING) {
		if (eq)
			return bad(p, "option --%s takes no value (got '%s')", o->name, argv[*i]);
		store(o, p->t[k].dst, NULL);
		return CLIOPT_OK;
	}
	if (eq) {
		store(o, p->t[k].dst, eq + 1);
		return CLIOPT_OK;
	}
	if (*i + 1 >= argc)
		return bad(p, "option --%s needs a value (%s)", o->name, o->metavar);
	store(o, p->t[k].dst, argv[++*i]);
	return CLIOPT_OK;
}

/* "-v", "-vv", "-vq": single-letter flags and counters. */
static int short_options(struct parser *p, const char *a)
{
	for (const char *c = a + 1; *c; c++) {
		int k;
		const struct cliopt *o = lookup(p, NULL, 0, *c, &k);

		if (!o)
			return bad(p, "unknown option '%s'", a);
		store(o, p->t[k].dst, NULL);
	}
	return CLIOPT_OK;
}

static int positional(struct parser *p, const char *a)
{
	int seen = 0;

	for (const struct cliopt *o = p->t[0].opts; o && o->kind; o++)
		if (o->kind == CLIOPT_ARG && seen++ == p->n_pos) {
			store(o, p->t[0].dst, a);
			p->n_pos++;
			return CLIOPT_OK;
		}
	return bad(p, "unexpected argument '%s'", a);
}

/* Every required option and positional argument of the command's own table is there. */
static int check_required(struct parser *p)
{
	int seen = 0;

	for (const struct cliopt *o = p->t[0].opts; o && o->kind; o++) {
		int is_arg = o->kind == CLIOPT_ARG;
		const char *v;

		if (is_arg)
			seen++;
		if (!o->required || (o->kind != CLIOPT_STRING && !is_arg))
			continue;
		v = *(const char **)(void *)((char *)p->t[0].dst + o->offset);
		if (v)
			continue;
		if (is_arg)
			return bad(p, "missing argument %s", o->name);
		return bad(p, "--%s %s is required", o->name, o->metavar);
	}
	return CLIOPT_OK;
}

/* stop_at_arg: return at the first positional with its index in *next. */
static int run_parser(struct parser *p, int argc, char **argv, int stop_at_arg, int *next)
{
	int rc = CLIOPT_OK, only_args = 0;

	for (int i = 0; i < argc && rc == CLIOPT_OK; i++) {
		const char *a = argv[i];

		if (only_args || is_positional(a)) {
			if (stop_at_arg) {
				*next = i;
				return CLIOPT_OK;
			}
			rc = positional(p, a);
		} else if (!strcmp(a, "--")) {
			only_args = 1;
		} else if (is_help(a)) {
			return CLIOPT_HELP;
		} else if (a[1] == '-') {
			rc = long_option(p, argc, argv, &i);
		} else {
			rc = short_options(p, a);
		}
	}
	if (next)
		*next = argc;
	return rc;
}

int cliopt_parse(const char *prog, const struct clicmd *cmd, int argc, char **argv, void *args,
		 const struct cliopt *shared, void *shared_args)
{
	struct parser p = { .prog = prog, .cmd = cmd,
			    .t = { { cmd->opts, args }, { shared, shared_args } } };
	int rc;

	memset(args, 0, cmd->args_size);
	/* Help wins over any other word, wherever it stands before "--". */
	for (int i = 0; i < argc && strcmp(argv[i], "--"); i++)
		if (is_help(argv[i]))
			return CLIOPT_HELP;
	rc = run_parser(&p, argc, argv, 0, NULL);
	return rc == CLIOPT_OK ? check_required(&p) : rc;
}

int cliopt_parse_head(const char *prog, const struct cliopt *opts, int argc, char **argv,
		      void *args, int *next)
{
	struct parser p = { .prog = prog, .t = { { opts, args }, { NULL, NULL } } };

	*next = argc;
	return run_parser(&p, argc, argv, 1, next);
}

/* How many leading words of argv spell `name` ("switch set"); 0 when they do not. */
static int match_words(const char *name, int argc, char **argv)
{
	int w = 0;

	while (name && *name) {
		size_t len = strcspn(name, " ");

		if (w >= argc || strlen(argv[w]) != len || strncmp(argv[w], name, len))
			return 0;
		w++;
		name += len;
		name += strspn(name, " ");
	}
	return w;
}

const struct clicmd *cliopt_find(const struct clicmd *const *cmds, int argc, char **argv,
				 int *words)
{
	const struct clicmd *best = NULL;

	*words = 0;
	for (int i = 0; cmds[i]; i++) {
		int w = match_words(cmds[i]->name, argc, argv);
		int wa = match_words(cmds[i]->alias, argc, argv);

		if (wa > w)
			w = wa;
		if (w > *words) {
			*words = w;
			best = cmds[i];
		}
	}
	return best;
}

int cliopt_is_group(const struct clicmd *const *cmds, const char *word)
{
	size_t len = strlen(word);

	for (int i = 0; cmds[i]; i++)
		if (!strncmp(cmds[i]->name, word, len) && cmds[i]->name[len] == ' ')
			return 1;
	return 0;
}

/* "SERVICE [CLASS] --shed PCT [--owner NAME] [--json]": positionals, required, optional. */
static void synopsis(char *buf, size_t len, const struct clicmd *cmd)
{
	size_t n = 0;

	buf[0] = 0;
	for (int pass = 0; pass < 3; pass++)
		for (const struct cliopt *o = cmd->opts; o && o->kind; o++) {
			int is_arg = o->kind == CLIOPT_ARG;
			int want = pass == 0 ? is_arg : !is_arg && (pass == 1) == !!o->required;
			const char *open = o->required ? "" : "[", *close = o->required ? "" : "]";

			if (!want || n >= len)
				continue;
			if (is_arg)
				n += snprintf(buf + n, len - n, " %s%s%s", open, o->name, close);
			else if (o->kind == CLIOPT_STRING)
				n += snprintf(buf + n, len - n, " %s--%s %s%s", open, o->name,
					      o->metavar, close);
			else if (o->short_name)
				n += snprintf(buf + n, len - n, " [-%c]", o->short_name);
			else
				n += snprintf(buf + n, len - n, " [--%s]", o->name);
		}
}

void cliopt_usage(FILE *f, const char *prog, const struct clicmd *cmd)
{
	char syn[512];

	if (cmd->commands) {
		fprintf(f, "usage: %s [OPTIONS] COMMAND [ARGS]\n", prog);
		return;
	}
	synopsis(syn, sizeof(syn), cmd);
	fprintf(f, "usage: %s%s%s%s\n", prog, cmd->name[0] ? " " : "", cmd->name, syn);
}

static void option_rows(FILE *f, const struct cliopt *opts, int args)
{
	for (const struct cliopt *o = opts; o && o->kind; o++) {
		char left[64];

		if ((o->kind == CLIOPT_ARG) != args)
			continue;
		if (args)
			snprintf(left, sizeof(left), "%s", o->name);
		else if (o->short_name)
			snprintf(left, sizeof(left), "-%c, --%s", o->short_name, o->name);
		else
			snprintf(left, sizeof(left), "--%s%s%s", o->name, o->metavar ? " " : "",
				 o->metavar ? o->metavar : "");
		fprintf(f, "  %-*s %s%s\n", HELP_COL - 3, left, o->help,
			o->required && !args ? " (required)" : !o->required && args ? " (optional)" : "");
	}
}

static int has_rows(const struct cliopt *opts, int args)
{
	for (const struct cliopt *o = opts; o && o->kind; o++)
		if ((o->kind == CLIOPT_ARG) == args)
			return 1;
	return 0;
}

void cliopt_help(FILE *f, const char *prog, const struct clicmd *cmd, const struct cliopt *shared,
		 const char *shared_title)
{
	const char *ex = cmd->example;

	cliopt_usage(f, prog, cmd);
	fprintf(f, "%s\n", cmd->summary);
	if (cmd->commands) {
		fprintf(f, "\ncommands:\n");
		cliopt_list(f, cmd->commands, NULL);
	}
	if (has_rows(cmd->opts, 1)) {
		fprintf(f, "\narguments:\n");
		option_rows(f, cmd->opts, 1);
	}
	fprintf(f, "\noptions:\n");
	option_rows(f, cmd->opts, 0);
	fprintf(f, "  %-*s %s\n", HELP_COL - 3, "-h, --help", "print this help and exit");
	if (shared) {
		fprintf(f, "\n%s:\n", shared_title ? shared_title : "shared options");
		option_rows(f, shared, 0);
	}
	if (cmd->notes)
		fprintf(f, "\n%s\n", cmd->notes);
	fprintf(f, "\nexample%s:\n", strchr(ex, '\n') ? "s" : "");
	while (*ex) {
		size_t len = strcspn(ex, "\n");

		fprintf(f, "  %.*s\n", (int)len, ex);
		ex += len + (ex[len] == '\n');
	}
}

void cliopt_list(FILE *f, const struct clicmd *const *cmds, const char *group)
{
	for (int i = 0; cmds[i]; i++) {
		char syn[512], left[600];

		if (group && (strncmp(cmds[i]->name, group, strlen(group)) ||
			      cmds[i]->name[strlen(group)] != ' '))
			continue;
		synopsis(syn, sizeof(syn), cmds[i]);
		snprintf(left, sizeof(left), "%s%s", cmds[i]->name, syn);
		if (strlen(left) > LIST_COL - 3)
			fprintf(f, "  %s\n  %-*s %s\n", left, LIST_COL - 3, "", cmds[i]->summary);
		else
			fprintf(f, "  %-*s %s\n", LIST_COL - 3, left, cmds[i]->summary);
	}
}
