#!/usr/bin/env bash
# Rules of the product's source that a compiler cannot check, each one a bug class found once.
# Usage: tests/source_rules.sh SOURCE_DIR. Prints every violation; exits 1 when there is any.
set -euo pipefail
cd "$1"
dirs=(agent base kube hostfs units haproxy etcd pki rook s3)
failed=0

# 1. JSON is serialised only through kube::jsonDump (kube/json_fields.h): nlohmann's dump()
#    throws on invalid UTF-8, and text from outside (a host job's output, a path) is not UTF-8
#    (issue 34: a host job's output aborted every agent).
if hits=$(grep -rn --include='*.cc' --include='*.h' '\.dump(' "${dirs[@]}" |
          grep -v '^kube/json_fields.h:'); then
  echo "source rule: serialise JSON with kube::jsonDump, not dump():" >&2
  echo "$hits" >&2
  failed=1
fi

# 2. Threads start through base::startThread (base/thread.h): an exception escaping a bare
#    std::thread calls std::terminate, aborting the agent with no log line.
if hits=$(grep -rnE --include='*.cc' --include='*.h' 'std::j?thread( [a-z_]+)?\(\[' \
          "${dirs[@]}" | grep -v '^base/thread.cc:'); then
  echo "source rule: start threads with base::startThread, not std::thread:" >&2
  echo "$hits" >&2
  failed=1
fi
exit "$failed"
