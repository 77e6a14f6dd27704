// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Unit tests: the operator protocol (user/ops/opproto.c): who may change (fake peer
 * credentials), the groups of a caller from /proc, the record sluiced publishes, one-datagram
 * JSON messages; and the ledger rules the daemon applies (renewal limit, kinds, the optional
 * ledger keys, audit records of whole-service commands, the drill age of a plan). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ops/audit.h"
#include "ops/opproto.h"
#include "ops/plan.h"
#include "ops/switches.h"

#define T0 1714564800ull /* 2024-05-01T12:00:00Z */

static struct opp_peer peer(uint32_t uid, uint32_t gid, int n, const uint32_t *groups)
{
	struct opp_peer p = { .uid = uid, .gid = gid, .n_groups = n };

	for (int i = 0; i < n; i++)
		p.groups[i] = groups[i];
	return p;
}

static void test_peer_root_always(void **state)
{
	struct opp_peer p = peer(0, 0, 0, NULL);
	char why[256];

	assert_int_equal(opp_peer_allowed(&p, "", -1, why, sizeof(why)), 0);
	assert_int_equal(opp_peer_allowed(&p, "sre", -1, why, sizeof(why)), 0);
	assert_int_equal(opp_peer_allowed(&p, "sre", 1234, why, sizeof(why)), 0);
}

static void test_peer_group_members(void **state)
{
	const uint32_t sup[] = { 24, 27, 1234 };
	struct opp_peer primary = peer(1000, 1234, 0, NULL);
	struct opp_peer supplementary = peer(1000, 1000, 3, sup);
	char why[256];

	assert_int_equal(opp_peer_allowed(&primary, "sre", 1234, why, sizeof(why)), 0);
	assert_int_equal(opp_peer_allowed(&supplementary, "sre", 1234, why, sizeof(why)), 0);
}

static void test_peer_refused(void **state)
{
	const uint32_t sup[] = { 24, 27 };
	struct opp_peer p = peer(1000, 1000, 2, sup);
	char why[256];

	assert_int_equal(opp_peer_allowed(&p, "sre", 1234, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "permission denied"));
	assert_non_null(strstr(why, "'sre'"));
	assert_non_null(strstr(why, "uid 1000"));
	/* no group configured: only root */
	assert_int_equal(opp_peer_allowed(&p, "", -1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "no switch_group is configured"));
	/* a configured group that does not exist admits nobody but root, even gid 0 callers */
	p.gid = 0;
	assert_int_equal(opp_peer_allowed(&p, "sre", -1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "does not exist"));
}

static void test_status_groups(void **state)
{
	struct opp_peer p = { 0 };

	assert_int_equal(opp_parse_status_groups("Name:\tx\nUid:\t1\t1\t1\t1\nGroups:\t4 24 27 50 \n"
						 "NStgid:\t1\n", &p), 0);
	assert_int_equal(p.n_groups, 4);
	assert_int_equal(p.groups[0], 4);
	assert_int_equal(p.groups[3], 50);
	assert_int_equal(opp_parse_status_groups("Name:\tx\nGroups:\t\nPid:\t3\n", &p), 0);
	assert_int_equal(p.n_groups, 0);
	assert_int_equal(opp_parse_status_groups("Name:\tx\nPid:\t3\n", &p), -1);
}

static void test_peer_of_socketpair(void **state)
{
	struct opp_peer p;
	char err[256];
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(opp_peer_of(sv[0], &p, err, sizeof(err)), 0);
	assert_int_equal(p.uid, getuid());
	assert_int_equal(p.gid, getgid());
	assert_int_equal(p.pid, getpid());
	/* the supplementary groups: the same count getgroups() sees */
	assert_int_equal(p.n_groups, getgroups(0, NULL));
	close(sv[0]);
	close(sv[1]);
}

static void test_record_roundtrip(void **state)
{
	struct opp_record r = { .pid = 4242 }, back;
	char *text, err[256];
	size_t len;

	snprintf(r.config, sizeof(r.config), "/etc/sluice/sluice.yaml");
	snprintf(r.state_dir, sizeof(r.state_dir), "/srv/state");
	snprintf(r.pin_dir, sizeof(r.pin_dir), "/sys/fs/bpf/sluice");
	snprintf(r.socket, sizeof(r.socket), "/run/sluice/sluiced.sock");
	snprintf(r.switch_group, sizeof(r.switch_group), "sre");
	assert_int_equal(opp_record_format(&r, &text, &len), 0);
	assert_int_equal(opp_record_parse(text, len, &back, err, sizeof(err)), 0);
	free(text);
	assert_int_equal(back.pid, 4242);
	assert_string_equal(back.state_dir, "/srv/state");
	assert_string_equal(back.socket, "/run/sluice/sluiced.sock");
	assert_string_equal(back.switch_group, "sre");
	assert_int_equal(opp_record_parse("{\"pid\": 0}", 10, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "pid"));
	text = "{\"pid\": 7, \"config\": \"c\"}";
	assert_int_equal(opp_record_parse(text, strlen(text), &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "state_dir"));
	assert_int_equal(opp_record_parse("not json", 8, &back, err, sizeof(err)), -1);
}

static void test_record_file(void **state)
{
	char dir[] = "/tmp/sluice-test-opp-XXXXXX", err[256];
	struct opp_record r = { .pid = (long)getpid() }, back;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(opp_record_read(dir, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no sluiced publishes itself"));
	snprintf(r.state_dir, sizeof(r.state_dir), "/x");
	assert_int_equal(opp_record_write(dir, &r, err, sizeof(err)), 0);
	assert_int_equal(opp_record_read(dir, &back, err, sizeof(err)), 0);
	assert_string_equal(back.state_dir, "/x");
	opp_record_remove(dir, r.pid + 1);            /* not ours: stays */
	assert_int_equal(opp_record_read(dir, &back, err, sizeof(err)), 0);
	opp_record_remove(dir, r.pid);
	assert_int_equal(opp_record_read(dir, &back, err, sizeof(err)), -1);
	/* a record whose process is gone is reported as such */
	r.pid = 0x3ffffff0;
	assert_int_equal(opp_record_write(dir, &r, err, sizeof(err)), 0);
	assert_int_equal(opp_record_read(dir, &back, err, sizeof(err)), -2);
	assert_non_null(strstr(err, "no longer runs"));
	opp_record_remove(dir, r.pid);
	rmdir(dir);
}

static void test_messages(void **state)
{
	json_t *m = json_pack("{s:s,s:s}", "op", "switch set", "service", "web"), *back;
	char err[256];
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(opp_recv(sv[1], 10, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no answer within 10 ms"));
	assert_int_equal(opp_send(sv[0], m, err, sizeof(err)), 0);
	assert_int_equal(opp_recv(sv[1], 1000, &back, err, sizeof(err)), 0);
	assert_string_equal(opp_str(back, "op"), "switch set");
	assert_null(opp_str(back, "nothing"));
	json_decref(back);
	assert_int_equal(send(sv[0], "[1]", 3, 0), 3);
	assert_int_equal(opp_recv(sv[1], 1000, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a JSON object"));
	/* valid JSON of another type: the message names it (the parser's reason is for text
	 * that does not parse, and it gave none here) */
	assert_string_equal(err, "not a JSON object: got an array");
	assert_int_equal(send(sv[0], "{\"op\"", 5, 0), 5);
	assert_int_equal(opp_recv(sv[1], 1000, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a JSON object: line 1"));
	close(sv[0]);
	assert_int_equal(opp_recv(sv[1], 1000, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "closed"));
	close(sv[1]);
	json_decref(m);
}

static void test_renew_limit(void **state)
{
	struct sw_switch sw;
	char err[256];

	assert_int_equal(sw_make(&sw, "web", "L3", "50", "INC-1", "10m", "alice", T0, NULL, -1,
				 err, sizeof(err)), 0);
	for (int i = 1; i <= 3; i++) {
		assert_int_equal(sw_renew(&sw, "1h", 3, T0 + 60, err, sizeof(err)), 0);
		assert_int_equal(sw.renewals, i);
		assert_int_equal(sw.expires_at, T0 + 60 + 3600);
	}
	assert_int_equal(sw_renew(&sw, "1h", 3, T0 + 60, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "renewed 3 times already (limit 3)"));
	assert_int_equal(sw.renewals, 3);
	sw.renewals = 0;
	assert_int_equal(sw_renew(&sw, "1h", 3, sw.expires_at, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "has expired"));
	assert_int_equal(sw_renew(&sw, "31d", 3, T0, err, sizeof(err)), -1);
	assert_int_equal(sw_renew(&sw, "", 3, T0, err, sizeof(err)), -1);
	/* The wall clock stepped back 3 h (NTP) under a switch set at T0: a renewal of 1 h
	 * would end before the switch began. Refused, saying why, never a switch the set,
	 * the file and the table refuse later with another reason. */
	assert_int_equal(sw_make(&sw, "web", "L3", "50", "INC-1", "10m", "alice", T0, NULL, -1,
				 err, sizeof(err)), 0);
	err[0] = 0;
	if (sw_renew(&sw, "1h", 3, T0 - 3 * 3600, err, sizeof(err)) == 0)
		assert_int_equal(sw_validate(&sw, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "clock"));
	assert_int_equal(sw.renewals, 0);
	assert_int_equal(sw.expires_at, T0 + 600);
}

static void test_ledger_fields(void **state)
{
	static struct sw_set s;
	const char *old_file = "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\","
			       "\"shed_pct\":10,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":1,"
			       "\"expires_at\":2}]}";
	const char *bad_kind = "{\"version\":1,\"switches\":[{\"service\":\"web\",\"class\":\"L3\","
			       "\"shed_pct\":10,\"reason\":\"r\",\"owner\":\"o\",\"set_at\":1,"
			       "\"expires_at\":2,\"kind\":\"forever\"}]}";
	struct sw_switch sw;
	char err[512], *text;
	size_t len;

	assert_int_equal(sw_parse(old_file, strlen(old_file), "t", &s, err, sizeof(err)), 0);
	assert_int_equal(s.sw[0].kind, SW_KIND_OPS);
	assert_string_equal(s.sw[0].runbook, "");
	assert_int_equal(s.sw[0].renewals, 0);
	assert_int_equal(sw_parse(bad_kind, strlen(bad_kind), "t", &s, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown kind"));
	assert_int_equal(sw_make(&sw, "web", "L2", "5", "exp", "1h", "bob", T0, NULL, -1, err,
				 sizeof(err)), 0);
	assert_int_equal(sw_set_ledger(&sw, "experiment", "https://rb/x", err, sizeof(err)), 0);
	assert_int_equal(sw_set_ledger(&sw, "forever", NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--kind"));
	sw.renewals = 2;
	sw_set_init(&s);
	assert_int_equal(sw_set_put(&s, &sw, NULL), 0);
	assert_int_equal(sw_serialize(&s, &text, &len), 0);
	assert_int_equal(sw_parse(text, len, "t", &s, err, sizeof(err)), 0);
	free(text);
	assert_true(sw_equal(&s.sw[0], &sw));
	assert_string_equal(sw_kind_str(s.sw[0].kind), "experiment");
}

static void test_audit_whole_service(void **state)
{
	struct audit_entry e, back;
	char *line, err[256], human[512];
	size_t len;

	audit_entry_make(&e, T0, 0, "alice", "breaker reset", "web", -1, NULL, NULL, "INC-3");
	assert_int_equal(audit_format_json(&e, &line, &len), 0);
	assert_non_null(strstr(line, "\"class\":null"));
	assert_int_equal(audit_parse_line(line, &back, err, sizeof(err)), 0);
	free(line);
	assert_int_equal(back.class, -1);
	assert_string_equal(back.command, "breaker reset");
	audit_format_human(&back, human, sizeof(human));
	assert_non_null(strstr(human, "breaker reset web -- reason: INC-3"));
}

static void test_plan_drill_age(void **state)
{
	static struct sluice_plan p;
	static struct doc_errors errs;
	const char *text = "max_drill_age_days: 30\nlevels:\n"
			   "  - name: A\n    actions: [ { service: web, class: L3, shed: 10 } ]\n"
			   "    reversible: true\n    verified_at: 2024-04-20\n"
			   "  - name: B\n    actions: [ { service: web, class: L2, shed: 10 } ]\n"
			   "    reversible: true\n    verified_at: null\n";
	char why[256];

	assert_int_equal(plan_parse(text, strlen(text), "p.yaml", &p, &errs), 0);
	assert_int_equal(p.max_drill_age_days, 30);
	assert_int_equal(plan_drill_too_old(&p, 0, T0, why, sizeof(why)), 0);
	assert_int_equal(plan_drill_too_old(&p, 1, T0, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "level B was never drilled"));
	assert_int_equal(plan_drill_too_old(&p, 0, T0 + 40 * 86400ull, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "level A was drilled 51 days ago (the plan allows 30 days)"));
}

/* A sluiced that accepts nothing (stopped, hung) with a full queue of connections: the connect
 * gives up after its wait (OPP_CONNECT_WAIT_MS for sluicectl; 200 ms here) with a reason. It
 * waited for room forever, and every sluicectl after it with it; the alarm turns such a hang
 * into this suite's failure. */
static void test_connect_to_a_full_queue_gives_up(void **state)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char dir[] = "/tmp/sluice-opp.XXXXXX", err[512];
	int lfd, held, fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/sluiced.sock", dir);
	lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 0), 0);
	held = opp_connect(a.sun_path, err, sizeof(err));   /* the queue's one place */
	assert_true(held >= 0);
	alarm(10);
	fd = opp_connect_within(a.sun_path, 200, err, sizeof(err));
	alarm(0);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(err, "takes no connection within 200 ms"));
	close(held);
	close(lfd);
	unlink(a.sun_path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_peer_root_always),
		cmocka_unit_test(test_peer_group_members),
		cmocka_unit_test(test_peer_refused),
		cmocka_unit_test(test_status_groups),
		cmocka_unit_test(test_peer_of_socketpair),
		cmocka_unit_test(test_record_roundtrip),
		cmocka_unit_test(test_record_file),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_renew_limit),
		cmocka_unit_test(test_ledger_fields),
		cmocka_unit_test(test_audit_whole_service),
		cmocka_unit_test(test_plan_drill_age),
		cmocka_unit_test(test_connect_to_a_full_queue_gives_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
