// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// testserver: a TCP/HTTP server whose capacity is known (workers / service time).
//
// http mode: one I/O thread accepts connections and reads requests (epoll, EPOLLONESHOT);
// a complete request is queued to a fixed pool of N workers, which "work" for service-ms
// (sleep, or spin with --busy), answer, and hand the connection back. Idle keep-alive
// connections hold no worker, so capacity is N / service time requests per second.
// tcp mode: each worker accepts a connection itself and holds it until it closes (a
// connection occupies a worker; waiting connections stay in the kernel accept queue). Every
// line received costs service-ms and is answered "ok\n" ("err\n" when failing).
//
// Run-time control without restart: --mode-file PATH, re-read every 100 ms, holds
// whitespace-separated key=value pairs (service_ms, slow_ms, fail_rate, hold_ms, busy);
// a missing file means the command-line values. SIGUSR1 cycles normal -> slow -> failing.
// SIGTERM/SIGINT: stop, join, print the JSON stats on stdout, exit 0.
// See tools/README.md for usage.
#include "testserver.h"
#define TOOL_NAME "testserver"
#include "../common/args.h"
#include "../common/hostport.h"

// ---------------------------------------------------------------- options and run-time mode
struct ts_opt opt = { .workers = 4, .service_ms = 10, .slow_ms = -1, .mode = MODE_HTTP, .backlog = 1024,
	  .stats_interval_ms = 1000 };

// Current behaviour, read by workers with relaxed atomics.
int64_t rt_service_us, rt_slow_us, rt_hold_us;
int64_t rt_fail_ppm; // probability of failing, parts per million
int rt_busy;
int sig_override; // SIGUSR1 cycle: 0 normal, 1 slow, 2 failing


// ---------------------------------------------------------------- stats
struct ts_stats st;

void raise_max(int64_t *max, int64_t v)
{
	int64_t cur = LOAD(*max);
	while (v > cur && !__atomic_compare_exchange_n(max, &cur, v, false, __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
}

int stopping_flag;
struct timespec t_start;

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void logmsg(const char *fmt, ...)
{
	if (opt.quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "testserver: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}


int stats_json(char *buf, size_t n)
{
	double up = now_s() - (t_start.tv_sec + t_start.tv_nsec / 1e9);
	return snprintf(buf, n,
			"{\"mode\":\"%s\",\"workers\":%d,\"uptime_s\":%.3f,\"requests_served\":%llu,"
			"\"http_2xx\":%llu,\"http_4xx\":%llu,\"http_5xx\":%llu,"
			"\"connections_accepted\":%llu,\"connections_open\":%lld,"
			"\"max_concurrent\":%lld,\"max_busy_workers\":%lld,\"max_queued\":%lld,"
			"\"service_ms\":%.3f,\"fail_rate\":%.6f}\n",
			opt.mode == MODE_HTTP ? "http" : "tcp", opt.workers, up,
			(unsigned long long)LOAD(st.requests), (unsigned long long)LOAD(st.r2xx),
			(unsigned long long)LOAD(st.r4xx), (unsigned long long)LOAD(st.r5xx),
			(unsigned long long)LOAD(st.conns), (long long)LOAD(st.conns_open),
			(long long)LOAD(st.max_conns_open), (long long)LOAD(st.max_busy),
			(long long)LOAD(st.max_queued), LOAD(rt_service_us) / 1000.0,
			LOAD(rt_fail_ppm) / 1e6);
}

void write_stats_file(void)
{
	if (!opt.stats_file)
		return;
	char buf[1024], tmp[4096];
	int n = stats_json(buf, sizeof buf);
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", opt.stats_file, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	fwrite(buf, 1, (size_t)n, f);
	if (fclose(f) == 0)
		rename(tmp, opt.stats_file);
	else
		unlink(tmp);
}

// ---------------------------------------------------------------- run-time mode
void apply_mode(double service_ms, double slow_ms, double fail_rate, double hold_ms,
		       int busy)
{
	int ov = LOAD(sig_override);
	if (ov == 1)
		service_ms = slow_ms;
	if (ov == 2)
		fail_rate = 1.0;
	if (fail_rate < 0)
		fail_rate = 0;
	if (fail_rate > 1)
		fail_rate = 1;
	STORE(rt_service_us, (int64_t)llround(service_ms * 1000));
	STORE(rt_slow_us, (int64_t)llround(slow_ms * 1000));
	STORE(rt_fail_ppm, (int64_t)llround(fail_rate * 1e6));
	STORE(rt_hold_us, (int64_t)llround(hold_ms * 1000));
	STORE(rt_busy, busy);
}

// Re-reads the mode file; logs when the effective values change.
void poll_mode_file(void)
{
	double service_ms = opt.service_ms, slow_ms = opt.slow_ms, fail_rate = opt.fail_rate;
	double hold_ms = opt.hold_ms;
	int busy = opt.busy;
	bool slow_set = false;
	static char last[1024];
	char buf[1024] = "";
	if (opt.mode_file) {
		FILE *f = fopen(opt.mode_file, "r");
		if (f) {
			size_t n = fread(buf, 1, sizeof buf - 1, f);
			buf[n] = 0;
			fclose(f);
		}
		char copy[1024];
		memcpy(copy, buf, sizeof copy);
		char *save = NULL;
		for (char *tok = strtok_r(copy, " \t\r\n,;", &save); tok;
		     tok = strtok_r(NULL, " \t\r\n,;", &save)) {
			if (tok[0] == '#')
				break;
			char *eq = strchr(tok, '=');
			if (!eq)
				continue;
			*eq = 0;
			char *end;
			double v = strtod(eq + 1, &end);
			if (end == eq + 1 || v < 0) {
				logmsg("mode-file: bad value for %s ignored", tok);
				continue;
			}
			if (!strcmp(tok, "service_ms"))
				service_ms = v;
			else if (!strcmp(tok, "slow_ms"))
				slow_ms = v, slow_set = true;
			else if (!strcmp(tok, "fail_rate"))
				fail_rate = v;
			else if (!strcmp(tok, "hold_ms"))
				hold_ms = v;
			else if (!strcmp(tok, "busy"))
				busy = v != 0;
			else
				logmsg("mode-file: unknown key %s ignored", tok);
		}
	}
	if (slow_ms < 0 || (!slow_set && opt.slow_ms < 0))
		slow_ms = 10 * service_ms;
	apply_mode(service_ms, slow_ms, fail_rate, hold_ms, busy);
	char now[1024];
	snprintf(now, sizeof now, "service_ms=%.3f slow_ms=%.3f fail_rate=%.4f hold_ms=%.1f busy=%d",
		 LOAD(rt_service_us) / 1000.0, LOAD(rt_slow_us) / 1000.0, LOAD(rt_fail_ppm) / 1e6,
		 LOAD(rt_hold_us) / 1000.0, LOAD(rt_busy));
	if (strcmp(now, last)) {
		if (last[0])
			logmsg("mode: %s", now);
		memcpy(last, now, sizeof last);
	}
}

// ---------------------------------------------------------------- helpers
static __thread uint64_t rng_state;

double rnd01(void)
{
	if (!rng_state)
		rng_state = (uint64_t)now_us() ^ ((uint64_t)pthread_self() << 1) ^ 0x9e3779b97f4a7c15ULL;
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (rng_state >> 11) * (1.0 / 9007199254740992.0);
}

bool should_fail(void)
{
	int64_t ppm = LOAD(rt_fail_ppm);
	return ppm > 0 && (ppm >= 1000000 || rnd01() * 1e6 < (double)ppm);
}

// Models the work of a request: sleep (a downstream wait) or spin the CPU. Interruptible by
// shutdown. Returns false when stopping.
bool do_work(int64_t us)
{
	int64_t end = now_us() + us;
	bool busy = LOAD(rt_busy);
	for (;;) {
		if (stopping)
			return false;
		int64_t left = end - now_us();
		if (left <= 0)
			return true;
		if (busy)
			continue;
		if (left > 20000)
			left = 20000;
		struct timespec ts = { left / 1000000, (left % 1000000) * 1000 };
		nanosleep(&ts, NULL);
	}
}

// Writes all of buf on a nonblocking socket; false on error or shutdown.
bool send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = { fd, POLLOUT, 0 };
			if (stopping)
				return false;
			poll(&p, 1, 100);
			continue;
		}
		return false;
	}
	return true;
}

void fmt_addr(const struct sockaddr_storage *ss, char *out, size_t n)
{
	char h[INET6_ADDRSTRLEN + 8] = "?";
	int port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		getnameinfo((const void *)a, sizeof *a, h, sizeof h, NULL, 0, NI_NUMERICHOST);
		port = ntohs(a->sin_port);
		snprintf(out, n, "%s:%d", h, port);
	} else {
		const struct sockaddr_in6 *a = (const void *)ss;
		getnameinfo((const void *)a, sizeof *a, h, sizeof h, NULL, 0, NI_NUMERICHOST);
		port = ntohs(a->sin6_port);
		snprintf(out, n, "[%s]:%d", h, port);
	}
}

// ---------------------------------------------------------------- listeners
int lfds[MAX_LISTEN];

void open_listeners(void)
{
	FILE *pf = NULL;
	if (opt.port_file && !(pf = fopen(opt.port_file, "w")))
		die("cannot write %s: %s", opt.port_file, strerror(errno));
	for (int i = 0; i < opt.nlisten; i++) {
		struct sockaddr_storage ss;
		socklen_t len;
		if (parse_hostport(opt.listen[i], HOSTPORT_LISTEN, &ss, &len))
			die("bad --listen address '%s' (want ADDR:PORT or [V6ADDR]:PORT)",
			    opt.listen[i]);
		int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket: %s", strerror(errno));
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (ss.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
		if (bind(fd, (struct sockaddr *)&ss, len) < 0)
			die("bind %s: %s", opt.listen[i], strerror(errno));
		if (listen(fd, opt.backlog) < 0)
			die("listen %s: %s", opt.listen[i], strerror(errno));
		len = sizeof ss;
		getsockname(fd, (struct sockaddr *)&ss, &len);
		char name[128];
		fmt_addr(&ss, name, sizeof name);
		logmsg("listening on %s (%s, %d workers, service %.3f ms%s)", name,
		       opt.mode == MODE_HTTP ? "http" : "tcp", opt.workers, opt.service_ms,
		       opt.busy ? ", busy" : "");
		if (pf)
			fprintf(pf, "%d\n", ntohs(ss.ss_family == AF_INET
							  ? ((struct sockaddr_in *)&ss)->sin_port
							  : ((struct sockaddr_in6 *)&ss)->sin6_port));
		lfds[i] = fd;
	}
	if (pf)
		fclose(pf);
}

void conn_opened(void)
{
	INC(st.conns);
	raise_max(&st.max_conns_open, INC(st.conns_open));
}

void conn_closed(void)
{
	DEC(st.conns_open);
	INC(st.conns_closed);
}

void count_status(int code)
{
	INC(st.requests);
	if (code >= 200 && code < 300)
		INC(st.r2xx);
	else if (code >= 400 && code < 500)
		INC(st.r4xx);
	else if (code >= 500)
		INC(st.r5xx);
}

// ---------------------------------------------------------------- tcp mode
void tcp_serve(int fd)
{
	char *buf = malloc(MAX_LINE);
	size_t len = 0;
	int64_t hold = LOAD(rt_hold_us);
	int64_t deadline = hold > 0 ? now_us() + hold : INT64_MAX;
	bool open = buf != NULL;
	while (open && !stopping) {
		int64_t left = deadline - now_us();
		if (left <= 0)
			break;
		struct pollfd p = { fd, POLLIN, 0 };
		int r = poll(&p, 1, left > 100000 ? 100 : (int)((left + 999) / 1000));
		if (r <= 0)
			continue;
		ssize_t n = recv(fd, buf + len, MAX_LINE - len, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		char *nl;
		while (open && (nl = memchr(buf, '\n', len))) {
			size_t used = (size_t)(nl - buf) + 1;
			bool fail = should_fail();
			if (!do_work(LOAD(rt_service_us))) {
				open = false;
				break;
			}
			if (!send_all(fd, fail ? "err\n" : "ok\n", fail ? 4 : 3))
				open = false;
			count_status(fail ? 500 : 200);
			memmove(buf, buf + used, len - used);
			len -= used;
		}
		if (len == MAX_LINE)
			break; // a line too long: drop the connection
	}
	free(buf);
	close(fd);
	conn_closed();
}

void *tcp_worker(void *arg)
{
	(void)arg;
	struct pollfd p[MAX_LISTEN];
	for (int i = 0; i < opt.nlisten; i++)
		p[i] = (struct pollfd){ lfds[i], POLLIN, 0 };
	while (!stopping) {
		if (poll(p, (nfds_t)opt.nlisten, 100) <= 0)
			continue;
		for (int i = 0; i < opt.nlisten && !stopping; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			int fd = accept4(lfds[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0)
				continue; // another worker took it
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			conn_opened();
			raise_max(&st.max_busy, INC(st.busy));
			tcp_serve(fd);
			DEC(st.busy);
			break; // back to poll: fairness between listeners and workers
		}
	}
	return NULL;
}

// ---------------------------------------------------------------- main
static void usage(FILE *f)
{
	fprintf(f,
		"usage: testserver --listen ADDR:PORT [--listen ...] [options]\n"
		"  --listen ADDR:PORT     address to listen on (repeatable; [V6]:PORT; port 0 = any)\n"
		"  --workers N            worker threads (default 4)\n"
		"  --service-ms MS        work per request / line (default 10; fractions allowed)\n"
		"  --mode http|tcp        per-request HTTP/1.1 keep-alive, or per-connection lines\n"
		"  --busy                 spin the CPU for the service time instead of sleeping\n"
		"  --worker-reads         http: a free worker reads the request (it waits in the\n"
		"                         socket while all are busy), not the I/O thread\n"
		"  --slow-ms MS           service time of paths starting with /slow (default 10x)\n"
		"  --fail-rate P          answer 500 (tcp: \"err\") with probability P (default 0)\n"
		"  --hold-ms MS           tcp: close each connection MS after accept (0 = never)\n"
		"  --backlog N            listen backlog (default 1024)\n"
		"  --mode-file PATH       re-read every 100 ms: service_ms= slow_ms= fail_rate=\n"
		"                         hold_ms= busy= (missing file = command-line values)\n"
		"  --stats-file PATH      write the JSON stats there every --stats-interval-ms\n"
		"  --stats-interval-ms N  default 1000\n"
		"  --port-file PATH       write the bound port(s), one a line (useful with port 0)\n"
		"  --quiet                no log lines on stderr\n"
		"SIGUSR1 cycles normal -> slow -> failing -> normal. SIGTERM/SIGINT: print stats\n"
		"JSON on stdout and exit 0. HTTP paths: /slow*, /status/NNN.\n");
}

// Reads the command line into opt. Exits 2 on bad usage, 0 after --help.
static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool has = i + 1 < argc;
		if (!strcmp(a, "--listen")) {
			if (opt.nlisten == MAX_LISTEN)
				die("too many --listen (max %d)", MAX_LISTEN);
			opt.listen[opt.nlisten++] = ARG();
		} else if (!strcmp(a, "--workers"))
			opt.workers = (int)num_arg(a, ARG(), 1, 4096);
		else if (!strcmp(a, "--service-ms"))
			opt.service_ms = num_arg(a, ARG(), 0, 3600e3);
		else if (!strcmp(a, "--slow-ms"))
			opt.slow_ms = num_arg(a, ARG(), 0, 3600e3);
		else if (!strcmp(a, "--hold-ms"))
			opt.hold_ms = num_arg(a, ARG(), 0, 86400e3);
		else if (!strcmp(a, "--fail-rate"))
			opt.fail_rate = num_arg(a, ARG(), 0, 1);
		else if (!strcmp(a, "--backlog"))
			opt.backlog = (int)num_arg(a, ARG(), 1, 1 << 20);
		else if (!strcmp(a, "--busy"))
			opt.busy = 1;
		else if (!strcmp(a, "--worker-reads"))
			opt.worker_reads = 1;
		else if (!strcmp(a, "--mode")) {
			const char *m = ARG();
			if (!strcmp(m, "http"))
				opt.mode = MODE_HTTP;
			else if (!strcmp(m, "tcp"))
				opt.mode = MODE_TCP;
			else
				die("bad --mode '%s' (http|tcp)", m);
		} else if (!strcmp(a, "--mode-file"))
			opt.mode_file = ARG();
		else if (!strcmp(a, "--stats-file"))
			opt.stats_file = ARG();
		else if (!strcmp(a, "--stats-interval-ms"))
			opt.stats_interval_ms = (int)num_arg(a, ARG(), 100, 3600e3);
		else if (!strcmp(a, "--port-file"))
			opt.port_file = ARG();
		else if (!strcmp(a, "--quiet"))
			opt.quiet = 1;
		else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else {
			usage(stderr);
			die("unknown argument '%s'", a);
		}
#undef ARG
	}
	if (!opt.nlisten) {
		usage(stderr);
		die("--listen is required");
	}
}

// Starts the I/O thread (http) and the workers; returns the threads to join.
static pthread_t *start_threads(int *n_threads)
{
	pthread_t *th = calloc((size_t)opt.workers + 1, sizeof *th);
	if (!th)
		die("out of memory");
	int nth = 0;
	if (opt.mode == MODE_HTTP) {
		epfd = epoll_create1(EPOLL_CLOEXEC);
		wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (epfd < 0 || wakefd < 0)
			die("epoll/eventfd: %s", strerror(errno));
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &wakefd };
		epoll_ctl(epfd, EPOLL_CTL_ADD, wakefd, &ev);
		for (int i = 0; i < opt.nlisten; i++) {
			ev = (struct epoll_event){ .events = EPOLLIN, .data.ptr = &lfd_marker[i] };
			epoll_ctl(epfd, EPOLL_CTL_ADD, lfds[i], &ev);
		}
		if (pthread_create(&th[nth++], NULL, http_io, NULL))
			die("pthread_create failed");
	}
	for (int i = 0; i < opt.workers; i++)
		if (pthread_create(&th[nth++], NULL, opt.mode == MODE_HTTP ? http_worker : tcp_worker,
				   NULL))
			die("pthread_create failed");
	*n_threads = nth;
	return th;
}

// Serves until SIGTERM or SIGINT: SIGUSR1 cycles the override mode, the mode file is polled
// and the stats file rewritten every --stats-interval-ms.
static void serve_until_signalled(const sigset_t *set)
{
	double next_stats = now_s() + opt.stats_interval_ms / 1000.0;
	write_stats_file();
	for (;;) {
		struct timespec to = { 0, 100 * 1000 * 1000 };
		int sig = sigtimedwait(set, NULL, &to);
		if (sig == SIGTERM || sig == SIGINT)
			break;
		if (sig == SIGUSR1) {
			STORE(sig_override, (LOAD(sig_override) + 1) % 3);
			logmsg("SIGUSR1: %s", (const char *[]){ "normal", "slow", "failing" }
						      [LOAD(sig_override)]);
		}
		poll_mode_file();
		if (opt.stats_file && now_s() >= next_stats) {
			write_stats_file();
			next_stats = now_s() + opt.stats_interval_ms / 1000.0;
		}
	}
}

// Stops accepting, wakes and joins everyone (sleeps are sliced: < 1 s total).
static void shutdown_threads(pthread_t *th, int nth)
{
	STORE(stopping_flag, 1);
	for (int i = 0; i < opt.nlisten; i++)
		close(lfds[i]);
	if (opt.mode == MODE_HTTP) {
		uint64_t one = 1;
		if (write(wakefd, &one, sizeof one) < 0) {
		}
		pthread_mutex_lock(&q_mu);
		pthread_cond_broadcast(&q_cv);
		pthread_mutex_unlock(&q_mu);
	}
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	free(th);
	if (opt.mode == MODE_HTTP) {
		while (all_head)
			conn_free(all_head);
		close(epfd);
		close(wakefd);
	}
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	clock_gettime(CLOCK_MONOTONIC, &t_start);

	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	// Signals are taken synchronously by the main thread; workers never see them.
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	poll_mode_file();
	open_listeners();

	int nth;
	pthread_t *th = start_threads(&nth);

	serve_until_signalled(&set);
	shutdown_threads(th, nth);
	char buf[1024];
	stats_json(buf, sizeof buf);
	fputs(buf, stdout);
	fflush(stdout);
	write_stats_file();
	return 0;
}
