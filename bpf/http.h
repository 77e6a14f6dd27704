/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* HTTP/1.x on the wire: classify a request from its first segment (path prefix, priority
 * header), read a response's status code, and answer a refused request from the kernel. */
#ifndef SLUICE_HTTP_H
#define SLUICE_HTTP_H

#include <linux/pkt_cls.h>
#include "parse.h"
#include "csum.h"
#include "admit.h"

/* ---- request classification ---- */

/* The byte machine's constants, on the stack; what changes from byte to byte is in the
 * scan_buf (scan_state, as the word-wise scan below keeps it), where the verifier does not
 * follow it from step to step. Kept on the stack, the name position (an index into the
 * service's header name, so tracked exactly) had the verifier of a 6.18.44 kernel walk the
 * step once for each position it could hold: TC ingress 205,844 instructions with it there,
 * 93,288 with it here (the kernel before had walked 94,239 with it on the stack). */
struct header_scan {
	const char *buf;                 /* scan_buf of the request's first bytes */
	const struct sluice_service *sc;
	__u32 *state;                    /* scan_buf.scan_state: BS_* */
	__u32 len;                       /* bytes valid in buf */
};

/* BS_POS: -1 not at a line start, else bytes of the name matched; BS_LINE: bytes of the
 * line so far (the empty line ends the headers); BS_VALUE: name and ':' matched, reading the
 * value; BS_CLASS: the result, 0..3 or -1. */
enum { BS_POS, BS_LINE, BS_VALUE, BS_CLASS };

/* The machine at byte i of the request: 1 when the scan is over. */
static __always_inline long header_byte_step(__u32 i, struct header_scan *hs)
{
	const struct sluice_service *sc = hs->sc;
	__u32 *st = hs->state;
	int pos;
	char c;

	if (i >= hs->len)
		return 1;
	c = hs->buf[i & (SLUICE_SCAN_LEN - 1)];
	if (c >= 'A' && c <= 'Z')
		c += 'a' - 'A';
	if (st[BS_VALUE]) {
		if (c == ' ' || c == '\t' || c == 'l')
			return 0;
		if (c >= '0' && c <= '3')
			st[BS_CLASS] = c - '0';
		return 1; /* the value is decided by its first character after "L" */
	}
	if (c == '\n') {
		if (st[BS_LINE] == 0 ||
		    (st[BS_LINE] == 1 && hs->buf[(i - 1) & (SLUICE_SCAN_LEN - 1)] == '\r'))
			return 1; /* end of headers */
		st[BS_POS] = 0;
		st[BS_LINE] = 0;
		return 0;
	}
	st[BS_LINE]++;
	pos = (int)st[BS_POS];
	if (pos < 0)
		return 0;
	if (pos < sc->header_len && pos < SLUICE_HEADER_LEN) {
		st[BS_POS] = c == sc->header[pos & (SLUICE_HEADER_LEN - 1)] ? pos + 1 : -1;
		return 0;
	}
	if (c == ':')
		st[BS_VALUE] = 1;
	else
		st[BS_POS] = -1;
	return 0;
}

/* bpf_loop's callback for the byte machine: eight bytes a call. Any client can send its
 * priority value behind 8 or more blanks and have each of its requests scanned this way: one
 * byte a call cost a request start 1,308 ns over empty against 388 for the word-wise scan
 * (6 alternating pktcost runs, median); eight a call, 649 (in 5 other runs 4 a call 809, 16
 * a call 659). The barrier between two steps has each read the machine's state from the map
 * value, so the verifier checks eight steps, not every sequence of their exits (TC ingress
 * 118,123 instructions against 115,705). */
#define SCAN_BYTES_PER_CALL 8

static long scan_header_bytes(__u32 k, void *vctx)
{
	__u32 i = k * SCAN_BYTES_PER_CALL;

#pragma unroll
	for (int j = 0; j < SCAN_BYTES_PER_CALL - 1; j++) {
		if (header_byte_step(i + j, vctx))
			return 1;
		asm volatile("" ::: "memory");
	}
	return header_byte_step(i + SCAN_BYTES_PER_CALL - 1, vctx);
}

/* ---- the header scan word by word ----
 * The same result as header_byte_step's machine, 8 bytes at a time: a bitmap of the line ends
 * in the first bytes, then one step per line: the end of the headers, or the name compared in
 * 8-byte words, or on to the next line end through the bitmap. */

#define ONES8  0x0101010101010101ull
#define HIGH8  0x8080808080808080ull
#define LOW7   0x7f7f7f7f7f7f7f7full

/* 0x80 in every byte of x equal to c, 0 in every other (exact: no borrow between bytes). */
static __always_inline __u64 bytes_eq(__u64 x, __u8 c)
{
	__u64 v = x ^ (ONES8 * c);

	return ~(((v & LOW7) + LOW7) | v | LOW7);
}

/* x with its bytes 'A'..'Z' lower-cased and every other byte as it was. */
static __always_inline __u64 lower8(__u64 x)
{
	__u64 h = x & LOW7;
	__u64 upper = (h + ONES8 * (0x80 - 'A')) & ~(h + ONES8 * (0x7f - 'Z')) & ~x & HIGH8;

	return x | (upper >> 2);
}

/* Index of the lowest byte of m that bytes_eq flagged (m != 0, only 0x80 bits set), in four
 * instructions: the lowest flag isolated and moved to bit 0 of its byte k (1 << 8k), and the
 * multiply puts byte 7 - k of the constant, which is k, in the top byte. (A population count
 * of the bits below it took four times as many on every line of the header scan.) */
static __always_inline __u32 first_flagged_byte(__u64 m)
{
	return (__u32)((((m & -m) >> 7) * 0x0001020304050607ull) >> 56);
}

/* One 8-byte load. A memcpy from a char pointer is split by clang into 8 byte loads, shifts
 * and ors (it cannot assume alignment), which made the scan's words cost more than its
 * bytes; the load itself needs no alignment where sluice runs (the verifier checks the
 * alignment of map-value reads only on hosts without efficient unaligned access). */
typedef __u64 __attribute__((may_alias)) scan_word;

static __always_inline __u64 load8(const char *p)
{
	return *(const scan_word *)p;
}

#define SCAN_FALLBACK (-2)

/* The word-wise scan's constants, on the stack; what changes from line to line is in the
 * scan_buf (scan_state: position, whether it is inside a line, result), where the verifier
 * does not follow it from step to step: it checks one step, not every sequence of them. */
struct line_scan {
	const char *b;                   /* scan_buf.b */
	__u32 *state;                    /* scan_buf.scan_state */
	__u32 len;                       /* bytes valid in b */
	__u32 hlen;                      /* name length, at most SLUICE_HEADER_LEN */
	__u64 hw[4];                     /* the name in words, bytes past hlen zero */
	__u64 hmask[4];                  /* which bytes of hw count */
};

enum { LS_POS, LS_INSIDE, LS_RESULT, LS_FIRST };

/* One step of the scan: at a line start, the end of the headers, or the name compared in four
 * words (then the value decides, and the scan ends); then the line's end is looked for 8
 * bytes at a time, up to 64 bytes per step. 1 when the scan is over. */
static __always_inline long scan_line_step(struct line_scan *ls)
{
	const char *b = ls->b;
	__u32 *st = ls->state;
	__u32 l = st[LS_POS], len = ls->len, hlen = ls->hlen, at;

	if (l >= len || l >= SLUICE_SCAN_LEN)
		return 1;
	at = l & (SLUICE_SCAN_LEN - 1);
	if (!st[LS_INSIDE]) {
		if (b[at] == '\n')
			return 1;
		if (b[at] == '\r' && l + 1 < len && b[at + 1] == '\n')
			return 1; /* the empty line: end of the headers */
		if (!st[LS_FIRST] && l + hlen < len &&
		    !((lower8(load8(b + at)) & ls->hmask[0]) ^ ls->hw[0]) &&
		    !((lower8(load8(b + at + 8)) & ls->hmask[1]) ^ ls->hw[1]) &&
		    !((lower8(load8(b + at + 16)) & ls->hmask[2]) ^ ls->hw[2]) &&
		    !((lower8(load8(b + at + 24)) & ls->hmask[3]) ^ ls->hw[3]) &&
		    b[at + (hlen & (SLUICE_HEADER_LEN * 2 - 1))] == ':') {
			/* The value: blanks and "L" skipped, then its first character decides. */
			__u32 v = l + hlen + 1, k;
			__u64 x, rest;
			__u8 c;

			if (v >= len)
				return 1;
			x = lower8(load8(b + (v & (SLUICE_SCAN_LEN - 1))));
			rest = ~(bytes_eq(x, ' ') | bytes_eq(x, '\t') | bytes_eq(x, 'l')) & HIGH8;
			if (!rest) {
				if (v + 8 < len)
					st[LS_RESULT] = SCAN_FALLBACK;
				return 1;
			}
			k = first_flagged_byte(rest);
			c = (__u8)(x >> (8 * k));
			if (v + k < len && c >= '0' && c <= '3')
				st[LS_RESULT] = c - '0';
			return 1;
		}
		st[LS_FIRST] = 0;
	}
	/* The end of this line (the byte at l is not one). */
#pragma unroll
	for (int k = 0; k < 8; k++) {
		__u64 m = bytes_eq(load8(b + at + 8 * k), '\n');

		if (m) {
			st[LS_POS] = l + 8 * k + first_flagged_byte(m) + 1;
			st[LS_INSIDE] = 0;
			return 0;
		}
	}
	st[LS_POS] = l + 64;
	st[LS_INSIDE] = 1;
	return 0;
}

/* bpf_loop's callback: three steps of the scan. A callback's call and return cost 7-10 ns on
 * a host whose returns go through a mitigation thunk, and a request's head is mostly a handful
 * of short lines: three a call take five lines in two calls, not five. The barrier between
 * two steps has the next read the scan's state from the map value, where the verifier does
 * not follow it, so it checks three steps and not every sequence of their exits (without it,
 * two steps a call took TC ingress's walk from 112,549 to 149,511 instructions; with it, three
 * took it to 121,351). */
static long scan_header_lines(__u32 n, void *vctx)
{
	if (scan_line_step(vctx))
		return 1;
	asm volatile("" ::: "memory");
	if (scan_line_step(vctx))
		return 1;
	asm volatile("" ::: "memory");
	return scan_line_step(vctx);
}

/* Class from the header named sc->header in b[0 .. len), -1 when none, or SCAN_FALLBACK for
 * the byte machine (a value that opens with 8 or more blanks). */
static __always_inline int header_class_words(struct scan_buf *sb, __u32 len,
					      const struct sluice_service *sc)
{
	struct line_scan ls = { .b = sb->b, .state = sb->scan_state, .len = len };
	__u32 hlen = sc->header_len < SLUICE_HEADER_LEN ? sc->header_len : SLUICE_HEADER_LEN;

	ls.hlen = hlen;
#pragma unroll
	for (int j = 0; j < 4; j++) {
		ls.hmask[j] = hlen >= 8 * (j + 1) ? ~0ull : hlen <= 8 * j ? 0 :
			      (1ull << (8 * (hlen - 8 * j))) - 1;
		ls.hw[j] = load8(sc->header + 8 * j) & ls.hmask[j];
	}
	sb->scan_state[LS_POS] = 0;
	sb->scan_state[LS_INSIDE] = 0;
	sb->scan_state[LS_RESULT] = -1;
	sb->scan_state[LS_FIRST] = 1;   /* the request line is no header */
	/* A line takes at least 2 bytes (a line of 1 ends the headers): 130 steps see all, and
	 * 44 calls of three are 132. */
	bpf_loop((SLUICE_SCAN_LEN / 2 + 2 + 2) / 3, scan_header_lines, &ls, 0);
	return (int)sb->scan_state[LS_RESULT];
}

/* Whether a path rule's prefix is the path's start (at off in b, len bytes valid): its up to
 * SLUICE_PATH_LEN bytes compared as 8-byte words under a mask of its length, with no loop and
 * no call. (One byte per bpf_loop step made a service with path rules pay a callback call per
 * byte of every rule, 96 a request start: 1,167-1,227 ns over empty against 348-355 without.) The
 * bytes read past len, stale ones of an earlier request, decide nothing: a prefix that runs
 * past len does not match. */
static __always_inline int path_rule_matches(const char *b, __u32 off, __u32 len,
					     const struct sluice_path_rule *rule)
{
	__u32 n = rule->len;
	__u64 d = 0;

	if (!n || n > SLUICE_PATH_LEN || off + n > len)
		return 0;
	off &= 31; /* at most 24 (just after a method's space): the verifier is told so */
#pragma unroll
	for (int w = 0; w < SLUICE_PATH_LEN / 8; w++) {
		__u64 m = n >= 8 * (w + 1) ? ~0ull : n <= 8 * w ? 0 : (1ull << (8 * (n - 8 * w))) - 1;

		d |= (load8(b + off + 8 * w) ^ load8(rule->prefix + 8 * w)) & m;
	}
	return !d;
}

/* Path prefix and priority header of a request from its first segment. A global function:
 * the verifier checks it once, not once per path of its caller (keeps the TC ingress program
 * far from the verifier's limits and fast to load). Returns (order << 8) | class of the best
 * payload rule with an order below best_order & 0xff, or -1 when none matches; bit 8 of
 * best_order leaves the header rule out (an untrusted source): a header that would have
 * decided is then looked for all the same, and when found PAYLOAD_HEADER_IGNORED is set in
 * the result (with order SLUICE_RULE_NONE when no other payload rule matched). A header that
 * is not in the first segment is not seen: the caller's default stands. */
#define SLUICE_TOKEN_READ 24     /* a method and its space: the longest registered, 17 */
#define PAYLOAD_HEADER_IGNORED (1 << 16)
__attribute__((noinline))
int classify_payload(struct __sk_buff *skb, __u32 svc, __u32 payload_off, __u32 payload_len,
		     __u32 best_order)
{
	const struct sluice_service *sc;
	struct class_pick best = { .order = SLUICE_RULE_NONE, .class = 0 };
	__u32 zero = 0, len = payload_len, path_off = 0, no_header = best_order >> 8;
	int ignored = 0;
	struct scan_buf *sb;

	sc = bpf_map_lookup_elem(&services, &svc);
	sb = bpf_map_lookup_elem(&scan_scratch, &zero);
	if (!sc || !sb || !skb)
		return -1;
	if (sc->header_order == SLUICE_RULE_NONE && !sc->path[0].len)
		return -1;
	if (len > SLUICE_SCAN_LEN)
		len = SLUICE_SCAN_LEN;
	if (len < 4 || bpf_skb_load_bytes(skb, payload_off, sb->b, len) != 0)
		return -1;

	/* Path: after the method's space, where request_token reads it (looked for only when a
	 * path rule will read it). */
	if (sc->path[0].len) {
		for (int i = 1; i < SLUICE_TOKEN_READ; i++) {
			if (i >= len)
				break;
			if (sb->b[i] == ' ') {
				path_off = i + 1;
				break;
			}
		}
	}
	if (path_off) {
		__u32 matched = 0;

		/* Read back from the map value (scan_state is free until the header scan), the
		 * path's start is one unknown to the verifier, not a state for each byte the
		 * method's space could be at. */
		sb->scan_state[1] = path_off;
		asm volatile("" ::: "memory");
		path_off = sb->scan_state[1];
#pragma unroll
		for (int r = 0; r < SLUICE_MAX_PATH_RULES; r++)
			matched |= path_rule_matches(sb->b, path_off, len, &sc->path[r]) << r;
		/* The same with the rules' outcomes (the header scan sets its state afresh after):
		 * the verifier then walks what follows once per rule picked or not, not once more
		 * for every way each compare ended (TC ingress: 115,705 instructions, 124,747
		 * without; with neither read back, 137,889). */
		sb->scan_state[0] = matched;
		asm volatile("" ::: "memory");
		matched = sb->scan_state[0];
#pragma unroll
		for (int r = 0; r < SLUICE_MAX_PATH_RULES; r++)
			if (matched & (1u << r))
				pick_rule(&best, sc->path[r].order, sc->path[r].class);
	}
	best_order &= 0xff;
	if (sc->header_order < best.order && sc->header_order < best_order && sc->header_len) {
		int cls = header_class_words(sb, len, sc);

		if (cls == SCAN_FALLBACK) {
			struct header_scan hs = { .buf = sb->b, .sc = sc, .state = sb->scan_state,
						  .len = len };

			sb->scan_state[BS_POS] = -1;
			sb->scan_state[BS_LINE] = 0;
			sb->scan_state[BS_VALUE] = 0;
			sb->scan_state[BS_CLASS] = -1;
			bpf_loop(SLUICE_SCAN_LEN / SCAN_BYTES_PER_CALL, scan_header_bytes, &hs, 0);
			cls = (int)sb->scan_state[BS_CLASS];
		}
		if (cls >= 0 && no_header)
			ignored = PAYLOAD_HEADER_IGNORED;
		else if (cls >= 0)
			pick_rule(&best, sc->header_order, cls);
	}
	if (best.order >= best_order)
		return ignored ? ignored | (SLUICE_RULE_NONE << 8) : -1;
	return ignored | (best.order << 8) | best.class;
}

/* A character of a method token: any token character (RFC 9110), as some servers take them
 * (Go's net/http hands "get" or "m3!" to its handler, nginx passes on methods it does not
 * know); strict: capitals, '_' and '-' only, as nginx parses a method. */
static __always_inline int method_char(char c, int strict)
{
	if ((c >= 'A' && c <= 'Z') || c == '_' || c == '-')
		return 1;
	if (strict)
		return 0;
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '!' || c == '#' ||
	       c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' || c == '+' || c == '.' ||
	       c == '^' || c == '`' || c == '|' || c == '~';
}

/* 1 when the bytes at off (len of them) begin a request target: origin ("/"), asterisk
 * ("*"), absolute (a scheme and ':' within the first 8 bytes), or they end before that is
 * told (a request cut short: decided). A function of its own, verified once: its offset is
 * known only at each length of the method before it. */
__attribute__((noinline))
int request_target(struct __sk_buff *skb, __u32 off, __u32 len)
{
	__u32 m = len > 8 ? 8 : len;
	char b[8];

	if (!skb || !m)
		return 1;
	__builtin_memset(b, ' ', sizeof(b));
	if (bpf_skb_load_bytes(skb, off, b, m))
		return 0;
	if (b[0] == '/' || b[0] == '*')
		return 1;
#pragma unroll
	for (int j = 0; j < 8; j++) {
		char c = b[j];

		if ((__u32)j >= m)
			return 1; /* the segment ends before it is told: decided */
		if (c == ':')
			return j > 0;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (j > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'))))
			return 0;
	}
	return 0; /* 8 letters and no ':': a word ("everybody"), not a scheme (http, https, ws) */
}

/* Whether a client segment at the client's next sequence, with no request open, starts one:
 * its payload opens with an HTTP method token ("GET ", "PROPFIND ", up to 23 characters: the
 * longest registered method, UPDATEREDIRECTREF, has 17), or is a method token cut short:
 * nothing but method characters, the segment ending before the space ("GET", then " /x
 * HTTP/1.1..." in the next segment). A client chooses where its segments end: were a token
 * cut short no start, its request would go to the server undecided, past the shedding, as
 * would every request of a client that always cut them so ("GE" | "T" | " /x ..." leaves no
 * segment that reads as a whole token). A zero-window probe's one byte of a request is that
 * request's first byte: deciding there is deciding the request. Such a request is decided on
 * what its first segment shows (no header, no path: its source and DSCP rules, else the
 * default class).
 * Blank lines before the request line: servers skip them (nginx any number, Apache ten), so a
 * request sent after a CR LF is a request all the same (and was one more way past the
 * shedding). The method is read after them, and the classification reads from there too
 * (the skip in the result). A segment that leads with SLUICE_BLANK_READ of them or more
 * starts a request with its method out of view; one of blank lines only starts none (the
 * bytes after them, at the client's next sequence, are looked at next).
 * strict: capitals, '_' and '-' only, for a connection sluice takes on in the middle (a body
 * uploaded across the attach, whose chunk reads like a request less often so); otherwise any
 * token character.
 * A function of its own, verified once: inlined at its two callers, it doubled the paths of
 * TC ingress the verifier walks. Returns TOKEN_* bits, 0 for no start. */
#define TOKEN_START      1
#define TOKEN_CONNECT    2       /* a CONNECT (cut short before its space too): a tunnel follows */
#define TOKEN_SKIP_SHIFT 8       /* the CR and LF bytes before the method */
#define SLUICE_BLANK_READ 16
__attribute__((noinline))
int request_token(struct __sk_buff *skb, __u32 off, __u32 len, int strict)
{
	__u32 n = len > SLUICE_TOKEN_READ ? SLUICE_TOKEN_READ : len, k = SLUICE_BLANK_READ;
	char b[SLUICE_TOKEN_READ];
	int loose = 0;                   /* a character nginx would not take in a method */

	if (!skb || !n)
		return 0;
	__builtin_memset(b, ' ', sizeof(b)); /* past the payload: reads as the token's end */
	if (bpf_skb_load_bytes(skb, off, b, n))
		return 0;
	if (b[0] == '\r' || b[0] == '\n') {
#pragma unroll
		for (int i = SLUICE_BLANK_READ - 1; i >= 0; i--)
			if (b[i] != '\r' && b[i] != '\n')
				k = i;
		if (k >= len)
			return 0; /* blank lines only (the fill past a short payload is no blank) */
		if (k >= SLUICE_BLANK_READ)
			return TOKEN_START | SLUICE_BLANK_READ << TOKEN_SKIP_SHIFT;
		/* the method after them, from the packet again (k is not known to the verifier
		 * as a constant: a load is cheaper to prove than a variable index) */
		__builtin_memset(b, ' ', sizeof(b));
		n = len - k > SLUICE_TOKEN_READ ? SLUICE_TOKEN_READ : len - k;
		if (bpf_skb_load_bytes(skb, off + k, b, n))
			return 0;
	} else {
		k = 0;
	}
	int sp = -1, connect;

#pragma unroll
	for (int i = 0; i < SLUICE_TOKEN_READ; i++) {
		if (b[i] == ' ') {
			if (!i)
				return 0;
			sp = i;
			break;
		}
		if (!method_char(b[i], 1)) {     /* one test for the common capitals */
			if (strict || !method_char(b[i], 0))
				return 0;
			loose = 1;
		}
	}
	/* No space in reach: capitals all the way are a method longer than sluice reads (a
	 * server such as Go's net/http serves any method), so a start, decided without its path;
	 * anything else that long is not one. */
	if (sp < 0)
		return loose ? 0 : TOKEN_START | k << TOKEN_SKIP_SHIFT;
	connect = b[0] == 'C' && b[1] == 'O' && b[2] == 'N' && b[3] == 'N' && b[4] == 'E' &&
		  b[5] == 'C' && b[6] == 'T' && b[7] == ' ';
	/* A method of other token characters than nginx's ("get", "m3!") is taken only with a
	 * request target after it (request_target): text ("hello world", a log line) is not. */
	if (loose && k + sp + 1 < len && !request_target(skb, off + k + sp + 1, len - k - sp - 1))
		return 0;
	return TOKEN_START | k << TOKEN_SKIP_SHIFT | (connect ? TOKEN_CONNECT : 0);
}

/* Source/DSCP rules, then the payload's, given what the trie says of the source (a: from the
 * flow's cache, or its source rule just looked up). The priority header counts only from a
 * trusted source (anyone can write one): for any other the header rule is left out and the
 * other rules decide as they would without it; a header or DSCP mark left out that would have
 * decided is counted (count_untrusted). */
static __always_inline struct class_pick classify_request(struct __sk_buff *skb,
							  const struct sluice_service *sc,
							  __u32 svc, const struct pkt *p,
							  __u32 skip, struct src_answer *a)
{
	struct class_pick best = classify_l3_with(sc, svc, p, a);
	__u32 bound = best.order;
	int r;

	/* As many blank bytes as request_token reads before the request line (16) or more: no
	 * client needs them, and behind them the path is out of view (a path rule's lower class
	 * dodged): the lowest class, whatever the other rules say. */
	if (skip >= SLUICE_BLANK_READ) {
		best.class = 3;
		return best;
	}

	/* Only a header rule that could still decide (before every source and DSCP rule that
	 * matched) needs the source's trust: the payload scan does not look for it otherwise. */
	if (sc->header_order < best.order && !source_trust_of(a, svc, p))
		bound |= 0x100;
	/* skip: blank lines before the request line (starts_with_method) */
	r = classify_payload(skb, svc, p->payload_off + skip, p->payload_len - skip, bound);

	if (r >= 0 && (r & PAYLOAD_HEADER_IGNORED) && sc->header_order < best.ignored)
		best.ignored = sc->header_order;
	if (r >= 0 && (__u8)(r >> 8) != SLUICE_RULE_NONE) {
		best.order = (__u8)(r >> 8);
		best.class = r & 3;
	}
	count_untrusted(svc, &best);
	return best;
}

/* ---- response status ---- */

/* Status code of a response's first segment ("HTTP/1.x NNN"), or 0 when there is none. */
static __always_inline int response_status(struct __sk_buff *skb, const struct pkt *p)
{
	char s[12];

	if (p->payload_len < sizeof(s) || bpf_skb_load_bytes(skb, p->payload_off, s, sizeof(s)))
		return 0;
	if (s[0] != 'H' || s[1] != 'T' || s[2] != 'T' || s[3] != 'P' || s[4] != '/' || s[8] != ' ')
		return 0;
	if (s[9] < '1' || s[9] > '5' || s[10] < '0' || s[10] > '9' || s[11] < '0' || s[11] > '9')
		return 0;
	return (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
}

/* ---- the kernel's answer to a refused request ----
 * The request segment is rewritten into the complete response (+FIN) and a clone is sent
 * back out to the client; the original is then turned into an RST towards the server, so the
 * server's socket is released at once and it never sees the request. */

struct seg_hdrs {
	struct ethhdr *eth;
	struct iphdr *ip4;
	struct ipv6hdr *ip6;
	struct tcphdr *tcp;
};

/* Re-derive header pointers after the skb was resized. l3/l4 offsets are those of the parse. */
static __always_inline int reload_hdrs(struct __sk_buff *skb, __u32 l3_off, __u32 l4_off,
				       int v4, struct seg_hdrs *h)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;

	/* The barrier stops clang from dropping the masks on the grounds of earlier checks the
	 * verifier no longer sees after the resize. */
	asm volatile("" : "+r"(l3_off), "+r"(l4_off));
	l3_off &= 0x3f;   /* Ethernet + at most two VLAN tags */
	l4_off &= 0x7f;   /* + 20-byte IPv4 or 40-byte IPv6 header */
	h->eth = data;
	if ((void *)(h->eth + 1) > data_end)
		return -1;
	if (v4) {
		h->ip4 = data + l3_off;
		if ((void *)(h->ip4 + 1) > data_end)
			return -1;
	} else {
		h->ip6 = data + l3_off;
		if ((void *)(h->ip6 + 1) > data_end)
			return -1;
	}
	h->tcp = data + l4_off;
	if ((void *)(h->tcp + 1) > data_end)
		return -1;
	return 0;
}

static __always_inline void swap_endpoints(struct seg_hdrs *h, int v4)
{
	__u8 mac[ETH_ALEN];
	__be16 port;

	__builtin_memcpy(mac, h->eth->h_source, ETH_ALEN);
	__builtin_memcpy(h->eth->h_source, h->eth->h_dest, ETH_ALEN);
	__builtin_memcpy(h->eth->h_dest, mac, ETH_ALEN);
	if (v4) {
		__be32 a = h->ip4->saddr;
		h->ip4->saddr = h->ip4->daddr;
		h->ip4->daddr = a;
	} else {
		struct in6_addr a = h->ip6->saddr;
		h->ip6->saddr = h->ip6->daddr;
		h->ip6->daddr = a;
	}
	port = h->tcp->source;
	h->tcp->source = h->tcp->dest;
	h->tcp->dest = port;
}

/* Set a 20-byte TCP header's seq/ack/flags and the IP length, and fix both checksums. */
static __always_inline void finish_segment(struct seg_hdrs *h, int v4, __u32 seq, __u32 ack,
					   __u8 flags, __u32 payload_len, __u32 payload_sum)
{
	struct tcphdr *tcp = h->tcp;

	tcp->seq = bpf_htonl(seq);
	tcp->ack_seq = bpf_htonl(ack);
	((__u8 *)tcp)[12] = 5 << 4;        /* doff 5, no options */
	((__u8 *)tcp)[13] = flags;
	tcp->urg_ptr = 0;
	tcp->check = 0;
	if (v4) {
		h->ip4->tot_len = bpf_htons(sizeof(struct iphdr) + sizeof(*tcp) + payload_len);
		h->ip4->ttl = 64;
		h->ip4->id = 0;
		h->ip4->frag_off = bpf_htons(0x4000);
		h->ip4->check = ipv4_csum(h->ip4);
		tcp->check = tcp_csum_v4(h->ip4, tcp, sizeof(*tcp) + payload_len, payload_sum);
	} else {
		h->ip6->payload_len = bpf_htons(sizeof(*tcp) + payload_len);
		h->ip6->hop_limit = 64;
		tcp->check = tcp_csum_v6(h->ip6, tcp, sizeof(*tcp) + payload_len, payload_sum);
	}
}

#define TCPF_FIN 0x01
#define TCPF_RST 0x04
#define TCPF_PSH 0x08
#define TCPF_ACK 0x10

enum answer_result {
	ANSWER_SENT = 0,        /* client answered; the skb is now an RST for the server: pass it */
	ANSWER_NOT_SENT = -1,   /* nothing was changed: the caller admits the request */
	ANSWER_BROKEN = -2,     /* the skb was half rewritten: drop it (the client's TCP resends) */
};

/* Answer a refused request with the reply `rk` (index into `replies`) and reset the server
 * side. A global function on scalars, verified once (see classify_payload); BPF functions take
 * at most five arguments, hence the packing:
 *   offs = l3_off | l4_off << 8 | v4 << 16,  plen_rk = sequence length | rk << 16 (the
 *   payload's, plus one for a FIN the segment carries: the reply acknowledges both). */
__attribute__((noinline))
int answer_request(struct __sk_buff *skb, __u32 offs, __u32 cseq, __u32 cack, __u32 plen_rk)
{
	__u32 l3_off = offs & 0xff, l4_off = (offs >> 8) & 0xff, v4 = (offs >> 16) & 1;
	__u32 plen = plen_rk & 0xffff, rk = plen_rk >> 16;
	const struct sluice_reply *reply = bpf_map_lookup_elem(&replies, &rk);
	struct seg_hdrs h = {};
	__u32 len;

	if (!skb || !reply)
		return ANSWER_NOT_SENT;
	len = reply->len;
	if (l3_off > 22 || l4_off > 0x7f || len == 0 || len > SLUICE_REPLY_MAX || (len & 3))
		return ANSWER_NOT_SENT;

	/* 1. The response, to the client. */
	if (bpf_skb_change_tail(skb, l4_off + sizeof(struct tcphdr) + len, 0))
		return ANSWER_NOT_SENT;
	if (bpf_skb_store_bytes(skb, l4_off + sizeof(struct tcphdr), reply->text, len, 0))
		return ANSWER_BROKEN;
	if (reload_hdrs(skb, l3_off, l4_off, v4, &h))
		return ANSWER_BROKEN;
	swap_endpoints(&h, v4);
	finish_segment(&h, v4, cack, cseq + plen, TCPF_ACK | TCPF_PSH | TCPF_FIN, len, reply->csum);
	if (bpf_clone_redirect(skb, skb->ifindex, 0))
		return ANSWER_BROKEN;

	/* 2. The same skb becomes an RST to the server at the client's sequence number. */
	if (bpf_skb_change_tail(skb, l4_off + sizeof(struct tcphdr), 0))
		return ANSWER_BROKEN;
	if (reload_hdrs(skb, l3_off, l4_off, v4, &h))
		return ANSWER_BROKEN;
	swap_endpoints(&h, v4);
	finish_segment(&h, v4, cseq, cack, TCPF_RST | TCPF_ACK, 0, 0);
	return ANSWER_SENT;
}

/* A request segment with IPv4 options or IPv6 extension headers is answered without them:
 * its TCP header is moved back behind the fixed IP header (the reply's text and the RST are
 * then written behind it). Returns the new l4 offset, or 0 when the skb could not be changed
 * (possibly half changed: drop it). */
static __always_inline __u32 strip_ip_options(struct __sk_buff *skb, const struct pkt *p)
{
	__u32 l4 = p->l3_off + (p->v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	__u8 fix = p->v6 ? IPPROTO_TCP : 0x45;   /* next header; version 4, ihl 5 */
	struct tcphdr th;

	if (l4 == p->l4_off)
		return l4;
	th = *p->tcp;
	if (bpf_skb_store_bytes(skb, p->l3_off + (p->v6 ? 6 : 0), &fix, 1, 0))
		return 0;
	if (bpf_skb_store_bytes(skb, l4, &th, sizeof(th), 0))
		return 0;
	return l4;
}

static __always_inline int answer_refused_request(struct __sk_buff *skb, const struct pkt *p,
						  __u32 rk)
{
	__u32 seq = bpf_ntohl(p->tcp->seq), ack = bpf_ntohl(p->tcp->ack_seq), l4_off;
	/* A client that wrote its request and half-closed in one segment has its FIN taken by
	 * the reply too: left unacknowledged, its stack would resend it into the reset socket
	 * and meet an RST instead of a clean close. */
	__u32 seq_len = p->payload_len + !!p->tcp->fin;
	int rc;

	if (seq_len > 0xffff)
		return ANSWER_NOT_SENT;
	l4_off = strip_ip_options(skb, p);
	if (!l4_off)
		return ANSWER_BROKEN;
	rc = answer_request(skb, p->l3_off | l4_off << 8 | (!p->v6) << 16, seq, ack,
			    seq_len | rk << 16);
	/* Headers already moved: never pass it on as it is now. */
	return rc == ANSWER_NOT_SENT && l4_off != p->l4_off ? ANSWER_BROKEN : rc;
}

#endif
