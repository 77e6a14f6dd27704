// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* A config reload whose map writes fail part way (here: the addr_services hash full, since
 * the new address entries are added before the stale ones are deleted) must leave the maps
 * programmed for the config the daemon keeps running, not half old / half new. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"
#include "pktbuild.h"
#include "oldslots.h"
#include "daemon/daemon.h"

static const char *OLD =
	"interface: lo\n"
	"services:\n"
	"  - { name: a, port: \"198.18.0.1:80\", protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: b, port: \"198.18.0.5:80\", protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: db, port: 5432, protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: gone, port: 6000, protocol: tcp, limit: { fixed: 10 } }\n";
/* b moves to another address (one more entry while the old ones still stand: the map of 2
 * is full, as a real one of 4096 is when more than 2048 address services move at once), db
 * moves port, gone goes. */
static const char *NEW =
	"interface: lo\n"
	"services:\n"
	"  - { name: a, port: \"198.18.0.1:80\", protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: b, port: \"198.18.0.9:80\", protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: db, port: 5433, protocol: tcp, limit: { fixed: 10 } }\n";
enum { A, B, DB, GONE };

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct bpf_map *map;

	if (!f)
		return -1;
	libbpf_set_print(silent_print);
	if (!(f->skel = sluice_bpf__open()))
		return -1;
	bpf_object__for_each_map(map, f->skel->obj)
		bpf_map__set_pin_path(map, NULL);
	bpf_map__set_max_entries(f->skel->maps.addr_services, 2);
	if (sluice_bpf__load(f->skel) || harness_fixed_keys(bpf_map__fd(f->skel->maps.flow_hash_key)) ||
	    harness_maps_of(f->skel->obj, &f->m) || maps_fold_estimate(&f->m) <= 0)
		return -1;
	return (*state = harness_program(f, OLD, 1000000000ull)) ? 0 : -1;
}

static unsigned long long arrivals(struct fixture *f, int svc)
{
	struct sluice_class_stats st;
	unsigned long long n = 0;

	for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
		assert_int_equal(maps_read_class_stats(&f->m, f->idx[svc], c, &st), 0);
		n += st.arrivals;
	}
	return n;
}

static void syn_to(struct fixture *f, const char *dst, uint16_t sport, uint16_t dport)
{
	uint8_t buf[512];
	struct pkt_spec s = { .src = "203.0.113.7", .dst = dst, .sport = sport, .dport = dport,
			      .seq = 1000u + sport, .syn = 1, .tcp_opts = 20 };
	struct run r = harness_run(bpf_program__fd(f->skel->progs.sluice_xdp_ingress), buf,
				   build_pkt(buf, &s), NULL);

	assert_int_equal(r.err, 0);
}

/* A daemon d running the fixture's config on its maps (its own books, events to /dev/null),
 * whose config file (path, a mkstemp template) already holds `next`: what its reload reads. */
static void daemon_about_to_reload(struct fixture *f, struct daemon *d, const char *next,
				   char *path)
{
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, next, strlen(next)), (ssize_t)strlen(next));
	close(fd);
	memset(d, 0, sizeof(*d));
	d->cfg = f->cfg;
	d->m = f->m;
	d->idx = f->idx;
	d->books = calloc((size_t)f->cfg.n_services, sizeof(*d->books));
	assert_non_null(d->books);
	d->events = fopen("/dev/null", "w");
	snprintf(d->cfg_path, sizeof(d->cfg_path), "%s", path);
}

static void test_failed_reload_leaves_the_running_config_in_the_maps(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	char path[] = "/tmp/sluice-reload-XXXXXX";
	unsigned long long before[4];
	__u32 v;

	daemon_about_to_reload(f, &d, NEW, path);
	/* every service of the running config is judged */
	syn_to(f, "198.18.0.5", 1, 80);
	syn_to(f, "198.18.0.2", 2, 5432);
	syn_to(f, "198.18.0.2", 3, 6000);
	for (int i = 0; i < 4; i++)
		before[i] = arrivals(f, i);
	assert_int_equal(before[B], 1);
	assert_int_equal(before[DB], 1);
	assert_int_equal(before[GONE], 1);

	/* b's breaker is open for 30 s more: its tick wrote that into its 503 */
	assert_int_equal(maps_write_reply(&f->m, f->idx[B], SLUICE_REPLY_503, 30), 0);
	d.books[B].retry_after_written = 30;

	/* The reload fails: the daemon keeps the old config ... */
	assert_int_equal(daemon_reload(&d, 1, monotonic_ns()), -1);
	assert_int_equal(d.reloads_failed, 1);
	assert_int_equal(d.cfg.n_services, 4);
	assert_int_equal(d.cfg.services[DB].port, 5432);
	unlink(path);

	/* ... so the maps must still serve it: each of its services still judged at its port */
	v = 0;
	assert_int_equal(bpf_map_lookup_elem(f->m.port_to_service, &(__u32){ 5432 }, &v), 0);
	assert_int_equal(v, (__u32)f->idx[DB] + 1);
	assert_int_equal(bpf_map_lookup_elem(f->m.port_to_service, &(__u32){ 6000 }, &v), 0);
	assert_int_equal(v, (__u32)f->idx[GONE] + 1);
	{
		struct sluice_service sv;

		assert_int_equal(maps_read_service(&f->m, f->idx[DB], &sv), 0);
		assert_int_equal(sv.port, 5432);
		assert_int_equal(maps_read_service(&f->m, f->idx[GONE], &sv), 0);
		assert_int_equal(sv.port, 6000);
	}
	/* the 503 the tick counts as written is the one the maps hold (the running config's,
	 * written back): the open breaker's Retry-After is written again at the next tick */
	{
		struct sluice_reply r;
		__u32 k = (__u32)f->idx[B] * 2 + SLUICE_REPLY_503;
		char want[32];

		assert_int_equal(bpf_map_lookup_elem(f->m.replies, &k, &r), 0);
		r.text[sizeof(r.text) - 1] = 0;
		snprintf(want, sizeof(want), "Retry-After: %u\r\n", d.books[B].retry_after_written);
		assert_non_null(strstr(r.text, want));
	}
	syn_to(f, "198.18.0.5", 11, 80);
	syn_to(f, "198.18.0.2", 12, 5432);
	syn_to(f, "198.18.0.2", 13, 6000);
	assert_int_equal(arrivals(f, B), before[B] + 1);
	assert_int_equal(arrivals(f, DB), before[DB] + 1);
	assert_int_equal(arrivals(f, GONE), before[GONE] + 1);
	fclose(d.events);
	free(d.books);
}

/* The same failure when the new config also adds a service and the only slot free of units
 * still open is gone's (every other once named, its units still open): the new service took it
 * and made it clean (its controller's entry, its http connection cap) before the failure.
 * gone runs on, so both are written again at its next tick. */
static const char *NEW_AND_FRESH =
	"interface: lo\n"
	"services:\n"
	"  - { name: a, port: \"198.18.0.1:80\", protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: b, port: \"198.18.0.9:80\", protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: db, port: 5433, protocol: tcp, limit: { fixed: 10 } }\n"
	"  - { name: fresh, port: 7000, protocol: tcp, limit: { fixed: 10 } }\n";

static void test_failed_reload_rewrites_what_a_new_service_cleared(void **state)
{
	struct fixture *f = *state;
	static struct daemon d;
	static struct sluice_ctl_slot slot;
	char path[] = "/tmp/sluice-reload-XXXXXX";

	name_the_free_slots(&f->m, true);
	daemon_about_to_reload(f, &d, NEW_AND_FRESH, path);
	/* gone's entry written a moment ago, and its connection cap in force */
	memset(&slot, 0, sizeof(slot));
	snprintf(slot.name, sizeof(slot.name), "gone");
	slot.port = 6000;
	assert_int_equal(maps_write_ctl_slot(&f->m, f->idx[GONE], &slot), 0);
	for (int i = 0; i < f->cfg.n_services; i++)
		d.books[i].exported_ns = 1;
	d.books[GONE].conncap.share.cap[3] = 4;

	assert_int_equal(daemon_reload(&d, 1, monotonic_ns()), -1);
	unlink(path);
	assert_int_equal(d.cfg.n_services, 4);
	/* fresh had taken gone's slot */
	assert_int_equal(maps_read_ctl_slot(&f->m, f->idx[GONE], &slot), 0);
	assert_int_equal(slot.name[0], 0);
	/* written again at the next tick */
	assert_int_equal(d.books[GONE].exported_ns, 0);
	assert_true(d.books[GONE].conncap.dirty);
	fclose(d.events);
	free(d.books);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_failed_reload_leaves_the_running_config_in_the_maps,
						setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_failed_reload_rewrites_what_a_new_service_cleared,
						setup, harness_teardown),
	};

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
