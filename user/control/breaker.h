/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Circuit breaker of one service.
 *
 * CLOSED: calls, errors and slow calls are counted in a sliding window of window_s one-second
 *   buckets. calls = completed - 429s (a 429 is "you are too fast", never a failure).
 *   Opens when calls >= min_calls AND (errors/calls >= error_rate OR slow/calls >= slow_rate).
 *   While `suppressed` (cascade suppression) it stays CLOSED and reports "would_open" once.
 * OPEN: admits nothing for open_s x uniform(0.8, 1.2) (jitter keeps instances from probing
 *   in step), then HALF_OPEN.
 * HALF_OPEN: admits half_open_steps[i] percent. A step passes when it has been held step_s AND
 *   has seen >= ho_min_calls calls; a step without enough calls is extended until it has them.
 *   Failures = errors + slow (capped at calls); success = 1 - failures/calls over the step.
 *   At the step's end, success < half_open_success sends it back to OPEN (new jittered
 *   duration); earlier, only once the step has min_calls calls (the same evidence that opens
 *   a closed breaker), so one unlucky call among the first five cannot decide.
 *   Passing the last (100%) step closes the breaker. Every transition clears the window, so
 *   the failures that opened it cannot reopen it.
 * THE CLASS THAT FAILS: the breaker refuses every class, so the failures that move it must be
 *   the highest busy class's as well as the service's: an error or slow rate trips, and a step
 *   fails, only when the highest class with ho_min_calls calls in the window (the step) is
 *   over the rate too. Requests of a low class that the application fails (bad input, one
 *   broken endpoint, a client that provokes 5xx at will) then cannot shut out the classes
 *   above it; the ladder and the limit are what hold a low class back. With no class at
 *   ho_min_calls (a restart's first seconds) the service's counts decide alone. */
#ifndef SLUICE_BREAKER_H
#define SLUICE_BREAKER_H

#include <stdint.h>
#include "sluice.h"
#include "common/config.h"
#include "control/events.h"

#define SLUICE_BRK_MAX_WINDOW_S 64
_Static_assert(SLUICE_MAX_BREAKER_WINDOW_S <= SLUICE_BRK_MAX_WINDOW_S,
	       "the config must not accept a window longer than the ring");
#define SLUICE_BRK_MAX_STEPS    8

struct sluice_breaker_params {
	uint32_t min_calls;           /* 20 */
	double error_rate;            /* 0.5 */
	double slow_rate;             /* 0.6 */
	uint64_t slow_call_us;        /* 800 ms: what the caller uses to count slow calls */
	double open_s;                /* 5 */
	uint32_t steps[SLUICE_BRK_MAX_STEPS];   /* percent: 10 30 60 100 */
	uint32_t n_steps;
	double step_s;                /* 5 */
	double success;               /* 0.9 */
	uint32_t window_s;            /* 10, at most SLUICE_BRK_MAX_WINDOW_S */
	uint32_t ho_min_calls;        /* 5: calls a half-open step needs before it is judged */
};

/* The classes' own counts of the breaker's window and half-open step, kept beside the breaker
 * rather than in it: the saved record has no room for them. After a restart they start empty,
 * and until a class has ho_min_calls again the service's counts decide alone. */
struct sluice_brk_class_bucket {
	uint64_t sec;
	uint32_t calls[SLUICE_NUM_CLASSES], errors[SLUICE_NUM_CLASSES];
	float slow[SLUICE_NUM_CLASSES];
};

struct sluice_brk_classes {
	struct sluice_brk_class_bucket ring[SLUICE_BRK_MAX_WINDOW_S];
	uint64_t step_start_ns;       /* the half-open step the counts below are of */
	uint64_t step_calls[SLUICE_NUM_CLASSES];
	double step_fail[SLUICE_NUM_CLASSES];
	int spared;                   /* a lower class's failures alone: already reported */
};

struct sluice_breaker_input {
	uint64_t completed;           /* responses this tick (including 429s) */
	uint64_t errors;              /* 5xx / server RST */
	uint64_t resp_429;            /* excluded from calls */
	double slow;                  /* calls above slow_call (may be fractional, from buckets) */
	int suppressed;               /* cascade suppression: no automatic CLOSED -> OPEN */
	/* The same by class, and where to keep them; NULL: the service's counts alone decide.
	 * With them a failure must also be the highest busy class's (see breaker.h's head). */
	struct sluice_brk_classes *classes;
	uint64_t class_completed[SLUICE_NUM_CLASSES], class_errors[SLUICE_NUM_CLASSES];
	uint64_t class_429[SLUICE_NUM_CLASSES];
	double class_slow[SLUICE_NUM_CLASSES];
};

struct sluice_brk_bucket {
	uint64_t sec;
	uint64_t calls, errors;
	double slow;
};

struct sluice_breaker {
	int state;                    /* enum sluice_breaker_state */
	uint64_t rng;                 /* xorshift state for the open-duration jitter */
	uint64_t since_ns;            /* entered the current state */
	uint64_t open_until_ns;
	double open_dur_s;            /* the jittered duration in force / last used */
	uint32_t step;                /* half-open step index */
	uint64_t step_start_ns;
	uint64_t step_calls;
	double step_fail;
	int would_open;               /* suppressed opening already reported */
	uint64_t opens;               /* CLOSED -> OPEN transitions */
	uint64_t win_calls;           /* last evaluation, for metrics and events */
	double win_error_rate, win_slow_rate;
	struct sluice_brk_bucket ring[SLUICE_BRK_MAX_WINDOW_S];
};

/* What a tick did; bits. OPENED = CLOSED -> OPEN (feed it to the cascade detector). */
enum {
	SLUICE_BRK_OPENED = 1,
	SLUICE_BRK_WOULD_OPEN = 2,    /* suppressed; reported only on the first tick */
	SLUICE_BRK_CHANGED = 4,       /* any state or step change */
};

void sluice_breaker_params_default(struct sluice_breaker_params *p);
void sluice_breaker_params_from_conf(const struct breaker_conf *bc, struct sluice_breaker_params *p);

/* seed: any value (e.g. service index ^ boot time); the jitter sequence follows from it. */
void sluice_breaker_init(struct sluice_breaker *b, uint64_t seed, uint64_t now_ns);

/* One tick: account the inputs, then run the state machine. Returns SLUICE_BRK_* bits. */
int sluice_breaker_tick(struct sluice_breaker *b, const struct sluice_breaker_params *p,
			const struct sluice_breaker_input *in, uint64_t now_ns,
			const struct sluice_event_sink *sink);

/* Empty the classes' counts (with the breaker's window: a transition, a reset). */
void sluice_brk_classes_clear(struct sluice_brk_classes *cl);

/* Operator reset: CLOSED with an empty window. */
void sluice_breaker_reset(struct sluice_breaker *b, uint64_t now_ns, const char *why,
			  const struct sluice_event_sink *sink);

/* Admission fraction for the verdict: ONE closed, 0 open, step percent half-open. */
uint32_t sluice_breaker_admit(const struct sluice_breaker *b, const struct sluice_breaker_params *p);
/* Time left OPEN (0 otherwise); sluice_breaker_retry_after_s rounds it up, at least 1 when open. */
uint64_t sluice_breaker_remaining_ns(const struct sluice_breaker *b, uint64_t now_ns);
uint32_t sluice_breaker_retry_after_s(const struct sluice_breaker *b, uint64_t now_ns);

#endif
