// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "common/log.h"

#include <string.h>
#include <strings.h>

static const char *log_prog = "sluice";
static int log_verb;
static FILE *log_out;
static void (*log_put)(void *ctx, const char *line, size_t n);
static void *log_put_ctx;

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

void log_set_sink(void (*put)(void *ctx, const char *line, size_t n), void *ctx)
{
	log_put_ctx = ctx;
	log_put = put;
}

FILE *log_stream(void)
{
	return log_out ? log_out : stderr;
}

/* The message as one piece, cut short if it must be but always ending in its newline: the
 * sink takes or drops it whole. */
static void put_whole(const char *word, const char *line)
{
	char whole[2304];
	int n = snprintf(whole, sizeof(whole), "%s: %s%s%s\n", log_prog, word ? word : "",
			 word ? ": " : "", line);

	if (n < 0)
		return;
	if ((size_t)n >= sizeof(whole)) {
		n = (int)sizeof(whole) - 1;
		whole[n - 1] = '\n';
	}
	log_put(log_put_ctx, whole, (size_t)n);
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
	if (log_put) {
		put_whole(word, line);
		return;
	}
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

void log_plain(const char *fmt, ...)
{
	char line[2304];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	while (n && line[n - 1] == '\n')
		n--;
	line[n++] = '\n';
	line[n] = 0;
	if (log_put) {
		log_put(log_put_ctx, line, (size_t)n);
		return;
	}
	fputs(line, log_stream());
	fflush(log_stream());
}
