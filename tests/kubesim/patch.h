// Strategic merge patch, for the subset of Kubernetes' patch strategies that kubectl and ekco
// send: maps merge recursively, null deletes a key, lists with a known merge key (containers,
// volumes, env, ports — a ServiceSpec's by port, a container's by containerPort —, conditions,
// addresses, ownerReferences, ...) merge element by element,
// metadata.finalizers merges as a set, every other list (taints, tolerations, args, ...) is
// replaced. Directives: `$patch: delete` on a list element, `$patch: replace` on a map,
// `$deleteFromPrimitiveList/<key>`; `$setElementOrder/<key>` and `$retainKeys` are ignored.
#pragma once

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace ekco::kubesim {

[[nodiscard]] base::Result<nlohmann::json> strategicMergePatch(const nlohmann::json& target,
                                                               const nlohmann::json& patch);

}  // namespace ekco::kubesim
