/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Internal to the config parser (config.c: top level and process-wide sections;
 * config_service.c: the services list). Not for other files. */
#ifndef SLUICE_CONFIG_PARSE_H
#define SLUICE_CONFIG_PARSE_H

#include "common/config.h"
#include "common/yamldoc.h"

/* " in service 'web'" etc.; empty at top level. */
typedef char where_t[128];

/* A section whose pairs fill one struct: where names it in messages. */
struct simple_arg {
	const char *where;
	void *conf;
};

/* The services list: every service, its limits, breaker, classify rules and the checks across
 * services (duplicate names and ports, the source-rule budget of the data path). */
void config_parse_services(struct ydoc *d, yaml_node_t *n, struct sluice_config *cfg);

#endif
