// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "daemon/daemon.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/verdict.h"
#include "kernel/status.h"
#include "common/clock.h"
#include "common/jsonio.h"
#include "common/log.h"
#include "kernel/mapconfig.h"
#include "kernel/flowgc.h"
#include "kernel/replies.h"

#define NS 1000000000ull

char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, r;

	if (!f)
		return NULL;
	do {
		if (n + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = cap ? cap * 2 : 8192);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
	} while (r > 0);
	fclose(f);
	buf[n] = 0;
	*len = n;
	return buf;
}

static void print_event(struct daemon *d, const struct sluice_event *ev)
{
	char stamp[32], iso[64];
	struct timespec ts;
	struct tm tm;
	json_t *line, *body;

	if (ev->level == SLUICE_EV_DEBUG && !d->verbose)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(iso, sizeof(iso), "%s.%03dZ", stamp, (int)(ts.tv_nsec / 1000000));
	/* The machines' JSON carries the monotonic clock; operators want wall time first. */
	line = json_pack("{s:s}", "time", iso);
	body = sluice_event_object(ev);
	if (line && body && json_object_update(line, body) == 0)
		jsonio_print_line(d->events, line);
	json_decref(body);
	json_decref(line);
	fflush(d->events);
}

static void sink_fn(void *ctx, const struct sluice_event *ev)
{
	print_event(ctx, ev);
}

static struct sluice_event_sink sink_for(struct daemon *d, const char *service)
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

static void write_globals(struct daemon *d, unsigned long long now_ns)
{
	struct sluice_globals g = { 0 };

	maps_read_globals(&d->m, &g); /* keeps ifindex */
	g.heartbeat_ns = now_ns;
	g.heartbeat_timeout_ns = (unsigned long long)d->cfg.heartbeat_timeout_ms * 1000000ull;
	maps_write_globals(&d->m, &g);
}

int daemon_init(struct daemon *d, unsigned long long now_ns, char *err, size_t errlen)
{
	int rc;

	if (maps_assign_indices(&d->m, &d->cfg, d->idx)) {
		snprintf(err, errlen, "no free service slot in the maps (at most %d services)",
			 SLUICE_MAX_SERVICES);
		return -1;
	}
	if ((rc = maps_program_services(&d->m, &d->cfg, d->idx))) {
		snprintf(err, errlen, "cannot program service maps: %s", strerror(-rc));
		return -1;
	}
	sluice_cascade_params_from_conf(&d->cfg.cascade, &d->cp);
	sluice_cascade_init(&d->cascade);
	for (int i = 0; i < d->cfg.n_services; i++) {
		service_ctl_init(&d->ctl[i], &d->cfg.services[i], &d->cfg,
				 now_ns ^ (0x9e3779b97f4a7c15ull * (unsigned long long)(i + 1)), now_ns);
		memset(&d->books[i], 0, sizeof(d->books[i]));
	}
	switch_state_init(&d->sw);
	pthread_mutex_init(&d->lock, NULL);
	write_globals(d, now_ns);
	return 0;
}

static int read_inputs(struct daemon *d, int i, struct ctl_inputs *in)
{
	int s = d->idx[i];

	memset(in, 0, sizeof(*in));
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		if (maps_read_class_stats(&d->m, s, c, &in->stats[c]) ||
		    maps_read_hist(&d->m, s, c, &in->hist[c]))
			return -1;
	}
	return maps_read_concurrency(&d->m, s, d->cfg.services[i].protocol, &in->inflight);
}

/* The five measures (docs/METRICS.md), kept as the daemon sees each tick. */
static void update_books(struct daemon *d, int i, const struct sluice_verdict *v,
			 double dt_s)
{
	struct service_books *b = &d->books[i];
	const struct service_ctl *s = &d->ctl[i];
	const struct sluice_class_signals *t = &s->sig.total;
	double decay = exp(-dt_s / 60.0);
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
		if (s->above_since_ns || shed)
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

static void fill_metrics_extra(struct daemon *d, uint64_t wall_s)
{
	struct metrics_extra *x = &d->mx;

	pthread_mutex_lock(&d->lock);
	memset(x, 0, sizeof(*x));
	x->cascade_suspended = d->cascade.suspended;
	x->cascade_triggers = d->cascade.triggers;
	x->config_reloads = d->reloads_ok;
	x->config_reload_failures = d->reloads_failed;
	x->switch_file_error = d->switch_error_logged;
	x->n = d->cfg.n_services;
	for (int i = 0; i < d->cfg.n_services; i++) {
		struct metrics_service_extra *e = &x->s[i];
		const struct service_books *b = &d->books[i];
		const struct service_ctl *s = &d->ctl[i];

		e->idx = d->idx[i];
		e->breaker_admit = (double)sluice_breaker_admit(&s->brk, &s->bp) / SLUICE_PROB_ONE;
		e->breaker_opens = b->opens;
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
		e->have_accept_queue = b->aq.listeners > 0;
		e->accept_queue = b->aq.queued;
		e->accept_backlog = b->aq.backlog;
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			const struct sw_switch *w = sw_set_find(&d->sw.set, d->cfg.services[i].name, c);
			if (!w || w->expires_at <= wall_s)
				continue;
			e->sw[c].active = 1;
			e->sw[c].shed_ratio = w->shed_pct / 100.0;
			e->sw[c].age_s = (double)(wall_s - w->set_at);
			e->sw[c].ttl_left_s = (double)(w->expires_at - wall_s);
		}
	}
	pthread_mutex_unlock(&d->lock);
}

static void poll_switches(struct daemon *d, uint64_t wall_s)
{
	char err[SWST_ERR_LEN];
	int rc = switch_state_poll(&d->sw, d->cfg.state_dir, wall_s, err, sizeof(err));

	if (rc < 0) {
		/* A broken switch file means "normal", loudly (once per change): a bad read must
		 * never degrade a service. */
		log_error("%s", err);
		daemon_event(d, SLUICE_EVM_SWITCHES, "file", d->sw.corrupt ? "ignored" : "write_failed", err,
			     "", SLUICE_EV_ALERT);
	} else if (rc > 0 && !d->sw.n_expired) {
		daemon_event(d, SLUICE_EVM_SWITCHES, "file", "reloaded", "switch file changed", "",
			     SLUICE_EV_INFO);
	}
	d->switch_error_logged = d->sw.corrupt;
	for (int k = 0; k < d->sw.n_expired && k < SWST_MAX_EXPIRED; k++) {
		const struct sw_switch *w = &d->sw.expired[k];
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
static void read_accept_queues(struct daemon *d)
{
	uint16_t ports[SLUICE_MAX_SERVICES];
	struct acceptq q[SLUICE_MAX_SERVICES];

	for (int i = 0; i < d->cfg.n_services; i++)
		ports[i] = (uint16_t)d->cfg.services[i].port;
	if (acceptq_read(ports, d->cfg.n_services, q))
		return;
	for (int i = 0; i < d->cfg.n_services; i++) {
		struct service_books *b = &d->books[i];
		int high = q[i].backlog && q[i].queued * 2 > q[i].backlog;

		b->aq = q[i];
		if (high != b->aq_alert) {
			struct sluice_event ev;

			sluice_event_init(&ev, monotonic_ns(), high ? SLUICE_EV_ALERT : SLUICE_EV_INFO,
					  d->cfg.services[i].name, SLUICE_EVM_ACCEPT_QUEUE, high ? "normal" : "high",
					  high ? "high" : "normal", "listen queue over half the backlog");
			sluice_event_num(&ev, "queued", q[i].queued);
			sluice_event_num(&ev, "backlog", q[i].backlog);
			print_event(d, &ev);
			b->aq_alert = high;
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
		uint16_t ports[SLUICE_MAX_SERVICES];

		lc->read = 1;
		for (int i = 0; i < lc->d->cfg.n_services; i++)
			ports[i] = (uint16_t)lc->d->cfg.services[i].port;
		lc->count = live_flows_read(ports, lc->d->cfg.n_services, &lc->keys);
		if (lc->count < 0)
			lc->count = -1; /* unknown: fall back to the timeouts */
	}
	return lc->count >= 0 && live_flows_has(lc->keys, lc->count, k);
}

void daemon_tick(struct daemon *d, unsigned long long now_ns)
{
	double dt_s = d->last_tick_ns ? (double)(now_ns - d->last_tick_ns) / 1e9 : 0;
	uint64_t wall_s = (uint64_t)time(NULL);
	struct sluice_event_sink host_sink = sink_for(d, "");
	int suppressed;
	char who[128];

	d->last_tick_ns = now_ns;
	write_globals(d, now_ns);
	poll_switches(d, wall_s);
	if (now_ns - d->last_slow_ns >= NS) {
		int rq = cascade_clear_requested(d->cfg.state_dir, who, sizeof(who));

		if (rq == 1)
			sluice_cascade_clear(&d->cascade, now_ns, who, &host_sink);
		else if (rq < 0)
			log_debug("cascade clear request: %s", who);
		d->last_slow_ns = now_ns;
	}
	suppressed = sluice_cascade_tick(&d->cascade, &d->cp, now_ns, &host_sink);
	read_accept_queues(d);

	for (int i = 0; i < d->cfg.n_services; i++) {
		const struct service_conf *sc = &d->cfg.services[i];
		struct sluice_event_sink sink = sink_for(d, sc->name);
		struct sluice_verdict v;
		struct ctl_inputs in;
		int opened = 0;

		if (read_inputs(d, i, &in))
			continue; /* keep the last verdict: BPF keeps enforcing it */
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
			in.switch_admit[c] = switch_state_admit(&d->sw, sc->name, c, wall_s);
		service_ctl_tick(&d->ctl[i], sc, &in, suppressed, now_ns, &sink, &v, &opened);
		if (opened)
			sluice_cascade_record_open(&d->cascade, &d->cp, sc->name, now_ns, &host_sink);
		if (v.retry_after_s != d->books[i].retry_after_written) {
			/* The 503's Retry-After follows the breaker's remaining open time. */
			maps_write_reply(&d->m, d->idx[i], SLUICE_REPLY_503, (int)v.retry_after_s);
			d->books[i].retry_after_written = v.retry_after_s;
		}
		maps_write_verdict(&d->m, d->idx[i], &v);
		update_books(d, i, &v, dt_s);
	}

	if (now_ns - d->last_gc_ns >= NS) {
		struct live_check lc = { .d = d };
		int n = maps_gc_flows(&d->m, now_ns, (unsigned long long)d->cfg.syn_timeout_s * NS,
				      (unsigned long long)d->cfg.flow_idle_timeout_s * NS,
				      flow_still_open, &lc);

		free(lc.keys);
		if (n > 0 && d->verbose)
			daemon_event(d, SLUICE_EVM_FLOWS, "open", "reclaimed", "idle flows reclaimed", "",
				     SLUICE_EV_DEBUG);
		d->last_gc_ns = now_ns;
	}
	fill_metrics_extra(d, wall_s);
}

int daemon_reload(struct daemon *d, int force, unsigned long long now_ns)
{
	static struct sluice_config next;
	struct doc_errors errs;
	struct service_ctl old_ctl[SLUICE_MAX_SERVICES];
	struct service_books old_books[SLUICE_MAX_SERVICES];
	struct sluice_config old_cfg;
	int new_idx[SLUICE_MAX_SERVICES];
	size_t len = 0;
	char *text = read_file(d->cfg_path, &len);
	int rc;

	if (!text) {
		log_error("config %s: %s; keeping the running config", d->cfg_path,
			strerror(errno));
		d->reloads_failed++;
		daemon_event(d, SLUICE_EVM_CONFIG, "running", "kept", "config file unreadable", "",
			     SLUICE_EV_ALERT);
		return -1;
	}
	if (!force && d->cfg_text && len == d->cfg_len && !memcmp(text, d->cfg_text, len)) {
		free(text);
		return 0;
	}
	if (sluice_config_parse(text, len, d->cfg_path, &next, &errs) != 0) {
		doc_errors_print(stderr, &errs);
		d->reloads_failed++;
		daemon_event(d, SLUICE_EVM_CONFIG, "running", "kept",
			     errs.n ? errs.e[0].msg : "invalid config", "", SLUICE_EV_ALERT);
		free(d->cfg_text);
		d->cfg_text = text; /* don't re-report the same bad bytes every tick */
		d->cfg_len = len;
		return -1;
	}
	if (d->pin_override[0])
		snprintf(next.pin_dir, sizeof(next.pin_dir), "%s", d->pin_override);
	if (strcmp(next.interface, d->cfg.interface) || strcmp(next.pin_dir, d->cfg.pin_dir) ||
	    next.xdp_mode != d->cfg.xdp_mode) {
		log_error("config %s: interface, xdp_mode and pin_dir changes need a "
			"restart; keeping the running config", d->cfg_path);
		d->reloads_failed++;
		daemon_event(d, SLUICE_EVM_CONFIG, "running", "kept", "interface change needs a restart", "",
			     SLUICE_EV_ALERT);
		free(d->cfg_text);
		d->cfg_text = text;
		d->cfg_len = len;
		return -1;
	}
	if (maps_assign_indices(&d->m, &next, new_idx) ||
	    (rc = maps_program_services(&d->m, &next, new_idx)) != 0) {
		log_error("cannot program the new config into the maps");
		d->reloads_failed++;
		free(text);
		return -1;
	}
	/* Learned state (limit, latency baseline, breaker) follows the service by name. */
	memcpy(old_ctl, d->ctl, sizeof(old_ctl));
	memcpy(old_books, d->books, sizeof(old_books));
	old_cfg = d->cfg;
	d->cfg = next;
	memcpy(d->idx, new_idx, sizeof(new_idx));
	for (int i = 0; i < d->cfg.n_services; i++) {
		int j = sluice_config_service_index(&old_cfg, d->cfg.services[i].name);

		if (j >= 0) {
			d->ctl[i] = old_ctl[j];
			d->books[i] = old_books[j];
			service_ctl_reconfigure(&d->ctl[i], &d->cfg.services[i], &d->cfg);
		} else {
			service_ctl_init(&d->ctl[i], &d->cfg.services[i], &d->cfg, now_ns + (unsigned)i,
					 now_ns);
			memset(&d->books[i], 0, sizeof(d->books[i]));
		}
	}
	sluice_cascade_params_from_conf(&d->cfg.cascade, &d->cp);
	free(d->cfg_text);
	d->cfg_text = text;
	d->cfg_len = len;
	d->reloads_ok++;
	daemon_event(d, SLUICE_EVM_CONFIG, "old", "new", "config reloaded", "", SLUICE_EV_INFO);
	return 1;
}

int daemon_metrics_body(void *ctx, char **body, size_t *len)
{
	struct daemon *d = ctx;
	static __thread struct status_snapshot snap;
	static __thread struct metrics_extra x;
	int rc;

	if (status_collect(&d->m, &snap, 0))
		return -1;
	pthread_mutex_lock(&d->lock);
	x = d->mx;
	pthread_mutex_unlock(&d->lock);
	rc = metrics_render(&snap, &x, body, len);
	return rc;
}
