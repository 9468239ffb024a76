#!/usr/bin/env bash
# Rules of the product's source that a compiler cannot check, each one a bug class found once.
# Usage: tests/source_rules.sh SOURCE_DIR. Prints every violation; exits 1 when there is any.
set -euo pipefail
cd "$1"
dirs=(agent base kube hostfs units haproxy etcd pki rook s3)
failed=0

# 1. JSON is serialised only through kube::jsonDump (kube/decode/json_fields.h): nlohmann's dump()
#    throws on invalid UTF-8, and text from outside (a host job's output, a path) is not UTF-8
#    (issue 34: a host job's output aborted every agent).
if hits=$(grep -rn --include='*.cc' --include='*.h' '\.dump(' "${dirs[@]}" |
          grep -v '^kube/decode/json_fields.h:'); then
  echo "source rule: serialise JSON with kube::jsonDump, not dump():" >&2
  echo "$hits" >&2
  failed=1
fi

# 2. Threads start through base::startThread (base/os/thread.h): an exception escaping a bare
#    std::thread calls std::terminate, aborting the agent with no log line.
if hits=$(grep -rnE --include='*.cc' --include='*.h' 'std::j?thread( [a-z_]+)?\(\[' \
          "${dirs[@]}" | grep -v '^base/os/thread.cc:'); then
  echo "source rule: start threads with base::startThread, not std::thread:" >&2
  echo "$hits" >&2
  failed=1
fi
# 3. Layers (docs/architecture.md): an include points down, never up or sideways. The libraries:
#    base <- hostfs <- kube <- etcd, rook; base <- units, haproxy, pki, s3; all <- agent. Inside
#    kube: transport <- decode <- kube <- watch; inside base: base <- log <- os. In
#    agent/, lowest first: config, edge, serve, controller, policy, maintenance, the features
#    (each its own folder: one feature never includes another's files), the table, runtime,
#    cli, main.cc. Any include crossing that direction fails here. (The link-level twin, over the
#    rooms' libraries and what agent/CMakeLists.txt says each uses: scripts/layer-check.)
if ! python3 - "$@" <<'LAYERS'
import os, re, sys
libs = {'base': set(), 'hostfs': {'base'}, 'kube': {'base', 'hostfs'},
        'units': {'base'}, 'haproxy': {'base'}, 'pki': {'base'}, 's3': {'base'},
        'etcd': {'base', 'hostfs', 'kube'}, 'rook': {'base', 'hostfs', 'kube'}}
order = ['config', 'edge', 'serve', 'controller', 'policy', 'maintenance', 'features',
         'table', 'runtime', 'cli', 'main']
known = set()  # file -> included file: an arrow allowed to cross (none today)
# A library's own rooms, lowest first: an include points to its own room or a lower one.
sub_order = {'kube': ['kube/transport', 'kube/decode', 'kube', 'kube/watch'],
             'base': ['base', 'base/log', 'base/os']}
def room(path):
    parts = path.split('/')
    if parts[0] != 'agent':
        return parts[0], None
    if len(parts) == 2:
        return 'main', None
    if parts[1] == 'features':
        return ('features', parts[2]) if len(parts) > 3 else ('table', None)
    return parts[1], None
bad = []
for top in list(libs) + ['agent']:
    for d, _, files in os.walk(top):
        for f in files:
            if not f.endswith(('.h', '.cc')):
                continue
            path = os.path.join(d, f)
            for n, line in enumerate(open(path, encoding='utf-8'), 1):
                m = re.match(r'#include "([a-z0-9_]+)/([^"]+)"', line)
                if not m or (path, m.group(1) + '/' + m.group(2)) in known:
                    continue
                target = m.group(1) + '/' + m.group(2)
                (a, fa), (b, fb) = room(path), room(target)
                if top in libs:
                    ok = b == top or b in libs[top]
                    if ok and b == top and top in sub_order:
                        order_of = sub_order[top]
                        ra, rb = os.path.dirname(path), os.path.dirname(target)
                        ok = order_of.index(rb) <= order_of.index(ra)
                elif b != 'agent' and not target.startswith('agent/'):
                    ok = b in libs
                else:
                    ok = (a == b and fa == fb) or (a == 'table' and b == 'features') or (
                        order.index(b) < order.index(a) and b != 'features' or
                        order.index(b) < order.index(a) and a in ('table', 'cli', 'main'))
                if not ok:
                    bad.append(f'{path}:{n}: {target}')
for b in bad:
    print('  ' + b, file=sys.stderr)
sys.exit(1 if bad else 0)
LAYERS
then
  echo "source rule: an include crosses the layers (docs/architecture.md), above" >&2
  failed=1
fi
exit "$failed"
