-- L0 transaction (pgbench script): one primary-key read, as pgbench -S does, plus 2 ms of
-- server time, so that 8 L0 clients need a known share of the backends and do not saturate
-- the two CPUs by themselves (their throughput then measures access to the database, not
-- the machine's spare CPU).
\set aid random(1, 100000 * :scale)
SELECT abalance, pg_sleep(0.002) FROM pgbench_accounts WHERE aid = :aid;
