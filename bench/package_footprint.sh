#!/usr/bin/env bash
# The self-contained packages' cost (issue 35): package, installed and image sizes, and the idle
# agent's memory with the bundled libraries against the same code linked to the machine's own
# (Debian 12's) libraries, with kubectl (a Go client-go program) watching the same API beside
# them. Each agent leads a one-node ekco-kubesim cluster of its own; RSS and PSS are read from
# /proc/PID/smaps_rollup after SETTLE seconds idle, SAMPLES times a second apart (the median).
# PSS charges a shared page to each process mapping it, so libraries shared with the rest of the
# machine count less than bundled ones only ekco maps. Prints a Markdown table (BENCHMARKS.md)
# with the goal beside each figure: no more than 1 MiB more RSS than the machine-linked binary.
#
#   bench/package_footprint.sh                 # SETTLE=15 SAMPLES=5
#
# Needs root (the bundled agent runs chrooted in the .deb's files, as installed). Builds the
# packages in build-pkg/ (as scripts/package-check does); ekco-kubesim from build-test/ (KUBESIM
# to choose another).
set -euo pipefail
cd "$(dirname "$0")/.."
settle=${SETTLE:-15}
samples=${SAMPLES:-5}
build=${BUILD_DIR:-build-pkg}
kubesim=${KUBESIM:-build-test/tests/kubesim/ekco-kubesim}
[ "$(id -u)" = 0 ] || { echo "package_footprint: needs root (chroot, mount)" >&2; exit 1; }
[ -x "$kubesim" ] || { echo "package_footprint: no ekco-kubesim at $kubesim (KUBESIM=...)" >&2; exit 1; }

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEKCO_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target package >/dev/null 2>&1
deb=$(ls "$build"/ekco_*_*.deb) rpm=$(ls "$build"/ekco-*.rpm)
version=$(dpkg-deb -f "$deb" Version)
image=$build/ekco-$version.oci.tar
command -v umoci >/dev/null && packaging/build-image "$deb" "$image" >/dev/null

T=$(mktemp -d /var/tmp/ekco-footprint.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if mountpoint -q "$T/root/proc"; then umount "$T/root/proc" || umount -l "$T/root/proc"; fi
  rm -rf "$T"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cluster() {  # DIR: a one-node cluster of its own, its kubeconfig in DIR/kubeconfig
  mkdir -p "$1"
  cat >"$1/cluster.yaml" <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: kurl
---
apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels:
    node-role.kubernetes.io/control-plane: ""
status:
  conditions:
  - type: Ready
    status: "True"
EOF
  "$kubesim" --listen "127.0.0.1:$(free_port)" --kubeconfig-out "$1/kubeconfig" --load "$1/cluster.yaml" \
    >"$1/kubesim.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 80); do [ -s "$1/kubeconfig" ] && return 0; sleep 0.25; done
  echo "package_footprint: ekco-kubesim did not start" >&2; exit 1
}
kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/smaps_rollup"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
measure() {  # PID NAME -> "rss_kib pss_kib" (medians)
  local rss=() pss=() i
  for i in $(seq 1 "$samples"); do
    kill -0 "$1" 2>/dev/null || { echo "package_footprint: $2 exited" >&2; exit 1; }
    rss+=("$(kib "$1" Rss)"); pss+=("$(kib "$1" Pss)")
    sleep 1
  done
  echo "$(printf '%s\n' "${rss[@]}" | median) $(printf '%s\n' "${pss[@]}" | median)"
}

# The machine-linked binary: the same sources, libraries from /lib/x86_64-linux-gnu.
cluster "$T/a"
mkdir -p "$T/a/host"
"$build/ekco" agent --config packaging/config.yaml --host-root "$T/a/host" --kubeconfig "$T/a/kubeconfig" \
  --node-name node-1 --socket "$T/a/ekco.sock" >"$T/a/agent.log" 2>&1 &
a_pid=$!; pids+=("$a_pid")
# The packaged binary, as installed: chrooted in the .deb's files, its loader from /opt/ekco/lib.
cluster "$T/b"
dpkg-deb -x "$deb" "$T/root"
mkdir -p "$T/root/proc" "$T/root/etc/kubernetes" "$T/root/tmp"
cp "$T/b/kubeconfig" "$T/root/etc/kubernetes/kubelet.conf"
mount -t proc proc "$T/root/proc"
chroot "$T/root" /usr/bin/ekco agent --config /etc/ekco/config.yaml --node-name node-1 >"$T/b/agent.log" 2>&1 &
b_pid=$!; pids+=("$b_pid")
# The peer: kubectl watching the nodes of a's cluster.
kubectl --kubeconfig "$T/a/kubeconfig" get nodes --watch >/dev/null 2>&1 &
k_pid=$!; pids+=("$k_pid")
sleep "$settle"
grep -q 'became leader' "$T/a/agent.log" || { echo "package_footprint: the machine-linked agent does not lead" >&2; tail "$T/a/agent.log" >&2; exit 1; }
grep -q 'became leader' "$T/b/agent.log" || { echo "package_footprint: the packaged agent does not lead" >&2; tail "$T/b/agent.log" >&2; exit 1; }
read -r a_rss a_pss < <(measure "$a_pid" "the machine-linked agent")
read -r b_rss b_pss < <(measure "$b_pid" "the packaged agent")
read -r k_rss k_pss < <(measure "$k_pid" kubectl)
a_maps=$(grep -c '\.so' "/proc/$a_pid/maps"); b_maps=$(grep -c '\.so' "/proc/$b_pid/maps")

mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
kmib() { awk -v k="$1" 'BEGIN {printf "%.1f MiB", k / 1024}'; }
installed=$(du -sb --apparent-size "$T/root" --exclude=proc --exclude=tmp --exclude=etc/kubernetes | cut -f1)
libs=$(du -sb --apparent-size "$T/root/opt/ekco/lib" | cut -f1)
strip -o "$T/ekco.stripped" "$build/ekco"
delta=$((b_rss - a_rss))
verdict=$([ "$delta" -le 1024 ] && echo "yes" || echo "NO")
echo "package_footprint: ekco $version, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), idle ${settle} s," \
  "median of $samples samples, $(date -u +%F)"
echo
echo "| figure | machine-linked (\`build-pkg/ekco\`) | self-contained (\`/opt/ekco\`) | kubectl get --watch | goal |"
echo "|---|---:|---:|---:|---|"
echo "| .deb | – | $(mib "$(stat -c %s "$deb")") | – | – |"
echo "| .rpm | – | $(mib "$(stat -c %s "$rpm")") | – | – |"
[ -f "$image" ] && echo "| image (\`.oci.tar\`) | – | $(mib "$(stat -c %s "$image")") | – | – |"
echo "| installed | $(mib "$(stat -c %s "$T/ekco.stripped")") (the binary) | $(mib "$installed") ($(mib "$libs") in /opt/ekco/lib) | – | – |"
echo "| shared objects mapped | $a_maps mappings | $b_maps mappings | – | – |"
echo "| idle RSS | $(kmib "$a_rss") | $(kmib "$b_rss") | $(kmib "$k_rss") | ≤ +1 MiB: $verdict ($((delta)) KiB) |"
echo "| idle PSS | $(kmib "$a_pss") | $(kmib "$b_pss") | $(kmib "$k_pss") | – (shared pages no longer shared) |"
