#!/usr/bin/env bash
# A StatefulSet pod's way back after its node goes silent, with the shutdown beacon (`ekco
# shutdown`, then the leader's out-of-service taint) and without it (power loss: the taint
# manager, clear-nodes, the attach-detach controller's 6 minutes). ekco-kubesim simulates the
# kubelets and kube-controller-manager (tests/kubesim/controllers/node_lifecycle.h) with every timing × SCALE,
# the real `ekco agent` leads with its durations scaled alike; the table gives the scaled figure
# and the unscaled one (÷ SCALE) beside the goal (BENCHMARKS.md).
#
#   bench/recovery.sh                    # SCALE=0.05 TRIALS=2
#   SCALE=0.1 TRIALS=3 bench/recovery.sh
#
# Builds a Release tree in build-bench/ (BUILD_DIR to change).
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${SCALE:-0.05}
trials=${TRIALS:-2}
build=${BUILD_DIR:-build-bench}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --parallel "$(nproc)" --target ekco ekco-bench-recovery >/dev/null

echo "ekco-bench-recovery: scale $scale, $trials trials per path, $(nproc) cores," \
  "load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
echo
# The bench starts and cleans up the agents and servers itself (also on SIGINT/SIGTERM).
"$build/bench/ekco-bench-recovery" --ekco "$build/ekco" --scale "$scale" --trials "$trials"
