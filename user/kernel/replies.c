// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "kernel/replies.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <bpf/bpf.h>

void build_http_reply(struct sluice_reply *r, int kind, int retry_after_s)
{
	const char *status = kind == SLUICE_REPLY_503 ? "503 Service Unavailable"
						      : "429 Too Many Requests";
	const char *body = kind == SLUICE_REPLY_503 ? "service unavailable: shed by sluice"
						    : "too many requests: shed by sluice";
	char text[SLUICE_REPLY_MAX];
	int len = 0;

	/* The data path checksums in 4-byte words: pad the body with spaces to a multiple of 4
	 * (Content-Length always equals the body as sent). */
	for (int pad = 0; pad < 8; pad++) {
		int blen = (int)strlen(body) + pad + 1;

		len = snprintf(text, sizeof(text),
			       "HTTP/1.1 %s\r\nRetry-After: %d\r\nContent-Type: text/plain\r\n"
			       "Content-Length: %d\r\nConnection: close\r\n\r\n%s%*s\n",
			       status, retry_after_s, blen, body, pad, "");
		if (len % 4 == 0)
			break;
	}
	memset(r, 0, sizeof(*r));
	memcpy(r->text, text, (size_t)len);
	r->len = (__u32)len;
	/* Ones' complement partial sum over 16-bit words in memory order, like csum_partial. */
	__u64 sum = 0;
	for (int i = 0; i < len; i += 2) {
		__u16 w;
		memcpy(&w, r->text + i, 2);
		sum += w;
	}
	while (sum >> 32)
		sum = (sum & 0xffffffff) + (sum >> 32);
	r->csum = (__u32)sum;
}

int maps_write_reply(const struct sluice_maps *m, int svc, int kind, int retry_after_s)
{
	struct sluice_reply r;
	__u32 k = svc * 2 + kind;

	build_http_reply(&r, kind, retry_after_s);
	return bpf_map_update_elem(m->replies, &k, &r, BPF_ANY) ? -errno : 0;
}
