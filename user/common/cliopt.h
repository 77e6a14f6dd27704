/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Command lines from tables. A program describes each command (a verb of sluicectl such as
 * "switch set", or sluiced itself) once: its positional arguments and options, each with the
 * field of the command's own struct it is written into and a line of help. From that one
 * table come the parser, the usage line, `--help` and the program's list of commands, so the
 * help cannot drift from what is accepted.
 *
 * Grammar, the same for every command:
 *   --name VALUE and --name=VALUE      a value option (the value is taken as it is, even when it
 *                                      begins with '-': `--shed -1` is refused by the verb, not
 *                                      mistaken for an option)
 *   --name, -n, -nn                    a flag (set to 1) or a counter (+1 per use: -vv = 2)
 *   -h, --help                         anywhere: print the command's help, run nothing
 *   --                                 everything after it is a positional argument
 *   WORD, -5, -                        positional arguments, in table order; options may come
 *                                      before, between or after them
 * A bad command line is reported through the log (an error naming the bad argument, then the
 * usage line) and is the caller's exit 2. */
#ifndef SLUICE_CLIOPT_H
#define SLUICE_CLIOPT_H

#include <stddef.h>
#include <stdio.h>

enum cliopt_kind {
	CLIOPT_END = 0,
	CLIOPT_STRING,  /* --name VALUE: a const char * field */
	CLIOPT_FLAG,    /* --name: an int field set to 1 */
	CLIOPT_COUNT,   /* --name / -n, repeatable: an int field counting the uses */
	CLIOPT_ARG,     /* a positional argument: a const char * field; table order is argv order */
};

struct cliopt {
	enum cliopt_kind kind;
	const char *name;     /* long name without "--"; for a positional, its name in usage */
	char short_name;      /* single-letter form of a flag or counter, 0 for none */
	const char *metavar;  /* the value's name in usage ("PCT"); NULL for flags */
	int required;         /* 1: the command refuses to run without it */
	size_t offset;        /* where the value goes in the command's struct */
	const char *help;     /* one line */
};

/* Table rows; T is the command's struct, F its field. */
#define CLIOPT_STR(T, F, NAME, META, REQ, HELP) \
	{ CLIOPT_STRING, NAME, 0, META, REQ, offsetof(T, F), HELP }
#define CLIOPT_BOOL(T, F, NAME, SHORT, HELP) \
	{ CLIOPT_FLAG, NAME, SHORT, NULL, 0, offsetof(T, F), HELP }
#define CLIOPT_CNT(T, F, NAME, SHORT, HELP) \
	{ CLIOPT_COUNT, NAME, SHORT, NULL, 0, offsetof(T, F), HELP }
#define CLIOPT_POS(T, F, NAME, REQ, HELP) \
	{ CLIOPT_ARG, NAME, 0, NULL, REQ, offsetof(T, F), HELP }
#define CLIOPT_TABLE_END { CLIOPT_END, NULL, 0, NULL, 0, 0, NULL }

struct clicmd {
	const char *name;      /* the words after the program's name ("switch set"); "" for a
	                        * program without verbs */
	const char *alias;     /* another name that runs it ("switch list"), or NULL */
	const char *summary;   /* one line: the program's list of commands shows it */
	const struct cliopt *opts;   /* ends with CLIOPT_TABLE_END; NULL for none */
	size_t args_size;      /* size of the struct the table writes into */
	const char *notes;     /* more lines for --help (exit codes, formats), or NULL */
	const char *example;   /* one or more full command lines, '\n' between them; required */
	int (*run)(const void *args, void *ctx);   /* NULL for a program's top level */
	const struct clicmd *const *commands;      /* a program with verbs: its commands
	                                            * (NULL-terminated), listed by its help */
};

enum { CLIOPT_OK = 0, CLIOPT_HELP = 1, CLIOPT_BAD = -1 };

/* Parses argv[0..argc) (what follows the command's name) into args (zeroed first). `shared`
 * (may be NULL) are options every command of the program accepts, written into shared_args
 * (not zeroed: the program may have parsed some before the command's name). Returns CLIOPT_OK,
 * CLIOPT_HELP (-h/--help given; nothing printed) or CLIOPT_BAD (an error naming the argument
 * and the usage line went to the log). */
int cliopt_parse(const char *prog, const struct clicmd *cmd, int argc, char **argv, void *args,
		 const struct cliopt *shared, void *shared_args);

/* Parses the options in front of a program's command name: stops at the first positional
 * argument and stores its index in *next (argc when there is none). Same returns. */
int cliopt_parse_head(const char *prog, const struct cliopt *opts, int argc, char **argv,
		      void *args, int *next);

/* The command whose name (or alias) matches the most leading words of argv, NULL when none;
 * *words receives how many words it took. */
const struct clicmd *cliopt_find(const struct clicmd *const *cmds, int argc, char **argv,
				 int *words);
/* 1 when some command's name begins with this word ("switch"), so a bare group name can be
 * answered with the group's list rather than "unknown command". */
int cliopt_is_group(const struct clicmd *const *cmds, const char *word);

/* "usage: PROG NAME ARGS [OPTIONS]" for one command. */
void cliopt_usage(FILE *f, const char *prog, const struct clicmd *cmd);
/* The whole help of a command: usage, summary, arguments, options, the shared options under
 * `shared_title` (when shared is not NULL), notes, example. */
void cliopt_help(FILE *f, const char *prog, const struct clicmd *cmd, const struct cliopt *shared,
		 const char *shared_title);
/* One line per command (synopsis and summary); only the commands whose first word is `group`
 * when group is not NULL. */
void cliopt_list(FILE *f, const struct clicmd *const *cmds, const char *group);

#endif
