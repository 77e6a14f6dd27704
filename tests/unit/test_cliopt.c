// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: the table-driven command line (user/common/cliopt.c) on a test table and on the
 * real tables of sluicectl (user/cli/commands.c) and sluiced (user/daemon/cmdline.c): both
 * option forms, a missing value, an unknown option, a required option, positionals, help per
 * command, and every command's help carrying an example that its own table accepts. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/cliopt.h"
#include "common/log.h"
#include "daemon/cmdline.h"

struct t_args {
	const char *service, *class, *shed, *owner;
	int json, verbose;
};

static const struct cliopt t_opts[] = {
	CLIOPT_POS(struct t_args, service, "SERVICE", 1, "a service"),
	CLIOPT_POS(struct t_args, class, "CLASS", 0, "a class"),
	CLIOPT_STR(struct t_args, shed, "shed", "PCT", 1, "how much"),
	CLIOPT_STR(struct t_args, owner, "owner", "NAME", 0, "who"),
	CLIOPT_BOOL(struct t_args, json, "json", 0, "JSON"),
	CLIOPT_CNT(struct t_args, verbose, "verbose", 'v', "more"),
	CLIOPT_TABLE_END,
};

static const struct clicmd t_cmd = {
	.name = "thing set",
	.summary = "sets a thing",
	.opts = t_opts,
	.args_size = sizeof(struct t_args),
	.example = "prog thing set web --shed 5",
};

/* What the parser logged, captured for one call. */
static char logbuf[8192];
static FILE *logf_;

static int capture(void **state)
{
	logbuf[0] = 0;
	logf_ = fmemopen(logbuf, sizeof(logbuf), "w");
	log_init("prog", 0);
	log_set_stream(logf_);
	return logf_ ? 0 : -1;
}

static int release(void **state)
{
	log_set_stream(NULL);
	fclose(logf_);
	return 0;
}

static const char *logged(void)
{
	fflush(logf_);
	return logbuf;
}

/* argv from a string split at spaces; "double quotes" keep spaces. */
static int split(char *s, char **argv, int max)
{
	int n = 0;

	while (*s && n < max) {
		while (*s == ' ')
			s++;
		if (!*s)
			break;
		if (*s == '"') {
			argv[n++] = ++s;
			while (*s && *s != '"')
				s++;
		} else {
			argv[n++] = s;
			while (*s && *s != ' ')
				s++;
		}
		if (*s)
			*s++ = 0;
	}
	return n;
}

/* Parses one line; the values point into one of four buffers, so two results can be compared. */
static int parse_line(const char *line, struct t_args *a)
{
	static char bufs[4][512];
	static int next;
	char *buf = bufs[next++ % 4], *argv[32];
	int argc;

	snprintf(buf, sizeof(bufs[0]), "%s", line);
	argc = split(buf, argv, 32);
	return cliopt_parse("prog", &t_cmd, argc, argv, a, NULL, NULL);
}

/* The line is refused and the log says so (the log is emptied first). */
static void expect_bad(const char *line, const char *says)
{
	struct t_args a;

	release(NULL);
	capture(NULL);
	assert_int_equal(parse_line(line, &a), CLIOPT_BAD);
	assert_non_null(strstr(logged(), says));
}

static void test_both_forms(void **state)
{
	struct t_args a, b;

	assert_int_equal(parse_line("web L3 --shed 30 --owner alice", &a), CLIOPT_OK);
	assert_int_equal(parse_line("--shed=30 web --owner=alice L3", &b), CLIOPT_OK);
	assert_string_equal(a.shed, "30");
	assert_string_equal(b.shed, "30");
	assert_string_equal(a.owner, "alice");
	assert_string_equal(b.owner, "alice");
	assert_string_equal(a.service, "web");
	assert_string_equal(b.class, "L3");
	/* A value is taken as it is: an empty one, one with '=', one that begins with '-'. */
	assert_int_equal(parse_line("web --shed= --owner=a=b", &a), CLIOPT_OK);
	assert_string_equal(a.shed, "");
	assert_string_equal(a.owner, "a=b");
	assert_int_equal(parse_line("web --shed -1", &a), CLIOPT_OK);
	assert_string_equal(a.shed, "-1");
	assert_null(a.class);
	assert_string_equal(logged(), "");
}

static void test_flags_counters_positionals(void **state)
{
	struct t_args a;

	assert_int_equal(parse_line("-vv web --shed 1 --json --verbose -v", &a), CLIOPT_OK);
	assert_int_equal(a.verbose, 4);
	assert_int_equal(a.json, 1);
	/* "-5" and "-" are arguments; after "--" everything is. */
	assert_int_equal(parse_line("-5 - --shed 1", &a), CLIOPT_OK);
	assert_string_equal(a.service, "-5");
	assert_string_equal(a.class, "-");
	assert_int_equal(parse_line("--shed 1 -- --json -v", &a), CLIOPT_OK);
	assert_string_equal(a.service, "--json");
	assert_string_equal(a.class, "-v");
	assert_int_equal(a.json, 0);
	assert_int_equal(a.verbose, 0);
}

static void test_missing_value(void **state)
{
	expect_bad("web --shed", "prog: error: thing set: option --shed needs a value (PCT)");
	/* the usage line follows, to the same stream */
	assert_non_null(strstr(logged(), "usage: prog thing set SERVICE [CLASS] --shed PCT"));
}

static void test_unknown_option(void **state)
{
	expect_bad("web --shed 1 --bogus 3", "unknown option '--bogus'");
	expect_bad("web --shed 1 -x", "unknown option '-x'");
	expect_bad("web --shed 1 --bogus=3", "unknown option '--bogus'");
	/* a flag given a value */
	expect_bad("web --shed 1 --json=yes", "--json takes no value");
}

static void test_required(void **state)
{
	expect_bad("web --owner x", "--shed PCT is required");
	expect_bad("--shed 1", "missing argument SERVICE");
	expect_bad("web L3 extra --shed 1", "unexpected argument 'extra'");
}

static void test_help_anywhere(void **state)
{
	struct t_args a;

	assert_int_equal(parse_line("--help", &a), CLIOPT_HELP);
	assert_int_equal(parse_line("web -h", &a), CLIOPT_HELP);
	/* help wins over a bad or missing argument ... */
	assert_int_equal(parse_line("--bogus --help", &a), CLIOPT_HELP);
	/* ... but not after "--" */
	assert_int_equal(parse_line("--shed 1 -- -h", &a), CLIOPT_OK);
	assert_string_equal(a.service, "-h");
	assert_string_equal(logged(), "");
}

/* The help of one command, into buf. */
static void help_of(const char *prog, const struct clicmd *cmd, const struct cliopt *shared,
		    char *buf, size_t len)
{
	FILE *f = fmemopen(buf, len, "w");

	assert_non_null(f);
	cliopt_help(f, prog, cmd, shared, "global options");
	fclose(f);
}

static void test_help_from_table(void **state)
{
	char buf[4096];

	help_of("prog", &t_cmd, NULL, buf, sizeof(buf));
	assert_non_null(strstr(buf, "usage: prog thing set SERVICE [CLASS] --shed PCT [--owner NAME] "
				    "[--json] [-v]\n"));
	assert_non_null(strstr(buf, "sets a thing\n"));
	assert_non_null(strstr(buf, "  --shed PCT          how much (required)\n"));
	assert_non_null(strstr(buf, "  -v, --verbose       more\n"));
	assert_non_null(strstr(buf, "  CLASS               a class (optional)\n"));
	assert_non_null(strstr(buf, "  -h, --help"));
	assert_non_null(strstr(buf, "\nexample:\n  prog thing set web --shed 5\n"));
}

/* Every sluicectl command: a summary, help that names it and each of its options, and at
 * least one example that begins with its name and that its own table accepts. */
static void check_command(const char *prog, const struct clicmd *cmd, const struct cliopt *shared,
			  void *shared_args)
{
	char buf[8192], line[512], want[128], *argv[32];
	const char *ex = cmd->example;
	int n_ex = 0;

	assert_non_null(cmd->summary);
	assert_true(cmd->summary[0]);
	assert_non_null(ex);
	help_of(prog, cmd, shared, buf, sizeof(buf));
	snprintf(want, sizeof(want), "usage: %s%s%s", prog, cmd->name[0] ? " " : "", cmd->name);
	if (!cmd->commands)
		assert_non_null(strstr(buf, want));
	assert_non_null(strstr(buf, "\nexample"));
	for (const struct cliopt *o = cmd->opts; o && o->kind; o++) {
		assert_non_null(o->help);
		if (o->kind == CLIOPT_STRING)
			assert_non_null(o->metavar);
		snprintf(want, sizeof(want), o->kind == CLIOPT_ARG ? "  %s " : "--%s", o->name);
		assert_non_null(strstr(buf, want));
	}
	while (*ex) {
		size_t len = strcspn(ex, "\n");
		void *args = calloc(1, cmd->args_size + 1);
		int argc, skip = 1;

		snprintf(line, sizeof(line), "%.*s", (int)len, ex);
		ex += len + (ex[len] == '\n');
		argc = split(line, argv, 32);
		assert_true(argc >= 1);
		assert_string_equal(argv[0], prog);
		if (cmd->name[0]) {
			const struct clicmd *found = cliopt_find(cli_commands, argc - 1, argv + 1, &skip);

			assert_ptr_equal(found, cmd);
			skip++;
		}
		if (cmd->commands) {
			/* a program's example: its options, then one of its commands */
			const struct clicmd *sub;
			int next, w;

			assert_int_equal(cliopt_parse_head(prog, cmd->opts, argc - 1, argv + 1, args,
							   &next), CLIOPT_OK);
			sub = cliopt_find(cmd->commands, argc - 1 - next, argv + 1 + next, &w);
			assert_non_null(sub);
			void *sub_args = calloc(1, sub->args_size + 1);

			assert_int_equal(cliopt_parse(prog, sub, argc - 1 - next - w,
						      argv + 1 + next + w, sub_args, cmd->opts, args),
					 CLIOPT_OK);
			free(sub_args);
		} else {
			assert_int_equal(cliopt_parse(prog, cmd, argc - skip, argv + skip, args,
						      shared, shared_args), CLIOPT_OK);
		}
		free(args);
		n_ex++;
	}
	assert_true(n_ex >= 1);
}

static void test_every_command_has_help_with_example(void **state)
{
	struct cli_global_args g = { 0 };
	int n = 0;

	for (int i = 0; cli_commands[i]; i++, n++)
		check_command("sluicectl", cli_commands[i], cli_global_opts, &g);
	assert_true(n >= 13);
	check_command("sluicectl", &cli_program, NULL, NULL);
	check_command("sluiced", &sluiced_cmd, NULL, NULL);
	assert_string_equal(logged(), "");
}

/* The program's help lists every command from the same table. */
static void test_program_help_lists_commands(void **state)
{
	char buf[8192];

	help_of("sluicectl", &cli_program, NULL, buf, sizeof(buf));
	assert_non_null(strstr(buf, "usage: sluicectl [OPTIONS] COMMAND [ARGS]"));
	for (int i = 0; cli_commands[i]; i++) {
		char want[128];

		snprintf(want, sizeof(want), "\n  %s", cli_commands[i]->name);
		assert_non_null(strstr(buf, want));
		assert_non_null(strstr(buf, cli_commands[i]->summary));
	}
	assert_non_null(strstr(buf, "-v, --verbose"));
	assert_non_null(strstr(buf, "-q, --quiet"));
}

static void test_find_commands(void **state)
{
	char *a1[] = { "switch", "set", "web" }, *a2[] = { "switch", "list" },
	     *a3[] = { "switch" }, *a4[] = { "bogus" }, *a5[] = { "switch", "setx" };
	int w;

	assert_ptr_equal(cliopt_find(cli_commands, 3, a1, &w), &cli_cmd_switch_set);
	assert_int_equal(w, 2);
	assert_ptr_equal(cliopt_find(cli_commands, 2, a2, &w), &cli_cmd_switch_ls);
	assert_null(cliopt_find(cli_commands, 1, a3, &w));
	assert_true(cliopt_is_group(cli_commands, "switch"));
	assert_null(cliopt_find(cli_commands, 1, a4, &w));
	assert_false(cliopt_is_group(cli_commands, "bogus"));
	assert_false(cliopt_is_group(cli_commands, "sw"));
	assert_null(cliopt_find(cli_commands, 2, a5, &w));
}

/* Global options before the command stop at its name; after it they still count. */
static void test_global_options(void **state)
{
	char line[] = "-v --pin-dir=/p --state-dir /s status --json -vq --config c.yaml";
	char *argv[16];
	struct cli_global_args g = { 0 };
	int argc = split(line, argv, 16), next, w;
	const struct clicmd *cmd;
	char args[64];

	assert_int_equal(cliopt_parse_head("sluicectl", cli_global_opts, argc, argv, &g, &next),
			 CLIOPT_OK);
	assert_int_equal(next, 4);
	assert_string_equal(g.pin_dir, "/p");
	assert_string_equal(g.state_dir, "/s");
	cmd = cliopt_find(cli_commands, argc - next, argv + next, &w);
	assert_ptr_equal(cmd, &cli_cmd_status);
	assert_int_equal(cliopt_parse("sluicectl", cmd, argc - next - w, argv + next + w, args,
				      cli_global_opts, &g), CLIOPT_OK);
	assert_int_equal(g.verbose, 2);
	assert_int_equal(g.quiet, 1);
	assert_string_equal(g.config, "c.yaml");
	assert_int_equal(g.json, 0);   /* the command's own --json took it */
	assert_string_equal(logged(), "");
}

/* sluiced: --check and --config in both forms, and its errors. */
static void test_sluiced_options(void **state)
{
	struct sluiced_args a;
	char l1[] = "--config=/etc/s.yaml -vv --pin-dir /p", l2[] = "--check", l3[] = "--bogus";
	char *argv[8];
	int argc = split(l1, argv, 8);

	assert_int_equal(cliopt_parse("sluiced", &sluiced_cmd, argc, argv, &a, NULL, NULL),
			 CLIOPT_OK);
	assert_string_equal(a.config, "/etc/s.yaml");
	assert_string_equal(a.pin_dir, "/p");
	assert_int_equal(a.verbose, 2);
	argc = split(l2, argv, 8);
	assert_int_equal(cliopt_parse("sluiced", &sluiced_cmd, argc, argv, &a, NULL, NULL),
			 CLIOPT_BAD);
	assert_non_null(strstr(logged(), "prog: error: option --check needs a value (FILE)"));
	argc = split(l3, argv, 8);
	assert_int_equal(cliopt_parse("sluiced", &sluiced_cmd, argc, argv, &a, NULL, NULL),
			 CLIOPT_BAD);
	assert_non_null(strstr(logged(), "unknown option '--bogus'"));
	assert_non_null(strstr(logged(), "usage: sluiced [--config FILE]"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_both_forms, capture, release),
		cmocka_unit_test_setup_teardown(test_flags_counters_positionals, capture, release),
		cmocka_unit_test_setup_teardown(test_missing_value, capture, release),
		cmocka_unit_test_setup_teardown(test_unknown_option, capture, release),
		cmocka_unit_test_setup_teardown(test_required, capture, release),
		cmocka_unit_test_setup_teardown(test_help_anywhere, capture, release),
		cmocka_unit_test_setup_teardown(test_help_from_table, capture, release),
		cmocka_unit_test_setup_teardown(test_every_command_has_help_with_example, capture,
						release),
		cmocka_unit_test_setup_teardown(test_program_help_lists_commands, capture, release),
		cmocka_unit_test_setup_teardown(test_find_commands, capture, release),
		cmocka_unit_test_setup_teardown(test_global_options, capture, release),
		cmocka_unit_test_setup_teardown(test_sluiced_options, capture, release),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
