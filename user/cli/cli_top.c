// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl top [--interval S] [--iterations N]: a live view of the pinned maps.
 *
 * Every interval (default 1 s) it reads a status snapshot and redraws: per service and class
 * the arrival and admission rates (deltas between two refreshes), admitted %, p99 (from the
 * histogram delta of the interval when it has samples, else the cumulative one, marked '*'),
 * in-flight, limit, breaker state; the active switches (STATE_DIR/switches.json); the
 * controller's heartbeat; alerts. The screen is cleared with ANSI codes only when stdout is a
 * terminal; when stdin is a terminal it is put in non-canonical, no-echo mode (restored on
 * exit) so 'q' quits without Enter. Ctrl-C / SIGTERM quit too.
 * Exit codes: 0 ok (quit or --iterations done), 1 nothing attached / read error, 2 bad usage. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/log.h"
#include "kernel/bpfmaps.h"
#include "common/duration.h"
#include "common/names.h"
#include "common/yamldoc.h"
#include "control/signals.h"
#include "kernel/status.h"
#include "ops/switches.h"
#include "ops/switchstate.h"

static volatile sig_atomic_t top_stop;
static struct termios top_saved_tio;
static int top_tio_saved;

static void top_on_signal(int sig)
{
	(void)sig;
	top_stop = 1;
}

static void top_restore_tty(void)
{
	if (top_tio_saved) {
		tcsetattr(STDIN_FILENO, TCSANOW, &top_saved_tio);
		top_tio_saved = 0;
	}
}


static const struct service_status *find_prev(const struct status_snapshot *p,
					      const struct service_status *s)
{
	if (!p)
		return NULL;
	for (int i = 0; i < p->n; i++)
		if (p->s[i].idx == s->idx && !strcmp(p->s[i].svc.name, s->svc.name))
			return &p->s[i];
	return NULL;
}

static unsigned long long dlt(unsigned long long cur, unsigned long long prev)
{
	return cur >= prev ? cur - prev : 0; /* counters reset (re-attach): treat as no change */
}

static void fmt_us(double us, char *buf, size_t len)
{
	if (us <= 0)
		snprintf(buf, len, "-");
	else if (us < 1000)
		snprintf(buf, len, "%.0fus", us);
	else if (us < 1e6)
		snprintf(buf, len, "%.1fms", us / 1000);
	else
		snprintf(buf, len, "%.2fs", us / 1e6);
}

static void draw(FILE *f, const struct cli_opts *o, const struct status_snapshot *cur,
		 const struct status_snapshot *prev, double dt, const struct sw_set *sws,
		 const char *sw_err, double interval)
{
	char iso[SLUICE_ISO_LEN], alerts[16][256];
	time_t now = time(NULL);
	int na = 0;

	fprintf(f, "sluice top  %s  pins %s  refresh %.1fs  (q to quit)\n",
		time_format_iso((uint64_t)now, iso, sizeof(iso)), o->pin_dir, interval);
	if (cur->heartbeat_age_s < 0)
		fprintf(f, "controller: NEVER RAN (no heartbeat)\n");
	else
		fprintf(f, "controller: %s, heartbeat %.1fs ago\n",
			cur->controller_alive ? "alive" : "SILENT", cur->heartbeat_age_s);
	if (!cur->controller_alive && na < 16)
		snprintf(alerts[na++], sizeof(alerts[0]), "controller silent: the data path is "
			 "failing open (admitting everything)");
	if (prev && dt > 0 && cur->pkt.reply_failed > prev->pkt.reply_failed && na < 16)
		snprintf(alerts[na++], sizeof(alerts[0]), "%llu http rejections could not be "
			 "answered (admitted instead)",
			 dlt(cur->pkt.reply_failed, prev->pkt.reply_failed));
	if (prev && dt > 0 && cur->pkt.malformed > prev->pkt.malformed && na < 16)
		snprintf(alerts[na++], sizeof(alerts[0]), "%.0f malformed packets/s (passed)",
			 dlt(cur->pkt.malformed, prev->pkt.malformed) / dt);

	fprintf(f, "\n%-14s %-5s %9s %9s %7s %9s %9s %9s %6s\n", "SERVICE", "CLASS", "arrive/s",
		"admit/s", "admit%", "p99", "in-flight", "threshold", "shed%");
	for (int i = 0; i < cur->n; i++) {
		const struct service_status *s = &cur->s[i];
		const struct service_status *ps = prev && dt > 0 ? find_prev(prev, s) : NULL;
		unsigned long long retr = 0, arr = 0, fo = 0, untr = 0;

		fprintf(f, "%-14s %s/%u  limit %u  in-flight %lld  breaker %s", s->svc.name,
			protocol_name(s->svc.protocol), s->svc.port, s->v.limit, s->in_flight,
			breaker_name((int)s->v.breaker_state));
		if (s->v.breaker_state == SLUICE_BREAKER_HALF_OPEN)
			fprintf(f, " (admit %.0f%%)", 100.0 * sluice_prob_complement(s->v.breaker_shed) / SLUICE_PROB_ONE);
		fprintf(f, "\n");
		if (s->v.breaker_state == SLUICE_BREAKER_OPEN && na < 16)
			snprintf(alerts[na++], sizeof(alerts[0]), "%s: breaker OPEN", s->svc.name);
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			const struct class_status *cs = &s->cls[c];
			char rate_a[16] = "-", rate_ad[16] = "-", pct[16] = "-", p99[24];
			double p99_us = cs->p99_us;
			int cumulative = 1;

			if (ps) {
				const struct class_status *pc = &ps->cls[c];
				unsigned long long da = dlt(cs->st.arrivals, pc->st.arrivals);
				unsigned long long dad = dlt(cs->st.admitted, pc->st.admitted);
				struct sluice_hist dh;

				snprintf(rate_a, sizeof(rate_a), "%.1f", da / dt);
				snprintf(rate_ad, sizeof(rate_ad), "%.1f", dad / dt);
				if (da)
					snprintf(pct, sizeof(pct), "%.1f%%", 100.0 * dad / da);
				sluice_hist_delta(&pc->hist, &cs->hist, &dh);
				if (sluice_hist_count(&dh) > 0) {
					p99_us = sluice_hist_quantile_us(&dh, 0.99);
					cumulative = 0;
				}
				arr += da;
				retr += dlt(cs->st.retransmits, pc->st.retransmits);
				fo += dlt(cs->st.fail_open, pc->st.fail_open);
				untr += dlt(cs->st.untracked, pc->st.untracked);
			} else if (cs->st.arrivals) {
				snprintf(pct, sizeof(pct), "%.1f%%",
					 100.0 * cs->st.admitted / cs->st.arrivals);
			}
			fmt_us(p99_us, p99, sizeof(p99));
			if (cumulative && p99_us > 0)
				strncat(p99, "*", sizeof(p99) - strlen(p99) - 1);
			fprintf(f, "%-14s %-5s %9s %9s %7s %9s %9lld %9u %5.0f%%\n", "", sluice_class_name(c),
				rate_a, rate_ad, pct, p99, cs->in_flight, cs->threshold,
				100.0 * (1 - cs->switch_admit));
		}
		if (arr >= 20 && retr * 5 > arr && na < 16)
			snprintf(alerts[na++], sizeof(alerts[0]), "%s: retry storm: %.0f%% of arrivals "
				 "are retransmits/re-sent requests", s->svc.name, 100.0 * retr / arr);
		if (fo && na < 16)
			snprintf(alerts[na++], sizeof(alerts[0]), "%s: %llu units admitted fail-open",
				 s->svc.name, fo);
		if (untr && na < 16)
			snprintf(alerts[na++], sizeof(alerts[0]), "%s: flow table full: %llu units "
				 "admitted untracked", s->svc.name, untr);
	}
	if (!cur->n)
		fprintf(f, "(no services configured)\n");
	fprintf(f, "  rates are per second over the last refresh; p99 marked * is cumulative since "
		"attach (no samples in the interval)\n");

	fprintf(f, "\nswitches:");
	if (sw_err && sw_err[0]) {
		fprintf(f, " (switch file damaged: none in force)\n");
		if (na < 16)
			snprintf(alerts[na++], sizeof(alerts[0]), "%.250s", sw_err);
	} else if (!sws->n) {
		fprintf(f, " none (all traffic normal)\n");
	} else {
		fprintf(f, "\n");
		for (int i = 0; i < sws->n; i++) {
			const struct sw_switch *sw = &sws->sw[i];
			char left[24];

			if (sw->expires_at > (uint64_t)now)
				duration_format(sw->expires_at - (uint64_t)now, left, sizeof(left));
			else
				snprintf(left, sizeof(left), "EXPIRED");
			fprintf(f, "  %-14s %s shed %3d%%  %-10s left  owner %-12s %s\n", sw->service,
				sw_class_str(sw->class), sw->shed_pct, left, sw->owner, sw->reason);
		}
	}
	fprintf(f, "\nalerts:%s\n", na ? "" : " none");
	for (int i = 0; i < na; i++)
		fprintf(f, "  ! %s\n", alerts[i]);
}

/* Signals end the loop; a terminal on stdin is read key by key (q quits) without echo. */
static void top_setup_terminal(int tty_in)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = top_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (tty_in && tcgetattr(STDIN_FILENO, &top_saved_tio) == 0) {
		struct termios t = top_saved_tio;

		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 0;
		t.c_cc[VTIME] = 0;
		if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0) {
			top_tio_saved = 1;
			atexit(top_restore_tty);
		}
	}
}

/* Waits for the next refresh, or a key. */
static void top_wait(double interval, int tty_in)
{
	struct timespec t0, t1;
	double waited = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!top_stop && waited < interval) {
		double left = interval - waited;
		struct timeval tv = { (time_t)left, (suseconds_t)((left - floor(left)) * 1e6) };
		fd_set fds;
		int r;

		FD_ZERO(&fds);
		if (tty_in)
			FD_SET(STDIN_FILENO, &fds);
		r = select(tty_in ? STDIN_FILENO + 1 : 0, &fds, NULL, NULL, &tv);
		if (r > 0 && FD_ISSET(STDIN_FILENO, &fds)) {
			char ch;
			if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
				top_stop = 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	}
}

struct top_args {
	const char *interval, *iterations;
};

static const struct cliopt top_opts[] = {
	CLIOPT_STR(struct top_args, interval, "interval", "SECONDS", 0,
		   "time between refreshes, 0.1..3600 (default 1)"),
	CLIOPT_STR(struct top_args, iterations, "iterations", "N", 0,
		   "draw N frames and exit (for scripts)"),
	CLIOPT_TABLE_END,
};

/* --interval and --iterations as numbers, plain decimals as in the config (strtod takes hex,
 * leading blanks and nan); 0, or -1 after an error naming the bad value. */
static int top_numbers(const struct top_args *a, double *interval, long *iterations)
{
	long long n;

	if (a->interval &&
	    (!yparse_double(a->interval, interval) || !(*interval >= 0.1 && *interval <= 3600))) {
		log_error("top: --interval must be 0.1..3600 seconds, not '%s'", a->interval);
		return -1;
	}
	if (a->iterations) {
		if (!yparse_int(a->iterations, &n) || n < 1 || n > 100000000) {
			log_error("top: --iterations must be a whole number >= 1, not '%s'",
				  a->iterations);
			return -1;
		}
		*iterations = (long)n;
	}
	return 0;
}

static int do_top(const void *args, void *ctx)
{
	struct cli_opts *o = ctx;
	static struct status_snapshot snap[2];
	static struct sw_set sws;
	struct sluice_maps m;
	double interval = 1.0;
	long iterations = 0;
	int cur = 0, have_prev = 0, tty_in = isatty(STDIN_FILENO), tty_out = isatty(STDOUT_FILENO);
	int rc = EXIT_OK, err;
	unsigned long long prev_ns = 0;

	if (top_numbers(args, &interval, &iterations))
		return EXIT_USAGE;
	if ((err = cli_open_maps(o, &m, "top")))
		return err;

	top_setup_terminal(tty_in);
	if (tty_out)
		fputs("\033[?25l", stdout); /* hide the cursor */

	for (long it = 0; !top_stop && (!iterations || it < iterations); it++) {
		char path[PATH_MAX], sw_err[512] = "";
		struct status_snapshot *s = &snap[cur], *p = have_prev ? &snap[cur ^ 1] : NULL;
		double dt;
		char *frame = NULL;
		size_t flen = 0;
		FILE *mf;

		if (status_collect(&m, s, 0)) {
			log_error("top: cannot read the maps at %s (detached?)",
				o->pin_dir);
			rc = EXIT_RUNTIME;
			break;
		}
		dt = prev_ns ? (double)(s->now_ns - prev_ns) / 1e9 : 0;
		if (state_path(path, sizeof(path), o->state_dir, SW_FILE_NAME) ||
		    sw_load(path, &sws, sw_err, sizeof(sw_err)))
			sw_set_init(&sws);
		mf = open_memstream(&frame, &flen);
		if (!mf) {
			rc = EXIT_RUNTIME;
			break;
		}
		draw(mf, o, s, p, dt, &sws, sw_err, interval);
		fclose(mf);
		if (tty_out)
			fputs("\033[H\033[2J", stdout);
		else if (it)
			fputs("\n", stdout);
		fwrite(frame, 1, flen, stdout);
		fflush(stdout);
		free(frame);
		prev_ns = s->now_ns;
		have_prev = 1;
		cur ^= 1;
		if (iterations && it + 1 >= iterations)
			break;

		top_wait(interval, tty_in);
	}
	if (tty_out)
		fputs("\033[?25h", stdout);
	fflush(stdout);
	top_restore_tty();
	maps_close(&m);
	return rc;
}

const struct clicmd cli_cmd_top = {
	.name = "top",
	.summary = "live view of rates, p99, in-flight, switches, alerts",
	.opts = top_opts,
	.args_size = sizeof(struct top_args),
	.notes = "q or Ctrl-C quits.\n"
		 "exit codes: 0 ok (quit or --iterations done), 1 nothing attached or a read error",
	.example = "sluicectl top --interval 0.5",
	.run = do_top,
};
