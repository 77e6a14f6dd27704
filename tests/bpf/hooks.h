/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Test build of the data path only (make builds it as sluice_hooks.bpf.o): at a named point
 * of a program, run the step another CPU could run there, once, when the test armed it. Each
 * point sits where an interleaving matters for the counts, so a test can play it out
 * deterministically with BPF_PROG_TEST_RUN. */
#ifndef SLUICE_TEST_HOOKS_H
#define SLUICE_TEST_HOOKS_H

enum sluice_hook_point {
	SLUICE_HOOK_NONE = 0,
	SLUICE_HOOK_DECIDING = 1,        /* a request admitted and taken, not yet the flow's */
	SLUICE_HOOK_TURN = 2,            /* a tcp turn about to open */
};

enum sluice_hook_action {
	SLUICE_HOOK_END = 1,             /* the flow ends there (a server FIN, the GC) */
	SLUICE_HOOK_END_REUSE = 2,       /* ... and its entry is reused at once by a new tcp
	                                  * connection (reuse_key) holding its slot */
};

struct sluice_hook {
	__u32 point;
	__u32 action;
	__u32 fired;
	__u32 _pad;
	struct sluice_flow_key reuse_key;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sluice_hook);
} test_hook SEC(".maps");

static __always_inline void sluice_test_hook(__u32 point, struct sluice_flow_key *key)
{
	struct sluice_flow nf = {};
	struct sluice_flow *f;
	struct sluice_hook *h;
	__u32 zero = 0, svc, cls;

	h = bpf_map_lookup_elem(&test_hook, &zero);
	if (!h || h->point != point || h->fired)
		return;
	h->fired = 1;
	f = bpf_map_lookup_elem(&flows, key);
	if (!f)
		return;
	svc = f->svc;
	cls = f->class & 3;
	end_flow(key, 0, 1, 0);
	if (h->action != SLUICE_HOOK_END_REUSE || svc >= SLUICE_MAX_SERVICES)
		return;
	/* as promote() makes a tcp connection's flow: the slot first, then the entry */
	take_unit(svc, cls);
	nf.svc = svc;
	nf.class = cls;
	nf.state = SLUICE_FLOW_OPEN;
	nf.tracked_inflight = 1;
	nf.req_active = sluice_own_tag(svc, cls) | SLUICE_OWN_CONN;
	if (bpf_map_update_elem(&flows, &h->reuse_key, &nf, BPF_NOEXIST))
		release_unit(svc, cls);
}

#define SLUICE_TEST_HOOK(point, key) sluice_test_hook(point, key)

#endif
