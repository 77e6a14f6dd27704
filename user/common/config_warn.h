/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Settings that are valid one by one but defeat each other (what `sluiced --check` warns
 * about). Pure: a loaded config in, messages out. */
#ifndef SLUICE_CONFIG_WARN_H
#define SLUICE_CONFIG_WARN_H

#include "common/config.h"

/* Fills `out` (file left empty) with one entry per conflict found, each tied to its service's
 * line; returns the number found (entries past DOC_MAX_ERRORS are counted, not kept). */
int config_warnings(const struct sluice_config *cfg, struct doc_errors *out);

#endif
