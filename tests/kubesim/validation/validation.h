// kube-apiserver's validation as kubesim models it: field errors rendered into the 422 Invalid
// Status (reason Invalid, details.causes, "Pod \"x\" is invalid: metadata.name: Invalid value:
// ..."), object metadata rules (names per resource, labels, annotations, finalizers) and the
// kind-specific rules the tests rely on (pod spec immutability, immutable ConfigMaps/Secrets,
// Secret types). Pure functions over JSON; the Store calls them (validation_test.cc).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/kubesim/store/store.h"

namespace ekco::kubesim {

// One field.Error: its type ("FieldValueInvalid", "FieldValueRequired", "FieldValueForbidden",
// "FieldValueNotSupported", "FieldValueTooLong", "FieldValueDuplicate"), the field path
// ("metadata.name", "data[tls.crt]"), the bad value already rendered as Go's ErrorBody renders
// it ("\"Bad_Name\"", "[]string{\"x\"}", "5") and the detail.
struct FieldError {
  std::string type{};
  std::string field{};
  std::string value{};
  std::string detail{};

  // "Invalid value: \"x\": detail", "Required value", "Forbidden: detail", ...
  std::string body() const;
};

FieldError invalidValue(std::string field, const nlohmann::json& value, std::string detail);
FieldError requiredValue(std::string field, std::string detail = "");
FieldError forbidden(std::string field, std::string detail);
FieldError notSupported(std::string field, const nlohmann::json& value,
                        const std::vector<std::string>& supported);
FieldError tooLong(std::string field, long max_bytes);

// A Go %q string ("\"a\\\"b\"").
std::string goQuote(const std::string& s);

// The 422 Invalid Status of errors.NewInvalid(GroupKind{group, kind}, name, errs).
Reply invalidReply(const std::string& group, const std::string& kind, const std::string& name,
                   const std::vector<FieldError>& errors);

// Messages of k8s.io/apimachinery/pkg/util/validation (IsDNS1123Label, IsDNS1123Subdomain,
// IsDNS1035Label, IsQualifiedName, IsValidLabelValue, IsConfigMapKey); empty when valid.
std::vector<std::string> dns1123Label(const std::string& value);
std::vector<std::string> dns1123Subdomain(const std::string& value);
std::vector<std::string> dns1035Label(const std::string& value);
std::vector<std::string> qualifiedName(const std::string& value);
std::vector<std::string> labelValue(const std::string& value);
std::vector<std::string> configMapKey(const std::string& value);

// The name rule of a resource's registry strategy: "label" (namespaces), "1035" (services),
// "segment" (RBAC objects: any path segment) or "subdomain" (the rest, custom resources too).
std::string nameRule(const ResourceInfo& r);

// Validation on create (after defaulting and PrepareForCreate): metadata, then the kind's rules.
std::vector<FieldError> validateCreate(const ResourceInfo& r, const nlohmann::json& object);
// Validation on update of the main resource: ValidateObjectMetaUpdate (no new finalizers on an
// object being deleted, labels, annotations) and the kind's update rules.
std::vector<FieldError> validateUpdate(const ResourceInfo& r, const nlohmann::json& next,
                                       const nlohmann::json& old);

// The dryRun query or DeleteOptions values: empty or all "All", else the 422 Invalid of
// CreateOptions/UpdateOptions/PatchOptions/DeleteOptions (kind "CreateOptions", ...).
std::optional<Reply> invalidDryRun(const std::string& options_kind,
                                   const std::vector<std::string>& values);

}  // namespace ekco::kubesim
