/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* JSON reading and writing for every sluice file and output, on jansson (README: dependencies).
 *
 * Reading (the switch file, audit lines) is strict: the top level is an object or an array,
 * duplicate keys and "\u0000" are refused, nothing may follow the value; errors name the line
 * and column. Writing is compact (no spaces) unless a caller asks jansson for indentation;
 * numbers are written so a reader sees the same types as before: integers stay integers,
 * fractions always carry a decimal point. */
#ifndef SLUICE_JSONIO_H
#define SLUICE_JSONIO_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>

/* Parse `len` bytes of `text`. The tree (json_decref() it), or NULL with
 * "line L column C: what" in err and errno EINVAL; or NULL with "out of memory" and errno
 * ENOMEM when memory ran out (the text may well be good). */
json_t *jsonio_parse(const char *text, size_t len, char *err, size_t errlen);
/* "an object", "a string", "an integer", "a number with a fraction", ... for messages. */
const char *jsonio_type_name(const json_t *v);

/* v rounded to `decimals` places, as a number with a decimal point; NaN and infinities
 * (which JSON cannot carry) become null. */
json_t *jsonio_fixed(double v, int decimals);
/* v with six significant digits: an integer when it has no fraction at that precision,
 * else a number with a fraction; NaN and infinities become null. */
json_t *jsonio_number(double v);

/* s as a JSON string, never refused: bytes that are not valid UTF-8 (an interface name, a
 * message cut inside a character) become U+FFFD, where json_string() would give NULL and the
 * key or array entry it was for would silently go missing. NULL only when out of memory. */
json_t *jsonio_text(const char *s);

/* One line of compact JSON without a newline (free() it), or NULL when out of memory. */
char *jsonio_dumps(const json_t *v);
/* The text followed by '\n' into a malloc'd *out (length *len without the NUL); `flags` are
 * jansson's dump flags, 0 for one compact line. 0, or -1 when out of memory. */
int jsonio_dump_text(const json_t *v, size_t flags, char **out, size_t *len);
/* One compact line followed by '\n' to f. 0, or -1 (out of memory or a write error). */
int jsonio_print_line(FILE *f, const json_t *v);

#endif
