// Decoding a request's object as kube-apiserver's handler decodes it into the Go type, before
// admission (store.h: decodeFieldsLocked): unknown fields dropped (and, by ?fieldValidation,
// warned about or refused), times written back in UTC.
#include <algorithm>
#include <string>
#include <vector>

#include "tests/kubesim/apply/managed_fields.h"
#include "tests/kubesim/features/protobuf.h"
#include "tests/kubesim/store/store.h"
#include "tests/kubesim/validation/schema.h"

namespace ekco::kubesim {

using nlohmann::json;

std::optional<Reply> Store::decodeFieldsLocked(const ResourceInfo& r, json& object,
                                               const json& old) {
  if (request_ == nullptr) return std::nullopt;
  // A custom resource's structural schema (its version's openAPIV3Schema), copied: the lambda
  // below prunes against it.
  json crd_schema = nullptr;
  if (r.crd_version) {
    crd_schema =
        r.crd_version->value("schema", json::object()).value("openAPIV3Schema", json::object());
  }
  auto unknownOf = [&](json& o) -> std::vector<std::string> {
    if (r.crd_version) {
      std::vector<std::string> out;
      schema::prune(crd_schema, o, &out);
      return out;
    }
    return protobuf::dropUnknownFields(o).value_or(std::vector<std::string>());
  };
  std::vector<std::string> unknown = unknownOf(object);
  if (!old.is_null() && !unknown.empty()) {
    json before = old;
    const std::vector<std::string> had = unknownOf(before);
    std::erase_if(unknown, [&had](const std::string& u) {
      return std::find(had.begin(), had.end(), u) != had.end();
    });
  }
  const std::string& directive = request_->field_validation;
  if (unknown.empty() || directive == "Ignore") return std::nullopt;
  std::vector<std::string> texts;
  for (const std::string& u : unknown) texts.push_back("unknown field \"" + u + "\"");
  if (directive == "Strict") {
    std::string joined;
    for (const std::string& t : texts) joined += (joined.empty() ? "" : ", ") + t;
    return statusReply(400, "BadRequest",
                       r.kind + " in version \"" + r.version + "\" cannot be handled as a " +
                           r.kind + ": strict decoding error: " + joined);
  }
  warnings_.insert(warnings_.end(), texts.begin(), texts.end());
  return std::nullopt;
}

}  // namespace ekco::kubesim
