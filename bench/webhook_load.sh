#!/usr/bin/env bash
# The pod image overrides webhook under hostile and idle clients (issue 34): the server's peak
# RSS while clients send 3 MiB reviews back to back, and the latency of well-formed reviews
# while 128 idle connections are held (ekco-bench-webhook-load: the server in a child process,
# every client on loopback). Prints a Markdown table (BENCHMARKS.md) with the goal beside each
# figure: peak RSS ≤ 64 MiB, p99 ≤ 5 ms.
#
#   bench/webhook_load.sh                   # REVIEWS=2000 IDLE=128 HOSTILE=8 HOSTILE_SECONDS=10
#   HOSTILE=16 HOSTILE_SECONDS=30 bench/webhook_load.sh
#
# Builds a Release tree in build-bench/ (BUILD_DIR to change).
set -euo pipefail
cd "$(dirname "$0")/.."
reviews=${REVIEWS:-2000}
idle=${IDLE:-128}
hostile=${HOSTILE:-8}
seconds=${HOSTILE_SECONDS:-10}
build=${BUILD_DIR:-build-bench}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --parallel "$(nproc)" --target ekco-bench-webhook-load >/dev/null

echo "ekco-bench-webhook-load: $reviews reviews per row, $idle idle connections, $hostile hostile" \
  "clients for $seconds s, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
echo
"$build/bench/ekco-bench-webhook-load" --reviews "$reviews" --idle "$idle" --hostile "$hostile" \
  --seconds "$seconds"
