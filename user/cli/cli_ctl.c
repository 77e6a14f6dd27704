// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluicectl baseline reset SERVICE: ask sluiced to forget the service's latency baseline
 * (relearned from the next windows that qualify), through the pinned map `ctl_requests`, and
 * wait for sluiced to echo the request's generation in the service's `ctl_state` entry.
 * The request never outlives the command: when sluiced does not answer within two of its
 * ticks, it is withdrawn (a later sluiced never resets a baseline nobody is waiting for). */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kernel/bpfmaps.h"
#include "common/clock.h"
#include "common/log.h"

struct reset_args {
	const char *service;
};

static const struct cliopt reset_opts[] = {
	CLIOPT_POS(struct reset_args, service, "SERVICE", 1, "the service, as named in the config"),
	CLIOPT_TABLE_END,
};

static int slot_is(const struct sluice_ctl_slot *c, const struct sluice_service *sv)
{
	return c->name[0] && c->port == sv->port && strncmp(c->name, sv->name, SLUICE_NAME_LEN) == 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Take the request back; 1 when sluiced did it after all. */
static int withdraw(const struct sluice_maps *m, int s, struct sluice_ctl_request *rq,
		    uint32_t gen, struct sluice_ctl_slot *c)
{
	if (maps_read_ctl_slot(m, s, c) == 0 && c->reset_ack >= gen)
		return 1;
	rq->reset_gen = c->reset_ack;     /* not above the ack: nothing pending */
	maps_write_ctl_request(m, s, rq);
	return maps_read_ctl_slot(m, s, c) == 0 && c->reset_ack >= gen;
}

static int do_reset(const void *args, void *ctx)
{
	const struct reset_args *a = args;
	struct cli_opts *o = ctx;
	static struct sluice_ctl_slot c;
	struct sluice_ctl_request rq;
	struct sluice_service sv;
	struct sluice_globals g;
	struct sluice_maps m;
	unsigned long long t0, limit_ns;
	uint64_t ticks0;
	uint32_t gen, was_us;
	int s, rc = EXIT_RUNTIME;

	if (cli_open_maps(o, &m, "baseline reset")) {
		log_error("baseline reset: nothing reset");
		return EXIT_RUNTIME;
	}
	s = maps_find_service(&m, a->service, &sv);
	if (s < 0) {
		log_error("baseline reset: no service '%s' in the pinned maps at %s", a->service,
			  o->pin_dir);
		rc = EXIT_USAGE;
		goto out;
	}
	if (m.ctl_requests < 0 || m.ctl_state < 0) {
		log_error("baseline reset: the maps at %s predate the controller's pinned state "
			  "(a sluiced of this version adds them when it starts); nothing reset",
			  o->pin_dir);
		goto out;
	}
	/* The clock after the heartbeat: read before, a tick stamped in between looked 584
	 * years old and a running sluiced "not running". */
	if (maps_read_globals(&m, &g) || !g.heartbeat_ns ||
	    (t0 = monotonic_ns()) - g.heartbeat_ns > g.heartbeat_timeout_ns) {
		log_error("baseline reset: sluiced is not running (no recent heartbeat at %s); "
			  "nothing reset", o->pin_dir);
		goto out;
	}
	if (maps_read_ctl_slot(&m, s, &c) || !slot_is(&c, &sv)) {
		log_error("baseline reset: sluiced has not written the state of '%s' (an older "
			  "sluiced?); nothing reset", a->service);
		goto out;
	}
	memset(&rq, 0, sizeof(rq));
	if (maps_read_ctl_request(&m, s, &rq) || strncmp(rq.name, sv.name, SLUICE_NAME_LEN) ||
	    rq.port != sv.port)
		rq.reset_gen = 0;
	gen = (rq.reset_gen > c.reset_ack ? rq.reset_gen : c.reset_ack) + 1;
	was_us = c.baseline_us;
	ticks0 = c.ticks;
	memset(&rq, 0, sizeof(rq));
	snprintf(rq.name, sizeof(rq.name), "%s", sv.name);
	rq.port = sv.port;
	rq.reset_gen = gen;
	rq.uid = (uint32_t)getuid();
	rq.asked_ns = t0;
	if (maps_write_ctl_request(&m, s, &rq)) {
		log_error("baseline reset: cannot write the request at %s (permission?)", o->pin_dir);
		goto out;
	}
	/* Two ticks: the first that begins after the write does it. Without ticks at all, give
	 * up after the heartbeat timeout (at least a second). */
	limit_ns = g.heartbeat_timeout_ns > 1000000000ull ? g.heartbeat_timeout_ns : 1000000000ull;
	for (;;) {
		if (maps_read_ctl_slot(&m, s, &c) == 0 && c.reset_ack >= gen) {
			if (was_us)
				printf("%s: baseline %.1f ms forgotten; sluiced relearns it from the next "
				       "windows that qualify\n", sv.name, was_us / 1000.0);
			else
				printf("%s: baseline reset (none was learned yet)\n", sv.name);
			rc = EXIT_OK;
			goto out;
		}
		if (c.ticks >= ticks0 + 2 || monotonic_ns() - t0 > limit_ns)
			break;
		sleep_ms(5);
	}
	if (withdraw(&m, s, &rq, gen, &c)) {
		printf("%s: baseline reset (acknowledged late)\n", sv.name);
		rc = EXIT_OK;
	} else if (c.ticks >= ticks0 + 2) {
		log_error("baseline reset: sluiced ticked %s twice without doing the request (does "
			  "this sluiced know baseline resets?); request withdrawn, nothing reset",
			  sv.name);
	} else {
		log_error("baseline reset: sluiced did not tick %s within %.1f s; request "
			  "withdrawn, nothing reset", sv.name, limit_ns / 1e9);
	}
out:
	maps_close(&m);
	return rc;
}

const struct clicmd cli_cmd_baseline_reset = {
	.name = "baseline reset",
	.summary = "forget a service's learned latency baseline (relearned from new windows)",
	.opts = reset_opts,
	.args_size = sizeof(struct reset_args),
	.notes = "For a backend that changed for good (a new release, new hardware): the "
		 "objective follows the\nbaseline, which otherwise takes up to 64 windows to move. "
		 "sluiced does it at its next tick\nand says so in its events; `sluicectl status` "
		 "shows the baseline relearned.\n"
		 "exit codes: 0 reset, 1 sluiced not running or did not answer within two ticks "
		 "(nothing reset),\n2 unknown service",
	.example = "sluicectl baseline reset web",
	.run = do_reset,
};
