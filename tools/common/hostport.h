/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Numeric addresses on the command line of the load generator and the test server: one parser,
 * so that both tools read "198.18.0.1:8080" and "[2001:db8::1]:8080" the same way. Never a name
 * lookup: the tools run inside test namespaces that have no resolver. */
#ifndef SLUICE_TOOLS_HOSTPORT_H
#define SLUICE_TOOLS_HOSTPORT_H

#include <netdb.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>

enum hostport_flags {
	/* An address alone (v4, v6 or [v6]) is what is wanted: no port is read. */
	HOSTPORT_BARE = 1,
	/* An address to listen on: an empty host or '*' is every IPv4 address and port 0 asks the
	 * kernel for a free one. Without it, port 0 is refused: nobody serves there. */
	HOSTPORT_LISTEN = 2,
};

/* Parse S ("ADDR:PORT", "[V6ADDR]:PORT", or with HOSTPORT_BARE "ADDR" / "[V6ADDR]") into SS and
 * LEN. Returns 0, or -1 on anything malformed, too long or not numeric. */
static inline int parse_hostport(const char *s, unsigned flags, struct sockaddr_storage *ss,
				 socklen_t *len)
{
	char host[256];
	const char *port = "0";
	size_t n = strlen(s);
	if (flags & HOSTPORT_BARE) {
		if (s[0] == '[' && n > 2 && s[n - 1] == ']') {
			s++;
			n -= 2;
		}
		if (n >= sizeof host)
			return -1;
		memcpy(host, s, n);
		host[n] = 0;
	} else {
		/* "[v6]:port", or "v4:port" with the only colon before the port */
		const char *h = s, *sep;
		if (s[0] == '[') {
			sep = strchr(s, ']');
			if (!sep || sep[1] != ':')
				return -1;
			h = s + 1;
			port = sep + 2;
		} else {
			sep = strrchr(s, ':');
			if (!sep || memchr(s, ':', (size_t)(sep - s)))
				return -1;
			port = sep + 1;
		}
		if ((size_t)(sep - h) >= sizeof host)
			return -1;
		memcpy(host, h, (size_t)(sep - h));
		host[sep - h] = 0;
		char *end;
		long p = strtol(port, &end, 10);
		if (!*port || *end || p < 0 || p > 65535 || (p == 0 && !(flags & HOSTPORT_LISTEN)))
			return -1;
	}
	if ((flags & HOSTPORT_LISTEN) && (!host[0] || !strcmp(host, "*")))
		strcpy(host, "0.0.0.0");
	if (!host[0])
		return -1;
	struct addrinfo hints = {
		.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV |
			    ((flags & HOSTPORT_LISTEN) ? AI_PASSIVE : 0),
		.ai_socktype = SOCK_STREAM,
	};
	struct addrinfo *res;
	if (getaddrinfo(host, port, &hints, &res))
		return -1;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

#endif
