// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/readwait.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/log.h"
#include "sluice.skel.h"
#include "readwait.skel.h"

/* libbpf's messages while the probe loads: debug lines (a refusal's verifier log runs to
 * hundreds of lines, and the probe is optional: one warning says it is off). Kept for that
 * warning: the first line of libbpf's first warning, and of a verifier log its reason (the
 * last line before the verifier's closing counts). Set only for the load, on sluiced's one
 * thread that loads programs; the printer sluiced routes libbpf to is put back after. */
static char rw_first_warn[160], rw_verifier[160];

static void keep_line(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = 0;
}

/* The verifier's reason in a program load log: the last line that is not one of its closing
 * counts. */
static void keep_verifier_reason(const char *log)
{
	const char *s = strstr(log, "-- BEGIN PROG LOAD LOG --");

	if (!s)
		return;
	for (s = strchr(s, '\n'); s && *++s;) {
		size_t n = strcspn(s, "\n");

		if (n && strncmp(s, "processed ", 10) && strncmp(s, "verification time", 17) &&
		    strncmp(s, "stack depth", 11) && strncmp(s, "-- END", 6))
			keep_line(rw_verifier, sizeof(rw_verifier), s, n);
		s = strchr(s, '\n');
	}
}

static int rw_print(enum libbpf_print_level l, const char *fmt, va_list ap)
{
	const char *s;
	char *line;
	va_list aq;
	int n;

	if (l == LIBBPF_DEBUG && log_verbosity() < 2)
		return 0;
	/* whole: a verifier log's reason is at its end */
	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0 || !(line = malloc((size_t)n + 1)))
		return 0;
	vsnprintf(line, (size_t)n + 1, fmt, ap);
	if (l == LIBBPF_WARN) {
		s = strncmp(line, "libbpf: ", 8) ? line : line + 8;
		if (strstr(s, "-- BEGIN PROG LOAD LOG --"))
			keep_verifier_reason(s);
		else if (!rw_first_warn[0])
			keep_line(rw_first_warn, sizeof(rw_first_warn), s, strcspn(s, "\n"));
	}
	if (log_enabled(LOG_DEBUG))
		log_msg(LOG_DEBUG, "%s", line);
	free(line);
	return 0;
}

static int fail(struct readwait *rw, int rc, const char *what, char *err, size_t errlen)
{
	int no_btf = access("/sys/kernel/btf/vmlinux", R_OK) != 0;

	snprintf(err, errlen, "%s: %s%s%s%s%s%s", what, strerror(rc < 0 ? -rc : rc),
		 rw_first_warn[0] ? " (" : "", rw_first_warn, rw_first_warn[0] ? ")" : "",
		 rw_verifier[0] ? "; the verifier: " : "", rw_verifier);
	if (no_btf) {
		size_t used = strlen(err);

		snprintf(err + used, errlen - used, "; no kernel BTF at /sys/kernel/btf/vmlinux");
	}
	readwait_stop(rw);
	return rc < 0 ? rc : -rc;
}

int readwait_start(struct readwait *rw, const struct sluice_bpf *dp, char *err, size_t errlen)
{
	long page = sysconf(_SC_PAGESIZE);
	libbpf_print_fn_t prev;
	unsigned slots;
	int ncpus, rc;
	size_t len;
	void *p;

	memset(rw, 0, sizeof(*rw));
	rw_first_warn[0] = rw_verifier[0] = 0;
	ncpus = libbpf_num_possible_cpus();
	slots = bpf_map__max_entries(dp->maps.services);
	if (ncpus <= 0 || !slots || page <= 0) {
		snprintf(err, errlen, "cannot tell the CPUs (%d) or the service slots (%u)", ncpus,
			 slots);
		return -EINVAL;
	}
	if ((unsigned long long)slots * (unsigned)ncpus > 0xffffffffull / sizeof(struct sluice_wait_stats)) {
		snprintf(err, errlen, "%u service slots x %d CPUs: too many counters", slots, ncpus);
		return -E2BIG;
	}
	prev = libbpf_set_print(rw_print);
	rw->skel = readwait_bpf__open();
	if (!rw->skel) {
		rc = -errno;
		libbpf_set_print(prev);
		return fail(rw, rc, "cannot open the probe", err, errlen);
	}
	rw->skel->rodata->nr_slots = slots;
	rw->skel->rodata->nr_cpus = (__u32)ncpus;
	if ((rc = bpf_map__set_max_entries(rw->skel->maps.wait_stats, slots * (unsigned)ncpus)) ||
	    (rc = bpf_map__reuse_fd(rw->skel->maps.flows, bpf_map__fd(dp->maps.flows))) ||
	    (rc = bpf_map__reuse_fd(rw->skel->maps.unread, bpf_map__fd(dp->maps.unread))) ||
	    (rc = bpf_map__reuse_fd(rw->skel->maps.port_to_service,
				    bpf_map__fd(dp->maps.port_to_service))) ||
	    (rc = bpf_map__reuse_fd(rw->skel->maps.addr_services,
				    bpf_map__fd(dp->maps.addr_services)))) {
		libbpf_set_print(prev);
		return fail(rw, rc, "cannot share the data path's maps with the probe", err, errlen);
	}
	rc = readwait_bpf__load(rw->skel);
	if (rc) {
		libbpf_set_print(prev);
		return fail(rw, rc, "the kernel refused the probe", err, errlen);
	}
	rc = readwait_bpf__attach(rw->skel);
	libbpf_set_print(prev);
	if (rc)
		return fail(rw, rc, "cannot attach the probe to the tracepoint tcp_rcv_space_adjust",
			    err, errlen);
	len = sizeof(struct sluice_wait_stats) * slots * (size_t)ncpus;
	len = (len + (size_t)page - 1) & ~((size_t)page - 1);
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, bpf_map__fd(rw->skel->maps.wait_stats), 0);
	if (p == MAP_FAILED)
		return fail(rw, -errno, "cannot map the probe's counters", err, errlen);
	rw->stats = p;
	rw->map_len = len;
	rw->slots = (int)slots;
	rw->ncpus = ncpus;
	return 0;
}

/* Slot's totals since the probe was loaded, summed over CPUs (slot in range). */
static void read_totals(const struct readwait *rw, int slot, struct sluice_wait_stats *out)
{
	const struct sluice_wait_stats *e = rw->stats + slot;

	out->count = 0;
	out->sum_ns = 0;
	/* The count first: the probe adds to the sum before the count, so (in x86's order) the
	 * sum read after holds at least the samples counted. */
	for (int c = 0; c < rw->ncpus; c++, e += rw->slots) {
		out->count += __atomic_load_n(&e->count, __ATOMIC_ACQUIRE);
		out->sum_ns += __atomic_load_n(&e->sum_ns, __ATOMIC_RELAXED);
	}
}

int readwait_read(const struct readwait *rw, int slot, struct sluice_wait_stats *out)
{
	out->count = 0;
	out->sum_ns = 0;
	if (!rw->stats || slot < 0 || slot >= rw->slots)
		return -1;
	read_totals(rw, slot, out);
	/* the totals only grow: a base read from them earlier is never above them */
	if (rw->base) {
		out->count -= rw->base[slot].count;
		out->sum_ns -= rw->base[slot].sum_ns;
	}
	return 0;
}

/* A base kept in sluiced rather than the map's entries zeroed: that would take a syscall a
 * CPU (the map is mapped read-only), and a write racing the probe's adds could lose one or
 * keep a sum without its count. */
int readwait_slot_passed(struct readwait *rw, int slot)
{
	if (!rw->stats || slot < 0 || slot >= rw->slots)
		return 0;
	if (!rw->base && !(rw->base = calloc((size_t)rw->slots, sizeof(*rw->base))))
		return -ENOMEM;
	read_totals(rw, slot, &rw->base[slot]);
	return 0;
}

void readwait_stop(struct readwait *rw)
{
	if (rw->stats)
		munmap((void *)rw->stats, rw->map_len);
	if (rw->skel)
		readwait_bpf__destroy(rw->skel);
	free(rw->base);
	memset(rw, 0, sizeof(*rw));
}
