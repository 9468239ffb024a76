#include "tests/kubesim/apply/patch.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

namespace ekco::kubesim {
namespace {

using nlohmann::json;

// Field name → merge key, from the Kubernetes API types' patchMergeKey tags. Field names are
// matched without their parent, which is exact for the fields listed here; `ports` is the one
// name with two keys (mergeKeyFor).
const std::map<std::string, std::string>& mergeKeys() {
  static const std::map<std::string, std::string> keys = {
      {"containers", "name"},
      {"initContainers", "name"},
      {"ephemeralContainers", "name"},
      {"volumes", "name"},
      {"env", "name"},
      {"volumeMounts", "mountPath"},
      {"volumeDevices", "devicePath"},
      {"conditions", "type"},
      {"addresses", "type"},
      {"ownerReferences", "uid"},
      {"imagePullSecrets", "name"},
      {"hostAliases", "ip"},
      {"containerStatuses", "name"},
      {"initContainerStatuses", "name"},
      {"topologySpreadConstraints", "topologyKey"},
      {"resourceClaims", "name"},
      {"schedulingGates", "name"},
      {"webhooks", "name"},  // Mutating/ValidatingWebhookConfiguration
  };
  return keys;
}

// The merge key of list `field` inside a map that is itself `parent` (a field name, or the list
// the map is an element of): a container's ports by containerPort, a ServiceSpec's by port.
std::optional<std::string> mergeKeyFor(const std::string& field, const std::string& parent) {
  if (field == "ports") {
    if (parent == "containers" || parent == "initContainers" || parent == "ephemeralContainers") {
      return "containerPort";
    }
    if (parent == "spec") return "port";
    return std::nullopt;  // EndpointSubset and others: replaced
  }
  auto key = mergeKeys().find(field);
  if (key == mergeKeys().end()) return std::nullopt;
  return key->second;
}

// Lists of scalars merged as sets (patchStrategy:"merge" without a key).
bool isSetList(const std::string& field) { return field == "finalizers"; }

json mergeList(const json& target, const json& patch, const std::string& key,
               const std::string& field);

json mergeValue(const json& target, const json& patch, const std::string& field,
                const std::string& parent);

// `self`: the field this map is the value of, or the list it is an element of.
json mergeMap(const json& target, const json& patch, const std::string& self = "") {
  if (patch.contains("$patch") && patch["$patch"] == "replace") {
    json out = patch;
    out.erase("$patch");
    return out;
  }
  json out = target.is_object() ? target : json::object();
  if (auto retain = patch.find("$retainKeys"); retain != patch.end()) {
    // $retainKeys (patchStrategy "retainKeys", e.g. a Deployment's strategy, a volume's source):
    // the target keeps only the listed fields before the patch merges (strategicpatch's
    // mergeMap clears the others). The list was checked by retainKeysError.
    for (auto it = out.begin(); it != out.end();) {
      if (std::find(retain->begin(), retain->end(), it.key()) == retain->end()) {
        it = out.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& field = it.key();
    if (field.rfind("$setElementOrder/", 0) == 0 || field == "$retainKeys" || field == "$patch") {
      continue;
    }
    if (field.rfind("$deleteFromPrimitiveList/", 0) == 0) {
      std::string name = field.substr(std::string("$deleteFromPrimitiveList/").size());
      if (out.contains(name) && out[name].is_array() && it.value().is_array()) {
        json kept = json::array();
        for (const json& v : out[name]) {
          if (std::find(it.value().begin(), it.value().end(), v) == it.value().end()) {
            kept.push_back(v);
          }
        }
        out[name] = kept;
      }
      continue;
    }
    if (it.value().is_null()) {
      out.erase(field);
      continue;
    }
    auto cur = out.find(field);
    out[field] = mergeValue(cur == out.end() ? json() : *cur, it.value(), field, self);
  }
  return out;
}

json mergeValue(const json& target, const json& patch, const std::string& field,
                const std::string& parent) {
  if (patch.is_object()) return mergeMap(target, patch, field);
  if (patch.is_array() && target.is_array()) {
    // A merge key is a field of the elements: a list of strings under a keyed name (an
    // EndpointSlice endpoint's addresses, not a Node's) is replaced, as its schema says.
    auto objects = [](const json& list) {
      return std::any_of(list.begin(), list.end(), [](const json& e) { return e.is_object(); });
    };
    auto key = mergeKeyFor(field, parent);
    if (key && (objects(patch) || objects(target))) return mergeList(target, patch, *key, field);
    if (isSetList(field)) {
      json out = target;
      for (const json& v : patch) {
        if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
      }
      return out;
    }
  }
  if (patch.is_array()) {
    // Replaced lists may still carry directives in their elements; strip `$patch: delete`.
    json out = json::array();
    for (const json& v : patch) {
      if (v.is_object() && v.contains("$patch")) continue;
      out.push_back(v);
    }
    return out;
  }
  return patch;
}

json mergeList(const json& target, const json& patch, const std::string& key,
               const std::string& field) {
  json out = target;
  for (const json& elem : patch) {
    if (!elem.is_object() || !elem.contains(key)) {
      out.push_back(elem);
      continue;
    }
    auto found = std::find_if(out.begin(), out.end(), [&](const json& e) {
      return e.is_object() && e.contains(key) && e[key] == elem[key];
    });
    bool del = elem.contains("$patch") && elem["$patch"] == "delete";
    if (del) {
      if (found != out.end()) out.erase(found);
      continue;
    }
    if (found != out.end()) {
      *found = mergeMap(*found, elem, field);
    } else {
      out.push_back(mergeMap(json::object(), elem, field));
    }
  }
  return out;
}

// apimachinery's checks of every $retainKeys in the patch: a list of strings
// (ErrBadPatchFormatForRetainKeys) naming every field the patch sets beside it
// (validatePatchWithRetainKeys).
std::optional<std::string> retainKeysError(const json& patch) {
  if (patch.is_array()) {
    for (const json& v : patch) {
      if (auto bad = retainKeysError(v)) return bad;
    }
    return std::nullopt;
  }
  if (!patch.is_object()) return std::nullopt;
  if (auto retain = patch.find("$retainKeys"); retain != patch.end()) {
    if (!retain->is_array()) return "invalid patch format of retainKeys";
    for (const json& k : *retain) {
      if (!k.is_string()) return "invalid patch format of retainKeys";
    }
    for (auto it = patch.begin(); it != patch.end(); ++it) {
      // A field the patch removes (null) need not be listed, as validatePatchWithRetainKeys.
      if (it.key().rfind('$', 0) == 0 || it.value().is_null()) continue;
      if (std::find(retain->begin(), retain->end(), it.key()) == retain->end()) {
        return "The patch has key " + it.key() + " which is not in $retainKeys";
      }
    }
  }
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (auto bad = retainKeysError(it.value())) return bad;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> strategicMergeKey(const std::string& field, const std::string& parent) {
  return mergeKeyFor(field, parent);
}

std::optional<PatchStrategy> patchStrategyOf(std::string_view message, const std::string& field) {
  // mergeKeyFor's parent, named by the type: the lists of a container, or of a ServiceSpec.
  std::string parent;
  if (message.ends_with(".Container") || message.ends_with(".EphemeralContainer")) {
    parent = "containers";
  } else if (message.ends_with(".ServiceSpec")) {
    parent = "spec";
  }
  const bool retain = (field == "volumes" && message.ends_with(".PodSpec")) ||
                      (field == "strategy" && message.ends_with(".DeploymentSpec"));
  if (auto key = mergeKeyFor(field, parent)) {
    return PatchStrategy{.strategy = retain ? "merge,retainKeys" : "merge", .merge_key = *key};
  }
  if (isSetList(field)) return PatchStrategy{.strategy = "merge"};
  if (retain) return PatchStrategy{.strategy = "retainKeys"};
  return std::nullopt;
}

base::Result<json> strategicMergePatch(const json& target, const json& patch) {
  if (!patch.is_object()) {
    return base::Error("strategic merge patch must be a JSON object",
                       base::ErrorCode::kInvalidArgument);
  }
  if (auto bad = retainKeysError(patch)) {
    return base::Error(*bad, base::ErrorCode::kInvalidArgument);
  }
  return mergeMap(target, patch);
}

}  // namespace ekco::kubesim
