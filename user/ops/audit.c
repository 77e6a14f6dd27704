// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* sluice: the switch audit log. See audit.h. */
#include "common/errf.h"
#include "ops/audit.h"
#include "common/duration.h"
#include "common/jsonio.h"
#include "common/utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static void side_from(struct audit_side *d, const struct sw_switch *sw)
{
	memset(d, 0, sizeof(*d));
	if (!sw)
		return;
	d->present = 1;
	d->shed_pct = sw->shed_pct;
	snprintf(d->reason, sizeof(d->reason), "%s", sw->reason);
	snprintf(d->owner, sizeof(d->owner), "%s", sw->owner);
	d->expires_at = sw->expires_at;
	d->kind = sw->kind;
	snprintf(d->runbook, sizeof(d->runbook), "%s", sw->runbook);
	d->renewals = sw->renewals;
}

void audit_entry_make(struct audit_entry *e, uint64_t now, uint32_t uid, const char *user,
		      const char *command, const char *service, int cls,
		      const struct sw_switch *old, const struct sw_switch *new, const char *reason)
{
	memset(e, 0, sizeof(*e));
	e->time = now;
	e->uid = uid;
	/* The caller's name is not held to a length anywhere (root may name the person behind
	 * sudo, and the passwd file names anyone): cut where a character starts, so the record
	 * stays JSON (jansson refuses half a character, and the change would go unaudited). */
	user = user ? user : "?";
	snprintf(e->user, sizeof(e->user), "%.*s", (int)utf8_cut(user, sizeof(e->user) - 1), user);
	snprintf(e->command, sizeof(e->command), "%s", command ? command : "?");
	snprintf(e->service, sizeof(e->service), "%s", service ? service : "?");
	e->class = cls;
	side_from(&e->old, old);
	side_from(&e->new, new);
	if (!reason)
		reason = new ? new->reason : old ? old->reason : "";
	snprintf(e->reason, sizeof(e->reason), "%s", reason);
}

static json_t *side_json(const struct audit_side *s)
{
	char iso[SLUICE_ISO_LEN];

	if (!s->present)
		return json_null();
	return json_pack("{s:i,s:s,s:s,s:s,s:s,s:s,s:i}", "shed_pct", s->shed_pct,
			 "reason", s->reason, "owner", s->owner,
			 "expires_at", time_format_iso(s->expires_at, iso, sizeof(iso)),
			 "kind", sw_kind_str(s->kind), "runbook", s->runbook,
			 "renewals", s->renewals);
}

/* The record as a JSON object (NULL when out of memory). */
static json_t *entry_json(const struct audit_entry *e)
{
	char iso[SLUICE_ISO_LEN];

	/* the user as jsonio_text() writes it: a name that is not UTF-8 (a passwd entry in
	 * another encoding) is audited with U+FFFD, not left unaudited */
	return json_pack("{s:s,s:I,s:o,s:s,s:s,s:o,s:o,s:o,s:s}",
			 "time", time_format_iso(e->time, iso, sizeof(iso)),
			 "uid", (json_int_t)e->uid, "user", jsonio_text(e->user),
			 "command", e->command, "service", e->service,
			 "class", e->class < 0 ? json_null() : json_string(sw_class_str(e->class)),
			 "old", side_json(&e->old), "new", side_json(&e->new),
			 "reason", e->reason);
}

int audit_format_json(const struct audit_entry *e, char **out, size_t *outlen)
{
	json_t *o = entry_json(e);
	int rc;

	rc = jsonio_dump_text(o, 0, out, outlen);      /* one record per line */
	json_decref(o);
	return rc;
}

static int get_s(const json_t *o, const char *k, char *dst, size_t n, char *err, size_t errlen)
{
	const json_t *v = json_object_get(o, k);
	if (!json_is_string(v))
		return errf(err, errlen, "\"%s\" missing or not a string", k);
	snprintf(dst, n, "%s", json_string_value(v));
	return 0;
}

static int get_side(const json_t *o, const char *k, struct audit_side *s, char *err, size_t errlen)
{
	const json_t *v = json_object_get(o, k), *p, *x;

	memset(s, 0, sizeof(*s));
	if (!v)
		return errf(err, errlen, "\"%s\" missing", k);
	if (json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return errf(err, errlen, "\"%s\" must be an object or null", k);
	p = json_object_get(v, "shed_pct");
	if (!json_is_integer(p) || json_integer_value(p) < 0 || json_integer_value(p) > 100)
		return errf(err, errlen, "\"%s.shed_pct\" missing or not 0..100", k);
	s->shed_pct = (int)json_integer_value(p);
	if (get_s(v, "reason", s->reason, sizeof(s->reason), err, errlen) ||
	    get_s(v, "owner", s->owner, sizeof(s->owner), err, errlen))
		return -1;
	x = json_object_get(v, "expires_at");
	if (!json_is_string(x) || time_parse_iso(json_string_value(x), &s->expires_at))
		return errf(err, errlen, "\"%s.expires_at\" missing or not an ISO 8601 UTC time", k);
	x = json_object_get(v, "kind");
	if (x && (!json_is_string(x) || (s->kind = sw_kind_parse(json_string_value(x))) < 0))
		return errf(err, errlen, "\"%s.kind\" is not ops, release or experiment", k);
	if (json_object_get(v, "runbook") &&
	    get_s(v, "runbook", s->runbook, sizeof(s->runbook), err, errlen))
		return -1;
	x = json_object_get(v, "renewals");
	if (x && (!json_is_integer(x) || json_integer_value(x) < 0))
		return errf(err, errlen, "\"%s.renewals\" is not a count", k);
	s->renewals = x ? (int)json_integer_value(x) : 0;
	s->present = 1;
	return 0;
}

int audit_parse_line(const char *line, struct audit_entry *e, char *err, size_t errlen)
{
	char why[200], cls[8], tbuf[SLUICE_ISO_LEN];
	json_t *root;
	const json_t *uid;
	size_t len = strlen(line);
	int rc = -1;

	memset(e, 0, sizeof(*e));
	root = jsonio_parse(line, len, why, sizeof(why));
	if (!root)
		return errf(err, errlen, "bad JSON: %s", why);
	if (!json_is_object(root)) {
		errf(err, errlen, "not a JSON object");
		goto out;
	}
	if (get_s(root, "time", tbuf, sizeof(tbuf), err, errlen))
		goto out;
	if (time_parse_iso(tbuf, &e->time)) {
		errf(err, errlen, "\"time\" is not an ISO 8601 UTC time");
		goto out;
	}
	uid = json_object_get(root, "uid");
	if (!json_is_integer(uid) || json_integer_value(uid) < 0 ||
	    json_integer_value(uid) > UINT32_MAX) {
		errf(err, errlen, "\"uid\" missing or not a uid");
		goto out;
	}
	e->uid = (uint32_t)json_integer_value(uid);
	if (get_s(root, "user", e->user, sizeof(e->user), err, errlen) ||
	    get_s(root, "command", e->command, sizeof(e->command), err, errlen) ||
	    get_s(root, "service", e->service, sizeof(e->service), err, errlen))
		goto out;
	if (json_is_null(json_object_get(root, "class")))
		snprintf(cls, sizeof(cls), "-");
	else if (get_s(root, "class", cls, sizeof(cls), err, errlen))
		goto out;
	e->class = strcmp(cls, "-") ? sw_class_parse(cls) : -1;
	if (e->class < 0 && strcmp(cls, "-")) {
		errf(err, errlen, "unknown class \"%s\"", cls);
		goto out;
	}
	if (get_side(root, "old", &e->old, err, errlen) || get_side(root, "new", &e->new, err, errlen) ||
	    get_s(root, "reason", e->reason, sizeof(e->reason), err, errlen))
		goto out;
	rc = 0;
out:
	json_decref(root);
	return rc;
}

static void side_human(const struct audit_side *s, char *buf, size_t len)
{
	char iso[SLUICE_ISO_LEN];
	if (!s->present)
		snprintf(buf, len, "normal");
	else
		snprintf(buf, len, "shed %d%% until %s (owner %s%s%s%s)", s->shed_pct,
			 time_format_iso(s->expires_at, iso, sizeof(iso)), s->owner,
			 s->kind ? ", " : "", s->kind ? sw_kind_str(s->kind) : "",
			 s->renewals ? ", renewed" : "");
}

char *audit_format_human(const struct audit_entry *e, char *buf, size_t len)
{
	char iso[SLUICE_ISO_LEN], o[SW_OWNER_LEN + 96], n[SW_OWNER_LEN + 96];

	side_human(&e->old, o, sizeof(o));
	side_human(&e->new, n, sizeof(n));
	if (e->class < 0) {
		snprintf(buf, len, "%s %s(%u) %s %s -- reason: %s",
			 time_format_iso(e->time, iso, sizeof(iso)), e->user, e->uid, e->command,
			 e->service[0] ? e->service : "(node)",
			 e->reason[0] ? e->reason : "(none given)");
		return buf;
	}
	snprintf(buf, len, "%s %s(%u) %s %s/%s: %s -> %s -- reason: %s",
		 time_format_iso(e->time, iso, sizeof(iso)), e->user, e->uid, e->command, e->service,
		 sw_class_str(e->class), o, n, e->reason[0] ? e->reason : "(none given)");
	return buf;
}

/* 1 when the file's last byte is not a newline: a record cut short by a failed write (disk
 * full) or a crash. Appended to as is, the next record would be glued onto it and both lines
 * would read as damaged. -1 with errno when that cannot be told for the moment (out of
 * descriptors, an I/O error): the record is refused then, and its writer tries again. */
static int ends_mid_line(const char *path, int fd)
{
	struct stat st;
	char last;
	ssize_t r;
	int rfd, e;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size == 0)
		return 0;
	rfd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (rfd < 0)
		return -1;
	r = pread(rfd, &last, 1, st.st_size - 1);
	e = errno;
	close(rfd);
	if (r < 0) {
		errno = e;
		return -1;
	}
	return r == 1 && last != '\n';
}

int audit_append(const char *path, const struct audit_entry *e, char *err, size_t errlen)
{
	char *line;
	size_t len, off = 0;
	struct stat st;
	off_t start = -1;
	int fd, mid;

	if (audit_format_json(e, &line, &len))
		return errf(err, errlen, "audit log %s: out of memory", path);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		int er = errno;
		free(line);
		return errf(err, errlen, "cannot open audit log %s: %s", path, strerror(er));
	}
	mid = ends_mid_line(path, fd);
	if (mid < 0) {
		int er = errno;
		free(line);
		close(fd);
		return errf(err, errlen, "cannot read the end of audit log %s: %s", path,
			    strerror(er));
	}
	if (mid && write(fd, "\n", 1) != 1) {
		int er = errno;
		free(line);
		close(fd);
		return errf(err, errlen, "cannot write audit log %s: %s", path, strerror(er));
	}
	if (fstat(fd, &st) == 0)
		start = st.st_size;
	while (off < len) {
		ssize_t w = write(fd, line + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int er = errno;
			/* Take back the part written (sluiced is the one writer), so the log
			 * holds no half record; ends_mid_line covers a truncate that fails. */
			if (off && start >= 0 && ftruncate(fd, start) == 0)
				off = 0;
			free(line);
			close(fd);
			return errf(err, errlen, "cannot write audit log %s: %s", path, strerror(er));
		}
		off += (size_t)w;
	}
	free(line);
	/* EINVAL: a file that cannot be synced (a FIFO, a character device): the record went to
	 * it whole, and counting it as refused would write it again */
	if (fsync(fd) && errno != EINVAL) {
		int er = errno;
		close(fd);
		return errf(err, errlen, "cannot fsync audit log %s: %s", path, strerror(er));
	}
	if (close(fd))
		return errf(err, errlen, "cannot write audit log %s: %s", path, strerror(errno));
	return 0;
}

/* The log opened for reading: a regular file, or NULL with errno (EINVAL: something else).
 * O_NONBLOCK: a FIFO in its place must be refused, not wait in open() for a writer. */
static FILE *open_log(const char *path)
{
	struct stat st;
	FILE *f = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), e;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0) {
		if (!S_ISREG(st.st_mode))
			errno = EINVAL;
		else if (fcntl(fd, F_SETFL, 0) == 0)   /* back to blocking reads for stdio */
			f = fdopen(fd, "r");
	}
	if (f)
		return f;
	e = errno;
	close(fd);
	errno = e;
	return NULL;
}

/* What a walk over the log does with each line: a record, or NULL and why it is unreadable. */
typedef void (*audit_each_fn)(void *ctx, long lineno, const struct audit_entry *e,
			      const char *why);

/* Every line of the log, oldest first (only the last `last` when last > 0), handed to each.
 * Returns the lines read; -1 with err when the log cannot be opened or read, and -2 (err
 * untouched) when it does not exist. */
static long audit_walk(const char *path, int last, audit_each_fn each, void *ctx, char *err,
		       size_t errlen)
{
	FILE *f = open_log(path);
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	long total = 0, lineno = 0, skip = 0;

	if (!f) {
		if (errno == ENOENT)
			return -2;
		return errf(err, errlen, "cannot open audit log %s: %s", path,
			    errno == EINVAL ? "not a regular file" : strerror(errno));
	}
	if (last > 0) {
		while ((n = getline(&line, &cap, f)) > 0)
			total++;
		skip = total > last ? total - last : 0;
		rewind(f);
	}
	while ((n = getline(&line, &cap, f)) > 0) {
		struct audit_entry e;
		char why[200];

		if (++lineno <= skip)
			continue;
		if (line[n - 1] == '\n')
			line[--n] = 0;
		if (audit_parse_line(line, &e, why, sizeof(why)))
			each(ctx, lineno, NULL, why);
		else
			each(ctx, lineno, &e, NULL);
	}
	free(line);
	if (ferror(f)) {
		fclose(f);
		return errf(err, errlen, "cannot read audit log %s", path);
	}
	fclose(f);
	return lineno;
}

struct print_ctx {
	FILE *out, *errs;
	json_t *arr;           /* --json: the records so far */
	int bad, oom;
};

static void print_human(void *ctx, long lineno, const struct audit_entry *e, const char *why)
{
	struct print_ctx *p = ctx;
	char buf[1024];

	if (!e) {
		fprintf(p->out, "line %ld: unreadable audit record: %s\n", lineno, why);
		p->bad++;
		return;
	}
	fprintf(p->out, "%s\n", audit_format_human(e, buf, sizeof(buf)));
}

int audit_print(FILE *out, const char *path, int last, char *err, size_t errlen)
{
	struct print_ctx p = { .out = out };
	long lines = audit_walk(path, last, print_human, &p, err, errlen);

	if (lines == -1)
		return -1;
	if (lines == -2)
		fprintf(out, "no switch changes recorded (%s does not exist)\n", path);
	else if (lines == 0)
		fprintf(out, "no switch changes recorded (%s is empty)\n", path);
	return p.bad;
}

static void collect_json(void *ctx, long lineno, const struct audit_entry *e, const char *why)
{
	struct print_ctx *p = ctx;

	if (!e) {
		fprintf(p->errs, "line %ld: unreadable audit record: %s\n", lineno, why);
		p->bad++;
		return;
	}
	if (json_array_append_new(p->arr, entry_json(e)))
		p->oom = 1;
}

int audit_print_json(FILE *out, FILE *errs, const char *path, int last, char *err,
		     size_t errlen)
{
	struct print_ctx p = { .out = out, .errs = errs, .arr = json_array() };
	long lines;

	if (!p.arr)
		return errf(err, errlen, "out of memory");
	lines = audit_walk(path, last, collect_json, &p, err, errlen);
	if (lines != -1 && (p.oom || jsonio_print_line(out, p.arr)))
		lines = errf(err, errlen, "out of memory");
	json_decref(p.arr);
	return lines == -1 ? -1 : p.bad;
}
