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

/* head and line as one message ending in its newline (cut short if it must be): to the sink,
 * which takes or drops it whole, or to the stream. */
static void emit(const char *head, const char *line)
{
	char whole[2304];
	int n = snprintf(whole, sizeof(whole), "%s%s\n", head, line);
	FILE *f;

	if (n < 0)
		return;
	if ((size_t)n >= sizeof(whole)) {
		n = (int)sizeof(whole) - 1;
		whole[n - 1] = '\n';
	}
	if (log_put) {
		log_put(log_put_ctx, whole, (size_t)n);
		return;
	}
	f = log_stream();
	fputs(whole, f);
	fflush(f);
}

/* The formatted text without the newlines it ends in (the message gets its own). */
static void format_line(char *line, size_t size, const char *fmt, va_list ap)
{
	size_t n;

	vsnprintf(line, size, fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = 0;
}

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
	const char *word = level <= LOG_DEBUG ? level_word[level] : NULL;
	char line[2048], head[96];

	if (!log_enabled(level))
		return;
	format_line(line, sizeof(line), fmt, ap);
	if (word && !strncasecmp(line, word, strlen(word)) && line[strlen(word)] == ':')
		word = NULL;
	snprintf(head, sizeof(head), "%s: %s%s", log_prog, word ? word : "", word ? ": " : "");
	emit(head, line);
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
	char line[2048];
	va_list ap;

	va_start(ap, fmt);
	format_line(line, sizeof(line), fmt, ap);
	va_end(ap);
	emit("", line);
}
