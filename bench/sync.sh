#!/usr/bin/env bash
# Informer sync benchmark: starts ekco-kubesim with a generated cluster on loopback, runs
# ekco-bench-sync against it and prints a Markdown table (copy it into BENCHMARKS.md).
#
#   bench/sync.sh                      # 5,000 nodes, 150,000 pods (the issue's scale)
#   NODES=100 PODS=3000 bench/sync.sh  # a quick run
#
# Builds a Release tree in build-bench/ (BUILD_DIR to change). Needs the packages of
# scripts/setup.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${NODES:-5000}
pods=${PODS:-150000}
page=${PAGE_SIZE:-500}
build=${BUILD_DIR:-build-bench}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --parallel "$(nproc)" --target ekco-kubesim ekco-bench-sync >/dev/null

work=$(mktemp -d)
sim_pid=""
cleanup() {
  if [[ -n $sim_pid ]]; then
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Port 0: the kernel picks a free port; the kubeconfig names it.
"$build/tests/kubesim/ekco-kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" \
  --generate-nodes "$nodes" --generate-pods "$pods" >"$work/sim.log" 2>&1 &
sim_pid=$!
for _ in $(seq 1 600); do
  grep -q "serving" "$work/sim.log" 2>/dev/null && break
  kill -0 "$sim_pid" 2>/dev/null || { cat "$work/sim.log" >&2; exit 1; }
  sleep 0.5
done
grep -q "serving" "$work/sim.log" || { echo "ekco-kubesim did not start" >&2; exit 1; }

echo "ekco-bench-sync: $nodes nodes, $pods pods, page size $page, $(nproc) cores, $(date -u +%F)"
echo
"$build/bench/ekco-bench-sync" --kubeconfig "$work/kubeconfig" --page-size "$page"
