/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* sluiced's messages (stderr), never blocking the tick. Under systemd stderr is journald's
 * socket or a pipe: when journald falls behind it fills, and a blocking write of a message
 * (a warning of the tick, of the reload, of the file writer thread) stopped the control loop:
 * no heartbeat, and the data path failed open. The messages go the way the events do
 * (evstream.h): a description of stderr of our own, non-blocking, and a bounded buffer
 * written out at every tick; with it full, messages are dropped whole and counted, and how
 * many is said once stderr has taken what waited. Any thread may log: a mutex guards it. */
#ifndef SLUICE_LOGSTREAM_H
#define SLUICE_LOGSTREAM_H

#include <stddef.h>

/* About a thousand messages. */
#define LOGSTREAM_BUF_BYTES (256 * 1024)

/* Send the log's messages (log.h) to fd through a buffer of cap bytes. 0, or -errno (the
 * messages keep going to the stream, blocking). */
int logstream_open(int fd, size_t cap);

/* Write out what waits, without blocking; once it drained after drops, say how many. Called at
 * every tick. Returns the messages dropped in that run (0 when none or not drained yet). */
unsigned long long logstream_flush(void);

/* Messages dropped since logstream_open. */
unsigned long long logstream_dropped(void);

/* Write out what waits, waiting at most wait_ms, and give the log back its stream. Returns the
 * bytes left unwritten. */
size_t logstream_close(int wait_ms);

#endif
