#!/usr/bin/env bash
# Clear-nodes reaction latency: one `ekco agent` (the leader) against ekco-kubesim (in process,
# real clock, no simulated kubelet) with N nodes, of which DEAD drop off one second apart (Ready
# Unknown + the unreachable NoExecute taint), each with PODS pods that get deleted (left
# terminating) around that moment. Times, per pod, from its threshold (node dead after
# TOLERATION, pod terminating for GRACE; whichever is later) until it is gone from the store.
# Prints a Markdown table (BENCHMARKS.md), next to EKCO's once-a-minute design.
#
#   bench/clear.sh                       # NODES=50 DEAD=5 PODS=20 TOLERATION=3 GRACE=1
#   NODES=200 DEAD=20 PODS=50 bench/clear.sh
#
# Builds a Release tree in build-bench/ (BUILD_DIR to change).
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${NODES:-50}
dead=${DEAD:-5}
pods=${PODS:-20}
toleration=${TOLERATION:-3}
grace=${GRACE:-1}
build=${BUILD_DIR:-build-bench}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --parallel "$(nproc)" --target ekco ekco-bench-clear >/dev/null

echo "ekco-bench-clear: $nodes nodes, $dead dead, $pods pods per node," \
  "toleration ${toleration}s, grace ${grace}s, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "$(date -u +%F)"
echo
# The bench starts and cleans up the agent itself (also on SIGINT/SIGTERM).
"$build/bench/ekco-bench-clear" --ekco "$build/ekco" --nodes "$nodes" --dead "$dead" \
  --pods-per-node "$pods" --toleration "$toleration" --grace "$grace"
