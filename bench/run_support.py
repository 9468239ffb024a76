"""bench/run's body (see bench/run for what it measures): starts the servers, agents and peers,
measures each figure the same way every run and prints one Markdown table with the goals."""
import http.client
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time

import run_existing  # bench/run_existing.py: the failover / clear / lb scripts' rows

EKCO, SIM, SYNC = os.environ["EKCO"], os.environ["SIM"], os.environ["SYNC"]
FLOOR = os.environ["FLOOR"]
KUBECTL = os.environ["KUBECTL"]
NODES, PODS = int(os.environ["NODES"]), int(os.environ["PODS"])
PAGE_SIZE, UNHEALTHY = int(os.environ["PAGE_SIZE"]), int(os.environ["UNHEALTHY"])
IDLE_WINDOW = float(os.environ["IDLE_WINDOW"])
SKIP_EXISTING = os.environ["SKIP_EXISTING"] == "1"
SKIP_SYNC = os.environ.get("SKIP_SYNC") == "1"  # resuming a run that failed after the sync rows
SKIP_LEADER = os.environ.get("SKIP_LEADER") == "1"
TICK = os.sysconf("SC_CLK_TCK")

work = tempfile.mkdtemp(prefix="ekco-bench-run-")
children = []
rows = []  # (figure, measured, goal, verdict)


def log(message):
    print(f"bench/run: {message}", file=sys.stderr, flush=True)


def spawn(args, log_name, env=None):
    out = open(f"{work}/{log_name}", "a")
    p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                         start_new_session=True)
    children.append(p)
    return p


def stop(p):
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def cpu_seconds(pid):
    text = open(f"/proc/{pid}/stat").read()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory_kib(pid):
    """Rss, Pss and Anonymous (KiB) of /proc/PID/smaps_rollup: what the process maps, its share
    of the pages it shares with others, and its own (heap, stacks) apart from file pages."""
    out = {}
    for line in open(f"/proc/{pid}/smaps_rollup"):
        parts = line.split()
        if parts[0] in ("Rss:", "Pss:", "Anonymous:"):
            out[parts[0][:-1]] = int(parts[1])
    return out


def wait(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise SystemExit(f"bench/run: timed out after {timeout} s waiting for {what} (logs in {work})")


def start_sim(name, args):
    p = spawn([SIM, "--listen", "127.0.0.1:0", "--kubeconfig-out", f"{work}/{name}.kubeconfig"]
              + args, f"{name}.log")
    wait(lambda: "serving" in open(f"{work}/{name}.log").read() or p.poll() is not None, 1800,
         f"{name} to serve")
    if p.poll() is not None:
        raise SystemExit(f"bench/run: {name} exited: {open(f'{work}/{name}.log').read()}")
    return p


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=5)
        self.sock_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(self.sock_path)


def agent_status(name):
    try:
        c = UnixHTTP(f"{work}/{name}.sock")
        c.request("GET", "/status")
        r = c.getresponse()
        return json.loads(r.read()) if r.status == 200 else None
    except (OSError, ValueError):
        return None


def start_agent(name, kubeconfig, config=""):
    root = f"{work}/root-{name}"
    os.makedirs(f"{root}/etc/kubernetes", exist_ok=True)
    open(f"{root}/etc/kubernetes/kubelet.conf", "w").write("# joined\n")
    open(f"{work}/{name}.yaml", "w").write(config)
    return spawn([EKCO, "agent", "--config", f"{work}/{name}.yaml", "--kubeconfig", kubeconfig,
                  "--node-name", name, "--host-root", root, "--socket", f"{work}/{name}.sock"],
                 f"agent-{name}.log")


table_rows = run_existing.table_rows  # `| metric | value |` rows as a dict


def verdict(value, goal, lower_is_better=True):
    return "**met**" if (value <= goal if lower_is_better else value >= goal) else "**not met**"


def add(figure, measured, goal="", met=""):
    rows.append((figure, measured, goal, met))
    log(f"{figure}: {measured}")  # as it is measured, so a later failure loses nothing


def sync_section(sim):
    kubeconfig = f"{work}/big.kubeconfig"
    log(f"ekco-bench-sync: {NODES} nodes, {PODS} pods")
    out = subprocess.run([SYNC, "--kubeconfig", kubeconfig, "--page-size", str(PAGE_SIZE),
                          "--server-pid", str(sim.pid)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench/run: ekco-bench-sync failed: {out.stderr}")
    r = table_rows(out.stdout)
    cpu = float(r["client CPU (user+sys) to list+cache nodes and pods"].split()[0])
    server = r.get("server CPU (user+sys) over the same sync", "-")
    per_pod = int(re.search(r"\((\d+) B per pod\)", r["pod cache memory"]).group(1))
    rss = float(r["process RSS right after the pod sync"].split()[0])
    add(f"ekco: client CPU to list+cache {PODS:,} pods + {NODES:,} nodes (user+sys, client "
        f"alone; server over the same span: {server})", f"{cpu:.2f} s", "≤ 1.5 s",
        verdict(cpu, 1.5))
    add("ekco: cache memory per pod (heap in use, mallinfo2)", f"{per_pod} B", "≤ 400 B",
        verdict(per_pod, 400))
    add("ekco: client RSS right after that sync", f"{rss:.1f} MiB", "≤ 100 MiB",
        verdict(rss, 100))
    add("ekco: pods cached; wall time of the pod sync (shared cores)",
        f"{r['pods cached']}; {r[f'pod list+watch sync (page size {PAGE_SIZE})']}")
    add("ekco: watch event latency p50 / p99 / max (200 updates)",
        next(v for k, v in r.items() if k.startswith("watch event latency")))

    log("kubectl get pods -A --chunk-size=500 -o name")
    env = dict(os.environ, KUBECONFIG=kubeconfig)
    server0 = cpu_seconds(sim.pid)
    with open(f"{work}/kubectl.out", "w") as out_file:
        p = subprocess.Popen([KUBECTL, "get", "pods", "-A", "--chunk-size=500", "-o", "name"],
                             stdout=out_file, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(p.pid, 0)
    server_cpu = cpu_seconds(sim.pid) - server0
    if status != 0:
        raise SystemExit(f"bench/run: kubectl failed: {p.stderr.read().decode()}")
    listed = sum(1 for _ in open(f"{work}/kubectl.out"))
    kubectl_cpu = usage.ru_utime + usage.ru_stime
    add(f"peer kubectl (client-go) `get pods -A --chunk-size=500 -o name`: client CPU, {listed:,} "
        f"pods (user+sys; server over the same span: {server_cpu:.2f} s)", f"{kubectl_cpu:.2f} s")
    add("peer kubectl: max RSS", f"{usage.ru_maxrss / 1024:.1f} MiB")


def leader_section(sim):
    """One leader agent over the big cluster with UNHEALTHY nodes Ready=Unknown."""
    from kubernetes import client, config  # python3-kubernetes
    api = client.CoreV1Api(config.new_client_from_config(f"{work}/big.kubeconfig"))
    names = [f"node-{i}" for i in range(NODES - UNHEALTHY, NODES)]
    try:  # the Lease's namespace (the generated cluster has none)
        api.create_namespace({"metadata": {"name": "kurl"}}, _preload_content=False)
    except client.exceptions.ApiException as e:
        if e.status != 409:
            raise
    log(f"{len(names)} nodes turn Ready=Unknown")
    for name in names:
        conditions = [{"type": t, "status": "False"} for t in
                      ("MemoryPressure", "DiskPressure", "PIDPressure")]
        conditions.append({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                           "lastTransitionTime": "2026-01-01T00:05:00Z"})
        # Undecoded answer: the client's models reject kubesim's generated nodeInfo (no bootID).
        api.patch_node_status(name, {"status": {"conditions": conditions}},
                              _preload_content=False)
    agent = start_agent("node-0", f"{work}/big.kubeconfig")

    def ready():
        s = agent_status("node-0")
        if not s or not s.get("is_leader"):
            return False
        caches = {c["name"]: c for c in s.get("caches", [])}
        unhealthy = [c for n, c in caches.items() if n.startswith("pods on ")]
        return (caches.get("cluster-nodes", {}).get("synced") and len(unhealthy) >= len(names)
                and all(c["synced"] for c in unhealthy))

    t0 = time.monotonic()
    try:
        wait(ready, 600, "the leader to cache every node and the unhealthy nodes' pods")
    except SystemExit:
        stop(agent)
        flaps = open(f"{work}/agent-node-0.log").read().count("stopped leading")
        raise SystemExit(f"the leader did not cache every node and the unhealthy nodes' pods in "
                         f"600 s (it stopped leading {flaps} times)")
    synced_after = time.monotonic() - t0
    time.sleep(5)  # settle: the controllers' first passes
    s = agent_status("node-0")
    pods = sum(c["objects"] for c in s["caches"] if c["name"].startswith("pods on "))
    rss = rss_mib(agent.pid)
    cpu = cpu_seconds(agent.pid)
    add(f"leader RSS: {NODES:,} nodes cached, {len(names)} unhealthy with their {pods:,} pods "
        f"(synced in {synced_after:.1f} s wall, {cpu:.2f} s CPU)", f"{rss:.1f} MiB", "≤ 48 MiB",
        verdict(rss, 48))
    stop(agent)


def idle_section():
    names = ["node-0", "node-1", "node-2"]
    args = ["--generate-nodes", "3", "--generate-pods", "30"]
    for n in names:
        args += ["--token", f"tok-{n}=agent-{n},system:masters",
                 "--token-kubeconfig-out", f"tok-{n}={work}/{n}.kubeconfig"]
    sim = start_sim("small", args)
    subprocess.run([KUBECTL, "--kubeconfig", f"{work}/small.kubeconfig", "create", "namespace",
                    "kurl"], capture_output=True, check=True)  # the Lease's namespace
    agents = {n: start_agent(n, f"{work}/{n}.kubeconfig") for n in names}

    def settled():
        states = [agent_status(n) for n in names]
        return (all(s and s.get("ready") for s in states)
                and sum(1 for s in states if s["is_leader"]) == 1)

    wait(settled, 120, "three ready agents and one leader")
    time.sleep(10)  # the first controller passes

    def request_counts():
        out = subprocess.run([KUBECTL, "--kubeconfig", f"{work}/small.kubeconfig", "get", "--raw",
                              "/kubesim/v1/request-log"], capture_output=True, text=True,
                             check=True)
        counts = {}
        for r in json.loads(out.stdout):
            counts[r["user"]] = counts.get(r["user"], 0) + 1
            if r["resource"] == "leases" and r["name"] == "ekco-leader" and r["verb"] == "update":
                counts["renewals " + r["user"]] = counts.get("renewals " + r["user"], 0) + 1
        return counts

    log(f"idle window {IDLE_WINDOW:.0f} s")
    req0 = request_counts()
    cpu0 = {n: cpu_seconds(p.pid) for n, p in agents.items()}
    t0 = time.monotonic()
    time.sleep(IDLE_WINDOW)
    elapsed = time.monotonic() - t0
    cpu = {n: cpu_seconds(p.pid) - cpu0[n] for n, p in agents.items()}
    req1 = request_counts()
    rss = {n: rss_mib(p.pid) for n, p in agents.items()}
    mem = {n: memory_kib(p.pid) for n, p in agents.items()}
    leader = next(n for n in names if agent_status(n)["is_leader"])
    followers = [n for n in names if n != leader]
    per_min = {n: (req1.get(f"agent-{n}", 0) - req0.get(f"agent-{n}", 0)) * 60 / elapsed
               for n in names}
    threads = {n: len(os.listdir(f"/proc/{p.pid}/task")) for n, p in agents.items()}
    window = f"{elapsed:.0f} s window"
    worst_rss = max(rss[n] for n in followers)
    add(f"idle non-leader agent RSS (own node, own pods, Lease; max of 2; {threads[followers[0]]} "
        f"threads)", f"{worst_rss:.1f} MiB", "≤ 12 MiB", verdict(worst_rss, 12))
    worst = max(followers, key=lambda n: rss[n])
    add("idle non-leader agent: of that RSS, anonymous (heap, stacks) / PSS (shared file pages "
        "divided among their users)",
        f"{mem[worst]['Anonymous'] / 1024:.1f} MiB / {mem[worst]['Pss'] / 1024:.1f} MiB")
    add("idle leader agent RSS (3 nodes)", f"{rss[leader]:.1f} MiB")
    worst_cpu = max(cpu[n] for n in followers)
    add(f"idle non-leader agent CPU ({window}; max of 2)",
        f"{worst_cpu:.2f} s = {100 * worst_cpu / elapsed:.3f} % of one core",
        "≤ 0.5 % of one core", verdict(worst_cpu / elapsed, 0.005))
    add(f"idle leader agent CPU ({window})",
        f"{cpu[leader]:.2f} s = {100 * cpu[leader] / elapsed:.3f} % of one core",
        "≤ 0.5 % of one core", verdict(cpu[leader] / elapsed, 0.005))
    worst_req = max(per_min[n] for n in followers)
    add(f"apiserver requests per idle non-leader agent per minute ({window}, counted by kubesim "
        f"per agent's token; max of 2)", f"{worst_req:.1f}", "≤ 2", verdict(worst_req, 2))
    renewals = (req1.get(f"renewals agent-{leader}", 0) -
                req0.get(f"renewals agent-{leader}", 0)) * 60 / elapsed
    add(f"apiserver requests per idle leader per minute ({window}): all / its Lease renewals / "
        f"the rest", f"{per_min[leader]:.1f} / {renewals:.1f} / {per_min[leader] - renewals:.1f}",
        "≤ 2", verdict(per_min[leader], 2))
    for p in agents.values():
        stop(p)
    floor_section()
    stop(sim)


def floor_section():
    """The RSS of bench/floor.cc on the same libraries, after one HTTPS GET to the same server."""
    server = next(line.split()[1] for line in open(f"{work}/small.kubeconfig")
                  if line.strip().startswith("server:"))
    p = subprocess.Popen([FLOOR, f"{server}/version", "--seconds", "60"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    children.append(p)
    if p.stdout.readline().strip() != "ready":
        raise SystemExit(f"ekco-bench-floor failed: {p.stderr.read().strip()}")
    time.sleep(2)
    rss = rss_mib(p.pid)
    mem = memory_kib(p.pid)
    stop(p)
    add("floor: a C++ program after one HTTPS GET through Debian's libcurl + OpenSSL, idle "
        "(bench/floor.cc; the least an agent on the required libraries can have)",
        f"{rss:.1f} MiB (PSS {mem['Pss'] / 1024:.1f} MiB)")


def existing_section():
    """bench/failover.sh, bench/clear.sh and bench/lb.sh (bench/run_existing.py): their rows, or
    rows saying why they were not measured; never an exception out of bench/run."""
    # Without this run's NODES/PODS/PAGE_SIZE: the scripts read their own defaults from them.
    clean = {k: v for k, v in os.environ.items() if k not in ("NODES", "PODS", "PAGE_SIZE")}
    for script, prefix in run_existing.SCRIPTS:
        log(script)
        try:
            rc, out, err = run_existing.run_script(script, clean)
            script_rows = run_existing.rows_for(script, rc, out, err, prefix)
        except Exception as e:  # noqa: BLE001 - a row says why, the table is still printed
            script_rows = [(figure, f"not measured: {script}: {type(e).__name__}: {e}", goal,
                            "**not measured**" if goal else "")
                           for figure, _, goal, _ in run_existing.FIGURES[script]]
        for row in script_rows:
            add(*row)


def main():
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = open("/proc/loadavg").read().split()[:3]
    log(f"work directory {work}")
    if not (SKIP_SYNC and SKIP_LEADER):
        sim = start_sim("big", ["--generate-nodes", str(NODES), "--generate-pods", str(PODS)])
        if not SKIP_SYNC:
            sync_section(sim)
        # A section that fails is a row saying why; the others are still measured.
        try:
            if not SKIP_LEADER:
                leader_section(sim)
        except SystemExit as e:
            add("leader RSS with 5,000 nodes, 50 unhealthy", f"not measured: {e}", "≤ 48 MiB",
                "**not met**")
        stop(sim)
    try:
        idle_section()
    except SystemExit as e:
        add("idle agents", f"not measured: {e}")
    if not SKIP_EXISTING:
        existing_section()
    git = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip()
    print(f"bench/run: commit {git}, {started}, {os.cpu_count()} cores, load before "
          f"{' '.join(load)}, idle window {IDLE_WINDOW:.0f} s\n")
    print("| figure | measured | goal | |\n|---|---|---|---|")
    for figure, measured, goal, met in rows:
        print(f"| {figure} | {measured} | {goal or '–'} | {met} |")


try:
    main()
finally:
    for p in children:
        stop(p)
    subprocess.run(["rm", "-rf", work])
