#!/usr/bin/env bash
# Pod image overrides webhook latency: the real HTTPS server and AdmissionReview decision on
# loopback, clients on kept-alive TLS connections verifying the chain (ekco-bench-webhook).
# Prints a Markdown table (BENCHMARKS.md) with the goal beside each figure (p99 < 5 ms per
# review, issue 17).
#
#   bench/webhook.sh                        # 5,000 reviews per row, 4 concurrent connections
#   REQUESTS=20000 CLIENTS=8 bench/webhook.sh
#
# Builds a Release tree in build-bench/ (BUILD_DIR to change).
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${REQUESTS:-5000}
clients=${CLIENTS:-4}
build=${BUILD_DIR:-build-bench}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --parallel "$(nproc)" --target ekco-bench-webhook >/dev/null

echo "ekco-bench-webhook: $requests reviews per row, $clients concurrent connections," \
  "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
echo
"$build/bench/ekco-bench-webhook" --requests "$requests" --clients "$clients"
