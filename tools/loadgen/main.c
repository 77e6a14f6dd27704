// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// loadgen: an open-loop load generator for sluice tests and benchmarks.
//
// Arrivals are scheduled by the clock (Poisson at --rate per second, or evenly spaced), never
// by completions: a request whose connection is slow does not delay the next arrival. One
// thread, nonblocking sockets, epoll, a timerfd for sub-millisecond arrival times; thousands
// of outstanding requests. Latency is measured from the scheduled arrival time, so a late
// send is charged to the request (no coordinated omission).
//
// Modes: http-keepalive (a pool of persistent connections per class: an idle one is reused,
// else a new one is opened), http-new (a new connection per request, Connection: close),
// tcp (connect, send one line, wait for "ok", hold --hold-ms, close: the connection is the
// unit). Everything goes to --target and nowhere else.
//
// Output: one JSON object on stdout at the end; optional progress lines on stderr.
// See tools/README.md for usage.
#include "loadgen.h"
#define TOOL_NAME "loadgen"
#include "../common/args.h"
#include "../common/hostport.h"

// ---------------------------------------------------------------- globals
const char *mode_names[] = { "http-keepalive", "http-new", "tcp" };
struct lg_opt opt = { .timeout_ns = 2000000000LL, .mode = M_KEEPALIVE, .duration = -1 };

struct klass classes[MAX_CLASSES];
int nclasses;
double weight_sum;
int epfd, tfd, sfd;
int nconns;
uint64_t outstanding;
struct link outstanding_list; // every live request, in deadline order
struct link hold_list;	     // tcp mode: connections in their hold time
struct conn *dead_list;
uint64_t conn_opened_total, local_errors;
int tfd_marker, sfd_marker;

uint64_t rng;
int64_t armed_at = -1;
int64_t run_t0;

int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}



void warn_once(int *flag, const char *fmt, ...)
{
	if (*flag || opt.quiet)
		return;
	*flag = 1;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "loadgen: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

double rnd01(void) // xorshift64*, (0,1]
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return ((rng * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0) +
	       (1.0 / 9007199254740992.0);
}

// ---------------------------------------------------------------- classes
char *xstrdup_printf(size_t *len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatal("out of memory");
	*len = (size_t)n;
	return s;
}

// NAME:WEIGHT[:src=ADDR][:header[=VALUE]][:path=/x][:dscp=N]
void add_class(const char *spec)
{
	if (nclasses == MAX_CLASSES)
		die("too many --class (max %d)", MAX_CLASSES);
	struct klass *k = &classes[nclasses];
	memset(k, 0, sizeof *k);
	k->dscp = -1;
	strcpy(k->path, "/");
	char *copy = strdup(spec), *save = NULL;
	if (!copy)
		fatal("out of memory");
	char *name = strtok_r(copy, ":", &save);
	char *w = name ? strtok_r(NULL, ":", &save) : NULL;
	if (!name || !w || strlen(name) >= sizeof k->name)
		die("bad --class '%s' (want NAME:WEIGHT[:src=ADDR][:header][:path=/x][:dscp=N])", spec);
	strcpy(k->name, name);
	for (int i = 0; i < nclasses; i++)
		if (!strcmp(classes[i].name, name))
			die("--class %s given twice", name);
	char *end;
	k->weight = strtod(w, &end);
	if (*end || !(k->weight >= 0) || k->weight > 1e9)
		die("bad weight in --class '%s'", spec);
	snprintf(k->hdrval, sizeof k->hdrval, "%s", name);
	// Options are split at ':' too, except that src= takes the rest up to the next option
	// keyword so that IPv6 addresses work: src=[fd00::1] or src=fd00::1.
	char *rest = save;
	while (rest && *rest) {
		char *opt_end = NULL;
		if (!strncmp(rest, "src=", 4)) {
			char *v = rest + 4;
			char *cut = NULL;
			static const char *kw[] = { ":header", ":path=", ":dscp=" };
			for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++) {
				char *f = strstr(v, kw[i]);
				if (f && (!cut || f < cut))
					cut = f;
			}
			if (cut) {
				*cut = 0;
				opt_end = cut + 1;
			}
			if (parse_hostport(v, HOSTPORT_BARE, &k->src, &k->srclen))
				die("bad src address '%s' in --class '%s'", v, spec);
		} else {
			char *colon = strchr(rest, ':');
			if (colon) {
				*colon = 0;
				opt_end = colon + 1;
			}
			if (!strcmp(rest, "header"))
				k->header = true;
			else if (!strncmp(rest, "header=", 7)) {
				k->header = true;
				snprintf(k->hdrval, sizeof k->hdrval, "%s", rest + 7);
			} else if (!strncmp(rest, "path=", 5)) {
				if (rest[5] != '/' || strlen(rest + 5) >= sizeof k->path ||
				    strpbrk(rest + 5, " \r\n"))
					die("bad path in --class '%s' (must start with /, no spaces)", spec);
				strcpy(k->path, rest + 5);
			} else if (!strncmp(rest, "dscp=", 5)) {
				long d = strtol(rest + 5, &end, 10);
				if (!rest[5] || *end || d < 0 || d > 63)
					die("bad dscp in --class '%s' (0..63)", spec);
				k->dscp = (int)d;
			} else
				die("unknown option '%s' in --class '%s'", rest, spec);
		}
		rest = opt_end;
	}
	free(copy);
	nclasses++;
}

void build_requests(void)
{
	char host[300];
	snprintf(host, sizeof host, "%s", opt.target_str);
	for (int i = 0; i < nclasses; i++) {
		struct klass *k = &classes[i];
		char prio[64] = "";
		if (k->header)
			snprintf(prio, sizeof prio, "X-Priority: %s\r\n", k->hdrval);
		if (opt.mode == M_TCP) {
			k->req = xstrdup_printf(&k->req_len, "%s\n", k->name);
		} else {
			k->req = xstrdup_printf(&k->req_len,
						"GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sluice-loadgen\r\n"
						"%s\r\n",
						k->path, host, prio);
			k->req_close = xstrdup_printf(&k->req_close_len,
						      "GET %s HTTP/1.1\r\nHost: %s\r\n"
						      "User-Agent: sluice-loadgen\r\n%s"
						      "Connection: close\r\n\r\n",
						      k->path, host, prio);
		}
		list_init(&k->idle);
		list_init(&k->pending);
		weight_sum += k->weight;
	}
	if (!(weight_sum > 0))
		die("the class weights sum to 0");
}

int pick_class(void)
{
	double x = rnd01() * weight_sum;
	for (int i = 0; i < nclasses; i++) {
		x -= classes[i].weight;
		if (x <= 0 && classes[i].weight > 0)
			return i;
	}
	for (int i = nclasses - 1; i >= 0; i--)
		if (classes[i].weight > 0)
			return i;
	return 0;
}

// ---------------------------------------------------------------- main
static void usage(FILE *f)
{
	fprintf(f,
		"usage: loadgen --target ADDR:PORT --rate R [--duration S] [options]\n"
		"  --target ADDR:PORT       v4 or [v6]:PORT (numeric); the only destination\n"
		"  --rate R                 arrivals per second (open loop)\n"
		"  --duration S             arrival window in seconds (default 10 unless\n"
		"                           --max-requests is given)\n"
		"  --max-requests N         stop after N arrivals\n"
		"  --timeout-ms MS          absolute timeout per request (default 2000)\n"
		"  --mode M                 http-keepalive (default) | http-new | tcp\n"
		"  --hold-ms MS             tcp: keep the connection MS after \"ok\" (default 0)\n"
		"  --class NAME:W[:src=ADDR][:header[=VAL]][:path=/x][:dscp=N]   repeatable;\n"
		"                           default one class L2. header adds X-Priority: NAME\n"
		"  --arrivals poisson|uniform  (default poisson)\n"
		"  --max-conns N            open connections cap (default: fd limit - 64)\n"
		"  --rate-step AT:RATE      from AT s into the run arrive at RATE/s (repeatable,\n"
		"                           ascending; e.g. a surge and its end)\n"
		"  --trace FILE             one line per finished request: arrival ms into the\n"
		"                           run, class, outcome (0 ok, 1 429, 2 503, 3 other\n"
		"                           status, 4 refused, 5 reset, 6 eof, 7 timeout, 8 other,\n"
		"                           9 unfinished), HTTP status, latency us, 1 when\n"
		"                           sent on a connection opened for it (else 0)\n"
		"  --report-interval S      progress lines on stderr\n"
		"  --seed N                 random seed (default: from the clock)\n"
		"  --quiet                  no warnings on stderr\n"
		"Prints one JSON object on stdout (also after SIGINT: stop arrivals and drain;\n"
		"SIGTERM or a second SIGINT: stop at once, outstanding requests = unfinished).\n"
		"Exit 0 when the run completed, 2 bad usage, 1 runtime failure.\n");
}

// Reads the command line into opt and the class table. Exits 2 on bad usage, 0 after --help.
static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
		if (!strcmp(a, "--target"))
			opt.target_str = ARG();
		else if (!strcmp(a, "--rate"))
			opt.rate = num_arg(a, ARG(), 0.001, 1e7);
		else if (!strcmp(a, "--duration"))
			opt.duration = num_arg(a, ARG(), 0, 1e6);
		else if (!strcmp(a, "--max-requests"))
			opt.max_requests = (uint64_t)num_arg(a, ARG(), 1, 1e12);
		else if (!strcmp(a, "--timeout-ms"))
			opt.timeout_ns = (int64_t)(num_arg(a, ARG(), 1, 3600e3) * 1e6);
		else if (!strcmp(a, "--hold-ms"))
			opt.hold_ns = (int64_t)(num_arg(a, ARG(), 0, 86400e3) * 1e6);
		else if (!strcmp(a, "--mode")) {
			const char *m = ARG();
			int k;
			for (k = 0; k < 3 && strcmp(m, mode_names[k]); k++)
				;
			if (k == 3)
				die("bad --mode '%s' (http-keepalive|http-new|tcp)", m);
			opt.mode = k;
		} else if (!strcmp(a, "--class"))
			add_class(ARG());
		else if (!strcmp(a, "--arrivals")) {
			const char *m = ARG();
			if (!strcmp(m, "uniform"))
				opt.uniform = true;
			else if (strcmp(m, "poisson"))
				die("bad --arrivals '%s' (poisson|uniform)", m);
		} else if (!strcmp(a, "--max-conns"))
			opt.max_conns = (int)num_arg(a, ARG(), 1, 10e6);
		else if (!strcmp(a, "--rate-step")) {
			const char *v = ARG();
			char *end;
			double at = strtod(v, &end), rate;
			if (end == v || *end != ':' || opt.nsteps == 8)
				die("bad --rate-step '%s' (AT:RATE, at most 8)", v);
			rate = num_arg(a, end + 1, 0.001, 1e7);
			if (!(at >= 0) || (opt.nsteps && at <= opt.step_at[opt.nsteps - 1]))
				die("--rate-step times must be >= 0 and ascending ('%s')", v);
			opt.step_at[opt.nsteps] = at;
			opt.step_rate[opt.nsteps++] = rate;
		} else if (!strcmp(a, "--trace")) {
			const char *f = ARG();
			if (!(opt.trace = fopen(f, "w")))
				die("--trace %s: %s", f, strerror(errno));
		} else if (!strcmp(a, "--report-interval"))
			opt.report_interval = num_arg(a, ARG(), 0.1, 1e6);
		else if (!strcmp(a, "--seed"))
			opt.seed = (uint64_t)num_arg(a, ARG(), 0, 1e18);
		else if (!strcmp(a, "--quiet"))
			opt.quiet = true;
		else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else {
			usage(stderr);
			die("unknown argument '%s'", a);
		}
#undef ARG
	}
	if (!opt.target_str || !(opt.rate > 0)) {
		usage(stderr);
		die("--target and --rate are required");
	}
	if (parse_hostport(opt.target_str, 0, &opt.target, &opt.target_len))
		die("bad --target '%s' (want numeric ADDR:PORT or [V6ADDR]:PORT)", opt.target_str);
	if (opt.duration < 0)
		opt.duration = opt.max_requests ? 1e6 : 10;
	if (!nclasses)
		add_class("L2:1");
	for (int i = 0; i < nclasses; i++)
		if (classes[i].srclen && classes[i].src.ss_family != opt.target.ss_family)
			die("class %s: source and target address families differ", classes[i].name);
}

// The random seed, the connection cap from the fd limit, and the epoll set: the arrival
// timer and the signals (blocked, read through a signalfd).
static void setup_process(void)
{
	rng = opt.seed ? opt.seed : (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	if (!rng)
		rng = 1;

	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			getrlimit(RLIMIT_NOFILE, &rl);
		}
		long lim = rl.rlim_cur == RLIM_INFINITY ? 1 << 20 : (long)rl.rlim_cur;
		if (!opt.max_conns || opt.max_conns > lim - 64)
			opt.max_conns = lim > 128 ? (int)(lim - 64) : 64;
	}

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (epfd < 0 || tfd < 0 || sfd < 0)
		fatal("epoll/timerfd/signalfd: %s", strerror(errno));
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = &tfd_marker };
	epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &e);
	e.data.ptr = &sfd_marker;
	epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &e);
	list_init(&outstanding_list);
	list_init(&hold_list);
}

// The run's schedule and progress.
struct run {
	int64_t t0, t_end, gap, next_arrival, next_report, t_arrivals_end, t_done;
	uint64_t issued;
	bool arriving;
	int signals;
};

static bool arrivals_over(const struct run *r)
{
	return r->next_arrival >= r->t_end || (opt.max_requests && r->issued >= opt.max_requests);
}

// The arrival rate in force at t (ns): --rate, or the last --rate-step begun by then.
static double rate_at(const struct run *r, int64_t t)
{
	double rate = opt.rate;
	for (int i = 0; i < opt.nsteps; i++)
		if (t >= r->t0 + (int64_t)(opt.step_at[i] * 1e9))
			rate = opt.step_rate[i];
	return rate;
}

// Schedules the arrival after r->next_arrival. A gap that crosses a rate step restarts at the
// step with the new rate (Poisson arrivals have no memory, so this is exact).
static void next_arrival_after(struct run *r)
{
	int64_t t = r->next_arrival;
	double rate = rate_at(r, t);
	int64_t next = t + (opt.uniform ? (int64_t)(1e9 / rate) : (int64_t)(-log(rnd01()) / rate * 1e9));
	for (int i = 0; i < opt.nsteps; i++) {
		int64_t b = r->t0 + (int64_t)(opt.step_at[i] * 1e9);
		if (b > t && b < next) {
			r->next_arrival = b;
			next_arrival_after(r);
			return;
		}
	}
	r->next_arrival = next;
}

// Issues the arrivals due (catching up if the loop was late: the schedule is the clock's).
static void issue_arrivals(struct run *r, int64_t now)
{
	while (r->arriving && r->next_arrival <= now) {
		if (arrivals_over(r)) {
			r->arriving = false;
			break;
		}
		new_request(r->next_arrival);
		r->issued++;
		next_arrival_after(r);
	}
	if (r->arriving && arrivals_over(r))
		r->arriving = false;
	if (!r->arriving && !r->t_arrivals_end)
		r->t_arrivals_end = now < r->t_end ? now : r->t_end;
}

static void report_progress(const struct run *r, int64_t now)
{
	uint64_t ok = 0, sent = 0, rej = 0, err = 0;
	for (int i = 0; i < nclasses; i++) {
		struct stats *s = &classes[i].s;
		sent += s->sent;
		ok += s->ok;
		rej += s->h429 + s->h503 + s->refused;
		err += s->other_status + s->reset + s->eof + s->timeout + s->other_error;
	}
	fprintf(stderr,
		"loadgen: t=%.1fs sent=%llu ok=%llu rejected=%llu errors=%llu "
		"outstanding=%llu conns=%d\n",
		(now - r->t0) / 1e9, (unsigned long long)sent, (unsigned long long)ok,
		(unsigned long long)rej, (unsigned long long)err,
		(unsigned long long)outstanding, nconns);
}

// The earliest of: next arrival, next request deadline, next hold end, next progress line.
static int64_t next_wake(const struct run *r)
{
	int64_t wake = INT64_MAX;
	if (r->arriving)
		wake = r->next_arrival;
	if (!list_empty(&outstanding_list)) {
		int64_t d = container_of(outstanding_list.next, struct req, tlink)->deadline;
		if (d < wake)
			wake = d;
	}
	if (!list_empty(&hold_list)) {
		int64_t d = container_of(hold_list.next, struct conn, link)->hold_until;
		if (d < wake)
			wake = d;
	}
	if (r->next_report < wake)
		wake = r->next_report;
	return wake;
}

static void on_signals(struct run *r, int64_t now)
{
	struct signalfd_siginfo si;
	bool term = false;
	while (read(sfd, &si, sizeof si) == sizeof si) {
		r->signals++;
		term |= si.ssi_signo == SIGTERM;
	}
	bool was_arriving = r->arriving;
	r->arriving = false;
	if (!term && (r->signals == 1 || was_arriving))
		return; // first SIGINT: stop arrivals, drain
	// SIGTERM or a second SIGINT: stop now; the outstanding requests are reported as
	// unfinished
	while (!list_empty(&outstanding_list)) {
		struct req *q = container_of(outstanding_list.next, struct req, tlink);
		if (q->conn)
			conn_close(q->conn);
		q->conn = NULL;
		req_finish(q, O_UNFINISHED, 0, now);
	}
	while (!list_empty(&hold_list)) // held tcp connections too
		conn_close(container_of(hold_list.next, struct conn, link));
}

static void run_loop(struct run *r)
{
	struct epoll_event evs[512];

	for (;;) {
		int64_t now = now_ns();
		issue_arrivals(r, now);
		expire(now);
		if (now >= r->next_report) {
			report_progress(r, now);
			r->next_report += (int64_t)(opt.report_interval * 1e9);
		}
		free_dead();
		if (!r->arriving && outstanding == 0 && list_empty(&hold_list))
			break; /* held tcp connections end at their hold time, not at the last arrival */
		int64_t wake = next_wake(r);
		int n;
		if (wake <= now_ns()) {
			n = epoll_wait(epfd, evs, 512, 0);
		} else {
			if (wake != INT64_MAX)
				arm_timer(wake);
			n = epoll_wait(epfd, evs, 512, -1);
		}
		if (n < 0 && errno != EINTR)
			fatal("epoll_wait: %s", strerror(errno));
		now = now_ns();
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == &tfd_marker) {
				uint64_t x;
				if (read(tfd, &x, sizeof x) < 0) {
				}
				armed_at = -1;
				continue;
			}
			if (p == &sfd_marker) {
				on_signals(r, now);
				continue;
			}
			conn_event(p, evs[i].events, now);
		}
		free_dead();
	}
	r->t_done = now_ns();
}

static void print_summary(const struct run *r)
{
	double dur = (r->t_arrivals_end - r->t0) / 1e9;
	static struct stats total;
	printf("{\"target\":");
	json_str(stdout, opt.target_str);
	printf(",\"mode\":\"%s\",\"duration_s\":%.3f,\"elapsed_s\":%.3f,\"offered_rate\":%.2f,"
	       "\"achieved_rate\":%.2f,\"timeout_ms\":%.1f,\"connections_opened\":%llu,"
	       "\"local_errors\":%llu,\"classes\":{",
	       mode_names[opt.mode], dur, (r->t_done - r->t0) / 1e9, opt.rate,
	       dur > 0 ? r->issued / dur : 0.0, opt.timeout_ns / 1e6,
	       (unsigned long long)conn_opened_total, (unsigned long long)local_errors);
	for (int i = 0; i < nclasses; i++) {
		printf("%s", i ? "," : "");
		json_str(stdout, classes[i].name);
		putchar(':');
		print_stats(stdout, &classes[i].s, dur);
		stats_merge(&total, &classes[i].s);
	}
	printf("},\"total\":");
	print_stats(stdout, &total, dur);
	printf("}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	build_requests();
	setup_process();

	struct run r = { .t0 = now_ns(), .arriving = true };
	run_t0 = r.t0;
	r.t_end = r.t0 + (int64_t)(opt.duration * 1e9);
	r.gap = (int64_t)(1e9 / opt.rate);
	r.next_arrival = r.t0;
	r.next_report = opt.report_interval > 0 ? r.t0 + (int64_t)(opt.report_interval * 1e9)
						: INT64_MAX;
	run_loop(&r);

	// close everything that is still open (idle keep-alive and held connections)
	while (!list_empty(&hold_list))
		conn_close(container_of(hold_list.next, struct conn, link));
	for (int i = 0; i < nclasses; i++)
		while (!list_empty(&classes[i].idle))
			conn_close(container_of(classes[i].idle.next, struct conn, link));
	free_dead();

	print_summary(&r);
	if (opt.trace && fclose(opt.trace))
		fatal("--trace: %s", strerror(errno));
	for (int i = 0; i < nclasses; i++) {
		free(classes[i].req);
		free(classes[i].req_close);
	}
	close(tfd);
	close(sfd);
	close(epfd);
	return 0;
}
