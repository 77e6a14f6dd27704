/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The HTTP replies the data path sends for a rejected request, written ready-made (text and
 * checksum) so the data path never formats or sums text. */
#ifndef SLUICE_REPLIES_H
#define SLUICE_REPLIES_H

#include "kernel/bpfmaps.h"

/* Build the complete HTTP reply for a rejected request (kind 429 or 503). */
void build_http_reply(struct sluice_reply *r, int kind, int retry_after_s);
int maps_write_reply(const struct sluice_maps *m, int svc, int kind, int retry_after_s);

#endif
