#!/usr/bin/env bash
# ekco-bench-sync reads a relative --kubeconfig from the current directory, as kubectl and the
# ekco commands do (issue 25). Usage: relative_kubeconfig_test.sh EKCO_KUBESIM EKCO_BENCH_SYNC
set -euo pipefail
kubesim=$1 bench=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/ekco-bench-rel-XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$dir/sub"
"$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$dir/sub/kubeconfig" \
  --generate-nodes 3 --generate-pods 6 2>"$dir/kubesim.log" &
pid=$!
for _ in $(seq 1 200); do [ -s "$dir/sub/kubeconfig" ] && break; sleep 0.05; done
[ -s "$dir/sub/kubeconfig" ] || { cat "$dir/kubesim.log" >&2; exit 1; }
cd "$dir"
out=$("$bench" --kubeconfig sub/kubeconfig --updates 3)
echo "$out"
grep -q '^| metric | value |' <<<"$out"
