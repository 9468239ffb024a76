#!/usr/bin/env bash
# The bash completion script, as `ekco completion bash` prints it, completes in a real bash
# (issue 38: `complete -p ekco` and a few `compgen` calls).
# Usage: tests/docs/completion.sh EKCO
set -euo pipefail
ekco=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$ekco" completion bash > "$dir/ekco"
bash -n "$dir/ekco"
mkdir -p "$dir/files/subdir"
touch "$dir/files/config.yaml" "$dir/files/kubeconfig" "$dir/files/my file.yaml"

# Runs the completion as bash does for a command line whose last word is being completed
# (COMP_WORDS, COMP_CWORD, COMP_LINE, COMP_POINT; the command, the word and the one before as
# arguments), under `set -u`; prints the candidates, one per line, sorted.
cat > "$dir/run.sh" <<'SCRIPT'
set -u
source "$1"; shift
COMP_WORDS=("$@")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
_ekco "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort
SCRIPT
complete() { (cd "$dir/files" && bash "$dir/run.sh" "$dir/ekco" "$@" 2> "$dir/stderr"); }
fail=0
want() {  # want "CANDIDATES" WORDS...
  local expected=$1; shift
  local got; got=$(complete "$@" | paste -sd'|')
  if [ "$got" != "$expected" ] || [ -s "$dir/stderr" ]; then
    echo "completion.sh: '$*': got '$got', want '$expected'; stderr: $(cat "$dir/stderr")" >&2
    fail=1
  fi
}

registered=$(bash -c "source '$dir/ekco'; complete -p ekco; complete -p ekco-purge-node")
[ "$registered" = $'complete -F _ekco ekco\ncomplete -F _ekco ekco-purge-node' ] || {
  echo "completion.sh: complete -p: got '$registered'" >&2; fail=1; }

# Candidates are joined with |.
want "certs|change-load-balancer|completion|config" ekco c
want "check|renew" ekco certs ""
want "apiserver|apiserver-etcd-client|apiserver-kubelet-client" ekco certs renew apis
want "admin.conf" ekco --log-level debug certs renew --force adm
want "--dry-run" ekco certs renew --dry
want "man|markdown" ekco config reference --format ""
want "markdown" ekco config reference --format = mar
want "debug" ekco status --log-level d
want "healthz|readyz" ekco status --probe ""
want "" ekco status ""                                # no positional: nothing
want "--purge-dead-nodes" ekco agent --purge-dead     # every key as a flag
want "config.yaml" ekco agent --config conf
want "subdir" ekco agent --host-root sub
want "my file.yaml" ekco config check my              # one candidate, with its space
want "" ekco config check config.yaml ""              # FILE given already
want "kubeconfig" ekco config check kube
want "off|on|status" ekco maintenance ""
want "--node-name" ekco-purge-node --node-n
want "kubeconfig" ekco job run --name x -- kube       # after --: the program's own words
want "" ekco job run -- /bin/ls --nam
[ "$fail" = 0 ] && echo "completion.sh: bash completes ekco's commands, options and values"
exit "$fail"
