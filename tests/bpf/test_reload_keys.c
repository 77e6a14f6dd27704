// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* A reload may change only what a reload can apply. switch_group is read at start by the
 * file writer, which gives the state dir and the audit log to that group after every audit
 * line: a reload that took a new group would let its members change switches through the
 * socket while the files stayed the old group's (the new members reading no `switch ls`,
 * the old ones still reading it). It is refused like the other keys that need a restart,
 * and the running config stays in force. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <cmocka.h>

#include "harness.h"
#include "oldslots.h"
#include "daemon/daemon.h"
#include "daemon/opserver.h"
#include "daemon/ctlpersist.h"
#include "control/ctlslot.h"
#include "ops/opproto.h"

static const char *OLD =
	"interface: lo\n"
	"switch_group: sre\n"
	"services:\n"
	"  - { name: a, port: 8080, protocol: tcp, limit: { fixed: 10 } }\n";
static const char *NEW =
	"interface: lo\n"
	"switch_group: ops\n"
	"services:\n"
	"  - { name: a, port: 8080, protocol: tcp, limit: { fixed: 20 } }\n";

static int setup(void **state)
{
	struct fixture *f = harness_shared_fixture(OLD, 0, 1000000000ull);

	*state = f;
	return f ? 0 : -1;
}

/* A daemon d running `running` on the fixture's maps (slots assigned, services programmed,
 * controllers initialised at now, events to /dev/null), whose config file (path, a mkstemp
 * template) already holds `next`: what its reload reads. Returns the services running. */
static int run_then_edit(struct fixture *f, struct daemon *d, const char *running,
			 const char *next, char *path, uint64_t now)
{
	struct doc_errors errs;
	int fd = mkstemp(path), n;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, next, strlen(next)), (ssize_t)strlen(next));
	close(fd);
	memset(d, 0, sizeof(*d));
	assert_int_equal(sluice_config_parse(running, strlen(running), "old", &d->cfg, &errs), 0);
	n = d->cfg.n_services;
	d->m = f->m;
	d->idx = calloc(2 * (size_t)n, sizeof(*d->idx));
	d->ctl = calloc((size_t)n, sizeof(*d->ctl));
	d->books = calloc((size_t)n, sizeof(*d->books));
	assert_non_null(d->idx);
	assert_non_null(d->ctl);
	assert_non_null(d->books);
	assert_int_equal(maps_assign_indices(&d->m, &d->cfg, d->idx), 0);
	assert_int_equal(maps_program_services(&d->m, &d->cfg, d->idx), 0);
	/* the tick's reader, as daemon_init makes it: a reload tells it which slots it reads */
	assert_int_equal(maps_reader_init(&d->rd, &d->m), 0);
	for (int i = 0; i < n; i++)
		service_ctl_init(&d->ctl[i], &d->cfg.services[i], &d->cfg, 1, now);
	d->events = fopen("/dev/null", "w");
	snprintf(d->cfg_path, sizeof(d->cfg_path), "%s", path);
	return n;
}

static void daemon_gone(struct daemon *d)
{
	maps_reader_free(&d->rd);
	recon_free(&d->recon);
	fclose(d->events);
	free(d->ctl);
	free(d->books);
	free(d->idx);
	sluice_config_free(&d->cfg);
}

static void test_switch_group_change_needs_a_restart(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char path[] = "/tmp/sluice-reload-XXXXXX";
	int rc;

	run_then_edit(f, &d, OLD, NEW, path, 1);
	rc = daemon_reload(&d, 1, monotonic_ns());
	assert_int_equal(rc, -1);
	assert_int_equal(d.reloads_failed, 1);
	assert_int_equal(d.reloads_ok, 0);
	/* the refused bytes are remembered: the next look at the same file reports nothing */
	rc = daemon_reload(&d, 0, monotonic_ns());
	unlink(path);
	assert_int_equal(rc, 0);
	assert_int_equal(d.reloads_failed, 1);
	assert_string_equal(d.cfg.switch_group, "sre");
	assert_int_equal(d.cfg.services[0].limit_fixed, 10);
	daemon_gone(&d);
}

/* An applied reload hands each service's learned state to the service of that name, wherever
 * the new list puts it: here the first service goes (every later one moves up), two swap and
 * one is new. */
static const char *RUNNING =
	"interface: lo\n"
	"services:\n"
	"  - { name: a, port: 8080, protocol: tcp }\n"
	"  - { name: b, port: 8081, protocol: tcp }\n"
	"  - { name: c, port: 8082, protocol: tcp }\n"
	"  - { name: d, port: 8083, protocol: tcp }\n";
static const char *MOVED =
	"interface: lo\n"
	"services:\n"
	"  - { name: c, port: 8082, protocol: tcp }\n"
	"  - { name: b, port: 8081, protocol: tcp }\n"
	"  - { name: d, port: 8083, protocol: tcp }\n"
	"  - { name: e, port: 8084, protocol: tcp }\n";

static void test_learned_state_follows_the_name(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char path[] = "/tmp/sluice-reload-XXXXXX";
	int n = run_then_edit(f, &d, RUNNING, MOVED, path, 1);
	int rc;

	/* what each running service learned: a baseline of (its index + 1) ms */
	for (int i = 0; i < n; i++) {
		d.ctl[i].base.value_us = 1000u * (unsigned)(i + 1);
		d.books[i].ctl_reset_ack = (unsigned)(i + 1);
	}

	rc = daemon_reload(&d, 1, monotonic_ns());
	unlink(path);
	assert_int_equal(rc, 1);
	assert_int_equal(d.reloads_ok, 1);
	assert_int_equal(d.cfg.n_services, 4);
	assert_string_equal(d.cfg.services[0].name, "c");
	assert_int_equal(d.ctl[0].base.value_us, 3000);
	assert_int_equal(d.books[0].ctl_reset_ack, 3);
	assert_int_equal(d.ctl[1].base.value_us, 2000);
	assert_int_equal(d.books[1].ctl_reset_ack, 2);
	assert_int_equal(d.ctl[2].base.value_us, 4000);
	assert_int_equal(d.books[2].ctl_reset_ack, 4);
	assert_int_equal(d.ctl[3].base.value_us, 0);     /* e: new, nothing learned */
	assert_int_equal(d.books[3].ctl_reset_ack, 0);
	daemon_gone(&d);
}

/* An operator's request is judged against the maps at the next tick; a config reload may come
 * in between (it runs before the tick). Here `breaker reset b` is asked while a, b and c run,
 * and the reload removes a: b moves up, c takes the place b had. The answer must judge b's
 * breaker (closed), not that of the service now at b's old place (c's, open). */
static void test_request_judged_after_a_reload(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	static struct opserver ops = { .lfd = -1 };
	char dir[] = "/tmp/sluice-reload-ops-XXXXXX", sock[128], why[256];
	char path[] = "/tmp/sluice-reload-XXXXXX";
	const char *running = "interface: lo\nservices:\n"
		"  - { name: a, port: 8080, protocol: tcp }\n"
		"  - { name: b, port: 8081, protocol: tcp }\n"
		"  - { name: c, port: 8082, protocol: tcp }\n";
	const char *next = "interface: lo\nservices:\n"
		"  - { name: b, port: 8081, protocol: tcp }\n"
		"  - { name: c, port: 8082, protocol: tcp }\n";
	int cfd;
	struct sluice_verdict v;
	json_t *req, *ans = NULL, *seen;

	assert_non_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/ops.sock", dir);
	run_then_edit(f, &d, running, next, path, 1);
	assert_int_equal(ops_listen(&ops, sock, why, sizeof(why)), 0);

	cfd = opp_connect(sock, why, sizeof(why));
	assert_true(cfd >= 0);
	req = json_pack("{s:s,s:s,s:s}", "op", "breaker reset", "service", "b", "reason", "drill");
	assert_int_equal(opp_send(cfd, req, why, sizeof(why)), 0);
	json_decref(req);
	ops_handle(&ops, &d, monotonic_ns());

	assert_int_equal(daemon_reload(&d, 1, monotonic_ns()), 1);
	assert_string_equal(d.cfg.services[1].name, "c");
	/* what the tick wrote: b closed (its reset), c open */
	memset(&v, 0, sizeof(v));
	v.breaker_state = SLUICE_BREAKER_CLOSED;
	assert_int_equal(maps_write_verdict(&d.m, d.idx[0], &v), 0);
	v.breaker_state = SLUICE_BREAKER_OPEN;
	assert_int_equal(maps_write_verdict(&d.m, d.idx[1], &v), 0);
	/* judged at the first tick after the change, or the second; the audit record is never
	 * written here (no writer runs): answered once its wait ends */
	for (int t = 0; t < OPS_VERIFY_TICKS; t++) {
		d.ticks++;
		ops_after_tick(&ops, &d, monotonic_ns() + 2000ull * 1000000ull);
	}
	if (opp_recv(cfd, 1000, &ans, why, sizeof(why)))
		fail_msg("no answer: %s", why);
	seen = json_array_get(json_object_get(ans, "maps"), 0);
	assert_non_null(seen);
	assert_string_equal(opp_str(seen, "service"), "b");
	assert_string_equal(opp_str(seen, "breaker"), "closed");
	assert_true(json_is_true(json_object_get(ans, "applied")));
	json_decref(ans);
	close(cfd);
	ops_close(&ops);
	unlink(path);
	rmdir(dir);
	daemon_gone(&d);
}

/* The Retry-After of a service's 503 as the map holds it. */
static int retry_after_in_map(const struct sluice_maps *m, int slot)
{
	struct sluice_reply r;
	__u32 k = (__u32)slot * 2 + SLUICE_REPLY_503;
	const char *at;

	assert_int_equal(bpf_map_lookup_elem(m->replies, &k, &r), 0);
	r.text[sizeof(r.text) - 1] = 0;
	at = strstr(r.text, "Retry-After: ");
	assert_non_null(at);
	return atoi(at + strlen("Retry-After: "));
}

/* The tick writes a service's 503 only when the Retry-After it wants (an open breaker's
 * remaining time, else the config's) differs from the one it last wrote. A reload writes
 * every service's 503 with the config's: what the tick counts as written must say so, or an
 * open breaker's clients are told to come back after 2 s instead of 30 until the remaining
 * time next moves. */
static void test_reload_and_the_503_retry_after(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char path[] = "/tmp/sluice-reload-XXXXXX";
	const char *running = "interface: lo\nservices:\n"
		"  - { name: a, port: 8080, protocol: http, retry_after_s: 2 }\n"
		"  - { name: b, port: 8081, protocol: http, retry_after_s: 2 }\n";
	const char *next = "interface: lo\nservices:\n"
		"  - { name: b, port: 8081, protocol: http, retry_after_s: 2 }\n";

	run_then_edit(f, &d, running, next, path, 1);
	/* b's breaker is open for 30 s more: its tick wrote that */
	assert_int_equal(maps_write_reply(&d.m, d.idx[1], SLUICE_REPLY_503, 30), 0);
	d.books[1].retry_after_written = 30;

	assert_int_equal(daemon_reload(&d, 0, monotonic_ns()), 1);
	unlink(path);
	assert_string_equal(d.cfg.services[0].name, "b");
	assert_int_equal(retry_after_in_map(&d.m, d.idx[0]), 2);
	assert_int_equal(d.books[0].retry_after_written, 2);
	daemon_gone(&d);
}

/* The controller's ctl_state entry names its service by name and port (status, `sluicectl
 * baseline reset` and a restart's adoption check both). A reload that moves a service to
 * another port must have the entry say so at the next tick, not at a calm service's refresh
 * 10 s later: until then the service's entry reads as another service's. */
static void test_port_change_rewrites_the_ctl_state_entry(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	static struct sluice_ctl_slot slot;
	char path[] = "/tmp/sluice-reload-XXXXXX";
	const char *running = "interface: lo\nservices:\n"
		"  - { name: a, port: 8080, protocol: tcp }\n"
		"  - { name: b, port: 8081, protocol: tcp }\n";
	const char *next = "interface: lo\nservices:\n"
		"  - { name: a, port: 8080, protocol: tcp }\n"
		"  - { name: b, port: 9091, protocol: tcp }\n";
	unsigned long long now = monotonic_ns();
	int n = run_then_edit(f, &d, running, next, path, now);

	for (int i = 0; i < n; i++)
		daemon_ctl_export_tick(&d, i, now);
	assert_int_equal(maps_read_ctl_slot(&d.m, d.idx[1], &slot), 0);
	assert_int_equal(slot.port, 8081);

	assert_int_equal(daemon_reload(&d, 0, now), 1);
	unlink(path);
	now += 100000000ull;                /* the next tick */
	for (int i = 0; i < n; i++)
		daemon_ctl_export_tick(&d, i, now);
	assert_int_equal(maps_read_ctl_slot(&d.m, d.idx[1], &slot), 0);
	assert_string_equal(slot.name, "b");
	assert_int_equal(slot.port, 9091);
	assert_true(ctl_slot_belongs(&slot, &d.cfg.services[1]));
	daemon_gone(&d);
}

/* Slot svc's per-CPU entry of map fd (key) filled with `v` on every CPU (u64 fields). */
static void fill_percpu(int fd, __u32 key, int ncpus, size_t size, __u64 v)
{
	__u64 *all = calloc((size_t)ncpus, size);

	assert_non_null(all);
	for (size_t i = 0; i < (size_t)ncpus * (size / sizeof(*all)); i++)
		all[i] = v;
	assert_int_equal(bpf_map_update_elem(fd, &key, all, BPF_ANY), 0);
	free(all);
}

/* What a service leaves in its slot while it runs: a verdict with its breaker open and L3
 * shed, its controller's entry, an operator's baseline reset done (request 2, acknowledged),
 * counters and histograms, refusals of its connection cap, an http connection cap, and two
 * units still in flight. */
static void leave_history(struct daemon *d, int i, unsigned long long now)
{
	const struct sluice_maps *m = &d->m;
	__u32 k = (__u32)d->idx[i], key;
	struct sluice_verdict v;
	struct sluice_ctl_request rq;
	struct sluice_conn_cap cc;
	struct sluice_inflight inf;
	__u32 cap[SLUICE_NUM_CLASSES] = { 0, 0, 5, 5 };

	memset(&v, 0, sizeof(v));
	v.breaker_state = SLUICE_BREAKER_OPEN;
	v.shed_prob[3] = SLUICE_PROB_ONE;
	assert_int_equal(maps_write_verdict(m, (int)k, &v), 0);
	d->books[i].ctl_reset_ack = 2;
	daemon_ctl_export(d, i, now);
	memset(&rq, 0, sizeof(rq));
	snprintf(rq.name, sizeof(rq.name), "%s", d->cfg.services[i].name);
	rq.port = (__u16)d->cfg.services[i].port;
	rq.reset_gen = 2;
	assert_int_equal(maps_write_ctl_request(m, (int)k, &rq), 0);
	fill_percpu(m->class_stats, k, m->ncpus, sizeof(struct sluice_svc_stats), 7);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		int fd = maps_hist_fd(m, (int)k, c, &key);

		fill_percpu(fd, key, m->ncpus, sizeof(struct sluice_hist), 3);
	}
	fill_percpu(m->untrusted_marks, k, m->ncpus, sizeof(struct sluice_untrusted), 4);
	assert_int_equal(maps_read_conn_cap(m, (int)k, &cc), 0);
	cc.rejected[3] = 9;
	assert_int_equal(bpf_map_update_elem(m->conn_cap, &k, &cc, BPF_ANY), 0);
	assert_int_equal(maps_write_http_conn_cap(m, (int)k, cap), 0);
	memset(&inf, 0, sizeof(inf));
	inf.cls[2] = 2;
	inf.total = 2;
	assert_int_equal(bpf_map_update_elem(m->inflight, &k, &inf, BPF_ANY), 0);
}

/* Service i's slot holds no decision, record or request of a service that ran there before. */
static void assert_clean_decisions(const struct daemon *d, int i)
{
	const struct sluice_maps *m = &d->m;
	static struct sluice_ctl_slot slot;
	struct sluice_verdict v, zero;
	struct sluice_ctl_request rq;
	struct sluice_http_conn_cap hc;
	int k = d->idx[i];

	memset(&zero, 0, sizeof(zero));
	assert_int_equal(maps_read_verdict(m, k, &v), 0);
	assert_memory_equal(&v, &zero, sizeof(v));                /* admit everything */
	assert_int_equal(maps_read_http_conn_cap(m, k, &hc), 0);
	assert_int_equal(hc.cap[3], 0);
	assert_int_equal(maps_read_ctl_slot(m, k, &slot), 0);
	assert_false(ctl_slot_belongs(&slot, &d->cfg.services[i])); /* no record to adopt */
	assert_int_equal(maps_read_ctl_request(m, k, &rq), 0);
	assert_int_equal(ctl_request_reset_gen(&rq, &d->cfg.services[i], d->books[i].ctl_reset_ack),
			 0);                                         /* no reset done again */
}

/* Service i's slot counts from zero, but for the units still in flight there. */
static void assert_clean_counts(const struct daemon *d, int i)
{
	const struct sluice_maps *m = &d->m;
	struct sluice_svc_stats st;
	struct sluice_hist h;
	struct sluice_untrusted u;
	struct sluice_conn_cap cc;
	struct sluice_inflight inf;
	int k = d->idx[i];

	assert_int_equal(maps_read_svc_stats(m, k, &st), 0);
	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		assert_int_equal(st.cls[c].arrivals, 0);
		assert_int_equal(st.cls[c].rejected[0], 0);
		assert_int_equal(st.samples[c], 0);
		assert_int_equal(maps_read_hist(m, k, c, &h), 0);
		assert_int_equal(h.bucket[0], 0);
		assert_int_equal(h.sum_us, 0);
	}
	assert_int_equal(maps_read_untrusted(m, k, &u), 0);
	assert_int_equal(u.ignored, 0);
	assert_int_equal(maps_read_conn_cap(m, k, &cc), 0);
	assert_int_equal(cc.rejected[3], 0);
	/* the units still open stay counted where they will be given back */
	assert_int_equal(bpf_map_lookup_elem(m->inflight, &(__u32){ (__u32)k }, &inf), 0);
	assert_int_equal(inf.cls[2], 2);
	assert_int_equal(inf.total, 2);
}

/* The config file path holds `text` (for the next reload). */
static void edit(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	fclose(fp);
}

/* Two http services, and the same with b removed: the configs the slot-reuse tests run and
 * reload between. */
static const char *HTTP_A_AND_B =
	"interface: lo\nservices:\n"
	"  - { name: a, port: 8080, protocol: http }\n"
	"  - { name: b, port: 8081, protocol: http }\n";
static const char *HTTP_ONLY_A =
	"interface: lo\nservices:\n"
	"  - { name: a, port: 8080, protocol: http }\n";

/* A service a reload removed and a later one adds back gets the slot its name had, but starts
 * from nothing there, as a new service does: admit-all until its controller's first tick, no
 * record of its own to adopt at a restart, no operator request to do again, counters from
 * zero. A service that ran through both reloads keeps everything. */
static void test_readded_service_starts_clean(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char path[] = "/tmp/sluice-reload-XXXXXX";
	unsigned long long now = monotonic_ns();
	static struct sluice_ctl_slot slot;
	struct sluice_verdict v;
	struct sluice_svc_stats st;
	int slot_b;

	run_then_edit(f, &d, HTTP_A_AND_B, HTTP_ONLY_A, path, now);
	leave_history(&d, 0, now);
	leave_history(&d, 1, now);
	slot_b = d.idx[1];

	assert_int_equal(daemon_reload(&d, 0, now), 1);
	assert_int_equal(d.cfg.n_services, 1);
	edit(path, HTTP_A_AND_B);
	assert_int_equal(daemon_reload(&d, 0, now), 1);
	unlink(path);
	assert_int_equal(d.cfg.n_services, 2);
	assert_int_equal(d.idx[1], slot_b);
	assert_clean_decisions(&d, 1);
	assert_clean_counts(&d, 1);

	/* a ran throughout: its verdict, record and counters stand */
	assert_int_equal(maps_read_verdict(&d.m, d.idx[0], &v), 0);
	assert_int_equal(v.breaker_state, SLUICE_BREAKER_OPEN);
	assert_int_equal(maps_read_ctl_slot(&d.m, d.idx[0], &slot), 0);
	assert_true(ctl_slot_belongs(&slot, &d.cfg.services[0]));
	assert_int_equal(maps_read_svc_stats(&d.m, d.idx[0], &st), 0);
	assert_int_equal(st.cls[0].arrivals, 7ull * (unsigned)d.m.ncpus);
	daemon_gone(&d);
}

/* A new service given the slot a removed service left (every other slot taken) inherits none
 * of its decisions, record or counters; the removed service's units still in flight stay
 * counted, to be given back there. */
static void test_reused_slot_starts_clean(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char path[] = "/tmp/sluice-reload-XXXXXX";
	const char *a_and_c = "interface: lo\nservices:\n"
		"  - { name: a, port: 8080, protocol: http }\n"
		"  - { name: c, port: 9090, protocol: http }\n";
	unsigned long long now = monotonic_ns();
	int slot_b;

	run_then_edit(f, &d, HTTP_A_AND_B, HTTP_ONLY_A, path, now);
	leave_history(&d, 1, now);
	slot_b = d.idx[1];
	/* in-flight corrections the reconciliation made in each slot (/metrics, by service) */
	assert_int_equal(recon_init(&d.recon, d.m.n_slots), 0);
	d.recon.slot[d.idx[0]].corrections = 3;
	d.recon.slot[slot_b].corrections = 5;
	assert_int_equal(daemon_reload(&d, 0, now), 1);
	/* every slot but b's named by a service gone long ago, whose units are still open too:
	 * c can only have b's */
	name_the_free_slots(&d.m, true);
	edit(path, a_and_c);
	assert_int_equal(daemon_reload(&d, 0, now), 1);
	unlink(path);
	assert_string_equal(d.cfg.services[1].name, "c");
	assert_int_equal(d.idx[1], slot_b);
	assert_clean_decisions(&d, 1);
	assert_clean_counts(&d, 1);
	assert_int_equal(d.recon.slot[slot_b].corrections, 0);
	assert_int_equal(d.recon.slot[d.idx[0]].corrections, 3);
	daemon_gone(&d);
}

/* A new service that must take a removed service's slot takes one where no unit is still
 * open: in another, the removed service's flows would count in its in-flight until they end.
 * Only when every such slot holds some does it share one. */
static void test_reuse_prefers_a_slot_with_nothing_open(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char path[] = "/tmp/sluice-reload-XXXXXX";
	const char *three = "interface: lo\nservices:\n"
		"  - { name: a, port: 8080, protocol: tcp }\n"
		"  - { name: b, port: 8081, protocol: tcp }\n"
		"  - { name: c, port: 8082, protocol: tcp }\n";
	const char *only_a = "interface: lo\nservices:\n"
		"  - { name: a, port: 8080, protocol: tcp }\n";
	const char *a_x = "interface: lo\nservices:\n"
		"  - { name: a, port: 8080, protocol: tcp }\n"
		"  - { name: x, port: 9090, protocol: tcp }\n";
	const char *a_x_y = "interface: lo\nservices:\n"
		"  - { name: a, port: 8080, protocol: tcp }\n"
		"  - { name: x, port: 9090, protocol: tcp }\n"
		"  - { name: y, port: 9091, protocol: tcp }\n";
	unsigned long long now = monotonic_ns();
	struct sluice_inflight inf;
	int slot_b, slot_c;

	run_then_edit(f, &d, three, only_a, path, now);
	slot_b = d.idx[1];
	slot_c = d.idx[2];
	assert_true(slot_b < slot_c);
	/* b's connections are still open (tcp: in-flight counts them) */
	memset(&inf, 0, sizeof(inf));
	inf.cls[0] = 3;
	inf.total = 3;
	assert_int_equal(bpf_map_update_elem(d.m.inflight, &(__u32){ (__u32)slot_b }, &inf,
					     BPF_ANY), 0);
	assert_int_equal(daemon_reload(&d, 0, now), 1);
	name_the_free_slots(&d.m, false);
	/* the gone slots hold nothing open either: only b's does */
	edit(path, a_x);
	assert_int_equal(daemon_reload(&d, 0, now), 1);
	assert_int_not_equal(d.idx[1], slot_b);
	assert_int_equal(d.idx[1], slot_c);
	assert_int_equal(bpf_map_lookup_elem(d.m.inflight, &(__u32){ (__u32)slot_b }, &inf), 0);
	assert_int_equal(inf.total, 3);
	/* every removed slot holds units now: y shares one (the first, b's), whose units
	 * stay counted there */
	for (int s = 0; s < d.m.n_slots; s++)
		if (s != slot_b && s != d.idx[0] && s != d.idx[1])
			hold_a_turn(&d.m, s);
	edit(path, a_x_y);
	assert_int_equal(daemon_reload(&d, 0, now), 1);
	unlink(path);
	assert_int_equal(d.idx[2], slot_b);
	assert_int_equal(bpf_map_lookup_elem(d.m.inflight, &(__u32){ (__u32)slot_b }, &inf), 0);
	assert_int_equal(inf.total, 3);
	daemon_gone(&d);
}

/* The wait probe's counters as sluiced maps them (kernel/readwait.h), over ncpus CPUs and the
 * fixture's slots: anonymous memory in place of the probe's map, which the test writes. */
static struct sluice_wait_stats *probe_counters(struct daemon *d, int ncpus)
{
	size_t len = sizeof(struct sluice_wait_stats) * (size_t)ncpus * (size_t)d->m.n_slots;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	d->rw.stats = p;
	d->rw.map_len = len;
	d->rw.slots = d->m.n_slots;
	d->rw.ncpus = ncpus;
	return p;
}

/* The probe measured n waits of ns each in slot s on CPU cpu. */
static void probe_counts(struct daemon *d, struct sluice_wait_stats *w, int cpu, int s,
			 __u64 n, __u64 ns)
{
	w[cpu * d->m.n_slots + s].count += n;
	w[cpu * d->m.n_slots + s].sum_ns += n * ns;
}

/* The wait probe's counts of a slot new to its service (not pinned, so not cleaned with the
 * maps) start from zero too: /metrics shows them as the service's own counters, a series
 * that must not start at a removed service's totals. Those of a service kept through the
 * reloads stand, and the new service's grow from zero with what the probe counts next. */
static void test_readded_service_reads_its_own_waits(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char path[] = "/tmp/sluice-reload-XXXXXX";
	unsigned long long now = monotonic_ns();
	struct sluice_wait_stats *w, got;

	run_then_edit(f, &d, HTTP_A_AND_B, HTTP_ONLY_A, path, now);
	w = probe_counters(&d, 2);
	probe_counts(&d, w, 0, d.idx[0], 4, 1000);
	probe_counts(&d, w, 1, d.idx[1], 6, 2000);
	probe_counts(&d, w, 0, d.idx[1], 1, 5000);
	assert_int_equal(daemon_reload(&d, 0, now), 1);
	edit(path, HTTP_A_AND_B);
	assert_int_equal(daemon_reload(&d, 0, now), 1);
	unlink(path);
	assert_int_equal(d.cfg.n_services, 2);
	assert_int_equal(readwait_read(&d.rw, d.idx[1], &got), 0);
	assert_int_equal(got.count, 0);
	assert_int_equal(got.sum_ns, 0);
	probe_counts(&d, w, 1, d.idx[1], 2, 3000);
	assert_int_equal(readwait_read(&d.rw, d.idx[1], &got), 0);
	assert_int_equal(got.count, 2);
	assert_int_equal(got.sum_ns, 6000);
	/* a ran throughout */
	assert_int_equal(readwait_read(&d.rw, d.idx[0], &got), 0);
	assert_int_equal(got.count, 4);
	assert_int_equal(got.sum_ns, 4000);
	readwait_stop(&d.rw);
	daemon_gone(&d);
}

/* Lookups of the `services` map (one entry each), counted while counted_fd is that map: the
 * test's own bpf_map_lookup_elem comes before libbpf's and passes every call on to it. */
static int counted_fd = -1;
static long counted_lookups;

int bpf_map_lookup_elem(int fd, const void *key, void *value)
{
	static int (*next)(int, const void *, void *);

	if (!next)
		next = (int (*)(int, const void *, void *))dlsym(RTLD_NEXT, "bpf_map_lookup_elem");
	counted_lookups += fd == counted_fd;
	return next(fd, key, value);
}

/* `sluicectl baseline reset` finds its service among the slots the maps have: a name no
 * service runs under (a typo, a removed service) is known to be missing after them, not
 * after a lookup of each of the 65,536 a map could have (about 150 ms of syscalls). */
static void test_find_service_reads_only_the_slots(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char path[] = "/tmp/sluice-reload-XXXXXX";
	unsigned long long now = monotonic_ns();
	struct sluice_service sv;

	run_then_edit(f, &d, HTTP_A_AND_B, HTTP_ONLY_A, path, now);
	assert_int_equal(daemon_reload(&d, 0, now), 1);
	unlink(path);
	counted_fd = d.m.services;
	counted_lookups = 0;
	assert_int_equal(maps_find_service(&d.m, "a", &sv), d.idx[0]);
	assert_int_equal(sv.port, 8080);
	assert_int_equal(maps_find_service(&d.m, "b", &sv), -1);      /* removed: no port */
	assert_int_equal(maps_find_service(&d.m, "nosuch", &sv), -1);
	counted_fd = -1;
	assert_true(counted_lookups <= 3l * d.m.n_slots);
	daemon_gone(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_switch_group_change_needs_a_restart, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_learned_state_follows_the_name, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_request_judged_after_a_reload, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_reload_and_the_503_retry_after, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_port_change_rewrites_the_ctl_state_entry, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_readded_service_starts_clean, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_reused_slot_starts_clean, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_reuse_prefers_a_slot_with_nothing_open, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_readded_service_reads_its_own_waits, setup,
						harness_teardown),
		cmocka_unit_test_setup_teardown(test_find_service_reads_only_the_slots, setup,
						harness_teardown),
	};

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, harness_shared_release);
}
