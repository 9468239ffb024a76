#!/bin/sh
# The generated man pages render without a warning (issue 38: `MANWIDTH=80 man --warnings -l`).
# Usage: tests/docs/man_pages.sh EKCO
set -eu
ekco=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$ekco" config reference --format man > "$dir/ekco-config.5"
MANWIDTH=80 man --warnings -l "$dir/ekco-config.5" > "$dir/out" 2> "$dir/warnings"
if [ -s "$dir/warnings" ]; then
  echo "ekco-config(5) renders with warnings:" >&2
  cat "$dir/warnings" >&2
  exit 1
fi
grep -q '^EKCO-CONFIG(5)' "$dir/out" || { echo "ekco-config(5): no EKCO-CONFIG(5) header" >&2; exit 1; }
grep -q '^ *node_unreachable_toleration$' "$dir/out" || {
  echo "ekco-config(5): no entry for node_unreachable_toleration" >&2; exit 1; }
echo "ekco-config(5): renders without warnings"
