#!/usr/bin/env bash
# MinIO migration benchmark: how long MinIO is offline while ekco migrates the single-replica
# MinIO to ha-minio (from "writes stopped", the Service minio's selector disabled, to "switched",
# its selector app=ha-minio). One leader `ekco agent` against ekco-kubesim, two real S3 servers
# (s3rver with MinIO's health endpoints, tests/s3/s3rver/serve.js) on loopback as the old MinIO
# and ha-minio, OBJECTS objects of SIZE_MIB MiB in total seeded with botocore. Also reports the
# agent's peak memory (VmHWM): objects go through files, so it does not grow with their size.
# Prints a Markdown table (BENCHMARKS.md).
#
#   bench/minio.sh                      # OBJECTS=1000 SIZE_MIB=100, Release build in build-bench/
#   BUILD_DIR=build-test bench/minio.sh # an existing (e.g. ASan) build, no rebuild
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-bench}
if [ -z "${BUILD_DIR:-}" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --parallel "$(nproc)" --target ekco ekco-kubesim >/dev/null
fi
export EKCO="$build/ekco" SIM="$build/tests/kubesim/ekco-kubesim" SERVE="$PWD/tests/s3/s3rver/serve.js"
export OBJECTS=${OBJECTS:-1000} SIZE_MIB=${SIZE_MIB:-100} BUILD="$build"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
# Debian's python3-botocore and python3-kubernetes are importable by /usr/bin/python3 only.
exec /usr/bin/python3 - <<'PY'
import json, os, shutil, subprocess, tempfile, time

import botocore.session
from botocore.config import Config
from kubernetes import client, config as kconfig

EKCO, SIM, SERVE = os.environ["EKCO"], os.environ["SIM"], os.environ["SERVE"]
OBJECTS, SIZE_MIB = int(os.environ["OBJECTS"]), int(os.environ["SIZE_MIB"])
work = tempfile.mkdtemp(prefix="ekco-minio-bench-")
procs = []

def s3rver(name):
    p = subprocess.Popen(["node", "--openssl-legacy-provider", SERVE, f"{work}/{name}", "127.0.0.1",
                          "0"], stdout=subprocess.PIPE, cwd=os.path.dirname(SERVE))
    procs.append(p)
    return int(p.stdout.readline().split()[1])

def s3(port):
    return botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{port}",
        aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
        config=Config(s3={"addressing_style": "path"}))

def pod(name, app, port):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "minio", "labels": {"app": app}},
            "spec": {"nodeName": "node-b", "containers": [
                {"name": "minio", "image": "minio/minio", "ports": [{"containerPort": port}]}]},
            "status": {"phase": "Running", "podIP": "127.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}]}}

def objects(old_port, ha_port):
    labels = {"app": "minio"}
    tmpl = lambda l: {"metadata": {"labels": l},
                      "spec": {"containers": [{"name": "minio", "image": "minio/minio"}]}}
    out = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
           for n in ("kurl", "minio")]
    out += [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
             "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
            for n in ("node-a", "node-b", "node-c")]
    out += [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": "openebs"}, "provisioner": "openebs.io/local"},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "minio", "namespace": "minio"},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": tmpl(labels)}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet",
         "metadata": {"name": "ha-minio", "namespace": "minio",
                      "annotations": {"kurl.sh/desired-scale": "4"}},
         "spec": {"replicas": 0, "serviceName": "ha-minio",
                  "selector": {"matchLabels": {"app": "ha-minio"}},
                  "template": tmpl({"app": "ha-minio"})}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "minio-pv-claim", "namespace": "minio"},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "minio", "namespace": "minio"},
         "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 9000}]}},
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": "minio-credentials", "namespace": "minio"},
         "data": {"MINIO_ACCESS_KEY": "UzNSVkVS", "MINIO_SECRET_KEY": "UzNSVkVS"}},
        pod("minio-0", "minio", old_port), pod("ha-minio-0", "ha-minio", ha_port)]
    return out

try:
    old_port, ha_port = s3rver("old"), s3rver("ha")
    old = s3(old_port)
    size = (SIZE_MIB << 20) // OBJECTS
    for b in ("kotsadm", "registry", "velero"):
        old.create_bucket(Bucket=b)
    t = time.monotonic()
    for i in range(OBJECTS):
        old.put_object(Bucket=("kotsadm", "registry", "velero")[i % 3],
                       Key=f"data/{i % 17}/object-{i}", Body=os.urandom(size))
    seeded = time.monotonic() - t
    with open(f"{work}/objects.json", "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": objects(old_port, ha_port)}, f)
    sim = subprocess.Popen([SIM, "--listen", "127.0.0.1:0", "--kubeconfig-out", f"{work}/kubeconfig",
                            "--load", f"{work}/objects.json"],
                           stdout=subprocess.PIPE, stderr=open(f"{work}/sim.log", "w"))
    procs.append(sim)
    sim.stdout.readline()
    open(f"{work}/config.yaml", "w").write(
        "leader_election_lease_duration: 3s\nleader_election_renew_deadline: 2s\n"
        "leader_election_retry_period: 500ms\nenable_ha_minio: true\nminio_namespace: minio\n"
        "auto_resource_scaling: false\nrotate_certs: false\nrestart_failed_envoy_pods: false\n"
        "auto_approve_kubelet_csrs: false\n")
    root = f"{work}/root"
    os.makedirs(f"{root}/etc/kubernetes")
    open(f"{root}/etc/kubernetes/kubelet.conf", "w").write("# joined\n")
    kconfig.load_kube_config(f"{work}/kubeconfig")
    core = client.CoreV1Api()
    start = time.monotonic()
    agent = subprocess.Popen([EKCO, "agent", "--config", f"{work}/config.yaml", "--kubeconfig",
                              f"{work}/kubeconfig", "--node-name", "node-a", "--host-root", root,
                              "--socket", f"{work}/a.sock"], stderr=open(f"{work}/agent.log", "w"))
    procs.append(agent)
    stopped = switched = None
    hwm = 0
    while time.monotonic() - start < 900:
        sel = core.read_namespaced_service("minio", "minio").spec.selector
        now = time.monotonic()
        if stopped is None and sel == {"doesnotexist": "doesnotexist"}:
            stopped = now
        if sel == {"app": "ha-minio"}:
            switched = now
            break
        for line in open(f"/proc/{agent.pid}/status"):
            if line.startswith("VmHWM:"):
                hwm = max(hwm, int(line.split()[1]))
        time.sleep(0.01)
    if stopped is None or switched is None:
        raise SystemExit("no migration within 15 min; see " + work + "/agent.log")
    print(f"| objects | MiB | seeding (botocore) | agent start → writes stopped | offline window "
          f"(writes stopped → Service switched) | copy+verify rate | agent VmHWM |")
    print("|---|---|---|---|---|---|---|")
    window = switched - stopped
    print(f"| {OBJECTS} | {SIZE_MIB} | {seeded:.1f} s | {stopped - start:.1f} s | **{window:.1f} s** | "
          f"{SIZE_MIB / window:.1f} MiB/s | {hwm / 1024:.0f} MiB |")
    print(f"\n(build: {os.environ['BUILD']})")
finally:
    for p in reversed(procs):
        p.kill()
        p.wait()
    shutil.rmtree(work, ignore_errors=True)
PY
