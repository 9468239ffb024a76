#!/usr/bin/env bash
# deploy-monitoring/alerts.yaml checked by Prometheus's own tool: the PrometheusRule's spec is a
# valid rule file (`promtool check rules`), its alerts fire exactly when they should
# (`promtool test rules` with tests/deploy/alerts_test.yaml), and every metric the rules use is
# one the agent exports.
set -euo pipefail
source_dir=$1
command -v promtool >/dev/null || { echo "alerts_test: promtool missing (./scripts/setup installs prometheus)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$source_dir/deploy-monitoring/alerts.yaml" "$work/ekco-rules.yaml" <<'PY'
import sys, yaml
rule = yaml.safe_load(open(sys.argv[1]))
assert rule["kind"] == "PrometheusRule", rule["kind"]
yaml.safe_dump(rule["spec"], open(sys.argv[2], "w"))
PY
cp "$source_dir/tests/deploy/alerts_test.yaml" "$work/"
promtool check rules "$work/ekco-rules.yaml"
(cd "$work" && promtool test rules alerts_test.yaml)
for metric in $(grep -o 'ekco_[a-z_]*' "$work/ekco-rules.yaml" | sort -u); do
  grep -rq "\"$metric\"" "$source_dir/agent" ||
    { echo "alerts_test: $metric is used by the rules but no agent source exports it" >&2; exit 1; }
done
echo "alerts_test: ok"
