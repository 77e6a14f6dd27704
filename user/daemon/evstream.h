/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The events' way out (stdout): whole JSON lines, in order, never blocking the tick. A reader
 * that stops reading (journald behind, `sluiced | less` paused, a pipe nobody drains) used to
 * stall the control loop in a blocking write: no tick, the heartbeat aged and the data path
 * failed open, just while shedding was wanted most. Lines go to a non-blocking descriptor;
 * what it does not take at once waits in a bounded buffer, written out at every tick. With the
 * buffer full, lines are dropped whole and counted until it has drained: the stream shows a
 * gap between two complete lines, never half a line. */
#ifndef SLUICE_EVSTREAM_H
#define SLUICE_EVSTREAM_H

#include <stddef.h>

/* About a thousand event lines: several seconds of a burst of state changes. */
#define EVSTREAM_BUF_BYTES (256 * 1024)

struct evstream {
	int on;                           /* opened (else the daemon writes to its FILE) */
	int fd;                           /* where the lines go */
	int own_fd;                       /* fd is a description of our own: closed at the end */
	int sock;                         /* a socket: send(MSG_DONTWAIT), its flags untouched */
	int restore_fl;                   /* the flags to give the descriptor back, -1: none */
	int broken;                       /* errno of a write that failed for good (EPIPE) */
	char *buf;                        /* bytes the descriptor did not take yet, in order */
	size_t len, cap;
	unsigned long long dropping;      /* events dropped since the buffer filled up */
	unsigned long long dropped_total; /* events dropped, in all */
};

/* Take over fd (sluiced's stdout) for the event lines, buffering at most cap bytes. A pipe,
 * FIFO or terminal is opened again as a non-blocking description of our own (so whoever shares
 * the one given, a shell, keeps a blocking one); failing that, fd itself is made non-blocking
 * until evstream_close. A socket (journald's) is written with MSG_DONTWAIT; a regular file as
 * it is (its writes never wait for a reader). Returns 0, or -errno (nothing taken over). */
int evstream_open(struct evstream *es, int fd, size_t cap);

/* Queue one complete line (its '\n' included): written at once when nothing waits and the
 * descriptor takes it. Returns 1 when this line is the first one dropped (the buffer is full,
 * or the descriptor failed for good: es->broken), else 0. */
int evstream_put(struct evstream *es, const char *line, size_t n);

/* Write out what waits, as far as the descriptor takes it without blocking. Returns how many
 * events were dropped when that run of drops just ended (the buffer drained), else 0. */
unsigned long long evstream_flush(struct evstream *es);

/* Write out what waits, waiting for the reader at most wait_ms, and give the descriptor back.
 * Returns the bytes left unwritten. */
size_t evstream_close(struct evstream *es, int wait_ms);

#endif
