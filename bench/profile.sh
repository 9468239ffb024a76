#!/usr/bin/env bash
# Where the informer sync's client CPU goes: ekco-bench-sync (the same list+cache as bench/run's
# first rows) under `perf record -e cpu-clock` (a software clock: it samples on machines whose
# hardware counters perf cannot read), against ekco-kubesim with a generated cluster. Prints
# the client's flat profile by shared object and by symbol (self time).
#
#   bench/profile.sh                       # NODES=5000 PODS=150000, top 25 symbols
#   NODES=100 PODS=3000 TOP=40 bench/profile.sh
#
# Builds a Release tree in build-bench/ (BUILD_DIR to change; NO_BUILD=1 uses BUILD_DIR as it is,
# e.g. another checkout's tree for a before/after comparison). Needs Debian's linux-perf.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${NODES:-5000}
pods=${PODS:-150000}
top=${TOP:-25}
build=${BUILD_DIR:-build-bench}

if [[ ${NO_BUILD:-0} != 1 ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --parallel "$(nproc)" --target ekco-kubesim ekco-bench-sync >/dev/null
fi

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

"$build/tests/kubesim/ekco-kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" \
  --generate-nodes "$nodes" --generate-pods "$pods" >"$work/sim.log" 2>&1 &
sim_pid=$!
for _ in $(seq 1 1200); do
  grep -q "serving" "$work/sim.log" 2>/dev/null && break
  kill -0 "$sim_pid" 2>/dev/null || { cat "$work/sim.log" >&2; exit 1; }
  sleep 0.5
done

perf record -q -e cpu-clock -F 999 -o "$work/perf.data" -- \
  "$build/bench/ekco-bench-sync" --kubeconfig "$work/kubeconfig" --updates 0 >"$work/sync.txt"
grep -E "client CPU|pods cached" "$work/sync.txt"
echo
echo "By shared object (self, client only):"
# The first $1 lines, trimmed. sed reads to the end (head would stop early, and under pipefail
# perf's SIGPIPE would fail the script).
first() { sed -E 's/[[:space:]]+(-[[:space:]]+)*$//' | cut -c1-150 | sed -n "1,$1p"; }
perf report -q -i "$work/perf.data" --stdio --no-children --sort dso 2>/dev/null | first 12
echo
echo "Top $top symbols (self):"
perf report -q -i "$work/perf.data" --stdio --no-children --sort dso,symbol 2>/dev/null |
  first "$top"
