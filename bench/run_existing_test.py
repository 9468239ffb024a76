"""Tests of bench/run_existing.py on the tables and failures the three scripts print (ctest
bench_run_existing; or python3 bench/run_existing_test.py)."""
import os
import stat
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_existing as rx  # noqa: E402

FAILOVER = """ekco failover: 3 agents, lease 15s, renew 10s, retry 2s, 3 trials, 2 cores, 2026-11-26

| metric | value |
|---|---|
| leader failover after kill -9 (min / median / max) | 13768 / 14852 / 14858 ms |
| leader failover after SIGTERM (min / median / max) | 26 / 41 / 50 ms |
| agent RSS, idle, synced (min / max of 3) | 21.3 / 22.4 MiB |
"""

CLEAR = """ekco-bench-clear: 50 nodes, 5 dead, 20 pods per node, toleration 3s, grace 1s, 2 cores

| metric | ekco agent (measured) | EKCO (reconcile every 1 min; arithmetic) |
|---|---|---|
| pods force-deleted; missed | 100; 0 | - |
| reaction latency (gone - threshold) p50 / p95 / p99 / max | 13 ms / 32 ms / 36 ms / 1.5 s | 30.0 s / 57.0 s / 59.4 s / 60.0 s |
| early deletes (before the threshold; must be 0) | 0 | - |
"""

LB = """ekco-bench-lb: 3 nodes, 20 endpoint changes, probe every 5 ms

| metric | value |
|---|---|
| change -> new connections served, p50 / p95 / max | 324 ms / 446 ms / 512 ms |
| change -> agent wrote the new haproxy.cfg, p50 / p95 / max | 110 ms / 120 ms / 123 ms |
| agent RSS, idle, LB enabled (node-1) | 21.6 MiB (all agents: 21.6 - 21.7 MiB) |
"""

CLEAR_FAILED = """ekco-bench-clear: work directory /tmp/ekco-bench-clear-gkJ0vW
ekco-bench-clear: the agent did not lead and sync in 30 s: not the leader (lease error: create leases/ekco-leader in kurl: namespaces "kurl" not found (NotFound, 404)); its log:
time=2026-11-26T14:51:44.640Z level=info msg="agent started" node=node-1
time=2026-11-26T14:51:44.642Z level=warn msg="shutdown inhibitor unavailable" error="connect to logind: No such file or directory" retry=30s
time=2026-11-26T14:51:45.142Z level=info msg="agent ready" node=node-1

"""


class TableTest(unittest.TestCase):
    def test_first_value_column_only(self):
        rows = rx.table_rows(CLEAR)
        self.assertEqual(rows["reaction latency (gone - threshold) p50 / p95 / p99 / max"],
                         "13 ms / 32 ms / 36 ms / 1.5 s")
        self.assertNotIn("metric", rows)
        self.assertEqual(len(rows), 3)

    def test_find_row_arrows_alike(self):
        rows = rx.table_rows(LB)
        self.assertEqual(rx.find_row(rows, "change → new connections"),
                         "324 ms / 446 ms / 512 ms")
        self.assertIsNone(rx.find_row(rows, "change -> old connections"))

    def test_worst_ms(self):
        self.assertEqual(rx.worst_ms("13768 / 14852 / 14858 ms"), 14858)
        self.assertEqual(rx.worst_ms("13 ms / 32 ms / 36 ms / 1.5 s"), 1500)
        self.assertEqual(rx.worst_ms("1.2 s / 900 ms"), 900)
        self.assertIsNone(rx.worst_ms("-"))


class RowsTest(unittest.TestCase):
    def test_failover_rows_and_verdict(self):
        rows = rx.rows_for("bench/failover.sh", 0, FAILOVER, "", "failover bench:")
        self.assertEqual(rows[0][1:], ("13768 / 14852 / 14858 ms",
                                       "≤ 19.4 s (lease + 2.2 × retry)", "**met**"))
        self.assertEqual(rows[1][1], "26 / 41 / 50 ms")
        self.assertEqual(rows[2][1], "21.3 / 22.4 MiB")

    def test_clear_verdict_from_the_measured_column(self):
        rows = rx.rows_for("bench/clear.sh", 0, CLEAR, "", "ekco-bench-clear:")
        self.assertEqual(rows[0][3], "**not met**")  # 1.5 s, not EKCO's 60.0 s column
        self.assertEqual(rows[1][1], "0")
        self.assertEqual(rows[2][1], "100; 0")

    def test_lb_rows(self):
        rows = rx.rows_for("bench/lb.sh", 0, LB, "", "ekco-bench-lb:")
        self.assertEqual(rows[0][1:], ("324 ms / 446 ms / 512 ms", "< 2 s", "**met**"))
        self.assertTrue(rows[2][1].startswith("21.6 MiB"))

    def test_missing_row_is_not_measured(self):
        rows = rx.rows_for("bench/lb.sh", 0, LB.replace("change -> new", "change => new"), "",
                           "ekco-bench-lb:")
        self.assertEqual(rows[0][1], "not measured: bench/lb.sh printed no "
                                     "'change -> new connections served' row")
        self.assertEqual(rows[0][3], "**not measured**")
        self.assertEqual(rows[1][1], "110 ms / 120 ms / 123 ms")

    def test_failure_reason_is_the_line_that_says_why(self):
        rows = rx.rows_for("bench/clear.sh", 1, "", CLEAR_FAILED, "ekco-bench-clear:")
        self.assertEqual(len(rows), 3)
        self.assertIn('namespaces "kurl" not found', rows[0][1])
        self.assertTrue(rows[0][1].startswith("not measured: bench/clear.sh: ekco-bench-clear: "
                                              "the agent did not lead"))
        self.assertTrue(rows[0][1].endswith("(exit status 1)"))

    def test_failure_reason_fallbacks(self):
        self.assertEqual(rx.failure_reason("failover bench:", 1,
                                           "failover bench: timed out waiting for a leader\n"),
                         "failover bench: timed out waiting for a leader (exit status 1)")
        tb = "Traceback (most recent call last):\n  File \"x\", line 1\nKeyError: 'a'\n"
        self.assertEqual(rx.failure_reason("x:", 1, tb), "KeyError: 'a' (exit status 1)")
        self.assertEqual(rx.failure_reason("x:", 2, "just this\n"), "just this (exit status 2)")
        self.assertEqual(rx.failure_reason("x:", 3, ""), "exit status 3, nothing on stderr")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class RunScriptTest(unittest.TestCase):
    def script(self, body):
        fd, path = tempfile.mkstemp(suffix=".sh")
        os.write(fd, ("#!/bin/sh\n" + body).encode())
        os.close(fd)
        os.chmod(path, stat.S_IRWXU)
        self.addCleanup(os.unlink, path)
        return path

    def test_output_and_status(self):
        rc, out, err = rx.run_script(self.script("echo table; echo why >&2; exit 3\n"), {})
        self.assertEqual((rc, out, err), (3, "table\n", "why\n"))

    def test_timeout_stops_the_whole_session(self):
        pidfile = tempfile.mktemp()
        self.addCleanup(lambda: os.path.exists(pidfile) and os.unlink(pidfile))
        path = self.script(f"sleep 300 & echo $! > {pidfile}; wait\n")
        t0 = time.monotonic()
        rc, _, _ = rx.run_script(path, {"PATH": os.environ["PATH"]}, timeout=1)
        self.assertIsNone(rc)
        self.assertLess(time.monotonic() - t0, 15)
        with open(pidfile) as f:
            child = int(f.read())
        for _ in range(50):  # the grandchild is gone too (or a zombie its new parent has to reap)
            if not alive(child):
                break
            time.sleep(0.1)
        self.assertFalse(alive(child))
        rows = rx.rows_for("bench/lb.sh", rc, "", "", "ekco-bench-lb:", timeout=1)
        self.assertEqual(rows[0][1], "not measured: bench/lb.sh: timed out after 1 s")


if __name__ == "__main__":
    unittest.main()
