// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// testserver's shared declarations: options, run-time mode, counters, the http mode's
// connections, and the functions main.c and http.c call across.
#ifndef TESTSERVER_H
#define TESTSERVER_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LISTEN 16
#define MAX_HEADER (16 * 1024)
#define MAX_BODY (1024 * 1024)
#define MAX_LINE (64 * 1024)

enum { MODE_HTTP, MODE_TCP };

struct ts_opt {
	const char *listen[MAX_LISTEN];
	int nlisten;
	int workers;
	double service_ms;
	double slow_ms; // < 0: 10 x service_ms
	double hold_ms;
	double fail_rate;
	int busy;
	int worker_reads; // http: a worker reads its request; the I/O thread only waits for it
	int mode;
	int backlog;
	const char *mode_file;
	const char *stats_file;
	int stats_interval_ms;
	const char *port_file;
	int quiet;
};
struct ts_stats {
	uint64_t requests, r2xx, r4xx, r5xx, conns, conns_closed;
	int64_t conns_open, max_conns_open, busy, max_busy, queued, max_queued;
};
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define INC(x) __atomic_add_fetch(&(x), 1, __ATOMIC_RELAXED)
#define DEC(x) __atomic_sub_fetch(&(x), 1, __ATOMIC_RELAXED)
#define stopping LOAD(stopping_flag)
struct conn {
	int fd;
	char *buf;
	size_t len, cap;
	// the parsed request at the head of buf
	size_t req_len; // header + body bytes
	char path[256];
	bool keep_alive, bad, peer_closed;
	bool unread; // --worker-reads: queued readable, its bytes still in the socket
	int handoff; // release/acquire pair for the worker -> I/O thread hand-over via epoll
	struct conn *qnext;		  // work queue
	struct conn *all_prev, *all_next; // registry of open connections
};


extern struct ts_opt opt;
extern struct ts_stats st;
extern int64_t rt_service_us, rt_slow_us, rt_hold_us;
extern int64_t rt_fail_ppm;
extern int rt_busy;
extern int sig_override;
extern int stopping_flag;
extern struct timespec t_start;
extern int lfds[MAX_LISTEN];
extern int epfd, wakefd;
extern pthread_mutex_t q_mu;
extern pthread_cond_t q_cv;
extern struct conn *q_head, *q_tail;
extern pthread_mutex_t all_mu;
extern struct conn *all_head;
extern int lfd_marker[MAX_LISTEN];

void raise_max(int64_t *max, int64_t v);
double now_s(void);
int64_t now_us(void);
void logmsg(const char *fmt, ...);
void die(const char *fmt, ...);
int stats_json(char *buf, size_t n);
void write_stats_file(void);
void apply_mode(double service_ms, double slow_ms, double fail_rate, double hold_ms,
		int busy);
void poll_mode_file(void);
double rnd01(void);
bool should_fail(void);
bool do_work(int64_t us);
bool send_all(int fd, const char *buf, size_t len);
void fmt_addr(const struct sockaddr_storage *ss, char *out, size_t n);
void open_listeners(void);
void conn_opened(void);
void conn_closed(void);
void count_status(int code);
void enqueue(struct conn *c);
void conn_free(struct conn *c);
void conn_rearm(struct conn *c);
bool hdr_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen);
int http_parse(struct conn *c);
const char *reason(int code);
void http_serve(struct conn *c);
void *http_worker(void *arg);
int http_fill(struct conn *c);
void http_readable(struct conn *c);
void http_accept(int lfd);
void *http_io(void *arg);
void tcp_serve(int fd);
void *tcp_worker(void *arg);

#endif
