/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* libbpf's own messages through the program's log (common/log.h): its warnings as warnings,
 * its info lines at -v, its debug lines (the verifier's chatter, every relocation) at -vv. */
#ifndef SLUICE_BPFLOG_H
#define SLUICE_BPFLOG_H

void bpflog_route(void);

#endif
