// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// loadgen: the latency histogram and the JSON report.
#include "loadgen.h"

int h_index(uint64_t v)
{
	if (v < 2 * H_SUB)
		return (int)v;
	int msb = 63 - __builtin_clzll(v);
	int shift = msb - 6;
	int idx = (shift + 1) * H_SUB + (int)(v >> shift) - H_SUB;
	return idx < H_BUCKETS ? idx : H_BUCKETS - 1;
}

double h_value(int idx) // middle of the bucket, µs
{
	if (idx < 2 * H_SUB)
		return idx;
	int shift = idx / H_SUB - 1;
	uint64_t sub = (uint64_t)(idx % H_SUB + H_SUB);
	return (double)(sub << shift) + ((1ULL << shift) - 1) / 2.0;
}

void h_add(struct hist *h, uint64_t us)
{
	h->b[h_index(us)]++;
	h->n++;
	if (us > h->max_us)
		h->max_us = us;
}

void h_merge(struct hist *dst, const struct hist *src)
{
	for (int i = 0; i < H_BUCKETS; i++)
		dst->b[i] += src->b[i];
	dst->n += src->n;
	if (src->max_us > dst->max_us)
		dst->max_us = src->max_us;
}

double h_pct_ms(const struct hist *h, double p)
{
	uint64_t rank = (uint64_t)ceil(p * (double)h->n), cum = 0;
	if (rank < 1)
		rank = 1;
	for (int i = 0; i < H_BUCKETS; i++) {
		cum += h->b[i];
		if (cum >= rank) {
			double v = h_value(i);
			return (v > (double)h->max_us ? (double)h->max_us : v) / 1000.0;
		}
	}
	return h->max_us / 1000.0;
}

// ---------------------------------------------------------------- output
void stats_merge(struct stats *t, const struct stats *s)
{
	t->sent += s->sent;
	t->ok += s->ok;
	t->h429 += s->h429;
	t->h503 += s->h503;
	t->other_status += s->other_status;
	t->refused += s->refused;
	t->reset += s->reset;
	t->eof += s->eof;
	t->timeout += s->timeout;
	t->other_error += s->other_error;
	t->unfinished += s->unfinished;
	t->retried += s->retried;
	t->lost_on_retry += s->lost_on_retry;
	t->lost_on_fresh += s->lost_on_fresh;
	t->stale_dropped += s->stale_dropped;
	for (int i = 0; i < 600; i++)
		t->status[i] += s->status[i];
	h_merge(&t->ok_h, &s->ok_h);
	h_merge(&t->rej_h, &s->rej_h);
	h_merge(&t->ok_new_h, &s->ok_new_h);
}

void print_pcts(FILE *f, const char *prefix, const struct hist *h)
{
	static const struct {
		const char *name;
		double p;
	} ps[] = { { "p50", 0.5 }, { "p90", 0.9 }, { "p99", 0.99 } };
	for (size_t i = 0; i < 3; i++) {
		if (h->n)
			fprintf(f, ",\"%s%s_ms\":%.3f", prefix, ps[i].name, h_pct_ms(h, ps[i].p));
		else
			fprintf(f, ",\"%s%s_ms\":null", prefix, ps[i].name);
	}
	if (h->n)
		fprintf(f, ",\"%smax_ms\":%.3f", prefix, h->max_us / 1000.0);
	else
		fprintf(f, ",\"%smax_ms\":null", prefix);
}

void print_stats(FILE *f, const struct stats *s, double dur)
{
	// every arrival ends as exactly one of: ok, rejected (429, 503, refused), errors
	uint64_t errors = s->other_status + s->reset + s->eof + s->timeout + s->other_error +
			  s->unfinished;
	fprintf(f,
		"{\"sent\":%llu,\"ok\":%llu,\"http_429\":%llu,\"http_503\":%llu,"
		"\"other_status\":%llu,\"refused\":%llu,\"reset\":%llu,\"eof\":%llu,"
		"\"timeout\":%llu,\"other_error\":%llu,\"unfinished\":%llu,\"retried\":%llu,"
		"\"lost_on_retry\":%llu,\"lost_on_fresh\":%llu,\"stale_dropped\":%llu,"
		"\"errors\":%llu,\"rejected\":%llu,\"ok_rate\":%.2f",
		(unsigned long long)s->sent, (unsigned long long)s->ok, (unsigned long long)s->h429,
		(unsigned long long)s->h503, (unsigned long long)s->other_status,
		(unsigned long long)s->refused, (unsigned long long)s->reset,
		(unsigned long long)s->eof, (unsigned long long)s->timeout,
		(unsigned long long)s->other_error, (unsigned long long)s->unfinished,
		(unsigned long long)s->retried, (unsigned long long)s->lost_on_retry,
		(unsigned long long)s->lost_on_fresh, (unsigned long long)s->stale_dropped,
		(unsigned long long)errors,
		(unsigned long long)(s->h429 + s->h503 + s->refused),
		dur > 0 ? s->ok / dur : 0.0);
	print_pcts(f, "", &s->ok_h);
	print_pcts(f, "reject_", &s->rej_h);
	fprintf(f, ",\"ok_new_conn\":%llu", (unsigned long long)s->ok_new_h.n);
	print_pcts(f, "new_conn_", &s->ok_new_h);
	fprintf(f, ",\"status\":{");
	bool first = true;
	for (int i = 0; i < 600; i++)
		if (s->status[i]) {
			fprintf(f, "%s\"%d\":%llu", first ? "" : ",", i, (unsigned long long)s->status[i]);
			first = false;
		}
	fprintf(f, "}}");
}

void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
	fputc('"', f);
}
