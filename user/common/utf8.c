// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* UTF-8 checks and repairs; see utf8.h. */
#include "common/utf8.h"

#include <string.h>

size_t utf8_char_len(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned cp;
	size_t len;

	if (!n)
		return 0;
	if (u[0] < 0x80)
		return 1;
	if (u[0] >= 0xc2 && u[0] <= 0xdf) {
		len = 2;
		cp = u[0] & 0x1f;
	} else if (u[0] >= 0xe0 && u[0] <= 0xef) {
		len = 3;
		cp = u[0] & 0x0f;
	} else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
		len = 4;
		cp = u[0] & 0x07;
	} else {
		return 0;          /* a continuation byte, 0xc0/0xc1 (always overlong), 0xf5.. */
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((u[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (u[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

size_t utf8_cut(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);

	if (n <= max)
		return n;
	/* s[max] is the first byte left out: back off while it continues a character */
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

char *utf8_scrub(char *dst, const char *s, size_t n)
{
	char *d = dst;

	n = strnlen(s, n);
	for (size_t i = 0; i < n;) {
		size_t k = utf8_char_len(s + i, n - i);

		if (!k) {
			memcpy(d, UTF8_REPLACEMENT, 3);
			d += 3;
			i++;
			continue;
		}
		memcpy(d, s + i, k);
		d += k;
		i += k;
	}
	*d = '\0';
	return dst;
}
