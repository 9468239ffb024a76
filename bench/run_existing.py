"""bench/run's last section: bench/failover.sh, bench/clear.sh and bench/lb.sh with their defaults,
their Markdown tables turned into rows of the one table. Nothing here raises out to bench/run: a
script that fails, hangs or prints no such row gives a row saying "not measured: <why>".
Pure functions apart from run_script, so bench/run_existing_test.py checks them on fixed text."""
import os
import re
import signal
import subprocess

# Each script: the prefix its own messages on stderr start with (the bench program's name).
SCRIPTS = (("bench/failover.sh", "failover bench:"), ("bench/clear.sh", "ekco-bench-clear:"),
           ("bench/lb.sh", "ekco-bench-lb:"))
TIMEOUT_S = 900  # each script's defaults take 1-2 minutes; a hung one must not hang bench/run

FAILURE_WORDS = re.compile(r"error|fail|timed out|did not|cannot|can't|exited|not found|killed|"
                           r"no such|denied|refused|traceback", re.IGNORECASE)
SLOG = re.compile(r"^time=\S+ level=(\w+)")  # an agent's log line (log/slog text format)


def table_rows(text):
    """The rows of a Markdown table as {metric: first value column} (the measured one; later
    columns, such as ekco-bench-clear's EKCO arithmetic, are left out)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not (line.startswith("| ") and line.endswith(" |")):
            continue
        cells = [c.strip() for c in line[2:-2].split(" | ")]
        if len(cells) < 2 or cells[0] == "metric" or cells[0].startswith("---"):
            continue
        out[cells[0]] = cells[1]
    return out


def _norm(text):
    return re.sub(r"\s+", " ", text.replace("→", "->")).strip().lower()


def find_row(rows, prefix):
    """The value of the first row whose metric starts with prefix (arrows "→" and "->" alike,
    case and spacing ignored), or None."""
    want = _norm(prefix)
    return next((v for k, v in rows.items() if _norm(k).startswith(want)), None)


def worst_ms(value):
    """The last figure of a "a / b / c ms" or "a ms / b ms / c s" value, in milliseconds; None
    when there is none."""
    found = re.findall(r"(\d+(?:\.\d+)?)\s*(ms|s)?\b", value)
    if not found:
        return None
    number, unit = found[-1]
    if not unit:
        unit = next((u for _, u in reversed(found) if u), "ms")
    return float(number) * (1000 if unit == "s" else 1)


def failure_reason(prefix, returncode, stderr):
    """The stderr line that says why a script failed: the last of its own messages (prefix) that
    reads like a failure, else the last line anywhere that does (not an agent's info/warn log
    line: those name errors they retry), else the last line that is no such log line."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    own = [l for l in lines
           if not (SLOG.match(l) and SLOG.match(l).group(1) in ("debug", "info", "warn"))]
    for pick in ([l for l in own if l.startswith(prefix) and FAILURE_WORDS.search(l)],
                 [l for l in own if FAILURE_WORDS.search(l)], own):
        if pick:
            return pick[-1].rstrip(":") + f" (exit status {returncode})"
    return f"exit status {returncode}, nothing on stderr"


def verdict(value_ms, goal_ms):
    return "**met**" if value_ms <= goal_ms else "**not met**"


def _timed(value, goal, goal_ms):
    """(measured, goal, verdict) of a timing row with a goal."""
    if value is None:
        return None
    worst = worst_ms(value)
    return (value, goal, verdict(worst, goal_ms) if worst is not None else "not parsed")


# Each script's rows: (figure, metric prefix in its table, goal, goal in ms or None).
FIGURES = {
    "bench/failover.sh": [
        ("failover after kill -9, min / median / max (3 trials, lease 15 s, retry 2 s)",
         "leader failover after kill -9", "≤ 19.4 s (lease + 2.2 × retry)", 19400),
        ("failover after SIGTERM, min / median / max", "leader failover after SIGTERM", "", None),
        ("failover: agent RSS, idle, synced (min / max of 3)", "agent RSS, idle, synced", "",
         None),
    ],
    "bench/clear.sh": [
        ("clear-nodes: threshold → force delete, p50 / p95 / p99 / max (50 nodes, 5 dead)",
         "reaction latency", "< 1 s", 1000),
        ("clear-nodes: early deletes (must be 0)", "early deletes", "", None),
        ("clear-nodes: pods force-deleted; missed", "pods force-deleted; missed", "", None),
    ],
    "bench/lb.sh": [
        ("internal LB: endpoint change → new connections served, p50 / p95 / max (3 nodes)",
         "change -> new connections served", "< 2 s", 2000),
        ("internal LB: endpoint change → agent wrote the new haproxy.cfg, p50 / p95 / max",
         "change -> agent wrote the new haproxy.cfg", "", None),
        ("internal LB: agent RSS, idle, LB enabled", "agent RSS", "", None),
    ],
}


def rows_for(script, returncode, stdout, stderr, prefix, timeout=TIMEOUT_S):
    """The (figure, measured, goal, verdict) rows of one script's run (returncode None: it was
    stopped after timeout seconds)."""
    if returncode != 0:
        why = (f"timed out after {timeout} s" if returncode is None
               else failure_reason(prefix, returncode, stderr))
        return [(figure, f"not measured: {script}: {why}", goal, "**not measured**" if goal else "")
                for figure, _, goal, _ in FIGURES[script]]
    table = table_rows(stdout)
    out = []
    for figure, metric, goal, goal_ms in FIGURES[script]:
        value = find_row(table, metric)
        if value is None:
            out.append((figure, f"not measured: {script} printed no '{metric}' row", goal,
                        "**not measured**" if goal else ""))
        elif goal_ms is None:
            out.append((figure, value, goal, ""))
        else:
            out.append((figure,) + _timed(value, goal, goal_ms))
    return out


def run_script(script, env, timeout=TIMEOUT_S):
    """(returncode, stdout, stderr) of one script in a session of its own; on a timeout the whole
    session gets SIGTERM (the bench programs clean up on it), then SIGKILL after 10 s, and the
    returncode is None."""
    p = subprocess.Popen([script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
    return None, out or "", err or ""
