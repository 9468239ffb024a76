// Strategic merge patch, for the subset of Kubernetes' patch strategies that kubectl and ekco
// send: maps merge recursively, null deletes a key, lists with a known merge key (containers,
// volumes, env, ports — a ServiceSpec's by port, a container's by containerPort —, conditions,
// addresses, ownerReferences, ...) merge element by element,
// metadata.finalizers merges as a set, every other list (taints, tolerations, args, ...) is
// replaced. Directives: `$patch: delete` on a list element, `$patch: replace` on a map,
// `$deleteFromPrimitiveList/<key>`, `$retainKeys` (the map keeps only the listed fields before
// merging; a field the patch sets must be listed); `$setElementOrder/<key>` is ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ekco::kubesim {

// The strategic merge key of list `field` inside a map that is itself `parent` (a field name, or
// the list the map is an element of); nullopt for lists without one. Server-side apply's
// managed fields use the same table (managed_fields.h).
std::optional<std::string> strategicMergeKey(const std::string& field, const std::string& parent);

// How the Go type `message` (a protobuf name: "k8s.io.api.core.v1.PodSpec") patches its list or
// struct `field`, as the OpenAPI documents tell clients (x-kubernetes-patch-strategy and
// -merge-key), from the same table the server merges with: strategy "merge" with the merge key,
// "merge" alone for a set (finalizers), "retainKeys" (a Deployment's strategy), "merge,retainKeys"
// (a pod's volumes). nullopt: replaced.
struct PatchStrategy {
  std::string strategy{};
  std::string merge_key{};
};
std::optional<PatchStrategy> patchStrategyOf(std::string_view message, const std::string& field);

[[nodiscard]] base::Result<nlohmann::json> strategicMergePatch(const nlohmann::json& target,
                                                               const nlohmann::json& patch);

}  // namespace ekco::kubesim
