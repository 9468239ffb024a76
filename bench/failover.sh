#!/usr/bin/env bash
# Leader failover benchmark: three `ekco agent` processes against ekco-kubesim on loopback with
# the default lease timings (15 s / 10 s / 2 s). Measures, over TRIALS rounds each, how long the
# cluster is without a leader after the leader is killed (kill -9: the Lease must expire) and
# after it is stopped (SIGTERM: the Lease is released), and the agents' idle memory. Prints a
# Markdown table (BENCHMARKS.md). The Lease lives in the kurl namespace, as on a kURL cluster;
# ekco-kubesim's generated cluster has none, so the script creates it (kubectl: KUBECTL).
#
#   bench/failover.sh            # TRIALS=3
#   LEASE=3s RENEW=2s RETRY=500ms TRIALS=5 bench/failover.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --parallel "$(nproc)" --target ekco ekco-kubesim >/dev/null

export EKCO="$build/ekco" SIM="$build/tests/kubesim/ekco-kubesim"
export KUBECTL=${KUBECTL:-/usr/bin/kubectl}
export LEASE=${LEASE:-15s} RENEW=${RENEW:-10s} RETRY=${RETRY:-2s} TRIALS=${TRIALS:-3}
exec python3 - <<'PY'
import json, os, signal, socket, subprocess, sys, tempfile, time, http.client

EKCO, SIM, KUBECTL = os.environ["EKCO"], os.environ["SIM"], os.environ["KUBECTL"]
TRIALS = int(os.environ["TRIALS"])
work = tempfile.mkdtemp(prefix="ekco-failover-")
procs, sim = {}, None

class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=2)
        self.path = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(2)
        self.sock.connect(self.path)

def get(name, target):
    try:
        c = UnixHTTP(f"{work}/{name}.sock")
        c.request("GET", target)
        r = c.getresponse()
        return r.status, r.read().decode()
    except OSError:
        return None, ""

def is_leader(name):
    status, body = get(name, "/status")
    return status == 200 and json.loads(body).get("is_leader", False)

def start(name):
    root = f"{work}/root-{name}"
    os.makedirs(f"{root}/etc/kubernetes", exist_ok=True)
    open(f"{root}/etc/kubernetes/kubelet.conf", "w").write("# joined\n")
    log = open(f"{work}/{name}.log", "a")
    procs[name] = subprocess.Popen(
        [EKCO, "agent", "--config", f"{work}/config.yaml", "--kubeconfig", f"{work}/kubeconfig",
         "--node-name", name, "--host-root", root, "--socket", f"{work}/{name}.sock"],
        stderr=log, stdout=log)
    wait(lambda: get(name, "/readyz")[0] == 200, 30, f"{name} ready")

def lease_errors():
    """Each running agent's last Lease error from /status (why no one leads), if any."""
    out = []
    for n in procs:
        status, body = get(n, "/status")
        if status == 200:
            err = (json.loads(body).get("lease") or {}).get("last_error")
            if err:
                out.append(f"{n}: {err}")
    return out

def wait(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.01)
    why = "; ".join(lease_errors())
    sys.exit(f"failover bench: timed out after {timeout} s waiting for {what}"
             + (f" (lease errors: {why})" if why else ""))

def leader():
    found = [n for n in procs if is_leader(n)]
    return found[0] if len(found) == 1 else None

def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0

try:
    open(f"{work}/config.yaml", "w").write(
        f"leader_election_lease_duration: {os.environ['LEASE']}\n"
        f"leader_election_renew_deadline: {os.environ['RENEW']}\n"
        f"leader_election_retry_period: {os.environ['RETRY']}\n")
    sim_log = open(f"{work}/sim.log", "w")
    sim = subprocess.Popen([SIM, "--listen", "127.0.0.1:0", "--kubeconfig-out", f"{work}/kubeconfig",
                            "--generate-nodes", "3"], stdout=sim_log, stderr=subprocess.STDOUT)
    wait(lambda: "serving" in open(f"{work}/sim.log").read() or sim.poll() is not None, 30,
         "ekco-kubesim to serve")
    if sim.poll() is not None:
        sys.exit(f"failover bench: ekco-kubesim exited: {open(f'{work}/sim.log').read().strip()}")
    # The Lease's namespace: a kURL cluster has it, the generated one has not.
    made = subprocess.run([KUBECTL, "--kubeconfig", f"{work}/kubeconfig", "create", "namespace",
                           "kurl"], capture_output=True, text=True)
    if made.returncode != 0:
        sys.exit(f"failover bench: kubectl create namespace kurl: {made.stderr.strip()}")
    names = ["node-0", "node-1", "node-2"]
    for n in names:
        start(n)
    wait(lambda: leader() is not None, 60, "a leader")
    time.sleep(3)
    rss = [rss_kib(p.pid) for p in procs.values()]
    results = {"kill -9": [], "SIGTERM": []}
    for trial in range(TRIALS):
        for kind, sig in (("kill -9", signal.SIGKILL), ("SIGTERM", signal.SIGTERM)):
            old = leader()
            t0 = time.monotonic()
            procs[old].send_signal(sig)
            procs[old].wait()
            del procs[old]
            wait(lambda: leader() is not None, 60, "a new leader")
            results[kind].append((time.monotonic() - t0) * 1000)
            start(old)
    print(f"ekco failover: 3 agents, lease {os.environ['LEASE']}, renew {os.environ['RENEW']}, "
          f"retry {os.environ['RETRY']}, {TRIALS} trials, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d', time.gmtime())}\n")
    print("| metric | value |\n|---|---|")
    for kind, ms in results.items():
        print(f"| leader failover after {kind} (min / median / max) | "
              f"{min(ms):.0f} / {sorted(ms)[len(ms)//2]:.0f} / {max(ms):.0f} ms |")
    print(f"| agent RSS, idle, synced (min / max of 3) | {min(rss)/1024:.1f} / {max(rss)/1024:.1f} MiB |")
finally:
    for p in procs.values():
        p.kill()
        p.wait()
    if sim:
        sim.terminate()
        sim.wait()
    subprocess.run(["rm", "-rf", work])
PY
