// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "daemon/node.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/daemon.h"

#define OBSERVE_NS 1000000000ull     /* one observation a second */

void daemon_node_close(struct daemon *d)
{
	/* on is set only with the file open (a zeroed struct daemon has fd 0: not ours) */
	if (d->node.on && d->node.fd >= 0)
		close(d->node.fd);
	d->node.fd = -1;
	d->node.on = 0;
}

static void wake_all(struct daemon *d)
{
	for (int i = 0; i < d->cfg.n_services; i++)
		d->books[i].quiet = 0;
}

void daemon_node_configure(struct daemon *d, uint64_t now_ns)
{
	const struct node_conf *nc = &d->cfg.node;
	struct daemon_node *n = &d->node;
	int was_on = n->on, was_shedding = was_on && sluice_node_shedding(&n->arb);
	char why[384];

	if (!was_on) {
		n->fd = -1;
		sluice_node_init(&n->arb);
	}
	daemon_node_close(d);
	n->p.threshold_pct = nc->cpu_pressure_pct;
	n->p.step_ns = (uint64_t)(nc->step_s * 1e9);
	n->p.recover_ns = (uint64_t)(nc->recover_s * 1e9);
	if (nc->arbitration == NODE_ARB_PSI) {
		n->fd = open(nc->pressure_file, O_RDONLY | O_CLOEXEC);
		if (n->fd < 0) {
			snprintf(why, sizeof(why), "node arbitration disabled: cannot read %s: %s",
				 nc->pressure_file, strerror(errno));
			log_warn("%s", why);
			daemon_event(d, SLUICE_EVM_NODE, "psi", "disabled", why, "", SLUICE_EV_ALERT);
		} else {
			n->on = 1;
		}
	}
	if (!n->on) {
		sluice_node_init(&n->arb);
		if (was_shedding)
			wake_all(d);     /* the verdicts lose the node's cuts */
	}
	n->have_anchor = 0;
	n->arrivals = 0;
	n->unreadable_since_ns = 0;
	(void)now_ns;
}

/* The pressure file has not been read for NODE_UNREADABLE_NS: off, as at a start without it,
 * the node's cuts lifted (a reload that can read it turns arbitration on again). */
static void unreadable_off(struct daemon *d, int e)
{
	int was_shedding = sluice_node_shedding(&d->node.arb);
	char why[384];

	snprintf(why, sizeof(why), "node arbitration disabled: %s cannot be read (%s) for %llu s; "
		 "the node's cuts are lifted", d->cfg.node.pressure_file,
		 e ? strerror(e) : "no pressure reading in it", NODE_UNREADABLE_NS / OBSERVE_NS);
	log_warn("%s", why);
	daemon_event(d, SLUICE_EVM_NODE, "psi", "disabled", why, "", SLUICE_EV_ALERT);
	daemon_node_close(d);
	sluice_node_init(&d->node.arb);
	d->node.unreadable_since_ns = 0;
	if (was_shedding)
		wake_all(d);     /* the verdicts lose the node's cuts */
}

void daemon_node_tick(struct daemon *d, uint64_t now_ns)
{
	struct daemon_node *n = &d->node;
	struct sluice_node_obs obs = { 0 };
	struct sluice_event_sink sink = daemon_sink(d, "");
	char buf[512];
	ssize_t len;
	uint64_t total;
	double avg10;

	if (!n->on)
		return;
	if (n->have_anchor && now_ns - n->anchor_ns < OBSERVE_NS)
		return;
	len = pread(n->fd, buf, sizeof(buf) - 1, 0);
	if (len <= 0 || (buf[len] = 0, sluice_psi_parse(buf, &total, &avg10))) {
		int e = len < 0 ? errno : 0;

		n->have_anchor = 0;     /* a failed read is a gap, not calm */
		if (!n->unreadable_since_ns)
			n->unreadable_since_ns = now_ns ? now_ns : 1;
		else if (now_ns - n->unreadable_since_ns >= NODE_UNREADABLE_NS) {
			unreadable_off(d, e);
			return;
		}
	} else if (!n->have_anchor || total < n->anchor_total_us || now_ns <= n->anchor_ns) {
		n->have_anchor = 1;
	} else {
		obs.valid = 1;
		obs.pressure_pct = 100.0 * (double)(total - n->anchor_total_us) /
				   ((double)(now_ns - n->anchor_ns) / 1e3);
		if (obs.pressure_pct > 100)
			obs.pressure_pct = 100;
		obs.arrivals = n->arrivals;
	}
	if (n->have_anchor) {
		n->unreadable_since_ns = 0;
		n->anchor_total_us = total;
		n->anchor_ns = now_ns;
		n->arrivals = 0;
	}
	if (sluice_node_tick(&n->arb, &n->p, &obs, now_ns, &sink))
		wake_all(d);
}

void daemon_node_apply(const struct daemon *d, struct sluice_verdict *v)
{
	const struct sluice_node_arb *a = &d->node.arb;

	if (!d->node.on)
		return;
	for (int c = SLUICE_NODE_HIGHEST_SHED; c <= SLUICE_NODE_LOWEST; c++)
		if (a->admit[c] < SLUICE_PROB_ONE)
			v->shed_prob[c] = sluice_prob_complement(
				sluice_node_combine(sluice_prob_complement(v->shed_prob[c]),
						    a->admit[c]));
}
