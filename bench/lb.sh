#!/usr/bin/env bash
# Internal load balancer benchmark: N simulated nodes (an `ekco agent` with the internal load
# balancer on and a real HAProxy each) in front of three TLS apiservers (ekco-kubesim, in
# process), all on loopback. Times, over CHANGES moves of the kubernetes Service from one
# apiserver to the next, how long until every node's HAProxy sends new connections to the new
# apiserver, and until each agent wrote the new haproxy.cfg. Prints a Markdown table
# (BENCHMARKS.md).
#
#   bench/lb.sh                     # NODES=3 CHANGES=20
#   NODES=10 bench/lb.sh
#   POLL_MS=50 NODES=10 bench/lb.sh  # probe less often: less of the 2 cores go to the probes
#
# Builds a Release tree in build-bench/ (BUILD_DIR to change). Needs the packages of
# scripts/setup (haproxy: HAPROXY to use another binary).
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${NODES:-3}
changes=${CHANGES:-20}
poll_ms=${POLL_MS:-5}
haproxy=${HAPROXY:-/usr/sbin/haproxy}
build=${BUILD_DIR:-build-bench}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --parallel "$(nproc)" --target ekco ekco-bench-lb >/dev/null

echo "ekco-bench-lb: $nodes nodes, $changes endpoint changes, probe every ${poll_ms} ms, $("$haproxy" -v | head -1 | cut -d' ' -f1-3)," \
  "$(nproc) cores, $(date -u +%F)"
echo
# The bench starts and cleans up every process itself (also on SIGINT/SIGTERM).
"$build/bench/ekco-bench-lb" --ekco "$build/ekco" --haproxy "$haproxy" --nodes "$nodes" \
  --changes "$changes" --poll-ms "$poll_ms"
