// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The controller's state across restarts, through the real maps (user/daemon/ctlpersist.c,
 * user/control/ctlslot.c): one sluiced learns (limit, baseline, ladder, breaker) and writes
 * its entries; a second one on the same maps adopts them, and its first tick reads the
 * cumulative counters as a snapshot, not as one tick's delta. An entry is adopted only by the
 * service it was written for; baseline resets asked through ctl_requests are done once. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <cmocka.h>

#include <bpf/bpf.h>
#include "harness.h"
#include "daemon/daemon.h"
#include "daemon/ctlpersist.h"
#include "control/ctlslot.h"
#include "kernel/layout.h"
#include <dirent.h>
#include <pwd.h>
#include <sys/stat.h>

#define MS 1000000ull

/* getpwuid() counted: the baseline reset is done in the tick, which must not ask it. */
#include "../unit/pwcount.h"

static const char *CONFIG =
	"interface: lo\n"
	"services:\n"
	"  - name: web\n"
	"    port: 8080\n"
	"    protocol: http\n"
	"    limit: { min: 4, max: 256 }\n"
	"  - name: db\n"
	"    port: 5432\n"
	"    protocol: tcp\n"
	"    limit: { min: 2, max: 64 }\n";

struct world {
	struct fixture *f;
	struct daemon d;               /* the first sluiced */
	struct daemon d2;              /* the one after the restart */
	int started[2];                /* d, d2 initialised: their file writers run */
	char dir[64];                  /* their state directory */
	FILE *null;
};

static int setup(void **state)
{
	struct world *w = calloc(1, sizeof(*w));

	if (!w || !(w->f = harness_shared_fixture(CONFIG, 0, 60000 * MS)))
		return -1;
	w->null = fopen("/dev/null", "w");
	snprintf(w->dir, sizeof(w->dir), "/tmp/sluice-test-ctlst.XXXXXX");
	if (!w->null || !mkdtemp(w->dir))
		return -1;
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	struct daemon *ds[2] = { &w->d, &w->d2 };
	char rm[128];

	for (int k = 0; k < 2; k++)
		if (w->started[k]) {
			daemon_fini(ds[k], 1000);   /* the file writer, before its directory goes */
			daemon_free(ds[k]);
		}
	snprintf(rm, sizeof(rm), "rm -rf '%s'", w->dir);
	if (system(rm))
		return -1;
	fclose(w->null);
	harness_teardown((void **)&w->f);
	free(w);
	return 0;
}

static void start(struct world *w, struct daemon *d, uint64_t now)
{
	char err[256];

	memset(d, 0, sizeof(*d));
	d->cfg = w->f->cfg;
	snprintf(d->cfg.state_dir, sizeof(d->cfg.state_dir), "%s", w->dir);
	d->m = w->f->m;
	d->events = w->null;
	assert_int_equal(daemon_init(d, now, err, sizeof(err)), 0);
	w->started[d == &w->d2] = 1;
	daemon_ctl_import(d, now);
}

/* What the tick does before service i's controller: read the request slots, then act. */
static void requests(struct daemon *d, int i, uint64_t now)
{
	daemon_ctl_poll(d, d->idx[i] + 1);
	daemon_ctl_requests(d, i, now);
}

/* What an overload leaves behind in web's controller: a learned 50 ms baseline, a limit cut
 * to 23, L3 at a quarter and L2 off, the breaker open. */
static void learn(struct daemon *d, uint64_t now)
{
	struct service_ctl *s = &d->ctl[0];
	struct sluice_baseline_window bw = { .samples = 100, .latency_us = 50000, .calls = 100 };

	for (int k = 0; k < 30; k++)
		sluice_baseline_add(&s->base, &s->blp, &bw);
	assert_true(s->base.value_us > 40000);
	s->lim.limit = 23;
	s->lim.est = 23;
	s->lad.admit[3] = SLUICE_PROB_ONE / 4;
	s->lad.admit[2] = 0;
	s->lad.last_cut_ns = now;
	s->lad.cut_once = 1;
	s->brk.state = SLUICE_BREAKER_OPEN;
	s->brk.since_ns = now;
	s->brk.open_until_ns = now + 5000 * MS;
	s->brk.open_dur_s = 5;
}

/* The first sluiced, started at t, with what an overload left in web's controller (learn);
 * web's learned baseline. */
static double start_after_overload(struct world *w, uint64_t t)
{
	start(w, &w->d, t);
	learn(&w->d, t);
	return w->d.ctl[0].base.value_us;
}

/* Cumulative counters of a long life: 100 000 calls, all errors, on one CPU's slot. */
static void errors_in_counters(struct world *w, int svc)
{
	int n = w->f->m.ncpus;
	struct sluice_svc_stats *all = calloc((size_t)n, sizeof(*all));
	__u32 k = (__u32)svc;

	assert_non_null(all);
	all[0].cls[0].arrivals = all[0].cls[0].admitted = all[0].cls[0].completed =
		all[0].cls[0].errors = 100000;
	assert_int_equal(bpf_map_update_elem(w->f->m.class_stats, &k, all, BPF_ANY), 0);
	free(all);
}

static void tick(struct daemon *d, int i, uint64_t now, struct sluice_verdict *v, int *opened)
{
	struct ctl_inputs in;
	struct sluice_event_sink sink = { 0 };

	memset(&in, 0, sizeof(in));
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		assert_int_equal(maps_read_class_stats(&d->m, d->idx[i], c, &in.stats[c]), 0);
		assert_int_equal(maps_read_hist(&d->m, d->idx[i], c, &in.hist[c]), 0);
		in.switch_admit[c] = SLUICE_PROB_ONE;
	}
	service_ctl_tick(&d->ctl[i], &d->cfg.services[i], &in, 0, now, &sink, v, opened);
}

static void test_restart_continues(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns();
	struct sluice_verdict v;
	int opened = 1;
	double base;

	base = start_after_overload(w, t);
	assert_int_not_equal(w->d.ctl[1].lim.limit, 7);
	w->d.ctl[1].lim.limit = w->d.ctl[1].lim.est = 7;      /* db learned something too */
	for (int i = 0; i < w->d.cfg.n_services; i++)
		daemon_ctl_export(&w->d, i, t);
	errors_in_counters(w, w->d.idx[0]);

	/* the restart: a new sluiced on the same maps, 300 ms later */
	start(w, &w->d2, t + 300 * MS);
	assert_int_equal(w->d2.ctl[0].lim.limit, 23);
	assert_true(w->d2.ctl[0].base.value_us == base);
	assert_int_equal(w->d2.ctl[0].lad.admit[3], SLUICE_PROB_ONE / 4);
	assert_int_equal(w->d2.ctl[0].lad.admit[2], 0);
	assert_int_equal(w->d2.ctl[0].brk.state, SLUICE_BREAKER_OPEN);
	assert_true(w->d2.ctl[0].objective_us > 1.1 * base);   /* 1.2 x the adopted baseline */
	/* db's entry is adopted too (a literal: d's own value is also what a db that adopted
	 * nothing starts at) */
	assert_int_equal(w->d2.ctl[1].lim.limit, 7);

	/* the first tick takes a snapshot: 100 000 old errors are not one tick's delta */
	w->d2.ctl[0].brk.state = SLUICE_BREAKER_CLOSED;        /* so that an opening shows */
	tick(&w->d2, 0, t + 400 * MS, &v, &opened);
	assert_int_equal(opened, 0);
	assert_int_equal(v.limit, 23);
	assert_int_equal(v.shed_prob[2], SLUICE_PROB_ONE);      /* the ladder's cut in force */
	tick(&w->d2, 0, t + 500 * MS, &v, &opened);
	assert_int_equal(opened, 0);
	assert_int_equal(w->d2.ctl[0].brk.state, SLUICE_BREAKER_CLOSED);
}

/* A sluiced that comes back more than SLUICE_CTL_STATE_MAX_AGE_S after the entries were last
 * written (stopped for maintenance, say: the data path admitted everything meanwhile) takes
 * the baselines and the cascade suppression from them, not the limit, the class cuts or the
 * open breaker of the overload it last saw. */
static void test_restart_after_a_long_stop(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns(), later = t + (SLUICE_CTL_STATE_MAX_AGE_S + 1) * 1000 * MS;
	struct sluice_verdict v;
	int opened = 1;
	double base;

	base = start_after_overload(w, t);
	w->d.cascade.suspended = 1;
	w->d.cascade.suspended_since_ns = t;
	for (int i = 0; i < w->d.cfg.n_services; i++)
		daemon_ctl_export(&w->d, i, t);
	daemon_ctl_cascade(&w->d, t);

	start(w, &w->d2, later);
	assert_true(w->d2.ctl[0].base.value_us == base);
	assert_true(w->d2.ctl[0].objective_us > 1.1 * base);
	assert_int_not_equal(w->d2.ctl[0].lim.limit, 23);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		assert_int_equal(w->d2.ctl[0].lad.admit[c], SLUICE_PROB_ONE);
	assert_int_equal(w->d2.ctl[0].brk.state, SLUICE_BREAKER_CLOSED);
	assert_int_equal(w->d2.cascade.suspended, 1);
	/* its first tick writes a verdict that sheds nothing */
	tick(&w->d2, 0, later + 100 * MS, &v, &opened);
	assert_int_equal(opened, 0);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++)
		assert_int_equal(v.shed_prob[c], 0);
	assert_int_equal(v.breaker_state, SLUICE_BREAKER_CLOSED);
}

/* An entry belongs to the service it was written for: another name or port in that slot
 * starts afresh; a record of another version is refused, never misread. */
static void test_slot_guard(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns();
	static struct sluice_ctl_slot slot;
	struct service_conf other;
	struct service_ctl s;
	const char *why;

	start(w, &w->d, t);
	learn(&w->d, t);
	daemon_ctl_export(&w->d, 0, t);
	assert_int_equal(maps_read_ctl_slot(&w->f->m, w->d.idx[0], &slot), 0);

	other = w->d.cfg.services[0];
	snprintf(other.name, sizeof(other.name), "api");           /* the slot given to another */
	service_ctl_init(&s, &other, &w->d.cfg, 1, t);
	assert_int_equal(ctl_slot_adopt(&s, &other, &slot, t, &why), 0);
	assert_int_not_equal(s.lim.limit, 23);
	assert_non_null(strstr(why, "another service"));

	other = w->d.cfg.services[0];
	other.port = 8081;                                          /* same name, another port */
	service_ctl_init(&s, &other, &w->d.cfg, 1, t);
	assert_int_equal(ctl_slot_adopt(&s, &other, &slot, t, &why), 0);
	assert_int_not_equal(s.lim.limit, 23);

	slot.state_len -= 8;                                        /* another sluiced's record */
	service_ctl_init(&s, &w->d.cfg.services[0], &w->d.cfg, 1, t);
	assert_int_equal(ctl_slot_adopt(&s, &w->d.cfg.services[0], &slot, t, &why), -1);
	assert_int_not_equal(s.lim.limit, 23);

	slot.state_len += 8;                                        /* and the right one */
	assert_int_equal(ctl_slot_adopt(&s, &w->d.cfg.services[0], &slot, t, &why), 1);
	assert_int_equal(s.lim.limit, 23);

	/* the record of the sluiced before (state version 2: this record's prefix) is adopted, an
	 * upgrade keeping what the loop learned; the queue baselines it did not keep unlearned */
	{
		struct sluice_ctl_state *cs = (struct sluice_ctl_state *)(void *)slot.state;

		cs->version = 2;
		cs->size = SLUICE_CTL_STATE_V2_SIZE;
		slot.state_len = SLUICE_CTL_STATE_V2_SIZE;
		service_ctl_init(&s, &w->d.cfg.services[0], &w->d.cfg, 1, t);
		assert_int_equal(ctl_slot_adopt(&s, &w->d.cfg.services[0], &slot, t, &why), 1);
		assert_int_equal(s.lim.limit, 23);
		assert_true(s.base.value_us > 0);
		assert_true(s.base_little.value_us == 0 && s.base_mean.value_us == 0);
	}
}

/* The cascade suppression of breakers lasts until an operator lifts it (suspend_s 0), not
 * until sluiced restarts: the entries carry it, written again when it begins or ends, and
 * the next sluiced is suppressed from its start. Once lifted, the entries say so. */
static void test_cascade_carried_over(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns(), since = 1;
	/* 2 s before now, or the clock's first nanosecond on a host up for less */
	uint64_t began = t > 2000 * MS ? t - 2000 * MS : 1;
	static struct sluice_ctl_slot slot;

	start(w, &w->d, t);
	assert_int_equal(w->d.cascade.suspended, 0);
	w->d.cascade.suspended = 1;              /* what sluice_cascade_record_open leaves */
	w->d.cascade.suspended_since_ns = began;
	daemon_ctl_cascade(&w->d, t);
	for (int i = 0; i < w->d.cfg.n_services; i++) {
		assert_int_equal(maps_read_ctl_slot(&w->f->m, w->d.idx[i], &slot), 0);
		assert_int_equal(ctl_slot_cascade(&slot, &since), 1);
		assert_true(since == began);
	}

	start(w, &w->d2, t + 300 * MS);
	assert_int_equal(w->d2.cascade.suspended, 1);
	assert_true(w->d2.cascade.suspended_since_ns == began);
	assert_int_equal(sluice_cascade_tick(&w->d2.cascade, &w->d2.cp, t + 400 * MS, NULL), 1);

	sluice_cascade_clear(&w->d2.cascade, t + 500 * MS, "test", NULL);
	daemon_ctl_cascade(&w->d2, t + 500 * MS);
	assert_int_equal(maps_read_ctl_slot(&w->f->m, w->d2.idx[1], &slot), 0);
	assert_int_equal(ctl_slot_cascade(&slot, &since), 1);
	assert_true(since == 0);
}

/* Audit records "baseline reset" for web by uid 4242 in the state directory, once d's file
 * writer has written everything queued (at most 5 s). The uid names itself: no lookup thread
 * runs here to name it. */
static int reset_records(struct world *w, struct daemon *d)
{
	char path[128], line[2048];
	uint64_t done;
	unsigned long long busy;
	int queued, n = 0;
	FILE *f;

	for (int k = 0; k < 5000; k++) {
		iow_progress(&d->iow, &done, &busy, &queued);
		if (!queued && !busy)
			break;
		usleep(1000);
	}
	snprintf(path, sizeof(path), "%s/audit.log", w->dir);
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "\"command\":\"baseline reset\"") && strstr(line, "\"service\":\"web\"") &&
		     strstr(line, "\"uid\":4242") && strstr(line, "\"user\":\"uid4242\"") &&
		     strstr(line, "forgotten (request 1)");
	fclose(f);
	return n;
}

/* A reset asked through ctl_requests is done once, acknowledged in ctl_state, audited once
 * with the uid that asked, and stays done across a restart; a request for another port is
 * not this service's. The tick that does it asks the password database nothing. */
static void test_baseline_reset_request(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns();
	static struct sluice_ctl_slot slot;
	struct sluice_ctl_request rq = { .port = 8080, .reset_gen = 1, .uid = 4242 };

	start(w, &w->d, t);
	learn(&w->d, t);
	daemon_ctl_export(&w->d, 0, t);
	snprintf(rq.name, sizeof(rq.name), "web");

	rq.port = 8081;                                       /* not web's port: ignored */
	assert_int_equal(maps_write_ctl_request(&w->f->m, w->d.idx[0], &rq), 0);
	requests(&w->d, 0, t);
	assert_true(w->d.ctl[0].base.value_us > 0);
	assert_int_equal(reset_records(w, &w->d), 0);

	rq.port = 8080;
	assert_int_equal(maps_write_ctl_request(&w->f->m, w->d.idx[0], &rq), 0);
	getpwuid_calls = 0;
	requests(&w->d, 0, t);
	assert_true(w->d.ctl[0].base.value_us == 0);
	assert_int_equal(getpwuid_calls, 0);
	daemon_ctl_export(&w->d, 0, t);
	assert_int_equal(maps_read_ctl_slot(&w->f->m, w->d.idx[0], &slot), 0);
	assert_int_equal(slot.reset_ack, 1);
	assert_int_equal(slot.baseline_us, 0);
	assert_int_equal(reset_records(w, &w->d), 1);

	/* relearned, then the same request seen again (and after a restart): not redone */
	learn(&w->d, t);
	requests(&w->d, 0, t);
	assert_true(w->d.ctl[0].base.value_us > 0);
	rq.reset_gen = 0;                                    /* older than the ack: done before */
	assert_int_equal(maps_write_ctl_request(&w->f->m, w->d.idx[0], &rq), 0);
	requests(&w->d, 0, t);
	assert_true(w->d.ctl[0].base.value_us > 0);
	rq.reset_gen = 1;
	assert_int_equal(maps_write_ctl_request(&w->f->m, w->d.idx[0], &rq), 0);
	daemon_ctl_export(&w->d, 0, t);
	start(w, &w->d2, t + 100 * MS);
	assert_int_equal(w->d2.books[0].ctl_reset_ack, 1);
	requests(&w->d2, 0, t + 100 * MS);
	assert_true(w->d2.ctl[0].base.value_us > 0);
	assert_int_equal(reset_records(w, &w->d), 1);   /* done once, audited once */
	assert_int_equal(reset_records(w, &w->d2), 1);
}

/* A quiet service is skipped by the tick, but not while a baseline reset waits for it: the
 * tick runs its controller, which forgets the baseline. */
static void test_reset_wakes_quiet(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns();
	struct sluice_ctl_request rq = { .port = 8080, .reset_gen = 1 };
	unsigned long long skipped;

	start(w, &w->d, t);
	daemon_tick(&w->d, t);                 /* the first read: every service runs */
	learn(&w->d, t);
	w->d.books[0].quiet = 1;               /* nothing moves from here on */
	skipped = w->d.skipped;
	daemon_tick(&w->d, t + 100 * MS);
	assert_int_equal(w->d.books[0].ran, 0);
	assert_true(w->d.skipped > skipped);
	assert_true(w->d.ctl[0].base.value_us > 0);

	snprintf(rq.name, sizeof(rq.name), "web");
	assert_int_equal(maps_write_ctl_request(&w->f->m, w->d.idx[0], &rq), 0);
	daemon_tick(&w->d, t + 200 * MS);
	assert_int_equal(w->d.books[0].ran, 1);
	assert_int_equal(w->d.books[0].ctl_reset_ack, 1);
	assert_true(w->d.ctl[0].base.value_us == 0);
}

/* A quiet service whose counters moved runs its controller; a tick that then cannot read what
 * the controller needs (a histogram here) leaves it not quiet: its counters were read, so the
 * next tick sees no change of them, and it still runs then. */
static void test_quiet_service_failed_read_runs_next_tick(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns();
	int ncpus = libbpf_num_possible_cpus(), hist_fd;
	struct sluice_svc_stats *st = calloc((size_t)ncpus, sizeof(*st));
	__u32 k;

	assert_non_null(st);
	start(w, &w->d, t);
	k = (__u32)w->d.idx[0];
	daemon_tick(&w->d, t);
	learn(&w->d, t);
	w->d.books[0].quiet = 1;
	daemon_tick(&w->d, t + 100 * MS);
	assert_int_equal(w->d.books[0].ran, 0);
	/* L0 took a latency sample; its histogram cannot be read */
	assert_int_equal(bpf_map_lookup_elem(w->d.m.class_stats, &k, st), 0);
	st[0].samples[0] += 100000;           /* more than a calm controller holds back */
	st[0].cls[0].admitted++;
	assert_int_equal(bpf_map_update_elem(w->d.m.class_stats, &k, st, BPF_ANY), 0);
	hist_fd = w->d.m.latency_hist;
	w->d.m.latency_hist = -1;
	daemon_tick(&w->d, t + 200 * MS);
	assert_int_equal(w->d.books[0].ran, 0);
	w->d.m.latency_hist = hist_fd;
	daemon_tick(&w->d, t + 300 * MS);
	assert_int_equal(w->d.books[0].ran, 1);
	free(st);
}

/* The kernel finds the slots whose request the controller has not acknowledged (the tick
 * reads those only): a generation above its ctl_state entry's ack, none written, an ack that
 * caught up, a slice's bounds, more than the list holds, a slice past the map's end. And a
 * sluiced without the program reads the whole slice and still does the request. */
static void test_pending_requests_found_in_kernel(void **state)
{
	struct world *w = *state;
	struct sluice_maps *m = &w->f->m;
	static struct sluice_ctl_slot slot;
	struct sluice_pending_requests a;
	struct sluice_ctl_request rq = { .port = 9000 };
	uint64_t t = monotonic_ns();

	assert_true(m->pending_prog >= 0);
	assert_true(m->n_slots >= 48);
	assert_int_equal(maps_pending_requests(m, 0, (__u32)m->n_slots, &a), 0);
	assert_int_equal(a.found, 0);                      /* nothing asked yet */

	snprintf(rq.name, sizeof(rq.name), "x");
	rq.reset_gen = 3;                                  /* slot 5: acknowledged */
	assert_int_equal(maps_write_ctl_request(m, 5, &rq), 0);
	memset(&slot, 0, sizeof(slot));
	slot.reset_ack = 3;
	assert_int_equal(maps_write_ctl_slot(m, 5, &slot), 0);
	rq.reset_gen = 4;                                  /* slot 9: above its ack */
	assert_int_equal(maps_write_ctl_request(m, 9, &rq), 0);
	assert_int_equal(maps_write_ctl_slot(m, 9, &slot), 0);
	rq.reset_gen = 1;                                  /* slot 12: no state written */
	assert_int_equal(maps_write_ctl_request(m, 12, &rq), 0);
	assert_int_equal(maps_pending_requests(m, 0, (__u32)m->n_slots, &a), 0);
	assert_int_equal(a.found, 2);
	assert_int_equal(a.slot[0], 9);
	assert_int_equal(a.slot[1], 12);
	assert_int_equal(maps_pending_requests(m, 10, 20, &a), 0);   /* from slot 10 on */
	assert_int_equal(a.found, 1);
	assert_int_equal(a.slot[0], 12);
	assert_int_equal(maps_pending_requests(m, 0, 9, &a), 0);     /* up to slot 8 */
	assert_int_equal(a.found, 0);
	slot.reset_ack = 4;                                /* slot 9 done */
	assert_int_equal(maps_write_ctl_slot(m, 9, &slot), 0);
	assert_int_equal(maps_pending_requests(m, 0, (__u32)m->n_slots, &a), 0);
	assert_int_equal(a.found, 1);
	assert_int_equal(a.slot[0], 12);
	assert_int_equal(maps_pending_requests(m, 1, (__u32)m->n_slots, &a), -ERANGE);

	/* more than the list holds: all counted, the first listed */
	for (int k = 13; k < 13 + SLUICE_PENDING_MAX + 2; k++)
		assert_int_equal(maps_write_ctl_request(m, k, &rq), 0);
	assert_int_equal(maps_pending_requests(m, 0, (__u32)m->n_slots, &a), 0);
	assert_int_equal(a.found, SLUICE_PENDING_MAX + 3);
	assert_int_equal(a.slot[0], 12);
	assert_int_equal(a.slot[SLUICE_PENDING_MAX - 1], 12 + SLUICE_PENDING_MAX - 1);

	/* without the program: the slice read whole, web's request done all the same */
	start(w, &w->d, t);
	learn(&w->d, t);
	w->d.m.pending_prog = -1;
	memset(&rq, 0, sizeof(rq));
	snprintf(rq.name, sizeof(rq.name), "web");
	rq.port = 8080;
	rq.reset_gen = 1;
	assert_int_equal(maps_write_ctl_request(m, w->d.idx[0], &rq), 0);
	requests(&w->d, 0, t);
	assert_int_equal(w->d.ctl_rq_listed, -1);
	assert_true(w->d.ctl[0].base.value_us == 0);
	assert_int_equal(w->d.books[0].ctl_reset_ack, 1);
}

struct scrape {
	struct daemon *d;
	char *body;
	size_t len;
	int rc, done;
};

static void *scrape_thread(void *arg)
{
	struct scrape *s = arg;

	s->rc = daemon_metrics_body(s->d, &s->body, &s->len);
	__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The value of `name` (with its labels, as written) in a /metrics body, or -1. */
static double metric_value(const char *body, const char *name)
{
	const char *p = body ? strstr(body, name) : NULL;

	return p ? strtod(p + strlen(name), NULL) : -1;
}

/* The controller's rows of /metrics are filled by the tick a scrape asks (none while nobody
 * scrapes); a scrape of a daemon that stopped ticking waits two ticks and gives the last rows. */
static void test_metrics_filled_when_scraped(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns();
	struct scrape s = { .d = &w->d };
	const char *row = "sluice_managed_seconds_total{service=\"web\"}";
	unsigned long long t0, waited;
	pthread_t th;
	int k;

	start(w, &w->d, t);
	for (k = 0; k < 5; k++)
		daemon_tick(&w->d, t + (uint64_t)k * 100 * MS);
	assert_int_equal(w->d.mx_gen, 0);                  /* nobody asked: nothing filled */
	assert_int_equal(w->d.mx.n, 0);

	assert_int_equal(pthread_create(&th, NULL, scrape_thread, &s), 0);
	for (k = 0; k < 2000 && !__atomic_load_n(&w->d.mx_asked, __ATOMIC_ACQUIRE); k++)
		usleep(1000);
	assert_true(w->d.mx_asked);
	/* asked and waiting for a tick (how long it waits without one is measured below) */
	assert_false(__atomic_load_n(&s.done, __ATOMIC_ACQUIRE));
	daemon_tick(&w->d, t + 500 * MS);
	pthread_join(th, NULL);
	assert_int_equal(s.rc, 0);
	assert_int_equal(w->d.mx_gen, 1);
	assert_int_equal(w->d.mx_asked, 0);
	assert_true(metric_value(s.body, row) >= 0.39);     /* 4 ticks of 0.1 s managed */
	free(s.body);

	/* no tick comes: the last rows, after at most two ticks' wait */
	t0 = monotonic_ns();
	s.body = NULL;
	assert_int_equal(daemon_metrics_body(&w->d, &s.body, &s.len), 0);
	waited = monotonic_ns() - t0;
	assert_true(waited >= 200 * MS && waited < 2000 * MS);
	assert_int_equal(w->d.mx_gen, 1);
	assert_true(metric_value(s.body, row) >= 0.39);
	free(s.body);
	w->d.mx_asked = 0;
}

/* What writing the entry after every tick costs (printed; the daemon writes one per service
 * per tick). */
static void test_export_cost(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns(), t0, t1;
	int n = 2000;

	start(w, &w->d, t);
	t0 = monotonic_ns();
	for (int k = 0; k < n; k++)
		daemon_ctl_export(&w->d, k & 1, t);
	t1 = monotonic_ns();
	printf("# ctl_state export: %.2f us per service and tick (%d writes of %zu bytes)\n",
	       (double)(t1 - t0) / n / 1e3, n, sizeof(struct sluice_ctl_slot));
}

static void rm_pins(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[512];

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Pins of layout 3, 4 or 5 (every map but those it never had, a record saying so): a sluiced
 * of this layout migrates them by creating the missing maps empty, copying flows (3 and 4) and
 * adopting the rest as they are (a verdict written before is still there), and records its own
 * layout. */
static char mig_dir[128];

/* These tests load objects of their own, not the suite's shared one: each loads against maps
 * pinned as an older layout left them (pin_root_path), which only a load can adopt. */
static int setup_mig(void **state)
{
	snprintf(mig_dir, sizeof(mig_dir), "/sys/fs/bpf/sluice-ctlst-%d", getpid());
	return mkdir(mig_dir, 0700);
}

/* Pass or fail, no pin stays behind. */
static int teardown_mig(void **state)
{
	rm_pins(mig_dir);
	return 0;
}

/* The maps keyed by flow key as a layout before 7 pinned them: keys without the local
 * address (empty here; layout_v7.c gives carried entries theirs, test_layout.c). */
static void pin_short_keys(const char *dir, struct sluice_bpf *a)
{
	const struct bpf_map *maps[] = { a->maps.flows, a->maps.handshakes, a->maps.rejected_syns };
	char path[256];

	for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		int fd = bpf_map_create(bpf_map__type(maps[i]), bpf_map__name(maps[i]),
					layout_rekey_old_size(), bpf_map__value_size(maps[i]),
					bpf_map__max_entries(maps[i]), NULL);

		assert_true(fd >= 0);
		snprintf(path, sizeof(path), "%s/%s", dir, bpf_map__name(maps[i]));
		unlink(path);
		assert_int_equal(bpf_obj_pin(fd, path), 0);
		close(fd);
	}
}

/* Replace the pin DIR/NAME by a per-CPU array of ENTRIES values of VALUE_SIZE bytes whose
 * entry KEY holds VALUE on the first CPU: a map as an older layout left it. */
static void pin_old_percpu(const char *dir, const char *name, size_t value_size, unsigned entries,
			   __u32 key, const void *value)
{
	char path[256];
	char *all = calloc((size_t)libbpf_num_possible_cpus(), value_size);
	int fd;

	assert_non_null(all);
	memcpy(all, value, value_size);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(unlink(path), 0);
	fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, name, sizeof(__u32), value_size, entries,
			    NULL);
	assert_true(fd >= 0);
	assert_int_equal(bpf_map_update_elem(fd, &key, all, BPF_ANY), 0);
	assert_int_equal(bpf_obj_pin(fd, path), 0);
	close(fd);
	free(all);
}

/* Layouts before 7 counted per service and class: class_stats as they left it, one per-CPU
 * entry of one class's counters for each of the slots' classes, with counts in it. */
static void old_class_stats(const char *dir, unsigned slots)
{
	struct sluice_class_stats v = { .arrivals = 777, .admitted = 777 };

	pin_old_percpu(dir, "class_stats", sizeof(v), slots * SLUICE_NUM_CLASSES, 1, &v);
}

/* Layouts before 8 kept every class's histograms in latency_hist, one per-CPU entry per
 * service and class (at service x 4 + class): as they left it, with a count in slot 1's L2. */
static void old_latency_hist(const char *dir, unsigned slots)
{
	static struct sluice_hist v = { .bucket[20] = 555 };

	pin_old_percpu(dir, "latency_hist", sizeof(v), slots * SLUICE_NUM_CLASSES,
		       sluice_stat_index(1, 2), &v);
}

/* Pins as layout `from` (3 to 7) left them (layout 8's upgrade: tests/e2e/test_layout.sh): the maps it never had gone, the record saying
 * `from`, latency_hist one entry per service and class; before 7 also flow keys without the
 * local address and class_stats one entry per service and class. This build migrates them in
 * place: flows copied from 3 and 4 (its new tcp fields are zero in an older flow; 5's flows
 * are this layout's), flows, handshakes and rejected_syns copied under their longer keys
 * (before 7), class_stats (before 7) and latency_hist replaced unread by empty ones of this
 * layout, every other pinned map adopted, the missing maps created empty and pinned. */
static void migrate_from(__u32 from)
{
	/* the maps new in layout 10, the maps new in 9 (n_v9), then 8's (n_v8), 7's (n_v7),
	 * 6's (n_v6), 5's, 4's */
	static const char *const never_had[] = { "handshake_slots", "flow_hash_key",
						 "http_conns", "http_conn_cap",
						 "latency_hist1", "latency_hist2",
						 "latency_hist3",
						 "sluice_layout_ext", "untrusted_marks",
						 "conn_cap", "addr_services",
						 "inflight_pcpu", "busy",
						 "busy_released", "ctl_state", "ctl_requests" };
	const int n_v9 = 2, n_v8 = 3, n_v7 = 2, n_v6 = 3;
	const int n_gone = 2 + n_v9 + n_v8 + (from <= 6 ? n_v7 : 0) + (from <= 5 ? n_v6 : 0) +
			   (from <= 3 ? 4 : from == 4 ? 2 : 0);
	const char *dir = mig_dir;
	char path[256], err[512], want[64];
	struct sluice_bpf *a, *b;
	struct layout_plan lp;
	struct sluice_layout rec = { .version = from };
	struct sluice_verdict v = { .limit = 4242 }, got;
	struct sluice_inflight busy;
	static struct sluice_ctl_slot slot;
	static struct sluice_layout_ext ext;
	struct sluice_untrusted *untrusted = calloc(libbpf_num_possible_cpus(), sizeof(*untrusted));
	struct sluice_svc_stats st;
	struct bpf_map_info info;
	__u32 k = 0, ilen = sizeof(info);
	int fd;

	{
		LIBBPF_OPTS(bpf_object_open_opts, o, .pin_root_path = dir);
		a = sluice_bpf__open_opts(&o);
		assert_non_null(a);
		assert_int_equal(sluice_bpf__load(a), 0);
	}
	for (int i = 0; i < n_gone; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, never_had[i]);
		unlink(path);
	}
	old_latency_hist(dir, bpf_map__max_entries(a->maps.services));
	if (from <= 6)
		old_class_stats(dir, bpf_map__max_entries(a->maps.services));
	if (from >= 5) {   /* 3 and 4 lack maps a sluicectl of any layout since 5 opens */
		struct sluice_maps om;
		struct sluice_class_stats cs;
		struct sluice_hist h;

		/* a sluicectl of this layout on them reads no counters rather than misread ones
		 * (before 7), and the histograms where that layout kept them */
		assert_int_equal(maps_open_pinned(dir, &om), 0);
		assert_true(from <= 6 ? om.class_stats < 0 : om.class_stats >= 0);
		assert_true(om.services >= 0);
		if (from <= 6)
			assert_true(maps_read_class_stats(&om, 1, 0, &cs) != 0);
		assert_true(om.latency_hist1 < 0);
		assert_int_equal(maps_read_hist(&om, 1, 2, &h), 0);
		assert_int_equal(h.bucket[20], 555);
		assert_int_equal(maps_read_hist(&om, 1, 1, &h), 0);
		assert_int_equal(h.bucket[20], 0);
		maps_close(&om);
	}
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(a->maps.sluice_layout), &k, &rec, 0), 0);
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(a->maps.verdicts), &k, &v, 0), 0);
	if (from <= 6)
		pin_short_keys(dir, a);

	{
		LIBBPF_OPTS(bpf_object_open_opts, o, .pin_root_path = dir);
		b = sluice_bpf__open_opts(&o);
		assert_non_null(b);
	}
	if (layout_plan(&lp, b->obj, dir, NULL, err, sizeof(err)))
		fail_msg("layout %u pins refused: %s", from, err);
	assert_int_equal(lp.action, LAYOUT_MIGRATE);
	assert_int_equal(lp.pinned, from);
	for (int i = 0; i < lp.n; i++) {
		const char *name = bpf_map__name(lp.slot[i].map);

		int renew = (from <= 6 && !strcmp(name, "class_stats")) ||
			    !strcmp(name, "latency_hist");

		assert_int_equal(lp.slot[i].renew, renew);
		assert_int_equal(lp.slot[i].copy, renew || (from <= 6 && (!strcmp(name, "flows") ||
				 !strcmp(name, "handshakes") || !strcmp(name, "rejected_syns"))));
	}
	assert_int_equal(sluice_bpf__load(b), 0);
	assert_int_equal(layout_copy(&lp, err, sizeof(err)), 0);
	assert_int_equal(layout_commit(&lp, b->obj, dir, err, sizeof(err)), 0);
	layout_plan_release(&lp);
	snprintf(want, sizeof(want), "from layout %u to %u", from, layout_version());
	assert_non_null(strstr(lp.note, want));

	/* adopted: the same verdicts map; created: the maps it never had, empty and pinned */
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(b->maps.verdicts), &k, &got), 0);
	assert_int_equal(got.limit, 4242);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(b->maps.ctl_state), &k, &slot), 0);
	assert_int_equal(slot.name[0], 0);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(b->maps.busy), &k, &busy), 0);
	assert_int_equal(busy.total, 0);
	for (int i = 0; i < n_gone; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, never_had[i]);
		assert_int_equal(access(path, F_OK), 0);
	}
	/* class_stats: this layout's shape under the old pin's name, counting from zero */
	snprintf(path, sizeof(path), "%s/class_stats", dir);
	fd = bpf_obj_get(path);
	assert_true(fd >= 0);
	memset(&info, 0, sizeof(info));
	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &ilen), 0);
	assert_int_equal(info.value_size, sizeof(struct sluice_svc_stats));
	assert_int_equal(info.max_entries, bpf_map__max_entries(b->maps.services));
	close(fd);
	assert_int_equal(maps_read_svc_stats(&(struct sluice_maps){
		.class_stats = bpf_map__fd(b->maps.class_stats),
		.ncpus = libbpf_num_possible_cpus() }, 1, &st), 0);
	assert_int_equal(st.cls[0].arrivals, 0);
	assert_true((strstr(lp.note, "class_stats regrouped by service") != NULL) == (from <= 6));
	/* latency_hist: L0's only, one entry per service, starting from zero */
	snprintf(path, sizeof(path), "%s/latency_hist", dir);
	fd = bpf_obj_get(path);
	assert_true(fd >= 0);
	memset(&info, 0, sizeof(info));
	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &ilen), 0);
	assert_int_equal(info.max_entries, bpf_map__max_entries(b->maps.services));
	close(fd);
	assert_true(strstr(lp.note, "latency_hist split by class") != NULL);
	{
		struct sluice_maps nm;
		struct sluice_hist h;

		assert_int_equal(maps_open_pinned(dir, &nm), 0);
		assert_true(nm.latency_hist3 >= 0);
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			assert_int_equal(maps_read_hist(&nm, 1, c, &h), 0);
			assert_int_equal(h.bucket[20], 0);
		}
		maps_close(&nm);
	}
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(b->maps.sluice_layout), &k, &rec), 0);
	assert_int_equal(rec.version, layout_version());
	/* the record's continuation: the same version, the maps beyond the first record's room */
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(b->maps.sluice_layout_ext), &k, &ext), 0);
	assert_int_equal(ext.version, layout_version());
	assert_int_equal(rec.n_maps + ext.n_maps, lp.n);
	assert_true(lp.n > SLUICE_LAYOUT_MAX_MAPS);
	assert_int_equal(rec.n_maps, SLUICE_LAYOUT_MAX_MAPS);
	/* no priority mark counted yet */
	assert_non_null(untrusted);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(b->maps.untrusted_marks), &k, untrusted),
			 0);
	for (int c = 0; c < libbpf_num_possible_cpus(); c++)
		assert_int_equal(untrusted[c].ignored, 0);
	free(untrusted);
	sluice_bpf__destroy(b);
	sluice_bpf__destroy(a);
}

static void test_migration_from_3(void **state)
{
	(void)state;
	migrate_from(3);
}

static void test_migration_from_4(void **state)
{
	(void)state;
	migrate_from(4);
}

static void test_migration_from_5(void **state)
{
	(void)state;
	migrate_from(5);
}

static void test_migration_from_6(void **state)
{
	(void)state;
	migrate_from(6);
}

static void test_migration_from_7(void **state)
{
	(void)state;
	migrate_from(7);
}

/* The record holds more maps than `sluice_layout` has room for: a fresh start writes the rest
 * into `sluice_layout_ext`, and a map recorded there is checked like one recorded in the first
 * record: a restart refuses it when its types differ from its entry, and adopts it as it is. */
static void test_record_continues_in_second_map(void **state)
{
	const char *dir = mig_dir;
	char err[512];
	struct sluice_bpf *a, *b;
	struct layout_plan lp;
	static struct sluice_layout_ext ext, good;
	struct sluice_layout rec;
	int at = -1;
	__u32 k = 0;

	(void)state;
	{
		LIBBPF_OPTS(bpf_object_open_opts, o, .pin_root_path = dir);
		a = sluice_bpf__open_opts(&o);
		assert_non_null(a);
	}
	assert_int_equal(layout_plan(&lp, a->obj, dir, NULL, err, sizeof(err)), 0);
	assert_int_equal(lp.action, LAYOUT_FRESH);
	assert_int_equal(sluice_bpf__load(a), 0);
	assert_int_equal(layout_commit(&lp, a->obj, dir, err, sizeof(err)), 0);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(a->maps.sluice_layout), &k, &rec), 0);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(a->maps.sluice_layout_ext), &k, &ext), 0);
	assert_int_equal(rec.n_maps, SLUICE_LAYOUT_MAX_MAPS);
	assert_int_equal(ext.version, rec.version);
	assert_int_equal(rec.n_maps + ext.n_maps, lp.n);
	for (__u32 i = 0; i < ext.n_maps; i++)
		if (!strcmp(ext.map[i].name, "untrusted_marks"))
			at = (int)i;
	for (__u32 i = 0; i < rec.n_maps; i++)
		assert_string_not_equal(rec.map[i].name, "untrusted_marks");
	if (at < 0)
		fail_msg("untrusted_marks is not in the continuation (the object's order changed: "
			 "%u maps there)", ext.n_maps);
	good = ext;

	/* Same layout, the continuation's entry of untrusted_marks says other types: refused. */
	ext.map[at].btf_hash ^= 0x5a5a5a5a5a5a5a5aull;
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(a->maps.sluice_layout_ext), &k, &ext, 0),
			 0);
	{
		LIBBPF_OPTS(bpf_object_open_opts, o, .pin_root_path = dir);
		b = sluice_bpf__open_opts(&o);
		assert_non_null(b);
	}
	assert_int_equal(layout_plan(&lp, b->obj, dir, NULL, err, sizeof(err)), -EPROTO);
	if (!strstr(err, "map untrusted_marks does not match it (key/value types differ"))
		fail_msg("refused for another reason: %s", err);
	sluice_bpf__destroy(b);

	/* Put back: adopted. */
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(a->maps.sluice_layout_ext), &k, &good, 0),
			 0);
	{
		LIBBPF_OPTS(bpf_object_open_opts, o, .pin_root_path = dir);
		b = sluice_bpf__open_opts(&o);
		assert_non_null(b);
	}
	if (layout_plan(&lp, b->obj, dir, NULL, err, sizeof(err)))
		fail_msg("refused: %s", err);
	assert_int_equal(lp.action, LAYOUT_ADOPT);
	sluice_bpf__destroy(b);
	sluice_bpf__destroy(a);
}

/* Lines of f (rewound) that contain needle. */
static int lines_with(FILE *f, const char *needle)
{
	char line[4096];
	int n = 0;

	fflush(f);
	rewind(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	return n;
}

/* Counters that cannot be read freeze every verdict where it stands (BPF keeps enforcing it,
 * the heartbeat still beats): said once as an alert, not at every tick and not only at debug
 * level, and said again when they can be read. */
static void test_unreadable_counters_said_once(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns();
	FILE *ev = tmpfile();
	int fd;

	assert_non_null(ev);
	start(w, &w->d, t);
	w->d.events = ev;
	daemon_tick(&w->d, t);
	fd = w->d.m.class_stats;
	w->d.m.class_stats = -1;                  /* every read of the counters fails */
	for (int k = 1; k <= 5; k++)
		daemon_tick(&w->d, t + (uint64_t)k * 100 * MS);
	assert_int_equal(lines_with(ev, "cannot read the counters"), 1);
	w->d.m.class_stats = fd;
	daemon_tick(&w->d, t + 600 * MS);
	daemon_tick(&w->d, t + 700 * MS);
	assert_int_equal(lines_with(ev, "counters read again"), 1);
	w->d.events = w->null;
	fclose(ev);
}

/* A tick whose read of the globals fails must not write back zeros over where the programs
 * are attached: `sluicectl detach` finds the TC filters by them. A descriptor of the globals
 * map opened write-only makes every read fail (EPERM) while writes go through. */
static void test_unreadable_globals_keep_the_attachment(void **state)
{
	struct world *w = *state;
	uint64_t t = monotonic_ns();
	struct sluice_globals g;
	struct bpf_map_info info;
	__u32 len = sizeof(info);
	int fd;
	LIBBPF_OPTS(bpf_get_fd_by_id_opts, o, .open_flags = BPF_F_WRONLY);

	start(w, &w->d, t);
	assert_int_equal(maps_read_globals(&w->d.m, &g), 0);
	g.ifindex = 7;
	g.netns_ino = 4026531840ull;
	assert_int_equal(maps_write_globals(&w->d.m, &g), 0);
	daemon_tick(&w->d, t);
	memset(&info, 0, sizeof(info));
	assert_int_equal(bpf_obj_get_info_by_fd(w->d.m.globals, &info, &len), 0);
	fd = w->d.m.globals;
	w->d.m.globals = bpf_map_get_fd_by_id_opts(info.id, &o);
	assert_true(w->d.m.globals >= 0);
	assert_int_not_equal(maps_read_globals(&w->d.m, &g), 0);
	daemon_tick(&w->d, t + 100 * MS);
	close(w->d.m.globals);
	w->d.m.globals = fd;
	assert_int_equal(maps_read_globals(&w->d.m, &g), 0);
	assert_int_equal(g.heartbeat_ns, t + 100 * MS);   /* the heartbeat still beats */
	assert_int_equal(g.ifindex, 7);
	assert_int_equal(g.netns_ino, 4026531840ull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_restart_continues, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restart_after_a_long_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slot_guard, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cascade_carried_over, setup, teardown),
		cmocka_unit_test_setup_teardown(test_baseline_reset_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reset_wakes_quiet, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quiet_service_failed_read_runs_next_tick, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unreadable_counters_said_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unreadable_globals_keep_the_attachment, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_pending_requests_found_in_kernel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metrics_filled_when_scraped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_cost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_migration_from_3, setup_mig, teardown_mig),
		cmocka_unit_test_setup_teardown(test_migration_from_4, setup_mig, teardown_mig),
		cmocka_unit_test_setup_teardown(test_migration_from_5, setup_mig, teardown_mig),
		cmocka_unit_test_setup_teardown(test_migration_from_6, setup_mig, teardown_mig),
		cmocka_unit_test_setup_teardown(test_migration_from_7, setup_mig, teardown_mig),
		cmocka_unit_test_setup_teardown(test_record_continues_in_second_map, setup_mig,
						teardown_mig),
	};
	return cmocka_run_group_tests(tests, NULL, harness_shared_release);
}
