// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "common/log.h"

#include <string.h>
#include <strings.h>

static const char *log_prog = "sluice";
static int log_verb;
static FILE *log_out;

/* The word each level is tagged with; info carries none, so the daemon's routine lines
 * ("sluiced: attached to eth0 ...") read as before. */
static const char *const level_word[] = {
	[LOG_ERROR] = "error", [LOG_WARN] = "warning", [LOG_INFO] = NULL, [LOG_DEBUG] = "debug",
};

void log_init(const char *prog, int verbosity)
{
	if (prog && prog[0])
		log_prog = prog;
	log_verb = verbosity;
}

int log_verbosity(void)
{
	return log_verb;
}

int log_enabled(enum log_level level)
{
	return level == LOG_ERROR || (int)level <= (int)LOG_INFO + log_verb;
}

void log_set_stream(FILE *f)
{
	log_out = f;
}

FILE *log_stream(void)
{
	return log_out ? log_out : stderr;
}

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	const char *word = level <= LOG_DEBUG ? level_word[level] : NULL;
	char line[2048];
	size_t n;
	FILE *f = log_stream();

	if (!log_enabled(level))
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = 0;
	if (word && !strncasecmp(line, word, strlen(word)) && line[strlen(word)] == ':')
		word = NULL;
	fprintf(f, "%s: %s%s%s\n", log_prog, word ? word : "", word ? ": " : "", line);
	fflush(f);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}
