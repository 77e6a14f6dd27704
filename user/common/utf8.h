/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* UTF-8 for what sluice writes for machines: JSON (jansson refuses a string that is not valid
 * UTF-8, and the key or the record it was for goes missing) and Prometheus label values (a
 * scraper refuses the whole exposition for one invalid value). Interface names are bytes the
 * kernel took as they came, and messages that quote a value are cut to their buffers. */
#ifndef SLUICE_UTF8_H
#define SLUICE_UTF8_H

#include <stddef.h>

/* The replacement character U+FFFD, what an invalid byte becomes. */
#define UTF8_REPLACEMENT "\xef\xbf\xbd"

/* Length of the valid character at s (n bytes available): 1..4, or 0 when the bytes there are
 * not one (a stray continuation byte, a sequence cut short, an overlong form, a surrogate,
 * past U+10FFFF: jansson's rules). */
size_t utf8_char_len(const char *s, size_t n);

/* How many bytes of s (at most max, stopping at its NUL) to keep so that the cut does not
 * fall inside a character: max backed off to the start of the character it would split. */
size_t utf8_cut(const char *s, size_t max);

/* s (at most n bytes, stopping at a NUL) into dst with every byte that is not part of a valid
 * character replaced by U+FFFD; dst holds at least 3 * n + 1 bytes. Returns dst. */
char *utf8_scrub(char *dst, const char *s, size_t n);

#endif
