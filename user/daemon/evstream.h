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

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

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
	/* A regular file (or a block device) cannot be made non-blocking, and its writes wait
	 * for a stalled disk (a hung NFS mount, a device in error recovery, writeback throttled):
	 * a thread of its own writes it, and the tick only copies lines into buf. */
	int threaded;
	pthread_t thread;
	pthread_mutex_t mu;               /* guards buf, len, out_*, the drop counts, stop */
	pthread_cond_t cv;                /* lines to write or stop; the thread wrote all */
	char *out;                        /* the thread's: the bytes it is writing now */
	size_t out_off, out_len;
	int stop, exited;
	/* write(2); a test puts a stalled disk in its place */
	ssize_t (*write_fn)(int fd, const void *p, size_t n);
};

/* Take over fd (sluiced's stdout) for the event lines, buffering at most cap bytes. A pipe,
 * FIFO or terminal is opened again as a non-blocking description of our own (so whoever shares
 * the one given, a shell, keeps a blocking one); failing that, fd itself is made non-blocking
 * until evstream_close. A socket (journald's) is written with MSG_DONTWAIT; a regular file as
 * through a thread of its own (its writes wait for the disk). Returns 0, or -errno (nothing
 * taken over). */
int evstream_open(struct evstream *es, int fd, size_t cap);

/* Queue one complete line (its '\n' included): written at once when nothing waits and the
 * descriptor takes it. Returns 1 when this line is the first one dropped (the buffer is full,
 * or the descriptor failed for good: es->broken), else 0. */
int evstream_put(struct evstream *es, const char *line, size_t n);

/* Write out what waits, as far as the descriptor takes it without blocking. Returns how many
 * events were dropped when that run of drops just ended (the buffer drained), else 0. */
unsigned long long evstream_flush(struct evstream *es);

/* Wait at most wait_ms for what waits to be written (a file's thread, mostly: tests). Returns
 * 1 when nothing waits. */
int evstream_drained(struct evstream *es, int wait_ms);

/* Write out what waits, waiting for the reader (or the disk) at most wait_ms, and give the
 * descriptor back. A file's thread still stuck in a write then is left behind with its bytes:
 * the process is ending. Returns the bytes left unwritten. */
size_t evstream_close(struct evstream *es, int wait_ms);

#endif
