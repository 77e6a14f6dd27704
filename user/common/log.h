/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The one place both programs write diagnostics: four levels, one stream (stderr), one
 * prefix ("sluicectl: warning: ..."). The program's real output (tables, JSON, the events of
 * sluiced, usage text) does not go through here; it goes to stdout or its FILE on purpose.
 *
 * The level shown is set by the verbosity: 0 shows info and above (the default), each -v
 * adds one (1 = debug), each -q takes one away (-1 = warnings and errors, -2 = errors only).
 * Errors are always shown. */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stdarg.h>
#include <stdio.h>

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* prog: the prefix ("sluiced"); verbosity: the count of -v minus the count of -q. */
void log_init(const char *prog, int verbosity);
int log_verbosity(void);
/* Whether a message of this level would be written now. */
int log_enabled(enum log_level level);
/* Where messages go (stderr unless a test redirects them); NULL restores stderr. */
void log_set_stream(FILE *f);
FILE *log_stream(void);
/* Hand every message, whole (prefix and newline included), to put instead of the stream:
 * sluiced's control loop must never wait for stderr (daemon/logstream.h). NULL: the stream
 * again. Set before any other thread logs. */
void log_set_sink(void (*put)(void *ctx, const char *line, size_t n), void *ctx);

/* One message; the newline is added. A message that already begins with its level's word
 * ("ERROR: switch file ..." from the switch-file reader) is not tagged twice. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level level, const char *fmt, va_list ap);

/* One line as it is, without the prefix: what tools read by its form, such as a config's
 * "FILE:LINE:COL: message" errors (the form compilers use, which editors jump to). Always
 * shown; through the sink like any message. */
void log_plain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
