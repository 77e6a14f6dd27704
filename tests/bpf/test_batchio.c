// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The tick's batched map I/O against the lookups and updates of one entry, on the real BPF
 * object and its maps: histograms read ahead in runs (through gaps of entries nobody asked
 * for, across runs of more than one buffer) sum to what the entry-by-entry reads sum to;
 * in-flight and busy as the tick sees them (busy from its copy in the kernel, or in a batch)
 * equal the per-key reads; verdicts and ctl_state
 * entries written in a batch read back as put, and a batch with a write the map refuses
 * says which were written; and after ticks of traffic with latency samples every verdict in
 * the map is the one the tick decided. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include "scale.h"
#include "daemon/ctlpersist.h"
#include "control/ctlslot.h"
#include "kernel/replies.h"

#define N 300

static struct scale *s;

static int setup(void **st)
{
	(void)st;
	s = scale_setup(N, 0);
	return s ? 0 : -1;
}

static int teardown(void **st)
{
	(void)st;
	if (s)
		scale_free(s);
	return 0;
}

/* Traffic to some services, in some classes: units (counters, in-flight), turns (latency
 * samples; the unit stays open, so busy moves), at client ports of their own. */
static void traffic(int round)
{
	for (int i = 0; i < N; i += 1 + i % 5) {
		uint16_t sport = (uint16_t)(20000 + round * N + i);

		scale_unit(s, i, sport, 0);
		if (i % 3 == 0) {
			scale_turn(s, i, sport, 0);
			scale_turn(s, i, sport, 1);
		}
		if (i % 7 == 0)
			scale_rst(s, i, sport, i % 3 == 0 ? sizeof(SCALE_QUERY) - 1 : 0);
	}
}

static void test_hist_read_ahead_equals_lookups(void **st)
{
	struct maps_reader *r = &s->d->rd;
	const struct sluice_maps *m = &s->d->m;
	int n_used = 0, asked = 0;
	(void)st;

	traffic(0);
	for (int i = 0; i < N; i++)
		if (s->d->idx[i] >= n_used)
			n_used = s->d->idx[i] + 1;
	assert_int_equal(maps_reader_read(r, m, n_used, NULL, 0), 0);
	/* every pattern: none, one class, two apart, all four, long gaps */
	for (int k = 0; k < n_used; k++) {
		unsigned mask = k % 11 == 0 ? 0xf : k % 13 == 0 ? 0 : k % 17 < 3 ? 0 :
				(unsigned)(1u << (k % 4)) | (k % 5 == 0 ? 1u << ((k + 2) % 4) : 0);

		maps_reader_want_hist(r, k, mask);
		asked += __builtin_popcount(mask);
	}
	r->hist_syscalls = 0;
	assert_int_equal(maps_reader_prefetch_hists(r, m, n_used), 0);
	/* in runs: a few syscalls, not one per histogram */
	assert_true(r->hist_syscalls > 0);
	printf("# %d histograms asked for, %lld batch lookups\n", asked, r->hist_syscalls);
	assert_true(r->hist_syscalls * 3 < asked);
	for (int k = 0; k < n_used; k++) {
		unsigned mask = k % 11 == 0 ? 0xf : k % 13 == 0 ? 0 : k % 17 < 3 ? 0 :
				(unsigned)(1u << (k % 4)) | (k % 5 == 0 ? 1u << ((k + 2) % 4) : 0);
		struct sluice_hist got[SLUICE_NUM_CLASSES], one;
		long long before = r->hist_syscalls;

		memset(got, 0xa5, sizeof(got));
		assert_int_equal(maps_reader_hist_classes(r, m, k, mask, got), 0);
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			if (!(mask >> c & 1))
				continue;
			assert_int_equal(maps_read_hist(m, k, c, &one), 0);
			assert_memory_equal(&got[c], &one, sizeof(one));
		}
		assert_int_equal(r->hist_syscalls, before);
		if (mask == 0xf) {
			memset(got, 0x5a, sizeof(got));
			assert_int_equal(maps_reader_hists(r, m, k, got), 0);
			for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
				assert_int_equal(maps_read_hist(m, k, c, &one), 0);
				assert_memory_equal(&got[c], &one, sizeof(one));
			}
		}
	}
	/* a class not read ahead is looked up: still the same sums */
	{
		struct sluice_hist got[SLUICE_NUM_CLASSES], one;
		int k = 13 * 3;   /* asked for nothing */

		assert_int_equal(maps_reader_hist_classes(r, m, k, 0xf, got), 0);
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			assert_int_equal(maps_read_hist(m, k, c, &one), 0);
			assert_memory_equal(&got[c], &one, sizeof(one));
		}
	}
	/* samples were made: the comparison compared something */
	{
		struct sluice_hist one;
		__u64 n = 0;

		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			assert_int_equal(maps_read_hist(m, s->d->idx[0], c, &one), 0);
			n += sluice_hist_count(&one);
		}
		assert_true(n > 0);
	}
	/* everything asked for: runs of a full buffer each, the same sums */
	for (int k = 0; k < n_used; k++)
		maps_reader_want_hist(r, k, 0xf);
	r->hist_syscalls = 0;
	assert_int_equal(maps_reader_prefetch_hists(r, m, n_used), 0);
	assert_int_equal(r->hist_syscalls,
			 (4 * n_used + r->hraw_entries - 1) / r->hraw_entries);
	for (int k = 0; k < n_used; k++) {
		struct sluice_hist got[SLUICE_NUM_CLASSES], one;

		assert_int_equal(maps_reader_hists(r, m, k, got), 0);
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			assert_int_equal(maps_read_hist(m, k, c, &one), 0);
			assert_memory_equal(&got[c], &one, sizeof(one));
		}
	}
	/* a new read of the counters: what was read ahead before it is not answered from */
	assert_int_equal(maps_reader_read(r, m, n_used, NULL, 0), 0);
	assert_true(r->hgen[0] != r->gen);
}

static void test_concurrency_equals_lookups(void **st)
{
	struct maps_reader *r = &s->d->rd;
	const struct sluice_maps *m = &s->d->m;
	int n_used = 0, nonzero = 0, busy_classes = 0, http_classes = 0;
	(void)st;

	traffic(1);
	/* turns left open (a query not answered yet): busy, not only in-flight, moves */
	for (int i = 0; i < N; i += 11) {
		scale_unit(s, i, (uint16_t)(40000 + i), 0);
		scale_turn(s, i, (uint16_t)(40000 + i), 0);
	}
	for (int i = 0; i < N; i++)
		if (s->d->idx[i] >= n_used)
			n_used = s->d->idx[i] + 1;
	/* the ways of reading in-flight: all at once from its copy in the kernel (mapped, 0),
	 * a lookup each (1), all at once in batch lookups (a sluiced without the copies, 3);
	 * busy from its copy (0, 1), in a batch lookup (2, 3) */
	assert_non_null(r->busy_map);
	assert_non_null(r->inflight_map);
	for (int mode = 0; mode < 4; mode++) {
		const struct sluice_inflight *mapped = r->busy_map, *mapped_if = r->inflight_map;

		memset(r->wants_inflight, mode == 0 || mode == 3, (size_t)r->n_slots);
		r->have_prev = 0;
		if (mode >= 2) {
			r->busy_map = NULL;
			r->inflight_map = NULL;
		}
		assert_int_equal(maps_reader_read(r, m, n_used, NULL, 0), 0);
		r->busy_map = mapped;
		r->inflight_map = mapped_if;
		assert_int_equal(r->inflight_read, mode == 0 || mode == 3);
		for (int i = 0; i < N; i++) {
			struct sluice_inflight a, b;
			int k = s->d->idx[i];

			for (int proto = 0; proto < 2; proto++) {
				int p = proto ? SLUICE_PROTO_HTTP : SLUICE_PROTO_TCP;

				assert_int_equal(maps_reader_concurrency(r, m, k, p, &a), 0);
				assert_int_equal(maps_read_concurrency(m, k, p, &b), 0);
				assert_memory_equal(&a, &b, sizeof(a));
				nonzero += a.total != 0;
				http_classes += proto && a.cls[i % SLUICE_NUM_CLASSES] != 0;
				busy_classes += !proto && a.cls[i % SLUICE_NUM_CLASSES] != 0;
			}
		}
	}
	assert_true(nonzero > 0);
	assert_true(busy_classes > 0);
	assert_true(http_classes > 0);
}

static void test_batched_writes(void **st)
{
	const struct sluice_maps *m = &s->d->m;
	struct maps_batch b;
	static struct sluice_ctl_slot cs, back;
	int put = 0;
	(void)st;

	/* verdicts: more than the batch holds (flushed when full), keys out of order */
	assert_int_equal(maps_batch_init(&b, m->verdicts, sizeof(struct sluice_verdict), 16), 0);
	for (int k = N - 1; k >= 0; k -= 3) {
		struct sluice_verdict *v = maps_batch_put(&b, (__u32)k, k);

		if (!v) {
			assert_int_equal(maps_batch_flush(&b), 16);
			v = maps_batch_put(&b, (__u32)k, k);
		}
		assert_non_null(v);
		memset(v, 0, sizeof(*v));
		v->limit = 1000u + (unsigned)k;
		v->class_threshold[k % 4] = (unsigned)k;
		v->retry_after_s = 7;
		put++;
	}
	{
		int n = b.n;

		assert_int_equal(maps_batch_flush(&b), n);
	}
	for (int k = N - 1; k >= 0; k -= 3) {
		struct sluice_verdict v;

		assert_int_equal(maps_read_verdict(m, k, &v), 0);
		assert_int_equal(v.limit, 1000u + (unsigned)k);
		assert_int_equal(v.class_threshold[k % 4], (unsigned)k);
		assert_int_equal(v.retry_after_s, 7);
	}
	assert_true(b.syscalls <= (put + 15) / 16 + 1);

	/* a key the map has no entry for: the writes before it are done, it and the rest not,
	 * and their tags say which */
	{
		struct sluice_verdict *v;
		int done;

		for (int k = 0; k < 5; k++) {
			__u32 key = k == 2 ? (__u32)m->n_slots + 3 : (__u32)k;

			assert_non_null(v = maps_batch_put(&b, key, 100 + k));
			memset(v, 0, sizeof(*v));
			v->limit = 77;
		}
		done = maps_batch_flush(&b);
		assert_int_equal(done, 2);
		assert_int_equal(b.last_n, 5);
		assert_int_equal(b.who[done], 102);
		for (int k = 0; k < 2; k++) {
			struct sluice_verdict got;

			assert_int_equal(maps_read_verdict(m, k, &got), 0);
			assert_int_equal(got.limit, 77);
		}
	}
	maps_batch_free(&b);

	/* ctl_state: entries of 3.7 KB, as the tick's export fills them */
	assert_int_equal(maps_batch_init(&b, m->ctl_state, sizeof(struct sluice_ctl_slot), 4), 0);
	for (int i = 0; i < 10; i++) {
		struct sluice_ctl_slot *slot = maps_batch_put(&b, (__u32)s->d->idx[i * 7], i);

		if (!slot) {
			assert_int_equal(maps_batch_flush(&b), 4);
			slot = maps_batch_put(&b, (__u32)s->d->idx[i * 7], i);
		}
		assert_non_null(slot);
		ctl_slot_fill(slot, &s->d->ctl[i * 7], &s->d->cfg.services[i * 7], 3, 40u + (unsigned)i,
			      123456789ull);
	}
	assert_int_equal(maps_batch_flush(&b), 2);
	for (int i = 0; i < 10; i++) {
		ctl_slot_fill(&cs, &s->d->ctl[i * 7], &s->d->cfg.services[i * 7], 3, 40u + (unsigned)i,
			      123456789ull);
		assert_int_equal(maps_read_ctl_slot(m, s->d->idx[i * 7], &back), 0);
		assert_memory_equal(&back, &cs, sizeof(cs));
	}
	maps_batch_free(&b);
}

/* The daemon's tick with traffic, latency samples included: after each, every service's
 * verdict in the map is the one its controller decided (the books' copy), and its ctl_state
 * entry names it. */
static void test_tick_writes_what_it_decided(void **st)
{
	unsigned long long now = monotonic_ns();
	static struct sluice_ctl_slot cs;
	(void)st;

	for (int t = 0; t < 25; t++) {
		traffic(2 + t);
		daemon_tick(s->d, now += 100000000ull);
		for (int i = 0; i < N; i++) {
			struct sluice_verdict v;
			const struct service_books *bk = &s->d->books[i];

			assert_true(bk->have_written);
			assert_int_equal(maps_read_verdict(&s->d->m, s->d->idx[i], &v), 0);
			assert_memory_equal(&v, &bk->written, sizeof(v));
		}
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(maps_read_ctl_slot(&s->d->m, s->d->idx[i], &cs), 0);
		assert_string_equal(cs.name, s->d->cfg.services[i].name);
	}
	assert_int_equal(s->d->vwb.n, 0);
	assert_int_equal(s->d->cwb.n, 0);
}

/* An in-flight batch that cannot be read fails the read, and the next read still sees the
 * counters that moved in it: the failed read's counters are no baseline (else a quiet service
 * whose counters moved only then would be skipped until they moved again). */
static void test_failed_inflight_read_keeps_changes(void **st)
{
	struct maps_reader *r = &s->d->rd;
	struct sluice_maps *m = &s->d->m;
	const struct sluice_inflight *mapped_if = r->inflight_map;
	int n_used = 0, inflight_fd = m->inflight, moved = 0, seen = 0;
	static int hot[N];
	static unsigned char wants[N * 2];
	(void)st;

	assert_true((size_t)r->n_slots <= sizeof(wants));
	memcpy(wants, r->wants_inflight, (size_t)r->n_slots);

	for (int i = 0; i < N; i++) {
		if (s->d->idx[i] >= n_used)
			n_used = s->d->idx[i] + 1;
		hot[i] = s->d->idx[i];
	}
	memset(r->wants_inflight, 1, (size_t)r->n_slots);
	assert_int_equal(maps_reader_read(r, m, n_used, hot, N), 0);
	traffic(90);
	/* the in-flight batch cannot be read: no copy in the kernel, a closed fd */
	r->inflight_map = NULL;
	m->inflight = -1;
	assert_int_not_equal(maps_reader_read(r, m, n_used, hot, N), 0);
	m->inflight = inflight_fd;
	r->inflight_map = mapped_if;
	for (int i = 0; i < N; i++)
		moved += maps_reader_changed(r, s->d->idx[i]);
	assert_true(moved > N / 8);
	assert_int_equal(maps_reader_read(r, m, n_used, hot, N), 0);
	for (int i = 0; i < N; i += 1 + i % 5)
		seen += maps_reader_changed(r, s->d->idx[i]);
	assert_int_equal(seen, moved);
	memcpy(r->wants_inflight, wants, (size_t)r->n_slots);
}

/* The GC's releases that cannot be re-read after a pass are read at the next read of the
 * counters, which then has every slot's concurrency looked at again: the releases kept from
 * before the pass would have every in-flight count since released still in flight. */
static void test_failed_release_reread_read_next(void **st)
{
	struct maps_reader *r = &s->d->rd;
	struct sluice_maps *m = &s->d->m;
	int n_used = 0, fd = m->inflight_released, moved = 0, slot = s->d->idx[7];
	struct sluice_inflight rel, was, a, b;
	__u32 k = (__u32)slot;
	(void)st;

	for (int i = 0; i < N; i++)
		if (s->d->idx[i] >= n_used)
			n_used = s->d->idx[i] + 1;
	assert_int_equal(maps_reader_read(r, m, n_used, NULL, 0), 0);
	/* the GC released a unit of the slot; its re-read fails */
	assert_int_equal(bpf_map_lookup_elem(fd, &k, &was), 0);
	rel = was;
	rel.total++;
	rel.cls[1]++;
	assert_int_equal(bpf_map_update_elem(fd, &k, &rel, BPF_ANY), 0);
	m->inflight_released = -1;
	assert_int_not_equal(maps_reader_reread_released(r, m), 0);
	m->inflight_released = fd;
	assert_int_equal(maps_reader_read(r, m, n_used, NULL, 0), 0);
	for (int i = 0; i < n_used; i++)
		moved += maps_reader_changed(r, i);
	assert_int_equal(moved, n_used);
	assert_int_equal(maps_reader_inflight(r, m, slot, &a), 0);
	assert_int_equal(maps_read_concurrency(m, slot, SLUICE_PROTO_HTTP, &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(bpf_map_update_elem(fd, &k, &was, BPF_ANY), 0);
	assert_int_equal(maps_reader_reread_released(r, m), 0);
}

/* A controller's first tick (after a start; a service a reload added) reads the histograms
 * of the classes that counted samples only, and takes the others as the empty ones they are;
 * nor does it write again the 503 the maps' programming wrote. Both were a read or a write
 * for every configured service: at 20,000 services (most of them never with traffic) they
 * were over half the first tick. A daemon of its own, so that its first tick is seen; then a
 * reload that adds a service, and its first tick. */
static void test_first_tick_reads_what_counted(void **st)
{
	struct scale *f = scale_setup(N, 0);
	struct sluice_reply marked, now;
	int with_samples = 0, idle = N - 1;
	__u32 key;
	(void)st;

	assert_non_null(f);
	/* a turn on one service, counted when its flow ends: a latency sample */
	scale_unit(f, 0, 21000, 0);
	scale_turn(f, 0, 21000, 0);
	scale_turn(f, 0, 21000, 1);
	scale_rst(f, 0, 21000, sizeof(SCALE_QUERY) - 1);
	/* a 503 the tick has no reason to write: still there after it */
	assert_int_equal(maps_write_reply(&f->d->m, f->d->idx[idle], SLUICE_REPLY_503, 77), 0);
	build_http_reply(&marked, SLUICE_REPLY_503, 77);
	f->d->rd.hist_syscalls = 0;
	daemon_tick(f->d, monotonic_ns());
	for (int i = 0; i < N; i++)
		for (int c = 0; c < SLUICE_NUM_CLASSES; c++) {
			struct sluice_hist h;

			with_samples += maps_reader_samples(&f->d->rd, f->d->idx[i], c) != 0;
			/* every controller's snapshot is what the maps hold */
			assert_int_equal(maps_read_hist(&f->d->m, f->d->idx[i], c, &h), 0);
			assert_memory_equal(&f->d->ctl[i].prev_h[c], &h, sizeof(h));
		}
	print_message("# first tick: %d classes with samples of %d, %lld histogram lookups\n",
		      with_samples, N * SLUICE_NUM_CLASSES, f->d->rd.hist_syscalls);
	assert_true(with_samples > 0);
	assert_true(f->d->rd.hist_syscalls <= with_samples);
	key = (__u32)f->d->idx[idle] * 2 + SLUICE_REPLY_503;
	assert_int_equal(bpf_map_lookup_elem(f->d->m.replies, &key, &now), 0);
	assert_memory_equal(&now, &marked, sizeof(now));

	/* a service added by a reload: the same at its first tick */
	{
		char path[] = "/tmp/sluice-batchio.XXXXXX", *text = scale_config(N + 1, 0, f->state_dir);
		int fd = mkstemp(path);

		assert_non_null(text);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
		close(fd);
		free(text);
		snprintf(f->d->cfg_path, sizeof(f->d->cfg_path), "%s", path);
		assert_int_equal(daemon_reload(f->d, 0, monotonic_ns()), 1);
		unlink(path);
	}
	assert_int_equal(maps_write_reply(&f->d->m, f->d->idx[N], SLUICE_REPLY_503, 77), 0);
	f->d->rd.hist_syscalls = 0;
	daemon_tick(f->d, monotonic_ns());
	assert_int_equal(f->d->rd.hist_syscalls, 0);
	key = (__u32)f->d->idx[N] * 2 + SLUICE_REPLY_503;
	assert_int_equal(bpf_map_lookup_elem(f->d->m.replies, &key, &now), 0);
	assert_memory_equal(&now, &marked, sizeof(now));
	scale_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist_read_ahead_equals_lookups),
		cmocka_unit_test(test_concurrency_equals_lookups),
		cmocka_unit_test(test_batched_writes),
		cmocka_unit_test(test_failed_inflight_read_keeps_changes),
		cmocka_unit_test(test_failed_release_reread_read_next),
		cmocka_unit_test(test_tick_writes_what_it_decided),
		cmocka_unit_test(test_first_tick_reads_what_counted),
	};
	return cmocka_run_group_tests_name("batchio", tests, setup, teardown);
}
