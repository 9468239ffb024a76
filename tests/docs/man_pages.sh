#!/bin/sh
# The generated man pages, ekco(8) and ekco-config(5), render without a warning (issue 38:
# `MANWIDTH=80 man --warnings -l`).
# Usage: tests/docs/man_pages.sh EKCO
set -eu
ekco=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$ekco" config reference --format man > "$dir/ekco-config.5"
"$ekco" manual --format man > "$dir/ekco.8"
for page in ekco-config.5 ekco.8; do
  MANWIDTH=80 man --warnings -l "$dir/$page" > "$dir/$page.out" 2> "$dir/warnings"
  if [ -s "$dir/warnings" ]; then
    echo "$page renders with warnings:" >&2
    cat "$dir/warnings" >&2
    exit 1
  fi
done
grep -q '^EKCO-CONFIG(5)' "$dir/ekco-config.5.out" || { echo "ekco-config(5): no EKCO-CONFIG(5) header" >&2; exit 1; }
grep -q '^ *node_unreachable_toleration$' "$dir/ekco-config.5.out" || {
  echo "ekco-config(5): no entry for node_unreachable_toleration" >&2; exit 1; }
grep -q '^EKCO(8)' "$dir/ekco.8.out" || { echo "ekco(8): no EKCO(8) header" >&2; exit 1; }
for section in 'GLOBAL OPTIONS' COMMANDS 'EXIT STATUS' ENVIRONMENT FILES; do
  grep -q "^$section\$" "$dir/ekco.8.out" || { echo "ekco(8): no $section section" >&2; exit 1; }
done
grep -q '^   ekco certs renew \[OPTIONS\] \[NAME...\]$' "$dir/ekco.8.out" || {
  echo "ekco(8): no entry for ekco certs renew" >&2; exit 1; }
echo "ekco(8), ekco-config(5): render without warnings"
