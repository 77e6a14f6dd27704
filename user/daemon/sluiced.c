// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluiced: the node agent. Attaches the data path, runs the controllers every tick, serves
 * /metrics, prints one JSON line per event on stdout. SIGHUP or a change of the config file
 * reloads it; SIGTERM/SIGINT stop the process and leave the pinned data path in place. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/cfgwatch.h"
#include "daemon/cmdline.h"
#include "daemon/daemon.h"
#include "daemon/logstream.h"
#include "daemon/opserver.h"
#include "daemon/procsig.h"
#include "ops/opproto.h"
#include "daemon/ctlpersist.h"
#include "kernel/attach.h"
#include "kernel/ifaces.h"
#include "kernel/bpflog.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/config_warn.h"

static int check_config(const char *path)
{
	static struct sluice_config cfg;
	struct doc_errors errs;
	char ifs[SLUICE_MAX_IFSPECS * (IF_NAMESIZE + 2)];

	if (sluice_config_load(path, &cfg, &errs) != 0) {
		doc_errors_print(stderr, &errs);
		log_error("%s: invalid (%d error%s)", path, errs.total, errs.total == 1 ? "" : "s");
		return 2;
	}
	{
		struct doc_errors warns;
		int nw = config_warnings(&cfg, &warns);
		for (int i = 0; i < warns.n; i++)
			if (warns.e[i].line > 0)
				fprintf(stderr, "%s:%d: warning: %s\n", path, warns.e[i].line,
					warns.e[i].msg);
			else      /* a node-wide warning: no line to name */
				fprintf(stderr, "%s: warning: %s\n", path, warns.e[i].msg);
		if (nw > warns.n)
			fprintf(stderr, "%s: %d more warnings\n", path, nw - warns.n);
	}
	printf("%s: ok (%d service%s, interface%s %s)\n", path, cfg.n_services,
	       cfg.n_services == 1 ? "" : "s", cfg.n_ifspecs == 1 ? "" : "s",
	       sluice_config_ifaces(&cfg, ifs, sizeof(ifs)));
	return 0;
}

/* Generic XDP works but runs after the kernel has built an skb for every packet: the flood
 * protection XDP is there for is mostly gone. Say so loudly for each interface (log, alert
 * event; the sluice_xdp_mode metric and `sluicectl status` keep showing it). Asks the kernel,
 * so an adopted link is judged by what it really is. */
static void warn_generic_xdp(struct daemon *d, const struct attached_iface *a)
{
	const char *mode = attach_xdp_mode(a->ifindex, 0);
	char why[256];

	if (!mode || strcmp(mode, "generic"))
		return;
	if (d->cfg.xdp_mode == XDP_MODE_GENERIC) {
		log_warn("generic XDP on %s, as configured (xdp_mode: generic): every packet costs "
			 "an skb before sluice sees it", a->name);
		return;
	}
	snprintf(why, sizeof(why), "FELL BACK TO GENERIC XDP on %s: the driver refused native "
			 "XDP%s%s; every packet costs an skb before sluice sees it", a->name,
			 a->xdp_native_errno ? ": " : "",
			 a->xdp_native_errno ? strerror(a->xdp_native_errno) : "");
	log_warn("%s", why);
	daemon_event(d, SLUICE_EVM_DAEMON, "native", "generic", why, a->name, SLUICE_EV_ALERT);
}

/* What is worth knowing about an interface just attached: generic XDP, refused SYNs answered
 * from TC. */
static void announce_iface(struct daemon *d, const struct attached_iface *a)
{
	warn_generic_xdp(d, a);
	if (a->rst_at_tc)
		log_info("%s strips VLAN tags on receive and has upper devices: refused SYNs are "
			 "answered from TC, where the tag is known", a->name);
}

/* Interfaces: a link or default route that matters changed (or the slow safety rescan is
 * due): attach to what the config selects now and is not attached yet (hot-plug). One
 * resolve costs 19 us with one link, 2.9 ms with a thousand (a node with a veth per pod):
 * the link and route messages are filtered first, so pod churn costs no resolve unless a
 * pattern selects the pods' links. */
#define IFACE_RESCAN_NS (30 * 1000000000ull)

static void rescan_interfaces(struct daemon *d, struct attach_state *at)
{
	int before[SLUICE_MAX_IFACES], n_before = at->n_ifaces, rc;
	char err[512] = "";

	for (int i = 0; i < n_before; i++)
		before[i] = at->ifaces[i].ifindex;
	rc = attach_config(at, d->cfg.pin_dir, (const char (*)[IF_NAMESIZE])d->cfg.ifspecs,
			   d->cfg.n_ifspecs, d->cfg.xdp_mode, 0, err, sizeof(err));
	if (rc < 0) {
		log_warn("%s", err);
		daemon_event(d, SLUICE_EVM_DAEMON, "attached", "attached", err, "", SLUICE_EV_ALERT);
	}
	for (int i = 0; i < at->n_ifaces; i++) {
		int known = 0;

		for (int j = 0; j < n_before; j++)
			known |= before[j] == at->ifaces[i].ifindex;
		if (known)
			continue;
		log_info("attached to %s (xdp %s)", at->ifaces[i].name, at->ifaces[i].xdp_mode);
		announce_iface(d, &at->ifaces[i]);
		daemon_event(d, SLUICE_EVM_DAEMON, "attached", "attached",
			     "an interface that matches the config appeared", at->ifaces[i].name,
			     SLUICE_EV_INFO);
	}
}

/* The control loop: a tick every control_interval_ms; SIGHUP forces a reload, a change of
 * the config file (daemon/cfgwatch.h) asks for one (applied at the first tick after the file
 * settled); SIGTERM/SIGINT end it. */
static void run_loop(struct daemon *d, int sfd, struct cfgwatch *cw, struct opserver *ops,
		     struct attach_state *at, int wfd)
{
	/* The first tick looks at the config once: an edit made after it was read and before
	 * its directory was watched (while the programs loaded, or while another sluiced held
	 * the pins) is applied then; an unchanged file costs a read and a compare. */
	int running = 1, reload_pending = 1, links_changed = 0, applied;
	unsigned long long next_rescan = monotonic_ns() + IFACE_RESCAN_NS;
	unsigned long long interval = (unsigned long long)d->cfg.control_interval_ms * 1000000ull;
	unsigned long long next = monotonic_ns();

	while (running) {
		unsigned long long now = monotonic_ns();
		struct pollfd pfd[3 + 1 + OPS_MAX_CONNS] = { { .fd = sfd, .events = POLLIN },
							     { .fd = cw->fd, .events = POLLIN },
							     { .fd = wfd, .events = POLLIN } };
		/* rounded up: a timeout of 0 for the last fraction of a millisecond would spin */
		int timeout = next > now ? (int)((next - now + 999999) / 1000000) : 0;
		int nfd = 3 + ops_pollfds(ops, pfd + 3, 1 + OPS_MAX_CONNS);

		if (poll(pfd, (nfds_t)nfd, timeout) > 0) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGHUP)
					reload_pending = 2; /* forced */
				else
					running = 0;
			}
			if (pfd[1].revents & POLLIN)
				cfgwatch_events(cw, monotonic_ns());
			if (wfd >= 0 && (pfd[2].revents & POLLIN) &&
			    ifaces_watch_drain(wfd, (const char (*)[IF_NAMESIZE])d->cfg.ifspecs,
					       d->cfg.n_ifspecs))
				links_changed = 1;
			if (nfd > 3)
				ops_handle(ops, d, monotonic_ns());
		}
		now = monotonic_ns();
		if (now < next)
			continue;
		/* At a tick, so a burst of link messages costs one rescan. */
		if (links_changed || now >= next_rescan) {
			rescan_interfaces(d, at);
			links_changed = 0;
			next_rescan = now + IFACE_RESCAN_NS;
		}
		/* what no watch sees (a symlinked directory in the path swapped), within a second;
		 * either read once the file has been left alone (not mid-write) */
		cfgwatch_look(cw, now);
		if (cfgwatch_due(cw, now) && !reload_pending)
			reload_pending = 1;
		/* the parse runs beside the ticks (a big config takes seconds); one at a time, a
		 * request made meanwhile waits for it */
		applied = daemon_reload_finish(d, now);
		if (applied) /* the heartbeats it wrote are newer than now: the tick's must not be older */
			now = monotonic_ns();
		if (applied > 0)
			interval = (unsigned long long)d->cfg.control_interval_ms * 1000000ull;
		if (reload_pending && !daemon_reload_busy(d)) {
			daemon_reload_start(d, reload_pending == 2, now);
			/* SIGHUP: the group database may have changed (looked up by the
			 * names' thread: the ticks do not wait for it) */
			if (reload_pending == 2)
				uidn_refresh(&d->names, d->cfg.switch_group);
			reload_pending = 0;
			interval = (unsigned long long)d->cfg.control_interval_ms * 1000000ull;
		}
		daemon_tick(d, now);
		ops_after_tick(ops, d, monotonic_ns());
		next += interval;
		if (next < now)
			next = now + interval; /* fell behind (suspend, stall): don't burst */
	}
}

/* "eth0, eth1" */
static void attached_names(const struct attach_state *at, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (int i = 0; i < at->n_ifaces && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
					 at->ifaces[i].name);
}

/* 1 (said) when --pin-dir or --run-dir is relative: sluiced publishes them for sluicectl,
 * which resolves them from its own working directory, another place. */
static int relative_dir_given(const struct sluiced_args *a)
{
	const struct { const char *v, *name; } opt[] = {
		{ a->pin_dir, "--pin-dir" }, { a->run_dir, "--run-dir" },
	};

	for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
		if (opt[i].v && opt[i].v[0] != '/') {
			log_error("%s %s: must be an absolute path (sluicectl, run from another "
				  "directory, would look elsewhere)", opt[i].name, opt[i].v);
			return 1;
		}
	return 0;
}

int main(int argc, char **argv)
{
	static struct daemon d;
	static struct opserver ops = { .lfd = -1 };
	struct opp_record rec = { 0 };
	const char *run_dir;
	struct attach_state at;
	struct doc_errors errs;
	struct metrics_server *ms = NULL;
	struct sluiced_args a;
	const char *cfg_path, *pin_override;
	char err[512], ifs[SLUICE_MAX_IFACES * (IF_NAMESIZE + 2)];
	sigset_t mask;
	struct cfgwatch cw;
	int sfd, wfd, rc;

	log_init("sluiced", 0);
	rc = cliopt_parse("sluiced", &sluiced_cmd, argc - 1, argv + 1, &a, NULL, NULL);
	if (rc == CLIOPT_HELP) {
		cliopt_help(stdout, "sluiced", &sluiced_cmd, NULL, NULL);
		return 0;
	}
	if (rc != CLIOPT_OK)
		return 2;
	log_init("sluiced", a.verbose - a.quiet);
	if (relative_dir_given(&a))
		return 2;
	if (a.check)
		return check_config(a.check);
	if (!a.config) {
		log_error("--config FILE is required (or --check FILE)");
		cliopt_usage(stderr, "sluiced", &sluiced_cmd);
		return 2;
	}
	cfg_path = a.config;
	pin_override = a.pin_dir;
	/* -v also prints the debug-level events on stdout, as it always has. */
	d.verbose = log_enabled(LOG_DEBUG);
	/* Before any thread exists (the metrics server's), so the stop and reload signals reach
	 * only the signalfd of the main loop. */
	procsig_setup(&mask);
	d.events = stdout;
	/* Nor may journald behind on stderr: the messages are written as the events are. */
	rc = logstream_open(STDERR_FILENO, LOGSTREAM_BUF_BYTES);
	if (rc)
		log_warn("messages on stderr may hold up the control loop when nobody reads them: "
			 "%s", strerror(-rc));
	/* A reader of stdout that stops reading must never stop the ticks (the heartbeat would
	 * age and the data path fail open): the lines go out without blocking (evstream.h). */
	rc = daemon_events_open(&d, STDOUT_FILENO);
	if (rc)
		log_warn("events on stdout may hold up the control loop when nobody reads them: "
			 "%s", strerror(-rc));
	snprintf(d.cfg_path, sizeof(d.cfg_path), "%s", cfg_path);
	d.cfg_text = daemon_read_config(cfg_path, &d.cfg_len, &errs);
	if (!d.cfg_text || sluice_config_parse(d.cfg_text, d.cfg_len, cfg_path, &d.cfg, &errs)) {
		doc_errors_print(stderr, &errs);
		return 2;
	}
	if (pin_override) {
		snprintf(d.pin_override, sizeof(d.pin_override), "%s", pin_override);
		snprintf(d.cfg.pin_dir, sizeof(d.cfg.pin_dir), "%s", pin_override);
	}
	bpflog_route();

	/* Link and route changes from before the first resolve on are seen by the rescan. */
	wfd = ifaces_watch_open();
	if (wfd < 0)
		log_warn("no link change notifications (%s): new interfaces are found by the "
			 "rescan every %llu s", strerror(-wfd), IFACE_RESCAN_NS / 1000000000ull);
	rc = attach_load(&at, d.cfg.pin_dir, d.cfg.n_services, err, sizeof(err));
	if (rc == -EINTR) {
		/* stopped while another sluiced held the pins: nothing was touched */
		log_info("%s", err);
		return 0;
	}
	if (rc || attach_config(&at, d.cfg.pin_dir, (const char (*)[IF_NAMESIZE])d.cfg.ifspecs,
				d.cfg.n_ifspecs, d.cfg.xdp_mode, 1, err, sizeof(err)) < 0) {
		log_error("%s", err);
		attach_release(&at);
		return 1;
	}
	if (!at.n_ifaces)
		log_warn("no interface matches %s yet: attaching when one appears",
			 sluice_config_ifaces(&d.cfg, ifs, sizeof(ifs)));
	log_info("%s", at.layout.note);
	if (maps_open_pinned(d.cfg.pin_dir, &d.m)) {
		log_error("cannot open the pinned maps under %s", d.cfg.pin_dir);
		return 1;
	}
	attach_flow_handles(&at, &d.m);
	/* Now that the programs are attached and any migration has merged its counts. */
	rc = maps_fold_estimate(&d.m);
	if (rc > 0)
		log_info("in-flight estimate on (%d CPUs): a request far below its threshold reads "
			 "no other CPU's count", rc);
	else
		log_warn("the in-flight estimate stays off (%s): every admission reads every CPU's "
			 "count", rc < 0 ? "its program cannot run" : "more CPUs or service slots than it walks");
	/* The wait before the server reads: optional, beside the data path (shares its maps). */
	if (a.no_read_wait)
		log_info("the wait before the server reads is not measured (--no-read-wait)");
	else if (readwait_start(&d.rw, at.skel, err, sizeof(err)))
		log_warn("the wait before the server reads is not measured, the wait signal is off: %s",
			 err);
	else
		log_info("measuring the wait before the server reads (tracepoint "
			 "tcp_rcv_space_adjust, %d service slots)", d.rw.slots);
	if (daemon_init(&d, monotonic_ns(), err, sizeof(err))) {
		log_error("%s", err);
		return 1;
	}
	daemon_ctl_import(&d, monotonic_ns());
	if (uidn_start(&d.names, d.cfg.switch_group, err, sizeof(err)))
		log_warn("%s: audit records name operators by uid only (uidN), and only root may "
			 "change switches (switch_group is not looked up)", err);
	attached_names(&at, ifs, sizeof(ifs));
	daemon_event(&d, SLUICE_EVM_DAEMON, at.adopted ? "pinned" : "detached", "attached",
		     at.adopted ? "adopted the pinned data path" : "attached a new data path",
		     ifs, SLUICE_EV_INFO);
	log_info("attached to %s (xdp %s), %d service%s, pins under %s",
		ifs, at.n_ifaces ? at.ifaces[0].xdp_mode : "-", d.cfg.n_services,
		d.cfg.n_services == 1 ? "" : "s", d.cfg.pin_dir);
	for (int i = 0; i < at.n_ifaces; i++)
		announce_iface(&d, &at.ifaces[i]);

	ms = metrics_start(d.cfg.metrics_address, daemon_metrics_body, &d, err, sizeof(err));
	if (ms) {
		log_info("metrics on %s (port %d)", d.cfg.metrics_address,
			metrics_port(ms));
	} else {
		/* Shedding matters more than scraping: keep running, loudly. */
		log_warn("metrics disabled: %s", err);
		daemon_event(&d, SLUICE_EVM_METRICS, "off", "off", err, "", SLUICE_EV_ALERT);
	}

	/* Publish where this daemon lives, so sluicectl needs no flags, and take changes only
	 * through the socket (sluiced is the one writer of the state directory). */
	/* an empty $SLUICE_RUN_DIR is unset, as sluicectl takes it: both look in the same place */
	run_dir = a.run_dir ? a.run_dir
		: getenv("SLUICE_RUN_DIR") && getenv("SLUICE_RUN_DIR")[0] ? getenv("SLUICE_RUN_DIR")
		: OPP_DEFAULT_RUN_DIR;
	rec.pid = (long)getpid();
	snprintf(rec.config, sizeof(rec.config), "%s", cfg_path);
	if (cfg_path[0] != '/' && realpath(cfg_path, err))
		snprintf(rec.config, sizeof(rec.config), "%s", err);
	snprintf(rec.state_dir, sizeof(rec.state_dir), "%s", d.cfg.state_dir);
	snprintf(rec.pin_dir, sizeof(rec.pin_dir), "%s", d.cfg.pin_dir);
	snprintf(rec.switch_group, sizeof(rec.switch_group), "%s", d.cfg.switch_group);
	snprintf(rec.socket, sizeof(rec.socket), "%s/%s", run_dir, OPP_SOCKET_NAME);
	if (mkdir(run_dir, 0755) && errno != EEXIST)
		log_warn("cannot create %s: %s", run_dir, strerror(errno));
	if (ops_listen(&ops, rec.socket, err, sizeof(err)) ||
	    opp_record_write(run_dir, &rec, err, sizeof(err))) {
		/* The data path matters more than the operator surface: keep running, loudly. */
		log_error("operator socket disabled: %s", err);
		daemon_event(&d, SLUICE_EVM_DAEMON, "off", "off", err, "", SLUICE_EV_ALERT);
	} else {
		log_info("operator socket %s (record %s/%s)", rec.socket, run_dir, OPP_RECORD_NAME);
	}

	sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0) {
		/* With the signals still blocked and no signalfd to read them, SIGTERM would be
		 * lost and only SIGKILL would stop sluiced: give them back their default action
		 * (stop; the pinned data path stays and fails open) and lose reload-on-SIGHUP. */
		log_error("signalfd: %s; SIGTERM and SIGINT stop sluiced at once, SIGHUP is "
			  "ignored (edit the config file to reload)", strerror(errno));
		signal(SIGHUP, SIG_IGN);
		pthread_sigmask(SIG_UNBLOCK, &mask, NULL);
	}
	if (cfgwatch_open(&cw, cfg_path, monotonic_ns()) < 0)
		log_warn("cannot watch %s (%s): its changes are seen within %llu s", cfg_path,
			 strerror(errno), CFGWATCH_LOOK_NS / 1000000000ull);

	run_loop(&d, sfd, &cw, &ops, &at, wfd);
	cfgwatch_close(&cw);
	if (wfd >= 0)
		close(wfd);
	ops_close(&ops);
	opp_record_remove(run_dir, rec.pid);
	daemon_ctl_export_all(&d, monotonic_ns());
	daemon_fini(&d, 1000);
	uidn_stop(&d.names, 1000);

	if (ms)
		metrics_stop(ms);
	daemon_event(&d, SLUICE_EVM_DAEMON, "attached", "stopped",
		     "pinned data path left in place; it fails open after heartbeat_timeout_ms; "
		     "`sluicectl detach` removes it", ifs, SLUICE_EV_INFO);
	daemon_events_close(&d, 1000);    /* a reader that keeps up gets every line */
	logstream_close(1000);
	readwait_stop(&d.rw);
	maps_close(&d.m);
	attach_release(&at);
	daemon_free(&d);
	sluice_config_free(&d.cfg);
	return 0;
}
