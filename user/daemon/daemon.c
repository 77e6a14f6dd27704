// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "daemon/daemon.h"

#include <errno.h>
#include <grp.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/verdict.h"
#include "kernel/status.h"
#include "common/clock.h"
#include "common/jsonio.h"
#include "common/log.h"
#include "daemon/logstream.h"
#include "kernel/mapconfig.h"
#include "kernel/flowgc.h"
#include "kernel/replies.h"
#include "daemon/ctlpersist.h"

#define NS 1000000000ull
/* Long work over the services writes the heartbeat after every this many of them. */
#define RELOAD_BEAT_EVERY 1024
/* ... and within a tick, once the last is this old (a tick of tens of thousands of services
 * runs for seconds; one of a few never writes it twice). */
#define TICK_BEAT_NS (100 * 1000000ull)

/* The daemon reads its config as `sluiced --check` and sluicectl do (ydoc_read_file): at most
 * DOC_MAX_BYTES, and a read error (a directory, EIO) is an error rather than an empty file, so
 * it never runs, or reloads into, a file they refuse. */
char *daemon_read_config(const char *path, size_t *len, struct doc_errors *errs)
{
	char *text;

	doc_errors_init(errs, path);
	return ydoc_read_file(path, &text, len, errs) ? NULL : text;
}

/* One complete line to the events' way out. A full buffer is said once, on stderr, when it
 * starts dropping; how many it dropped is said when it drained (daemon_events_flush). */
static void put_event_line(struct daemon *d, const char *text, size_t n)
{
	if (!d->evs.on) {
		fwrite(text, 1, n, d->events);
		fflush(d->events);
		return;
	}
	if (!evstream_put(&d->evs, text, n))
		return;
	if (d->evs.broken)
		log_warn("cannot write the events to stdout (%s): dropping them from now on "
			 "(counted in sluice_events_dropped_total)", strerror(d->evs.broken));
	else
		log_warn("stdout does not take the events as fast as they come (%zu KiB waiting): "
			 "dropping them until it catches up, never holding up the control loop",
			 d->evs.len / 1024);
}

static void print_event(struct daemon *d, const struct sluice_event *ev)
{
	char stamp[32], iso[64], *text = NULL;
	struct timespec ts;
	struct tm tm;
	json_t *line, *body;
	size_t n;

	if (ev->level == SLUICE_EV_DEBUG && !d->verbose)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(iso, sizeof(iso), "%s.%03dZ", stamp, (int)(ts.tv_nsec / 1000000));
	/* The machines' JSON carries the monotonic clock; operators want wall time first. */
	line = json_pack("{s:s}", "time", iso);
	body = sluice_event_object(ev);
	if (line && body && json_object_update(line, body) == 0 &&
	    jsonio_dump_text(line, 0, &text, &n) == 0)
		put_event_line(d, text, n);
	free(text);
	json_decref(body);
	json_decref(line);
}

int daemon_events_open(struct daemon *d, int fd)
{
	return evstream_open(&d->evs, fd, EVSTREAM_BUF_BYTES);
}

void daemon_events_flush(struct daemon *d)
{
	char why[160];
	unsigned long long n;

	if (!d->evs.on || !(n = evstream_flush(&d->evs)))
		return;
	snprintf(why, sizeof(why), "%llu event%s dropped here: stdout did not take them as fast "
		 "as they came", n, n == 1 ? " was" : "s were");
	log_warn("stdout takes the events again; %s", why);
	daemon_event(d, SLUICE_EVM_DAEMON, "dropping", "writing", why, "", SLUICE_EV_ALERT);
}

void daemon_events_close(struct daemon *d, int wait_ms)
{
	size_t left;

	if (!d->evs.on)
		return;
	if (d->evs.dropping)
		log_warn("%llu events were dropped at the end: stdout did not take them",
			 d->evs.dropping);
	left = evstream_close(&d->evs, wait_ms);
	if (left)
		log_warn("%zu bytes of events not written: stdout took none for %d ms", left,
			 wait_ms);
}

void daemon_print_event(struct daemon *d, const struct sluice_event *ev)
{
	print_event(d, ev);
}

static void sink_fn(void *ctx, const struct sluice_event *ev)
{
	print_event(ctx, ev);
}

struct sluice_event_sink daemon_sink(struct daemon *d, const char *service)
{
	struct sluice_event_sink s = { .fn = sink_fn, .ctx = d, .service = service };
	return s;
}

void daemon_event(struct daemon *d, int machine, const char *from, const char *to,
		  const char *why, const char *service, int level)
{
	struct sluice_event ev;

	sluice_event_init(&ev, monotonic_ns(), level, service ? service : "", machine, from, to, why);
	print_event(d, &ev);
}

/* The heartbeat, written over the globals as read: they keep where the programs are attached
 * (ifindex, netns_ino), which `sluicectl detach` looks for. A read that fails builds on the
 * last one that did not (zeros would lose the attachment); with none, nothing is written (the
 * data path fails open when the heartbeat is old, which admits). Failing is said once. */
static void write_globals(struct daemon *d, unsigned long long now_ns)
{
	struct sluice_globals g;
	int rc = maps_read_globals(&d->m, &g);

	if (rc == 0) {
		d->globals = g;
		d->have_globals = 1;
	} else if (d->have_globals) {
		g = d->globals;
	}
	if (rc == 0 || d->have_globals) {
		int wrc;

		g.heartbeat_ns = now_ns;
		g.heartbeat_timeout_ns = (unsigned long long)d->cfg.heartbeat_timeout_ms * 1000000ull;
		wrc = maps_write_globals(&d->m, &g);
		rc = rc ? rc : wrc;
		if (!wrc) {
			d->beat_ns = now_ns;
			d->beat_real_ns = monotonic_ns();
		}
	}
	if (rc && !d->globals_failed)
		log_error("cannot read or write the heartbeat (%s): the data path admits everything "
			  "once it is older than %d ms", strerror(-rc), d->cfg.heartbeat_timeout_ms);
	else if (!rc && d->globals_failed)
		log_info("the heartbeat is read and written again");
	d->globals_failed = rc != 0;
}

/* Mid-work: the heartbeat moved on by the time passed since it was written (on the clock
 * the tick was given), once that is TICK_BEAT_NS. */
void daemon_beat_if_due(struct daemon *d)
{
	unsigned long long real = monotonic_ns();

	if (d->beat_real_ns && real - d->beat_real_ns >= TICK_BEAT_NS)
		write_globals(d, d->beat_ns + (real - d->beat_real_ns));
}

/* The same, for long work over the services that calls back between them (the tick's reads,
 * the map programming of a start or a reload): the heartbeat keeps the verdicts in force
 * rather than the data path admitting everything while the controllers wait. */
static void beat_cb(void *ctx)
{
	daemon_beat_if_due(ctx);
}

/* Does the data path enforce the verdicts in the maps now: a heartbeat written (by a previous
 * sluiced whose pins this one adopts) and not older than the timeout it was written with? As
 * the data path judges it (bpf/admit.h), a heartbeat a little ahead of now included. */
static int heartbeat_live(const struct daemon *d, unsigned long long now_ns)
{
	struct sluice_globals g;

	if (maps_read_globals(&d->m, &g) || !g.heartbeat_ns)
		return 0;
	return g.heartbeat_ns >= now_ns || now_ns - g.heartbeat_ns <= g.heartbeat_timeout_ns;
}

/* Which slots the tick reads in-flight of (http: requests; tcp reads busy). */
static void reader_wants(struct daemon *d)
{
	memset(d->rd.wants_inflight, 0, (size_t)d->rd.n_slots);
	for (int i = 0; i < d->cfg.n_services; i++)
		if (d->idx[i] < d->rd.n_slots)
			d->rd.wants_inflight[d->idx[i]] =
				d->cfg.services[i].protocol == SLUICE_PROTO_HTTP;
}

/* Per-service arrays for n services (zeroed); idx has room for the tick's hot list too. */
static int alloc_services(int n, int **idx, struct service_ctl **ctl, struct service_books **books)
{
	size_t k = (size_t)(n ? n : 1);

	*idx = calloc(2 * k, sizeof(**idx));
	*ctl = calloc(k, sizeof(**ctl));
	*books = calloc(k, sizeof(**books));
	if (*idx && *ctl && *books)
		return 0;
	free(*idx);
	free(*ctl);
	free(*books);
	return -1;
}

void daemon_free(struct daemon *d)
{
	daemon_reload_wait(d);
	free(d->idx);
	free(d->ctl);
	free(d->books);
	free(d->mx.s);
	free(d->ctl_rq);
	free(d->ctl_rq_keys);
	free(d->aq_want);
	free(d->aq_buf);
	free(d->aq_alert);
	acceptq_reader_free(&d->aqr);
	d->aq_want = NULL;
	d->aq_buf = NULL;
	d->aq_alert = NULL;
	d->ctl_rq = NULL;
	d->ctl_rq_keys = NULL;
	d->ctl_rq_n = d->ctl_rq_cap = 0;
	d->ctl_rq_listed = -1;
	d->idx = NULL;
	d->hot = NULL;
	d->ctl = NULL;
	d->books = NULL;
	d->mx.s = NULL;
	maps_reader_free(&d->rd);
	maps_batch_free(&d->vwb);
	maps_batch_free(&d->cwb);
	recon_free(&d->recon);
	daemon_node_close(d);
}

static void take_switch_news(struct daemon *d);

int daemon_init(struct daemon *d, unsigned long long now_ns, char *err, size_t errlen)
{
	struct group *gr = d->cfg.switch_group[0] ? getgrnam(d->cfg.switch_group) : NULL;
	char werr[256];
	int rc;

	if (d->cfg.n_services > d->m.n_slots) {
		snprintf(err, errlen, "the config has %d services, the maps hold %d", d->cfg.n_services,
			 d->m.n_slots);
		return -1;
	}
	if (alloc_services(d->cfg.n_services, &d->idx, &d->ctl, &d->books) ||
	    !(d->hot = d->idx + d->cfg.n_services) ||
	    maps_reader_init(&d->rd, &d->m) ||
	    maps_batch_init(&d->vwb, d->m.verdicts, sizeof(struct sluice_verdict), 1024) ||
	    maps_batch_init(&d->cwb, d->m.ctl_state, sizeof(struct sluice_ctl_slot), 128) ||
	    (d->m.own_ops >= 0 && recon_init(&d->recon, d->m.n_slots))) {
		snprintf(err, errlen, "out of memory for %d services", d->cfg.n_services);
		return -1;
	}
	d->rd.beat = beat_cb;
	d->rd.beat_ctx = d;
	/* A restart that adopts a live data path: what the maps hold is the previous sluiced's
	 * last good state, and programming and adopting tens of thousands of services takes
	 * seconds, after which the first tick decides again. The heartbeat is kept fresh
	 * meanwhile (every RELOAD_BEAT_EVERY services, as a reload's), so those verdicts stay in
	 * force rather than the data path admitting everything. A first start (no heartbeat
	 * ever) or one after the data path failed open has no decision in force to keep: the
	 * heartbeat waits for the end of the setup, as it did. */
	if (heartbeat_live(d, now_ns))
		write_globals(d, now_ns);
	if (maps_assign_indices(&d->m, &d->cfg, d->idx)) {
		snprintf(err, errlen, "no free service slot in the maps (%d slots)", d->m.n_slots);
		return -1;
	}
	if ((rc = maps_program_services_beat(&d->m, &d->cfg, d->idx, RELOAD_BEAT_EVERY,
					     beat_cb, d))) {
		snprintf(err, errlen, "cannot program service maps: %s", strerror(-rc));
		return -1;
	}
	reader_wants(d);
	sluice_cascade_params_from_conf(&d->cfg.cascade, &d->cp);
	sluice_cascade_init(&d->cascade);
	for (int i = 0; i < d->cfg.n_services; i++) {
		if (i % RELOAD_BEAT_EVERY == RELOAD_BEAT_EVERY - 1)
			daemon_beat_if_due(d);
		service_ctl_init(&d->ctl[i], &d->cfg.services[i], &d->cfg,
				 now_ns ^ (0x9e3779b97f4a7c15ull * (unsigned long long)(i + 1)), now_ns);
		memset(&d->books[i], 0, sizeof(d->books[i]));
		/* what maps_program_services wrote into its 503, so the first tick does not
		 * write it again (a syscall per service: a tenth of a second at 20,000) */
		d->books[i].retry_after_written = (unsigned)d->cfg.services[i].retry_after_s;
	}
	switch_state_init(&d->sw);
	pthread_mutex_init(&d->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&d->mx_filled, &ca);
		pthread_condattr_destroy(&ca);
	}
	daemon_node_configure(d, now_ns);
	/* kept fresh through the setup: on from the last beat, never back to the setup's start */
	write_globals(d, d->beat_real_ns ? d->beat_ns + (monotonic_ns() - d->beat_real_ns) : now_ns);
	if (state_dir_ensure(d->cfg.state_dir, werr, sizeof(werr)))
		log_warn("%s: switch changes stay in memory until it can be created", werr);
	if (iow_start(&d->iow, d->cfg.state_dir, gr ? (long)gr->gr_gid : -1, 500, werr,
		      sizeof(werr))) {
		snprintf(err, errlen, "%s", werr);
		return -1;
	}
	take_switch_news(d);
	return 0;
}

void daemon_fini(struct daemon *d, int wait_ms)
{
	daemon_reload_wait(d);
	iow_stop(&d->iow, wait_ms);
}
/* The five measures (docs/METRICS.md), kept as the daemon sees each tick. */
static void update_books(struct daemon *d, int i, const struct sluice_verdict *v,
			 double dt_s, double decay)
{
	struct service_books *b = &d->books[i];
	const struct service_ctl *s = &d->ctl[i];
	const struct sluice_class_signals *t = &s->sig.total;
	double ok = (double)t->completed - (double)t->errors - (double)t->resp_429;

	b->ew_arrivals = b->ew_arrivals * decay + (double)t->arrivals;
	b->ew_ok = b->ew_ok * decay + (ok > 0 ? ok : 0);
	b->ew_retrans = b->ew_retrans * decay + (double)t->retransmits;
	b->managed_s += dt_s;
	/* overloaded: the objective is missed, or the ladder sheds a class (the limit alone says
	 * nothing: it follows demand down in calm) */
	{
		int shed = 0;
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			shed |= v->shed_prob[c] > 0;
		b->overloaded = s->above_since_ns || shed;   /* kept for the idle ticks */
		if (b->overloaded)
			b->overload_s += dt_s;
	}

	/* Breaker: an opening whose probe found the downstream healthy (closed again without
	 * re-opening) is counted as a likely false open. */
	if (b->prev_state == SLUICE_BREAKER_CLOSED && s->brk.state == SLUICE_BREAKER_OPEN) {
		b->opens++;
		b->reopened = 0;
	}
	if (b->prev_state == SLUICE_BREAKER_HALF_OPEN && s->brk.state == SLUICE_BREAKER_OPEN)
		b->reopened = 1;
	if (b->prev_state == SLUICE_BREAKER_HALF_OPEN && s->brk.state == SLUICE_BREAKER_CLOSED &&
	    !b->reopened)
		b->false_opens++;
	b->prev_state = s->brk.state;

	/* Degradation hit rate: a switch that sheds and is seen shedding in the data path. */
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		int active = v->switch_shed[c] > 0;

		if (active && !b->sw_active[c]) {
			b->degr_actions++;
			b->sw_effective[c] = 0;
		}
		if (active && !b->sw_effective[c] && s->sig.cls[c].rejected[SLUICE_REJ_SWITCH] > 0) {
			b->degr_effective++;
			b->sw_effective[c] = 1;
		}
		b->sw_active[c] = active;
	}
}

/* Service i's listen queue as last read (none before the first reading). */
static const struct acceptq *service_aq(const struct daemon *d, int i)
{
	static const struct acceptq none;

	return d->aq_buf && d->aq_want ? &d->aq_buf[i] : &none;
}

/* The controller's side of /metrics, every row, for the scrape waiting for it (then woken). */
static void fill_metrics_extra(struct daemon *d, uint64_t wall_s)
{
	struct metrics_extra *x = &d->mx;
	/* the read gate's counts, rendered only while the wait probe runs: one batch for every
	 * slot, read before the lock */
	struct sluice_unread *unread = readwait_on(&d->rw) && d->m.n_slots > 0 ?
		calloc((size_t)d->m.n_slots, sizeof(*unread)) : NULL;

	if (unread && maps_read_unread_all(&d->m, unread)) {
		free(unread);
		unread = NULL;
	}
	pthread_mutex_lock(&d->lock);
	d->mx_asked = 0;
	d->mx_gen++;
	pthread_cond_broadcast(&d->mx_filled);
	*x = (struct metrics_extra){ .s = x->s, .cap = x->cap };
	x->cascade_suspended = d->cascade.suspended;
	x->cascade_triggers = d->cascade.triggers;
	x->config_reloads = d->reloads_ok;
	x->config_reload_failures = d->reloads_failed;
	x->events_dropped = d->evs.dropped_total;
	x->log_dropped = logstream_dropped();
	x->switch_file_error = d->switch_error_logged;
	x->node_on = d->node.on;
	x->node_pressure_pct = d->node.arb.last_pct;
	x->read_wait_probe = readwait_on(&d->rw);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		x->node_admit[c] = (double)d->node.arb.admit[c] / SLUICE_PROB_ONE;
	if (x->cap < d->cfg.n_services) {
		struct metrics_service_extra *ns = realloc(x->s, sizeof(*ns) * (size_t)d->cfg.n_services);

		if (!ns) {
			pthread_mutex_unlock(&d->lock);
			free(unread);
			return;
		}
		x->s = ns;
		x->cap = d->cfg.n_services;
	}
	x->n = d->cfg.n_services;
	for (int i = 0; i < d->cfg.n_services; i++) {
		struct metrics_service_extra *e = &x->s[i];
		const struct service_books *b = &d->books[i];
		const struct service_ctl *s = &d->ctl[i];

		memset(e, 0, sizeof(*e));      /* the rows are reused from fill to fill */
		e->idx = d->idx[i];
		e->breaker_admit = (double)sluice_breaker_admit(&s->brk, &s->bp) / SLUICE_PROB_ONE;
		e->breaker_opens = b->opens;
		e->inflight_corrections = d->recon.slot && d->idx[i] < d->recon.n_slots ?
					  d->recon.slot[d->idx[i]].corrections : 0;
		e->breaker_false_opens = b->false_opens;
		e->overload_seconds = b->overload_s;
		e->uptime_seconds = b->managed_s;
		e->effective_ratio = b->ew_arrivals > 0 ? b->ew_ok / b->ew_arrivals : 1.0;
		e->retry_amplification = b->ew_arrivals > 0 ?
			(b->ew_arrivals + b->ew_retrans) / b->ew_arrivals : 1.0;
		e->retry_storm_active = s->rs.active;
		e->latency_target_seconds = s->objective_us / 1e6;
		e->ladder_overloaded = s->lad.overloaded;
		e->degradation_actions = b->degr_actions;
		e->degradation_effective = b->degr_effective;
		e->have_accept_queue = service_aq(d, i)->listeners > 0;
		e->accept_queue = service_aq(d, i)->queued;
		e->accept_backlog = service_aq(d, i)->backlog;
		{
			struct sluice_wait_stats w;

			e->have_wait = readwait_read(&d->rw, d->idx[i], &w) == 0;
			e->waits = w.count;
			e->wait_ns = w.sum_ns;
			e->window_wait_s = s->wk.last_wait_us >= 0 ? s->wk.last_wait_us / 1e6 : -1;
			e->wait_trims = s->wk.trims;
			e->wait_undone = s->wk.undone;
		}
		e->read_gate_armed = b->have_written &&
				     (b->written.flags & SLUICE_VERDICT_READ_GATE) != 0;
		if (unread) {
			const struct sluice_unread *u = &unread[d->idx[i]];

			e->unread = u->total;
			e->gate_refused = unread_refusals(u);
		}
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			const struct sw_switch *w = sw_set_find(&d->sw.set, d->cfg.services[i].name, c);
			if (!w || w->expires_at <= wall_s)
				continue;
			e->sw[c].active = 1;
			e->sw[c].shed_ratio = w->shed_pct / 100.0;
			/* a wall clock stepped back puts set_at ahead of now: age 0, not 2^64 s */
			e->sw[c].age_s = wall_s > w->set_at ? (double)(wall_s - w->set_at) : 0;
			e->sw[c].ttl_left_s = (double)(w->expires_at - wall_s);
		}
	}
	pthread_mutex_unlock(&d->lock);
	free(unread);
}

/* Take what the file writer found (daemon/iowriter.h): never waits for a disk. A damaged
 * switch file means "normal", loudly: a bad read must never degrade a service. */
static void take_switch_news(struct daemon *d)
{
	struct iow_news *n = &d->news;

	iow_take(&d->iow, d->sw_sent, n);
	for (int k = 0; k < n->n_msgs; k++) {
		log_error("%s", n->msgs[k]);
		daemon_event(d, SLUICE_EVM_SWITCHES, "file", n->corrupt ? "ignored" : "write_failed",
			     n->msgs[k], "", SLUICE_EV_ALERT);
	}
	if (n->have_set) {
		d->sw.corrupt = n->corrupt;
		if (n->external && !n->corrupt)
			daemon_event(d, SLUICE_EVM_SWITCHES, "file", "reloaded",
				     "switch file changed outside sluiced (audited as a diff)", "",
				     SLUICE_EV_INFO);
		d->sw.set = n->set;
		d->sw.generation++;
	}
	d->switch_error_logged = d->sw.corrupt;
	for (int k = 0; k < n->n_expired; k++) {
		const struct sw_switch *w = &n->expired[k];
		struct sluice_event ev;

		sluice_event_init(&ev, monotonic_ns(), SLUICE_EV_INFO, w->service, SLUICE_EVM_SWITCH, "set",
				  "expired", w->reason);
		ev.cls = w->class;
		sluice_event_num(&ev, "shed_pct", w->shed_pct);
		print_event(d, &ev);
	}
}

/* The listen queue of every service: waiting the application has not even begun to serve.
 * Over half the backlog is an alert (edge-triggered). */
static uint16_t *service_ports(const struct sluice_config *cfg)
{
	uint16_t *ports = malloc(sizeof(*ports) * (size_t)(cfg->n_services ? cfg->n_services : 1));

	for (int i = 0; ports && i < cfg->n_services; i++)
		ports[i] = (uint16_t)cfg->services[i].port;
	return ports;
}

/* A service at a local address has the listen queue of that address (sockdiag.h). */
static struct acceptq_want *service_listeners(const struct sluice_config *cfg)
{
	struct acceptq_want *w = calloc((size_t)(cfg->n_services ? cfg->n_services : 1), sizeof(*w));

	for (int i = 0; w && i < cfg->n_services; i++) {
		w[i].port = (uint16_t)cfg->services[i].port;
		w[i].has_addr = (uint8_t)cfg->services[i].has_addr;
		memcpy(w[i].addr, cfg->services[i].addr, sizeof(w[i].addr));
	}
	return w;
}

static void read_accept_queues(struct daemon *d)
{
	struct acceptq *q;
	int rc;

	/* kept from tick to tick: building them reads every service's config; the reader keeps
	 * its netlink socket and the sorted ports (all freed on a reload) */
	if (!d->aq_want) {
		d->aq_fresh = 1;        /* new services: read now */
		d->aq_want = service_listeners(&d->cfg);
		free(d->aq_buf);
		free(d->aq_alert);
		d->aq_buf = calloc((size_t)(d->cfg.n_services ? d->cfg.n_services : 1),
				   sizeof(*d->aq_buf));
		d->aq_alert = calloc((size_t)(d->cfg.n_services ? d->cfg.n_services : 1), 1);
		acceptq_reader_free(&d->aqr);
	}
	/* Two dumps of the kernel's listening sockets, a tenth of a tick with 1000 services:
	 * while every queue was empty at the last read, every other tick (a queue that forms is
	 * seen a tick later at most); while one holds connections, every tick. The services
	 * keep the last reading meanwhile (empty queues). */
	if (!d->aq_queued && (d->ticks & 1) && d->aq_buf && !d->aq_fresh)
		return;
	d->aq_fresh = 0;
	q = d->aq_buf;
	rc = d->aq_want && q && d->aq_alert ?
	     acceptq_reader_read(&d->aqr, d->aq_want, d->cfg.n_services, q) : -1;
	if (rc)
		return;
	d->aq_queued = 0;
	for (int i = 0; i < d->cfg.n_services; i++) {
		int high = q[i].backlog && q[i].queued * 2 > q[i].backlog;

		d->aq_queued |= q[i].queued > 0;
		if (high != d->aq_alert[i]) {
			struct sluice_event ev;

			sluice_event_init(&ev, monotonic_ns(), high ? SLUICE_EV_ALERT : SLUICE_EV_INFO,
					  d->cfg.services[i].name, SLUICE_EVM_ACCEPT_QUEUE, high ? "normal" : "high",
					  high ? "high" : "normal", "listen queue over half the backlog");
			sluice_event_num(&ev, "queued", q[i].queued);
			sluice_event_num(&ev, "backlog", q[i].backlog);
			print_event(d, &ev);
			d->aq_alert[i] = (uint8_t)high;
		}
	}
}

/* The flow GC asks the kernel's socket table before reclaiming a quiet flow; the table is
 * dumped at most once per GC pass, and only when there is something to ask about. */
struct live_check {
	struct daemon *d;
	struct sluice_flow_key *keys;
	int count, read;
};

static int flow_still_open(void *ctx, const struct sluice_flow_key *k)
{
	struct live_check *lc = ctx;

	if (!lc->read) {
		uint16_t *ports = service_ports(&lc->d->cfg);

		lc->read = 1;
		lc->count = ports ? live_flows_read(ports, lc->d->cfg.n_services, &lc->keys) : -1;
		free(ports);
		if (lc->count < 0)
			lc->count = -1; /* unknown: fall back to the timeouts */
	}
	return lc->count >= 0 && live_flows_has(lc->keys, lc->count, k);
}

/* A quiet service skipped by the tick: its books move on with the clock (the verdict in
 * force, the counters and so the decaying sums' inputs are unchanged). */
static void books_idle(struct service_books *b, double dt_s, double decay)
{
	b->ew_arrivals *= decay;
	b->ew_ok *= decay;
	b->ew_retrans *= decay;
	b->managed_s += dt_s;
	if (b->overloaded)
		b->overload_s += dt_s;
}

/* The histogram classes the tick must read (bit c = class c); the others are marked in
 * hist_same and left out of in->hist. BPF counts a latency sample in the service's
 * class_stats entry after it put it in the histogram, on the same CPU, and the counts are
 * read before the histograms: a class whose count did not move since the controller's last
 * tick has the histogram it had then (the controller keeps it). The first tick after a
 * start, an import or the reload that added the service reads all four. Worked out once a
 * tick (the read-ahead, the prefetch and the service's tick ask for it) from the books alone:
 * the read-ahead asks for every service before any controller runs, and reading each
 * controller's state for it cost a cache miss a service. */
#ifndef HIST_HOLD_TICKS
#define HIST_HOLD_TICKS 4
#endif

const struct service_books *daemon_service_turns(struct daemon *d, int i)
{
	struct service_books *b = &d->books[i];
	unsigned slot = (unsigned)d->idx[i];

	if (b->turn_slot != slot + 1 || b->turn_per_s != d->ticks_per_s) {
		b->hist_turn = (unsigned)((unsigned long long)slot * (HIST_HOLD_TICKS + 1) /
					  (unsigned long long)(d->rd.n_slots > 0 ? d->rd.n_slots : 1));
		b->ctl_turn = d->ticks_per_s ? slot % d->ticks_per_s : 0;
		b->turn_slot = slot + 1;
		b->turn_per_s = d->ticks_per_s;
	}
	return b;
}

/* The classes of service i whose slot counted latency samples. A class that counted none has
 * an empty histogram: its slot's histograms and counters start from zero together (a slot
 * new to its service, a layout that renews them), and BPF counts a sample after putting it
 * in the histogram, so one caught in between is counted by the tick that sees its count.
 * A controller's first tick takes those as empty without reading them: after a start or a
 * reload of tens of thousands of services, most of which have never had traffic, reading
 * every histogram was most of that tick. */
static unsigned classes_with_samples(const struct daemon *d, int i)
{
	unsigned mask = 0;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		if (maps_reader_samples(&d->rd, d->idx[i], c))
			mask |= 1u << c;
	return mask;
}

static unsigned hist_classes_to_read(struct daemon *d, int i)
{
	struct service_books *b = &d->books[i];
	unsigned want = 0;
	long long pending = 0;

	if (b->hist_want_tick == d->ticks + 1)
		return b->hist_want;
	if (!b->primed)
		want = classes_with_samples(d, i);
	for (int c = 0; b->primed && c < SLUICE_NUM_CLASSES; c++) {
		long long n = maps_reader_samples(&d->rd, d->idx[i], c) - (long long)b->hist_samples[c];

		if (n) {
			want |= 1u << c;
			pending += n > 0 ? n : b->qhold;   /* backwards: a reset, read it */
		}
	}
	/* A calm controller's few new samples wait in the maps (service_ctl_quantile_hold);
	 * all classes of the service together, so that the tick's quantiles are of one span.
	 * Services whose samples come in step (started together, the same rate) would all
	 * read theirs in the same tick, one in HIST_HOLD_TICKS + 1: each also reads what it
	 * holds at its own turn of those ticks, by where its slot lies (a tick's histograms are
	 * read in runs of neighbouring slots), so that the reads spread over the ticks. */
	b->hist_held = 0;
	if (want && b->primed && pending < (long long)b->qhold && b->held_ticks < HIST_HOLD_TICKS &&
	    daemon_service_turns(d, i)->hist_turn != d->hist_turn_now) {
		b->hist_held = want;
		want = 0;
	}
	b->hist_want = want;
	b->hist_want_tick = d->ticks + 1;
	return want;
}

/* Write the verdicts put this tick; one not written is written again at the next tick (its
 * controller runs: a changed verdict leaves the service not quiet). */
static void flush_verdicts(struct daemon *d)
{
	int done = maps_batch_flush(&d->vwb);

	for (int k = done; k < d->vwb.last_n; k++)
		if (d->vwb.who[k] >= 0 && d->vwb.who[k] < d->cfg.n_services)
			d->books[d->vwb.who[k]].have_written = 0;
}

/* Service i's new verdict into the tick's write batch (written now when it cannot take it). */
static int put_verdict(struct daemon *d, int i, const struct sluice_verdict *v)
{
	struct sluice_verdict *slot = maps_batch_put(&d->vwb, (__u32)d->idx[i], i);

	if (!slot && d->vwb.vals) {
		flush_verdicts(d);
		slot = maps_batch_put(&d->vwb, (__u32)d->idx[i], i);
	}
	if (!slot)
		return maps_write_verdict(&d->m, d->idx[i], v);
	*slot = *v;
	return 0;
}

/* The services ahead of the one running whose state the tick asks the CPU for: one takes
 * about a microsecond, time enough for their lines to arrive. */
#ifndef TICK_PREFETCH_AHEAD
#define TICK_PREFETCH_AHEAD 2
#endif

static void prefetch_service(struct daemon *d, int i, unsigned long long now_ns)
{
	const char *b = (const char *)&d->books[i];

	service_ctl_prefetch(&d->ctl[i], now_ns);
	service_ctl_prefetch_hists(&d->ctl[i], hist_classes_to_read(d, i));
	/* the config's head: name, port, protocol, headroom (the rest is not read per tick) */
	__builtin_prefetch(&d->cfg.services[i], 0, 2);
	__builtin_prefetch((const char *)&d->cfg.services[i] + 64, 0, 2);
	for (size_t o = 0; o < sizeof(d->books[i]); o += 64)
		__builtin_prefetch(b + o, 1, 2);
	maps_reader_prefetch_slot(&d->rd, d->idx[i]);
}

/* The room class k has under verdict v: its threshold, or the limit when it has none (0: no
 * room, a shut class). */
static uint32_t class_room(const struct sluice_verdict *v, int k)
{
	if (v->flags & SLUICE_VERDICT_SHUT(k))
		return 0;
	return v->class_threshold[k] ? v->class_threshold[k] : v->limit;
}

/* The churn gate of an http service's connection cap opened or closed (control/conncap.h): an
 * operator who sees SYNs refused under reason `connections` learns why from this line. */
static void report_churn_gate(struct daemon *d, const struct service_conf *sc,
			      const struct sluice_conncap *c, unsigned long long now_ns)
{
	struct sluice_event_sink sink = daemon_sink(d, sc->name);
	struct sluice_event ev;
	int open = c->churn_until_ns != 0;

	sluice_event_init(&ev, now_ns, SLUICE_EV_INFO, sc->name, SLUICE_EVM_CONNECTION_CAP,
			  open ? "gated" : "churn", open ? "churn" : "gated",
			  open ? "refusals_churn_connections" : "churn_ended");
	sluice_event_num(&ev, "refusals", (double)c->churn_refusals);
	sluice_event_num(&ev, "responses", (double)c->churn_samples);
	sluice_event_num(&ev, "ratio_min", SLUICE_CONNCAP_CHURN_RATIO);
	sluice_event_emit(&sink, &ev);
}

/* http service i's open connections could not be read (rc): the cap's rule takes no sample
 * of them (read as none, a class over its cap would look under it and be cut). Said once
 * when it begins and once when it ends. */
static void conns_read(struct daemon *d, int i, int rc)
{
	struct service_books *b = &d->books[i];

	if (rc && !b->conns_unreadable)
		log_error("service %s: cannot read its open connections (%s): the connection cap "
			  "leaves them out until they can", d->cfg.services[i].name,
			  strerror(-rc));
	else if (!rc && b->conns_unreadable)
		log_info("service %s: open connections read again", d->cfg.services[i].name);
	b->conns_unreadable = rc != 0;
}

/* http service i: the lower classes' connection cap after this tick's verdict v, decided in
 * control/conncap.h; here only the maps are read and written, when it asks. Returns 1 while a
 * cap is set or a write is due: the service is not quiet, since the cap's refusals move no
 * counter the tick's shortcut watches. */
static int tick_conn_cap(struct daemon *d, int i, const struct sluice_verdict *v,
			 const struct ctl_inputs *in, unsigned long long now_ns)
{
	const struct service_conf *sc = &d->cfg.services[i];
	const struct service_ctl *ctl = &d->ctl[i];
	struct sluice_conncap *c = &d->books[i].conncap;
	struct sluice_conncap_in ci = {
		.http = sc->protocol == SLUICE_PROTO_HTTP, .on = sc->connection_cap,
		.base_us = ctl->base_mean.value_us, .samples = ctl->sig.total.samples,
		.mean_us = ctl->sig.total.mean_us,
		/* the span of the signals, whose refusals the churn gate counts */
		.dt_ns = ctl->sig.dt_s > 0 ? (uint64_t)(ctl->sig.dt_s * 1e9) : 0,
	};
	struct sluice_http_conn_cap found;
	struct sluice_inflight open;
	struct sluice_conn_cap cc;
	int step, gate_was = c->churn_until_ns != 0;

	if (d->m.http_conn_cap < 0)
		return 0;
	for (int k = 0; k < SLUICE_NUM_CLASSES; k++) {
		const struct sluice_class_signals *cs = &ctl->sig.cls[k];

		ci.room[k] = class_room(v, k);
		ci.refused[k] = cs->rejected[SLUICE_REJ_HEADROOM] + cs->rejected[SLUICE_REJ_LADDER];
		ci.inflight[k] = in->inflight.cls[k];
	}
	if (sluice_conncap_adopting(c, &ci)) {
		int have = maps_read_http_conn_cap(&d->m, d->idx[i], &found) == 0;

		maps_read_conn_cap(&d->m, d->idx[i], &cc);     /* zeros when unreadable */
		if (sluice_conncap_adopt(c, have ? found.cap : NULL, cc.rejected, now_ns))
			sluice_conncap_written(c, maps_write_http_conn_cap(&d->m, d->idx[i],
									     c->share.cap) == 0);
	}
	step = sluice_conncap_begin(c, &ci, now_ns);
	if (step == SLUICE_CONNCAP_READ) {
		int have = maps_read_conn_cap(&d->m, d->idx[i], &cc) == 0;
		int rc = maps_read_http_conns(&d->m, d->idx[i], &open);

		conns_read(d, i, rc);
		step = sluice_conncap_decide(c, &ci, have ? cc.rejected : NULL, rc ? NULL : open.cls,
					     now_ns);
	}
	if (step == SLUICE_CONNCAP_WRITE)
		sluice_conncap_written(c, maps_write_http_conn_cap(&d->m, d->idx[i],
								     c->share.cap) == 0);
	if (sc->connection_cap == CONN_CAP_CHURN && gate_was != (c->churn_until_ns != 0))
		report_churn_gate(d, sc, c, now_ns);
	return sluice_conncap_held(c);
}

/* The histogram of a class that counted no sample (classes_with_samples). */
static const struct sluice_hist no_samples;

static void tick_service(struct daemon *d, int i, int suppressed, unsigned long long now_ns,
			 uint64_t wall_s, double dt_s, double decay,
			 const struct sluice_event_sink *host_sink)
{
	const struct service_conf *sc = &d->cfg.services[i];
	struct sluice_event_sink sink = daemon_sink(d, sc->name);
	struct service_books *b = &d->books[i];
	struct sluice_verdict v;
	struct ctl_inputs in;
	int opened = 0, changed = maps_reader_changed(&d->rd, d->idx[i]), same = 1, capped;
	unsigned want;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		in.switch_admit[c] = switch_state_admit(&d->sw, sc->name, c, wall_s);
		same &= sluice_prob_complement(in.switch_admit[c]) == b->written.switch_shed[c];
	}
	/* In-flight moves only with a counter or a GC release (which clears quiet), busy (tcp)
	 * is read with the counters and marks its slot changed: an unchanged quiet service is
	 * skipped without reading it. */
	b->ran = 0;
	if (b->quiet && !changed && same && !daemon_ctl_pending(d, i) && !service_aq(d, i)->queued) {
		books_idle(b, dt_s, decay);
		d->skipped++;
		return;
	}
	maps_reader_stats(&d->rd, d->idx[i], in.stats);
	want = hist_classes_to_read(d, i);
	in.hist_deferred = b->hist_held;
	in.hist_same = ~(want | in.hist_deferred) & ((1u << SLUICE_NUM_CLASSES) - 1);
	if (!d->ctl[i].have_prev) {
		/* the books' mirror aside, a controller's first tick takes every histogram: those
		 * of the classes that counted samples read, the others empty */
		want = classes_with_samples(d, i);
		in.hist_same = 0;
		in.hist_deferred = 0;
	}
	/* the histograms read ahead are handed over where the reader holds them, not copied */
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		in.hist_at[c] = NULL;
	if (maps_reader_concurrency(&d->rd, &d->m, d->idx[i], sc->protocol, &in.inflight) ||
	    (want && maps_reader_hist_at(&d->rd, &d->m, d->idx[i], want, in.hist, in.hist_at))) {
		/* keep the last verdict: BPF keeps enforcing it. Not quiet: the counters that
		 * moved were read, the next tick sees no change of them and would skip it. */
		b->quiet = 0;
		return;
	}
	if (!d->ctl[i].have_prev)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			if (!(want >> c & 1))
				in.hist_at[c] = &no_samples;
	/* cumulative, summed over CPUs from the probe's mapped counters (no syscall) */
	in.wait_have = readwait_read(&d->rw, d->idx[i], &in.wait) == 0;
	/* the read gate's refusals, which the limit does not count as its own: read (one
	 * lookup) while the verdict in force arms the gate, the only time they move, and once
	 * before, so that the first tick armed has a count to take its refusals from */
	in.gate_have = 0;
	in.gate_refused = 0;
	if (sc->protocol == SLUICE_PROTO_HTTP &&
	    ((b->have_written && (b->written.flags & SLUICE_VERDICT_READ_GATE)) ||
	     !service_ctl_gate_counted(&d->ctl[i]))) {
		struct sluice_unread u;

		if (maps_read_unread(&d->m, d->idx[i], &u) == 0) {
			in.gate_have = 1;
			in.gate_refused = unread_refusals(&u);
		}
	}
	in.listen.have = service_aq(d, i)->listeners > 0;
	in.listen.queued = service_aq(d, i)->queued;
	in.listen.backlog = service_aq(d, i)->backlog;
	daemon_ctl_requests(d, i, now_ns);
	service_ctl_tick(&d->ctl[i], sc, &in, suppressed, now_ns, &sink, &v, &opened);
	daemon_node_apply(d, &v);
	capped = tick_conn_cap(d, i, &v, &in, now_ns);
	d->node.arrivals += d->ctl[i].sig.total.arrivals;
	d->ticked++;
	b->ran = 1;
	if (in.hist_deferred) {
		b->held_ticks++;        /* their samples are still to be read */
	} else {
		b->held_ticks = 0;
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			b->hist_samples[c] = (uint64_t)maps_reader_samples(&d->rd, d->idx[i], c);
	}
	b->qhold = service_ctl_quantile_hold(&d->ctl[i], now_ns +
					     (unsigned long long)(dt_s * 1e9 + 0.5));
	b->primed = 1;
	if (opened)
		sluice_cascade_record_open(&d->cascade, &d->cp, sc->name, now_ns, host_sink);
	if (v.retry_after_s != b->retry_after_written) {
		/* The 503's Retry-After follows the breaker's remaining open time. */
		maps_write_reply(&d->m, d->idx[i], SLUICE_REPLY_503, (int)v.retry_after_s);
		b->retry_after_written = v.retry_after_s;
	}
	same = b->have_written && memcmp(&v, &b->written, sizeof(v)) == 0;
	if (!same && put_verdict(d, i, &v) == 0) {
		b->written = v;
		b->have_written = 1;
	}
	update_books(d, i, &v, dt_s, decay);
	daemon_ctl_export_tick(d, i, now_ns);
	/* Quiet from the next tick on: nothing moved, and the controller has no timer under way
	 * (and the in-flight it sees is its recent peak, so no older peak can expire). */
	b->quiet = !changed && same && !in.hist_deferred && !capped &&
		   service_ctl_settled(&d->ctl[i]);
	for (int c = 0; b->quiet && c < SLUICE_NUM_CLASSES; c++)
		b->quiet = d->ctl[i].peaks[c] == (uint32_t)(in.inflight.cls[c] > 0 ? in.inflight.cls[c] : 0);
}

/* Counters that cannot be read leave every verdict where it stands (BPF keeps enforcing the
 * last ones, the heartbeat still beats): no controller decides until they can be read again.
 * Said once when it begins and once when it ends, not at every tick. */
static void counters_read(struct daemon *d, int rc)
{
	char why[160];

	if (rc && !d->counters_unreadable) {
		snprintf(why, sizeof(why), "cannot read the counters (%s): every verdict stays as "
			 "it is until they can", strerror(-rc));
		log_error("%s", why);
		daemon_event(d, SLUICE_EVM_DAEMON, "reading", "unreadable", why, "", SLUICE_EV_ALERT);
	} else if (!rc && d->counters_unreadable) {
		daemon_event(d, SLUICE_EVM_DAEMON, "unreadable", "reading",
			     "counters read again: the controllers decide again", "", SLUICE_EV_INFO);
	}
	d->counters_unreadable = rc != 0;
}

void daemon_tick(struct daemon *d, unsigned long long now_ns)
{
	double dt_s = d->last_tick_ns ? (double)(now_ns - d->last_tick_ns) / 1e9 : 0;
	uint64_t wall_s = (uint64_t)time(NULL);
	struct sluice_event_sink host_sink = daemon_sink(d, "");
	int suppressed;

	/* first, so this tick's events and messages find room the readers made since the last */
	daemon_events_flush(d);
	logstream_flush();
	d->last_tick_ns = now_ns;
	{
		unsigned long long tick = (unsigned long long)(d->cfg.control_interval_ms > 0 ?
							       d->cfg.control_interval_ms : 100) * 1000000ull;

		d->ticks_per_s = tick < NS ? (unsigned)(NS / tick) : 1;
		/* a service's turn is the tick at which (ticks + its turn) is a multiple */
		d->hist_turn_now = (unsigned)((HIST_HOLD_TICKS + 1 - d->ticks % (HIST_HOLD_TICKS + 1)) %
					      (HIST_HOLD_TICKS + 1));
		d->ctl_turn_now = (unsigned)((d->ticks_per_s - d->ticks % d->ticks_per_s) %
					     d->ticks_per_s);
	}
	write_globals(d, now_ns);
	take_switch_news(d);
	suppressed = sluice_cascade_tick(&d->cascade, &d->cp, now_ns, &host_sink);
	read_accept_queues(d);
	daemon_node_tick(d, now_ns);

	int n_hot = 0, n_used = 0, rc;

	/* The services still running their controller are read every tick; the quiet ones in
	 * turn (maps_reader_read). */
	for (int i = 0; i < d->cfg.n_services; i++) {
		if (d->idx[i] >= n_used)
			n_used = d->idx[i] + 1;
		if (!d->books[i].quiet)
			d->hot[n_hot++] = d->idx[i];
	}
	daemon_ctl_poll(d, n_used);
	rc = maps_reader_read(&d->rd, &d->m, n_used, d->hot, n_hot);
	daemon_beat_if_due(d);
	counters_read(d, rc);
	if (!rc) {
		double decay = exp(-dt_s / 60.0);

		/* The histograms every controller will want, read ahead in a few batches (a
		 * service that will be skipped has no count that moved: it asks for none). */
		for (int i = 0; i < d->cfg.n_services; i++)
			if (!d->books[i].quiet || maps_reader_changed(&d->rd, d->idx[i]))
				maps_reader_want_hist(&d->rd, d->idx[i], hist_classes_to_read(d, i));
		if (maps_reader_prefetch_hists(&d->rd, &d->m, n_used))
			log_debug("cannot read the histograms ahead; looking them up one by one");
		for (int i = 0; i < d->cfg.n_services; i++) {
			int ahead = i + TICK_PREFETCH_AHEAD;

			if (ahead < d->cfg.n_services && (!d->books[ahead].quiet ||
			    maps_reader_changed(&d->rd, d->idx[ahead])))
				prefetch_service(d, ahead, now_ns);
			tick_service(d, i, suppressed, now_ns, wall_s, dt_s, decay, &host_sink);
			/* a tick that runs tens of thousands of controllers (the first after a start
			 * or a reload with them) takes seconds: the heartbeat must not age meanwhile */
			if (i % 64 == 63)
				daemon_beat_if_due(d);
		}
		flush_verdicts(d);
		daemon_ctl_flush(d);
	}
	daemon_ctl_cascade(d, now_ns);

	if (now_ns - d->last_gc_ns >= NS) {
		struct live_check lc = { .d = d };
		int n = maps_gc_flows(&d->m, now_ns, (unsigned long long)d->cfg.syn_timeout_s * NS,
				      (unsigned long long)d->cfg.flow_idle_timeout_s * NS,
				      flow_still_open, &lc);

		free(lc.keys);
		if (n > 0) {
			/* in-flight moved without a counter: re-read the releases, run every
			 * controller once */
			maps_reader_reread_released(&d->rd, &d->m);
			for (int i = 0; i < d->cfg.n_services; i++)
				d->books[i].quiet = 0;
		}
		if (n > 0 && d->verbose)
			daemon_event(d, SLUICE_EVM_FLOWS, "open", "reclaimed", "idle flows reclaimed", "",
				     SLUICE_EV_DEBUG);
		/* The counters against the flow table: a difference that stands still is corrected
		 * (expected never; counted in sluice_inflight_corrections_total). */
		if (d->recon.slot && maps_reconcile(&d->m, &d->recon) > 0) {
			maps_reader_reread_released(&d->rd, &d->m);
			for (int i = 0; i < d->cfg.n_services; i++)
				d->books[i].quiet = 0;
			daemon_event(d, SLUICE_EVM_FLOWS, "open", "corrected",
				     "in-flight corrected from the flow table", "", SLUICE_EV_ALERT);
		}
		/* what CPUs that only gave units back left unpublished, into the estimate */
		maps_fold_estimate(&d->m);
		d->last_gc_ns = now_ns;
	}
	if (__atomic_load_n(&d->mx_asked, __ATOMIC_ACQUIRE))
		fill_metrics_extra(d, wall_s);
	d->ticks++;
}

/* A config's errors through the log, never straight to stderr: the tick must not wait for it
 * (daemon/logstream.h). */
static void log_doc_errors(const struct doc_errors *errs)
{
	char line[DOC_ERROR_LINE];

	for (int i = 0; i < errs->n && i < DOC_MAX_ERRORS; i++) {
		doc_error_format(errs, i, line, sizeof(line));
		log_plain("%s", line);
	}
}

/* A reload's read and parse: on a thread of its own (daemon_reload_start), as they touch
 * nothing of the daemon's but the bytes of the config in force, which only the tick changes,
 * and only once the job is over. */
struct reload_job {
	pthread_t thread;
	int done;                     /* the thread is over (atomic): join, then apply */
	int force;
	char path[512];
	const char *old_text;         /* d->cfg_text at the start */
	size_t old_len;
	/* what the read and parse found */
	char *text;                   /* NULL: the read failed (errs says why) */
	size_t len;
	int unchanged;                /* the same bytes as in force, and not forced */
	int parse_rc;
	struct doc_errors errs;
	struct sluice_config next;
	/* next's per-service arrays, their pages touched (NULL: apply allocates them). 65,000
	 * services' controllers are over a gigabyte: the first touch of it took seconds. */
	int *new_idx;
	struct service_ctl *new_ctl;
	struct service_books *new_books;
};

/* Fault in the pages of zeroed memory now (off the tick), not at its first use. */
static void touch_pages(void *p, size_t n)
{
	for (size_t o = 0; o < n; o += 4096)
		((volatile char *)p)[o] = 0;
}

static struct reload_job *reload_job_new(const struct daemon *d, int force)
{
	struct reload_job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->force = force;
	snprintf(j->path, sizeof(j->path), "%s", d->cfg_path);
	j->old_text = d->cfg_text;
	j->old_len = d->cfg_len;
	return j;
}

static void reload_parse(struct reload_job *j)
{
	j->text = daemon_read_config(j->path, &j->len, &j->errs);
	if (!j->text)
		return;
	if (!j->force && j->old_text && j->len == j->old_len &&
	    !memcmp(j->text, j->old_text, j->len)) {
		j->unchanged = 1;
		return;
	}
	j->parse_rc = sluice_config_parse(j->text, j->len, j->path, &j->next, &j->errs);
	if (!j->parse_rc &&
	    !alloc_services(j->next.n_services, &j->new_idx, &j->new_ctl, &j->new_books)) {
		touch_pages(j->new_ctl, sizeof(*j->new_ctl) * (size_t)j->next.n_services);
		touch_pages(j->new_books, sizeof(*j->new_books) * (size_t)j->next.n_services);
	}
}

/* Arrays the reload did not take. */
static void reload_job_free_arrays(struct reload_job *j)
{
	free(j->new_idx);
	free(j->new_ctl);
	free(j->new_books);
	j->new_idx = NULL;
	j->new_ctl = NULL;
	j->new_books = NULL;
}

static void *reload_thread(void *arg)
{
	struct reload_job *j = arg;

	reload_parse(j);
	__atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A reload refused for what the new config says (next, parsed from text): the running config
 * stays, and the refused text is kept as the last one read, so that the same bad bytes are not
 * reported again at every tick. Returns -1. */
static int refuse_reload(struct daemon *d, struct sluice_config *next, char *text, size_t len,
			 const char *why)
{
	d->reloads_failed++;
	daemon_event(d, SLUICE_EVM_CONFIG, "running", "kept", why, "", SLUICE_EV_ALERT);
	sluice_config_free(next);
	free(d->cfg_text);
	d->cfg_text = text;
	d->cfg_len = len;
	return -1;
}

static int reload_apply(struct daemon *d, struct reload_job *job, unsigned long long now_ns)
{
	struct sluice_config next;
	struct doc_errors errs = job->errs;
	struct service_ctl *new_ctl;
	struct service_books *new_books;
	int *new_idx, *was = NULL;    /* by new service: its index in the running config, or -1 */
	size_t len = job->len;
	char *text = job->text;
	int rc = 0;

	if (!text) {
		log_error("config %s: %s; keeping the running config", d->cfg_path, errs.e[0].msg);
		d->reloads_failed++;
		daemon_event(d, SLUICE_EVM_CONFIG, "running", "kept", errs.e[0].msg, "",
			     SLUICE_EV_ALERT);
		return -1;
	}
	if (job->unchanged) {
		free(text);
		return 0;
	}
	next = job->next;
	if (job->parse_rc != 0) {
		log_doc_errors(&errs);
		return refuse_reload(d, &next, text, len,
				     errs.n ? errs.e[0].msg : "invalid config");
	}
	if (d->pin_override[0])
		snprintf(next.pin_dir, sizeof(next.pin_dir), "%s", d->pin_override);
	if (next.n_ifspecs != d->cfg.n_ifspecs ||
	    memcmp(next.ifspecs, d->cfg.ifspecs, sizeof(next.ifspecs)) ||
	    strcmp(next.pin_dir, d->cfg.pin_dir) ||
	    strcmp(next.state_dir, d->cfg.state_dir) || next.xdp_mode != d->cfg.xdp_mode ||
	    strcmp(next.metrics_address, d->cfg.metrics_address) ||
	    strcmp(next.switch_group, d->cfg.switch_group)) {
		/* metrics_address among them: the listener is opened once, at start, and a
		 * reload that took the rest would say "reloaded" while /metrics stayed where it was.
		 * switch_group too: the file writer gives the state dir and audit log to the group
		 * of the start; the socket would admit the new group to files it cannot read. */
		log_error("config %s: interface, xdp_mode, pin_dir, state_dir, switch_group and "
			  "metrics_address changes need a restart; keeping the running config",
			  d->cfg_path);
		return refuse_reload(d, &next, text, len,
				     "a change of interface, xdp_mode, pin_dir, state_dir, "
				     "switch_group or metrics_address needs a restart");
	}
	if (next.n_services > d->m.n_slots) {
		/* The per-service maps were sized at start, for the config of then. */
		char why[160];

		snprintf(why, sizeof(why), "%d services, the maps hold %d: more services need a "
			 "restart", next.n_services, d->m.n_slots);
		log_error("config %s: %s; keeping the running config", d->cfg_path, why);
		return refuse_reload(d, &next, text, len, why);
	}
	new_idx = job->new_idx;
	new_ctl = job->new_ctl;
	new_books = job->new_books;
	job->new_idx = NULL;
	job->new_ctl = NULL;
	job->new_books = NULL;
	if (!(was = malloc(sizeof(*was) * (size_t)(next.n_services ? next.n_services : 1))) ||
	    sluice_config_match_services(&d->cfg, &next, was) ||
	    (!new_ctl && alloc_services(next.n_services, &new_idx, &new_ctl, &new_books))) {
		log_error("config %s: out of memory; keeping the running config", d->cfg_path);
		d->reloads_failed++;
		sluice_config_free(&next);
		free(was);
		free(new_idx);
		free(new_ctl);
		free(new_books);
		free(text);
		return -1;
	}
	if (maps_assign_indices(&d->m, &next, new_idx) ||
	    (rc = maps_program_services_beat(&d->m, &next, new_idx, RELOAD_BEAT_EVERY,
					     beat_cb, d)) != 0) {
		log_error("cannot program the new config into the maps");
		d->reloads_failed++;
		/* maps_program_services writes service by service, zeroes the ports of removed
		 * services before the new ones are set and stops at the first failure: the maps
		 * may be half new. The running config (which did program) is what the daemon
		 * keeps, so it is written back whole. */
		if (rc && maps_program_services(&d->m, &d->cfg, d->idx))
			log_error("cannot program the running config back into the maps either");
		/* a slot the new config took from a removed service was made clean (mapconfig.h):
		 * every running service's verdict is written again at the next tick (and its 503:
		 * the program wrote the config's Retry-After into it), and so are its controller's
		 * entry and its http connection cap */
		for (int i = 0; rc && i < d->cfg.n_services; i++) {
			d->books[i].have_written = 0;
			d->books[i].quiet = 0;
			d->books[i].retry_after_written = (unsigned)d->cfg.services[i].retry_after_s;
			d->books[i].exported_ns = 0;
			if (sluice_conncap_held(&d->books[i].conncap))
				d->books[i].conncap.dirty = 1;
		}
		daemon_event(d, SLUICE_EVM_CONFIG, "running", "kept",
			     "cannot program the new config into the maps", "", SLUICE_EV_ALERT);
		sluice_config_free(&next);
		free(was);
		free(new_idx);
		free(new_ctl);
		free(new_books);
		free(text);
		return -1;
	}
	/* Learned state (limit, latency baseline, breaker) follows the service by name. */
	for (int i = 0; i < next.n_services; i++) {
		int j = was[i];

		if (i % RELOAD_BEAT_EVERY == RELOAD_BEAT_EVERY - 1)
			daemon_beat_if_due(d);
		if (j >= 0) {
			new_ctl[i] = d->ctl[j];
			new_books[i] = d->books[j];
			service_ctl_reconfigure(&new_ctl[i], &next.services[i], &next);
			new_books[i].quiet = 0; /* new parameters: run the controller once */
			/* maps_program_services wrote the 503 with the config's Retry-After: an open
			 * breaker's longer one is written again at the next tick */
			new_books[i].retry_after_written = (unsigned)next.services[i].retry_after_s;
			/* Its ctl_state entry names it by name and port: with the port changed, status,
			 * `sluicectl baseline reset` and a restart's adoption take the entry for another
			 * service's until it is written again, which a calm service's refresh leaves
			 * for 10 s. Written at the next tick instead. */
			if (next.services[i].port != d->cfg.services[j].port)
				new_books[i].exported_ns = 0;
		} else {
			service_ctl_init(&new_ctl[i], &next.services[i], &next, now_ns + (unsigned)i,
					 now_ns);
			/* the 503 maps_program_services wrote, as for a service kept */
			new_books[i].retry_after_written = (unsigned)next.services[i].retry_after_s;
			/* its slot is new to it (mapconfig.h: counted from zero); so is the slot's
			 * count of in-flight corrections, which /metrics shows as the service's */
			if (d->recon.slot && new_idx[i] < d->recon.n_slots)
				d->recon.slot[new_idx[i]].corrections = 0;
			/* and so are the probe's waits in it (sluiced's probe, not in the pins) */
			if (readwait_slot_passed(&d->rw, new_idx[i]))
				log_warn("service %s: out of memory: its read waits start at its "
					 "slot's previous service's", next.services[i].name);
		}
	}
	free(was);
	pthread_mutex_lock(&d->lock);     /* the metrics copy reads cfg.n_services */
	sluice_config_free(&d->cfg);
	free(d->idx);
	free(d->ctl);
	free(d->books);
	d->cfg = next;
	d->idx = new_idx;
	d->hot = new_idx + next.n_services;
	d->ctl = new_ctl;
	d->books = new_books;
	free(d->aq_want);         /* of the old services */
	d->aq_want = NULL;
	pthread_mutex_unlock(&d->lock);
	reader_wants(d);
	sluice_cascade_params_from_conf(&d->cfg.cascade, &d->cp);
	daemon_node_configure(d, now_ns);
	free(d->cfg_text);
	d->cfg_text = text;
	d->cfg_len = len;
	d->reloads_ok++;
	daemon_event(d, SLUICE_EVM_CONFIG, "old", "new", "config reloaded", "", SLUICE_EV_INFO);
	return 1;
}

int daemon_reload(struct daemon *d, int force, unsigned long long now_ns)
{
	struct reload_job *j;
	int rc;

	daemon_reload_wait(d);
	if (!(j = reload_job_new(d, force))) {
		log_error("config %s: out of memory; keeping the running config", d->cfg_path);
		d->reloads_failed++;
		return -1;
	}
	reload_parse(j);
	rc = reload_apply(d, j, now_ns);
	reload_job_free_arrays(j);
	free(j);
	return rc;
}

int daemon_reload_start(struct daemon *d, int force, unsigned long long now_ns)
{
	struct reload_job *j;

	if (d->reload)
		return 1;
	if (!(j = reload_job_new(d, force)))
		return daemon_reload(d, force, now_ns) >= 0 ? 0 : -1;
	if (pthread_create(&j->thread, NULL, reload_thread, j)) {
		/* no thread: the tick waits for the parse, as it always did */
		free(j);
		return daemon_reload(d, force, now_ns) >= 0 ? 0 : -1;
	}
	d->reload = j;
	return 0;
}

int daemon_reload_busy(const struct daemon *d)
{
	return d->reload != NULL;
}

int daemon_reload_finish(struct daemon *d, unsigned long long now_ns)
{
	struct reload_job *j = d->reload;
	int rc;

	if (!j || !__atomic_load_n(&j->done, __ATOMIC_ACQUIRE))
		return 0;
	pthread_join(j->thread, NULL);
	d->reload = NULL;
	rc = reload_apply(d, j, now_ns);
	reload_job_free_arrays(j);
	free(j);
	return rc;
}

void daemon_reload_wait(struct daemon *d)
{
	struct reload_job *j = d->reload;

	if (!j)
		return;
	pthread_join(j->thread, NULL);
	d->reload = NULL;
	free(j->text);
	sluice_config_free(&j->next);
	reload_job_free_arrays(j);
	free(j);
}

int daemon_metrics_body(void *ctx, char **body, size_t *len)
{
	struct daemon *d = ctx;
	static __thread struct status_snapshot snap;
	static __thread struct metrics_extra x;
	int rc;

	if (status_collect(&d->m, &snap, 0))
		return -1;
	status_collect_ifaces(&snap, d->cfg.pin_dir);
	pthread_mutex_lock(&d->lock);
	{
		/* Asked of the next tick: wait for it, two ticks at most (a daemon that stopped
		 * ticking, in a reload or at the end, gives the last rows it filled). */
		unsigned long long gen = d->mx_gen, tick_ms = d->cfg.control_interval_ms > 0 ?
			(unsigned long long)d->cfg.control_interval_ms : 100;
		unsigned long long until = monotonic_ns() + (2 * tick_ms + 50) * 1000000ull;
		struct timespec ts = { .tv_sec = (time_t)(until / 1000000000ull),
				       .tv_nsec = (long)(until % 1000000000ull) };

		__atomic_store_n(&d->mx_asked, 1, __ATOMIC_RELEASE);
		while (d->mx_gen == gen &&
		       pthread_cond_timedwait(&d->mx_filled, &d->lock, &ts) != ETIMEDOUT)
			;
	}
	rc = metrics_extra_copy(&x, &d->mx);
	pthread_mutex_unlock(&d->lock);
	if (rc)
		return -1;
	rc = metrics_render(&snap, &x, body, len);
	return rc;
}
