/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Small seeded PRNG (xorshift64*) kept inside the state machines that need randomness (breaker
 * open-duration jitter), so tests are reproducible and no global rand() state is shared. */
#ifndef SLUICE_RNG_H
#define SLUICE_RNG_H

#include <stdint.h>

/* A zero state would stay zero forever: mix the seed (splitmix64) and never return 0. */
static inline uint64_t sluice_rng_seed(uint64_t seed)
{
	uint64_t z = seed + 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z ? z : 0x2545f4914f6cdd1dull;
}

static inline uint64_t sluice_rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, 1): the top 53 bits. */
static inline double sluice_rng_uniform(uint64_t *s)
{
	return (double)(sluice_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
