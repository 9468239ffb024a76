// Server-side apply in the Store: PATCH with application/apply-patch+yaml, as kube-apiserver's
// patch handler runs it (applyPatcher): decode the YAML configuration, merge it into the live
// object with the fieldmanager (apply.cc), then the update path (admission, validation); an
// absent object is created from the configuration.
#include "tests/kubesim/apply/managed_fields.h"
#include "tests/kubesim/server/server.h"
#include "tests/kubesim/store/store.h"
#include "tests/kubesim/store/store_support.h"

namespace ekco::kubesim {

using nlohmann::json;
using store_detail::str;

Reply Store::applyLocked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                         std::string_view body, std::string_view subresource) {
  auto docs = parseObjects(body);
  if (!docs || docs->size() != 1) {
    return statusReply(
        400, "BadRequest",
        "error decoding YAML: " + (docs ? std::string("the apply configuration must be one object")
                                        : docs.error().message()));
  }
  json config = std::move(docs->front());
  if (config.value("apiVersion", "") != r.apiVersion() || config.value("kind", "") != r.kind) {
    return statusReply(400, "BadRequest",
                       "the apply configuration's apiVersion and kind (" +
                           config.value("apiVersion", "") + ", " + config.value("kind", "") +
                           ") do not match the request's (" + r.apiVersion() + ", " + r.kind + ")");
  }
  if (!config.contains("metadata") || !config["metadata"].is_object()) {
    config["metadata"] = json::object();
  }
  json& meta = config["metadata"];
  if (meta.contains("managedFields")) {
    return statusReply(400, "BadRequest", "metadata.managedFields must be nil");
  }
  std::string body_name = str(config, {"metadata", "name"});
  if (!body_name.empty() && body_name != name) {
    return statusReply(400, "BadRequest",
                       "the name of the object (" + body_name +
                           ") does not match the name on the URL (" + name + ")");
  }
  meta["name"] = name;
  if (r.namespaced) {
    std::string body_ns = str(config, {"metadata", "namespace"});
    if (!body_ns.empty() && body_ns != ns) {
      return statusReply(400, "BadRequest",
                         "the namespace of the provided object does not match the namespace "
                         "sent on the request");
    }
    meta["namespace"] = ns;
  }
  const managed::Writer* writer = writer_;
  if (writer == nullptr) return statusReply(500, "InternalError", "apply without a field manager");
  managed::Writer w = *writer;
  w.now = nowText();
  const json* current = findLocked(r, ns, name);
  auto applied = managed::apply(current == nullptr ? json() : *current, config, w, w.force,
                                r.hasSubresource("status"));
  if (applied.error) return std::move(*applied.error);
  // The fieldmanager has recorded this write: the update/create path must not record it again.
  writer_ = nullptr;
  if (current == nullptr) {
    if (!subresource.empty()) return store_detail::notFound(r, name);
    return createLocked(r, ns, std::move(applied.object));
  }
  return updateLocked(r, ns, name, std::move(applied.object), subresource, false);
}

}  // namespace ekco::kubesim
