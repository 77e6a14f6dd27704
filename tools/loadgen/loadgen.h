// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// loadgen's shared declarations: the run options, the class table, connections and
// requests, and the functions the three files (main.c, conn.c, report.c) call across.
#ifndef LOADGEN_H
#define LOADGEN_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

#define MAX_CLASSES 16
#define MAX_RESP (4 * 1024 * 1024)


// ---------------------------------------------------------------- intrusive lists
struct link {
	struct link *prev, *next;
};
#define container_of(p, T, m) ((T *)((char *)(p) - offsetof(T, m)))
static inline void list_init(struct link *h) { h->prev = h->next = h; }
static inline bool list_empty(const struct link *h) { return h->next == h; }
static inline void list_add_tail(struct link *h, struct link *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}
static inline void list_add_head(struct link *h, struct link *n)
{
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
}
static inline void list_del(struct link *n)
{
	if (!n->next)
		return;
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = NULL;
}

// ---------------------------------------------------------------- log-linear histogram (µs)
// Exact below 128 µs, then 64 sub-buckets per power of two (relative error < 1.6%, the
// reported bucket middle < 0.8%). Covers 2^40 µs.
#define H_SUB 64
#define H_BUCKETS (H_SUB * 36)
struct hist {
	uint64_t b[H_BUCKETS];
	uint64_t n, max_us;
};

// ---------------------------------------------------------------- types
enum { M_KEEPALIVE, M_NEW, M_TCP };
extern const char *mode_names[];

struct stats {
	uint64_t sent, ok, h429, h503, other_status, refused, reset, eof, timeout, other_error,
		unfinished, retried,
		lost_on_retry, lost_on_fresh, // of reset + eof: on a request's retry, on a new connection
		stale_dropped;                 // idle connections found closed before reuse
	uint64_t status[600];
	struct hist ok_h, rej_h;
	struct hist ok_new_h; // of ok_h: requests answered on a connection opened for them
};

struct klass {
	char name[32];
	double weight;
	struct sockaddr_storage src;
	socklen_t srclen;
	int dscp;
	bool header;
	char hdrval[32];
	char path[512];
	char *req, *req_close; // prebuilt request texts (keep-alive / Connection: close)
	size_t req_len, req_close_len;
	struct link idle;    // idle keep-alive connections (most recent first)
	struct link pending; // requests waiting for a connection slot
	struct stats s;
};

enum { C_CONNECTING, C_SENDING, C_RECEIVING, C_IDLE, C_HOLDING };

struct req;
struct conn {
	int fd, cls, state;
	struct req *req;
	char *rbuf;
	size_t rlen, rcap, woff;
	unsigned nreq;	  // requests completed on this connection
	struct link link; // class idle list or hold list
	int64_t hold_until;
	uint32_t events;
	bool dead;
	struct conn *dead_next;
};

struct req {
	int cls;
	int retries;
	bool on_new_conn; // sent on a connection opened for it (not an idle keep-alive one)
	int64_t start, deadline; // ns, CLOCK_MONOTONIC; start = scheduled arrival
	struct conn *conn;
	struct link tlink; // outstanding FIFO (deadline order)
	struct link plink; // class pending list
};

// ---------------------------------------------------------------- request outcomes
enum { O_OK, O_429, O_503, O_STATUS, O_REFUSED, O_RESET, O_EOF, O_TIMEOUT, O_OTHER, O_UNFINISHED };

// ---------------------------------------------------------------- options and state
struct lg_opt {
	const char *target_str;
	struct sockaddr_storage target;
	socklen_t target_len;
	double rate, duration;
	uint64_t max_requests;
	int64_t timeout_ns, hold_ns;
	int mode;
	bool uniform;
	double report_interval;
	int max_conns;
	uint64_t seed;
	bool quiet;
	// --rate-step AT:RATE: from AT s into the run the arrival rate is RATE (ascending AT)
	int nsteps;
	double step_at[8], step_rate[8];
	FILE *trace; // --trace FILE: one line per finished request
};

extern struct lg_opt opt;
extern struct klass classes[MAX_CLASSES];
extern int nclasses;
extern double weight_sum;
extern int epfd, tfd, sfd;
extern int nconns;
extern uint64_t outstanding;
extern struct link outstanding_list;
extern struct link hold_list;
extern struct conn *dead_list;
extern uint64_t conn_opened_total, local_errors;
extern int tfd_marker, sfd_marker;
extern uint64_t rng;
extern int64_t armed_at;
extern int64_t run_t0;

// a runtime failure (not the user's input): exit 1
#define fatal(...) (fprintf(stderr, "loadgen: " __VA_ARGS__), fputc('\n', stderr), exit(1))

int64_t now_ns(void);
void die(const char *fmt, ...);
void warn_once(int *flag, const char *fmt, ...);
double rnd01(void);
char *xstrdup_printf(size_t *len, const char *fmt, ...);
void add_class(const char *spec);
void build_requests(void);
int pick_class(void);
void conn_set_events(struct conn *c, uint32_t ev);
void conn_close(struct conn *c);
void free_dead(void);
void req_finish(struct req *r, int outcome, int status, int64_t now);
int status_outcome(int status);
void conn_send(struct conn *c, int64_t now);
int connect_outcome(int err);
void conn_open(struct req *r, int64_t now);
void dispatch(struct req *r, int64_t now);
void drain_pending(void);
void new_request(int64_t sched);
int http_response(struct conn *c, bool eof, int *status, bool *server_close);
void conn_done(struct conn *c, bool server_close, int64_t now);
void conn_failed(struct conn *c, int err, int64_t now);
void conn_readable(struct conn *c, int64_t now);
void conn_event(struct conn *c, uint32_t ev, int64_t now);
void expire(int64_t now);
void arm_timer(int64_t at);
int h_index(uint64_t v);
double h_value(int idx);
void h_add(struct hist *h, uint64_t us);
void h_merge(struct hist *dst, const struct hist *src);
double h_pct_ms(const struct hist *h, double p);
void stats_merge(struct stats *t, const struct stats *s);
void print_pcts(FILE *f, const char *prefix, const struct hist *h);
void print_stats(FILE *f, const struct stats *s, double dur);
void json_str(FILE *f, const char *s);

#endif
