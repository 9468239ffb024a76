// Structural OpenAPI v3 schemas of CustomResourceDefinitions (spec.versions[].schema
// .openAPIV3Schema), applied to custom resources as kube-apiserver's apiextensions server does on
// every write: unknown fields pruned, nulls of non-nullable fields dropped, defaults applied, then
// validation into field errors that become a 422 Invalid Status.
//
// Validated: type (object, array, string, integer, number, boolean; x-kubernetes-int-or-string),
// nullable, required, enum, minimum/maximum (and exclusive), minLength/maxLength, pattern
// (ECMAScript regular expressions, as std::regex reads them), minItems/maxItems,
// properties/additionalProperties/items, x-kubernetes-preserve-unknown-fields. Not validated:
// CEL rules (x-kubernetes-validations), formats, list-type/map-type uniqueness, embedded resources.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ekco::kubesim::schema {

// One k8s.io/apimachinery field.Error.
struct FieldError {
  std::string reason{};  // the StatusCause type: "FieldValueRequired", "FieldValueInvalid", ...
  std::string field{};   // "spec.replicas"
  std::string body{};    // field.Error.ErrorBody(): `Invalid value: "x": spec.x in body ...`
};

// Removes the fields the schema does not know (unless x-kubernetes-preserve-unknown-fields or
// additionalProperties), and nulls where the schema is not nullable. At the root, apiVersion,
// kind and metadata are always kept. `unknown`, when given, receives the paths of the unknown
// fields removed ("spec.colour", "spec.items[0].x"), as the strict decoder names them.
void prune(const nlohmann::json& schema, nlohmann::json& object,
           std::vector<std::string>* unknown = nullptr);

// Sets `default` values of absent properties (after pruning, as the API server).
void applyDefaults(const nlohmann::json& schema, nlohmann::json& object);

// Every violation of the schema, in field order. The root's metadata is not validated here.
std::vector<FieldError> validate(const nlohmann::json& schema, const nlohmann::json& object);

// The message of field.ErrorList.ToAggregate(): one error's text, or "[e1, e2, ...]".
std::string aggregate(const std::vector<FieldError>& errors);

}  // namespace ekco::kubesim::schema
